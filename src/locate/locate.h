/*-------------------------------------------------------------------------
 *
 * locate.h
 *	  Which leaves may hold a key: the one answer the insert probe, lookups,
 *	  the ON CONFLICT check and modify-by-key share.  Why a leaf ruled out
 *	  cannot hold the key: src/README, "Locating a key".
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_LOCATE_H
#define GUNIQUE_LOCATE_H

#include "locate/filter.h"
#include "locate/keymap.h"
#include "locate/summary.h"

/*
 * A key as locating reads it, made once per row from its datums: its images
 * (keymap.c) and the bits it sets in a filter's block, worked out on the
 * first filter read.
 */
typedef struct GuniqueLocateKey
{
	GuniqueKeyImage image;
	GuniqueFilterKey fkey;
} GuniqueLocateKey;

/* Flags of gunique_locator_make. */
#define LOCATE_KEEP_COPIES	0x01	/* copies of the leaves' summaries serve
									 * while the group's count of changes
									 * stays (src/README, I5) */
#define LOCATE_BY_RANGE		0x02	/* with kept copies: a key the group's
									 * filter cannot tell is looked for in
									 * the leaves whose range may hold it,
									 * found by a binary search */

/*
 * The leaves one caller locates keys among (a group's leaves for a probe,
 * a table's leaf partitions for a lookup), numbered from 0: each with its
 * summary, listed by the tag and subtag of its table in the group's filter
 * (summary.c), and the group's entry, whose filter is read first.
 */
typedef struct GuniqueLocator
{
	int			n;
	int			flags;
	GuniqueSummary *group;		/* the group's entry, or NULL: its filter is
								 * not used */

	/*
	 * Each leaf's summary, or NULL: it may hold any key.  Set by the caller
	 * before the leaf is asked about (a probe once it has locked the leaf).
	 */
	GuniqueSummary **summaries;

	/* The leaves by tag, each with its subtag. */
	uint64		present;		/* bit t: some leaf has tag t */
	int			first[GUNIQUE_FILTER_TAGS]; /* a leaf of tag t, or -1 */
	int		   *next;			/* the next leaf of the same tag, or -1 */
	uint8	   *sub;			/* each leaf's subtag */

	/* Copies of the leaves' summaries, as last read under a key lock. */
	GuniqueSummaryCopy *copies;
	bool	   *copied;			/* kept: copies[i] was read at "changes" */
	uint64		changes;
	bool		ordered;		/* "order" has been sorted once */
	bool		sorted;			/* "order" and "reach" hold for the copies */
	int		   *order;			/* the leaves by the low end of their range */
	uint64	   *reach;			/* reach[j]: the highest high end of the
								 * ranges of order[0 .. j] */

	int		   *wanted;			/* room for every leaf: the caller's
								 * scratch for the leaves asked about */
} GuniqueLocator;

/* How far the group's filter lets a key in (gunique_locate_group). */
typedef enum GuniqueLocateGroup
{
	LOCATE_GROUP_OUT,			/* no leaf of the group can hold the key */
	LOCATE_GROUP_TAGS,			/* only the leaves of these tags and
								 * subtags */
	LOCATE_GROUP_ANY			/* it cannot tell: no filter used or there,
								 * not tagged, or the key has no hash */
} GuniqueLocateGroup;

/* What ruled leaves out, for the callers' counters. */
typedef struct GuniqueLocateCounts
{
	GuniqueLocateGroup group;	/* what the group's filter said */
	int			range;			/* leaves ruled out by their key range */
	int			filter;			/* by their filter, or the group's */
} GuniqueLocateCounts;

extern void gunique_locate_key(GuniqueLocateKey *key, GuniqueKeyMap *map,
							   Datum *values, bool *isnull);
extern void gunique_locate_prefetch(GuniqueSummary *summary,
									GuniqueLocateKey *key);
extern GuniqueLocator *gunique_locator_make(int n, const Oid *heapoids,
											GuniqueSummary *group,
											int flags);
extern GuniqueLocateGroup gunique_locate_group(GuniqueLocator *loc,
											   GuniqueLocateKey *key,
											   uint64 *tags, uint64 *subs);
extern int	gunique_locate_tagged(GuniqueLocator *loc, uint64 tags,
								  uint64 subs, int *out);
extern int	gunique_locate_leaves(GuniqueLocator *loc, GuniqueLocateKey *key,
								  const int *cand, int ncand, int self,
								  int *out, GuniqueLocateCounts *counts);
extern int	gunique_locate(GuniqueLocator *loc, GuniqueLocateKey *key,
						   int self, int *out, GuniqueLocateCounts *counts);

#endif							/* GUNIQUE_LOCATE_H */

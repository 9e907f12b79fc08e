/*-------------------------------------------------------------------------
 *
 * leaftags.h
 *	  A group's leaves listed by their tag and subtag in its filter.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_LEAFTAGS_H
#define GUNIQUE_LEAFTAGS_H

#include "locate/filter.h"

/*
 * The leaves of a group (numbered from 0) listed by their tag in the
 * group's filter, each with its subtag (summary.c gives both), so that a
 * key the filter cannot rule out is looked for only in the leaves of the
 * tags and subtags it may have.
 */
typedef struct LeafTags
{
	uint64		present;		/* bit t: some leaf has tag t */
	int			first[GUNIQUE_FILTER_TAGS]; /* a leaf of tag t, or -1 */
	int		   *next;			/* the next leaf of the same tag, or -1 */
	uint8	   *sub;			/* each leaf's subtag */
} LeafTags;

extern void gunique_leaftags_init(LeafTags *lt, int n);
extern void gunique_leaftags_add(LeafTags *lt, int i, Oid heapoid);
extern uint64 gunique_leaftags_match(LeafTags *lt, uint64 ref,
									 GuniqueFilterKey *fkey, uint64 *subs);
extern int	gunique_leaftags_list(LeafTags *lt, uint64 tags, uint64 subs,
								  int *out);

#endif							/* GUNIQUE_LEAFTAGS_H */

/*-------------------------------------------------------------------------
 *
 * filter.h
 *	  Key filters: a bloom filter of each leaf index's keys, in shared memory.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_FILTER_H
#define GUNIQUE_FILTER_H

#include "utils/rel.h"

#include "summary.h"

/* A new filter being filled from a full read of a leaf; see filter.c. */
typedef struct GuniqueFilterFill
{
	GuniqueSummary *summary;	/* NULL when there is nothing to finish */
	uint64		next;			/* the new filter, until published */
	uint64		old;			/* the filter it replaces, or 0 */
	uint64		ref;			/* the filter being filled: "next", or the
								 * one there is when extending */
	uint64		nkeys;			/* keys read */
	bool		exclusive;		/* nobody else reads or writes the leaf */
	bool		extending;		/* adding to the filter there is */
	GuniqueSummary *group;		/* the leaf's group's entry, whose count of
								 * changes to bump on publishing, or NULL */
} GuniqueFilterFill;

/* Filters taken away from a summary, to be freed (gunique_filter_detach). */
typedef struct GuniqueFilterRefs
{
	uint64		current;
	uint64		next;
} GuniqueFilterRefs;

/*
 * A key's hash and the bits it sets in a filter's block, worked out once
 * (on the first filter checked) for a probe that may check many filters.
 */
#define GUNIQUE_FILTER_BLOCK_WORDS 8	/* 64 bytes */

typedef struct GuniqueFilterKey
{
	uint64		hash;
	bool		masked;			/* masks worked out */
	uint64		masks[GUNIQUE_FILTER_BLOCK_WORDS];
} GuniqueFilterKey;

/*
 * A group's filter pays only when a probe would otherwise check many
 * leaves: below this many, each leaf's range and filter are as cheap as
 * keeping the group's filter up to date.
 */
#define GUNIQUE_GROUP_FILTER_MIN_LEAVES 16

extern int	gunique_filter_memory;
extern bool gunique_key_filters;

extern void gunique_filter_shmem_request(void);
extern void gunique_filter_shmem_startup(void);

extern uint64 gunique_filter_hash(GuniqueSummary *summary, Datum value);
extern uint64 gunique_filter_ref(GuniqueSummary *summary);
extern void gunique_filter_key(GuniqueFilterKey *fkey, uint64 hash);
extern bool gunique_filter_ref_excludes(uint64 ref, GuniqueFilterKey *fkey);
extern void gunique_filter_ref_prefetch(uint64 ref, GuniqueFilterKey *fkey);
extern bool gunique_filter_missing(GuniqueSummary *summary);
extern bool gunique_filter_wanted(GuniqueSummary *summary, Relation index,
								  uint32 *threshold);
extern bool gunique_filter_due(GuniqueSummary *summary, uint32 threshold);
extern bool gunique_filter_group_wanted(GuniqueSummary *summary, uint32 n,
										uint64 keys);
extern bool gunique_filter_add(GuniqueSummary *summary, uint64 hash);
extern uint64 gunique_filter_keys_estimate(Relation index);
extern bool gunique_filter_build(GuniqueSummary *summary, Relation *indexes,
								 int n, GuniqueSummary *group);
extern bool gunique_filter_fill_begin(GuniqueFilterFill *fill,
									  GuniqueSummary *summary,
									  uint64 estimate, bool exclusive);
extern bool gunique_filter_extend_begin(GuniqueFilterFill *fill,
										GuniqueSummary *summary);
extern void gunique_filter_fill_key(GuniqueFilterFill *fill, Datum value);
extern void gunique_filter_fill_publish(GuniqueFilterFill *fill);
extern void gunique_filter_fill_abort(GuniqueFilterFill *fill);
extern void gunique_filter_fill_done(GuniqueFilterFill *fill);
extern void gunique_filter_init(GuniqueSummary *summary);
extern void gunique_filter_detach(GuniqueSummary *summary,
								 GuniqueFilterRefs *refs);
extern void gunique_filter_free_detached(GuniqueFilterRefs *refs);

#endif							/* GUNIQUE_FILTER_H */

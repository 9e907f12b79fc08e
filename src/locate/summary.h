/*-------------------------------------------------------------------------
 *
 * summary.h
 *	  The shared summary of each gunique index's keys: its key range and key
 *	  filter, and for a group's top index the group's filter and count of
 *	  changes.  summary.c owns every rule about them; see src/README.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_SUMMARY_H
#define GUNIQUE_SUMMARY_H

#include "access/xact.h"
#include "port/atomics.h"
#include "utils/rel.h"

#include "locate/filter.h"
#include "locate/keymap.h"

#define SUMMARY_INVALID		0
#define SUMMARY_COMPUTING	1
#define SUMMARY_VALID		2

/*
 * A group's filter pays only when a probe would otherwise check many
 * leaves: below this many, each leaf's range and filter are as cheap as
 * keeping the group's filter up to date.
 */
#define GUNIQUE_GROUP_FILTER_MIN_LEAVES 16
#define GUNIQUE_GROUP_TAG_MIN_LEAVES	64	/* a group's filter tags keys */

typedef struct SummaryTag
{
	Oid			dbid;
	Oid			indexoid;
} SummaryTag;

/*
 * One index's entry in shared memory.  Written only by summary.c, read by
 * probes only through the inline functions below.
 */
typedef struct GuniqueSummary
{
	SummaryTag	tag;			/* hash key */
	Oid			typid;			/* type of the range's keys (keymap.c), or
								 * InvalidOid: no range, a filter only */
	pg_atomic_uint32 state;		/* of the range */
	pg_atomic_uint64 min;		/* the range, in keymap order images */
	pg_atomic_uint64 max;
	pg_atomic_uint64 filter;	/* complete, read by probes: a reference */
	pg_atomic_uint64 filter_next;	/* being built to replace it */
	pg_atomic_uint32 filter_busy;	/* a backend is building one */
	pg_atomic_uint32 filter_searches;	/* btree searches while it had none */
	pg_atomic_uint64 changes;	/* a group's: see gunique_summary_changes */
} GuniqueSummary;

/*
 * A copy of a leaf's range and filter reference, as a probe read them
 * under a key lock; it serves later keys while the group's count of
 * changes stays the same (src/README, I5).
 */
typedef struct GuniqueSummaryCopy
{
	uint64		min;
	uint64		max;
	uint64		filter;			/* a reference, or 0 */
} GuniqueSummaryCopy;

/* What gunique_summary_cover leaves to do once the key lock is released. */
#define GUNIQUE_COVER_LEAF_FULL		0x01	/* the leaf outgrew its filter */
#define GUNIQUE_COVER_GROUP_FULL	0x02	/* the group outgrew its filter */

/* The merge's filling of the filters of the leaves it reads (merge.c). */
typedef struct GuniqueSummaryMerge GuniqueSummaryMerge;

/* An entry as saved at shutdown and loaded at start (persist.c). */
typedef struct GuniqueSummarySaved
{
	SummaryTag	tag;
	Oid			typid;
	uint32		state;			/* of the range: only a valid one is kept */
	uint64		min;
	uint64		max;
	uint64		changes;
	uint64		filter;			/* saving: the reference; loading: the new
								 * one, or 0 */
} GuniqueSummarySaved;

extern int	gunique_max_summaries;

extern void gunique_summary_shmem_request(void);
extern void gunique_summary_shmem_startup(void);
extern void gunique_summary_relcache_inval(Oid relid);
extern void gunique_summary_xact_event(XactEvent event);
extern void gunique_summary_subxact_event(SubXactEvent event,
										  SubTransactionId mySubid,
										  SubTransactionId parentSubid);

extern GuniqueSummary *gunique_summary_for(Relation index);
extern GuniqueSummary *gunique_summary_find(Oid indexoid);
extern void gunique_summary_prepare(GuniqueSummary *summary, Relation heap,
									Relation index);
extern uint64 gunique_summary_keys_estimate(Relation index);

/* Probes */
extern bool gunique_summary_filter_missing(GuniqueSummary *summary);
extern bool gunique_summary_filter_full(GuniqueSummary *summary);
extern bool gunique_summary_searched(GuniqueSummary *summary, Relation index,
									 uint32 *threshold);
extern int	gunique_summary_cover(GuniqueSummary *summary,
								  GuniqueSummary *group,
								  GuniqueKeyImage *key, Relation index);
extern int	gunique_summary_leaf_tag(Oid heapoid);
extern void gunique_summary_build_filter(GuniqueSummary *summary,
										 Relation index,
										 GuniqueSummary *group);
extern void gunique_summary_build_group_filter(GuniqueSummary *group,
											   Relation *leaves, int n,
											   Relation index,
											   char *tree_changed);

/* DDL */
extern void gunique_summary_leaf_rebuilt(Relation heap, Relation index);
extern void gunique_summary_index_dropped(Oid indexoid);
extern void gunique_summary_forget_groups(Oid topindex);
extern void gunique_summary_database_gone(Oid dbid);
extern GuniqueSummarySaved *gunique_summary_save_all(int *n, int wait_ms);
extern bool gunique_summary_load(const GuniqueSummarySaved *saved);
extern void gunique_summary_unload(const GuniqueSummarySaved *saved);
extern GuniqueSummaryMerge *gunique_summary_merge_begin(Relation topindex,
														Relation *leaves,
														bool *whole, int n);
extern void gunique_summary_merge_key(GuniqueSummaryMerge *merge, int leaf,
									  Datum *values, bool *isnull);
extern void gunique_summary_merge_end(GuniqueSummaryMerge *merge,
									  bool complete);

/*
 * Copy the leaf's range (all keys, if it is not valid) and its filter
 * reference, under a key lock.  Inline: a probe reads them for every leaf
 * of a row's group that it cannot rule out at once.  A leaf without a
 * summary (NULL) may hold any key.
 */
static inline void
gunique_summary_copy(GuniqueSummary *summary, GuniqueSummaryCopy *copy)
{
	copy->min = 0;
	copy->max = PG_UINT64_MAX;
	copy->filter = 0;
	if (summary == NULL)
		return;
	if (pg_atomic_read_u32(&summary->state) == SUMMARY_VALID)
	{
		pg_read_barrier();
		copy->min = pg_atomic_read_u64(&summary->min);
		copy->max = pg_atomic_read_u64(&summary->max);
	}
	copy->filter = pg_atomic_read_u64(&summary->filter);
	pg_read_barrier();
}

/* Does the copy rule the key out by its range? */
static inline bool
gunique_summary_copy_outside(GuniqueSummaryCopy *copy, GuniqueKeyImage *key)
{
	return key->ordered && (key->order < copy->min || key->order > copy->max);
}

/* The filter reference of a group's (or a leaf's) entry, under a key lock. */
static inline uint64
gunique_summary_filter(GuniqueSummary *summary)
{
	uint64		ref = pg_atomic_read_u64(&summary->filter);

	pg_read_barrier();
	return ref;
}

/*
 * A group's count of changes, read under a key lock: copies of the group's
 * leaves' summaries taken at the same count still serve.
 */
static inline uint64
gunique_summary_changes(GuniqueSummary *group)
{
	uint64		changes = pg_atomic_read_u64(&group->changes);

	pg_read_barrier();
	return changes;
}

#endif							/* GUNIQUE_SUMMARY_H */

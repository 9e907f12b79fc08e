/*-------------------------------------------------------------------------
 *
 * summary.h
 *	  Key-range summaries of gunique leaf indexes, in shared memory.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_SUMMARY_H
#define GUNIQUE_SUMMARY_H

#include "port/atomics.h"
#include "utils/rel.h"

#define SUMMARY_INVALID		0
#define SUMMARY_COMPUTING	1
#define SUMMARY_VALID		2

typedef struct SummaryTag
{
	Oid			dbid;
	Oid			indexoid;
} SummaryTag;

/*
 * One leaf index's conservative [min, max] of its keys, in shared memory;
 * see summary.c.  Read and written only through the atomics.
 */
typedef struct GuniqueSummary
{
	SummaryTag	tag;			/* hash key */
	Oid			typid;			/* type of the key column */
	pg_atomic_uint32 state;
	pg_atomic_uint64 min;		/* keys mapped by gunique_summary_key() */
	pg_atomic_uint64 max;
	/* the leaf's key filter (filter.c): arena offsets, 0 if none */
	pg_atomic_uint64 filter;	/* complete, read by probes */
	pg_atomic_uint64 filter_next;	/* being built to replace it */
	pg_atomic_uint32 filter_busy;	/* a backend is building one */
	pg_atomic_uint32 filter_searches;	/* btree searches while it had none */

	/*
	 * In a group's entry: bumped, under the inserter's key lock, after a
	 * leaf of the group widens its range (before the key enters the
	 * btree), and before a leaf's new filter is published, so that probes
	 * may keep copies of the leaves' ranges and filters while it stays the
	 * same (probe.c).
	 */
	pg_atomic_uint64 changes;
} GuniqueSummary;

extern int	gunique_max_summaries;

extern void gunique_summary_shmem_request(void);
extern void gunique_summary_shmem_startup(void);
extern void gunique_summary_init(void);

extern GuniqueSummary *gunique_summary_for(Relation index);
extern bool gunique_summary_widen(GuniqueSummary *summary, Datum value);
extern uint64 gunique_summary_key(GuniqueSummary *summary, Datum value);
extern bool gunique_summary_needs_compute(GuniqueSummary *summary);
extern void gunique_summary_compute(GuniqueSummary *summary, Relation heap,
									Relation index);
extern void gunique_summary_reset(Relation index);
extern void gunique_summary_forget(Oid indexoid);
extern void gunique_summary_forget_at_abort(Oid indexoid);

/*
 * The summary's range as it is now, in keys mapped by gunique_summary_key:
 * all keys if it is not valid.  Inline: a probe reads it for every other
 * leaf of a row's group.
 */
static inline void
gunique_summary_range(GuniqueSummary *summary, uint64 *min, uint64 *max)
{
	*min = 0;
	*max = PG_UINT64_MAX;
	if (pg_atomic_read_u32(&summary->state) != SUMMARY_VALID)
		return;
	pg_read_barrier();
	*min = pg_atomic_read_u64(&summary->min);
	*max = pg_atomic_read_u64(&summary->max);
}

#endif							/* GUNIQUE_SUMMARY_H */

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

/* One leaf index's conservative [min, max] of its keys; see summary.c. */
typedef struct GuniqueSummary GuniqueSummary;

extern int	gunique_max_summaries;

extern void gunique_summary_shmem_request(void);
extern void gunique_summary_shmem_startup(void);

extern GuniqueSummary *gunique_summary_for(Relation index);
extern void gunique_summary_widen(GuniqueSummary *summary, Datum value);
extern uint64 gunique_summary_key(GuniqueSummary *summary, Datum value);
extern bool gunique_summary_excludes(GuniqueSummary *summary, uint64 key);
extern bool gunique_summary_needs_compute(GuniqueSummary *summary);
extern void gunique_summary_compute(GuniqueSummary *summary, Relation heap,
									Relation index);
extern void gunique_summary_reset(Relation index);

#endif							/* GUNIQUE_SUMMARY_H */

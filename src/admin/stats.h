/*-------------------------------------------------------------------------
 *
 * stats.h
 *	  What the insert-time probes of each leaf index did.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_STATS_H
#define GUNIQUE_STATS_H

#include "utils/rel.h"

typedef enum GuniqueStat
{
	GUNIQUE_STAT_INSERTS,		/* keys inserted or attempted */
	GUNIQUE_STAT_UNPROBED,		/* no other partition could hold the key */
	GUNIQUE_STAT_PROBES,		/* rounds of looking in the other partitions */
	GUNIQUE_STAT_LEAVES_PROBED, /* partitions whose btree was searched */
	GUNIQUE_STAT_LEAVES_SKIPPED,	/* partitions ruled out by their key range */
	GUNIQUE_STAT_LEAVES_FILTERED,	/* partitions ruled out by their key filter */
	GUNIQUE_STAT_WAITS,			/* waits for a transaction holding the key */
	GUNIQUE_STAT_CONFLICTS,		/* unique violations found by a probe */
	GUNIQUE_NSTATS
} GuniqueStat;

extern void gunique_stats_shmem_request(void);
extern void gunique_stats_shmem_startup(void);
extern void gunique_stats_add(Relation index, const uint64 *counts);
extern void gunique_stats_flush(void);

#endif							/* GUNIQUE_STATS_H */

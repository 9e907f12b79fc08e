/*-------------------------------------------------------------------------
 *
 * probe.h
 *	  Insert-time enforcement of uniqueness across partitions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_PROBE_H
#define GUNIQUE_PROBE_H

#include "access/genam.h"
#include "nodes/execnodes.h"
#include "storage/lwlock.h"

#include "locate/locate.h"

/* An insert's probe, from before nbtree's insert to after it. */
typedef struct GuniqueProbe
{
	Relation	index;
	IndexInfo  *indexInfo;
	bool		skip_self;
	struct ProbeGroup *pg;		/* NULL if the insert did not probe */
	LWLock	   *keylock;		/* held across nbtree's insert, if it did */
	int			cover;			/* GUNIQUE_COVER_* flags (summary.h) */
	bool		own_partial;	/* nbtree checks own leaf in partial mode */
	bool		kept;			/* an UPDATE that keeps its key: nbtree
								 * does not check own leaf */
	GuniqueLocateKey key;		/* the row's key, mapped once (locate.c) */
	/* the row, for a second look at own leaf after nbtree's insert */
	Relation	heap;
	ItemPointer heap_tid;
	Datum	   *values;
	bool	   *isnull;
	IndexUniqueCheck checkUnique;
} GuniqueProbe;

extern void gunique_probe_before_insert(GuniqueProbe *probe, Relation index,
										Datum *values, bool *isnull,
										ItemPointer heap_tid, Relation heap,
										IndexUniqueCheck checkUnique,
										bool indexUnchanged,
										IndexInfo *indexInfo);
extern bool gunique_probe_after_insert(GuniqueProbe *probe, bool unique);

#endif							/* GUNIQUE_PROBE_H */

/*-------------------------------------------------------------------------
 *
 * probescan.h
 *	  Index scans on the leaves of gunique trees, kept open for a statement.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_PROBESCAN_H
#define GUNIQUE_PROBESCAN_H

#include "access/genam.h"
#include "executor/tuptable.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapshot.h"

#include "summary.h"

/* An open dirty-snapshot scan of one leaf index. */
typedef struct ProbeScan
{
	Oid			indexoid;		/* hash key */
	Relation	heap;
	Relation	index;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	GuniqueSummary *summary;	/* the leaf's key-range summary, or NULL */
	SnapshotData dirty;			/* the scan's snapshot; HeapTupleSatisfiesDirty
								 * leaves the matching tuple's xmin/xmax here */
} ProbeScan;

/* What a probe scan runs under; see probescan.c. */
typedef struct ProbeScanContext
{
	ResourceOwner saved_owner;
	MemoryContext saved_context;
} ProbeScanContext;

extern void gunique_probescan_init(void);
extern void gunique_probescan_enter(ProbeScanContext *cxt);
extern void gunique_probescan_leave(ProbeScanContext *cxt);
extern ProbeScan *gunique_probescan_get(Oid heapoid, Oid indexoid, int nkeys);
extern void gunique_probescan_done(ProbeScan *ps);
extern void gunique_probescan_release_all(void);

#endif							/* GUNIQUE_PROBESCAN_H */

/*-------------------------------------------------------------------------
 *
 * probescan.h
 *	  A statement's open scans of the leaves its probes search.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_PROBESCAN_H
#define GUNIQUE_PROBESCAN_H

#include "access/relscan.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "lib/ilist.h"
#include "utils/hsearch.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapshot.h"

#include "am/btread.h"
#include "locate/summary.h"

/*
 * What a statement's probes need from their executor memory on: the open
 * scans of the leaves, and the probe groups' memory (probegroup.c).  One
 * per executor memory context that holds gunique inserts' IndexInfos, so
 * that a statement nested in another (a trigger's) has its own.
 */
typedef struct ProbeStatement
{
	MemoryContext parent;		/* the IndexInfos' ii_Context: the key */
	MemoryContext cxt;			/* everything below; NULL once released */
	SubTransactionId subid;		/* made in this subtransaction */
	bool		forgetting;		/* being dropped without closing */
	HTAB	   *scans;			/* ProbeScanRef by index OID */
	struct ProbeScan *opened;	/* every scan made, to close: the hash
								 * tables' memory goes before the
								 * statement's own (see probescan.c) */
	HTAB	   *group_owners;	/* probegroup.c's: groups others share */
	dlist_node	node;			/* in the backend's list of live ones */
} ProbeStatement;

/*
 * What a statement needs to search one leaf index for keys: the open
 * relations, an insertion scan key to descend the btree with, and a dirty
 * snapshot to fetch the heap tuples its entries point to.
 */
typedef struct ProbeScan
{
	struct ProbeScan *next;		/* in the statement's "opened" */
	Relation	heap;
	Relation	index;
	bool		ready;			/* the rest is made: see
								 * gunique_probescan_prepare */
	BTScanInsert itup_key;		/* arguments set per key searched */
	IndexFetchTableData *fetch;
	TupleTableSlot *slot;
	GuniqueSummary *summary;	/* the leaf's summary, or NULL */
	uint32		filter_after;	/* searches without a filter that make one
								 * worth building; 0 until needed */
	SnapshotData dirty;			/* HeapTupleSatisfiesDirty leaves the matching
								 * tuple's xmin/xmax here */
} ProbeScan;

/* What a probe scan runs under; see probescan.c. */
typedef struct ProbeScanContext
{
	ResourceOwner saved_owner;
	MemoryContext saved_context;
} ProbeScanContext;

extern void gunique_probescan_xact_event(XactEvent event);
extern void gunique_probescan_subxact_event(SubXactEvent event,
											SubTransactionId mySubid,
											SubTransactionId parentSubid);
extern ProbeStatement *gunique_probe_statement(MemoryContext parent);
extern void gunique_probe_statement_release(ProbeStatement *stmt);
extern void gunique_probe_release_all(void);
extern void gunique_probescan_enter(ProbeStatement *stmt,
									ProbeScanContext *cxt);
extern void gunique_probescan_leave(ProbeScanContext *cxt);
extern ProbeScan *gunique_probescan_get(ProbeStatement *stmt, Oid heapoid,
										Oid indexoid);
extern void gunique_probescan_prepare(ProbeStatement *stmt, ProbeScan *ps);
extern void gunique_probescan_done(ProbeScan *ps);

#endif							/* GUNIQUE_PROBESCAN_H */

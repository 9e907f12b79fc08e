/*-------------------------------------------------------------------------
 *
 * probescan.c
 *	  Index scans on the leaves of gunique trees, kept open for a statement.
 *
 * Every row inserted into a gunique tree looks its key up in the other
 * leaves.  Opening the leaf's relations, beginning an index scan and making
 * a tuple slot for every lookup costs more than the btree descent itself,
 * so the first probe of a statement opens them and later probes only rescan
 * with the new key.
 *
 * The scans outlive the executor's memory and resource owners, so they live
 * in a memory context of their own and everything they pin or open belongs
 * to the transaction's resource owner: probe code brackets its work with
 * gunique_probescan_enter and _leave.  They are released
 *
 *	 - when a statement ends (ExecutorEnd), and before any utility statement
 *	   runs, so that the statement that follows an INSERT or COPY (DROP or
 *	   DETACH of a partition, say) finds no reference of ours to the
 *	   relations it changes;
 *	 - before commit or prepare, where a reference still held would be
 *	   reported as a leak;
 *	 - on subtransaction abort, properly, since the transaction's resource
 *	   owner keeps the buffers an interrupted scan pinned;
 *	 - on transaction abort, by forgetting them: the transaction's resource
 *	   owner releases their pins and references itself.
 *
 * Between probes a scan keeps no buffer pinned: btree drops its pin when a
 * scan runs off the key, and gunique_probescan_done drops the heap's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "probescan.h"
#include "stats.h"

static MemoryContext ProbeScanMemory = NULL;
static HTAB *probe_scans = NULL;

static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;

static void probescan_ExecutorEnd(QueryDesc *queryDesc);
static void probescan_xact_callback(XactEvent event, void *arg);
static void probescan_subxact_callback(SubXactEvent event,
									   SubTransactionId mySubid,
									   SubTransactionId parentSubid,
									   void *arg);

void
gunique_probescan_init(void)
{
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = probescan_ExecutorEnd;
	RegisterXactCallback(probescan_xact_callback, NULL);
	RegisterSubXactCallback(probescan_subxact_callback, NULL);
}

/* Make the transaction own what the scans pin, and their memory hold it. */
void
gunique_probescan_enter(ProbeScanContext *cxt)
{
	if (ProbeScanMemory == NULL)
		ProbeScanMemory = AllocSetContextCreate(TopMemoryContext,
												"gunique probe scans",
												ALLOCSET_DEFAULT_SIZES);
	cxt->saved_owner = CurrentResourceOwner;
	cxt->saved_context = MemoryContextSwitchTo(ProbeScanMemory);
	CurrentResourceOwner = TopTransactionResourceOwner;
}

void
gunique_probescan_leave(ProbeScanContext *cxt)
{
	CurrentResourceOwner = cxt->saved_owner;
	MemoryContextSwitchTo(cxt->saved_context);
}

/*
 * The open scan of a leaf index, made on first use in the statement.  The
 * caller is between gunique_probescan_enter and _leave, and holds a lock on
 * both relations for the transaction.
 */
ProbeScan *
gunique_probescan_get(Oid heapoid, Oid indexoid, int nkeys)
{
	ProbeScan  *ps;
	bool		found;

	Assert(CurrentMemoryContext == ProbeScanMemory);
	if (probe_scans == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(ProbeScan);
		ctl.hcxt = ProbeScanMemory;
		probe_scans = hash_create("gunique probe scans", 16, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	ps = hash_search(probe_scans, &indexoid, HASH_ENTER, &found);
	if (found)
		return ps;

	/* Leave no half-made entry behind if opening fails. */
	PG_TRY();
	{
		ps->heap = table_open(heapoid, NoLock);
		ps->index = index_open(indexoid, NoLock);
		InitDirtySnapshot(ps->dirty);
		ps->scan = gunique_index_beginscan(ps->heap, ps->index, &ps->dirty,
										   nkeys);
		ps->slot = table_slot_create(ps->heap, NULL);
		ps->summary = gunique_summary_for(ps->index);
	}
	PG_CATCH();
	{
		hash_search(probe_scans, &indexoid, HASH_REMOVE, NULL);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return ps;
}

/* A probe of this leaf is over: unpin the heap page it last looked at. */
void
gunique_probescan_done(ProbeScan *ps)
{
	ExecClearTuple(ps->slot);
	if (ps->scan->xs_heapfetch)
		table_index_fetch_reset(ps->scan->xs_heapfetch);
}

/* End every scan and close its relations. */
void
gunique_probescan_release_all(void)
{
	HASH_SEQ_STATUS status;
	ProbeScan  *ps;
	ResourceOwner saved_owner;

	gunique_stats_flush();
	if (probe_scans == NULL)
		return;

	saved_owner = CurrentResourceOwner;
	CurrentResourceOwner = TopTransactionResourceOwner;
	hash_seq_init(&status, probe_scans);
	while ((ps = hash_seq_search(&status)) != NULL)
	{
		ExecDropSingleTupleTableSlot(ps->slot);
		index_endscan(ps->scan);
		index_close(ps->index, NoLock);
		table_close(ps->heap, NoLock);
	}
	CurrentResourceOwner = saved_owner;

	probe_scans = NULL;
	MemoryContextReset(ProbeScanMemory);
}

/* Forget the scans of an aborted transaction: its resource owner frees them. */
static void
probescan_forget_all(void)
{
	gunique_stats_flush();
	if (probe_scans == NULL)
		return;
	probe_scans = NULL;
	MemoryContextReset(ProbeScanMemory);
}

static void
probescan_ExecutorEnd(QueryDesc *queryDesc)
{
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
	gunique_probescan_release_all();
}

static void
probescan_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			gunique_probescan_release_all();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			probescan_forget_all();
			break;
		default:
			break;
	}
}

static void
probescan_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		gunique_probescan_release_all();
}

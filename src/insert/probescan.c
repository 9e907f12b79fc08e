/*-------------------------------------------------------------------------
 *
 * probescan.c
 *	  A statement's open scans of the leaves its probes search.
 *
 * Every row inserted into a gunique tree looks its key up in the other
 * leaves.  Opening the leaf's relations, making an insertion scan key, a
 * heap fetch state and a tuple slot for every lookup costs more than the
 * btree descent itself, so the first probe of a statement makes them and
 * later probes only set the key's arguments and descend (probe.c).
 *
 * A statement's scans, and its probe groups (probegroup.c), belong to a
 * ProbeStatement: one per executor memory context that holds the
 * IndexInfos of gunique inserts (their ii_Context), found by the inserts
 * through IndexInfo->ii_AmCache, so that a statement nested in another (a
 * trigger's INSERT) has its own and leaves the outer one's alone.  Its
 * memory is a child of that context, and what it opens and pins belongs
 * to the transaction's resource owner (scans outlive the resource owners
 * that are current when a probe runs): probe code brackets its work with
 * gunique_probescan_enter and _leave.  A ProbeStatement is released
 *
 *	 - when the inserts are cleaned up (aminsertcleanup, PostgreSQL 17 on),
 *	   or when the executor memory that holds their IndexInfos goes: at the
 *	   end of the statement (FreeExecutorState), at the end of a COPY (its
 *	   portal's memory), after every change applied by the logical
 *	   replication apply worker (its message memory);
 *	 - before commit or prepare, where a reference still held would be
 *	   reported as a leak;
 *	 - at the abort of the subtransaction that made it, properly, since the
 *	   transaction's resource owner keeps the buffers an interrupted scan
 *	   pinned;
 *	 - at transaction abort, by forgetting it: the transaction's resource
 *	   owner releases its pins and references itself.
 *
 * Between probes a scan keeps no buffer pinned: the probe releases the
 * btree page it searched, and gunique_probescan_done drops the heap's.
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
#include "admin/stats.h"
#include "am/btread.h"
#include "insert/probescan.h"

/* The backend's ProbeStatements not yet released, innermost first. */
static dlist_head live_statements = DLIST_STATIC_INIT(live_statements);

/* An index OID's scan, in the statement's hash table of them. */
typedef struct ProbeScanRef
{
	Oid			indexoid;		/* hash key */
	ProbeScan  *ps;
} ProbeScanRef;

/*
 * End every scan of the statement and close its relations.  Called from
 * the statement's memory reset callback, which runs after the contexts
 * below it are gone, the hash tables' among them (dynahash gives each
 * table a context of its own): hence the list.
 */
static void
statement_close_scans(ProbeStatement *stmt)
{
	ProbeScan  *ps;
	ResourceOwner saved_owner = CurrentResourceOwner;

	CurrentResourceOwner = TopTransactionResourceOwner;
	for (ps = stmt->opened; ps != NULL; ps = ps->next)
	{
		if (ps->slot != NULL)
			ExecDropSingleTupleTableSlot(ps->slot);
		if (ps->fetch != NULL)
			table_index_fetch_end(ps->fetch);
		index_close(ps->index, NoLock);
		table_close(ps->heap, NoLock);
	}
	CurrentResourceOwner = saved_owner;
}

/*
 * The statement's memory is going, deleted by us or with the executor
 * memory it hangs from: close what it opened, unless the transaction is
 * aborting (then its resource owner does).
 */
static void
statement_memory_gone(void *arg)
{
	ProbeStatement *stmt = (ProbeStatement *) arg;

	if (!stmt->forgetting)
		statement_close_scans(stmt);
	stmt->scans = NULL;
	stmt->opened = NULL;
	stmt->group_owners = NULL;
	stmt->cxt = NULL;
	dlist_delete(&stmt->node);
	gunique_stats_flush();
}

/* Release the statement's scans and memory; later probes make new ones. */
void
gunique_probe_statement_release(ProbeStatement *stmt)
{
	if (stmt->cxt != NULL)
		MemoryContextDelete(stmt->cxt);
}

/*
 * Release every statement's scans: a utility statement is about to run,
 * perhaps from a trigger of an inserting statement, and may drop, detach,
 * truncate or reindex a leaf that they hold open (PostgreSQL refuses that
 * for relations in use by the session's queries).  No probe is in
 * progress; the statements' later probes open what they need again.
 */
void
gunique_probe_release_all(void)
{
	dlist_mutable_iter iter;

	dlist_foreach_modify(iter, &live_statements)
		gunique_probe_statement_release(dlist_container(ProbeStatement, node,
														iter.cur));
}

/* Drop the statement without closing anything: the transaction aborts. */
static void
statement_forget(ProbeStatement *stmt)
{
	stmt->forgetting = true;
	gunique_probe_statement_release(stmt);
}

/*
 * The ProbeStatement of the inserts whose IndexInfos live in "parent",
 * made on first use.
 */
ProbeStatement *
gunique_probe_statement(MemoryContext parent)
{
	dlist_iter	iter;
	ProbeStatement *stmt;
	MemoryContextCallback *cb;

	dlist_foreach(iter, &live_statements)
	{
		stmt = dlist_container(ProbeStatement, node, iter.cur);
		if (stmt->parent == parent)
			return stmt;
	}
	stmt = MemoryContextAllocZero(parent, sizeof(ProbeStatement));
	stmt->parent = parent;
	stmt->subid = GetCurrentSubTransactionId();
	stmt->cxt = AllocSetContextCreate(parent, "gunique probes",
									  ALLOCSET_DEFAULT_SIZES);
	cb = MemoryContextAlloc(stmt->cxt, sizeof(MemoryContextCallback));
	cb->func = statement_memory_gone;
	cb->arg = stmt;
	MemoryContextRegisterResetCallback(stmt->cxt, cb);
	dlist_push_head(&live_statements, &stmt->node);
	return stmt;
}

/* Make the transaction own what the scans pin, and their memory hold it. */
void
gunique_probescan_enter(ProbeStatement *stmt, ProbeScanContext *cxt)
{
	Assert(stmt->cxt != NULL);
	cxt->saved_owner = CurrentResourceOwner;
	cxt->saved_context = MemoryContextSwitchTo(stmt->cxt);
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
gunique_probescan_get(ProbeStatement *stmt, Oid heapoid, Oid indexoid)
{
	ProbeScanRef *ref;
	ProbeScan  *ps;

	Assert(CurrentMemoryContext == stmt->cxt);
	if (stmt->scans == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(ProbeScanRef);
		ctl.hcxt = stmt->cxt;
		stmt->scans = hash_create("gunique probe scans", 16, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}

	ref = hash_search(stmt->scans, &indexoid, HASH_FIND, NULL);
	if (ref != NULL)
		return ref->ps;

	/*
	 * Leave no half-made entry, nor a reference, behind if opening fails:
	 * the reference belongs to the transaction's resource owner, which a
	 * subtransaction's abort does not release.
	 */
	ps = palloc0(sizeof(ProbeScan));	/* not ready; filter_after found
										 * when first needed */
	PG_TRY();
	{
		ps->heap = table_open(heapoid, NoLock);
		ps->index = index_open(indexoid, NoLock);
		ps->summary = gunique_summary_for(ps->index);
	}
	PG_CATCH();
	{
		if (ps->index != NULL)
			index_close(ps->index, NoLock);
		if (ps->heap != NULL)
			table_close(ps->heap, NoLock);
		pfree(ps);
		PG_RE_THROW();
	}
	PG_END_TRY();
	ps->next = stmt->opened;
	stmt->opened = ps;
	ref = hash_search(stmt->scans, &indexoid, HASH_ENTER, NULL);
	ref->ps = ps;
	return ps;
}

/*
 * Make the scan ready to search its leaf: what only a search needs is made
 * the first time one is needed in the statement, since with key ranges and
 * filters most leaves of a group are never searched.  Not under a key
 * lock: the first use of an index's support functions may read catalogs.
 */
void
gunique_probescan_prepare(ProbeStatement *stmt, ProbeScan *ps)
{
	ProbeScanContext cxt;

	if (ps->ready)
		return;
	gunique_probescan_enter(stmt, &cxt);
	InitDirtySnapshot(ps->dirty);
	if (ps->itup_key == NULL)
		ps->itup_key = gunique_bt_search_key(ps->index);
	if (ps->fetch == NULL)
		ps->fetch = table_index_fetch_begin(ps->heap);
	if (ps->slot == NULL)
		ps->slot = table_slot_create(ps->heap, NULL);
	ps->ready = true;
	gunique_probescan_leave(&cxt);
}

/* A probe of this leaf is over: unpin the heap page it last looked at. */
void
gunique_probescan_done(ProbeScan *ps)
{
	ExecClearTuple(ps->slot);
	table_index_fetch_reset(ps->fetch);
}

/*
 * Before commit or prepare, the statements' scans are closed; at abort
 * they are forgotten, and the resource owner releases what they held.
 * The probe counters are flushed either way (hooks.c).
 */
void
gunique_probescan_xact_event(XactEvent event)
{
	dlist_mutable_iter iter;

	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			gunique_probe_release_all();
			gunique_stats_flush();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			dlist_foreach_modify(iter, &live_statements)
				statement_forget(dlist_container(ProbeStatement, node,
												 iter.cur));
			gunique_stats_flush();
			break;
		default:
			break;
	}
}

/*
 * A subtransaction's statements end with it; an outer statement's scans
 * stay open for it (none of its probes can have been cut short).
 */
void
gunique_probescan_subxact_event(SubXactEvent event, SubTransactionId mySubid,
								SubTransactionId parentSubid)
{
	dlist_mutable_iter iter;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	dlist_foreach_modify(iter, &live_statements)
	{
		ProbeStatement *stmt = dlist_container(ProbeStatement, node,
											   iter.cur);

		if (stmt->subid != mySubid)
			continue;
		if (event == SUBXACT_EVENT_ABORT_SUB)
			gunique_probe_statement_release(stmt);
		else
			stmt->subid = parentSubid;
	}
}

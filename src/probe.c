/*-------------------------------------------------------------------------
 *
 * probe.c
 *	  Insert-time enforcement of uniqueness across partitions.
 *
 * nbtree checks a unique index by looking for the key before it inserts,
 * under a lock on the leaf page where the key goes; if it finds the key
 * inserted or deleted by a transaction still in progress, it waits for that
 * transaction with nothing inserted, then looks again.  gunique does the
 * same across all the leaves of a tree that could hold the key (the leaf's
 * group, see scope.c), with a dirty snapshot as PostgreSQL's exclusion
 * constraint check does, and in place of the page lock a key lock
 * (keylock.c):
 *
 *	 open the group's leaves (once per statement, probescan.c);
 *	 lock key; widen own leaf's key-range summary (summary.c);
 *	 look in every leaf of the group, own leaf included, whose summary does
 *	   not rule the key out;
 *	 a live committed match, or one inserted by this transaction: unlock,
 *	   violation;
 *	 a match inserted or deleted by a transaction in progress: unlock, wait
 *	   for it, start again;
 *	 nothing: insert into own leaf (nbtree re-checks it); unlock.
 *
 * Two inserters of equal keys therefore never both insert before looking:
 * the second to take the key lock sees the first's summary and entry.  An
 * inserter never has an entry in an index while it waits, so nobody waits
 * on a waiter, and a definite conflict (this transaction's own row, say) is
 * reported before any wait: the same outcomes as a single unique btree.
 * The key lock is never held while waiting for a transaction, so every
 * wait between inserters is a transaction wait, and a genuine deadlock (two
 * transactions each holding a key the other wants) is detected.
 *
 * The relations of the tree are locked (AccessShareLock) before the key
 * lock, once per transaction, by the scope cache.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "handler.h"
#include "keylock.h"
#include "probe.h"
#include "probescan.h"
#include "scope.h"
#include "stats.h"
#include "summary.h"

typedef struct ProbeKey
{
	int			nkeys;
	ScanKeyData scankeys[INDEX_MAX_KEYS];
	uint32		hash;			/* picks the key lock */
} ProbeKey;

/* What looking in the leaves found. */
typedef struct ProbeFinding
{
	/* a transaction in progress that inserted or deleted the key */
	TransactionId xwait;
	uint32		speculative_token;
	ItemPointerData tid;
	Oid			heapoid;
} ProbeFinding;

static bool
key_has_distinct_null(GuniqueScope *scope, bool *isnull)
{
	if (scope->nulls_not_distinct)
		return false;
	for (int i = 0; i < scope->nkeys; i++)
		if (isnull[i])
			return true;
	return false;
}

static uint32
key_hash(GuniqueScope *scope, Datum *values, bool *isnull)
{
	uint32		hash = 0;

	for (int i = 0; i < scope->nkeys; i++)
	{
		uint32		h = 0;

		if (!isnull[i] && scope->hashable[i])
			h = DatumGetUInt32(FunctionCall1Coll(&scope->hashfn[i],
												 scope->collation[i],
												 values[i]));
		hash = (hash << 1 | hash >> 31) ^ h;
	}
	return hash;
}

static void
probe_key_init(ProbeKey *key, GuniqueScope *scope, Datum *values, bool *isnull)
{
	key->nkeys = scope->nkeys;
	for (int i = 0; i < scope->nkeys; i++)
	{
		if (isnull[i])
			ScanKeyEntryInitialize(&key->scankeys[i],
								   SK_ISNULL | SK_SEARCHNULL,
								   i + 1, InvalidStrategy, InvalidOid,
								   scope->collation[i], InvalidOid,
								   (Datum) 0);
		else
			ScanKeyEntryInitialize(&key->scankeys[i], 0, i + 1,
								   BTEqualStrategyNumber, InvalidOid,
								   scope->collation[i], scope->eqproc[i],
								   values[i]);
	}
	key->hash = key_hash(scope, values, isnull);
}

/*
 * A duplicate in the inserter's own partition reads exactly as nbtree's
 * report; one in another partition names that partition.
 */
static void
report_conflict(Relation index, Relation heap, Relation holder,
				Datum *values, bool *isnull, IndexUniqueCheck checkUnique)
{
	char	   *key_desc = BuildIndexValueDescription(index, values, isnull);
	bool		elsewhere = RelationGetRelid(holder) != RelationGetRelid(heap);

	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("duplicate key value violates unique constraint \"%s\"",
					RelationGetRelationName(index)),
			 !elsewhere ?
			 (key_desc ? errdetail("Key %s already exists.", key_desc) : 0) :
			 key_desc ?
			 errdetail("Key %s already exists in partition \"%s\".",
					   key_desc, RelationGetRelationName(holder)) :
			 errdetail("The key already exists in partition \"%s\".",
					   RelationGetRelationName(holder)),
			 elsewhere && checkUnique == UNIQUE_CHECK_PARTIAL ?
			 errhint("INSERT ... ON CONFLICT resolves conflicts within one partition only; this key is held by another partition.") : 0,
			 errtableconstraint(heap, RelationGetRelationName(index))));
}

/*
 * Look for the key in one leaf, through the statement's open scan of it.
 * Returns the leaf's table if it holds the key live or inserted by this
 * transaction (a violation); otherwise records in *finding the first
 * transaction in progress that holds the key.
 */
static Oid
probe_leaf(ProbeScan *ps, ProbeKey *key, ProbeFinding *finding)
{
	Oid			conflict = InvalidOid;

	index_rescan(ps->scan, key->scankeys, key->nkeys, NULL, 0);
	while (index_getnext_slot(ps->scan, ForwardScanDirection, ps->slot))
	{
		TransactionId xwait = TransactionIdIsValid(ps->dirty.xmin) ?
			ps->dirty.xmin : ps->dirty.xmax;

		if (!TransactionIdIsValid(xwait))
		{
			conflict = RelationGetRelid(ps->heap);
			break;
		}
		if (!TransactionIdIsValid(finding->xwait))
		{
			finding->xwait = xwait;
			finding->speculative_token = ps->dirty.speculativeToken;
			finding->tid = ps->slot->tts_tid;
			finding->heapoid = RelationGetRelid(ps->heap);
		}
	}
	gunique_probescan_done(ps);
	return conflict;
}

/*
 * The open scans of the leaves of the index's group (its own leaf too,
 * unless "skip_self"), with their summaries computed.  Opening a leaf for
 * the first time in the statement takes catalog locks and may process
 * invalidations (which can flush the scope cache), so this runs before the
 * key lock is taken, and works from a copy of the leaves.
 */
static ProbeScan **
probe_targets(Relation index, bool skip_self, int nkeys, int *ntargets)
{
	Oid			self = RelationGetRelid(index);
	Oid			group;
	GuniqueScope *scope = gunique_scope_for_leaf(index, &group, true);
	GuniqueLeaf *leaves = palloc(sizeof(GuniqueLeaf) * scope->nleaves);
	ProbeScan **targets;
	int			nleaves = 0;
	ProbeScanContext cxt;

	for (int i = 0; i < scope->nleaves; i++)
	{
		if (scope->leaves[i].group != group ||
			(skip_self && scope->leaves[i].indexoid == self))
			continue;
		leaves[nleaves++] = scope->leaves[i];
	}

	targets = palloc(sizeof(ProbeScan *) * Max(nleaves, 1));
	gunique_probescan_enter(&cxt);
	for (int i = 0; i < nleaves; i++)
	{
		ProbeScan  *ps = gunique_probescan_get(leaves[i].heapoid,
											   leaves[i].indexoid, nkeys);

		if (ps->summary != NULL && gunique_summary_needs_compute(ps->summary))
			gunique_summary_compute(ps->summary, ps->heap, ps->index);
		targets[i] = ps;
	}
	gunique_probescan_leave(&cxt);
	pfree(leaves);
	*ntargets = nleaves;
	return targets;
}

/*
 * Under the key lock: look for the key in every target whose summary does
 * not rule it out.  Returns the table of a leaf that holds it (a violation)
 * or InvalidOid, with what it found in progress in *finding.
 */
static Oid
probe_group(ProbeScan **targets, int ntargets, ProbeKey *key,
			ProbeFinding *finding, Datum *values, bool *isnull,
			uint64 *counts)
{
	Oid			conflict = InvalidOid;
	bool		summarized = key->nkeys == 1 && !isnull[0];
	ProbeScanContext cxt;

	memset(finding, 0, sizeof(ProbeFinding));
	gunique_probescan_enter(&cxt);
	for (int i = 0; i < ntargets && !OidIsValid(conflict); i++)
	{
		ProbeScan  *ps = targets[i];

		if (summarized && ps->summary != NULL &&
			gunique_summary_excludes(ps->summary, values[0]))
		{
			counts[GUNIQUE_STAT_LEAVES_SKIPPED]++;
			continue;
		}
		counts[GUNIQUE_STAT_LEAVES_PROBED]++;
		conflict = probe_leaf(ps, key, finding);
	}
	counts[GUNIQUE_STAT_PROBES]++;
	gunique_probescan_leave(&cxt);
	return conflict;
}

/* Wait for the transaction that holds the key, as nbtree would. */
static void
probe_wait(ProbeFinding *finding)
{
	Relation	holder;

	if (finding->speculative_token != 0)
	{
		SpeculativeInsertionWait(finding->xwait, finding->speculative_token);
		return;
	}
	holder = table_open(finding->heapoid, NoLock);
	XactLockTableWait(finding->xwait, holder, &finding->tid, XLTW_InsertIndex);
	table_close(holder, NoLock);
}

/*
 * Can another leaf hold this key?  Not if the index is not part of a tree,
 * if a NULL makes the key distinct, or if the leaf is alone in its group
 * (the partition key is determined by the index key); then nbtree's own
 * check of the leaf is complete.
 */
static bool
probe_needed(Relation index, bool *isnull, IndexUniqueCheck checkUnique)
{
	Oid			self = RelationGetRelid(index);
	Oid			group;
	GuniqueScope *scope;

	if (checkUnique == UNIQUE_CHECK_NO || !index->rd_rel->relispartition)
		return false;
	if (checkUnique == UNIQUE_CHECK_EXISTING)
		elog(ERROR, "gunique index \"%s\" cannot be rechecked as deferred",
			 RelationGetRelationName(index));

	scope = gunique_scope_for_leaf(index, &group, false);
	if (key_has_distinct_null(scope, isnull))
		return false;
	for (int i = 0; i < scope->nleaves; i++)
		if (scope->leaves[i].group == group && scope->leaves[i].indexoid != self)
			return true;
	return false;
}

/* Let the index's summary cover the key before nbtree inserts it. */
static void
widen_own_summary(Relation index, Datum *values, bool *isnull)
{
	GuniqueSummary *summary;

	if (IndexRelationGetNumberOfKeyAttributes(index) != 1 || isnull[0])
		return;
	summary = gunique_summary_for(index);
	if (summary != NULL)
		gunique_summary_widen(summary, values[0]);
}

bool
gunique_probe_insert(Relation index, Datum *values, bool *isnull,
					 ItemPointer heap_tid, Relation heap,
					 IndexUniqueCheck checkUnique, bool indexUnchanged,
					 IndexInfo *indexInfo)
{
	GuniqueScope *scope;
	Oid			group;
	ProbeKey	key;
	ProbeScan **targets;
	int			ntargets;
	LWLock	   *keylock;
	bool		result;
	uint64		counts[GUNIQUE_NSTATS] = {0};

	counts[GUNIQUE_STAT_INSERTS] = 1;
	if (!probe_needed(index, isnull, checkUnique))
	{
		counts[GUNIQUE_STAT_UNPROBED] = 1;
		gunique_stats_add(index, counts);
		widen_own_summary(index, values, isnull);
		return gunique_btinsert(index, values, isnull, heap_tid, heap,
								checkUnique, indexUnchanged, indexInfo);
	}

	/* Lock the tree's relations and open its leaves before the key lock. */
	scope = gunique_scope_for_leaf(index, &group, true);
	probe_key_init(&key, scope, values, isnull);
	keylock = gunique_keylock_for(scope->topindex, key.hash);

	for (;;)
	{
		ProbeFinding finding;
		Oid			conflict;

		/*
		 * A speculative insertion (ON CONFLICT) leaves conflicts within its
		 * own partition to nbtree and the executor, which arbitrate them.
		 */
		targets = probe_targets(index, checkUnique == UNIQUE_CHECK_PARTIAL,
								key.nkeys, &ntargets);

		LWLockAcquire(keylock, LW_EXCLUSIVE);
		widen_own_summary(index, values, isnull);
		conflict = probe_group(targets, ntargets, &key, &finding,
							   values, isnull, counts);
		pfree(targets);
		if (!OidIsValid(conflict) && !TransactionIdIsValid(finding.xwait))
			break;
		LWLockRelease(keylock);

		if (OidIsValid(conflict))
		{
			Relation	holder = table_open(conflict, NoLock);

			counts[GUNIQUE_STAT_CONFLICTS]++;
			gunique_stats_add(index, counts);
			report_conflict(index, heap, holder, values, isnull, checkUnique);
		}
		counts[GUNIQUE_STAT_WAITS]++;
		probe_wait(&finding);
	}
	gunique_stats_add(index, counts);

	/*
	 * Nobody else holds the key: insert, and let others see it.  An error
	 * releases the key lock with all other LWLocks.
	 */
	result = gunique_btinsert(index, values, isnull, heap_tid, heap,
							  checkUnique, indexUnchanged, indexInfo);
	LWLockRelease(keylock);
	return result;
}

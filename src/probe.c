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
 *	   not rule the key out (own leaf is ruled out when its summary had to
 *	   be widened: the key is new to it, as serial keys are);
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
key_has_distinct_null(ProbeGroup *pg, bool *isnull)
{
	if (pg->nulls_not_distinct)
		return false;
	for (int i = 0; i < pg->nkeys; i++)
		if (isnull[i])
			return true;
	return false;
}

static uint32
key_hash(ProbeGroup *pg, Datum *values, bool *isnull)
{
	uint32		hash = 0;

	for (int i = 0; i < pg->nkeys; i++)
	{
		uint32		h = 0;

		if (!isnull[i] && pg->hashable[i])
			h = DatumGetUInt32(FunctionCall1Coll(&pg->hashfn[i],
												 pg->collation[i],
												 values[i]));
		hash = (hash << 1 | hash >> 31) ^ h;
	}
	return hash;
}

static void
probe_key_init(ProbeKey *key, ProbeGroup *pg, Datum *values, bool *isnull)
{
	key->nkeys = pg->nkeys;
	for (int i = 0; i < pg->nkeys; i++)
	{
		if (isnull[i])
			ScanKeyEntryInitialize(&key->scankeys[i],
								   SK_ISNULL | SK_SEARCHNULL,
								   i + 1, InvalidStrategy, InvalidOid,
								   pg->collation[i], InvalidOid,
								   (Datum) 0);
		else
			ScanKeyEntryInitialize(&key->scankeys[i], 0, i + 1,
								   BTEqualStrategyNumber, InvalidOid,
								   pg->collation[i], pg->eqproc[i],
								   values[i]);
	}
	key->hash = key_hash(pg, values, isnull);
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
 * Under the key lock: look for the key in every leaf of the group whose
 * summary does not rule it out; own leaf is ruled out when its summary did
 * not cover the key ("own_new").  Returns the table of a leaf that holds the
 * key (a violation) or InvalidOid, with what it found in progress in
 * *finding.
 */
static Oid
probe_group(ProbeGroup *pg, bool own_new, ProbeKey *key,
			ProbeFinding *finding, Datum *values, bool *isnull,
			uint64 *counts)
{
	Oid			conflict = InvalidOid;
	bool		summarized = key->nkeys == 1 && !isnull[0];
	ProbeScanContext cxt;

	memset(finding, 0, sizeof(ProbeFinding));
	gunique_probescan_enter(&cxt);
	for (int i = 0; i < pg->ntargets && !OidIsValid(conflict); i++)
	{
		ProbeScan  *ps = pg->targets[i];

		if (i == pg->self ? own_new :
			summarized && ps->summary != NULL &&
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
 * Let the index's summary cover the key before nbtree inserts it.  Returns
 * true if the summary did not cover it before: then the index holds no
 * entry with the key.
 */
static bool
widen_own_summary(GuniqueSummary *summary, Datum *values, bool *isnull,
				  int nkeys)
{
	if (summary == NULL || nkeys != 1 || isnull[0])
		return false;
	return gunique_summary_widen(summary, values[0]);
}

/* Insert without a probe: nbtree's own check of the leaf is complete. */
static bool
insert_unprobed(Relation index, GuniqueSummary *summary, Datum *values,
				bool *isnull, ItemPointer heap_tid, Relation heap,
				IndexUniqueCheck checkUnique, bool indexUnchanged,
				IndexInfo *indexInfo, uint64 *counts)
{
	counts[GUNIQUE_STAT_UNPROBED] = 1;
	gunique_stats_add(index, counts);
	widen_own_summary(summary, values, isnull,
					  IndexRelationGetNumberOfKeyAttributes(index));
	return gunique_btinsert(index, values, isnull, heap_tid, heap,
							checkUnique, indexUnchanged, indexInfo);
}

bool
gunique_probe_insert(Relation index, Datum *values, bool *isnull,
					 ItemPointer heap_tid, Relation heap,
					 IndexUniqueCheck checkUnique, bool indexUnchanged,
					 IndexInfo *indexInfo)
{
	bool		skip_self = checkUnique == UNIQUE_CHECK_PARTIAL;
	ProbeGroup *pg;
	ProbeKey	key;
	LWLock	   *keylock;
	bool		result;
	uint64		counts[GUNIQUE_NSTATS] = {0};

	counts[GUNIQUE_STAT_INSERTS] = 1;

	/*
	 * Not part of a tree: nothing to probe.  A speculative insertion (ON
	 * CONFLICT) leaves conflicts within its own partition to nbtree and the
	 * executor, which arbitrate them, so its own leaf is left out.
	 */
	if (checkUnique == UNIQUE_CHECK_NO || !index->rd_rel->relispartition)
		return insert_unprobed(index, gunique_summary_for(index), values,
							   isnull, heap_tid, heap, checkUnique,
							   indexUnchanged, indexInfo, counts);
	if (checkUnique == UNIQUE_CHECK_EXISTING)
		elog(ERROR, "gunique index \"%s\" cannot be rechecked as deferred",
			 RelationGetRelationName(index));

	/*
	 * The statement's scans of the group's leaves, opened (and the tree
	 * locked) before the key lock is taken.
	 */
	for (;;)
	{
		ProbeFinding finding;
		Oid			conflict;
		bool		own_new;

		pg = gunique_probescan_group(index, skip_self);
		if (!pg->needed || key_has_distinct_null(pg, isnull))
			return insert_unprobed(index, pg->own_summary, values, isnull,
								   heap_tid, heap, checkUnique,
								   indexUnchanged, indexInfo, counts);
		probe_key_init(&key, pg, values, isnull);
		keylock = gunique_keylock_for(pg->topindex, key.hash);

		LWLockAcquire(keylock, LW_EXCLUSIVE);
		own_new = widen_own_summary(pg->own_summary, values, isnull,
									key.nkeys);
		conflict = probe_group(pg, own_new, &key, &finding, values, isnull,
							   counts);
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

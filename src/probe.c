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
 * constraint check does, and in place of the page lock a short heavyweight
 * lock on (database, top index, hash of the key):
 *
 *	 lock key; look in every leaf of the group, own leaf included;
 *	 a live committed match, or one inserted by this transaction: violation;
 *	 a match inserted or deleted by a transaction in progress: unlock, wait
 *	   for it, start again;
 *	 nothing: insert into own leaf (nbtree re-checks it); unlock.
 *
 * Two inserters of equal keys therefore never both insert before looking:
 * the second to take the key lock sees the first's entry.  An inserter
 * never has an entry in an index while it waits, so nobody waits on a
 * waiter, and a definite conflict (this transaction's own row, say) is
 * reported before any wait: the same outcomes as a single unique btree.
 * The key lock is a heavyweight lock, so any genuine deadlock (two
 * transactions each holding a key the other wants) is detected; it is never
 * held while waiting for another transaction.
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
#include "probe.h"
#include "probescan.h"
#include "scope.h"

/* Distinguishes gunique's key locks from user advisory locks (1 and 2). */
#define GUNIQUE_KEYLOCK_FIELD4	0x4755

typedef struct ProbeKey
{
	int			nkeys;
	ScanKeyData scankeys[INDEX_MAX_KEYS];
	LOCKTAG		locktag;
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
	SET_LOCKTAG_ADVISORY(key->locktag, MyDatabaseId, scope->topindex,
						 key_hash(scope, values, isnull),
						 GUNIQUE_KEYLOCK_FIELD4);
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
probe_leaf(GuniqueLeaf *leaf, ProbeKey *key, ProbeFinding *finding)
{
	ProbeScan  *ps = gunique_probescan_get(leaf->heapoid, leaf->indexoid,
										   key->nkeys);
	Oid			conflict = InvalidOid;

	index_rescan(ps->scan, key->scankeys, key->nkeys, NULL, 0);
	while (index_getnext_slot(ps->scan, ForwardScanDirection, ps->slot))
	{
		TransactionId xwait = TransactionIdIsValid(ps->dirty.xmin) ?
			ps->dirty.xmin : ps->dirty.xmax;

		if (!TransactionIdIsValid(xwait))
		{
			conflict = leaf->heapoid;
			break;
		}
		if (!TransactionIdIsValid(finding->xwait))
		{
			finding->xwait = xwait;
			finding->speculative_token = ps->dirty.speculativeToken;
			finding->tid = ps->slot->tts_tid;
			finding->heapoid = leaf->heapoid;
		}
	}
	gunique_probescan_done(ps);
	return conflict;
}

/*
 * Look for the key in every leaf of the index's group (its own leaf too,
 * unless "skip_self").  Reports a violation; returns what it found in
 * progress, if anything.
 */
static void
probe_group(ProbeKey *key, ProbeFinding *finding, bool skip_self,
			Relation index, Relation heap, Datum *values, bool *isnull,
			IndexUniqueCheck checkUnique)
{
	Oid			self = RelationGetRelid(index);
	Oid			group;
	GuniqueScope *scope = gunique_scope_for_leaf(index, &group, true);
	Oid			conflict = InvalidOid;
	int			nleaves = 0;
	GuniqueLeaf *leaves;
	ProbeScanContext cxt;

	/*
	 * Opening a leaf for the first time in the statement may process
	 * invalidations, which can flush the scope cache: work from a copy.
	 */
	leaves = palloc(sizeof(GuniqueLeaf) * scope->nleaves);
	for (int i = 0; i < scope->nleaves; i++)
	{
		if (scope->leaves[i].group != group ||
			(skip_self && scope->leaves[i].indexoid == self))
			continue;
		leaves[nleaves++] = scope->leaves[i];
	}

	memset(finding, 0, sizeof(ProbeFinding));
	gunique_probescan_enter(&cxt);
	for (int i = 0; i < nleaves && !OidIsValid(conflict); i++)
		conflict = probe_leaf(&leaves[i], key, finding);
	gunique_probescan_leave(&cxt);
	pfree(leaves);

	if (OidIsValid(conflict))
	{
		Relation	holder = table_open(conflict, NoLock);

		report_conflict(index, heap, holder, values, isnull, checkUnique);
	}
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

bool
gunique_probe_insert(Relation index, Datum *values, bool *isnull,
					 ItemPointer heap_tid, Relation heap,
					 IndexUniqueCheck checkUnique, bool indexUnchanged,
					 IndexInfo *indexInfo)
{
	GuniqueScope *scope;
	Oid			group;
	ProbeKey	key;
	bool		result;

	if (!probe_needed(index, isnull, checkUnique))
		return gunique_btinsert(index, values, isnull, heap_tid, heap,
								checkUnique, indexUnchanged, indexInfo);

	/* Lock the tree's relations before the key lock, never after. */
	scope = gunique_scope_for_leaf(index, &group, true);
	probe_key_init(&key, scope, values, isnull);

	for (;;)
	{
		ProbeFinding finding;

		(void) LockAcquire(&key.locktag, ExclusiveLock, false, false);

		/*
		 * A speculative insertion (ON CONFLICT) leaves conflicts within its
		 * own partition to nbtree and the executor, which arbitrate them.
		 */
		probe_group(&key, &finding, checkUnique == UNIQUE_CHECK_PARTIAL,
					index, heap, values, isnull, checkUnique);
		if (!TransactionIdIsValid(finding.xwait))
			break;

		LockRelease(&key.locktag, ExclusiveLock, false);
		probe_wait(&finding);
	}

	/* Nobody else holds the key: insert, and let others see it. */
	result = gunique_btinsert(index, values, isnull, heap_tid, heap,
							  checkUnique, indexUnchanged, indexInfo);
	LockRelease(&key.locktag, ExclusiveLock, false);
	return result;
}

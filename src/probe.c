/*-------------------------------------------------------------------------
 *
 * probe.c
 *	  Insert-time enforcement of uniqueness across partitions.
 *
 * An insert into a leaf of a gunique index tree first inserts into the
 * leaf's own nbtree index, which checks the leaf exactly as a unique btree
 * does, and then probes every other leaf of its group for the same key with
 * a dirty snapshot, as check_exclusion_or_unique_constraint does for
 * exclusion constraints:
 *
 * - a live committed match, or one inserted earlier by this transaction, is
 *	 a unique violation;
 * - a match inserted or deleted by a transaction still in progress makes us
 *	 wait for that transaction and probe again, as nbtree does.
 *
 * Two sessions inserting the same key into different leaves would each see
 * the other's uncommitted entry and wait for each other: a deadlock.  So the
 * span "insert into own leaf, probe the others" is serialized per key by a
 * short heavyweight lock on (database, top index, hash of key).  Whoever
 * probes second sees the first one's entry; the key lock is released before
 * waiting for another transaction, so only the second one waits.  Being a
 * heavyweight lock, it takes part in deadlock detection.
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
#include "scope.h"

/* Distinguishes gunique's key locks from user advisory locks (1 and 2). */
#define GUNIQUE_KEYLOCK_FIELD4	0x4755

typedef enum ProbeResult
{
	PROBE_CLEAR,				/* no other leaf holds the key */
	PROBE_RETRY,				/* waited for a transaction, probe again */
} ProbeResult;

typedef struct ProbeKey
{
	int			nkeys;
	ScanKeyData scankeys[INDEX_MAX_KEYS];
	LOCKTAG		locktag;
} ProbeKey;

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

static void
report_conflict(Relation index, Relation heap, Relation holder,
				Datum *values, bool *isnull, IndexUniqueCheck checkUnique)
{
	char	   *key_desc = BuildIndexValueDescription(index, values, isnull);

	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("duplicate key value violates unique constraint \"%s\"",
					RelationGetRelationName(index)),
			 key_desc ?
			 errdetail("Key %s already exists in partition \"%s\".",
					   key_desc, RelationGetRelationName(holder)) :
			 errdetail("The key already exists in partition \"%s\".",
					   RelationGetRelationName(holder)),
			 checkUnique == UNIQUE_CHECK_PARTIAL ?
			 errhint("INSERT ... ON CONFLICT resolves conflicts within one partition only; this key is held by another partition.") : 0,
			 errtableconstraint(heap, RelationGetRelationName(index))));
}

/*
 * Look for the key in one other leaf.  Reports a violation, or waits for an
 * in-progress transaction (releasing the key lock first) and returns
 * PROBE_RETRY.
 */
static ProbeResult
probe_leaf(GuniqueLeaf *leaf, ProbeKey *key, Relation index, Relation heap,
		   Datum *values, bool *isnull, IndexUniqueCheck checkUnique)
{
	Relation	sheap = table_open(leaf->heapoid, NoLock);
	Relation	sindex = index_open(leaf->indexoid, NoLock);
	SnapshotData DirtySnapshot;
	IndexScanDesc scan;
	TupleTableSlot *slot;
	ProbeResult result = PROBE_CLEAR;

	InitDirtySnapshot(DirtySnapshot);
	slot = table_slot_create(sheap, NULL);
	scan = gunique_index_beginscan(sheap, sindex, &DirtySnapshot, key->nkeys);
	index_rescan(scan, key->scankeys, key->nkeys, NULL, 0);

	if (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		TransactionId xwait = TransactionIdIsValid(DirtySnapshot.xmin) ?
			DirtySnapshot.xmin : DirtySnapshot.xmax;

		if (!TransactionIdIsValid(xwait))
			report_conflict(index, heap, sheap, values, isnull, checkUnique);

		/* Never wait while holding the key lock: others queue on it. */
		index_endscan(scan);
		scan = NULL;
		LockRelease(&key->locktag, ExclusiveLock, false);
		if (DirtySnapshot.speculativeToken)
			SpeculativeInsertionWait(DirtySnapshot.xmin,
									 DirtySnapshot.speculativeToken);
		else
			XactLockTableWait(xwait, sheap, &slot->tts_tid, XLTW_InsertIndex);
		result = PROBE_RETRY;
	}

	if (scan != NULL)
		index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(sindex, NoLock);
	table_close(sheap, NoLock);
	return result;
}

/*
 * Probe every other leaf of this leaf's group; returns false if it waited
 * and the caller must take the key lock and probe again.
 */
static bool
probe_group(ProbeKey *key, Relation index, Relation heap,
			Datum *values, bool *isnull, IndexUniqueCheck checkUnique)
{
	Oid			self = RelationGetRelid(index);
	Oid			group;
	GuniqueScope *scope = gunique_scope_for_leaf(index, &group, true);
	int			nsiblings = 0;
	GuniqueLeaf *siblings;

	/* Copy: waiting may flush the cache under us. */
	siblings = palloc(sizeof(GuniqueLeaf) * scope->nleaves);
	for (int i = 0; i < scope->nleaves; i++)
		if (scope->leaves[i].group == group && scope->leaves[i].indexoid != self)
			siblings[nsiblings++] = scope->leaves[i];

	for (int i = 0; i < nsiblings; i++)
	{
		if (probe_leaf(&siblings[i], key, index, heap, values, isnull,
					   checkUnique) == PROBE_RETRY)
		{
			pfree(siblings);
			return false;
		}
	}
	pfree(siblings);
	return true;
}

/*
 * Does this leaf share its group with any other leaf?
 */
static bool
leaf_has_siblings(GuniqueScope *scope, Oid self, Oid group)
{
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

	if (checkUnique == UNIQUE_CHECK_NO || !index->rd_rel->relispartition)
		return gunique_btinsert(index, values, isnull, heap_tid, heap, checkUnique,
						indexUnchanged, indexInfo);

	if (checkUnique == UNIQUE_CHECK_EXISTING)
		elog(ERROR, "gunique index \"%s\" cannot be rechecked as deferred",
			 RelationGetRelationName(index));

	scope = gunique_scope_for_leaf(index, &group, false);
	if (key_has_distinct_null(scope, isnull) ||
		!leaf_has_siblings(scope, RelationGetRelid(index), group))
		return gunique_btinsert(index, values, isnull, heap_tid, heap, checkUnique,
						indexUnchanged, indexInfo);

	/* Lock the tree's relations before the key lock, never after. */
	scope = gunique_scope_for_leaf(index, &group, true);
	probe_key_init(&key, scope, values, isnull);

	(void) LockAcquire(&key.locktag, ExclusiveLock, false, false);
	result = gunique_btinsert(index, values, isnull, heap_tid, heap, checkUnique,
					  indexUnchanged, indexInfo);

	/*
	 * A speculative insertion that conflicts within its own partition goes
	 * back to the executor, which resolves it as ON CONFLICT says.
	 */
	if (checkUnique == UNIQUE_CHECK_PARTIAL && !result)
	{
		LockRelease(&key.locktag, ExclusiveLock, false);
		return false;
	}

	while (!probe_group(&key, index, heap, values, isnull, checkUnique))
		(void) LockAcquire(&key.locktag, ExclusiveLock, false, false);

	LockRelease(&key.locktag, ExclusiveLock, false);
	return result;
}

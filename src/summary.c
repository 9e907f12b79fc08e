/*-------------------------------------------------------------------------
 *
 * summary.c
 *	  Key-range summaries of gunique leaf indexes, in shared memory.
 *
 * A probe must look for a key in every other leaf of its group.  When keys
 * follow the partitioning (serial ids or timestamps in time-partitioned
 * tables, UUIDv7), most leaves cannot hold the key, and a conservative
 * [min, max] of each leaf's keys lets the probe skip them without touching
 * their btrees.
 *
 * A summary may be wider than the leaf's keys (deleted keys stay in it), but
 * never narrower while it is valid.  That holds because:
 *
 *	 - every insert into a leaf (probe or not) widens the leaf's summary
 *	   before nbtree inserts the key, whatever state the summary is in;
 *	 - a summary becomes valid only through gunique_summary_compute, which
 *	   widens it by the smallest and largest keys in the btree (dead entries
 *	   included) after it was created or reset, so every key that was in the
 *	   btree before any insert widened the summary is covered too;
 *	 - whatever rebuilds a leaf's btree from its table (CREATE INDEX,
 *	   REINDEX, TRUNCATE, VACUUM FULL, CLUSTER) goes through ambuild, which
 *	   resets the summary to invalid; those commands lock out inserters and
 *	   probers of that leaf while they run.
 *
 * Inserters of equal keys hold the same key lock (keylock.c) from their
 * probe until their insert is done, and a prober reads the summaries under
 * it, so the second of two inserters sees the first's widening.
 *
 * Summaries live only in shared memory: after a restart, crash recovery or
 * promotion every summary is invalid until a probe computes it again with
 * two btree descents.  Entries are never removed: a dropped index's entry is
 * cleared (its key filter freed), and an index OID that comes back is reset
 * by its build.  When the table is full, new leaves simply go without a
 * summary and are always probed.  The entry of a group's top index (a
 * partitioned index) holds only the group's key filter (filter.c).
 *
 * Only single-column keys of types whose default gunique ordering is an
 * integer ordering are summarized: int2, int4, int8, oid, date, time,
 * timestamp, timestamptz, and uuid by its first eight bytes.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/itup.h"
#include "access/relscan.h"
#include "access/xact.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/snapmgr.h"
#include "utils/uuid.h"

#include "btread.h"
#include "compat.h"
#include "filter.h"
#include "summary.h"

/* Maps signed 64-bit values to unsigned ones in the same order. */
#define SIGN_FLIP	(UINT64CONST(1) << 63)

/* A backend's memo of an index's summary, or of its having none. */
typedef struct SummaryMemo
{
	Oid			indexoid;		/* hash key */
	GuniqueSummary *summary;	/* NULL if not summarized */
} SummaryMemo;

int			gunique_max_summaries = 16384;

static HTAB *summaries = NULL;
static LWLock *summaries_lock = NULL;
static HTAB *memos = NULL;

/*
 * Leaf indexes whose btree this transaction built (new, or rebuilt by
 * TRUNCATE or REINDEX), and the subtransaction that built it.  If that
 * rolls back, the btree is gone or back to what it was, and the summary and
 * filter, made from the new btree, must go too.
 */
typedef struct SummaryBuilt
{
	Oid			indexoid;
	SubTransactionId subid;
} SummaryBuilt;

static SummaryBuilt *built = NULL;
static int	nbuilt = 0;
static int	maxbuilt = 0;

static void summary_relcache_callback(Datum arg, Oid relid);

void
gunique_summary_shmem_request(void)
{
	RequestAddinShmemSpace(hash_estimate_size(gunique_max_summaries,
											  sizeof(GuniqueSummary)));
	RequestNamedLWLockTranche("gunique summaries", 1);
}

void
gunique_summary_shmem_startup(void)
{
	HASHCTL		info;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	info.keysize = sizeof(SummaryTag);
	info.entrysize = sizeof(GuniqueSummary);
	summaries = ShmemInitHash("gunique summaries",
							  gunique_max_summaries, gunique_max_summaries,
							  &info, HASH_ELEM | HASH_BLOBS);
	summaries_lock = &(GetNamedLWLockTranche("gunique summaries"))->lock;
	LWLockRelease(AddinShmemInitLock);
}

/* A dropped index's OID may come back as another index: forget memos. */
static void
summary_relcache_callback(Datum arg, Oid relid)
{
	if (memos == NULL)
		return;
	if (OidIsValid(relid))
		hash_search(memos, &relid, HASH_REMOVE, NULL);
	else
	{
		hash_destroy(memos);
		memos = NULL;
	}
}

static bool
summary_type_supported(Oid typid)
{
	switch (typid)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
		case DATEOID:
		case TIMEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
		case UUIDOID:
			return true;
		default:
			return false;
	}
}

/*
 * The key column's type, if the index can be summarized: one key column,
 * ordered by the default gunique operator class of a supported type.
 */
static Oid
summary_type(Relation index)
{
	Oid			typid;
	Oid			opclass;

	if (IndexRelationGetNumberOfKeyAttributes(index) != 1)
		return InvalidOid;
	typid = TupleDescAttr(RelationGetDescr(index), 0)->atttypid;
	if (!summary_type_supported(typid) || index->rd_opcintype[0] != typid)
		return InvalidOid;
	opclass = GetDefaultOpClass(typid, index->rd_rel->relam);
	if (!OidIsValid(opclass) ||
		get_opclass_family(opclass) != index->rd_opfamily[0])
		return InvalidOid;
	return typid;
}

/* A key as an unsigned integer in the same order as the operator class. */
static uint64
summary_map(Oid typid, Datum value)
{
	switch (typid)
	{
		case INT2OID:
			return (uint64) (int64) DatumGetInt16(value) ^ SIGN_FLIP;
		case INT4OID:
		case DATEOID:
			return (uint64) (int64) DatumGetInt32(value) ^ SIGN_FLIP;
		case OIDOID:
			return (uint64) DatumGetObjectId(value);
		case UUIDOID:
			{
				const unsigned char *b = DatumGetUUIDP(value)->data;
				uint64		prefix = 0;

				/* uuid sorts by memcmp: the first bytes are the high ones */
				for (int i = 0; i < 8; i++)
					prefix = (prefix << 8) | b[i];
				return prefix;
			}
		default:
			return (uint64) DatumGetInt64(value) ^ SIGN_FLIP;
	}
}

/*
 * Forget the summary and filter of the index if this (sub)transaction
 * rolls back.  The caller holds locks that keep everyone else from using
 * them until then.
 */
void
gunique_summary_forget_at_abort(Oid indexoid)
{
	if (nbuilt == maxbuilt)
	{
		maxbuilt = Max(16, maxbuilt * 2);
		built = built == NULL ?
			MemoryContextAlloc(TopMemoryContext,
							   sizeof(SummaryBuilt) * maxbuilt) :
			repalloc(built, sizeof(SummaryBuilt) * maxbuilt);
	}
	built[nbuilt].indexoid = indexoid;
	built[nbuilt].subid = GetCurrentSubTransactionId();
	nbuilt++;
}

/*
 * At abort the transaction still holds the locks that keep everyone else
 * away from the leaves it built.  A prepared transaction may yet roll back:
 * its leaves are summarized afresh once its locks are gone.
 */
static void
summary_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PRE_PREPARE:
			for (int i = 0; i < nbuilt; i++)
				gunique_summary_forget(built[i].indexoid);
			nbuilt = 0;
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			nbuilt = 0;
			break;
		default:
			break;
	}
}

static void
summary_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	int			kept = 0;

	for (int i = 0; i < nbuilt; i++)
	{
		if (built[i].subid == mySubid)
		{
			if (event == SUBXACT_EVENT_ABORT_SUB)
			{
				gunique_summary_forget(built[i].indexoid);
				continue;
			}
			if (event == SUBXACT_EVENT_COMMIT_SUB)
				built[i].subid = parentSubid;
		}
		built[kept++] = built[i];
	}
	nbuilt = kept;
}

/*
 * Called once per process image from _PG_init, not from the shared-memory
 * startup hook, which the postmaster runs again after every crash: each run
 * would take one more of PostgreSQL's few relcache callback slots, and the
 * backends it forks inherit them all.
 */
void
gunique_summary_init(void)
{
	CacheRegisterRelcacheCallback(summary_relcache_callback, (Datum) 0);
	RegisterXactCallback(summary_xact_callback, NULL);
	RegisterSubXactCallback(summary_subxact_callback, NULL);
}

/* Find or make the shared entry of a summarizable index. */
static GuniqueSummary *
summary_lookup(Relation index, Oid typid)
{
	SummaryTag	tag = {MyDatabaseId, RelationGetRelid(index)};
	GuniqueSummary *summary;
	bool		found;

	LWLockAcquire(summaries_lock, LW_SHARED);
	summary = hash_search(summaries, &tag, HASH_FIND, NULL);
	LWLockRelease(summaries_lock);
	if (summary != NULL)
		return summary;

	LWLockAcquire(summaries_lock, LW_EXCLUSIVE);
	summary = hash_search(summaries, &tag, HASH_ENTER_NULL, &found);
	if (summary != NULL && !found)
	{
		pg_atomic_init_u32(&summary->state, SUMMARY_INVALID);
		pg_atomic_init_u64(&summary->min, PG_UINT64_MAX);
		pg_atomic_init_u64(&summary->max, 0);
		pg_atomic_init_u64(&summary->changes, 0);
		gunique_filter_init(summary);
		summary->typid = typid;
	}
	LWLockRelease(summaries_lock);
	return summary;
}

/*
 * The summary of a leaf index, made on first use; NULL if the index is not
 * summarized or the table of summaries is full.
 */
GuniqueSummary *
gunique_summary_for(Relation index)
{
	Oid			indexoid = RelationGetRelid(index);
	SummaryMemo *memo;
	bool		found;
	Oid			typid;

	if (summaries == NULL)
		return NULL;
	if (memos == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(SummaryMemo);
		ctl.hcxt = CacheMemoryContext;
		memos = hash_create("gunique summary memos", 64, &ctl,
							HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	memo = hash_search(memos, &indexoid, HASH_FIND, NULL);
	if (memo != NULL)
		return memo->summary;

	/* Look everything up before making the memo, which may be flushed. */
	typid = summary_type(index);
	{
		GuniqueSummary *summary = OidIsValid(typid) ?
			summary_lookup(index, typid) : NULL;

		if (memos == NULL)
			return summary;
		memo = hash_search(memos, &indexoid, HASH_ENTER, &found);
		memo->summary = summary;
	}
	return memo->summary;
}

/* Widen the summary to cover the key; true if it did not already. */
static bool
summary_widen_key(GuniqueSummary *summary, uint64 key)
{
	uint64		cur = pg_atomic_read_u64(&summary->min);
	bool		widened = false;

	while (key < cur)
	{
		if (pg_atomic_compare_exchange_u64(&summary->min, &cur, key))
		{
			widened = true;
			break;
		}
	}
	cur = pg_atomic_read_u64(&summary->max);
	while (key > cur)
	{
		if (pg_atomic_compare_exchange_u64(&summary->max, &cur, key))
		{
			widened = true;
			break;
		}
	}
	return widened;
}

/*
 * Let the summary cover a key; called before the key enters the btree.
 * True if the summary was widened.
 */
bool
gunique_summary_widen(GuniqueSummary *summary, Datum value)
{
	return summary_widen_key(summary, summary_map(summary->typid, value));
}

/* The key as summaries of its type compare it. */
uint64
gunique_summary_key(GuniqueSummary *summary, Datum value)
{
	return summary_map(summary->typid, value);
}

bool
gunique_summary_needs_compute(GuniqueSummary *summary)
{
	return pg_atomic_read_u32(&summary->state) == SUMMARY_INVALID;
}

/*
 * Widen the summary by the first non-NULL key of the index in one direction,
 * dead entries included.
 */
static void
summary_widen_by_end(GuniqueSummary *summary, Relation heap, Relation index,
					 ScanDirection dir)
{
	Datum		value;

	if (gunique_bt_end_key(heap, index, dir, &value))
		summary_widen_key(summary, summary_map(summary->typid, value));
}

/*
 * Make an invalid summary valid: widen it by the btree's smallest and
 * largest keys.  Only one backend computes; the others go on probing the
 * leaf meanwhile.  The caller holds a lock on the leaf that keeps its btree
 * from being rebuilt, and no key lock.
 */
void
gunique_summary_compute(GuniqueSummary *summary, Relation heap,
						Relation index)
{
	uint32		expected = SUMMARY_INVALID;

	if (!OidIsValid(summary->typid) ||
		!pg_atomic_compare_exchange_u32(&summary->state, &expected,
										SUMMARY_COMPUTING))
		return;

	PG_TRY();
	{
		summary_widen_by_end(summary, heap, index, ForwardScanDirection);
		summary_widen_by_end(summary, heap, index, BackwardScanDirection);
	}
	PG_CATCH();
	{
		pg_atomic_write_u32(&summary->state, SUMMARY_INVALID);
		PG_RE_THROW();
	}
	PG_END_TRY();

	expected = SUMMARY_COMPUTING;
	(void) pg_atomic_compare_exchange_u32(&summary->state, &expected,
										  SUMMARY_VALID);
}

/*
 * Make a summary invalid and take its filters away, for the caller to free
 * once it has released summaries_lock; see the callers.
 */
static void
summary_clear(GuniqueSummary *summary, Oid typid, GuniqueFilterRefs *refs)
{
	pg_atomic_write_u32(&summary->state, SUMMARY_INVALID);
	pg_write_barrier();
	summary->typid = typid;
	pg_atomic_write_u64(&summary->min, PG_UINT64_MAX);
	pg_atomic_write_u64(&summary->max, 0);
	gunique_filter_detach(summary, refs);
}

/*
 * The leaf's btree is being built from its table: whatever the summary
 * held no longer applies.  Called from ambuild, which runs with inserters
 * and probers of the index locked out.
 */
void
gunique_summary_reset(Relation index)
{
	SummaryTag	tag = {MyDatabaseId, RelationGetRelid(index)};
	GuniqueSummary *summary;
	Oid			typid;
	GuniqueFilterRefs refs = {0, 0};

	if (summaries == NULL)
		return;
	gunique_summary_forget_at_abort(RelationGetRelid(index));
	typid = summary_type(index);
	LWLockAcquire(summaries_lock, LW_SHARED);
	summary = hash_search(summaries, &tag, HASH_FIND, NULL);
	if (summary != NULL)
		summary_clear(summary, typid, &refs);
	LWLockRelease(summaries_lock);
	gunique_filter_free_detached(&refs);
	summary_relcache_callback((Datum) 0, RelationGetRelid(index));
}

/*
 * The index is being dropped, with inserters and probers locked out: free
 * its filter, and let an index that gets its OID later start afresh.  If
 * the drop rolls back, the summary is computed again on next use.
 */
void
gunique_summary_forget(Oid indexoid)
{
	SummaryTag	tag = {MyDatabaseId, indexoid};
	GuniqueSummary *summary;
	GuniqueFilterRefs refs = {0, 0};

	if (summaries == NULL)
		return;
	LWLockAcquire(summaries_lock, LW_SHARED);
	summary = hash_search(summaries, &tag, HASH_FIND, NULL);
	if (summary != NULL)
		summary_clear(summary, summary->typid, &refs);
	LWLockRelease(summaries_lock);
	gunique_filter_free_detached(&refs);
}

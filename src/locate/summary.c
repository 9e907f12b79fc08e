/*-------------------------------------------------------------------------
 *
 * summary.c
 *	  The shared summary of each gunique index's keys.
 *
 * Each leaf index whose key keymap.c can map has an entry in shared memory
 * (GuniqueSummary) with a conservative [min, max] of its keys (its key
 * range) and a reference to a bloom filter of them in filter.c's arena
 * (its key filter); the entry of a group's top index, a partitioned index,
 * holds the group's filter and the group's count of changes.  This file
 * owns every rule about them: how an insert covers its key, when a filter
 * is built, grown, extended or dropped, what a rebuild, a drop, an ATTACH
 * or a rollback does to them, and the count of changes that lets probes
 * keep copies.  The proofs are in src/README, I5 and I6.
 *
 * A dropped index's entry is cleared (its filters freed), and an index
 * OID that comes back is reset by its build; a dropped database's entries
 * are removed.  The table is sized for gunique.max_summaries entries and
 * grows past that into the shared memory left spare; when that runs out,
 * new leaves go without a summary and are always searched.  Summaries live
 * in shared memory: after a clean shutdown they are saved and loaded at
 * the next start (persist.c); otherwise (crash recovery, a standby,
 * promotion) every range is invalid until a probe computes it again with
 * two btree descents, and filters are built again in the background
 * (builder.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <math.h>

#include "access/genam.h"
#include "access/itup.h"
#include "access/nbtree.h"
#include "access/xact.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"

#include "compat.h"
#include "am/btread.h"
#include "am/scope.h"
#include "insert/keylock.h"
#include "locate/filter.h"
#include "locate/keymap.h"
#include "locate/rebuilds.h"
#include "locate/summary.h"

#define FILTER_MIN_KEYS		1024
#define FILTER_BUILD_COST	32	/* entries read by a build per btree search */
#define GUNIQUE_SUMMARY_TAG_PRIME 4093	/* the largest prime below the
										 * number of tag and subtag pairs */
#define GUNIQUE_SUMMARY_TAG_MULTIPLIER 995	/* see gunique_summary_leaf_tag */

StaticAssertDecl(GUNIQUE_SUMMARY_TAG_PRIME <=
				 GUNIQUE_FILTER_TAGS * GUNIQUE_FILTER_TAGS,
				 "a leaf's tag must have a subtag below GUNIQUE_FILTER_TAGS");

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
 * Indexes whose summary this transaction made from what only it can see
 * (a btree it built, or a group's leaves read whole), and the
 * subtransaction that made it.  If that rolls back, the summary goes.
 */
typedef struct SummaryBuilt
{
	Oid			indexoid;
	SubTransactionId subid;
} SummaryBuilt;

static SummaryBuilt *built = NULL;
static int	nbuilt = 0;
static int	maxbuilt = 0;

/* Filters taken away from an entry, to be freed (summary_free_detached). */
typedef struct DetachedFilters
{
	uint64		current;
	uint64		next;
} DetachedFilters;

/*
 * A new filter being filled for an entry from a full read of its leaves,
 * or keys being added to the filter it has (ATTACH).
 */
typedef struct SummaryFill
{
	GuniqueSummary *summary;	/* NULL when there is nothing to finish */
	uint64		next;			/* the new filter, until published */
	uint64		old;			/* the filter it replaces, or 0 */
	uint64		ref;			/* the filter being filled: "next", or the
								 * one there is when extending */
	uint64		nkeys;			/* keys read */
	bool		exclusive;		/* nobody else reads or writes the leaves */
	bool		tagged;			/* a group's: its keys are tagged by leaf */
	bool		extending;		/* adding to the filter there is */
	GuniqueSummary *group;		/* the leaf's group's entry, whose count of
								 * changes to bump on publishing, or NULL */
} SummaryFill;

/*
 * The range of a leaf the merge reads whole: its smallest and largest keys,
 * which make the leaf's range valid when the merge ends (src/README,
 * I5).
 */
typedef struct SummaryRangeFill
{
	GuniqueSummary *summary;	/* NULL: the leaf has no range to make */
	bool		any;			/* a key with a range image was read */
	uint64		min;
	uint64		max;
} SummaryRangeFill;

struct GuniqueSummaryMerge
{
	int			nleaves;
	SummaryFill *leaves;		/* one per leaf of the merge */
	SummaryRangeFill *ranges;	/* one per leaf of the merge */
	SummaryFill group;			/* the tree's group filter */
	int		   *tags;			/* each leaf's tag in it */
	GuniqueKeyMap keymap;		/* the tree's keys' hash */
	MemoryContext hashcxt;		/* what hashing the keys allocates */
	uint64		nhashed;
};

static void summary_forget(Oid indexoid);
static void summary_clear(Oid indexoid, bool retype, Oid typid);

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

/*
 * A dropped index's OID may come back as another index: forget memos.
 * Every relcache invalidation (hooks.c).
 */
void
gunique_summary_relcache_inval(Oid relid)
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

/*
 * Forget the summary of the index if this (sub)transaction rolls back.
 * The caller holds locks that keep everyone else but lookups from using it
 * until then; lookups, which lock no leaf they rule out, learn of it from
 * the note (rebuilds.c), made before the caller publishes anything, if
 * the summary may lack keys a rollback brings back ("note").
 */
static void
summary_forget_at_abort(Oid indexoid, bool note)
{
	if (note)
		gunique_rebuilds_note(indexoid);
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
 * away from those summaries.  A prepared transaction may yet roll back: its
 * summaries are made afresh once its locks are gone.  Then the summaries of
 * its rebuilds are final, and their note ends (rebuilds.c).
 */
void
gunique_summary_xact_event(XactEvent event)
{
	switch (event)
	{
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
		case XACT_EVENT_PRE_PREPARE:
			for (int i = 0; i < nbuilt; i++)
				summary_forget(built[i].indexoid);
			nbuilt = 0;
			gunique_rebuilds_end(true);
			break;
		case XACT_EVENT_COMMIT:
		case XACT_EVENT_PARALLEL_COMMIT:
			nbuilt = 0;
			gunique_rebuilds_end(false);
			break;
		default:
			break;
	}
}

void
gunique_summary_subxact_event(SubXactEvent event, SubTransactionId mySubid,
							  SubTransactionId parentSubid)
{
	int			kept = 0;

	for (int i = 0; i < nbuilt; i++)
	{
		if (built[i].subid == mySubid)
		{
			if (event == SUBXACT_EVENT_ABORT_SUB)
			{
				summary_forget(built[i].indexoid);
				continue;
			}
			if (event == SUBXACT_EVENT_COMMIT_SUB)
				built[i].subid = parentSubid;
		}
		built[kept++] = built[i];
	}
	nbuilt = kept;
}

/* Find or make the shared entry of an index whose keys are mapped. */
static GuniqueSummary *
summary_lookup(Relation index, Oid typid)
{
	SummaryTag	tag = {MyDatabaseId, RelationGetRelid(index)};
	GuniqueSummary *summary;
	bool		found;

	LWLockAcquire(summaries_lock, LW_SHARED);
	summary = hash_search(summaries, &tag, HASH_FIND, NULL);
	LWLockRelease(summaries_lock);
	if (summary != NULL && summary->typid != typid)
	{
		/*
		 * The entry of a dropped index whose OID came back: a leaf's build
		 * reset it, but a partitioned index (a group's top) has no build.
		 * Nobody else uses the new index's entry before its first use
		 * here: its creator, or a prober of a tree that locks it.
		 */
		summary_clear(tag.indexoid, true, typid);
	}
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
		pg_atomic_init_u64(&summary->filter, 0);
		pg_atomic_init_u64(&summary->filter_next, 0);
		pg_atomic_init_u32(&summary->filter_busy, 0);
		pg_atomic_init_u32(&summary->filter_searches, 0);
		summary->typid = typid;
	}
	LWLockRelease(summaries_lock);
	return summary;
}

/*
 * The summary of an index, made on first use; NULL if its keys are not
 * mapped (keymap.c) or the table of summaries is full.
 */
GuniqueSummary *
gunique_summary_for(Relation index)
{
	Oid			indexoid = RelationGetRelid(index);
	SummaryMemo *memo;
	GuniqueSummary *summary;
	bool		found;
	Oid			typid;
	GuniqueKeyMap map;

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
	gunique_keymap_make(&map, index, CurrentMemoryContext);
	typid = map.rangetype;
	summary = gunique_keymap_kept(&map) ? summary_lookup(index, typid) : NULL;
	if (memos == NULL)
		return summary;
	memo = hash_search(memos, &indexoid, HASH_ENTER, &found);
	memo->summary = summary;
	return summary;
}

/*
 * The summary of a leaf index, by OID, without making one: for a reader
 * that holds no lock on the leaf (lookup.c), NULL if there is none.  A
 * leaf's entry is reset by the leaf's build, so it is never a dropped
 * index's that had the OID.
 */
GuniqueSummary *
gunique_summary_find(Oid indexoid)
{
	SummaryTag	tag = {MyDatabaseId, indexoid};
	SummaryMemo *memo;
	GuniqueSummary *summary;

	if (summaries == NULL)
		return NULL;
	if (memos != NULL &&
		(memo = hash_search(memos, &indexoid, HASH_FIND, NULL)) != NULL)
		return memo->summary;
	LWLockAcquire(summaries_lock, LW_SHARED);
	summary = hash_search(summaries, &tag, HASH_FIND, NULL);
	LWLockRelease(summaries_lock);
	return summary;
}

/* Widen the range to cover the key; true if it did not already. */
static bool
summary_widen(GuniqueSummary *summary, uint64 key)
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
 * Widen the range by the first non-NULL key of the index in one direction,
 * dead entries included.
 */
static void
summary_widen_by_end(GuniqueSummary *summary, Relation heap, Relation index,
					 ScanDirection dir)
{
	Datum		value;

	if (gunique_bt_end_key(heap, index, dir, &value))
		summary_widen(summary, gunique_keymap_order(summary->typid, value));
}

/* A range being computed when its computer fails: invalid again. */
static void
summary_prepare_cleanup(int code, Datum arg)
{
	GuniqueSummary *summary = (GuniqueSummary *) DatumGetPointer(arg);

	pg_atomic_write_u32(&summary->state, SUMMARY_INVALID);
}

/*
 * Make an invalid range valid, before a probe relies on it: widen it by
 * the btree's smallest and largest keys.  Only one backend computes; the
 * others go on searching the leaf meanwhile.  The caller holds a lock on
 * the leaf that keeps its btree from being rebuilt, and no key lock.
 */
void
gunique_summary_prepare(GuniqueSummary *summary, Relation heap,
						Relation index)
{
	uint32		expected = SUMMARY_INVALID;

	if (summary == NULL || !OidIsValid(summary->typid) ||
		pg_atomic_read_u32(&summary->state) != SUMMARY_INVALID ||
		!pg_atomic_compare_exchange_u32(&summary->state, &expected,
										SUMMARY_COMPUTING))
		return;

	/* an error, or a FATAL (a terminated backend), leaves it invalid */
	PG_ENSURE_ERROR_CLEANUP(summary_prepare_cleanup, PointerGetDatum(summary));
	{
		summary_widen_by_end(summary, heap, index, ForwardScanDirection);
		summary_widen_by_end(summary, heap, index, BackwardScanDirection);
	}
	PG_END_ENSURE_ERROR_CLEANUP(summary_prepare_cleanup,
								PointerGetDatum(summary));

	expected = SUMMARY_COMPUTING;
	(void) pg_atomic_compare_exchange_u32(&summary->state, &expected,
										  SUMMARY_VALID);
}

/*
 * Take the entry's filters away, for the caller to free with
 * summary_free_detached once it holds no LWLock.
 */
static void
summary_detach_filters(GuniqueSummary *summary, DetachedFilters *refs)
{
	refs->current = pg_atomic_exchange_u64(&summary->filter, 0);
	refs->next = pg_atomic_exchange_u64(&summary->filter_next, 0);
	if (refs->next == refs->current)
		refs->next = 0;
	pg_atomic_write_u32(&summary->filter_searches, 0);
	pg_atomic_write_u32(&summary->filter_busy, 0);
}

/*
 * Free filters taken away from an entry.  Light probes read a group's
 * filter under nothing but a key lock, so they are freed only once every
 * key lock has been taken and released since (src/README, I6).
 */
static void
summary_free_detached(DetachedFilters *refs)
{
	if (refs->current == 0 && refs->next == 0)
		return;
	gunique_keylock_barrier();
	if (refs->current != 0)
		gunique_filter_free(refs->current);
	if (refs->next != 0)
		gunique_filter_free(refs->next);
}

/*
 * Make the entry of the index invalid and free its filters, with its
 * inserters and probers locked out; "typid" is its key type from now on.
 */
static void
summary_clear(Oid indexoid, bool retype, Oid typid)
{
	SummaryTag	tag = {MyDatabaseId, indexoid};
	GuniqueSummary *summary;
	DetachedFilters refs = {0, 0};

	if (summaries == NULL)
		return;
	LWLockAcquire(summaries_lock, LW_SHARED);
	summary = hash_search(summaries, &tag, HASH_FIND, NULL);
	if (summary != NULL)
	{
		pg_atomic_write_u32(&summary->state, SUMMARY_INVALID);
		pg_write_barrier();
		if (retype)
			summary->typid = typid;
		pg_atomic_write_u64(&summary->min, PG_UINT64_MAX);
		pg_atomic_write_u64(&summary->max, 0);
		summary_detach_filters(summary, &refs);
	}
	LWLockRelease(summaries_lock);
	summary_free_detached(&refs);
}

/*
 * Forget the index's summary: if it is used again, its range is computed
 * and its filter built afresh.  The caller keeps its inserters and probers
 * out.
 */
static void
summary_forget(Oid indexoid)
{
	summary_clear(indexoid, false, InvalidOid);
}

/*
 * The leaf's btree is being built from its table (ambuild: CREATE INDEX,
 * REINDEX, TRUNCATE, VACUUM FULL, CLUSTER), with its inserters and probers
 * locked out: whatever the summary held no longer applies, nor does it if
 * the build rolls back.
 */
void
gunique_summary_leaf_rebuilt(Relation heap, Relation index)
{
	GuniqueKeyMap map;

	if (summaries == NULL)
		return;

	/*
	 * Noted if the build can lose entries that lookups with older
	 * snapshots, or with dirty ones before a rollback, need: only a build
	 * over an emptied heap (TRUNCATE) of an index other transactions may
	 * have read.  REINDEX, VACUUM FULL and CLUSTER keep every entry some
	 * snapshot may see, and an index made in this transaction has none.
	 */
	summary_forget_at_abort(RelationGetRelid(index),
							index->rd_createSubid == InvalidSubTransactionId &&
							RelationGetNumberOfBlocks(heap) == 0);
	gunique_keymap_make(&map, index, CurrentMemoryContext);
	summary_clear(RelationGetRelid(index), true, map.rangetype);
	gunique_summary_relcache_inval(RelationGetRelid(index));
}

/*
 * The index is being dropped, with inserters and probers locked out.  If
 * the drop rolls back, the summary is made again on next use.  Its key
 * type stays: other backends keep their memos of the entry across a
 * rollback (an aborted transaction sends no invalidation), and a backend
 * without one that found the type changed would clear the entry again
 * while they use it, freeing a filter a builder is filling.  An index that
 * gets the OID after a committed drop, whose memos are gone, and maps keys
 * otherwise has the entry cleared by summary_lookup.
 */
void
gunique_summary_index_dropped(Oid indexoid)
{
	summary_forget(indexoid);
}

/*
 * A database is dropped, or made with an OID that a dropped one had: no
 * entry of its indexes may outlive it, to be saved at shutdown or trusted
 * by indexes that a new database copied from its template with the same
 * OIDs (src/README, "Saved filters").  No backend is connected to it.
 */
void
gunique_summary_database_gone(Oid dbid)
{
	HASH_SEQ_STATUS status;
	GuniqueSummary *summary;
	List	   *refs = NIL;
	ListCell   *lc;

	if (summaries == NULL)
		return;
	LWLockAcquire(summaries_lock, LW_EXCLUSIVE);
	hash_seq_init(&status, summaries);
	while ((summary = hash_seq_search(&status)) != NULL)
	{
		DetachedFilters *r;

		if (summary->tag.dbid != dbid)
			continue;
		r = palloc(sizeof(DetachedFilters));
		pg_atomic_write_u32(&summary->state, SUMMARY_INVALID);
		summary_detach_filters(summary, r);
		refs = lappend(refs, r);
		/* removing the entry just returned is allowed during a scan */
		(void) hash_search(summaries, &summary->tag, HASH_REMOVE, NULL);
	}
	LWLockRelease(summaries_lock);
	foreach(lc, refs)
		summary_free_detached((DetachedFilters *) lfirst(lc));
	list_free_deep(refs);
}

/*
 * How many entries a leaf page of a new btree holds, judged by the widths
 * of the index's columns (a varlena's as PostgreSQL guesses it for the
 * planner), at nbtree's default fillfactor.
 */
static uint64
summary_keys_per_page(Relation index)
{
	TupleDesc	desc = RelationGetDescr(index);
	Size		width = sizeof(IndexTupleData);
	Size		room;

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);

		width = att_align_nominal(width, att->attalign);
		if (att->attlen > 0)
			width += att->attlen;
		else
			width += get_typavgwidth(att->atttypid, att->atttypmod);
	}
	width = MAXALIGN(width) + sizeof(ItemIdData);
	room = (BLCKSZ - SizeOfPageHeaderData - sizeof(BTPageOpaqueData)) *
		BTREE_DEFAULT_FILLFACTOR / 100;
	return Max(room / width, 1);
}

/*
 * About how many keys a leaf holds.  With the counts of the last build,
 * VACUUM or ANALYZE, their density scaled to the leaf's size now, as the
 * planner scales a table's (estimate_rel_size); without them, or if they
 * counted no key, by the width of its entries.  Key filters are sized by
 * this, so that their bytes per key do not depend on the key's width: a
 * fixed guess of keys per page made a text key's filters half as large
 * again as a bigint key's.
 */
uint64
gunique_summary_keys_estimate(Relation index)
{
	BlockNumber blocks = RelationGetNumberOfBlocks(index);
	BlockNumber relpages = (BlockNumber) index->rd_rel->relpages;
	double		reltuples = index->rd_rel->reltuples;

	if (relpages > 0 && reltuples > 0)
	{
		if (blocks <= relpages)
			return (uint64) reltuples;
		return (uint64) ceil(reltuples / relpages * blocks);
	}
	return (uint64) blocks * summary_keys_per_page(index);
}

/*
 * The tag of a leaf's keys in its group's filter (filter.c), a tag and a
 * subtag, by the leaf's table, which stays the same when REINDEX
 * CONCURRENTLY gives it another index, so that both indexes tag the keys
 * alike.  The partitions of a table are mostly created one after another,
 * their OIDs a fixed step apart, and a hash would give about 60 of 512
 * such leaves another's tag and subtag, where a key that comes back is
 * then looked for too.  So the pair is the table's OID times a multiplier,
 * modulo a prime just under the number of pairs: up to that prime many
 * OIDs a fixed step apart (any step but a multiple of the prime) get
 * distinct pairs.  The multiplier was chosen to spread such leaves over
 * the tags and the subtags: for 64 to 1,000 leaves, the leaves that share
 * a leaf's tag or subtag are at most 1.3 times as many as with an even
 * spread for every step up to 48, and 2.2 times up to 100 (src/README,
 * "Locating a key").  Leaves created far apart share pairs by chance, as
 * with a hash.
 */
int
gunique_summary_leaf_tag(Oid heapoid)
{
	uint32		v = (uint32) (((uint64) (heapoid % GUNIQUE_SUMMARY_TAG_PRIME) *
							   GUNIQUE_SUMMARY_TAG_MULTIPLIER) %
							  GUNIQUE_SUMMARY_TAG_PRIME);

	return GUNIQUE_FILTER_TAG_MAKE((int) (v % GUNIQUE_FILTER_TAGS),
								   (int) (v / GUNIQUE_FILTER_TAGS));
}

static int
summary_index_tag(Relation index)
{
	return gunique_summary_leaf_tag(index->rd_index->indrelid);
}

/* Could a filter be built for the entry, and is none there or on its way? */
bool
gunique_summary_filter_missing(GuniqueSummary *summary)
{
	return gunique_filter_arena_ready() && gunique_key_filters &&
		pg_atomic_read_u64(&summary->filter) == 0 &&
		pg_atomic_read_u64(&summary->filter_next) == 0 &&
		pg_atomic_read_u32(&summary->filter_busy) == 0;
}

/*
 * Has the entry outgrown its filter, with no bigger one on its way?  (Its
 * inserts ask for a bigger one; a build in the background may be asked
 * for it again later.)
 */
bool
gunique_summary_filter_full(GuniqueSummary *summary)
{
	uint64		ref = pg_atomic_read_u64(&summary->filter);

	return gunique_filter_arena_ready() && ref != 0 &&
		pg_atomic_read_u64(&summary->filter_next) == 0 &&
		pg_atomic_read_u32(&summary->filter_busy) == 0 &&
		gunique_filter_full(ref);
}

/*
 * How many searches of a leaf without a filter a build is worth: building
 * reads every entry, about as costly as FILTER_BUILD_COST entries per
 * search.  A leaf searched rarely (keys that mostly follow the partitioning)
 * is not worth it.
 */
static uint32
summary_filter_threshold(Relation index)
{
	uint64		keys = gunique_summary_keys_estimate(index);

	return (uint32) Min(Max(keys / FILTER_BUILD_COST, 16), PG_UINT32_MAX);
}

/*
 * A probe searched the leaf's btree, which has no filter: is it time to
 * build one?  The count of such searches is shared, so that one-row
 * statements add up; "index" gives the threshold, once per statement.
 */
bool
gunique_summary_searched(GuniqueSummary *summary, Relation index,
						 uint32 *threshold)
{
	if (!gunique_summary_filter_missing(summary))
		return false;
	if (*threshold == 0)
		*threshold = summary_filter_threshold(index);
	return pg_atomic_add_fetch_u32(&summary->filter_searches, 1) >= *threshold;
}

/*
 * Let the entry's filters hold a key, before nbtree inserts it: "next"
 * first, since a builder publishes the new filter before clearing it.
 * True if the entry has outgrown its filter and nobody is building a
 * bigger one.
 */
static bool
summary_filter_add(GuniqueSummary *summary, uint64 hash, int tag)
{
	uint64		next = pg_atomic_read_u64(&summary->filter_next);
	uint64		current;
	bool		full = false;

	pg_read_barrier();
	current = pg_atomic_read_u64(&summary->filter);
	if (next != 0)
		(void) gunique_filter_set(next, hash, tag, true);
	if (current != 0 && current != next)
		full = gunique_filter_set(current, hash, tag, true);
	return full && next == 0 &&
		pg_atomic_read_u32(&summary->filter_busy) == 0;
}

/*
 * Let the leaf's summary and its group's filter cover a key before nbtree
 * inserts it into the leaf: under the inserter's key lock when it probes.
 * The group's filter gets the key even if the leaf has no summary (the
 * table was full): probes from the other leaves rely on it.  A widened
 * range bumps the group's count of changes, so that probes drop their
 * copies.  "index" is the leaf, whose tag the group's filter gives the key.
 * Returns GUNIQUE_COVER_* flags for what to build afterwards.
 */
int
gunique_summary_cover(GuniqueSummary *summary, GuniqueSummary *group,
					  GuniqueKeyImage *key, Relation index)
{
	int			result = 0;
	int			tag = summary_index_tag(index);

	if (key->hashed && group != NULL &&
		summary_filter_add(group, key->hash, tag))
		result |= GUNIQUE_COVER_GROUP_FULL;
	if (summary == NULL)
		return result;
	if (key->ordered && summary_widen(summary, key->order) && group != NULL)
		pg_atomic_fetch_add_u64(&group->changes, 1);
	if (key->hashed && summary_filter_add(summary, key->hash, tag))
		result |= GUNIQUE_COVER_LEAF_FULL;
	return result;
}

/*
 * How many keys a new filter should be made for: what the leaves seem to
 * hold, or what the filter it replaces holds, and a quarter more, so that
 * a growing leaf is read again only after it has grown by a quarter.
 */
static uint64
summary_filter_keys_wanted(GuniqueSummary *summary, uint64 estimate)
{
	uint64		current = pg_atomic_read_u64(&summary->filter);
	uint64		keys = estimate;

	if (current != 0)
		keys = Max(keys, gunique_filter_count(current));
	keys += keys / 4;
	return Max(keys, FILTER_MIN_KEYS);
}

/*
 * Start filling a new filter for an entry, of about "estimate" keys,
 * published as "next" so that inserts set their bits in it too; the caller
 * then takes the key lock barrier before it reads the leaves.  With
 * "exclusive", the caller's locks keep every inserter and prober of the
 * leaves out until it is done: no barrier is needed, and bits are set
 * without atomic operations.  A group's filter ("tagged") tags its keys by
 * leaf.  False if another backend is building one or the arena has no
 * room.
 */
static bool
summary_fill_begin(SummaryFill *fill, GuniqueSummary *summary,
				   uint64 estimate, bool exclusive, bool tagged)
{
	uint32		expected = 0;
	uint64		old;
	uint64		next;

	/* "summary" stays NULL unless there is a filter to fill (callers test it) */
	memset(fill, 0, sizeof(SummaryFill));
	if (!gunique_filter_arena_ready() || summary == NULL ||
		!pg_atomic_compare_exchange_u32(&summary->filter_busy, &expected, 1))
		return false;
	old = pg_atomic_read_u64(&summary->filter);
	/* an error here must not leave the entry busy until the next restart */
	PG_TRY();
	{
		next = gunique_filter_alloc(summary_filter_keys_wanted(summary,
															   estimate),
									tagged);
	}
	PG_CATCH();
	{
		pg_atomic_write_u32(&summary->filter_busy, 0);
		PG_RE_THROW();
	}
	PG_END_TRY();
	if (next == 0)
	{
		/* No room: keep the filter there is, and ask again at twice its load */
		if (old != 0)
			gunique_filter_set_capacity(old, 2 * gunique_filter_count(old));
		pg_atomic_write_u32(&summary->filter_busy, 0);
		return false;
	}
	fill->summary = summary;
	fill->exclusive = exclusive;
	fill->tagged = tagged;
	fill->old = old;
	fill->next = next;
	fill->ref = fill->next;
	pg_atomic_write_u64(&summary->filter_next, fill->next);
	return true;
}

/*
 * Add keys to the filter there is, with every inserter and prober of the
 * leaves it covers locked out (ATTACH adds a partition to a group): false
 * if there is none.
 */
static bool
summary_extend_begin(SummaryFill *fill, GuniqueSummary *summary)
{
	memset(fill, 0, sizeof(SummaryFill));
	if (!gunique_filter_arena_ready() || summary == NULL ||
		pg_atomic_read_u64(&summary->filter) == 0 ||
		pg_atomic_read_u64(&summary->filter_next) != 0 ||
		pg_atomic_read_u32(&summary->filter_busy) != 0)
		return false;
	pg_atomic_write_u32(&summary->filter_busy, 1);
	fill->summary = summary;
	fill->exclusive = true;
	fill->extending = true;
	fill->ref = pg_atomic_read_u64(&summary->filter);
	return true;
}

/* A key read from the leaves after the barrier: its hash, its leaf's tag. */
static inline void
summary_fill_hash(SummaryFill *fill, uint64 hash, int tag)
{
	/* counted all at once when published */
	if (fill->exclusive)
		gunique_filter_set_alone(fill->ref, hash, tag);
	else
		(void) gunique_filter_set(fill->ref, hash, tag, false);
	fill->nkeys++;
}

/*
 * Every entry of the leaves has been read: let probes use the new filter.
 * A leaf's group counts the change first, since probes keep the old
 * reference while the count stays put.  The caller then takes the barrier
 * again (unless exclusive) and calls summary_fill_done.
 */
static void
summary_fill_publish(SummaryFill *fill)
{
	GuniqueSummary *summary = fill->summary;

	gunique_filter_add_count(fill->ref, fill->nkeys);
	if (fill->extending)
		return;
	if (fill->group != NULL)
		pg_atomic_fetch_add_u64(&fill->group->changes, 1);
	/* publish before clearing "next": see summary_filter_add */
	pg_write_barrier();
	pg_atomic_write_u64(&summary->filter, fill->next);
	pg_write_barrier();
	pg_atomic_write_u64(&summary->filter_next, 0);
	fill->next = 0;
}

/*
 * The fill failed: stop inserts from setting bits in its filter.  An
 * extension that failed may have set some of the keys' bits, which only
 * adds false positives.
 */
static void
summary_fill_abort(SummaryFill *fill)
{
	if (fill->summary != NULL && fill->next != 0)
		pg_atomic_write_u64(&fill->summary->filter_next, 0);
}

/*
 * After the barrier that follows publishing (or an error): no probe or
 * insert reads the filter that was replaced, or the one that was being
 * filled if the fill failed.
 */
static void
summary_fill_done(SummaryFill *fill)
{
	GuniqueSummary *summary = fill->summary;

	if (summary == NULL)
		return;
	if (fill->next != 0)
		gunique_filter_free(fill->next);
	else if (fill->old != 0 && !fill->extending)
		gunique_filter_free(fill->old);
	pg_atomic_write_u32(&summary->filter_searches, 0);
	pg_atomic_write_u32(&summary->filter_busy, 0);
	fill->summary = NULL;
}

/*
 * The hash of the key of an index entry (keymap.c), in "hashcxt", which
 * the caller resets now and then: a hash function may detoast.  False if
 * the key has no hash (a NULL that conflicts with nothing).
 */
static bool
summary_hash_entry(GuniqueKeyMap *map, int nkeys, Datum *values,
				   bool *isnull, MemoryContext hashcxt, uint64 *hash)
{
	MemoryContext oldcxt = MemoryContextSwitchTo(hashcxt);
	GuniqueKeyImage image;

	gunique_keymap_image(&image, map, values, isnull);
	MemoryContextSwitchTo(oldcxt);
	*hash = image.hash;
	return image.hashed;
}

/* Read every key of a leaf's btree into the filter being filled. */
static void
summary_fill_leaf(SummaryFill *fill, Relation index)
{
	TupleDesc	desc = RelationGetDescr(index);
	BufferAccessStrategy strategy = GetAccessStrategy(BAS_BULKREAD);
	MemoryContext hashcxt = AllocSetContextCreate(CurrentMemoryContext,
												  "gunique filter build",
												  ALLOCSET_SMALL_SIZES);
	GuniqueKeyMap map;
	GuniqueBtReader reader;
	IndexTuple	itup;
	uint64		n = 0;
	int			tag = summary_index_tag(index);

	gunique_keymap_make(&map, index, CurrentMemoryContext);
	gunique_bt_reader_init(&reader, index, strategy);
	if (gunique_bt_reader_start(&reader))
		while ((itup = gunique_bt_reader_next(&reader)) != NULL)
		{
			Datum		values[INDEX_MAX_KEYS];
			bool		isnull[INDEX_MAX_KEYS];
			uint64		hash;

			for (int i = 0; i < map.nkeys; i++)
				values[i] = index_getattr(itup, i + 1, desc, &isnull[i]);
			if (summary_hash_entry(&map, map.nkeys, values, isnull, hashcxt,
								   &hash))
				summary_fill_hash(fill, hash, tag);
			if ((++n & 1023) == 0)
				MemoryContextReset(hashcxt);
		}
	gunique_bt_reader_end(&reader);
	FreeAccessStrategy(strategy);
	MemoryContextDelete(hashcxt);
}

/*
 * A build that failed: stop inserts from setting bits in its filter, take
 * the barrier, free it and let the entry be built again.
 */
static void
summary_build_cleanup(int code, Datum arg)
{
	SummaryFill *fill = (SummaryFill *) DatumGetPointer(arg);

	summary_fill_abort(fill);
	gunique_keylock_barrier();
	summary_fill_done(fill);
}

/*
 * Give an entry a filter, or a bigger one, from the btrees of its leaves,
 * while inserts go on: publish it for inserts, take the barrier, read the
 * leaves, publish it for probes, take the barrier again and free the old
 * one (src/README, I6).  The caller holds locks on the leaves
 * that keep their btrees from being rebuilt, and no key lock.  Does nothing
 * if another backend is building one or the arena has no room.  A group's
 * filter ("tagged") tags each key by its leaf.
 */
static void
summary_build(GuniqueSummary *summary, Relation *indexes, int n,
			  GuniqueSummary *group, bool tagged)
{
	SummaryFill fill;
	uint64		estimate = 0;

	for (int i = 0; i < n; i++)
		estimate += gunique_summary_keys_estimate(indexes[i]);
	if (!summary_fill_begin(&fill, summary, estimate, false, tagged))
		return;
	fill.group = group;
	/* an error, or a FATAL (a terminated worker), lets the entry go */
	PG_ENSURE_ERROR_CLEANUP(summary_build_cleanup, PointerGetDatum(&fill));
	{
		gunique_keylock_barrier();
		for (int i = 0; i < n; i++)
			summary_fill_leaf(&fill, indexes[i]);
	}
	PG_END_ENSURE_ERROR_CLEANUP(summary_build_cleanup, PointerGetDatum(&fill));
	summary_fill_publish(&fill);
	if (fill.old != 0)
		gunique_keylock_barrier();
	summary_fill_done(&fill);
}

/*
 * Give a leaf a filter, or a bigger one: probes searched it often enough
 * without one, or it outgrew the one it has.  Its group ("group", or NULL)
 * counts the change.
 */
void
gunique_summary_build_filter(GuniqueSummary *summary, Relation index,
							 GuniqueSummary *group)
{
	summary_build(summary, &index, 1, group, false);
}

/*
 * Build a group's filter from all its leaves, "index" among them, unless
 * this transaction has changed the tree (DETACH, DROP, TRUNCATE, REINDEX
 * of a member, ...): the filter would hold the keys of the leaves as this
 * transaction sees them, and light probes of other transactions, which lock
 * no leaf, would rely on it before a rollback brings the old leaves back.
 * The filter there is keeps taking every key meanwhile; a later
 * transaction replaces it.  *tree_changed is the caller's memo of the
 * answer: 0 until asked, then 'y' or 'n'.
 */
void
gunique_summary_build_group_filter(GuniqueSummary *group, Relation *leaves,
								   int n, Relation index, char *tree_changed)
{
	if (*tree_changed == 0)
		*tree_changed = gunique_tree_changed_here(index) ? 'y' : 'n';
	if (*tree_changed == 'y')
		return;
	summary_build(group, leaves, n, NULL, n >= GUNIQUE_GROUP_TAG_MIN_LEAVES);
}

/*
 * The group filters of the tree's partitioned indexes below the top may
 * no longer match their groups (a partitioned table attached under the
 * tree joins its group): forget them, with every writer locked out.
 */
static void
summary_forget_subgroups(Relation topindex)
{
	List	   *members = find_all_inheritors(RelationGetRelid(topindex),
											  NoLock, NULL);
	ListCell   *lc;

	foreach(lc, members)
	{
		Oid			member = lfirst_oid(lc);

		if (member != RelationGetRelid(topindex) &&
			get_rel_relkind(member) == RELKIND_PARTITIONED_INDEX)
			summary_forget(member);
	}
	list_free(members);
}

/*
 * A tree whose top is not valid will be (concurrent.c): forget the group
 * filters of its partitioned indexes, which leaves may have joined without
 * a merge that filled them (an ATTACH to the invalid tree).  Nobody reads
 * or builds them while the top is not valid (scope.c, builder.c); a reader
 * from before is waited out before they are freed (summary_free_detached).
 */
void
gunique_summary_forget_groups(Oid topindex)
{
	List	   *members = find_all_inheritors(topindex, NoLock, NULL);
	ListCell   *lc;

	foreach(lc, members)
	{
		if (get_rel_relkind(lfirst_oid(lc)) == RELKIND_PARTITIONED_INDEX)
			summary_forget(lfirst_oid(lc));
	}
	list_free(members);
}

/*
 * End every fill of a merge that has begun: publish each, or abandon it
 * (its entry keeps the filter it had).
 */
static void
summary_merge_fills_end(GuniqueSummaryMerge *merge, bool complete)
{
	for (int i = 0; i <= merge->nleaves; i++)
	{
		SummaryFill *fill = i < merge->nleaves ?
			&merge->leaves[i] : &merge->group;

		if (fill->summary == NULL)
			continue;
		if (complete)
			summary_fill_publish(fill);
		else
			summary_fill_abort(fill);
		summary_fill_done(fill);
	}
}

/*
 * The merge of a tree's leaves (CREATE INDEX, ATTACH) is about to read
 * them, with every writer locked out (the check's ShareLock).  Each leaf
 * it reads whole ("whole") gets a new filter from what it reads, and so
 * does the tree's group filter if every leaf is read whole; if only the
 * attached leaves are (ATTACH), their keys are added to the group filter
 * there is, or it goes.  An empty leaf (nbtree's metapage alone) gets no
 * filter: its first inserts would outgrow it, and if their keys follow the
 * partitioning no probe ever reads it.  Feed the keys read with
 * gunique_summary_merge_key, and finish with gunique_summary_merge_end.
 */
GuniqueSummaryMerge *
gunique_summary_merge_begin(Relation topindex, Relation *leaves, bool *whole,
							int n)
{
	GuniqueSummaryMerge *merge = palloc0(sizeof(GuniqueSummaryMerge));
	GuniqueSummary *group = gunique_summary_for(topindex);
	GuniqueSummary **entries = palloc(sizeof(GuniqueSummary *) * Max(n, 1));
	uint64	   *keys = palloc(sizeof(uint64) * Max(n, 1));
	BlockNumber *blocks = palloc(sizeof(BlockNumber) * Max(n, 1));
	bool		all = true;
	uint64		estimate = 0;

	/*
	 * Everything that may fail (catalog and relation size lookups, memory)
	 * comes before the first fill begins: a fill begun marks its entry busy
	 * until gunique_summary_merge_end, which the caller reaches only once
	 * this returns (an error as the fills begin ends those begun, below).
	 */
	merge->nleaves = n;
	merge->leaves = palloc0(sizeof(SummaryFill) * Max(n, 1));
	merge->ranges = palloc0(sizeof(SummaryRangeFill) * Max(n, 1));
	merge->tags = palloc(sizeof(int) * Max(n, 1));
	merge->hashcxt = AllocSetContextCreate(CurrentMemoryContext,
										   "gunique merge hashes",
										   ALLOCSET_SMALL_SIZES);
	gunique_keymap_make(&merge->keymap, topindex, CurrentMemoryContext);
	summary_forget_subgroups(topindex);
	for (int i = 0; i < n; i++)
	{
		blocks[i] = RelationGetNumberOfBlocks(leaves[i]);
		merge->tags[i] = summary_index_tag(leaves[i]);
		keys[i] = gunique_summary_keys_estimate(leaves[i]);
		entries[i] = whole[i] ? gunique_summary_for(leaves[i]) : NULL;
		if (entries[i] != NULL && OidIsValid(entries[i]->typid))
			merge->ranges[i].summary = entries[i];
		estimate += keys[i];
		all = all && whole[i];
	}

	/*
	 * A group filter read whole holds the leaves this transaction sees,
	 * which a rollback may change (an earlier DETACH, DROP or TRUNCATE): it
	 * goes then.  The check's locks keep every inserter away until the end
	 * of the transaction.  Keys added to the filter there is leave it a
	 * superset whatever happens.
	 */
	if (n >= GUNIQUE_GROUP_FILTER_MIN_LEAVES && all)
		summary_forget_at_abort(RelationGetRelid(topindex), true);

	/*
	 * A fill can still fail as it begins (making a filter starts a
	 * subtransaction, and may attach a new segment of the area): the fills
	 * begun before it end, abandoned, so that no entry stays busy.
	 */
	PG_TRY();
	{
		for (int i = 0; i < n; i++)
			if (entries[i] != NULL && blocks[i] > 1)
				(void) summary_fill_begin(&merge->leaves[i], entries[i],
										  keys[i], true, false);
		if (n < GUNIQUE_GROUP_FILTER_MIN_LEAVES)
			summary_forget(RelationGetRelid(topindex));
		else if (!(all ?
				   summary_fill_begin(&merge->group, group, estimate, true,
									  n >= GUNIQUE_GROUP_TAG_MIN_LEAVES) :
				   summary_extend_begin(&merge->group, group)))
		{
			/* a group filter that cannot take these keys must not stay */
			summary_forget(RelationGetRelid(topindex));
		}
	}
	PG_CATCH();
	{
		summary_merge_fills_end(merge, false);
		PG_RE_THROW();
	}
	PG_END_TRY();
	pfree(entries);
	pfree(keys);
	pfree(blocks);
	return merge;
}

/* The key of an entry of leaf "leaf", read whole. */
void
gunique_summary_merge_key(GuniqueSummaryMerge *merge, int leaf,
						  Datum *values, bool *isnull)
{
	SummaryFill *fill = &merge->leaves[leaf];
	SummaryRangeFill *range = &merge->ranges[leaf];
	uint64		hash;

	if (range->summary != NULL && !isnull[0])
	{
		uint64		order = gunique_keymap_order(range->summary->typid,
												 values[0]);

		range->min = range->any ? Min(range->min, order) : order;
		range->max = range->any ? Max(range->max, order) : order;
		range->any = true;
	}
	if (fill->summary == NULL && merge->group.summary == NULL)
		return;
	if ((++merge->nhashed & 1023) == 0)
		MemoryContextReset(merge->hashcxt);
	if (!summary_hash_entry(&merge->keymap, merge->keymap.nkeys, values,
							isnull, merge->hashcxt, &hash))
		return;
	if (fill->summary != NULL)
		summary_fill_hash(fill, hash, merge->tags[leaf]);
	if (merge->group.summary != NULL)
		summary_fill_hash(&merge->group, hash, merge->tags[leaf]);
}

/*
 * A leaf read whole, with its writers locked out: its smallest and largest
 * keys are the btree's (entries dead to everyone aside), so its range is
 * valid once widened by them, as gunique_summary_prepare would make it,
 * and no probe of the tree's first statements has to read the btree's ends.
 */
static void
summary_range_read_whole(SummaryRangeFill *range)
{
	uint32		expected = SUMMARY_INVALID;

	if (range->summary == NULL ||
		pg_atomic_read_u32(&range->summary->state) != SUMMARY_INVALID)
		return;
	if (range->any)
	{
		summary_widen(range->summary, range->min);
		summary_widen(range->summary, range->max);
	}
	(void) pg_atomic_compare_exchange_u32(&range->summary->state, &expected,
										  SUMMARY_VALID);
}

/*
 * Publish the filters once every entry is read, or drop them on error; make
 * the ranges of the leaves read whole valid.
 */
void
gunique_summary_merge_end(GuniqueSummaryMerge *merge, bool complete)
{
	MemoryContextDelete(merge->hashcxt);
	for (int i = 0; complete && i < merge->nleaves; i++)
		summary_range_read_whole(&merge->ranges[i]);
	summary_merge_fills_end(merge, complete);
}

/* Is a filter being built for any entry? */
static bool
summary_any_busy(void)
{
	HASH_SEQ_STATUS status;
	GuniqueSummary *summary;
	bool		busy = false;

	LWLockAcquire(summaries_lock, LW_SHARED);
	hash_seq_init(&status, summaries);
	while (!busy && (summary = hash_seq_search(&status)) != NULL)
		busy = pg_atomic_read_u32(&summary->filter_busy) != 0;
	if (busy)
		hash_seq_term(&status);
	LWLockRelease(summaries_lock);
	return busy;
}

/*
 * At shutdown, once no backend is left (persist.c): a copy of every entry
 * that has a valid range or a filter, palloc'd; *n of them.  A process
 * that outlives the backends (a walsender can run SQL) must not free a
 * filter while it is copied: no filter is made from now on, and builds
 * under way are waited for.  NULL if one is still under way after
 * "wait_ms".
 */
GuniqueSummarySaved *
gunique_summary_save_all(int *n, int wait_ms)
{
	HASH_SEQ_STATUS status;
	GuniqueSummary *summary;
	GuniqueSummarySaved *all;
	long		max;

	*n = 0;
	if (summaries == NULL)
		return NULL;
	gunique_filter_freeze();
	for (int waited = 0; summary_any_busy(); waited += 10)
	{
		if (waited >= wait_ms)
			return NULL;
		pg_usleep(10000L);
	}
	LWLockAcquire(summaries_lock, LW_SHARED);
	max = hash_get_num_entries(summaries);
	all = palloc(sizeof(GuniqueSummarySaved) * Max(max, 1));
	hash_seq_init(&status, summaries);
	while ((summary = hash_seq_search(&status)) != NULL)
	{
		GuniqueSummarySaved *saved = &all[*n];

		saved->tag = summary->tag;
		saved->typid = summary->typid;
		saved->state = pg_atomic_read_u32(&summary->state);
		if (saved->state != SUMMARY_VALID)
			saved->state = SUMMARY_INVALID;
		saved->min = pg_atomic_read_u64(&summary->min);
		saved->max = pg_atomic_read_u64(&summary->max);
		saved->changes = pg_atomic_read_u64(&summary->changes);
		saved->filter = pg_atomic_read_u64(&summary->filter);
		if (saved->state == SUMMARY_VALID || saved->filter != 0)
			(*n)++;
		if (*n == max)
		{
			hash_seq_term(&status);
			break;
		}
	}
	LWLockRelease(summaries_lock);
	return all;
}

/*
 * In the postmaster at start, before any other process exists: an entry
 * as it was at the last clean shutdown, its filter already loaded.  False
 * if the table of entries is full.
 */
bool
gunique_summary_load(const GuniqueSummarySaved *saved)
{
	GuniqueSummary *summary;
	bool		found;

	Assert(!IsUnderPostmaster);
	summary = hash_search(summaries, &saved->tag, HASH_ENTER_NULL, &found);
	if (summary == NULL || found)
		return false;
	summary->typid = saved->typid;
	pg_atomic_init_u32(&summary->state, saved->state);
	pg_atomic_init_u64(&summary->min, saved->min);
	pg_atomic_init_u64(&summary->max, saved->max);
	pg_atomic_init_u64(&summary->changes, saved->changes);
	pg_atomic_init_u64(&summary->filter, saved->filter);
	pg_atomic_init_u64(&summary->filter_next, 0);
	pg_atomic_init_u32(&summary->filter_busy, 0);
	pg_atomic_init_u32(&summary->filter_searches, 0);
	return true;
}

/*
 * In the postmaster at start: forget a summary that gunique_summary_load
 * made, whose file proved not whole after all.
 */
void
gunique_summary_unload(const GuniqueSummarySaved *saved)
{
	Assert(!IsUnderPostmaster);
	(void) hash_search(summaries, &saved->tag, HASH_REMOVE, NULL);
}

/*-------------------------------------------------------------------------
 *
 * stats.c
 *	  What the insert-time probes of each leaf index did.
 *
 * Each backend counts in local memory, per leaf index it inserts into, and
 * adds its counts to shared memory when a statement or transaction ends
 * (probescan.c calls gunique_stats_flush), so that rows inserted in bulk
 * touch no shared cache line.  gunique_probe_stats() shows the totals since
 * the server started or gunique_probe_stats_reset() was called.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "executor/executor.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "gunique.h"
#include "admin/stats.h"
#include "locate/filter.h"

#define GUNIQUE_STATS_ENTRIES	4096

typedef struct StatsTag
{
	Oid			dbid;
	Oid			indexoid;
} StatsTag;

typedef struct SharedStats
{
	StatsTag	tag;			/* hash key */
	pg_atomic_uint64 counts[GUNIQUE_NSTATS];
} SharedStats;

typedef struct LocalStats
{
	Oid			indexoid;		/* hash key */
	uint64		counts[GUNIQUE_NSTATS];
} LocalStats;

static HTAB *shared_stats = NULL;
static LWLock *stats_lock = NULL;
static HTAB *local_stats = NULL;
static LocalStats *local_last = NULL;	/* the entry added to last: inserts
										 * into one partition come in runs */
static bool local_pending = false;

PG_FUNCTION_INFO_V1(gunique_probe_stats);
PG_FUNCTION_INFO_V1(gunique_probe_stats_reset);
PG_FUNCTION_INFO_V1(gunique_filter_memory_info);

void
gunique_stats_shmem_request(void)
{
	RequestAddinShmemSpace(hash_estimate_size(GUNIQUE_STATS_ENTRIES,
											  sizeof(SharedStats)));
	RequestNamedLWLockTranche("gunique stats", 1);
}

void
gunique_stats_shmem_startup(void)
{
	HASHCTL		info;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	info.keysize = sizeof(StatsTag);
	info.entrysize = sizeof(SharedStats);
	shared_stats = ShmemInitHash("gunique stats",
								 GUNIQUE_STATS_ENTRIES, GUNIQUE_STATS_ENTRIES,
								 &info, HASH_ELEM | HASH_BLOBS);
	stats_lock = &(GetNamedLWLockTranche("gunique stats"))->lock;
	LWLockRelease(AddinShmemInitLock);
}

/* Count what one insert into a leaf index did. */
void
gunique_stats_add(Relation index, const uint64 *counts)
{
	Oid			indexoid = RelationGetRelid(index);
	LocalStats *local;
	bool		found;

	if (shared_stats == NULL)
		return;
	if (local_stats == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(LocalStats);
		ctl.hcxt = TopMemoryContext;
		local_stats = hash_create("gunique local stats", 16, &ctl,
								  HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	local = local_last;
	if (local == NULL || local->indexoid != indexoid)
	{
		local = hash_search(local_stats, &indexoid, HASH_ENTER, &found);
		if (!found)
			memset(local->counts, 0, sizeof(local->counts));
		local_last = local;
	}
	for (int i = 0; i < GUNIQUE_NSTATS; i++)
		local->counts[i] += counts[i];
	local_pending = true;
}

static SharedStats *
stats_entry(Oid indexoid)
{
	StatsTag	tag = {MyDatabaseId, indexoid};
	SharedStats *entry;
	bool		found;

	LWLockAcquire(stats_lock, LW_SHARED);
	entry = hash_search(shared_stats, &tag, HASH_FIND, NULL);
	LWLockRelease(stats_lock);
	if (entry != NULL)
		return entry;

	LWLockAcquire(stats_lock, LW_EXCLUSIVE);
	entry = hash_search(shared_stats, &tag, HASH_ENTER_NULL, &found);
	if (entry != NULL && !found)
		for (int i = 0; i < GUNIQUE_NSTATS; i++)
			pg_atomic_init_u64(&entry->counts[i], 0);
	LWLockRelease(stats_lock);
	return entry;
}

/*
 * Add this backend's counts to the shared ones; counts that find no room
 * (more leaf indexes than entries) are dropped.  At the end of every
 * statement (the executor end hook, hooks.c) and of every transaction
 * (probescan.c).
 */
void
gunique_stats_flush(void)
{
	HASH_SEQ_STATUS status;
	LocalStats *local;

	if (!local_pending)
		return;
	local_pending = false;
	local_last = NULL;
	hash_seq_init(&status, local_stats);
	while ((local = hash_seq_search(&status)) != NULL)
	{
		SharedStats *entry = stats_entry(local->indexoid);

		for (int i = 0; entry != NULL && i < GUNIQUE_NSTATS; i++)
			if (local->counts[i] != 0)
				pg_atomic_fetch_add_u64(&entry->counts[i], local->counts[i]);
		hash_search(local_stats, &local->indexoid, HASH_REMOVE, NULL);
	}
}

/*
 * gunique_probe_stats(): one row per leaf index of this database that has
 * been inserted into.
 */
Datum
gunique_probe_stats(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	HASH_SEQ_STATUS status;
	SharedStats *entry;

	bool		with_filtered;

	InitMaterializedSRF(fcinfo, 0);
	with_filtered = rsinfo->setDesc->natts == GUNIQUE_NSTATS + 1;
	if (shared_stats == NULL)
		return (Datum) 0;

	gunique_stats_flush();
	LWLockAcquire(stats_lock, LW_SHARED);
	hash_seq_init(&status, shared_stats);
	while ((entry = hash_seq_search(&status)) != NULL)
	{
		Datum		values[GUNIQUE_NSTATS + 1];
		bool		nulls[GUNIQUE_NSTATS + 1] = {0};

		if (entry->tag.dbid != MyDatabaseId)
			continue;
		values[0] = ObjectIdGetDatum(entry->tag.indexoid);
		for (int i = 0, col = 1; i < GUNIQUE_NSTATS; i++)
		{
			/* version 1.2 of the extension has no partitions_filtered */
			if (i == GUNIQUE_STAT_LEAVES_FILTERED && !with_filtered)
				continue;
			values[col++] = Int64GetDatum((int64)
										  pg_atomic_read_u64(&entry->counts[i]));
		}
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	LWLockRelease(stats_lock);
	return (Datum) 0;
}

/* gunique_probe_stats_reset(): forget the counts of this database. */
Datum
gunique_probe_stats_reset(PG_FUNCTION_ARGS)
{
	HASH_SEQ_STATUS status;
	SharedStats *entry;

	if (shared_stats == NULL)
		PG_RETURN_VOID();
	gunique_stats_flush();
	LWLockAcquire(stats_lock, LW_EXCLUSIVE);
	hash_seq_init(&status, shared_stats);
	while ((entry = hash_seq_search(&status)) != NULL)
		if (entry->tag.dbid == MyDatabaseId)
			hash_search(shared_stats, &entry->tag, HASH_REMOVE, NULL);
	LWLockRelease(stats_lock);
	PG_RETURN_VOID();
}

/*
 * gunique_filter_memory(): what the key filters take of shared memory, the
 * limit, and how many filters were not made since the server started.
 */
Datum
gunique_filter_memory_info(PG_FUNCTION_ARGS)
{
	TupleDesc	tupdesc;
	GuniqueFilterMemory usage;
	Datum		values[4];
	bool		nulls[4] = {0};

	if (get_call_result_type(fcinfo, NULL, &tupdesc) != TYPEFUNC_COMPOSITE)
		elog(ERROR, "return type must be a row type");
	gunique_filter_memory_usage(&usage);
	values[0] = Int64GetDatum((int64) usage.limit);
	values[1] = Int64GetDatum((int64) usage.bytes);
	values[2] = Int64GetDatum((int64) usage.filters);
	values[3] = Int64GetDatum((int64) usage.refused);
	PG_RETURN_DATUM(HeapTupleGetDatum(heap_form_tuple(BlessTupleDesc(tupdesc),
													  values, nulls)));
}

/*-------------------------------------------------------------------------
 *
 * builder.c
 *	  Key filters built in the background, by a worker per database.
 *
 * Building a filter reads whole leaves: one leaf for a leaf's filter, every
 * leaf of the group for a group's.  No user statement does that: an insert
 * whose probe found a filter missing (after a restart, a crash, a REINDEX)
 * or outgrown asks for its group's filters here, and goes on searching
 * btrees meanwhile.  A queue in shared memory holds the requests, one per
 * group; a background worker of the database (started on the first
 * request, gone after a while without any) takes them in turn and builds
 * every filter of the group that is missing or full, the way inserts did
 * before (summary.c: publish as "next", key lock barrier, read the leaves,
 * publish; src/README, I6).
 *
 * The worker locks the requesting leaf's table and its ancestors
 * RowExclusiveLock, as an inserter does, and every relation of the tree
 * AccessShareLock, as a probe does: an ATTACH's merge (ShareLock on every
 * leaf) waits for it, as it waits for an inserter, and it never holds a
 * lock stronger than an inserter's, as I6 (src/README) requires of whoever
 * builds a group's filter.  It takes each of those locks only if it can
 * have it at once, and otherwise lets them all go and tries again later:
 * a worker that waited for one lock while holding others could close a
 * cycle with DDL that locks the tree in another order (DROP TABLE of the
 * parent while the worker holds a partition), and the deadlock detector
 * might then cancel the user's statement.  DDL waits for a build that has
 * its locks, as it waits for an inserter.
 *
 * gunique_build_filters() builds a tree's filters at once, in the caller.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "fmgr.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "pgstat.h"
#include "postmaster/bgworker.h"
#include "postmaster/interrupt.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/lmgr.h"
#include "storage/lwlock.h"
#include "storage/proc.h"
#include "storage/shmem.h"
#include "tcop/tcopprot.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "gunique.h"
#include "am/scope.h"
#include "am/tree.h"
#include "locate/builder.h"
#include "locate/summary.h"

#define BUILDER_QUEUE_SIZE		256 /* groups waiting, all databases */
#define BUILDER_SLOTS			64	/* databases with a worker at once */
#define BUILDER_IDLE_MS			1000	/* a worker with nothing to do exits
										 * soon: DROP DATABASE waits only 5 s
										 * for the sessions of the database */
#define BUILDER_RETRY_MS		10000	/* after a worker could not start */
#define BUILDER_LOCK_RETRY_MS	200 /* after a lock was not to be had */

typedef struct BuildRequest
{
	Oid			dbid;
	Oid			group;			/* the group's partitioned index */
	Oid			leafindex;		/* a leaf of the group that asked */
	TimestampTz queued;
	TimestampTz not_before;		/* put back for want of a lock: not till
								 * then */
	int			pid;			/* the worker building it, or 0 */
	int			leaves;			/* of the group, once it is being built */
	int			done;			/* leaves whose filters are done */
} BuildRequest;

typedef struct BuilderSlot
{
	Oid			dbid;			/* InvalidOid: free */
	bool		starting;		/* registered, not running yet */
	TimestampTz starting_at;	/* when it was registered */
	int			pid;
	Latch	   *latch;
	TimestampTz failed;			/* when a worker last could not start */
} BuilderSlot;

typedef struct BuilderShared
{
	int			nrequests;
	BuildRequest requests[BUILDER_QUEUE_SIZE];
	BuilderSlot slots[BUILDER_SLOTS];
} BuilderShared;

static BuilderShared *builder = NULL;
static LWLock *builder_lock = NULL;
static int	my_slot = -1;		/* in a worker */

PGDLLEXPORT void gunique_builder_main(Datum arg);

PG_FUNCTION_INFO_V1(gunique_filter_builds);
PG_FUNCTION_INFO_V1(gunique_build_filters);

void
gunique_builder_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(BuilderShared)));
	RequestNamedLWLockTranche("gunique filter builders", 1);
}

void
gunique_builder_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	builder = ShmemInitStruct("gunique filter builders",
							  sizeof(BuilderShared), &found);
	if (!found)
		memset(builder, 0, sizeof(BuilderShared));
	builder_lock = &(GetNamedLWLockTranche("gunique filter builders"))->lock;
	LWLockRelease(AddinShmemInitLock);
}

/* The slot of a database, or a free one for it; -1 if all are taken. */
static int
builder_slot_for(Oid dbid)
{
	int			free = -1;

	for (int i = 0; i < BUILDER_SLOTS; i++)
	{
		if (builder->slots[i].dbid == dbid)
			return i;
		if (free < 0 && !OidIsValid(builder->slots[i].dbid))
			free = i;
	}
	if (free >= 0)
	{
		memset(&builder->slots[free], 0, sizeof(BuilderSlot));
		builder->slots[free].dbid = dbid;
	}
	return free;
}

/* Start this database's worker; false if the server has no slot for it. */
static bool
builder_launch(Oid dbid)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS |
		BGWORKER_BACKEND_DATABASE_CONNECTION;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = BGW_NEVER_RESTART;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "gunique");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "gunique_builder_main");
	snprintf(worker.bgw_name, BGW_MAXLEN,
			 "gunique filter builder for database %u", dbid);
	snprintf(worker.bgw_type, BGW_MAXLEN, "gunique filter builder");
	worker.bgw_main_arg = ObjectIdGetDatum(dbid);
	return RegisterDynamicBackgroundWorker(&worker, NULL);
}

/*
 * Ask for the filters of a group (its partitioned index "group", named by
 * one of its leaves) to be built.  Cheap, and never waits: one request per
 * group is queued, a full queue drops it (the next probe asks again), and
 * the database's worker is woken, or started.
 */
void
gunique_builder_request(Oid group, Oid leafindex)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		launch = false;
	int			slot;
	bool		queued = false;

	if (builder == NULL || !IsUnderPostmaster || !OidIsValid(MyDatabaseId))
		return;

	LWLockAcquire(builder_lock, LW_EXCLUSIVE);
	for (int i = 0; i < builder->nrequests && !queued; i++)
	{
		BuildRequest *r = &builder->requests[i];

		queued = r->dbid == MyDatabaseId && r->group == group && r->pid == 0;
	}
	if (!queued && builder->nrequests < BUILDER_QUEUE_SIZE)
	{
		BuildRequest *r = &builder->requests[builder->nrequests++];

		memset(r, 0, sizeof(BuildRequest));
		r->dbid = MyDatabaseId;
		r->group = group;
		r->leafindex = leafindex;
		r->queued = now;
	}
	slot = builder_slot_for(MyDatabaseId);
	if (slot >= 0)
	{
		BuilderSlot *s = &builder->slots[slot];

		/*
		 * A worker registered long ago that never took its slot did not
		 * start (no fork, or it could not connect): start another.
		 */
		if (s->starting &&
			TimestampDifferenceExceeds(s->starting_at, now, BUILDER_RETRY_MS))
			s->starting = false;
		if (s->pid != 0)
			SetLatch(s->latch);
		else if (!s->starting &&
				 (s->failed == 0 ||
				  TimestampDifferenceExceeds(s->failed, now, BUILDER_RETRY_MS)))
		{
			launch = s->starting = true;
			s->starting_at = now;
		}
	}
	LWLockRelease(builder_lock);

	if (launch && !builder_launch(MyDatabaseId))
	{
		LWLockAcquire(builder_lock, LW_EXCLUSIVE);
		builder->slots[slot].starting = false;
		builder->slots[slot].failed = now;
		LWLockRelease(builder_lock);
		ereport(LOG,
				(errmsg("gunique could not start a background worker to build key filters"),
				 errdetail("Inserts search the btrees of partitions without a filter until one is built."),
				 errhint("Increase max_worker_processes.")));
	}
}

/*
 * A database is dropped (or a new one takes a dropped one's OID): its
 * requests and its worker's slot go, unless a worker still holds it.
 */
void
gunique_builder_database_gone(Oid dbid)
{
	if (builder == NULL)
		return;
	LWLockAcquire(builder_lock, LW_EXCLUSIVE);
	for (int i = 0; i < builder->nrequests;)
	{
		if (builder->requests[i].dbid == dbid && builder->requests[i].pid == 0)
			builder->requests[i] = builder->requests[--builder->nrequests];
		else
			i++;
	}
	for (int i = 0; i < BUILDER_SLOTS; i++)
		if (builder->slots[i].dbid == dbid && builder->slots[i].pid == 0)
			memset(&builder->slots[i], 0, sizeof(BuilderSlot));
	LWLockRelease(builder_lock);
}

/* In a worker: how far the request being built has come. */
static void
builder_progress(int leaves, int done)
{
	if (my_slot < 0)
		return;
	LWLockAcquire(builder_lock, LW_EXCLUSIVE);
	for (int i = 0; i < builder->nrequests; i++)
	{
		BuildRequest *r = &builder->requests[i];

		if (r->pid == MyProcPid)
		{
			r->leaves = leaves;
			r->done = done;
		}
	}
	LWLockRelease(builder_lock);
}

/*
 * Build the filters of the group of leaf "index" that are missing or full
 * (all of them with "force"): each leaf's, if the group has other leaves,
 * and the group's, if it has enough leaves to use one.  The caller holds a
 * lock on the leaf's table that keeps its btree, and the tree, as an
 * inserter's does.  Returns the number of filters built.
 */
int
gunique_builder_build_group(Relation index, bool force)
{
	GuniqueLeafPlace place;
	GuniqueScope *scope;
	Oid		   *oids;
	Relation   *leaves;
	Relation	groupindex;
	GuniqueSummary *group = NULL;
	char		tree_changed = 0;
	bool		valid;
	int			n;
	int			built = 0;

	for (;;)
	{
		uint64		generation;

		scope = gunique_scope_for_leaf(index, &place, GUNIQUE_LOCK_ALL);
		valid = scope->valid;
		generation = gunique_scope_generation();
		n = place.count;
		oids = palloc(sizeof(Oid) * Max(n, 1));
		for (int i = 0; i < n; i++)
			oids[i] = scope->leaves[place.first + i].indexoid;
		leaves = palloc(sizeof(Relation) * Max(n, 1));
		for (int i = 0; i < n; i++)
			leaves[i] = index_open(oids[i], AccessShareLock);
		groupindex = index_open(place.group, AccessShareLock);
		if (generation == gunique_scope_generation())
			break;
		/* the tree changed while it was opened: again */
		for (int i = 0; i < n; i++)
			index_close(leaves[i], AccessShareLock);
		index_close(groupindex, AccessShareLock);
	}
	if (n < 2)
		goto done;
	/*
	 * A group's filter only while the tree's top is valid: until then
	 * leaves may join the group without a merge that fills the filter
	 * (CREATE INDEX CONCURRENTLY, ATTACH to an invalid tree; src/README,
	 * I6).  The scope is current as of the leaves' locks.
	 */
	if (groupindex->rd_rel->relkind == RELKIND_PARTITIONED_INDEX && valid)
		group = gunique_summary_for(groupindex);
	builder_progress(n, 0);
	for (int i = 0; i < n; i++)
	{
		GuniqueSummary *summary = gunique_summary_for(leaves[i]);

		CHECK_FOR_INTERRUPTS();
		if (summary != NULL &&
			(force || gunique_summary_filter_missing(summary) ||
			 gunique_summary_filter_full(summary)))
		{
			gunique_summary_build_filter(summary, leaves[i], group);
			built++;
		}
		builder_progress(n, i + 1);
	}
	if (n >= GUNIQUE_GROUP_FILTER_MIN_LEAVES && group != NULL &&
		(force || gunique_summary_filter_missing(group) ||
		 gunique_summary_filter_full(group)))
	{
		gunique_summary_build_group_filter(group, leaves, n, index,
										   &tree_changed);
		built++;
	}
done:
	for (int i = 0; i < n; i++)
		index_close(leaves[i], AccessShareLock);
	index_close(groupindex, AccessShareLock);
	return built;
}

/*
 * The worker's next request: the first queued for its database, marked as
 * its own.  False if there is none; then, if it has had nothing to do for
 * long enough, it gives its slot up under the same lock, so that a request
 * queued after that starts a new worker.
 */
static bool
builder_next(BuildRequest *req, bool may_exit)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		deferred = false;

	LWLockAcquire(builder_lock, LW_EXCLUSIVE);
	for (int i = 0; i < builder->nrequests; i++)
	{
		BuildRequest *r = &builder->requests[i];

		if (r->dbid != MyDatabaseId || r->pid != 0)
			continue;
		if (r->not_before > now)
		{
			deferred = true;
			continue;
		}
		r->pid = MyProcPid;
		*req = *r;
		LWLockRelease(builder_lock);
		return true;
	}
	/* a request put back keeps the worker: no probe would start another */
	if (may_exit && !deferred)
	{
		memset(&builder->slots[my_slot], 0, sizeof(BuilderSlot));
		my_slot = -1;
	}
	LWLockRelease(builder_lock);
	return false;
}

/* Take the worker's request (done, or failed) off the queue. */
static void
builder_done(void)
{
	LWLockAcquire(builder_lock, LW_EXCLUSIVE);
	for (int i = 0; i < builder->nrequests; i++)
	{
		if (builder->requests[i].pid == MyProcPid)
		{
			builder->requests[i] = builder->requests[--builder->nrequests];
			break;
		}
	}
	LWLockRelease(builder_lock);
}

/*
 * Put the worker's request back, to be taken again after a while: a lock
 * it needed was taken.
 */
static void
builder_defer(void)
{
	TimestampTz retry = TimestampTzPlusMilliseconds(GetCurrentTimestamp(),
													BUILDER_LOCK_RETRY_MS);

	LWLockAcquire(builder_lock, LW_EXCLUSIVE);
	for (int i = 0; i < builder->nrequests; i++)
	{
		BuildRequest *r = &builder->requests[i];

		if (r->pid == MyProcPid)
		{
			r->pid = 0;
			r->leaves = r->done = 0;
			r->not_before = retry;
		}
	}
	LWLockRelease(builder_lock);
}

/* At exit: give the slot up, and the request it was building. */
static void
builder_exit(int code, Datum arg)
{
	builder_done();
	if (my_slot < 0)
		return;
	LWLockAcquire(builder_lock, LW_EXCLUSIVE);
	memset(&builder->slots[my_slot], 0, sizeof(BuilderSlot));
	LWLockRelease(builder_lock);
	my_slot = -1;
}

/*
 * Take, without waiting, the locks an inserter into the leaf's table holds
 * (see the top of the file): its ancestors' and its own RowExclusiveLock,
 * top down, the leaf's AccessShareLock.  False if one was not to be had.
 */
static bool
builder_try_lock(Oid heapoid, Oid leafindex)
{
	List	   *ancestors = get_partition_ancestors(heapoid);
	bool		locked = true;

	for (int i = list_length(ancestors) - 1; i >= 0 && locked; i--)
		locked = ConditionalLockRelationOid(list_nth_oid(ancestors, i),
											RowExclusiveLock);
	list_free(ancestors);
	return locked &&
		ConditionalLockRelationOid(heapoid, RowExclusiveLock) &&
		ConditionalLockRelationOid(leafindex, AccessShareLock);
}

/*
 * Build one request's filters, in a transaction of its own, if the leaf
 * that asked is still a gunique index.  False if a lock was not to be had:
 * nothing was built, and the transaction lets go of what it took.
 */
static bool
builder_build(BuildRequest *req)
{
	Oid			heapoid;
	Relation	heap;
	Relation	index;
	bool		locked = true;

	StartTransactionCommand();
	PushActiveSnapshot(GetTransactionSnapshot());
	heapoid = IndexGetRelation(req->leafindex, true);
	if (OidIsValid(heapoid) &&
		(locked = builder_try_lock(heapoid, req->leafindex)) &&
		(heap = try_relation_open(heapoid, NoLock)) != NULL)
	{
		index = try_relation_open(req->leafindex, NoLock);
		if (index != NULL && index->rd_rel->relkind == RELKIND_INDEX &&
			index->rd_rel->relispartition &&
			gunique_is_gunique_index(req->leafindex) &&
			(locked = gunique_scope_try_lock_all(index)))
			(void) gunique_builder_build_group(index, false);
		if (index != NULL)
			relation_close(index, NoLock);
		relation_close(heap, NoLock);
	}
	PopActiveSnapshot();
	CommitTransactionCommand();
	return locked;
}

/* The worker: claim the database's slot, then build what is asked. */
void
gunique_builder_main(Datum arg)
{
	Oid			dbid = DatumGetObjectId(arg);
	sigjmp_buf	local_sigjmp_buf;
	TimestampTz idle_since;

	pqsignal(SIGTERM, die);
	pqsignal(SIGHUP, SignalHandlerForConfigReload);
	BackgroundWorkerUnblockSignals();
	BackgroundWorkerInitializeConnectionByOid(dbid, InvalidOid, 0);

	LWLockAcquire(builder_lock, LW_EXCLUSIVE);
	for (int i = 0; i < BUILDER_SLOTS; i++)
		if (builder->slots[i].dbid == dbid && builder->slots[i].starting)
		{
			builder->slots[i].starting = false;
			builder->slots[i].pid = MyProcPid;
			builder->slots[i].latch = MyLatch;
			my_slot = i;
		}
	LWLockRelease(builder_lock);
	if (my_slot < 0)
		proc_exit(0);			/* another worker has it */
	before_shmem_exit(builder_exit, (Datum) 0);
	pgstat_report_appname("gunique filter builder");

	/* an error ends the request, not the worker (as autovacuum does) */
	if (sigsetjmp(local_sigjmp_buf, 1) != 0)
	{
		error_context_stack = NULL;
		HOLD_INTERRUPTS();
		EmitErrorReport();
		AbortOutOfAnyTransaction();
		LWLockReleaseAll();
		MemoryContextSwitchTo(TopMemoryContext);
		FlushErrorState();
		builder_done();
		RESUME_INTERRUPTS();
		/* not at once again: the same error would likely follow */
		(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 1000L,
						 PG_WAIT_EXTENSION);
	}
	PG_exception_stack = &local_sigjmp_buf;

	idle_since = GetCurrentTimestamp();
	for (;;)
	{
		BuildRequest req;
		bool		may_exit;

		CHECK_FOR_INTERRUPTS();
		if (ConfigReloadPending)
		{
			ConfigReloadPending = false;
			ProcessConfigFile(PGC_SIGHUP);
		}
		may_exit = TimestampDifferenceExceeds(idle_since, GetCurrentTimestamp(),
											  BUILDER_IDLE_MS);
		if (builder_next(&req, may_exit))
		{
			pgstat_report_activity(STATE_RUNNING, "building key filters");
			if (builder_build(&req))
				builder_done();
			else
				builder_defer();
			pgstat_report_activity(STATE_IDLE, NULL);
			idle_since = GetCurrentTimestamp();
			continue;
		}
		if (my_slot < 0)
			proc_exit(0);
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_TIMEOUT | WL_EXIT_ON_PM_DEATH,
						 BUILDER_LOCK_RETRY_MS, PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
}

/*
 * gunique_filter_builds(): the groups whose filters are asked for, queued
 * or being built, in every database.
 */
Datum
gunique_filter_builds(PG_FUNCTION_ARGS)
{
	ReturnSetInfo *rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	BuildRequest *copy;
	int			n;

	InitMaterializedSRF(fcinfo, 0);
	if (builder == NULL)
		return (Datum) 0;
	copy = palloc(sizeof(BuildRequest) * BUILDER_QUEUE_SIZE);
	LWLockAcquire(builder_lock, LW_SHARED);
	n = builder->nrequests;
	memcpy(copy, builder->requests, sizeof(BuildRequest) * n);
	LWLockRelease(builder_lock);
	for (int i = 0; i < n; i++)
	{
		Datum		values[7];
		bool		nulls[7] = {0};

		values[0] = ObjectIdGetDatum(copy[i].dbid);
		values[1] = ObjectIdGetDatum(copy[i].group);
		values[2] = CStringGetTextDatum(copy[i].pid != 0 ? "building" : "queued");
		values[3] = TimestampTzGetDatum(copy[i].queued);
		values[4] = Int32GetDatum(copy[i].pid);
		nulls[4] = copy[i].pid == 0;
		values[5] = Int32GetDatum(copy[i].leaves);
		values[6] = Int32GetDatum(copy[i].done);
		nulls[5] = nulls[6] = copy[i].pid == 0;
		tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
	}
	return (Datum) 0;
}

/*
 * gunique_build_filters(index, force): build the filters of the tree of a
 * gunique index now, in this session, that are missing or full (all of them
 * with "force"), group by group.  Returns the number of filters built.  The
 * caller must own the table, and takes the locks an inserter takes.
 */
Datum
gunique_build_filters(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	bool		force = PG_GETARG_BOOL(1);
	Oid			topindex;
	Oid			toptable;
	List	   *leaves;
	List	   *groups = NIL;
	ListCell   *lc;
	int			built = 0;

	gunique_require_gunique_index(indexoid);
	if (RecoveryInProgress())
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("cannot build gunique key filters during recovery"),
				 errdetail("WAL replay changes the leaves without adding their keys to filters, so filters built on a standby would miss keys replayed after them, and probes would trust them after a promotion."),
				 errhint("Build them on the primary, or after the promotion.")));
	topindex = gunique_tree_top(indexoid);
	toptable = IndexGetRelation(topindex, false);
	if (!gunique_relation_owned(toptable))
		aclcheck_error(ACLCHECK_NOT_OWNER, OBJECT_TABLE,
					   get_rel_name(toptable));
	LockRelationOid(toptable, RowExclusiveLock);
	leaves = gunique_tree_leaves(topindex);
	foreach(lc, leaves)
	{
		GuniqueLeaf *leaf = (GuniqueLeaf *) lfirst(lc);
		GuniqueLeafPlace place;
		Relation	heap = table_open(leaf->heapoid, RowExclusiveLock);
		Relation	index = try_relation_open(leaf->indexoid, AccessShareLock);

		/* replaced since the tree was read (REINDEX CONCURRENTLY) */
		if (index == NULL)
		{
			table_close(heap, RowExclusiveLock);
			continue;
		}
		(void) gunique_scope_for_leaf(index, &place, GUNIQUE_LOCK_NONE);
		if (!list_member_oid(groups, place.group))
		{
			groups = lappend_oid(groups, place.group);
			built += gunique_builder_build_group(index, force);
		}
		index_close(index, AccessShareLock);
		table_close(heap, RowExclusiveLock);
	}
	PG_RETURN_INT32(built);
}

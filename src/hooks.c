/*-------------------------------------------------------------------------
 *
 * hooks.c
 *	  Every hook and callback gunique installs, and the order in which each
 *	  calls the features.
 *
 * PostgreSQL calls into gunique through its access method (am/handler.c),
 * its SQL functions, and what this file installs: ten hooks, one
 * transaction callback, one subtransaction callback, one relcache callback
 * and one syscache callback (for seven caches), the four CustomScans'
 * methods and the filter keeper.  Each
 * hook here is one function that calls the previous hook (or the standard
 * function) and the features, in a fixed order written down beside it;
 * the features export plain functions and install nothing themselves.
 * Where a feature must run the rest of the chain itself (the utility and
 * planner hooks), it is given the next function to call.
 *
 * Installed from _PG_init, once per process image, and only under
 * shared_preload_libraries (gunique.c says why), except the relcache
 * callback, which gunique_check_leaves needs without the preload too.
 * Not from the shared-memory startup hook, which the postmaster runs
 * again after every crash restart: each run would register the callbacks
 * again (taking another of the ten relcache callback slots PostgreSQL has
 * per process), and the backends it forks would inherit them all.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xact.h"
#include "catalog/objectaccess.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "optimizer/paths.h"
#include "optimizer/plancat.h"
#include "optimizer/planner.h"
#include "storage/ipc.h"
#include "tcop/utility.h"
#include "utils/inval.h"
#include "utils/syscache.h"

#include "hooks.h"
#include "admin/leafcheck.h"
#include "admin/stats.h"
#include "am/scope.h"
#include "citus/citusddl.h"
#include "citus/keyroute.h"
#include "citus/keysync.h"
#include "ddl/ddl.h"
#include "insert/keylock.h"
#include "insert/probescan.h"
#include "insert/waiters.h"
#include "locate/builder.h"
#include "locate/filter.h"
#include "locate/persist.h"
#include "locate/rebuilds.h"
#include "locate/summary.h"
#include "read/keyplan.h"
#include "read/keyprune.h"
#include "read/lookupplan.h"
#include "upsert/onconflict.h"

static shmem_request_hook_type prev_shmem_request = NULL;
static shmem_startup_hook_type prev_shmem_startup = NULL;
static ProcessUtility_hook_type prev_ProcessUtility = NULL;
static object_access_hook_type prev_object_access = NULL;
static planner_hook_type prev_planner = NULL;
static get_relation_info_hook_type prev_get_relation_info = NULL;
static set_rel_pathlist_hook_type prev_set_rel_pathlist = NULL;
static ExecutorStart_hook_type prev_ExecutorStart = NULL;
static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;

/*
 * Shared memory, requested in the postmaster.  The save file's size is
 * known before the filters': persist first, so that the filters' request
 * can make room for what it will load.
 */
static void
gunique_shmem_request(void)
{
	if (prev_shmem_request)
		prev_shmem_request();
	gunique_keylock_shmem_request();
	gunique_waiters_shmem_request();
	gunique_summary_shmem_request();
	gunique_rebuilds_shmem_request();
	gunique_persist_shmem_request();
	gunique_filter_shmem_request();
	gunique_stats_shmem_request();
	gunique_builder_shmem_request();
}

/*
 * The postmaster runs this at start and again after every crash restart,
 * when it has re-created shared memory, and so does each backend where
 * backends are not forked (EXEC_BACKEND): it only finds or creates
 * gunique's shared structures.  The save file is loaded last, into
 * summaries and filters that exist by then.
 */
static void
gunique_shmem_startup(void)
{
	if (prev_shmem_startup)
		prev_shmem_startup();
	gunique_keylock_shmem_startup();
	gunique_waiters_shmem_startup();
	gunique_summary_shmem_startup();
	gunique_rebuilds_shmem_startup();
	gunique_filter_shmem_startup();
	gunique_stats_shmem_startup();
	gunique_builder_shmem_startup();
	gunique_persist_load();
}

/* The rest of the utility chain: the previous hook, or PostgreSQL's. */
static void
next_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc)
{
	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/* DDL's part of the utility chain, then the rest of it. */
static void
ddl_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
				   bool readOnlyTree, ProcessUtilityContext context,
				   ParamListInfo params, QueryEnvironment *queryEnv,
				   DestReceiver *dest, QueryCompletion *qc)
{
	gunique_ddl_utility(pstmt, queryString, readOnlyTree, context, params,
						queryEnv, dest, qc, next_ProcessUtility);
}

/*
 * Utility statements:
 *	 0. on a Citus node, the global keys take CREATE INDEX, TRUNCATE and
 *		COPY of distributed tables that have them, and run the statement
 *		through the rest of this chain in the middle (citus/citusddl.c);
 *	 1. the insert path lets go of the leaves its statements hold open: the
 *		statement (one a trigger of an inserting statement runs, say) may
 *		drop, detach or truncate one; later probes open what they need
 *		again;
 *	 2. DDL takes over the statements that make or change gunique trees
 *		and runs the statement through next_ProcessUtility, once, in the
 *		middle: it locks and presents the trees before, and merges and
 *		marks them after.
 */
static void
gunique_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					   bool readOnlyTree, ProcessUtilityContext context,
					   ParamListInfo params, QueryEnvironment *queryEnv,
					   DestReceiver *dest, QueryCompletion *qc)
{
	gunique_probe_release_all();
	if (gunique_citus_utility(pstmt, queryString, readOnlyTree, context,
							  params, queryEnv, dest, qc, ddl_ProcessUtility))
		return;
	ddl_ProcessUtility(pstmt, queryString, readOnlyTree, context, params,
					   queryEnv, dest, qc);
}

/*
 * Object access: the previous hook, then the refusal to drop a global
 * key's index by a way that leaves its key table (citus/citusddl.c), then
 * DDL's part (the summary and
 * filter of a dropped index or database, the builder's queue of a
 * database, the new top of a tree an ALTER TABLE rebuilds).
 */
static void
gunique_object_access(ObjectAccessType access, Oid classId, Oid objectId,
					  int subId, void *arg)
{
	if (prev_object_access)
		prev_object_access(access, classId, objectId, subId, arg);
	gunique_citus_object_access(access, classId, objectId, subId);
	gunique_ddl_object_access(access, classId, objectId, subId, arg);
}

/* The rest of the planner chain: the previous hook, or PostgreSQL's. */
static PlannedStmt *
next_planner(Query *parse, const char *query_string, int cursorOptions,
			 ParamListInfo boundParams)
{
	if (prev_planner)
		return prev_planner(parse, query_string, cursorOptions, boundParams);
	return standard_planner(parse, query_string, cursorOptions, boundParams);
}

/* The read path's planning, then the rest of the chain. */
static PlannedStmt *
lookup_planner(Query *parse, const char *query_string, int cursorOptions,
			   ParamListInfo boundParams)
{
	return gunique_lookup_planner(parse, query_string, cursorOptions,
								  boundParams, next_planner);
}

/*
 * Planning:
 *	 0. on a Citus node, statements on distributed tables with global keys
 *		are routed by the key and kept in sync with the key tables
 *		(citus/keysync.c), around the rest;
 *	 1. the read path (lookups, and UPDATE or DELETE by the key) marks the
 *		tables it may read and the key it may prune by, then plans through
 *		next_planner, once, or twice where its marks did not all come
 *		through (the second time untouched);
 *	 2. the ON CONFLICT DO NOTHING check is put into the finished plan,
 *		after every other planner hook has run, so that an extension that
 *		plans the statement itself still gets it.
 */
static PlannedStmt *
gunique_planner(Query *parse, const char *query_string, int cursorOptions,
				ParamListInfo boundParams)
{
	PlannedStmt *result;

	result = gunique_citus_planner(parse, query_string, cursorOptions,
								   boundParams, lookup_planner);
	return gunique_onconflict_plan(result);
}

/*
 * A relation being built: the previous hook, then the read path, which may
 * take a marked table out of inheritance expansion (or prune an UPDATE's
 * or DELETE's partitions), from what the relation now holds.
 */
static void
gunique_get_relation_info(PlannerInfo *root, Oid relationObjectId,
						  bool inhparent, RelOptInfo *rel)
{
	if (prev_get_relation_info)
		prev_get_relation_info(root, relationObjectId, inhparent, rel);
	gunique_lookup_get_relation_info(root, relationObjectId, inhparent, rel);
}

/*
 * A relation's paths: the previous hook, then the read path, which makes
 * the lookup the only path of a table it took out of expansion.
 */
static void
gunique_set_rel_pathlist(PlannerInfo *root, RelOptInfo *rel, Index rti,
						 RangeTblEntry *rte)
{
	if (prev_set_rel_pathlist)
		prev_set_rel_pathlist(root, rel, rti, rte);
	gunique_lookup_set_rel_pathlist(root, rel, rti, rte);
}

/*
 * Executor start:
 *	 1. modify-by-key checks that its pruned plan still holds the key's
 *		row, and may replace queryDesc->plannedstmt: first, before anything
 *		else reads the plan;
 *	 2. ON CONFLICT refuses what cannot run (before 18, any ON CONFLICT on
 *		a gunique table; on 18, DO NOTHING with the conflict check turned
 *		off), on the plan that will run, before the executor opens it;
 *	 3. the previous hook, or standard_ExecutorStart;
 *	 4. on 18, each conflict check learns its ModifyTable, which exists
 *		only once the plan is started.
 * An extension loaded after gunique whose hook calls standard_ExecutorStart
 * instead of the previous hook leaves all of this out: a pruned plan then
 * runs unchecked, and a conflict check counts its upserts into no
 * partition, which every inserter of the key waits for (src/README, 4.9).
 */
static void
gunique_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	gunique_keyprune_executor_start(queryDesc, eflags);
	gunique_onconflict_executor_start(queryDesc, eflags);
	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
	gunique_onconflict_executor_started(queryDesc, eflags);
}

/*
 * Executor end: the previous hook, or standard_ExecutorEnd (whose cleanup
 * of the inserts may still count), then keyplan.c's plan it ran is one use
 * fewer, then the statement's probe counts go to shared memory.
 */
static void
gunique_ExecutorEnd(QueryDesc *queryDesc)
{
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
	gunique_keyplan_executor_end(queryDesc->plannedstmt);
	gunique_stats_flush();
}

/*
 * Transaction events.  PostgreSQL runs every transaction callback before
 * the resource owners let go of locks, buffers and relations, so each part
 * below runs before the locks it cares about are released (the upsert
 * locks, for 3).  None reads what another changes; this is the order they
 * have always run in:
 *	 1. summaries: at abort or prepare, forget the summaries this
 *		transaction built (its locks still keep everyone else away); at
 *		commit or abort, end its rebuild notes;
 *	 2. the insert path: before commit or prepare, close its statements'
 *		scans (before the resource owner checks for leaks); at abort,
 *		forget them; flush the probe counters;
 *	 3. upserts: no check of this backend is pending any longer (the
 *		pending counts are lowered before the lock manager lets the upsert
 *		locks go);
 *	 4. the tree cache: locks taken for it may be gone;
 *	 5. keyplan.c: no executor of the transaction runs a kept plan any
 *		longer.
 */
static void
gunique_xact_callback(XactEvent event, void *arg)
{
	gunique_summary_xact_event(event);
	gunique_probescan_xact_event(event);
	gunique_onconflict_xact_event(event);
	gunique_scope_xact_event(event);
	gunique_keyplan_xact_event(event);
}

/*
 * Subtransaction events: the same parts in the same order, each for what
 * the subtransaction took (forgotten at its abort, handed to its parent at
 * its commit).
 */
static void
gunique_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						 SubTransactionId parentSubid, void *arg)
{
	gunique_summary_subxact_event(event, mySubid, parentSubid);
	gunique_probescan_subxact_event(event, mySubid, parentSubid);
	gunique_onconflict_subxact_event(event, mySubid, parentSubid);
	gunique_scope_subxact_event(event, mySubid, parentSubid);
	gunique_keyplan_subxact_event(event, mySubid);
}

/*
 * Relcache invalidations (InvalidOid: all), after PostgreSQL has rebuilt
 * or dropped the entry; no catalog access, no allocation.  Each part only
 * forgets what it keeps of the relation; the order is the one they have
 * always run in:
 *	 1. the tree cache (scope.c);
 *	 2. the ON CONFLICT check's answers about BEFORE triggers (18);
 *	 3. the summaries' memos;
 *	 4. gunique_check_leaves presents its leaf as btree again;
 *	 5. the plans keyplan.c keeps that name the relation are retired.
 */
static void
gunique_relcache_callback(Datum arg, Oid relid)
{
	gunique_scope_relcache_inval(relid);
	gunique_onconflict_relcache_inval(relid);
	gunique_summary_relcache_inval(relid);
	gunique_leafcheck_relcache_inval(relid);
	gunique_keyplan_relcache_inval(relid);
}

/*
 * Catalog changes for which PostgreSQL's plan cache drops its plans
 * (functions, types, operators, schemas, foreign servers): the plans kept
 * per partition of UPDATE and DELETE by the key go too.  No allocation.
 */
static void
gunique_syscache_callback(Datum arg, int cacheid, uint32 hashvalue)
{
	gunique_keyplan_syscache_inval(cacheid, hashvalue);
}

/*
 * The relcache callback, with or without the preload: one slot of the ten
 * PostgreSQL has per process.
 */
void
gunique_hooks_register_relcache(void)
{
	CacheRegisterRelcacheCallback(gunique_relcache_callback, (Datum) 0);
}

/* Everything else, under shared_preload_libraries only. */
void
gunique_hooks_install(void)
{
	prev_shmem_request = shmem_request_hook;
	shmem_request_hook = gunique_shmem_request;
	prev_shmem_startup = shmem_startup_hook;
	shmem_startup_hook = gunique_shmem_startup;
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = gunique_ProcessUtility;
	prev_object_access = object_access_hook;
	object_access_hook = gunique_object_access;
	prev_planner = planner_hook;
	planner_hook = gunique_planner;
	prev_get_relation_info = get_relation_info_hook;
	get_relation_info_hook = gunique_get_relation_info;
	prev_set_rel_pathlist = set_rel_pathlist_hook;
	set_rel_pathlist_hook = gunique_set_rel_pathlist;
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = gunique_ExecutorStart;
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = gunique_ExecutorEnd;

	RegisterXactCallback(gunique_xact_callback, NULL);
	CacheRegisterSyscacheCallback(PROCOID, gunique_syscache_callback, 0);
	CacheRegisterSyscacheCallback(TYPEOID, gunique_syscache_callback, 0);
	CacheRegisterSyscacheCallback(NAMESPACEOID, gunique_syscache_callback, 0);
	CacheRegisterSyscacheCallback(OPEROID, gunique_syscache_callback, 0);
	CacheRegisterSyscacheCallback(AMOPOPID, gunique_syscache_callback, 0);
	CacheRegisterSyscacheCallback(FOREIGNSERVEROID,
								  gunique_syscache_callback, 0);
	CacheRegisterSyscacheCallback(FOREIGNDATAWRAPPEROID,
								  gunique_syscache_callback, 0);
	RegisterSubXactCallback(gunique_subxact_callback, NULL);

	gunique_lookup_register_scan();
	gunique_keyprune_register_scan();
	gunique_onconflict_register_scan();
	gunique_citus_register_scan();
	gunique_citus_register_route();

	gunique_persist_init();		/* the filter keeper */
}

/*-------------------------------------------------------------------------
 *
 * concurrent.c
 *	  Building a gunique tree without stopping its writers.
 *
 * PostgreSQL refuses CREATE INDEX CONCURRENTLY on a partitioned table.  For
 * a gunique index ddl.c creates the top in the statement's transaction
 * (ON ONLY: invalid), where this file makes the partitioned tables' indexes
 * and locks the tree for the session; then it completes the tree the way
 * CREATE INDEX CONCURRENTLY builds one index, in transactions that each
 * commit:
 *
 *	 1. each leaf by CREATE INDEX CONCURRENTLY of its partition (DefineIndex),
 *		made a partition of its parent's index from the start; one held
 *		invalid until the end;
 *	 2. a wait for every transaction that may have inserted without probing
 *		every leaf;
 *	 3. the merge, without locking writers out (merge.c);
 *	 4. the tree marked valid.
 *
 * REINDEX INDEX CONCURRENTLY of an invalid tree's top runs the same steps
 * after PostgreSQL has rebuilt the leaves there are, so a build that failed
 * or was cancelled can be finished.  Why this keeps the guarantee:
 * src/README, 4.11.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/attmap.h"
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "commands/defrem.h"
#include "commands/progress.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_utilcmd.h"
#include "pgstat.h"
#include "storage/lmgr.h"
#include "tcop/tcopprot.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "compat.h"
#include "am/tree.h"
#include "ddl/concurrent.h"
#include "ddl/merge.h"
#include "locate/summary.h"

/* A table under the tree's top table, and its member of the tree. */
typedef struct BuildPart
{
	Oid			table;
	Oid			parenttable;	/* InvalidOid for the top's table */
	Oid			index;			/* InvalidOid: a leaf still to build */
	bool		partitioned;
} BuildPart;

typedef struct ConcurrentBuild
{
	Oid			top;
	Oid			relam;
	bool		reindex;		/* REINDEX finishing the tree */
	int			nparts;
	BuildPart  *parts;			/* parents before children; [0] is the top */
	int			nleaves;
	int			leaves_done;
	Oid			held;			/* the leaf held invalid (hold_leaf) */
	Oid			heldtable;
} ConcurrentBuild;

static void hold_leaf(ConcurrentBuild *b);

/* The transaction is done: commit it and start the next, as CIC does. */
static void
next_transaction(void)
{
	if (ActiveSnapshotSet())
		PopActiveSnapshot();
	CommitTransactionCommand();
	StartTransactionCommand();
}

/*
 * Lock a partitioned table in ShareLock for the transaction that makes its
 * member of the tree, as DefineIndex does, but without queueing before the
 * writers: see gunique_concurrent_lock_all.
 */
void
gunique_concurrent_share_lock(Oid relid)
{
	List	   *relids = list_make1_oid(relid);
	List	   *modes = list_make1_int(ShareLock);

	gunique_concurrent_lock_all(relids, modes);
	list_free(relids);
	list_free(modes);
}

/*
 * Lock every relation of "relids" in the mode at the same place of "modes",
 * waiting only while holding none of them.  Writers that move rows between
 * partitions hold one leaf and then ask for another: locks taken one after
 * the other, as find_all_inheritors takes them for REINDEX of a partitioned
 * index, can hold the leaf such a writer asks for while waiting for the one
 * it holds, a deadlock.  So each round takes what it can without waiting;
 * at the first it cannot, it lets go of the others and waits for that
 * one's holders, as CREATE INDEX CONCURRENTLY waits, not queueing before
 * the writers: a writer's transaction that runs long holds up the
 * statement, not the other writers.  After three such waits, each round
 * first queues for the relation it could not take, still holding nothing
 * else, so that writers that keep coming cannot hold it off for ever.
 * The caller asks for every lock its statement will take before it
 * commits, each in the strongest mode the statement asks for it: a
 * stronger one asked for later would wait holding these.
 */
void
gunique_concurrent_lock_all(List *relids, List *modes)
{
	int			n = list_length(relids);
	int			blocked = -1;

	Assert(list_length(modes) == n);
	for (int round = 0;; round++)
	{
		int			queued = -1;
		int			failed = -1;

		CHECK_FOR_INTERRUPTS();
		if (blocked >= 0 && round <= 3)
		{
			LOCKTAG		tag;

			SET_LOCKTAG_RELATION(tag, MyDatabaseId,
								 list_nth_oid(relids, blocked));
			WaitForLockers(tag, list_nth_int(modes, blocked), false);
		}
		else if (blocked >= 0)
		{
			LockRelationOid(list_nth_oid(relids, blocked),
							list_nth_int(modes, blocked));
			queued = blocked;
		}
		for (int i = 0; i < n && failed < 0; i++)
		{
			if (i != queued &&
				!ConditionalLockRelationOid(list_nth_oid(relids, i),
											list_nth_int(modes, i)))
				failed = i;
		}
		if (failed < 0)
			return;
		for (int i = 0; i < failed; i++)
		{
			if (i != queued)
				UnlockRelationOid(list_nth_oid(relids, i),
								  list_nth_int(modes, i));
		}
		if (queued >= 0)
			UnlockRelationOid(list_nth_oid(relids, queued),
							  list_nth_int(modes, queued));
		blocked = failed;
	}
}

/*
 * Show the build in pg_stat_progress_create_index, on the top's table.  The
 * phase and its subphase go in one update: a reader between two would see
 * the build phase with no name.
 */
static void
progress_report(ConcurrentBuild *b, int64 phase, int64 subphase)
{
	const int	params[] = {
		PROGRESS_CREATEIDX_COMMAND,
		PROGRESS_CREATEIDX_INDEX_OID,
		PROGRESS_CREATEIDX_ACCESS_METHOD_OID,
		PROGRESS_CREATEIDX_PHASE,
		PROGRESS_CREATEIDX_SUBPHASE,
		PROGRESS_CREATEIDX_PARTITIONS_TOTAL,
		PROGRESS_CREATEIDX_PARTITIONS_DONE,
	};
	int64		values[] = {
		b->reindex ? PROGRESS_CREATEIDX_COMMAND_REINDEX_CONCURRENTLY :
		PROGRESS_CREATEIDX_COMMAND_CREATE_CONCURRENTLY,
		b->top,
		b->relam,
		phase,
		subphase,
		b->nleaves,
		b->leaves_done,
	};

	pgstat_progress_start_command(PROGRESS_COMMAND_CREATE_INDEX,
								  b->parts[0].table);
	pgstat_progress_update_multi_param(lengthof(params), params, values);
}

/*
 * Every table under "table", parents before children, partitions being
 * detached included (as DefineIndex covers them), each locked in
 * ShareUpdateExclusiveLock: taken before any ShareLock of the build's first
 * transaction, so that it never holds writers back while it waits for a
 * VACUUM or another DDL on a partition.
 */
List *
gunique_concurrent_lock_tables(Oid table)
{
	List	   *tables = list_make1_oid(table);
	ListCell   *lc;

	LockRelationOid(table, ShareUpdateExclusiveLock);
	foreach(lc, tables)
	{
		List	   *children;

		if (get_rel_relkind(lfirst_oid(lc)) != RELKIND_PARTITIONED_TABLE)
			continue;
		children = find_inheritance_children_extended(lfirst_oid(lc), false,
													  ShareUpdateExclusiveLock,
													  NULL, NULL);
		tables = list_concat(tables, children);
	}
	return tables;
}

/*
 * Take or release, for the session, ShareUpdateExclusiveLock on every table
 * and partitioned index of the tree, as CIC locks its table: writers go on;
 * DDL, VACUUM and ALTER INDEX ... ATTACH PARTITION into the tree wait.
 */
static void
session_locks(ConcurrentBuild *b, bool lock)
{
	for (int i = 0; i < b->nparts; i++)
	{
		BuildPart  *part = &b->parts[i];
		LockRelId	table = {part->table, MyDatabaseId};
		LockRelId	index = {part->index, MyDatabaseId};

		if (lock)
			LockRelationIdForSession(&table, ShareUpdateExclusiveLock);
		else
			UnlockRelationIdForSession(&table, ShareUpdateExclusiveLock);
		if (!part->partitioned)
			continue;
		if (lock)
			LockRelationIdForSession(&index, ShareUpdateExclusiveLock);
		else
			UnlockRelationIdForSession(&index, ShareUpdateExclusiveLock);
	}
}

/* The member of the tree on "table", a partition of "parentindex". */
static Oid
member_on_table(Oid parentindex, Oid table)
{
	List	   *children = find_inheritance_children(parentindex, NoLock);
	ListCell   *lc;

	foreach(lc, children)
	{
		if (IndexGetRelation(lfirst_oid(lc), true) == table)
			return lfirst_oid(lc);
	}
	return InvalidOid;
}

/* The index of the part on "table" (made or found before). */
static Oid
part_index(ConcurrentBuild *b, Oid table)
{
	for (int i = 0; i < b->nparts; i++)
		if (b->parts[i].table == table)
			return b->parts[i].index;
	return InvalidOid;
}

/*
 * The statement DefineIndex gets for a partition: the parent index's
 * definition in the partition's columns, as DefineIndex clones it for its
 * own partitions.  A partitioned table gets ON ONLY.
 */
static IndexStmt *
part_statement(BuildPart *part, Oid parentindex)
{
	Relation	parentidx = index_open(parentindex, AccessShareLock);
	Relation	parent = table_open(part->parenttable, AccessShareLock);
	Relation	rel = table_open(part->table, AccessShareLock);
	AttrMap    *attmap = gunique_attrmap_by_name(RelationGetDescr(rel),
												 RelationGetDescr(parent));
	RangeVar   *rv = NULL;
	IndexStmt  *stmt;

	if (part->partitioned)
	{
		rv = makeRangeVar(get_namespace_name(RelationGetNamespace(rel)),
						  pstrdup(RelationGetRelationName(rel)), -1);
		rv->inh = false;
	}
	stmt = generateClonedIndexStmt(rv, parentidx, attmap, NULL);
	stmt->idxname = NULL;
	stmt->concurrent = !part->partitioned;
	stmt->unique = !part->partitioned;	/* the tree is marked after */
	free_attrmap(attmap);
	table_close(rel, NoLock);
	table_close(parent, NoLock);
	index_close(parentidx, NoLock);
	return stmt;
}

/*
 * Step 1: list the tables under the top's, lock each for the session as CIC
 * locks its table (ShareUpdateExclusiveLock: writers go on, DDL and VACUUM
 * wait), find each one's member of the tree, and make the partitioned
 * tables' that are missing (ON ONLY, which takes their ShareLock for the
 * transaction).  Leaves are made in step 2.
 */
static void
plan_build(ConcurrentBuild *b, MemoryContext cxt)
{
	Relation	top = index_open(b->top, AccessShareLock);
	List	   *tables = gunique_concurrent_lock_tables(top->rd_index->indrelid);
	ListCell   *lc;

	gunique_refuse_foreign_partitions(top->rd_index->indrelid, NoLock);
	b->relam = top->rd_rel->relam;
	b->parts = MemoryContextAllocZero(cxt, sizeof(BuildPart) *
									  list_length(tables));
	foreach(lc, tables)
	{
		BuildPart  *part = &b->parts[b->nparts++];
		Oid			parentindex;

		part->table = lfirst_oid(lc);
		part->partitioned =
			get_rel_relkind(part->table) == RELKIND_PARTITIONED_TABLE;
		if (foreach_current_index(lc) == 0)
		{
			part->index = b->top;
			continue;
		}
		part->parenttable = get_partition_parent(part->table, true);
		parentindex = part_index(b, part->parenttable);
		part->index = member_on_table(parentindex, part->table);
		if (!part->partitioned && !OidIsValid(part->index))
			b->nleaves++;
		else if (!OidIsValid(part->index))
		{
			IndexStmt  *stmt = part_statement(part, parentindex);
			ObjectAddress address;

			gunique_concurrent_share_lock(part->table);
			address = gunique_define_partition_index(part->table, stmt,
													 parentindex);
			part->index = address.objectId;
			CommandCounterIncrement();
		}
	}
	index_close(top, NoLock);

	gunique_tree_set_unique(b->top, true);
	session_locks(b, true);
}

/*
 * Step 2: build each missing leaf by CREATE INDEX CONCURRENTLY of its
 * partition, a partition of its parent's index from the start: the scope
 * (scope.c) passes over it until it is ready for inserts, and probes then
 * search it.  DefineIndex commits as it goes, as for a plain table.
 */
static void
build_leaves(ConcurrentBuild *b, MemoryContext cxt)
{
	for (int i = 1; i < b->nparts; i++)
	{
		BuildPart  *part = &b->parts[i];
		MemoryContext oldcxt;
		Oid			parentindex;
		IndexStmt  *stmt;
		ObjectAddress address;

		if (part->partitioned || OidIsValid(part->index))
			continue;
		CHECK_FOR_INTERRUPTS();
		PushActiveSnapshot(GetTransactionSnapshot());
		progress_report(b, PROGRESS_CREATEIDX_PHASE_WAIT_1, 0);
		/* DefineIndex commits: its statement must outlive the transaction */
		oldcxt = MemoryContextSwitchTo(cxt);
		parentindex = part_index(b, part->parenttable);
		stmt = part_statement(part, parentindex);
		MemoryContextSwitchTo(oldcxt);
		address = gunique_define_partition_index(part->table, stmt,
												 parentindex);
		part->index = address.objectId;
		b->leaves_done++;
		/* DefineIndex leaves its caller to commit the leaf's validity */
		next_transaction();
		if (!OidIsValid(b->held))
			hold_leaf(b);
	}
}

/*
 * Every partition must have a leaf that is valid before the tree can be: a
 * leaf left invalid by an earlier build that failed, and not rebuilt.
 */
static void
require_valid_leaves(ConcurrentBuild *b)
{
	for (int i = 1; i < b->nparts; i++)
	{
		BuildPart  *part = &b->parts[i];

		if (part->partitioned || part->index == b->held ||
			get_index_isvalid(part->index))
			continue;
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("index \"%s\" of partition \"%s\" is not valid",
						get_rel_name(part->index), get_rel_name(part->table)),
				 errdetail("Index \"%s\" can become valid only once every partition's index is.",
						   get_rel_name(b->top)),
				 errhint("REINDEX INDEX CONCURRENTLY \"%s\" rebuilds every partition's index and then finishes it.",
						 get_rel_name(b->top))));
	}
}

/*
 * Step 3: wait for every transaction holding a partition in a mode that
 * writes: one that began before the last leaf was ready may insert without
 * probing it.  Transactions after probe every leaf (src/README, 4.11).
 */
static void
wait_for_writers(ConcurrentBuild *b)
{
	List	   *locktags = NIL;

	progress_report(b, PROGRESS_CREATEIDX_PHASE_WAIT_2, 0);
	for (int i = 1; i < b->nparts; i++)
	{
		LOCKTAG    *tag;

		if (b->parts[i].partitioned)
			continue;
		tag = palloc(sizeof(LOCKTAG));
		SET_LOCKTAG_RELATION(*tag, MyDatabaseId, b->parts[i].table);
		locktags = lappend(locktags, tag);
	}
	WaitForLockersMultiple(locktags, ShareLock, true);
	list_free_deep(locktags);
}

/*
 * Mark an index valid or not, its pg_index row alone, as
 * validatePartitionedIndex marks a partitioned index valid.
 */
static void
set_valid(Oid indexoid, Oid tableoid, bool valid)
{
	Relation	pg_index = table_open(IndexRelationId, RowExclusiveLock);
	HeapTuple	tup;

	LockRelationOid(indexoid, ShareUpdateExclusiveLock);
	tup = SearchSysCacheCopy1(INDEXRELID, ObjectIdGetDatum(indexoid));
	if (!HeapTupleIsValid(tup))
		elog(ERROR, "cache lookup failed for index %u", indexoid);
	((Form_pg_index) GETSTRUCT(tup))->indisvalid = valid;
	CatalogTupleUpdate(pg_index, &tup->t_self, tup);
	heap_freetuple(tup);
	table_close(pg_index, RowExclusiveLock);
	/* plans of the table may now use the index, or no longer, as after CIC */
	CacheInvalidateRelcacheByRelid(tableoid);
}

/*
 * Until the tree is valid, one leaf, ready and complete, is held invalid:
 * pg_dump leaves invalid indexes out, so a dump or pg_upgrade of a build
 * that failed or was cut short restores the tree incomplete, hence
 * invalid, and never checked as a whole over empty tables (src/README,
 * 4.11).  Inserts and probes use it as any ready leaf.
 */
static void
hold_leaf(ConcurrentBuild *b)
{
	for (int i = 1; i < b->nparts && !OidIsValid(b->held); i++)
	{
		if (b->parts[i].partitioned || !get_index_isvalid(b->parts[i].index))
			continue;
		b->held = b->parts[i].index;
		b->heldtable = b->parts[i].table;
	}
	if (!OidIsValid(b->held))
		return;
	PushActiveSnapshot(GetTransactionSnapshot());
	set_valid(b->held, b->heldtable, false);
	PopActiveSnapshot();
	next_transaction();
}

/* Step 5: the partitioned indexes become valid, children first. */
static void
validate_tree(ConcurrentBuild *b)
{
	PushActiveSnapshot(GetTransactionSnapshot());
	require_valid_leaves(b);
	if (OidIsValid(b->held))
		set_valid(b->held, b->heldtable, true);
	for (int i = b->nparts - 1; i >= 0; i--)
	{
		if (b->parts[i].partitioned && !get_index_isvalid(b->parts[i].index))
			set_valid(b->parts[i].index, b->parts[i].table, true);
	}
	CommandCounterIncrement();
	PopActiveSnapshot();
}

/* Steps 2 to 5, after step 1 has committed. */
static void
complete_tree(ConcurrentBuild *b, MemoryContext cxt)
{
	build_leaves(b, cxt);
	if (!OidIsValid(b->held))
		hold_leaf(b);

	PushActiveSnapshot(GetTransactionSnapshot());
	require_valid_leaves(b);
	PopActiveSnapshot();
	gunique_summary_forget_groups(b->top);
	wait_for_writers(b);

	PushActiveSnapshot(GetTransactionSnapshot());
	progress_report(b, PROGRESS_CREATEIDX_PHASE_BUILD,
					GUNIQUE_PHASE_MERGE_CHECK);
	gunique_check_tree_concurrently(b->top);
	next_transaction();

	validate_tree(b);
	next_transaction();

	session_locks(b, false);
	pgstat_progress_end_command();
}

/*
 * An error once step 1 has committed leaves the top invalid: say what to do
 * with it, unless the error already does.  The session locks go with the
 * transaction's abort.
 */
void
gunique_concurrent_rethrow(MemoryContext cxt, const char *topname)
{
	ErrorData  *edata;

	MemoryContextSwitchTo(cxt);
	edata = CopyErrorData();
	if (edata->hint == NULL)
		edata->hint = psprintf("Index \"%s\" is left invalid: REINDEX INDEX CONCURRENTLY finishes it, DROP INDEX drops it.",
							   topname);
	FlushErrorState();
	ReThrowError(edata);
}

/*
 * Complete the gunique tree under "topindex", an invalid partitioned index,
 * without locking its writers out: see the top of the file.  Runs as a
 * top-level statement (the caller has refused a transaction block) and
 * returns in a new transaction, as CREATE INDEX CONCURRENTLY does.
 */
void
gunique_concurrent_complete(Oid topindex, bool reindex)
{
	MemoryContext cxt = AllocSetContextCreate(PortalContext,
											  "gunique concurrent build",
											  ALLOCSET_SMALL_SIZES);
	MemoryContext oldcxt = MemoryContextSwitchTo(cxt);
	ConcurrentBuild *b = palloc0(sizeof(ConcurrentBuild));
	char	   *topname = get_rel_name(topindex);

	b->top = topindex;
	b->reindex = reindex;
	if (!ActiveSnapshotSet())
		PushActiveSnapshot(GetTransactionSnapshot());
	plan_build(b, cxt);
	MemoryContextSwitchTo(oldcxt);
	next_transaction();

	PG_TRY();
	{
		complete_tree(b, cxt);
	}
	PG_CATCH();
	{
		gunique_concurrent_rethrow(cxt, topname);
	}
	PG_END_TRY();
	MemoryContextDelete(cxt);
}

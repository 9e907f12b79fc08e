/*-------------------------------------------------------------------------
 *
 * ddl.c
 *	  DDL handling for gunique indexes.
 *
 * DefineIndex() refuses a UNIQUE index on a partitioned table unless the
 * index covers the partition key, and no access method callback runs before
 * that check.  A ProcessUtility hook is therefore the only place where
 * gunique can take over such statements, and it is installed only when the
 * library is preloaded (hooks.c, which calls gunique_ddl_utility).  It
 * lets PostgreSQL build the index tree as a non-unique one, then marks it
 * unique (tree.c) and checks the keys of all leaves with one merge
 * (merge.c) before the statement returns, so that the tree is valid
 * exactly when uniqueness holds across it.
 *
 * Statements handled:
 * - CREATE UNIQUE INDEX ... USING gunique on a partitioned table, with or
 *	 without ONLY;
 * - ALTER INDEX ... ATTACH PARTITION completing a gunique tree (the form
 *	 pg_dump emits): the whole tree is checked when its top becomes valid;
 *	 and any ALTER INDEX ... ATTACH PARTITION that completes its parent
 *	 first takes, top down, the locks PostgreSQL's validation will take
 *	 bottom up (see lock_validation_path);
 * - CREATE TABLE ... PARTITION OF and ALTER TABLE ... ATTACH PARTITION of a
 *	 partitioned table under a gunique index: PostgreSQL clones the parent's
 *	 indexes from the catalog and would apply the partition-key rule to the
 *	 clone, so the parent's gunique indexes are presented as non-unique for
 *	 the duration of the statement;
 * - ALTER TABLE ... ATTACH PARTITION: the tree is checked with writers
 *	 blocked on every leaf;
 * - ALTER TABLE ... ALTER COLUMN ... TYPE (or SET EXPRESSION) of a column
 *	 that a tree depends on: PostgreSQL drops the tree and creates it again
 *	 from its definition, which it reads from the catalogs, so the top is
 *	 presented as non-unique for the statement; the new tree is checked
 *	 whole before the statement returns (see alter_columns);
 * - before PostgreSQL 18, an ALTER TABLE that adds foreign keys (CREATE
 *	 TABLE ... REFERENCES runs one): gunique indexes are kept out of their
 *	 way when a btree index can serve them (fkey.c).
 *
 * A new gunique index is refused where btree would refuse its operator
 * classes (gunique_ddl_check_index): the pattern classes under a
 * nondeterministic collation; and where a key column's comparison function
 * is not written in C, since gunique calls it under a key lock.
 *
 * An object access hook frees the shared-memory summary and key filter of
 * a leaf index that is dropped (summary.c).
 *
 * Without the preload an event trigger created by the extension stands
 * guard instead: it cannot do the work, but it turns PostgreSQL's
 * partition-key error into one that says what is missing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/objectaccess.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_opclass.h"
#include "commands/defrem.h"
#include "commands/event_trigger.h"
#include "commands/tablecmds.h"
#include "commands/tablespace.h"
#include "miscadmin.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "compat.h"
#include "gunique.h"
#include "am/scope.h"
#include "am/tree.h"
#include "ddl/concurrent.h"
#include "ddl/ddl.h"
#include "ddl/fkey.h"
#include "ddl/merge.h"
#include "locate/builder.h"
#include "locate/keymap.h"
#include "locate/summary.h"

PG_FUNCTION_INFO_V1(gunique_ddl_guard);

/*
 * A gunique tree that the running ALTER TABLE drops and creates again (see
 * alter_columns).  PostgreSQL gives the new top the old top's name.
 */
typedef struct RebuiltTree
{
	Oid			oldtop;
	Oid			table;			/* the top's */
	Oid			namespace;		/* the top's, which is its table's */
	char	   *name;
	bool		early;			/* mark the new top unique once made */
	Oid			newtop;			/* once made */
	int			pending;		/* members of the new tree still to make */
} RebuiltTree;

/* Set while PostgreSQL builds a gunique tree that the hook made non-unique. */
static bool nonunique_build_allowed = false;

/* The trees the running ALTER TABLE rebuilds (RebuiltTree). */
static List *rebuilt_trees = NIL;

static void rebuilt_index_created(Oid relid);

/*
 * A dropped relation takes its summary and filter with it, if it had one:
 * a lookup by OID, so no catalog access is needed to tell.  DROP holds the
 * relation (or its table) in AccessExclusiveLock.  A database dropped or
 * created takes every entry of its OID.
 */
void
gunique_ddl_object_access(ObjectAccessType access, Oid classId, Oid objectId,
						  int subId, void *arg)
{
	if (access == OAT_DROP && classId == RelationRelationId && subId == 0)
		gunique_summary_index_dropped(objectId);
	if (access == OAT_POST_CREATE && classId == RelationRelationId &&
		subId == 0 && rebuilt_trees != NIL)
		rebuilt_index_created(objectId);
	/* the entries of a database's indexes go with it */
	if ((access == OAT_DROP || access == OAT_POST_CREATE) &&
		classId == DatabaseRelationId)
	{
		gunique_summary_database_gone(objectId);
		gunique_builder_database_gone(objectId);
	}
}

bool
gunique_ddl_nonunique_build_allowed(void)
{
	return nonunique_build_allowed;
}

/* Runs the statement through "next", once. */
void
gunique_utility_run(GuniqueUtilityCall *call)
{
	call->next(call->pstmt, call->queryString, call->readOnlyTree,
			   call->context, call->params, call->queryEnv, call->dest,
			   call->qc);
}

#ifdef GUNIQUE_NO_FOREIGN_KEYS

/*
 * Before PostgreSQL 18, ATAddForeignKeyConstraint picks a unique index for
 * the referenced columns and, if it is not btree, raises an internal error.
 * Nothing runs between the choice and the error, so turn that error into
 * one that says what is wrong and what to do.  (fkey.c keeps gunique
 * indexes out of the way when a btree index can serve instead.)
 */
static void
call_standard_fk_error(GuniqueUtilityCall *call)
{
	MemoryContext oldcxt = CurrentMemoryContext;

	PG_TRY();
	{
		gunique_utility_run(call);
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		if (edata->sqlerrcode != ERRCODE_INTERNAL_ERROR ||
			strcmp(edata->message,
				   "only b-tree indexes are supported for foreign keys") != 0)
			PG_RE_THROW();
		FlushErrorState();
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a foreign key cannot reference columns whose unique index is a gunique index before PostgreSQL 18"),
				 errdetail("This server enforces foreign keys only through btree indexes, and the first unique index it found on the referenced columns uses gunique."),
				 errhint("A foreign key can use a unique btree index on the same columns instead, if there is one and the statement does not otherwise alter the referenced table.  PostgreSQL 18 can enforce foreign keys through gunique indexes.")));
	}
	PG_END_TRY();
}
#endif

static void
run_standard(GuniqueUtilityCall *call)
{
#ifdef GUNIQUE_NO_FOREIGN_KEYS
	call_standard_fk_error(call);
#else
	gunique_utility_run(call);
#endif
}

static void
call_standard(GuniqueUtilityCall *call, bool allow_nonunique)
{
	bool		saved = nonunique_build_allowed;

	nonunique_build_allowed = allow_nonunique;
	PG_TRY();
	{
		run_standard(call);
	}
	PG_FINALLY();
	{
		nonunique_build_allowed = saved;
	}
	PG_END_TRY();
}

/* The statement tree, copied first if the caller's copy is read-only. */
Node *
gunique_utility_writable(GuniqueUtilityCall *call)
{
	if (call->readOnlyTree)
	{
		call->pstmt = copyObject(call->pstmt);
		call->readOnlyTree = false;
	}
	return call->pstmt->utilityStmt;
}

static bool
index_stmt_is_gunique(IndexStmt *stmt)
{
	return stmt->accessMethod != NULL &&
		strcmp(stmt->accessMethod, GUNIQUE_AM_NAME) == 0;
}

/*
 * Checks that apply to every CREATE INDEX ... USING gunique, preloaded or
 * not.
 */
static void
check_gunique_index_stmt(IndexStmt *stmt)
{
	if (!stmt->unique)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("access method \"%s\" supports only unique indexes",
						GUNIQUE_AM_NAME),
				 errdetail("A gunique index exists to enforce uniqueness; without UNIQUE it would enforce nothing."),
				 errhint("Use CREATE UNIQUE INDEX, or access method \"btree\" for a non-unique index.")));
}

/* The name of the operator class of key column i of an index. */
static char *
column_opclass_name(Relation index, int i)
{
	bool		isnull;
	Datum		d = SysCacheGetAttr(INDEXRELID, index->rd_indextuple,
									Anum_pg_index_indclass, &isnull);
	Oid			opclass = ((oidvector *) DatumGetPointer(d))->values[i];
	HeapTuple	tuple = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclass));
	char	   *name;

	Assert(!isnull);
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for operator class %u", opclass);
	name = pstrdup(NameStr(((Form_pg_opclass) GETSTRUCT(tuple))->opcname));
	ReleaseSysCache(tuple);
	return name;
}

/*
 * The pattern classes compare bytes whatever the collation, while their
 * equality is "=", which under a nondeterministic collation is not byte
 * equality: btree's are refused there by index_create, which knows them
 * by OID, and so are gunique's, known by their comparison functions.
 */
static void
check_pattern_collation(Relation index, int i)
{
	Oid			collation = index->rd_indcollation[i];
	Oid			cmp;

	if (!OidIsValid(collation) || get_collation_isdeterministic(collation))
		return;
	cmp = get_opfamily_proc(index->rd_opfamily[i], index->rd_opcintype[i],
							index->rd_opcintype[i], BTORDER_PROC);
	if (cmp == F_BTTEXT_PATTERN_CMP || cmp == F_BTBPCHAR_PATTERN_CMP)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("nondeterministic collations are not supported for operator class \"%s\"",
						column_opclass_name(index, i))));
}

/*
 * A comparison function that is not written in C may run queries, and so
 * wait for locks or re-enter gunique; gunique calls it under a key lock,
 * an LWLock that holds off cancellation and that other inserters wait on
 * (src/README, I4).  An index made before this check, or whose
 * function was replaced since, is refused at insert instead (probegroup.c).
 */
static void
check_comparison(Relation index, int i)
{
	Oid			proc = gunique_key_user_comparison(index, i);

	if (OidIsValid(proc))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("operator class \"%s\" cannot be used by access method \"%s\"",
						column_opclass_name(index, i), GUNIQUE_AM_NAME),
				 errdetail("Its comparison function %s is not written in C.  gunique calls it while other inserters of the key wait on a lock that cannot be cancelled, and a function that runs SQL there could wait forever.",
						   format_procedure_qualified(proc)),
				 errhint("Use an operator class whose comparison function is written in C, as those of gunique are.")));
}

/*
 * Refuse a new gunique index whose key columns gunique cannot stand
 * behind: called as each index of a tree is built, and for the top of a
 * partitioned one, which has no build.
 */
void
gunique_ddl_check_index(Relation index)
{
	for (int i = 0; i < IndexRelationGetNumberOfKeyAttributes(index); i++)
	{
		check_pattern_collation(index, i);
		check_comparison(index, i);
	}
}

/* The relation a RangeVar names, if it is a partitioned table. */
static Oid
partitioned_table_oid(RangeVar *rv, LOCKMODE lockmode)
{
	Oid			relid = RangeVarGetRelid(rv, lockmode, true);

	if (OidIsValid(relid) && get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE)
		return relid;
	return InvalidOid;
}

/* The gunique index on tableoid that the statement just built non-unique. */
static Oid
new_nonunique_tree(Oid tableoid)
{
	List	   *indexes = gunique_table_indexes(tableoid);
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);

		if (!gunique_index_is_unique(indexoid))
			return indexoid;
	}
	return InvalidOid;
}

/*
 * Mark a tree unique and, if it is complete, check it (see gunique_check_tree
 * for "attached" and "only_attached").
 */
static void
finish_tree(Oid topindex, Oid attached, Oid only_attached)
{
	gunique_tree_set_unique(topindex, true);
	if (gunique_index_is_valid(topindex))
		gunique_check_tree(topindex, attached, only_attached);
}

/*
 * CREATE INDEX CONCURRENTLY on a partitioned table: the statement makes the
 * top alone (ON ONLY), in its transaction; concurrent.c completes the tree
 * in transactions of its own.  A temporary table is built at once, as
 * PostgreSQL builds a temporary table's index.
 */
static bool
prepare_concurrent(GuniqueUtilityCall *call, IndexStmt *stmt, Oid tableoid)
{
	if (!stmt->concurrent)
		return false;
	PreventInTransactionBlock(call->context == PROCESS_UTILITY_TOPLEVEL,
							  "CREATE INDEX CONCURRENTLY");
	if (!stmt->relation->inh)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot create index on only partitioned table \"%s\" concurrently",
						get_rel_name(tableoid)),
				 errdetail("CREATE INDEX ... ON ONLY builds no partition's index: it has nothing to do concurrently."),
				 errhint("Leave out CONCURRENTLY, or leave out ONLY to build the whole index concurrently.")));
	stmt->concurrent = false;
	if (get_rel_persistence(tableoid) == RELPERSISTENCE_TEMP)
		return false;
	stmt->relation->inh = false;
	list_free(gunique_concurrent_lock_tables(tableoid));
	gunique_concurrent_share_lock(tableoid);
	return true;
}

static void
create_index(GuniqueUtilityCall *call)
{
	IndexStmt  *stmt = (IndexStmt *) call->pstmt->utilityStmt;
	LOCKMODE	lockmode = stmt->concurrent ? ShareUpdateExclusiveLock : ShareLock;
	Oid			tableoid;
	Oid			topindex;
	bool		concurrent;

	check_gunique_index_stmt(stmt);

	/* Take the lock DefineIndex takes, so the answer cannot change. */
	tableoid = partitioned_table_oid(stmt->relation, lockmode);
	if (!OidIsValid(tableoid))
	{
		call_standard(call, false);
		return;
	}
	if (stmt->relation->inh)
		gunique_refuse_foreign_partitions(tableoid, NoLock);

	stmt = (IndexStmt *) gunique_utility_writable(call);
	concurrent = prepare_concurrent(call, stmt, tableoid);
	stmt->unique = false;
	call_standard(call, true);
	CommandCounterIncrement();

	topindex = new_nonunique_tree(tableoid);
	if (OidIsValid(topindex))	/* not if IF NOT EXISTS found one */
	{
		Relation	top = index_open(topindex, NoLock);

		gunique_ddl_check_index(top);
		index_close(top, NoLock);
		if (concurrent && !gunique_index_is_valid(topindex))
			gunique_concurrent_complete(topindex, false);
		else
			finish_tree(topindex, InvalidOid, InvalidOid);
	}
}

/* Does a REINDEX statement say CONCURRENTLY? */
static bool
reindex_concurrently(ReindexStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->params)
	{
		DefElem    *opt = lfirst(lc);

		if (strcmp(opt->defname, "concurrently") == 0)
			return defGetBoolean(opt);
	}
	return false;
}

/*
 * Whether PostgreSQL accepts the REINDEX's options, so that taking its locks
 * first delays no error it would raise at once: concurrently and verbose
 * with a Boolean or no value, and an existing tablespace.
 */
static bool
reindex_options_ok(ReindexStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->params)
	{
		DefElem    *opt = lfirst(lc);
		bool		value;

		if (strcmp(opt->defname, "tablespace") == 0)
		{
			if (opt->arg == NULL || !IsA(opt->arg, String) ||
				!OidIsValid(get_tablespace_oid(strVal(opt->arg), true)))
				return false;
		}
		else if (strcmp(opt->defname, "concurrently") != 0 &&
				 strcmp(opt->defname, "verbose") != 0)
			return false;
		else if (opt->arg != NULL &&
				 !(IsA(opt->arg, Integer) &&
				   (intVal(opt->arg) == 0 || intVal(opt->arg) == 1)) &&
				 !(IsA(opt->arg, String) &&
				   parse_bool(strVal(opt->arg), &value)))
			return false;
	}
	return true;
}

/*
 * The partitioned table or index a REINDEX INDEX or TABLE names, when it is
 * a gunique tree's or has one, and the statement may go on to list its
 * members (PostgreSQL checks the rest): the user may reindex the table,
 * the options are valid, and the statement runs on its own.
 * *table is set to the table.
 */
static Oid
reindex_partitioned_target(GuniqueUtilityCall *call, Oid *table)
{
	ReindexStmt *stmt = (ReindexStmt *) call->pstmt->utilityStmt;
	Oid			relid = InvalidOid;

	*table = InvalidOid;
	if (call->context != PROCESS_UTILITY_TOPLEVEL || IsTransactionBlock() ||
		!reindex_options_ok(stmt))
		return InvalidOid;
	if (stmt->kind == REINDEX_OBJECT_INDEX || stmt->kind == REINDEX_OBJECT_TABLE)
		relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(relid))
		return InvalidOid;
	switch (get_rel_relkind(relid))
	{
		case RELKIND_PARTITIONED_INDEX:
			if (!gunique_is_gunique_index(relid))
				return InvalidOid;
			*table = IndexGetRelation(relid, true);
			break;
		case RELKIND_PARTITIONED_TABLE:
			{
				List	   *indexes = gunique_table_indexes(relid);

				if (indexes == NIL)
					return InvalidOid;
				list_free(indexes);
				*table = relid;
				break;
			}
		default:
			return InvalidOid;
	}
	if (!OidIsValid(*table) || !gunique_may_reindex(*table))
		return InvalidOid;
	return relid;
}

/*
 * Take the locks REINDEX of a partitioned table or index takes before it
 * commits its first transaction, all at once (see reindex), each in the
 * strongest mode it takes it: the relation it names as RangeVarGetRelid's
 * callback locks it (REINDEX INDEX: the table, then the index), then every
 * member in ShareLock (find_all_inheritors).
 */
static void
reindex_lock_tree(ReindexStmt *stmt, bool concurrent, Oid target, Oid table)
{
	List	   *members = get_rel_relkind(target) == RELKIND_PARTITIONED_INDEX ?
		gunique_tree_members(target) : find_all_inheritors(target, NoLock, NULL);
	List	   *relids = NIL;
	List	   *modes = NIL;
	ListCell   *lc;

	if (stmt->kind == REINDEX_OBJECT_INDEX)
	{
		relids = lappend_oid(relids, table);
		modes = lappend_int(modes, concurrent ?
							ShareUpdateExclusiveLock : ShareLock);
		relids = lappend_oid(relids, target);
		modes = lappend_int(modes, concurrent ?
							ShareUpdateExclusiveLock : AccessExclusiveLock);
	}
	else if (concurrent)
	{
		relids = lappend_oid(relids, target);
		modes = lappend_int(modes, ShareUpdateExclusiveLock);
	}
	foreach(lc, members)
	{
		relids = lappend_oid(relids, lfirst_oid(lc));
		modes = lappend_int(modes, ShareLock);
	}
	gunique_concurrent_lock_all(relids, modes);
	list_free(members);
	list_free(relids);
	list_free(modes);
}

/*
 * REINDEX of a partitioned table or index first lists its members, locking
 * each in ShareLock in turn (find_all_inheritors).  A writer moving a row
 * between partitions holds one leaf and asks for another, so the two can
 * deadlock (src/README, 4.11): take those locks first, all at once, waiting
 * only while holding none.
 *
 * REINDEX INDEX CONCURRENTLY of an invalid tree's top (a CREATE INDEX
 * CONCURRENTLY that failed, or a tree made ON ONLY): once PostgreSQL has
 * rebuilt the leaves there are, concurrent.c builds those missing, checks
 * the tree and marks it valid.
 */
static void
reindex(GuniqueUtilityCall *call)
{
	ReindexStmt *stmt = (ReindexStmt *) call->pstmt->utilityStmt;
	MemoryContext oldcxt = CurrentMemoryContext;
	Oid			table;
	Oid			target = reindex_partitioned_target(call, &table);
	bool		concurrent;
	char	   *topname;

	if (!OidIsValid(target))
	{
		call_standard(call, false);
		return;
	}
	concurrent = reindex_concurrently(stmt);
	reindex_lock_tree(stmt, concurrent, target, table);
	if (stmt->kind != REINDEX_OBJECT_INDEX || !concurrent ||
		gunique_tree_top(target) != target ||
		gunique_index_is_valid(target))
	{
		call_standard(call, false);
		return;
	}
	/* PostgreSQL's rebuild of the leaves failing leaves the top invalid */
	topname = get_rel_name(target);
	PG_TRY();
	{
		call_standard(call, false);
	}
	PG_CATCH();
	{
		gunique_concurrent_rethrow(oldcxt, topname);
	}
	PG_END_TRY();
	gunique_concurrent_complete(target, true);
}

/* The top indexes of the gunique trees that cover a table. */
static List *
gunique_tops_of_table(Oid tableoid)
{
	List	   *indexes = gunique_table_indexes(tableoid);
	List	   *tops = NIL;
	ListCell   *lc;

	foreach(lc, indexes)
		tops = list_append_unique_oid(tops, gunique_tree_top(lfirst_oid(lc)));
	list_free(indexes);
	return tops;
}

/*
 * Run a statement that makes a partitioned table a new partition under
 * "parent": the parent's gunique indexes (and those of the new partition's
 * own trees) are non-unique while it runs, so that PostgreSQL neither
 * applies the partition-key rule nor refuses to adopt matching indexes.
 */
static void
run_with_trees_nonunique(GuniqueUtilityCall *call, Oid parent, Oid child)
{
	List	   *tops = gunique_tops_of_table(parent);
	List	   *childtops = OidIsValid(child) ? gunique_table_indexes(child) : NIL;
	ListCell   *lc;

	foreach(lc, tops)
		gunique_tree_set_unique(lfirst_oid(lc), false);
	foreach(lc, childtops)
		gunique_tree_set_unique(lfirst_oid(lc), false);

	call_standard(call, true);
	CommandCounterIncrement();

	/* Adopted child trees are now part of the parent's trees. */
	foreach(lc, childtops)
		gunique_tree_set_unique(gunique_tree_top(lfirst_oid(lc)), true);
	foreach(lc, tops)
		gunique_tree_set_unique(lfirst_oid(lc), true);
}

static void
create_partition(GuniqueUtilityCall *call)
{
	CreateStmt *stmt = (CreateStmt *) call->pstmt->utilityStmt;
	Oid			parent;

	/* A new leaf gets local unique indexes and no rows: nothing to do. */
	if (stmt->partspec == NULL || list_length(stmt->inhRelations) != 1)
	{
		call_standard(call, false);
		return;
	}

	/* DefineRelation locks the parent of a new partition this way. */
	parent = RangeVarGetRelid(linitial(stmt->inhRelations), AccessExclusiveLock,
							  true);
	if (!OidIsValid(parent) || gunique_table_indexes(parent) == NIL)
	{
		call_standard(call, false);
		return;
	}
	run_with_trees_nonunique(call, parent, InvalidOid);
}

static PartitionCmd *
attach_partition_cmd(AlterTableStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst(lc);

		if (cmd->subtype == AT_AttachPartition)
			return (PartitionCmd *) cmd->def;
	}
	return NULL;
}

/* ALTER TABLE parent ATTACH PARTITION child */
static void
attach_table(GuniqueUtilityCall *call, AlterTableStmt *stmt, PartitionCmd *cmd)
{
	Oid			parent = partitioned_table_oid(stmt->relation,
											   ShareUpdateExclusiveLock);
	Oid			child;
	List	   *tops;
	List	   *valid_tops = NIL;
	bool		locked_before;
	ListCell   *lc;

	if (!OidIsValid(parent) || (tops = gunique_tops_of_table(parent)) == NIL)
	{
		call_standard(call, false);
		return;
	}

	/*
	 * One tree-changing ATTACH at a time per tree: two into different
	 * partitioned tables of one tree would each check its keys without the
	 * other's.  ShareUpdateExclusiveLock on the top conflicts with itself
	 * only (and CREATE INDEX CONCURRENTLY's session lock), not with
	 * inserters.
	 *
	 * A tree that was valid before held unique keys: only the attached rows
	 * need checking against it (merge.c).  One that becomes valid now is
	 * checked whole.
	 */
	foreach(lc, tops)
	{
		LockRelationOid(lfirst_oid(lc), ShareUpdateExclusiveLock);
		if (gunique_index_is_valid(lfirst_oid(lc)))
			valid_tops = lappend_oid(valid_tops, lfirst_oid(lc));
	}

	/*
	 * The check locks every leaf's writers out (ShareLock).  With a default
	 * partition, do it before PostgreSQL locks that (AccessExclusiveLock):
	 * an insert into another partition that holds its own and probes may
	 * wait for it, and taken after, the check would wait for that insert,
	 * and the insert for it (src/README, "Lock order").  Without one, the
	 * check locks them after PostgreSQL's part of the ATTACH (the scan of
	 * the partition's rows for its bound, the build of its missing index),
	 * which then keeps no writer out.
	 */
	locked_before = OidIsValid(get_default_partition_oid(parent));
	if (locked_before)
	{
		foreach(lc, valid_tops)
			gunique_check_tree_lock(lfirst_oid(lc));
	}

	/* ATExecAttachPartition locks the table being attached this way. */
	child = RangeVarGetRelid(cmd->name, AccessExclusiveLock, true);
	if (OidIsValid(child) && get_rel_relkind(child) == RELKIND_PARTITIONED_TABLE)
	{
		/*
		 * PostgreSQL refuses a foreign table attached under a unique index,
		 * but with the trees non-unique it would skip a foreign partition of
		 * the attached table, leaving it uncovered.  ATExecAttachPartition
		 * locks the attached table's partitions the same way.
		 */
		gunique_refuse_foreign_partitions(child, AccessExclusiveLock);
		run_with_trees_nonunique(call, parent, child);
	}
	else
		call_standard(call, false);

	CommandCounterIncrement();
	foreach(lc, tops)
	{
		Oid			top = lfirst_oid(lc);

		if (!list_member_oid(valid_tops, top))
			finish_tree(top, child, InvalidOid);
		else if (locked_before)
			finish_tree(top, child, child);
		else
		{
			/* writers are let in but for the end (merge.c) */
			gunique_tree_set_unique(top, true);
			gunique_check_attached(top, child);
		}
	}
}

/* Lock or unlock, in AccessExclusiveLock, each index of path and its table. */
static void
lock_path(List *path, bool lock)
{
	ListCell   *lc;

	foreach(lc, path)
	{
		Oid			index = lfirst_oid(lc);
		Oid			table = IndexGetRelation(index, true);

		if (lock)
		{
			LockRelationOid(index, AccessExclusiveLock);
			if (OidIsValid(table))
				LockRelationOid(table, AccessExclusiveLock);
		}
		else
		{
			UnlockRelationOid(index, AccessExclusiveLock);
			if (OidIsValid(table))
				UnlockRelationOid(table, AccessExclusiveLock);
		}
	}
}

/*
 * An ALTER INDEX ... ATTACH PARTITION that completes its parent index makes
 * PostgreSQL climb the tree, marking each index that is now complete valid
 * and locking the next index up and its table in AccessExclusiveLock
 * (validatePartitionedIndex).  It then holds a lower table while it waits
 * for an upper one: the opposite of the order in which queries and every
 * other ATTACH lock a partition tree.  Anything that holds the top table a
 * while, as the merge check of a tree-completing ATTACH does, turns that
 * into deadlocks (pg_restore -j hit them).  So take the same locks first,
 * top down, each index before its table as PostgreSQL does.  The climb is
 * predicted from the catalogs, then checked again under the locks; should
 * another transaction have completed more of the tree meanwhile, the locks
 * are given back and taken again in order.  Only for the index's owner:
 * PostgreSQL checks ownership before it locks anything.
 */
static void
lock_validation_path(AlterTableStmt *stmt, PartitionCmd *cmd)
{
	Oid			parent = RangeVarGetRelid(stmt->relation, NoLock, true);
	Oid			child = RangeVarGetRelid(cmd->name, NoLock, true);
	List	   *path;

	if (!OidIsValid(parent) || !OidIsValid(child) ||
		get_rel_relkind(parent) != RELKIND_PARTITIONED_INDEX ||
		!gunique_relation_owned(parent))
		return;

	path = gunique_attach_validation_path(parent, child);
	while (path != NIL)
	{
		List	   *again;

		lock_path(path, true);
		again = gunique_attach_validation_path(parent, child);
		if (list_difference_oid(again, path) == NIL)
			break;
		lock_path(path, false);
		path = again;
	}
}

/*
 * An ALTER INDEX ... ATTACH PARTITION that completes a gunique tree merges
 * it with every leaf's table in ShareLock.  PostgreSQL first locks the
 * attached index in AccessExclusiveLock: a writer already holding its
 * partition would then wait for the index while the merge waited for the
 * partition.  So take the partitions' ShareLock first, as an insert takes
 * a partition before its indexes; after the validation path, which locks
 * the tables above top down.  Only for the index's owner, as there.
 */
static void
lock_completed_tree(AlterTableStmt *stmt, PartitionCmd *cmd)
{
	Oid			parent = RangeVarGetRelid(stmt->relation, NoLock, true);
	Oid			child = RangeVarGetRelid(cmd->name, NoLock, true);
	Oid			table;
	List	   *tables;
	ListCell   *lc;

	if (!OidIsValid(parent) || !OidIsValid(child) ||
		get_rel_relkind(parent) != RELKIND_PARTITIONED_INDEX ||
		!gunique_is_gunique_index(parent) ||
		!gunique_relation_owned(parent) ||
		!gunique_attach_completes_top(parent, child))
		return;
	/* one tree-changing ATTACH at a time per tree, as attach_table */
	LockRelationOid(gunique_tree_top(parent), ShareUpdateExclusiveLock);
	table = IndexGetRelation(gunique_tree_top(parent), true);
	if (!OidIsValid(table))
		return;
	tables = find_all_inheritors(table, NoLock, NULL);
	foreach(lc, tables)
	{
		if (get_rel_relkind(lfirst_oid(lc)) != RELKIND_PARTITIONED_TABLE)
			LockRelationOid(lfirst_oid(lc), ShareLock);
	}
	list_free(tables);
}

/* ALTER INDEX parent ATTACH PARTITION child */
static void
attach_index(GuniqueUtilityCall *call, AlterTableStmt *stmt, PartitionCmd *cmd)
{
	Oid			parent;
	Oid			top;
	bool		was_valid;

	lock_validation_path(stmt, cmd);
	lock_completed_tree(stmt, cmd);
	parent = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(parent) || !gunique_is_gunique_index(parent))
	{
		call_standard(call, false);
		return;
	}
	top = gunique_tree_top(parent);
	was_valid = gunique_index_is_valid(top);

	call_standard(call, false);
	CommandCounterIncrement();

	/* The tree is complete: now it must hold what it promises. */
	if (!was_valid && gunique_index_is_valid(top))
		finish_tree(top, InvalidOid, InvalidOid);
}

/*
 * An ALTER TABLE that may add foreign keys (CREATE TABLE ... REFERENCES
 * runs one): before PostgreSQL 18 they must not meet a gunique index before
 * a btree index on the referenced columns (fkey.c).
 */
static void
alter_table_fkeys(GuniqueUtilityCall *call, AlterTableStmt *stmt,
				  bool allow_nonunique)
{
	List	   *hidden = gunique_fkey_hide(stmt);

	if (hidden == NIL)
	{
		call_standard(call, allow_nonunique);
		return;
	}
	PG_TRY();
	{
		call_standard(call, allow_nonunique);
	}
	PG_CATCH();
	{
		gunique_fkey_unhide(hidden, true);
		PG_RE_THROW();
	}
	PG_END_TRY();
	gunique_fkey_unhide(hidden, false);
}

/* The columns whose type or generation expression the statement changes. */
static List *
altered_columns(AlterTableStmt *stmt)
{
	List	   *names = NIL;
	ListCell   *lc;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst(lc);

		if (GUNIQUE_AT_REBUILDS_INDEXES(cmd->subtype) && cmd->name != NULL)
			names = lappend(names, makeString(cmd->name));
	}
	return names;
}

/*
 * Note a tree that the statement will rebuild, and present its top as
 * non-unique, so that PostgreSQL reads a non-unique definition.  Only the
 * top: PostgreSQL reads no other member's definition, and drops them all.
 */
static RebuiltTree *
rebuilt_tree(Oid top)
{
	RebuiltTree *tree = palloc0(sizeof(RebuiltTree));

	tree->oldtop = top;
	tree->table = IndexGetRelation(top, false);
	tree->namespace = get_rel_namespace(top);
	tree->name = get_rel_name(top);
#ifdef GUNIQUE_NO_FOREIGN_KEYS
	tree->early = gunique_index_is_replica_identity(top);
#else
	tree->early = true;
#endif
	gunique_index_set_unique(top, false);
	return tree;
}

/*
 * The object access hook saw a gunique index made while an ALTER TABLE
 * rebuilds gunique trees: the new top of one (a partitioned index with the
 * old top's name), or a member below the top being made.  See
 * alter_columns for why and when a top is marked unique before the
 * statement ends.  index_create makes its catalog rows visible right after
 * the hook, and here a moment earlier, so that the top's row can be
 * updated.
 */
static void
rebuilt_index_created(Oid relid)
{
	Oid			namespace;
	char		relkind;
	char	   *name = gunique_new_index(relid, &namespace, &relkind);
	RebuiltTree *made = NULL;
	ListCell   *lc;

	if (name == NULL)
		return;
	foreach(lc, rebuilt_trees)
	{
		RebuiltTree *tree = lfirst(lc);

		if (!OidIsValid(tree->newtop) &&
			relkind == RELKIND_PARTITIONED_INDEX &&
			tree->namespace == namespace && strcmp(tree->name, name) == 0)
		{
			/* DefineIndex makes a new index on every partition below */
			tree->newtop = relid;
			tree->pending =
				list_length(find_all_inheritors(tree->table, NoLock, NULL)) - 1;
			made = tree;
			break;
		}
	}
	/* Or a member of the tree whose top was made last. */
	foreach(lc, made == NULL ? rebuilt_trees : NIL)
	{
		RebuiltTree *tree = lfirst(lc);

		if (OidIsValid(tree->newtop) && tree->pending > 0)
		{
			tree->pending--;
			made = tree;
			break;
		}
	}
	if (made != NULL && made->early && made->pending == 0)
	{
		CommandCounterIncrement();
		gunique_index_set_unique(made->newtop, true);
	}
	pfree(name);
}

/*
 * ALTER TABLE ... ALTER COLUMN ... TYPE (COLLATE too, and from PostgreSQL
 * 17 SET EXPRESSION) drops every index that depends on the column and
 * makes it again, under the same name, from the definition it read before
 * (ATPostAlterTypeCleanup), through DefineIndex, without this hook in
 * between: its partition-key check would refuse a unique gunique tree.  So
 * the top of every tree the statement will rebuild is presented as
 * non-unique first (rebuilt_tree); PostgreSQL makes the new tree
 * non-unique and builds its leaves (or fills them after a rewrite, through
 * ambuild all the same); then the new tree is marked unique and checked
 * whole, as by CREATE INDEX, before the statement returns.  A key that the
 * new type makes equal to another fails the statement, which takes the
 * whole ALTER back.  Trees that do not depend on the columns are left
 * alone: their keys do not change.
 *
 * Later in the same statement PostgreSQL restores a replica identity on
 * the tree and (PostgreSQL 18) the foreign keys that reference it, and
 * both need the new top unique.  So the top is marked unique as soon as
 * DefineIndex has made the last member of the new tree (the object access
 * hook counts them: rebuilt_index_created), and not before, since from
 * PostgreSQL 17 on DefineIndex makes the index of each partition from its
 * parent's catalog row, and would then apply the partition-key check to a
 * partitioned partition.  The members stay non-unique, and the check
 * still runs, until the statement returns.  Before PostgreSQL 18 a foreign
 * key must not meet a gunique top before a btree index on the same
 * columns (fkey.c), so the top is marked early only for a replica
 * identity (where a foreign key is restored too, it may then take the
 * gunique top and fail, with fkey.c's error: README.md says so).
 */
static void
alter_columns(GuniqueUtilityCall *call, AlterTableStmt *stmt)
{
	List	   *columns = altered_columns(stmt);
	List	   *saved = rebuilt_trees;
	List	   *rebuilt = NIL;
	List	   *tops;
	LOCKMODE	lockmode;
	Oid			relid;
	ListCell   *lc;

	/* ALTER TABLE ONLY of such a column fails, rebuilding nothing. */
	if (columns == NIL || stmt->objtype != OBJECT_TABLE ||
		!stmt->relation->inh)
	{
		alter_table_fkeys(call, stmt, false);
		return;
	}

	/*
	 * Look up and lock the table as ProcessUtility will, permission checks
	 * first, and its partitions as ATPrepAlterColumnType will: the trees
	 * must not change before PostgreSQL reads them.
	 */
	lockmode = AlterTableGetLockLevel(stmt->cmds);
	relid = AlterTableLookupRelation(stmt, lockmode);
	if (!OidIsValid(relid) ||
		get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE)
	{
		alter_table_fkeys(call, stmt, false);
		return;
	}
	list_free(find_all_inheritors(relid, lockmode, NULL));
	tops = gunique_trees_on_columns(relid, columns);
	if (tops == NIL)
	{
		alter_table_fkeys(call, stmt, false);
		return;
	}

	foreach(lc, tops)
		rebuilt = lappend(rebuilt, rebuilt_tree(lfirst_oid(lc)));
	rebuilt_trees = rebuilt;
	PG_TRY();
	{
		alter_table_fkeys(call, stmt, true);
	}
	PG_FINALLY();
	{
		rebuilt_trees = saved;
	}
	PG_END_TRY();
	CommandCounterIncrement();

	foreach(lc, rebuilt)
	{
		RebuiltTree *tree = lfirst(lc);

		if (OidIsValid(tree->newtop))
			finish_tree(tree->newtop, InvalidOid, InvalidOid);
		else if (SearchSysCacheExists1(RELOID, ObjectIdGetDatum(tree->oldtop)))
			gunique_index_set_unique(tree->oldtop, true);
	}
}

static void
alter_table(GuniqueUtilityCall *call)
{
	AlterTableStmt *stmt = (AlterTableStmt *) call->pstmt->utilityStmt;
	PartitionCmd *cmd = attach_partition_cmd(stmt);

	if (cmd == NULL)
		alter_columns(call, stmt);
	else if (stmt->objtype == OBJECT_INDEX)
		attach_index(call, stmt, cmd);
	else
		attach_table(call, stmt, cmd);
}

/*
 * Run a utility statement through "next" (the previous hook or
 * standard_ProcessUtility), once, taking over the statements that make or
 * change gunique trees.
 */
void
gunique_ddl_utility(PlannedStmt *pstmt, const char *queryString,
					bool readOnlyTree, ProcessUtilityContext context,
					ParamListInfo params, QueryEnvironment *queryEnv,
					DestReceiver *dest, QueryCompletion *qc,
					ProcessUtility_hook_type next)
{
	Node	   *parsetree = pstmt->utilityStmt;
	GuniqueUtilityCall call = {pstmt, queryString, readOnlyTree, context, params,
	queryEnv, dest, qc, next};

	if (IsA(parsetree, IndexStmt) &&
		index_stmt_is_gunique((IndexStmt *) parsetree))
		create_index(&call);
	else if (IsA(parsetree, CreateStmt) &&
			 ((CreateStmt *) parsetree)->partbound != NULL)
		create_partition(&call);
	else if (IsA(parsetree, AlterTableStmt))
		alter_table(&call);
	else if (IsA(parsetree, ReindexStmt))
		reindex(&call);
	else
		call_standard(&call, false);
}

/*
 * Event trigger on ddl_command_start, created by the extension script.
 *
 * When the library is preloaded the utility hook has already handled the
 * statement and this does nothing.  Otherwise it refuses the statements that
 * need the hook, before PostgreSQL reports something misleading or builds
 * something unchecked.
 */
Datum
gunique_ddl_guard(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;
	Node	   *parsetree;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"gunique_ddl_guard\" was not called by the event trigger manager")));

	if (gunique_preloaded)
		PG_RETURN_VOID();

	trigdata = (EventTriggerData *) fcinfo->context;
	parsetree = trigdata->parsetree;
	if (IsA(parsetree, IndexStmt) &&
		index_stmt_is_gunique((IndexStmt *) parsetree))
	{
		IndexStmt  *stmt = (IndexStmt *) parsetree;

		check_gunique_index_stmt(stmt);
		if (OidIsValid(partitioned_table_oid(stmt->relation, NoLock)))
			gunique_report_not_preloaded(GUNIQUE_NEED_CREATE_TREE);
	}
	else if (IsA(parsetree, CreateStmt) &&
			 ((CreateStmt *) parsetree)->partbound != NULL &&
			 list_length(((CreateStmt *) parsetree)->inhRelations) == 1)
	{
		Oid			parent = RangeVarGetRelid(linitial(((CreateStmt *) parsetree)->inhRelations),
											  NoLock, true);

		if (OidIsValid(parent) && gunique_table_indexes(parent) != NIL)
			gunique_report_not_preloaded(GUNIQUE_NEED_CREATE_PARTITION);
	}
	else if (IsA(parsetree, AlterTableStmt) &&
			 attach_partition_cmd((AlterTableStmt *) parsetree) != NULL)
	{
		AlterTableStmt *stmt = (AlterTableStmt *) parsetree;
		Oid			relid = RangeVarGetRelid(stmt->relation, NoLock, true);

		if (OidIsValid(relid) &&
			(stmt->objtype == OBJECT_INDEX ? gunique_is_gunique_index(relid) :
			 gunique_table_indexes(relid) != NIL))
			gunique_report_not_preloaded(GUNIQUE_NEED_ATTACH);
	}
	else if (IsA(parsetree, AlterTableStmt) &&
			 ((AlterTableStmt *) parsetree)->objtype == OBJECT_TABLE)
	{
		AlterTableStmt *stmt = (AlterTableStmt *) parsetree;
		List	   *columns = altered_columns(stmt);
		Oid			relid = columns == NIL ? InvalidOid :
			RangeVarGetRelid(stmt->relation, NoLock, true);

		if (OidIsValid(relid) &&
			get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE &&
			gunique_trees_on_columns(relid, columns) != NIL)
			gunique_report_not_preloaded(GUNIQUE_NEED_ALTER_COLUMN);
	}

	PG_RETURN_VOID();
}

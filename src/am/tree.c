/*-------------------------------------------------------------------------
 *
 * tree.c
 *	  gunique index trees in the catalogs.
 *
 * A gunique index on a partitioned table is an ordinary partitioned index
 * tree: a partitioned index on each partitioned table and an nbtree-format
 * leaf index on each leaf, linked by pg_inherits, all with
 * pg_index.indisunique set, so that psql, pg_dump and the planner see a
 * unique index.  PostgreSQL's DefineIndex refuses to build a unique tree
 * whose key does not cover the partition key, so the DDL hook has it built
 * non-unique and sets indisunique afterwards, in the same transaction.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_depend.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "commands/defrem.h"
#include "storage/lmgr.h"
#include "utils/fmgroids.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "gunique.h"
#include "am/tree.h"

bool
gunique_is_gunique_index(Oid indexoid)
{
	Oid			amoid = get_index_am_oid(GUNIQUE_AM_NAME, true);
	HeapTuple	tuple;
	bool		result;

	if (!OidIsValid(amoid))
		return false;
	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(indexoid));
	if (!HeapTupleIsValid(tuple))
		return false;
	result = ((Form_pg_class) GETSTRUCT(tuple))->relam == amoid;
	ReleaseSysCache(tuple);
	return result;
}

/* For functions that take a gunique index: refuse anything else. */
void
gunique_require_gunique_index(Oid indexoid)
{
	char	   *name;

	if (gunique_is_gunique_index(indexoid))
		return;
	name = get_rel_name(indexoid);
	ereport(ERROR,
			(errcode(ERRCODE_WRONG_OBJECT_TYPE),
			 errmsg("\"%s\" is not a gunique index", name ? name : "?"),
			 errhint("Pass an index created with USING gunique.")));
}

/*
 * The gunique indexes defined directly on a table, in OID order.  Reads
 * pg_index only, so callers need no lock on the table (the event trigger
 * and parse analysis use it before PostgreSQL has locked anything).
 */
List *
gunique_table_indexes(Oid tableoid)
{
	Relation	pg_index = table_open(IndexRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	List	   *result = NIL;

	ScanKeyInit(&key, Anum_pg_index_indrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(tableoid));
	scan = systable_beginscan(pg_index, IndexIndrelidIndexId, true, NULL,
							  1, &key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Oid			indexoid = ((Form_pg_index) GETSTRUCT(tuple))->indexrelid;

		if (gunique_is_gunique_index(indexoid))
			result = lappend_oid(result, indexoid);
	}
	systable_endscan(scan);
	table_close(pg_index, AccessShareLock);
	list_sort(result, list_oid_cmp);
	return result;
}

static Form_pg_index
index_form(Oid indexoid, HeapTuple *tuple)
{
	*tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
	if (!HeapTupleIsValid(*tuple))
		elog(ERROR, "cache lookup failed for index %u", indexoid);
	return (Form_pg_index) GETSTRUCT(*tuple);
}

bool
gunique_index_is_valid(Oid indexoid)
{
	HeapTuple	tuple;
	bool		valid = index_form(indexoid, &tuple)->indisvalid;

	ReleaseSysCache(tuple);
	return valid;
}

/* pg_index.indisvalid, or false for an index dropped meanwhile. */
static bool
index_valid_or_gone(Oid indexoid)
{
	HeapTuple	tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
	bool		valid = false;

	if (HeapTupleIsValid(tuple))
	{
		valid = ((Form_pg_index) GETSTRUCT(tuple))->indisvalid;
		ReleaseSysCache(tuple);
	}
	return valid;
}

/*
 * Would partitioned index "index" have a valid child for every partition of
 * its table, with "newchild" counted as valid and attached?  The count
 * validatePartitionedIndex() makes.
 */
static bool
index_complete_with(Oid index, Oid newchild)
{
	Oid			table = IndexGetRelation(index, true);
	List	   *children = find_inheritance_children(index, NoLock);
	int			valid = list_member_oid(children, newchild) ? 0 : 1;
	ListCell   *lc;

	if (!OidIsValid(table))
		return false;
	foreach(lc, children)
	{
		if (lfirst_oid(lc) == newchild || index_valid_or_gone(lfirst_oid(lc)))
			valid++;
	}
	return valid == list_length(find_inheritance_children(table, NoLock));
}

/*
 * The ancestors of partitioned index "parent", top first, that PostgreSQL
 * locks in AccessExclusiveLock (with their tables) when ALTER INDEX parent
 * ATTACH PARTITION child completes parent: validatePartitionedIndex() marks
 * parent valid, then its parent if that is now complete too, and so on,
 * locking each next level's index and table as it climbs.
 *
 * Read from the catalogs as they are, without locks: the caller takes the
 * locks and asks again.
 */
List *
gunique_attach_validation_path(Oid parent, Oid child)
{
	List	   *ancestors = get_partition_ancestors(parent);
	List	   *path = NIL;
	Oid			index = parent;
	Oid			counted = child;
	ListCell   *lc;

	if (!index_valid_or_gone(child) || index_valid_or_gone(parent))
		return NIL;
	foreach(lc, ancestors)
	{
		if (!index_complete_with(index, counted))
			break;
		path = lcons_oid(lfirst_oid(lc), path);
		counted = index;
		index = lfirst_oid(lc);
	}
	list_free(ancestors);
	return path;
}

/*
 * Will ALTER INDEX parent ATTACH PARTITION child make the tree's top valid:
 * parent completed, then each ancestor in turn?  Read as
 * gunique_attach_validation_path reads it.
 */
bool
gunique_attach_completes_top(Oid parent, Oid child)
{
	List	   *ancestors = get_partition_ancestors(parent);
	Oid			index = parent;
	Oid			counted = child;
	bool		complete;
	ListCell   *lc;

	complete = index_valid_or_gone(child) && !index_valid_or_gone(parent);
	foreach(lc, ancestors)
	{
		if (!complete || !index_complete_with(index, counted))
		{
			complete = false;
			break;
		}
		counted = index;
		index = lfirst_oid(lc);
	}
	complete = complete && index_complete_with(index, counted);
	list_free(ancestors);
	return complete;
}

bool
gunique_index_is_unique(Oid indexoid)
{
	HeapTuple	tuple;
	bool		unique = index_form(indexoid, &tuple)->indisunique;

	ReleaseSysCache(tuple);
	return unique;
}

/*
 * Set pg_index.indisunique of one index.  REINDEX CONCURRENTLY rewrites a
 * leaf's row as it swaps it for its copy, under the leaf's
 * ShareUpdateExclusiveLock, and two updates of one catalog row at once
 * fail ("tuple concurrently updated"): a leaf's row is changed under that
 * lock, taken without waiting (the caller may hold the whole table, and a
 * REINDEX CONCURRENTLY runs long, waiting for older snapshots such as the
 * caller's), and read again once it is held.  A partitioned index is never
 * swapped.  An index gone (REINDEX CONCURRENTLY dropped it) is left out:
 * its replacement copied the mark from it.
 */
static void
index_set_unique(Relation pg_index, Oid indexoid, bool unique)
{
	HeapTuple	tuple = SearchSysCacheCopy1(INDEXRELID, ObjectIdGetDatum(indexoid));
	Form_pg_index form;

	if (!HeapTupleIsValid(tuple))
		return;
	if (((Form_pg_index) GETSTRUCT(tuple))->indisunique != unique &&
		get_rel_relkind(indexoid) == RELKIND_INDEX)
	{
		heap_freetuple(tuple);
		if (!ConditionalLockRelationOid(indexoid, ShareUpdateExclusiveLock))
			ereport(ERROR,
					(errcode(ERRCODE_LOCK_NOT_AVAILABLE),
					 errmsg("could not obtain lock on index \"%s\"",
							get_rel_name(indexoid)),
					 errdetail("The statement changes the partitions under a gunique index, which marks each partition's index, and another transaction holds this one, as REINDEX CONCURRENTLY does while it rebuilds it."),
					 errhint("Run the statement again once that transaction has ended.")));
		tuple = SearchSysCacheCopy1(INDEXRELID, ObjectIdGetDatum(indexoid));
		if (!HeapTupleIsValid(tuple))
			return;
	}
	form = (Form_pg_index) GETSTRUCT(tuple);
	if (form->indisunique != unique)
	{
		form->indisunique = unique;
		CatalogTupleUpdate(pg_index, &tuple->t_self, tuple);
		/* The table caches which of its columns unique indexes cover. */
		CacheInvalidateRelcacheByRelid(form->indrelid);
	}
	heap_freetuple(tuple);
}

/* Set pg_index.indisunique on one index, and make the change visible. */
void
gunique_index_set_unique(Oid indexoid, bool unique)
{
	Relation	pg_index = table_open(IndexRelationId, RowExclusiveLock);

	index_set_unique(pg_index, indexoid, unique);
	table_close(pg_index, RowExclusiveLock);
	CommandCounterIncrement();
}

/*
 * Every index of the tree under topindex, itself first, as
 * find_all_inheritors lists them without locks, but for one dropped while
 * the tree is read (REINDEX CONCURRENTLY of a leaf replaces it under
 * locks a caller of this need not conflict with): find_all_inheritors
 * fails on it, this leaves it out.  Its replacement is listed if it was
 * attached by then.
 */
List *
gunique_tree_members(Oid topindex)
{
	List	   *members = list_make1_oid(topindex);

	for (int i = 0; i < list_length(members); i++)
	{
		Oid			member = list_nth_oid(members, i);

		if (get_rel_relkind(member) == RELKIND_PARTITIONED_INDEX &&
			SearchSysCacheExists1(RELOID, ObjectIdGetDatum(member)))
			members = list_concat(members,
								  find_inheritance_children(member, NoLock));
	}
	return members;
}

/*
 * Set pg_index.indisunique on every index of the tree under topindex.
 * The caller holds the top in a lock that keeps partitions from being
 * attached or detached; a leaf may still be replaced (index_set_unique).
 */
void
gunique_tree_set_unique(Oid topindex, bool unique)
{
	List	   *members = gunique_tree_members(topindex);
	Relation	pg_index = table_open(IndexRelationId, RowExclusiveLock);
	ListCell   *lc;

	foreach(lc, members)
		index_set_unique(pg_index, lfirst_oid(lc), unique);
	table_close(pg_index, RowExclusiveLock);
	list_free(members);
	CommandCounterIncrement();
}

/* Add to "tops" those of "indexes" that depend on column attnum of table. */
static List *
indexes_on_column(List *tops, List *indexes, Oid table, AttrNumber attnum)
{
	Relation	pg_depend = table_open(DependRelationId, AccessShareLock);
	ScanKeyData key[3];
	SysScanDesc scan;
	HeapTuple	tuple;

	ScanKeyInit(&key[0], Anum_pg_depend_refclassid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(RelationRelationId));
	ScanKeyInit(&key[1], Anum_pg_depend_refobjid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(table));
	ScanKeyInit(&key[2], Anum_pg_depend_refobjsubid, BTEqualStrategyNumber,
				F_INT4EQ, Int32GetDatum((int32) attnum));
	scan = systable_beginscan(pg_depend, DependReferenceIndexId, true, NULL,
							  3, key);
	while (HeapTupleIsValid(tuple = systable_getnext(scan)))
	{
		Form_pg_depend dep = (Form_pg_depend) GETSTRUCT(tuple);

		if (dep->classid == RelationRelationId &&
			list_member_oid(indexes, dep->objid))
			tops = list_append_unique_oid(tops, dep->objid);
	}
	systable_endscan(scan);
	table_close(pg_depend, AccessShareLock);
	return tops;
}

/*
 * The gunique trees that an ALTER TABLE of tableoid drops and creates again
 * when it changes the type (or generation expression) of the named columns:
 * the top of each tree on tableoid or a partitioned table below it whose
 * index depends on one of the columns, as ATExecAlterColumnType finds them
 * in pg_depend.  The other members of such a tree go with their top.  A
 * gunique index on a table that is not partitioned is not a tree: it is
 * rebuilt as a unique index, as on a plain table.  The caller holds every
 * table of the hierarchy locked.
 */
List *
gunique_trees_on_columns(Oid tableoid, List *colnames)
{
	List	   *tables = find_all_inheritors(tableoid, NoLock, NULL);
	List	   *tops = NIL;
	ListCell   *lc;

	foreach(lc, tables)
	{
		Oid			table = lfirst_oid(lc);
		List	   *indexes = NIL;
		List	   *all;
		ListCell   *lc2;

		if (get_rel_relkind(table) != RELKIND_PARTITIONED_TABLE)
			continue;
		all = gunique_table_indexes(table);
		foreach(lc2, all)
		{
			/* a top is not a partition of another index */
			if (!get_rel_relispartition(lfirst_oid(lc2)))
				indexes = lappend_oid(indexes, lfirst_oid(lc2));
		}
		foreach(lc2, indexes == NIL ? NIL : colnames)
		{
			AttrNumber	attnum = get_attnum(table, strVal(lfirst(lc2)));

			/* PostgreSQL reports a column that is not there */
			if (attnum > 0)
				tops = indexes_on_column(tops, indexes, table, attnum);
		}
		list_free(all);
		list_free(indexes);
	}
	list_free(tables);
	return tops;
}

/* pg_index.indisreplident: is the index its table's replica identity? */
bool
gunique_index_is_replica_identity(Oid indexoid)
{
	HeapTuple	tuple;
	bool		replident = index_form(indexoid, &tuple)->indisreplident;

	ReleaseSysCache(tuple);
	return replident;
}

/*
 * If relid is a gunique index that this command has just made, its name,
 * with its namespace and relkind; else NULL.  For the object access hook,
 * which index_create calls before it makes its catalog rows visible: they
 * are read with SnapshotSelf.
 */
char *
gunique_new_index(Oid relid, Oid *namespace, char *relkind)
{
	Oid			amoid = get_index_am_oid(GUNIQUE_AM_NAME, true);
	Relation	pg_class = table_open(RelationRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	char	   *name = NULL;

	ScanKeyInit(&key, Anum_pg_class_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(pg_class, ClassOidIndexId, true, SnapshotSelf,
							  1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple) && OidIsValid(amoid))
	{
		Form_pg_class form = (Form_pg_class) GETSTRUCT(tuple);

		if ((form->relkind == RELKIND_INDEX ||
			 form->relkind == RELKIND_PARTITIONED_INDEX) &&
			form->relam == amoid)
		{
			name = pstrdup(NameStr(form->relname));
			*namespace = form->relnamespace;
			*relkind = form->relkind;
		}
	}
	systable_endscan(scan);
	table_close(pg_class, AccessShareLock);
	return name;
}

/*
 * A unique btree cannot be created over foreign partitions; neither can a
 * gunique index, whose partitions are built as non-unique indexes, which
 * PostgreSQL would silently skip on foreign tables.  Every statement that
 * adds partitions to a gunique tree while the tree is non-unique (CREATE
 * INDEX, ATTACH of a partitioned table) asks here first, with tableoid the
 * table whose partitions the tree is about to cover.  The error is the one
 * DefineIndex raises for a unique btree, naming the partitioned table that
 * holds the foreign partition.  lockmode is taken on every partition.
 */
void
gunique_refuse_foreign_partitions(Oid tableoid, LOCKMODE lockmode)
{
	List	   *members = find_all_inheritors(tableoid, lockmode, NULL);
	ListCell   *lc;

	foreach(lc, members)
	{
		Oid			relid = lfirst_oid(lc);
		Oid			parent;

		if (get_rel_relkind(relid) != RELKIND_FOREIGN_TABLE)
			continue;
		parent = get_partition_parent(relid, true);
		ereport(ERROR,
				(errcode(ERRCODE_WRONG_OBJECT_TYPE),
				 errmsg("cannot create unique index on partitioned table \"%s\"",
						get_rel_name(parent)),
				 errdetail("Table \"%s\" contains partitions that are foreign tables.",
						   get_rel_name(parent))));
	}
	list_free(members);
}

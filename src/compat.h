/*-------------------------------------------------------------------------
 *
 * compat.h
 *	  Differences between the PostgreSQL major versions gunique supports.
 *
 * Every version test in gunique lives in this file, so that the rest of the
 * code reads as if written for one server version.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_COMPAT_H
#define GUNIQUE_COMPAT_H

#if PG_VERSION_NUM < 150000
#error "gunique requires PostgreSQL 15 or later"
#endif

#include "storage/lock.h"

/*
 * Before PostgreSQL 18, BuildSpeculativeIndexInfo raises an internal error
 * for a unique index that is not btree, so ON CONFLICT cannot work at all on
 * a table with a gunique index; unless the server has the change in
 * contrib-patches/, which says so in catalog/index.h (a server built with
 * it must be the one that loads this build).
 */
#include "catalog/index.h"
#if PG_VERSION_NUM < 180000 && !defined(SPECULATIVE_INDEX_ANY_ORDERED_AM)
#define GUNIQUE_NO_SPECULATIVE_INSERT 1
#endif

/*
 * Before PostgreSQL 18, ATAddForeignKeyConstraint raises an internal error
 * when the unique index it picked for the referenced columns is not btree.
 */
#if PG_VERSION_NUM < 180000
#define GUNIQUE_NO_FOREIGN_KEYS 1
#endif

/*
 * The ALTER TABLE subcommands that drop and create again the indexes that
 * depend on a column: ALTER COLUMN ... TYPE, and from PostgreSQL 17 ALTER
 * COLUMN ... SET EXPRESSION.
 */
#if PG_VERSION_NUM >= 170000
#define GUNIQUE_AT_REBUILDS_INDEXES(subtype) \
	((subtype) == AT_AlterColumnType || (subtype) == AT_SetExpression)
#else
#define GUNIQUE_AT_REBUILDS_INDEXES(subtype) ((subtype) == AT_AlterColumnType)
#endif

/*
 * PostgreSQL 17 added amcanbuildparallel.  Its parallel build workers open
 * the index themselves and sort through PrepareSortSupportFromIndexRel(),
 * which before 18 refuses any relation whose relam is not btree (see
 * handler.c); 18 accepts any AM with amcanorder, so its workers need no help.
 */
#if PG_VERSION_NUM >= 170000 && PG_VERSION_NUM < 180000
#define GUNIQUE_DISABLE_PARALLEL_BUILD(routine) ((routine)->amcanbuildparallel = false)
#else
#define GUNIQUE_DISABLE_PARALLEL_BUILD(routine) ((void) 0)
#endif

/*
 * PostgreSQL 17 added aminsertcleanup, called when the executor is done
 * inserting through an IndexInfo; before, the executor memory that holds
 * the IndexInfo going is the only sign (probescan.c).
 */
#if PG_VERSION_NUM >= 170000
#define GUNIQUE_SET_INSERT_CLEANUP(routine, fn) ((routine)->aminsertcleanup = (fn))
#else
#define GUNIQUE_SET_INSERT_CLEANUP(routine, fn) ((void) (fn))
#endif

/* PostgreSQL 18 lets a module report its name and version. */
#if PG_VERSION_NUM >= 180000
#define GUNIQUE_MODULE_MAGIC PG_MODULE_MAGIC_EXT(.name = "gunique", .version = GUNIQUE_VERSION)
#else
#define GUNIQUE_MODULE_MAGIC PG_MODULE_MAGIC
#endif

/* PostgreSQL 18 added instrumentation to index_beginscan(). */
#if PG_VERSION_NUM >= 180000
#define gunique_index_beginscan(heap, index, snapshot, nkeys) \
	index_beginscan((heap), (index), (snapshot), NULL, (nkeys), 0)
#else
#define gunique_index_beginscan(heap, index, snapshot, nkeys) \
	index_beginscan((heap), (index), (snapshot), (nkeys), 0)
#endif

/* PostgreSQL 17 gave _bt_search the heap relation and took its snapshot. */
#if PG_VERSION_NUM >= 170000
#define gunique_bt_search(rel, heaprel, key, bufP) \
	_bt_search((rel), (heaprel), (key), (bufP), BT_READ)
#else
#define gunique_bt_search(rel, heaprel, key, bufP) \
	_bt_search((rel), (key), (bufP), BT_READ, NULL)
#endif

/* PostgreSQL 17 took the snapshot argument of _bt_get_endpoint. */
#if PG_VERSION_NUM >= 170000
#define gunique_bt_get_endpoint(rel, level, rightmost) \
	_bt_get_endpoint((rel), (level), (rightmost))
#else
#define gunique_bt_get_endpoint(rel, level, rightmost) \
	_bt_get_endpoint((rel), (level), (rightmost), NULL)
#endif

/*
 * A hint to the CPU that a cache line will be read soon.  PostgreSQL has no
 * portable spelling of it; without a compiler that knows one, a no-op.
 */
#if defined(__GNUC__) || defined(__clang__)
#define gunique_prefetch(addr) __builtin_prefetch(addr)
#else
#define gunique_prefetch(addr) ((void) (addr))
#endif

/*
 * PostgreSQL 16 replaced the per-class ownership checks with one function.
 */
#if PG_VERSION_NUM >= 160000
#define gunique_relation_owned(relid) \
	object_ownercheck(RelationRelationId, (relid), GetUserId())
#else
#define gunique_relation_owned(relid) \
	pg_class_ownercheck((relid), GetUserId())
#endif

/*
 * Who may REINDEX a table or its indexes: its owner; from PostgreSQL 17,
 * whoever holds MAINTAIN on it (the owner too, unless revoked).
 */
#if PG_VERSION_NUM >= 170000
#define gunique_may_reindex(relid) \
	(pg_class_aclcheck((relid), GetUserId(), ACL_MAINTAIN) == ACLCHECK_OK)
#else
#define gunique_may_reindex(relid) gunique_relation_owned(relid)
#endif

/*
 * The privileges any one of which lets LOCK TABLE take a lock stronger than
 * ROW EXCLUSIVE (LockTableAclCheck): PostgreSQL 17 added MAINTAIN to them.
 */
#if PG_VERSION_NUM >= 170000
#define GUNIQUE_ACL_LOCK_TABLE (ACL_MAINTAIN | ACL_UPDATE | ACL_DELETE | ACL_TRUNCATE)
#else
#define GUNIQUE_ACL_LOCK_TABLE (ACL_UPDATE | ACL_DELETE | ACL_TRUNCATE)
#endif

/*
 * Does this backend hold the lock in "mode" or a stronger one?  PostgreSQL
 * 17 gave LockHeldByMe an argument for that.
 */
static inline bool
gunique_lock_held_or_stronger(const LOCKTAG *tag, LOCKMODE mode)
{
#if PG_VERSION_NUM >= 170000
	return LockHeldByMe(tag, mode, true);
#else
	for (LOCKMODE m = mode; m <= MaxLockMode; m++)
		if (LockHeldByMe(tag, m))
			return true;
	return false;
#endif
}

/*
 * PostgreSQL 16 replaced the per-class privilege checks with one function.
 */
#if PG_VERSION_NUM >= 160000
#define gunique_proc_aclcheck(funcoid) \
	object_aclcheck(ProcedureRelationId, (funcoid), GetUserId(), ACL_EXECUTE)
#define gunique_database_create_aclcheck() \
	object_aclcheck(DatabaseRelationId, MyDatabaseId, GetUserId(), ACL_CREATE)
#else
#define gunique_proc_aclcheck(funcoid) \
	pg_proc_aclcheck((funcoid), GetUserId(), ACL_EXECUTE)
#define gunique_database_create_aclcheck() \
	pg_database_aclcheck(MyDatabaseId, GetUserId(), ACL_CREATE)
#endif

/*
 * PostgreSQL 18 split EXPLAIN's declarations: its state and its output
 * functions have headers of their own.
 */
#if PG_VERSION_NUM >= 180000
#define GUNIQUE_EXPLAIN_HEADERS 1
#endif

/*
 * The backend of a virtual transaction: PostgreSQL 17 names it by its proc
 * number, before by its backend ID.  NULL if it is gone.
 */
#if PG_VERSION_NUM >= 170000
#include "storage/procarray.h"
#define gunique_vxid_proc(vxid) ProcNumberGetProc((vxid).procNumber)
#else
#include "storage/sinvaladt.h"
#define gunique_vxid_proc(vxid) BackendIdGetProc((vxid).backendId)
#endif

/* A backend's local transaction ID: PostgreSQL 17 moved it into vxid. */
#if PG_VERSION_NUM >= 170000
#define gunique_proc_lxid(proc) ((proc)->vxid.lxid)
#else
#define gunique_proc_lxid(proc) ((proc)->lxid)
#endif

/*
 * PostgreSQL 16 gave build_attrmap_by_name a missing_ok argument; before,
 * a column missing from indesc was always an error.
 */
#if PG_VERSION_NUM >= 160000
#define gunique_attrmap_by_name(indesc, outdesc) \
	build_attrmap_by_name((indesc), (outdesc), false)
#else
#define gunique_attrmap_by_name(indesc, outdesc) \
	build_attrmap_by_name((indesc), (outdesc))
#endif

/*
 * PostgreSQL 16 gave DefineIndex a total_parts argument (the partitions to
 * report in pg_stat_progress_create_index; -1 when unknown).  gunique calls
 * it for one partition at a time, as DefineIndex calls itself.
 */
#if PG_VERSION_NUM >= 160000
#define gunique_define_partition_index(relid, stmt, parentindex) \
	DefineIndex((relid), (stmt), InvalidOid, (parentindex), InvalidOid, -1, \
				false, true, true, false, false)
#else
#define gunique_define_partition_index(relid, stmt, parentindex) \
	DefineIndex((relid), (stmt), InvalidOid, (parentindex), InvalidOid, \
				false, true, true, false, false)
#endif

/*
 * PostgreSQL 18 lets RETURNING name a row's old values (RETURNING OLD), by
 * which an UPDATE of a global key on a Citus table returns the key it
 * replaces (src/citus/keysync.c).
 */
#if PG_VERSION_NUM >= 180000
#define GUNIQUE_HAS_RETURNING_OLD 1
#define GUNIQUE_VAR_RETURNING_OLD(var) ((var)->varreturningtype = VAR_RETURNING_OLD)
#define GUNIQUE_NAME_RETURNING_OLD(query) \
	((query)->returningOldAlias = (query)->returningOldAlias ? \
	 (query)->returningOldAlias : pstrdup("gunique_old"))
#else
#define GUNIQUE_VAR_RETURNING_OLD(var) ((void) (var))
#define GUNIQUE_NAME_RETURNING_OLD(query) ((void) (query))
#endif

/* PostgreSQL 18 dropped ExecutorRun's execute_once argument. */
#if PG_VERSION_NUM >= 180000
#define gunique_executor_run(qd) ExecutorRun((qd), ForwardScanDirection, 0)
#else
#define gunique_executor_run(qd) ExecutorRun((qd), ForwardScanDirection, 0, true)
#endif

/*
 * PostgreSQL 18 gives a query's grouping a range table entry of its own
 * (RTE_GROUP).
 */
#if PG_VERSION_NUM >= 180000
#define GUNIQUE_RTE_IS_GROUP(rte) ((rte)->rtekind == RTE_GROUP)
#else
#define GUNIQUE_RTE_IS_GROUP(rte) ((void) (rte), false)
#endif

/*
 * The schema of an extension: get_extension_schema is exported from
 * PostgreSQL 16 on; before, pg_extension is read here as it does.
 */
#if PG_VERSION_NUM >= 160000
#include "commands/extension.h"
#define gunique_extension_schema(extoid) get_extension_schema(extoid)
#else
#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/indexing.h"
#include "catalog/pg_extension.h"
#include "utils/fmgroids.h"

static inline Oid
gunique_extension_schema(Oid extoid)
{
	Relation	rel = table_open(ExtensionRelationId, AccessShareLock);
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tuple;
	Oid			schema = InvalidOid;

	ScanKeyInit(&key, Anum_pg_extension_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(extoid));
	scan = systable_beginscan(rel, ExtensionOidIndexId, true, NULL, 1, &key);
	tuple = systable_getnext(scan);
	if (HeapTupleIsValid(tuple))
		schema = ((Form_pg_extension) GETSTRUCT(tuple))->extnamespace;
	systable_endscan(scan);
	table_close(rel, AccessShareLock);
	return schema;
}
#endif

#endif							/* GUNIQUE_COMPAT_H */

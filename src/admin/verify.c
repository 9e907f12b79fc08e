/*-------------------------------------------------------------------------
 *
 * verify.c
 *	  gunique_verify(): audit a gunique index tree from scratch.
 *
 * Re-checks everything the guarantee rests on, independently of how the
 * tree came to be: the tree covers every partition of its table, every
 * member is marked unique, every leaf is valid and ready, and no key is
 * shared by two live rows anywhere under the table (one merge of the
 * leaves, as CREATE INDEX runs it).  Returns one row per problem found; no
 * rows means the index is sound.
 *
 * Without "lock", it takes AccessShareLock and judges rows by the
 * statement's MVCC snapshot, so it runs beside a live workload and reports
 * only what that snapshot sees.  With "lock", it takes ShareLock on every
 * partition (writers wait) and a fresh snapshot after locking.  Who may do
 * either: verify_check_privileges().
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "funcapi.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/lsyscache.h"
#include "utils/rls.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "compat.h"
#include "admin/verify.h"
#include "am/scope.h"
#include "am/tree.h"
#include "citus/globalkey.h"
#include "ddl/merge.h"

PG_FUNCTION_INFO_V1(gunique_verify);

typedef struct VerifyOutput
{
	ReturnSetInfo *rsinfo;
	Oid			table;			/* the tree's table */
} VerifyOutput;

static void
emit(VerifyOutput *out, const char *problem, Oid relid, const char *detail)
{
	Datum		values[3];
	bool		nulls[3] = {false, false, false};

	values[0] = CStringGetTextDatum(problem);
	values[1] = ObjectIdGetDatum(relid);
	values[2] = CStringGetTextDatum(detail);
	tuplestore_putvalues(out->rsinfo->setResult, out->rsinfo->setDesc,
						 values, nulls);
}

static void
verify_duplicate(void *arg, Relation index, Datum *values, bool *isnull,
				 Relation heap1, Relation heap2)
{
	char	   *key = BuildIndexValueDescription(index, values, isnull);
	const char *p1 = RelationGetRelationName(heap1);
	const char *p2 = RelationGetRelationName(heap2);
	char	   *detail;

	if (RelationGetRelid(heap1) == RelationGetRelid(heap2))
		detail = psprintf("Key %s is held by more than one row of partition \"%s\".",
						  key ? key : "(hidden)", p1);
	else
		detail = psprintf("Key %s is held by partitions \"%s\" and \"%s\".",
						  key ? key : "(hidden)", p1, p2);
	emit((VerifyOutput *) arg, "duplicate key", RelationGetRelid(heap1), detail);
}

/* A problem the check of a global key's key table found (citus/). */
static void
verify_global_key(void *arg, const char *problem, const char *detail)
{
	VerifyOutput *out = arg;

	emit(out, problem, out->table, detail);
}

/* The flags of one tree member in pg_index. */
static void
verify_member(VerifyOutput *out, Oid indexoid, Oid topindex)
{
	HeapTuple	tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
	Form_pg_index form;
	bool		leaf = get_rel_relkind(indexoid) == RELKIND_INDEX;

	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for index %u", indexoid);
	form = (Form_pg_index) GETSTRUCT(tuple);
	if (!form->indisunique)
		emit(out, "index not unique", indexoid,
			 psprintf("Index \"%s\" is not marked unique, so inserts into it are not checked.",
					  get_rel_name(indexoid)));
	if (!form->indisvalid && (leaf || indexoid == topindex))
		emit(out, "index not valid", indexoid,
			 psprintf(indexoid == topindex && !leaf ?
					  "Index \"%s\" is not valid: not every partition has an index attached to it." :
					  "Index \"%s\" is not valid.",
					  get_rel_name(indexoid)));
	if (leaf && !form->indisready)
		emit(out, "index not ready", indexoid,
			 psprintf("Index \"%s\" does not receive inserts.", get_rel_name(indexoid)));
	ReleaseSysCache(tuple);
}

/* Every table under the top table must carry a member of the tree. */
static void
verify_coverage(VerifyOutput *out, Oid toptable, List *members, LOCKMODE lockmode)
{
	List	   *tables = find_all_inheritors(toptable, lockmode, NULL);
	List	   *covered = NIL;
	ListCell   *lc;

	foreach(lc, members)
		covered = lappend_oid(covered, IndexGetRelation(lfirst_oid(lc), false));

	foreach(lc, tables)
	{
		Oid			table = lfirst_oid(lc);

		if (!list_member_oid(covered, table))
			emit(out, "partition not covered", table,
				 psprintf("Partition \"%s\" has no index in the tree.",
						  get_rel_name(table)));
	}
}

/*
 * May the user run the audit on the table?  Checked on the top table before
 * any lock is taken, so that a refused user cannot make anyone wait.  The
 * audit reads every row's key through the top table, as a SELECT from it
 * would, so it needs SELECT there and is refused where row-level security
 * applies to that SELECT.  The locked audit takes ShareLock on the
 * table and every partition, so it needs what LOCK TABLE ... IN SHARE MODE
 * on the top table needs (which does not check the partitions either).
 */
static void
verify_check_privileges(Oid toptable, bool lock)
{
	const char *name = get_rel_name(toptable);

	if (pg_class_aclcheck(toptable, GetUserId(), ACL_SELECT) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", name),
				 errdetail("gunique_verify reads every row's key.")));
	if (check_enable_rls(toptable, InvalidOid, true) == RLS_ENABLED)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", name),
				 errdetail("Row-level security is enabled on the table for the current user, and gunique_verify reads every row's key.")));
	if (lock &&
		pg_class_aclcheck(toptable, GetUserId(),
						  GUNIQUE_ACL_LOCK_TABLE) != ACLCHECK_OK)
		ereport(ERROR,
				(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
				 errmsg("permission denied for table %s", name),
				 errdetail("gunique_verify with lock => true locks the table in SHARE mode, as LOCK TABLE does."),
				 errhint("Run it without lock, or as a role that LOCK TABLE allows to lock the table in SHARE mode.")));
}

Datum
gunique_verify(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	bool		lock = PG_GETARG_BOOL(1);
	LOCKMODE	lockmode = lock ? ShareLock : AccessShareLock;
	VerifyOutput out;
	Oid			topindex;
	Oid			toptable;
	List	   *members;
	ListCell   *lc;
	Snapshot	snapshot;
	GuniqueGlobalKey *gk;

	InitMaterializedSRF(fcinfo, 0);
	out.rsinfo = (ReturnSetInfo *) fcinfo->resultinfo;
	out.table = InvalidOid;

	gunique_require_gunique_index(indexoid);

	topindex = gunique_tree_top(indexoid);
	toptable = IndexGetRelation(topindex, false);
	out.table = toptable;
	verify_check_privileges(toptable, lock);

	LockRelationOid(toptable, lockmode);
	members = find_all_inheritors(topindex, AccessShareLock, NULL);
	foreach(lc, members)
		verify_member(&out, lfirst_oid(lc), topindex);
	verify_coverage(&out, toptable, members, lockmode);

	/* After the locks, so that a locked check sees everything committed. */
	snapshot = RegisterSnapshot(lock ? GetLatestSnapshot() : GetActiveSnapshot());
	(void) gunique_merge_tree(topindex, lockmode, snapshot, InvalidOid,
							 false, verify_duplicate, &out);
	UnregisterSnapshot(snapshot);

	/* a global key on Citus: its key table against the whole cluster */
	if ((gk = gunique_citus_global_key_of(topindex)) != NULL)
		gunique_citus_verify(gk, verify_global_key, &out);

	return (Datum) 0;
}

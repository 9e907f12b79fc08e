/*-------------------------------------------------------------------------
 *
 * leafcheck.c
 *	  gunique_check_leaves(): amcheck's nbtree checks on every leaf of a tree.
 *
 * Every leaf of a gunique tree is an nbtree index (src/README, I1), so
 * amcheck's structural checks apply to it unchanged; but bt_index_check and
 * bt_index_parent_check refuse any index whose access method is not btree,
 * and pg_amcheck, which selects indexes by that access method, passes over
 * gunique's without a word.  gunique_check_leaves calls amcheck's own SQL
 * functions on each leaf under the index it is given, with the leaf
 * presented as btree to them: only this backend's relcache entry, only for
 * the duration of the call, restored on every path (as handler.c does for
 * nbtree's build and insert; src/README, B2).
 *
 * amcheck's functions are executable by superusers alone unless granted;
 * calling them through the function manager skips the executor's check of
 * that privilege, so gunique_check_leaves checks it itself: it lets nobody
 * run a check that amcheck would not let them run.
 *
 * The leaf's table and the leaf are locked before the leaf is presented as
 * btree, in the mode amcheck takes, so that amcheck's own lock requests
 * find them held and process no invalidation.  Any other request for a lock
 * not yet held (a catalog's, on a cache miss) may process one, and rebuild
 * the leaf's relcache entry from the catalog, relam included: a relcache
 * callback presents it as btree again.  PostgreSQL 18 may instead defer the
 * rebuild to the next lookup of the relation, which then shows the true
 * access method; amcheck looks at it only when it opens the leaf, and then
 * refuses: an error, never a wrong answer.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_extension.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "commands/extension.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "parser/parse_func.h"
#include "storage/lmgr.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"

#include "compat.h"
#include "admin/leafcheck.h"
#include "am/tree.h"

PG_FUNCTION_INFO_V1(gunique_check_leaves);

/* The leaf presented as btree to amcheck right now, if any. */
static Relation presented_leaf = NULL;

/*
 * A relcache invalidation rebuilds an open index's entry in place, from the
 * catalog: present the leaf as btree again.  Runs after the rebuild, from
 * the relcache callback that hooks.c registers at load, with or without
 * the preload.
 */
void
gunique_leafcheck_relcache_inval(Oid relid)
{
	if (presented_leaf != NULL &&
		(relid == InvalidOid || relid == RelationGetRelid(presented_leaf)))
		presented_leaf->rd_rel->relam = BTREE_AM_OID;
}

/*
 * amcheck's function "name"(regclass, boolean), which the current user must
 * be allowed to execute.
 */
static Oid
amcheck_function(const char *name)
{
	Oid			extoid = get_extension_oid("amcheck", true);
	Oid			argtypes[2] = {REGCLASSOID, BOOLOID};
	char	   *schema;
	Oid			funcoid;

	if (!OidIsValid(extoid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_OBJECT),
				 errmsg("extension \"amcheck\" is not installed"),
				 errdetail("gunique_check_leaves runs amcheck's checks on each leaf."),
				 errhint("Run CREATE EXTENSION amcheck in this database.")));
	schema = get_namespace_name(gunique_extension_schema(extoid));
	funcoid = schema == NULL ? InvalidOid :
		LookupFuncName(list_make2(makeString(schema), makeString(pstrdup(name))),
					   2, argtypes, true);
	if (!OidIsValid(funcoid))
		ereport(ERROR,
				(errcode(ERRCODE_UNDEFINED_FUNCTION),
				 errmsg("function %s(regclass, boolean) of extension \"amcheck\" does not exist",
						name),
				 errhint("Update the extension with ALTER EXTENSION amcheck UPDATE.")));
	if (gunique_proc_aclcheck(funcoid) != ACLCHECK_OK)
		aclcheck_error(ACLCHECK_NO_PRIV, OBJECT_FUNCTION,
					   quote_qualified_identifier(schema, name));
	return funcoid;
}

/* Run amcheck's function on one leaf, the leaf presented as btree. */
static void
check_leaf(FmgrInfo *flinfo, Oid leafoid, bool heapallindexed,
		   LOCKMODE lockmode)
{
	Oid			heapoid = IndexGetRelation(leafoid, false);
	Relation	leaf;
	Oid			saved_relam;
	Relation	saved_presented = presented_leaf;	/* a call around this one */

	LockRelationOid(heapoid, lockmode);
	leaf = index_open(leafoid, lockmode);
	saved_relam = leaf->rd_rel->relam;

	presented_leaf = leaf;
	leaf->rd_rel->relam = BTREE_AM_OID;
	PG_TRY();
	{
		(void) FunctionCall2(flinfo, ObjectIdGetDatum(leafoid),
							 BoolGetDatum(heapallindexed));
	}
	PG_FINALLY();
	{
		presented_leaf = saved_presented;
		leaf->rd_rel->relam = saved_relam;
	}
	PG_END_TRY();
	index_close(leaf, NoLock);
}

/*
 * gunique_check_leaves(index regclass, heapallindexed boolean,
 *						parent boolean) returns integer
 *
 * Runs amcheck's bt_index_check (or with "parent", bt_index_parent_check)
 * on every leaf under the index, which may be a whole tree's top index or
 * any member of it, and returns the number of leaves checked.  amcheck
 * raises an error at the first corruption it finds.
 */
Datum
gunique_check_leaves(PG_FUNCTION_ARGS)
{
	Oid			indexoid = PG_GETARG_OID(0);
	bool		heapallindexed = PG_GETARG_BOOL(1);
	bool		parent = PG_GETARG_BOOL(2);
	LOCKMODE	lockmode = parent ? ShareLock : AccessShareLock;
	FmgrInfo	flinfo;
	List	   *members;
	ListCell   *lc;
	int32		nleaves = 0;

	gunique_require_gunique_index(indexoid);

	fmgr_info(amcheck_function(parent ? "bt_index_parent_check" :
							   "bt_index_check"), &flinfo);

	/* Table before index, as everywhere; the leaves' tables come later. */
	LockRelationOid(IndexGetRelation(indexoid, false), AccessShareLock);
	members = find_all_inheritors(indexoid, AccessShareLock, NULL);
	foreach(lc, members)
	{
		Oid			member = lfirst_oid(lc);

		if (get_rel_relkind(member) != RELKIND_INDEX)
			continue;
		check_leaf(&flinfo, member, heapallindexed, lockmode);
		nleaves++;
	}
	PG_RETURN_INT32(nleaves);
}

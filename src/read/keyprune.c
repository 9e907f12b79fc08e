/*-------------------------------------------------------------------------
 *
 * keyprune.c
 *	  UPDATE and DELETE by a gunique key: plan them for the partition that
 *	  holds the key, and check at executor start that it still does.
 *
 * PostgreSQL plans an UPDATE or DELETE of a partitioned table with every
 * partition the partition key does not prune as a result relation; a
 * cached plan locks them all, and before 18 the executor opens them all,
 * on every execution.  Where the statement binds a gunique key to values
 * known when it is planned (constants, or the parameters of a custom
 * plan), and gunique.enable_modify_by_key is on, the planner hook
 * (lookupplan.c) finds the key's row first, and this file makes the
 * planner prune to that row's partition: the partition's own constraint
 * is added to the table's restriction clauses as the relation is built,
 * where partition pruning reads it, and taken away again before the
 * partitions inherit it (a clause that holds for every row of the
 * partition, so that taking it away changes nothing).  A key found
 * nowhere prunes every partition.
 *
 * The statement's snapshot is taken after planning, and a row with the
 * key may reach another partition in between (a row moved by an UPDATE of
 * the partition key, or deleted and inserted again).  So the plan carries
 * a check, a CustomScan above the scan that ModifyTable reads, which
 * passes rows through; the executor start hook (hooks.c) runs it before
 * the executor starts, with the statement's snapshot: the row of the key
 * that snapshot sees, if any, must be in a partition the plan modifies.  Otherwise the
 * statement is planned again, from a copy of its query kept in the check,
 * as PostgreSQL would plan it.  Both the guess and the check find the row
 * through lookup.c's reader, which looks only in the partitions that may
 * hold the key (src/README, "Locating a key").  The proof is in
 * src/README, "Modifying by the key".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/optimizer.h"
#include "optimizer/restrictinfo.h"
#include "parser/parsetree.h"
#include "partitioning/partdesc.h"
#include "rewrite/rewriteManip.h"
#include "tcop/tcopprot.h"
#include "utils/datum.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/partcache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "compat.h"
#ifdef GUNIQUE_EXPLAIN_HEADERS
#include "commands/explain_format.h"
#include "commands/explain_state.h"
#endif
#include "read/keyplan.h"
#include "read/keyprune.h"
#include "read/lookup.h"
#include "read/passnode.h"

/*
 * How an UPDATE or DELETE by the key is planned: for the partition of the
 * row found at planning, checked at executor start (the key's values are
 * known then: constants, or a custom plan's parameters); as a stub that
 * modifies no partition, for executor start to replace by the plan kept
 * for the row's partition (the values are parameters); or for the
 * partition keyplan.c asks for.
 */
typedef enum KeyPruneKind
{
	KEYPRUNE_GUESS,
	KEYPRUNE_STUB,
	KEYPRUNE_FORCED
} KeyPruneKind;

/* One UPDATE or DELETE being planned for the partition of its key. */
struct GuniqueKeyPrune
{
	KeyPruneKind kind;
	Index		rti;			/* the table, in the query's range table */
	Oid			tableoid;
	Oid			indexoid;
	List	   *values;			/* the key's value expressions */
	Expr	   *clause;			/* the partition's constraint, or false */
	List	   *rinfos;			/* its clauses, once given to the table */
	RelOptInfo *table;			/* the table's relation, once built */
};

/*
 * What the check keeps in custom_private: the table and the index, the
 * partitions the plan modifies, the query to plan again and its cursor
 * options, and a stub's family of plans (keyplan.c), or 0 if the plan is
 * not a stub.  custom_exprs holds the key's value expressions.
 */
#define KEYCHECK_PRIVATE_RELS		0
#define KEYCHECK_PRIVATE_PARTS		1
#define KEYCHECK_PRIVATE_QUERY		2
#define KEYCHECK_PRIVATE_OPTIONS	3
#define KEYCHECK_PRIVATE_FAMILY		4

/* gunique.enable_modify_by_key */
bool		gunique_enable_modify_by_key = true;

/* Planning again because a check failed: no pruning then. */
static int	keyprune_replanning = 0;

static Node *keycheck_create_state(CustomScan *cscan);
static void keycheck_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *keycheck_exec(CustomScanState *node);
static void keycheck_end(CustomScanState *node);
static void keycheck_rescan(CustomScanState *node);
static void keycheck_explain(CustomScanState *node, List *ancestors,
							 ExplainState *es);

static const CustomScanMethods keycheck_scan_methods = {
	.CustomName = GUNIQUE_KEYCHECK_NAME,
	.CreateCustomScanState = keycheck_create_state,
};

static const CustomExecMethods keycheck_exec_methods = {
	.CustomName = GUNIQUE_KEYCHECK_NAME,
	.BeginCustomScan = keycheck_begin,
	.ExecCustomScan = keycheck_exec,
	.EndCustomScan = keycheck_end,
	.ReScanCustomScan = keycheck_rescan,
	.ExplainCustomScan = keycheck_explain,
};

/* May the statement being planned be pruned to its key's partition? */
bool
gunique_keyprune_allowed(void)
{
	return gunique_enable_modify_by_key && keyprune_replanning == 0;
}

/*
 * Is a parameter of "node" unknown to the planner: not external, or without
 * a value it may use (PARAM_FLAG_CONST, as eval_const_expressions requires
 * to fold one)?
 */
static bool
keyprune_param_unknown(Node *node, void *context)
{
	ParamListInfo params = (ParamListInfo) context;

	if (node == NULL)
		return false;
	if (IsA(node, Param))
	{
		Param	   *param = (Param *) node;
		ParamExternData workspace;
		ParamExternData *prm;

		if (param->paramkind != PARAM_EXTERN || params == NULL ||
			param->paramid <= 0 || param->paramid > params->numParams)
			return true;
		if (params->paramFetch != NULL)
			prm = params->paramFetch(params, param->paramid, true, &workspace);
		else
			prm = &params->params[param->paramid - 1];
		return prm == NULL || prm->ptype != param->paramtype ||
			(prm->pflags & PARAM_FLAG_CONST) == 0;
	}
	return expression_tree_walker(node, keyprune_param_unknown, context);
}

/* What keyprune_params_walker found. */
typedef struct KeyPruneParams
{
	bool		external;		/* an external parameter */
	bool		other;			/* another kind of parameter */
} KeyPruneParams;

static bool
keyprune_params_walker(Node *node, KeyPruneParams *found)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param))
	{
		if (((Param *) node)->paramkind == PARAM_EXTERN)
			found->external = true;
		else
			found->other = true;
		return false;
	}
	return expression_tree_walker(node, keyprune_params_walker,
								  (void *) found);
}

/*
 * Does "node" read a parameter, every one an external parameter (a
 * prepared statement's, a PL/pgSQL variable's), which each execution gives
 * a value before the executor starts?
 */
static bool
keyprune_reads_params(Node *node)
{
	KeyPruneParams found = {false, false};

	(void) keyprune_params_walker(node, &found);
	return found.external && !found.other;
}

/*
 * Does "node" read a parameter that "params" has no value for (the
 * parameters of EXPLAIN (GENERIC_PLAN), which has none)?
 */
static bool
keyprune_params_missing(Node *node, ParamListInfo params)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param))
	{
		Param	   *param = (Param *) node;

		return params == NULL || param->paramid <= 0 ||
			param->paramid > params->numParams;
	}
	return expression_tree_walker(node, keyprune_params_missing,
								  (void *) params);
}

static bool
keyprune_leaky_function(Oid funcid, void *context)
{
	return !get_func_leakproof(funcid);
}

/*
 * Could evaluating "node" fail for some values: does it call a function
 * that is not leakproof (a cast that overflows, say: date to timestamp)?
 * The key's values are evaluated before any row is read, at planning and
 * as the executor starts, where PostgreSQL's plan might never evaluate
 * them (an index scan of a partition with no rows, a cross-type operator
 * that does not fail where the cast would); a leakproof function raises
 * no error that depends on its arguments.
 */
static bool
keyprune_value_may_fail(Node *node, void *context)
{
	if (node == NULL)
		return false;
	if (check_functions_in_node(node, keyprune_leaky_function, NULL))
		return true;
	return expression_tree_walker(node, keyprune_value_may_fail, context);
}

/*
 * The key's values with their constants folded, as the planner will fold
 * them (5::int2 is a call of int2 until then), and so with the errors that
 * the planner would raise anyway; but not the implicit cast lookupplan.c
 * put on a value of another type than the key's, which the planner never
 * sees.
 */
static List *
keyprune_fold(List *values)
{
	List	   *result = NIL;
	ListCell   *lc;

	foreach(lc, values)
	{
		Node	   *value = (Node *) lfirst(lc);

		if (IsA(value, FuncExpr) &&
			((FuncExpr *) value)->funcformat == COERCE_IMPLICIT_CAST)
		{
			FuncExpr   *cast = (FuncExpr *) copyObject(value);

			cast->args = (List *) eval_const_expressions(NULL,
														 (Node *) cast->args);
			value = (Node *) cast;
		}
		else if (IsA(value, RelabelType))
		{
			RelabelType *relabel = (RelabelType *) copyObject(value);

			relabel->arg = (Expr *) eval_const_expressions(NULL,
														   (Node *) relabel->arg);
			value = (Node *) relabel;
		}
		else if (!IsA(value, CoerceViaIO) && !IsA(value, ArrayCoerceExpr))
			value = eval_const_expressions(NULL, value);
		result = lappend(result, value);
	}
	return result;
}

/*
 * The key's values where each is a constant or an external parameter of
 * the key's type (most statements by the key), without an executor state:
 * false if one is not.  The values are the caller's to copy (they are
 * compared, never kept).
 */
static bool
keyprune_evaluate_plain(List *values, ParamListInfo params, Datum *keys,
						bool *isnull)
{
	int			i = 0;
	ListCell   *lc;

	foreach(lc, values)
	{
		Node	   *value = (Node *) lfirst(lc);

		if (IsA(value, Const))
		{
			keys[i] = ((Const *) value)->constvalue;
			isnull[i] = ((Const *) value)->constisnull;
		}
		else if (IsA(value, Param) &&
				 ((Param *) value)->paramkind == PARAM_EXTERN &&
				 params != NULL && params->paramFetch == NULL &&
				 ((Param *) value)->paramid > 0 &&
				 ((Param *) value)->paramid <= params->numParams)
		{
			Param	   *param = (Param *) value;
			ParamExternData *prm = &params->params[param->paramid - 1];

			if (prm->ptype != param->paramtype)
				return false;
			keys[i] = prm->value;
			isnull[i] = prm->isnull;
		}
		else
			return false;
		i++;
	}
	return true;
}

/*
 * Evaluate the key's value expressions (no column, nothing volatile: see
 * lookupplan.c; nothing that may fail: keyprune_value_may_fail) with the
 * parameters given, into the current memory context (constants and
 * parameters alone are not copied: keyprune_evaluate_plain).
 */
static void
keyprune_evaluate(List *values, ParamListInfo params, Datum *keys,
				  bool *isnull)
{
	EState	   *estate;
	ExprContext *econtext;
	MemoryContext caller = CurrentMemoryContext;
	int			i = 0;
	ListCell   *lc;

	if (keyprune_evaluate_plain(values, params, keys, isnull))
		return;
	estate = CreateExecutorState();
	econtext = GetPerTupleExprContext(estate);
	econtext->ecxt_param_list_info = params;
	foreach(lc, values)
	{
		Expr	   *expr = (Expr *) lfirst(lc);
		MemoryContext old = MemoryContextSwitchTo(estate->es_query_cxt);
		ExprState  *state = ExecInitExpr(expr, NULL);
		int16		typlen;
		bool		typbyval;

		MemoryContextSwitchTo(old);
		keys[i] = ExecEvalExprSwitchContext(state, econtext, &isnull[i]);
		get_typlenbyval(exprType((Node *) expr), &typlen, &typbyval);
		old = MemoryContextSwitchTo(caller);
		if (!isnull[i])
			keys[i] = datumCopy(keys[i], typbyval, typlen);
		MemoryContextSwitchTo(old);
		i++;
	}
	FreeExecutorState(estate);
}

/*
 * The partition of the key's row that "snapshot" sees, or InvalidOid.
 * With "only", the partition where that row must be if there is one, when
 * the summaries leave a single one (gunique_lookup_reader_only): the plan
 * for it reads the row, and a second search of it is saved.  The table is
 * locked; the lookup locks what it reads.
 */
static Oid
keyprune_find(Relation table, Oid indexoid, Datum *keys, bool *isnull,
			  Snapshot snapshot, bool only)
{
	Relation	index = index_open(indexoid, AccessShareLock);
	GuniqueLookupReader *reader;
	GuniqueLookupHit hit;
	Oid			result = InvalidOid;

	reader = gunique_lookup_reader_begin(table, index, snapshot);
	if (!only || !gunique_lookup_reader_only(reader, keys, isnull, &result))
	{
		if (gunique_lookup_reader_find(reader, keys, isnull, NULL, &hit))
			result = hit.heapoid;
	}
	gunique_lookup_reader_end(reader);
	index_close(index, NoLock);
	return result;
}

/*
 * The constraint of partition "partoid" of the table (every level's, as
 * PostgreSQL checks a row routed to it), with the table's range table
 * index, or NULL if partition pruning could not use it: a level
 * partitioned by hash (its constraint is a function call) or a default
 * partition (a negation) on the way from the table down; or if a
 * partition on the way is being detached.
 */
static Expr *
keyprune_partition_qual(Relation table, Oid partoid, Index rti)
{
	Oid			child = partoid;
	Relation	part;
	List	   *qual;

	while (child != RelationGetRelid(table))
	{
		Oid			parent;
		Relation	prel;
		PartitionDesc pd;
		bool		prunable = false;

		if (!get_rel_relispartition(child))
			return NULL;
		parent = get_partition_parent(child, true);
		prel = relation_open(parent, AccessShareLock);
		pd = RelationGetPartitionDesc(prel, true);

		/*
		 * A partition being detached concurrently, which the planner may
		 * leave out, is not pruned to: PostgreSQL plans that statement.
		 */
		for (int i = 0; i < pd->nparts; i++)
			if (pd->oids[i] == child)
				prunable = true;
		prunable &= RelationGetPartitionKey(prel)->strategy !=
			PARTITION_STRATEGY_HASH &&
			get_default_oid_from_partdesc(pd) != child;
		relation_close(prel, NoLock);
		if (!prunable)
			return NULL;
		child = parent;
	}
	part = table_open(partoid, AccessShareLock);
	qual = RelationGetPartitionQual(part);
	qual = map_partition_varattnos(qual, 1, table, part);
	table_close(part, NoLock);
	if (qual == NIL)
		return NULL;
	ChangeVarNodes((Node *) qual, 1, rti, 0);
	/* pruning at planning reads arrays only as constants */
	return (Expr *) eval_const_expressions(NULL,
										   (Node *) make_ands_explicit(qual));
}

/*
 * An UPDATE or DELETE of "table" (range table index rti) that binds the
 * key of gunique index "indexoid" to "values": make the clause that
 * prunes the table's partitions.  For keyplan.c's planning of partition
 * "forced", that partition's constraint.  Where the values read
 * parameters, false: a stub, which executor start replaces (every
 * execution gives the parameters values then).  Otherwise find the key's
 * row with a dirty snapshot (a guess; the check at executor start
 * decides), and prune to its partition, or to none if there is no row.
 * NULL if the values are not known yet (they read something else that
 * only the executor has) or pruning could not use the partition's
 * constraint.
 */
GuniqueKeyPrune *
gunique_keyprune_begin(Relation table, Index rti, Oid indexoid, List *values,
					   ParamListInfo boundParams, Oid forced)
{
	Datum		keys[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	SnapshotData dirty;
	GuniqueKeyPrune *prune;
	KeyPruneKind kind;
	Oid			partoid;
	Expr	   *clause;

	values = keyprune_fold(values);
	if (keyprune_value_may_fail((Node *) values, NULL))
		return NULL;
	if (OidIsValid(forced))
	{
		kind = KEYPRUNE_FORCED;
		clause = keyprune_partition_qual(table, forced, rti);
	}
	else if (keyprune_reads_params((Node *) values))
	{
		kind = KEYPRUNE_STUB;
		clause = (Expr *) makeBoolConst(false, false);
	}
	else
	{
		if (keyprune_param_unknown((Node *) values, boundParams))
			return NULL;
		kind = KEYPRUNE_GUESS;
		keyprune_evaluate(values, boundParams, keys, isnull);
		InitDirtySnapshot(dirty);
		partoid = keyprune_find(table, indexoid, keys, isnull, &dirty,
								false);
		if (OidIsValid(partoid))
			clause = keyprune_partition_qual(table, partoid, rti);
		else
			clause = (Expr *) makeBoolConst(false, false);
	}
	if (clause == NULL)
		return NULL;
	prune = palloc0(sizeof(GuniqueKeyPrune));
	prune->kind = kind;
	prune->rti = rti;
	prune->tableoid = RelationGetRelid(table);
	prune->indexoid = indexoid;
	prune->values = copyObject(values);
	prune->clause = clause;
	return prune;
}

/*
 * The table of a stub's pruning (the key reads parameters: the plan, a
 * stub, is the same for every value), or InvalidOid.
 */
Oid
gunique_keyprune_stub_table(GuniqueKeyPrune *prune)
{
	return prune->kind == KEYPRUNE_STUB ? prune->tableoid : InvalidOid;
}

/*
 * The relation hook, for a relation of the query being planned (query
 * level 1).  The table itself: give it the clause, before the query's own
 * clauses are added (build_simple_rel calls the hook with none) and before
 * its partitions are pruned (add_other_rels_to_query).  A partition of it,
 * built after pruning: a leaf must not inherit the clause, which holds for
 * all its rows, so it is taken away from the table, before the partition
 * copies the table's clauses (apply_child_basequals runs after the hook);
 * a partitioned child needs it to prune its own partitions, so it is put
 * back for that one (whose leaves inherit it then, where it shows as a
 * filter).
 */
void
gunique_keyprune_relation(GuniqueKeyPrune *prune, PlannerInfo *root,
						  RelOptInfo *rel)
{
	AppendRelInfo *appinfo;
	RelOptInfo *table = prune->table;

	if (rel->reloptkind == RELOPT_BASEREL)
	{
		ListCell   *lc;

		if (rel->relid != prune->rti || prune->table != NULL)
			return;
		/* one RestrictInfo per clause of the AND, as the planner makes them */
		foreach(lc, make_ands_implicit(prune->clause))
		{
			RestrictInfo *rinfo = make_simple_restrictinfo(root,
														   (Expr *) lfirst(lc));

			prune->rinfos = lappend(prune->rinfos, rinfo);
			rel->baserestrictinfo = lappend(rel->baserestrictinfo, rinfo);
			rel->baserestrict_min_security =
				Min(rel->baserestrict_min_security, rinfo->security_level);
		}
		prune->table = rel;
		return;
	}
	if (table == NULL || rel->reloptkind != RELOPT_OTHER_MEMBER_REL ||
		root->append_rel_array == NULL)
		return;
	appinfo = root->append_rel_array[rel->relid];
	if (appinfo == NULL || appinfo->parent_relid != prune->rti)
		return;
	table->baserestrictinfo = list_difference_ptr(table->baserestrictinfo,
												  prune->rinfos);
	if (planner_rt_fetch(rel->relid, root)->relkind == RELKIND_PARTITIONED_TABLE)
		table->baserestrictinfo = list_concat(table->baserestrictinfo,
											  prune->rinfos);
}

/*
 * The plan of an UPDATE or DELETE whose table was given the clause: put
 * the check above the scan its ModifyTable reads, with a stub's family of
 * plans.  A plan for the partition keyplan.c asked for has no check: the
 * executor start that asked has found that the key's row, if any, is
 * there.  False if the plan is not that (the caller plans again,
 * unpruned).
 */
bool
gunique_keyprune_plan(GuniqueKeyPrune *prune, PlannedStmt *stmt,
					  Query *original, int cursorOptions)
{
	ModifyTable *mt = (ModifyTable *) stmt->planTree;
	CustomScan *cscan;
	List	   *parts = NIL;
	int			family = 0;
	ListCell   *lc;

	if (prune->table == NULL)
		return true;
	if (mt == NULL || !IsA(mt, ModifyTable) || mt->plan.lefttree == NULL ||
		(mt->operation != CMD_UPDATE && mt->operation != CMD_DELETE))
		return false;
	/* a change to the index plans again, as for lookups */
	stmt->relationOids = lappend_oid(stmt->relationOids, prune->indexoid);
	if (prune->kind == KEYPRUNE_FORCED)
		return true;
	foreach(lc, mt->resultRelations)
		parts = lappend_oid(parts,
							rt_fetch(lfirst_int(lc), stmt->rtable)->relid);
	if (prune->kind == KEYPRUNE_STUB)
		family = gunique_keyplan_family(original, cursorOptions);
	cscan = gunique_passnode_insert(stmt, mt, &keycheck_scan_methods);
	cscan->custom_exprs = prune->values;
	cscan->custom_private =
		list_make5(list_make2_oid(prune->tableoid, prune->indexoid), parts,
				   original, makeInteger(cursorOptions), makeInteger(family));
	/* planned without the parameters' values: kept for the family */
	if (prune->kind == KEYPRUNE_STUB)
		gunique_keyplan_keep_stub(family, original, cursorOptions,
								  prune->tableoid, stmt);
	return true;
}

/* The check of a plan, if it has one. */
static CustomScan *
keyprune_check_of(PlannedStmt *stmt)
{
	Plan	   *plan = stmt->planTree;
	CustomScan *cscan;

	if (stmt->commandType != CMD_UPDATE && stmt->commandType != CMD_DELETE)
		return NULL;
	if (plan == NULL || !IsA(plan, ModifyTable) || plan->lefttree == NULL ||
		!IsA(plan->lefttree, CustomScan))
		return NULL;
	cscan = (CustomScan *) plan->lefttree;
	return cscan->methods == &keycheck_scan_methods ? cscan : NULL;
}

/*
 * The partition of the key's row that the statement's snapshot sees, or
 * InvalidOid; with "only", possibly the one partition where that row must
 * be if there is one (keyprune_find).  Invalidations are processed first,
 * as a lookup does, so that the tree read is current as of the snapshot.
 */
static Oid
keyprune_locate(CustomScan *check, QueryDesc *queryDesc, bool only)
{
	List	   *rels = list_nth(check->custom_private, KEYCHECK_PRIVATE_RELS);
	MemoryContext cxt;
	MemoryContext old;
	Datum		keys[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	Relation	table;
	Oid			partoid;

	AcceptInvalidationMessages();
	cxt = AllocSetContextCreate(CurrentMemoryContext, "gunique key check",
								ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(cxt);
	/* locked with the plan's other relations */
	table = table_open(linitial_oid(rels), NoLock);
	keyprune_evaluate(check->custom_exprs, queryDesc->params, keys, isnull);
	partoid = keyprune_find(table, lsecond_oid(rels), keys, isnull,
							queryDesc->snapshot, only);
	table_close(table, NoLock);
	MemoryContextSwitchTo(old);
	MemoryContextDelete(cxt);
	return partoid;
}

/*
 * Does the plan still modify the key's partition: is the row of the key
 * that the statement's snapshot sees, if any, in a partition the plan
 * modifies?  In a serializable transaction, never: PostgreSQL's plan
 * leaves predicate locks in every partition's btree, which the pruned
 * plan would not.
 */
static bool
keyprune_holds(CustomScan *check, QueryDesc *queryDesc)
{
	List	   *parts = list_nth(check->custom_private, KEYCHECK_PRIVATE_PARTS);
	Oid			partoid;

	if (IsolationIsSerializable() || RecoveryInProgress())
		return false;
	partoid = keyprune_locate(check, queryDesc, true);
	if (OidIsValid(partoid) && list_member_oid(parts, partoid))
		return true;
	/* the one partition left may not hold the key: search */
	if (OidIsValid(partoid))
		partoid = keyprune_locate(check, queryDesc, false);
	return !OidIsValid(partoid) || list_member_oid(parts, partoid);
}

/*
 * Plan the statement again for this execution: for where its key's row is
 * now if "prune", else as PostgreSQL would.
 */
static void
keyprune_replan(CustomScan *check, QueryDesc *queryDesc, bool prune)
{
	Query	   *query = copyObject(list_nth(check->custom_private,
											KEYCHECK_PRIVATE_QUERY));
	int			options = intVal(list_nth(check->custom_private,
										  KEYCHECK_PRIVATE_OPTIONS));
	PlannedStmt *stmt;

	if (!prune)
		keyprune_replanning++;
	PG_TRY();
	{
		stmt = pg_plan_query(query, queryDesc->sourceText, options,
							 queryDesc->params);
	}
	PG_FINALLY();
	{
		if (!prune)
			keyprune_replanning--;
	}
	PG_END_TRY();
	queryDesc->plannedstmt = stmt;
}

/*
 * A stub of family "family": the plan kept for the partition of the key's
 * row (or of the one partition that can hold it, whose plan finds the row
 * or nothing), or the stub itself if no row has the key (it modifies
 * nothing, as PostgreSQL's plan would find nothing).  In a serializable
 * transaction (which may have begun after the stub was made), the plan
 * PostgreSQL would make.  Under EXPLAIN (GENERIC_PLAN), which gives the
 * parameters no values, the stub stays.
 */
static void
keyprune_resolve(CustomScan *check, int family, QueryDesc *queryDesc)
{
	List	   *rels = list_nth(check->custom_private, KEYCHECK_PRIVATE_RELS);
	Query	   *query = list_nth(check->custom_private, KEYCHECK_PRIVATE_QUERY);
	int			options = intVal(list_nth(check->custom_private,
										  KEYCHECK_PRIVATE_OPTIONS));
	Oid			partoid;

	if (IsolationIsSerializable() || RecoveryInProgress())
	{
		keyprune_replan(check, queryDesc, false);
		return;
	}
	if (keyprune_params_missing((Node *) check->custom_exprs,
								queryDesc->params))
		return;
	partoid = keyprune_locate(check, queryDesc, true);
	if (OidIsValid(partoid))
	{
		PlannedStmt *stmt = gunique_keyplan_get(family, query, options,
												linitial_oid(rels), partoid,
												queryDesc->sourceText);

		/* no plan for the partition: the statement as PostgreSQL plans it */
		if (stmt == NULL)
			keyprune_replan(check, queryDesc, false);
		else
			queryDesc->plannedstmt = stmt;
	}
}

/*
 * The executor start hook's part (hooks.c), before the executor starts the
 * plan.  A stub is replaced by the plan for its key's partition, also for
 * EXPLAIN, which shows that plan.  A plan whose check fails (a cached plan
 * whose key's row has moved since, or a row moved between planning and
 * the snapshot) is made again for the row's partition now, and checked
 * again; if that fails too, made as PostgreSQL would make it.  A plan
 * already made with the check keeps it whatever
 * gunique.enable_modify_by_key says now: it is correct either way, as a
 * lookup's plan is.
 */
void
gunique_keyprune_executor_start(QueryDesc *queryDesc, int eflags)
{
	CustomScan *check = keyprune_check_of(queryDesc->plannedstmt);
	int			family;

	if (check == NULL)
		return;
	family = intVal(list_nth(check->custom_private, KEYCHECK_PRIVATE_FAMILY));
	if (family != 0)
		keyprune_resolve(check, family, queryDesc);
	else if ((eflags & EXEC_FLAG_EXPLAIN_ONLY) == 0 &&
			 !keyprune_holds(check, queryDesc))
	{
		keyprune_replan(check, queryDesc, true);
		check = keyprune_check_of(queryDesc->plannedstmt);
		if (check != NULL && !keyprune_holds(check, queryDesc))
			keyprune_replan(check, queryDesc, false);
	}
}

static Node *
keycheck_create_state(CustomScan *cscan)
{
	CustomScanState *state = palloc0(sizeof(CustomScanState));

	NodeSetTag(state, T_CustomScanState);
	state->methods = &keycheck_exec_methods;
	return (Node *) state;
}

static void
keycheck_begin(CustomScanState *node, EState *estate, int eflags)
{
	gunique_passnode_begin(node, estate, eflags);
}

static TupleTableSlot *
keycheck_exec(CustomScanState *node)
{
	return ExecProcNode(outerPlanState(node));
}

static void
keycheck_end(CustomScanState *node)
{
	ExecEndNode(outerPlanState(node));
}

static void
keycheck_rescan(CustomScanState *node)
{
	if (outerPlanState(node)->chgParam == NULL)
		ExecReScan(outerPlanState(node));
}

static void
keycheck_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	List	   *rels = list_nth(cscan->custom_private, KEYCHECK_PRIVATE_RELS);
	char	   *name = get_rel_name(lsecond_oid(rels));

	if (name != NULL)
		ExplainPropertyText("Index", name, es);
}

/* Called once, at load (hooks.c). */
void
gunique_keyprune_register_scan(void)
{
	RegisterCustomScanMethods(&keycheck_scan_methods);
}

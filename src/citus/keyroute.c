/*-------------------------------------------------------------------------
 *
 * keyroute.c
 *	  Lookups by a global key on a Citus distributed table, routed: the
 *	  planner adds "distribution column = $n" to a SELECT, UPDATE or DELETE
 *	  that gives the whole key, and the "gunique route" node above Citus's
 *	  plan sets $n, before Citus prunes shards, to the distribution value
 *	  the key table holds for the key.  Citus then reads one shard of the
 *	  key table and the row's shard, not every shard.
 *
 * Why the added condition changes no result, and why a parameter and not
 * a function call: src/citus/README, "Lookups".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/stratnum.h"
#include "catalog/pg_class.h"
#include "catalog/pg_type.h"
#include "executor/executor.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "nodes/params.h"
#include "optimizer/optimizer.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "rewrite/rewriteManip.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/typcache.h"

#include "compat.h"
#include "citus/globalkey.h"
#include "citus/keyroute.h"

#ifdef GUNIQUE_EXPLAIN_HEADERS
#include "commands/explain_format.h"
#endif

/*
 * One routed relation: parameter "paramid" is to be its distribution value
 * for key "keys" of global key "indexoid" of relation "relid".
 */
typedef struct RouteState
{
	CustomScanState css;
	List	   *routes;			/* as in custom_private */
} RouteState;

static Node *route_create_state(CustomScan *cscan);
static void route_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *route_exec(CustomScanState *node);
static void route_end(CustomScanState *node);
static void route_rescan(CustomScanState *node);
static void route_explain(CustomScanState *node, List *ancestors,
						  ExplainState *es);

static const CustomScanMethods route_plan_methods = {
	.CustomName = "gunique route",
	.CreateCustomScanState = route_create_state,
};

static const CustomExecMethods route_exec_methods = {
	.CustomName = "gunique route",
	.BeginCustomScan = route_begin,
	.ExecCustomScan = route_exec,
	.EndCustomScan = route_end,
	.ReScanCustomScan = route_rescan,
	.ExplainCustomScan = route_explain,
};

void
gunique_citus_register_route(void)
{
	RegisterCustomScanMethods(&route_plan_methods);
}

/*
 * A value the statement gives before it runs: no column, no subquery,
 * nothing volatile (a constant, a parameter, a cast of either).
 */
static bool
is_value(Node *node)
{
	return !contain_var_clause(node) && !contain_volatile_functions(node) &&
		!checkExprHasSubLink(node);
}

/*
 * "column = value" for column attno of rti, as the index compares (its
 * operator family and collation): the value, converted to the column's
 * type, or NULL.  A value of another type in the family ("id = 42" for a
 * bigint id) is converted only where the conversion is implicit, which in
 * a btree family keeps equality.
 */
static Expr *
equality_value(Node *qual, int rti, Var *column, Oid opfamily)
{
	OpExpr	   *op;
	Node	   *var;
	Node	   *value;
	Oid			type = column->vartype;

	if (!IsA(qual, OpExpr) || list_length(((OpExpr *) qual)->args) != 2)
		return NULL;
	op = (OpExpr *) qual;
	var = strip_implicit_coercions(linitial(op->args));
	value = lsecond(op->args);
	if (!IsA(var, Var))
	{
		var = strip_implicit_coercions(lsecond(op->args));
		value = linitial(op->args);
	}
	if (!IsA(var, Var) || ((Var *) var)->varno != rti ||
		((Var *) var)->varattno != column->varattno ||
		((Var *) var)->varlevelsup != 0 || !is_value(value) ||
		op->inputcollid != column->varcollid || !OidIsValid(opfamily) ||
		get_op_opfamily_strategy(op->opno, opfamily) != BTEqualStrategyNumber)
		return NULL;
	if (exprType(value) == type)
		return (Expr *) copyObject(value);
	if (!can_coerce_type(1, (Oid[]) {exprType(value)}, &type, COERCION_IMPLICIT))
		return NULL;
	return (Expr *) coerce_to_target_type(NULL, copyObject(value),
										  exprType(value), type, -1,
										  COERCION_IMPLICIT,
										  COERCE_IMPLICIT_CAST, -1);
}

/* The value a top-level condition gives a column of rti, or NULL. */
static Expr *
find_value(List *quals, int rti, Var *column, Oid opfamily)
{
	ListCell   *lc;

	foreach(lc, quals)
	{
		Expr	   *value = equality_value(lfirst(lc), rti, column, opfamily);

		if (value != NULL)
			return value;
	}
	return NULL;
}

static Var *
column_var(Relation rel, int rti, AttrNumber attno)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attno - 1);

	return makeVar(rti, attno, att->atttypid, att->atttypmod,
				   att->attcollation, 0);
}

/*
 * Whether the statement is an UPDATE of column attno of rti.  Citus
 * refuses to change a distribution value, but with the distribution column
 * compared to a parameter it fails an assertion (or dereferences NULL) on
 * the way: such an UPDATE is left unrouted, for Citus to refuse.
 */
static bool
sets_column(Query *parse, int rti, AttrNumber attno)
{
	ListCell   *lc;

	if (parse->commandType != CMD_UPDATE || parse->resultRelation != rti)
		return false;
	foreach(lc, parse->targetList)
	{
		TargetEntry *tle = lfirst(lc);

		if (!tle->resjunk && tle->resno == attno)
			return true;
	}
	return false;
}

/*
 * Relation rti looked up by the whole of global key gk, with no value for
 * its distribution column: adds "distcol = $paramid" to the statement's
 * conditions, and returns the route for the plan (NIL if none).
 */
static List *
route_relation(Query *parse, int rti, Relation rel, GuniqueGlobalKey *gk,
			   int paramid)
{
	List	   *quals = make_ands_implicit((Expr *) parse->jointree->quals);
	List	   *keys = NIL;
	Var		   *dist = column_var(rel, rti, gk->distattno);
	TypeCacheEntry *tc;
	Param	   *param;

	tc = lookup_type_cache(gk->disttype,
						   TYPECACHE_EQ_OPR | TYPECACHE_BTREE_OPFAMILY);
	if (!OidIsValid(tc->eq_opr) ||
		find_value(quals, rti, dist, tc->btree_opf) != NULL ||
		sets_column(parse, rti, gk->distattno))
		return NIL;
	for (int i = 0; i < gk->nkeys; i++)
	{
		Expr	   *value = find_value(quals, rti,
									   column_var(rel, rti, gk->keyattno[i]),
									   gk->opfamily[i]);

		if (value == NULL)
			return NIL;
		fix_opfuncids((Node *) value);
		keys = lappend(keys, value);
	}

	param = makeNode(Param);
	param->paramkind = PARAM_EXTERN;
	param->paramid = paramid;
	param->paramtype = dist->vartype;
	param->paramtypmod = dist->vartypmod;
	param->paramcollid = dist->varcollid;
	param->location = -1;
	quals = lappend(quals, make_opclause(tc->eq_opr, BOOLOID, false,
										 (Expr *) dist, (Expr *) param,
										 InvalidOid, dist->varcollid));
	parse->jointree->quals = (Node *) make_ands_explicit(quals);
	return list_make3(makeInteger(paramid),
					  list_make2_oid(RelationGetRelid(rel), gk->indexoid),
					  keys);
}

/* The highest number of a parameter of the statement. */
static bool
max_param_walker(Node *node, int *max)
{
	if (node == NULL)
		return false;
	if (IsA(node, Param) && ((Param *) node)->paramkind == PARAM_EXTERN)
		*max = Max(*max, ((Param *) node)->paramid);
	if (IsA(node, Query))
		return query_tree_walker((Query *) node, max_param_walker, max, 0);
	return expression_tree_walker(node, max_param_walker, max);
}

/*
 * Whether the statement reads one relation and nothing else: Citus prunes
 * shards by a parameter's value at executor start only in such a
 * statement (its "fast path"); in a join, a subquery or a CTE it must know
 * every parameter's value when it plans, and ours has none then.
 */
static bool
single_relation(Query *parse)
{
	int			relations = 0;
	ListCell   *lc;

	if (parse->hasSubLinks || parse->cteList != NIL || parse->setOperations)
		return false;
	foreach(lc, parse->rtable)
	{
		RangeTblEntry *rte = lfirst(lc);

		if (rte->rtekind == RTE_RELATION)
			relations++;
		else if (!GUNIQUE_RTE_IS_GROUP(rte))
			return false;
	}
	return relations == 1;
}

/*
 * Routes a SELECT, UPDATE or DELETE of one relation by its global keys,
 * whose whole key it gives: returns the routes for
 * gunique_citus_route_plan (src/citus/README, "Lookups").  The parameters
 * it adds are numbered after every parameter the statement has or is given,
 * so that no value planned with fills them.
 */
List *
gunique_citus_route(Query *parse, int cursorOptions, ParamListInfo boundParams)
{
	List	   *routes = NIL;
	int			paramid = -1;	/* the last one numbered, found when needed */
	ListCell   *lc;

	/* a scrollable cursor needs a plan that runs backward: not routed */
	if (parse->jointree == NULL || parse->jointree->quals == NULL ||
		(cursorOptions & CURSOR_OPT_SCROLL) ||
		(parse->commandType != CMD_SELECT && parse->commandType != CMD_UPDATE &&
		 parse->commandType != CMD_DELETE) ||
		!single_relation(parse))
		return NIL;

	foreach(lc, parse->jointree->fromlist)
	{
		RangeTblRef *ref = lfirst(lc);
		RangeTblEntry *rte;
		Relation	rel;
		ListCell   *lg;

		if (!IsA(ref, RangeTblRef))
			continue;
		rte = rt_fetch(ref->rtindex, parse->rtable);
		if (rte->rtekind != RTE_RELATION ||
			(rte->relkind != RELKIND_RELATION &&
			 rte->relkind != RELKIND_PARTITIONED_TABLE))
			continue;
		rel = relation_open(rte->relid, NoLock);
		/* row security: the key table does not know the table's policies */
		if (!rel->rd_rel->relrowsecurity)
			foreach(lg, gunique_citus_global_keys(rel))
			{
				List	   *route;

				if (paramid < 0)
				{
					paramid = boundParams ? boundParams->numParams : 0;
					(void) max_param_walker((Node *) parse, &paramid);
				}
				route = route_relation(parse, ref->rtindex, rel, lfirst(lg),
									   paramid + 1);
				if (route != NIL)
				{
					routes = lappend(routes, route);
					paramid++;
				}
			}
		relation_close(rel, NoLock);
	}
	return routes;
}

/*
 * Puts the "gunique route" node above a routed statement's plan, which it
 * returns the rows of unchanged (its tlist refers to them as OUTER_VAR).
 */
void
gunique_citus_route_plan(PlannedStmt *result, List *routes)
{
	CustomScan *cs = makeNode(CustomScan);
	Plan	   *child = result->planTree;
	ListCell   *lc;
	int			resno = 0;

	foreach(lc, child->targetlist)
	{
		TargetEntry *tle = lfirst(lc);
		Var		   *v = makeVar(OUTER_VAR, ++resno, exprType((Node *) tle->expr),
								exprTypmod((Node *) tle->expr),
								exprCollation((Node *) tle->expr), 0);

		cs->scan.plan.targetlist =
			lappend(cs->scan.plan.targetlist,
					makeTargetEntry((Expr *) v, resno, tle->resname,
									tle->resjunk));
	}
	foreach(lc, routes)
	{
		GuniqueGlobalKey *gk;
		Oid			relid = linitial_oid(lsecond(lfirst(lc)));

		gk = gunique_citus_planned_key(relid, lsecond_oid(lsecond(lfirst(lc))));
		result->relationOids = lappend_oid(result->relationOids, gk->keytable);
	}
	cs->scan.plan.lefttree = child;
	cs->custom_private = routes;
	cs->methods = &route_plan_methods;
	cs->scan.scanrelid = 0;
	cs->scan.plan.startup_cost = child->startup_cost;
	cs->scan.plan.total_cost = child->total_cost;
	cs->scan.plan.plan_rows = child->plan_rows;
	cs->scan.plan.plan_width = child->plan_width;
	result->planTree = (Plan *) cs;
}

static Node *
route_create_state(CustomScan *cscan)
{
	RouteState *state = palloc0(sizeof(RouteState));

	NodeSetTag(state, T_CustomScanState);
	state->css.methods = &route_exec_methods;
	return (Node *) state;
}

/*
 * The statement's parameters, and after them the routes' values: a copy
 * with every value fetched, as copyParamList makes it, longer if needed.
 */
static ParamListInfo
params_with_routes(ParamListInfo from, int nparams)
{
	ParamListInfo to;
	int			nfrom = from ? from->numParams : 0;

	to = makeParamList(Max(nfrom, nparams));
	for (int i = 0; i < to->numParams; i++)
	{
		ParamExternData *prm = NULL;
		ParamExternData workspace;
		int16		len;
		bool		byval;

		to->params[i].isnull = true;
		to->params[i].ptype = InvalidOid;
		if (i >= nfrom)
			continue;
		if (from->paramFetch != NULL)
			prm = from->paramFetch(from, i + 1, false, &workspace);
		else
			prm = &from->params[i];
		if (prm == NULL || !OidIsValid(prm->ptype))
			continue;
		to->params[i] = *prm;
		get_typlenbyval(prm->ptype, &len, &byval);
		if (!prm->isnull)
			to->params[i].value = datumCopy(prm->value, byval, len);
	}
	return to;
}

/*
 * Looks up each route's key in its key table, in the statement's snapshot
 * and under the lock of B21 (src/citus/README), and gives the statement,
 * from here down, its parameters with the distribution values found: NULL
 * where no row holds the key, so that the statement reads no shard and
 * finds nothing, as it would have.
 */
static void
route_begin(CustomScanState *node, EState *estate, int eflags)
{
	RouteState *state = (RouteState *) node;
	CustomScan *cs = (CustomScan *) node->ss.ps.plan;
	ExprContext *econtext = node->ss.ps.ps_ExprContext;
	ParamListInfo params;
	int			nparams = 0;
	ListCell   *lc;

	state->routes = cs->custom_private;
	foreach(lc, state->routes)
		nparams = Max(nparams, intVal(linitial(lfirst(lc))));
	params = params_with_routes(estate->es_param_list_info, nparams);

	foreach(lc, state->routes)
	{
		List	   *route = lfirst(lc);
		ParamExternData *prm = &params->params[intVal(linitial(route)) - 1];
		GuniqueGlobalKey *gk = gunique_citus_planned_key(linitial_oid(lsecond(route)),
										   lsecond_oid(lsecond(route)));
		Datum		keys[INDEX_MAX_KEYS];
		bool		null_key = false;
		int			i = 0;
		ListCell   *lk;

		foreach(lk, (List *) lthird(route))
		{
			ExprState  *es = ExecInitExpr(lfirst(lk), &node->ss.ps);
			bool		isnull;

			keys[i++] = ExecEvalExprSwitchContext(es, econtext, &isnull);
			null_key |= isnull;
		}
		prm->ptype = gk->disttype;
		prm->pflags = PARAM_FLAG_CONST;
		prm->isnull = (null_key ||
					   !gunique_keys_route_owner(gk, keys, &prm->value));
	}
	estate->es_param_list_info = params;
	outerPlanState(node) = ExecInitNode(outerPlan(cs), estate, eflags);
}

static TupleTableSlot *
route_exec(CustomScanState *node)
{
	return ExecProcNode(outerPlanState(node));
}

static void
route_end(CustomScanState *node)
{
	ExecEndNode(outerPlanState(node));
}

static void
route_rescan(CustomScanState *node)
{
	ExecReScan(outerPlanState(node));
}

static void
route_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	RouteState *state = (RouteState *) node;
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, state->routes)
	{
		List	   *route = lfirst(lc);

		appendStringInfo(&buf, "%s%s ($%d)", buf.len > 0 ? ", " : "",
						 get_rel_name(lsecond_oid(lsecond(route))),
						 intVal(linitial(route)));
	}
	ExplainPropertyText("Routed by Global Keys", buf.data, es);
}

/*-------------------------------------------------------------------------
 *
 * lookupplan.c
 *	  Plan a lookup by a gunique key as one scan of the partitioned table.
 *
 * A query that binds every key column of a valid gunique index by equality
 * reads at most one row per key, and gunique's summaries and filters know
 * which partitions can hold it.  PostgreSQL would plan, lock and open every
 * partition the partition key does not prune (all of them, for a key that is
 * not the partition key), for each execution of a generic plan too.  So the
 * planner hook marks such a table (or the relation hook does, for a table
 * a view or a subquery reads, once the planner has pulled that up into the
 * query), and the relation hook takes it out of inheritance expansion as
 * the relation is built (the expansion is what opens the partitions); the
 * path hook gives the table, now a relation without children, the lookup
 * scan of lookup.c as its only path.  Why this is safe, and what the scan
 * reads, is src/README, "Lookups".
 *
 * Whether to take the path is decided before the partitions would be
 * expanded, on cost: PostgreSQL's plan searches each key in every
 * partition its pruning at planning keeps, which the relation hook asks
 * PostgreSQL's pruning for without opening them (lookup_append_cheaper);
 * so the path is taken when the key is bound and that pruning keeps more
 * than one partition, unless gunique.enable_lookup is off.  If the
 * table's paths are never asked for, or its clauses do not bind the key
 * after all, the query is planned again as PostgreSQL would.  An UPDATE
 * or DELETE by the key is pruned to the key's partition instead
 * (keyprune.c), unless gunique.enable_modify_by_key is off.
 *
 * The planner, relation and path hooks are hooks.c's; they call the
 * gunique_lookup_* functions here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/pg_class.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "optimizer/clauses.h"
#include "optimizer/cost.h"
#include "optimizer/optimizer.h"
#include "optimizer/pathnode.h"
#include "optimizer/paths.h"
#include "optimizer/plancat.h"
#include "optimizer/planner.h"
#include "optimizer/restrictinfo.h"
#include "parser/parse_coerce.h"
#include "parser/parsetree.h"
#include "partitioning/partdesc.h"
#include "partitioning/partprune.h"
#include "rewrite/rewriteManip.h"
#include "utils/array.h"
#include "utils/lsyscache.h"
#include "utils/partcache.h"
#include "utils/rel.h"

#include "compat.h"
#include "am/tree.h"
#include "read/keyplan.h"
#include "read/keyprune.h"
#include "read/lookup.h"
#include "read/lookupplan.h"

bool		gunique_enable_lookup = true;

/* A gunique index's key, as clauses must name it to bind it. */
typedef struct LookupKey
{
	Oid			indexoid;
	int			nkeys;
	AttrNumber	attnos[INDEX_MAX_KEYS]; /* 0 for an expression */
	Node	   *exprs[INDEX_MAX_KEYS];	/* with the table's range index */
	Oid			opfamily[INDEX_MAX_KEYS];
	Oid			opcintype[INDEX_MAX_KEYS];
	Oid			collation[INDEX_MAX_KEYS];
	List	   *predicate;		/* implicit AND, or NIL */
} LookupKey;

/* What binds the key: one value per column, or one array of keys. */
typedef struct LookupBinding
{
	int			nkeys;			/* the key's columns */
	bool		array;
	Expr	   *values[INDEX_MAX_KEYS];
	Node	   *clauses[INDEX_MAX_KEYS];	/* the clause that binds each */
	bool		cast[INDEX_MAX_KEYS];	/* its value was cast to the key's
										 * type, which may lose (text to
										 * name truncates): the clause is
										 * checked again on the row */
} LookupBinding;

/* A table the planner hook took out of expansion. */
typedef struct LookupMark
{
	Index		rti;
	Oid			indexoid;
	bool		planned;		/* the path hook gave it the lookup path */
	bool		failed;			/* a root of the planning could not */
	bool		declined;		/* PostgreSQL's plan costs less */
} LookupMark;

/*
 * One planner call under way; calls nest (SPI in functions that planning
 * evaluates), so every call has one, with or without marks.  The call's
 * roots share its PlannerGlobal; the marked tables are the query's, at
 * query level 1 (PostgreSQL 16 and later may replace the root's Query by
 * a copy, with the same range table indexes).
 */
typedef struct LookupPlanning
{
	List	   *marks;
	bool		nested;			/* a subquery (in FROM, a sublink) reads a
								 * table with a gunique index:
								 * gunique_lookup_get_relation_info may add marks */
	PlannerGlobal *glob;		/* its roots', once one is seen */
	GuniqueKeyPrune *prune;		/* an UPDATE or DELETE by the key */
	planner_hook_type next;		/* the previous planner hook, or
								 * standard_planner (hooks.c) */
	struct LookupPlanning *outer;
} LookupPlanning;

static LookupPlanning *planning = NULL;

static Plan *lookup_plan_path(PlannerInfo *root, RelOptInfo *rel,
							  CustomPath *best_path, List *tlist,
							  List *clauses, List *custom_plans);

static const CustomPathMethods lookup_path_methods = {
	.CustomName = GUNIQUE_LOOKUP_NAME,
	.PlanCustomPath = lookup_plan_path,
};

static const CustomScanMethods lookup_scan_methods = {
	.CustomName = GUNIQUE_LOOKUP_NAME,
	.CreateCustomScanState = gunique_lookup_create_state,
};

/* The key of gunique index "index" on the table of range index rti. */
static void
lookup_key_make(LookupKey *key, Relation index, Index rti)
{
	List	   *exprs = RelationGetIndexExpressions(index);
	ListCell   *lc = list_head(exprs);

	key->indexoid = RelationGetRelid(index);
	key->nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	for (int i = 0; i < key->nkeys; i++)
	{
		key->attnos[i] = index->rd_index->indkey.values[i];
		key->exprs[i] = NULL;
		if (key->attnos[i] == 0)
		{
			key->exprs[i] = (Node *) lfirst(lc);
			ChangeVarNodes(key->exprs[i], 1, rti, 0);
			lc = lnext(exprs, lc);
		}
		key->opfamily[i] = index->rd_opfamily[i];
		key->opcintype[i] = index->rd_opcintype[i];
		key->collation[i] = index->rd_indcollation[i];
	}
	key->predicate = RelationGetIndexPredicate(index);
	if (key->predicate != NIL)
		ChangeVarNodes((Node *) key->predicate, 1, rti, 0);
}

/* Does "node" name key column "col" of the table? */
static bool
lookup_names_column(Node *node, LookupKey *key, Index rti, int col)
{
	while (node != NULL && IsA(node, RelabelType))
		node = (Node *) ((RelabelType *) node)->arg;
	if (node == NULL)
		return false;
	if (key->attnos[col] != 0)
		return IsA(node, Var) && ((Var *) node)->varno == rti &&
			((Var *) node)->varlevelsup == 0 &&
			((Var *) node)->varattno == key->attnos[col];
	return equal(node, key->exprs[col]);
}

/*
 * Is "value" the same for every row of one execution: no column, no
 * volatile function, no subquery?  (Aggregates cannot be in WHERE.)
 */
static bool
lookup_value_fixed(Node *value)
{
	return !contain_var_clause(value) &&
		!contain_volatile_functions(value) &&
		!contain_subplans(value) &&
		!checkExprHasSubLink(value);
}

/*
 * Can operator opno (column on its left) compare column "col" with a value
 * of type "valtype" the way the index does?  It must be the equality of
 * the column's operator family, under the index's collation.  A value of
 * another type is cast to the column's type, only if an implicit cast
 * exists (int4 to int8, say), under which the family's cross-type equality
 * agrees with its own; *value becomes the cast.
 */
static bool
lookup_operator_fits(Oid opno, Oid inputcollid, LookupKey *key, int col,
					 Node **value, Oid valtype, bool *cast_needed)
{
	int			strategy;
	Oid			lefttype;
	Oid			righttype;
	Node	   *cast;

	if (!op_in_opfamily(opno, key->opfamily[col]))
		return false;
	get_op_opfamily_properties(opno, key->opfamily[col], false, &strategy,
							   &lefttype, &righttype);
	if (strategy != BTEqualStrategyNumber ||
		lefttype != key->opcintype[col] || righttype != valtype)
		return false;
	if (OidIsValid(key->collation[col]) && inputcollid != key->collation[col])
		return false;
	*cast_needed = false;
	if (righttype == key->opcintype[col])
		return true;
	*cast_needed = true;
	cast = coerce_to_target_type(NULL, *value, valtype, key->opcintype[col],
								 -1, COERCION_IMPLICIT, COERCE_IMPLICIT_CAST,
								 -1);
	if (cast == NULL || contain_volatile_functions(cast))
		return false;
	*value = cast;
	return true;
}

/*
 * Does clause bind key column "col" (or, for a key of one column, the key
 * to an array of values)?  Fills the binding's entry for it.
 */
static bool
lookup_clause_binds(Node *clause, LookupKey *key, Index rti, int col,
					LookupBinding *binding, bool need_leakproof)
{
	Node	   *left;
	Node	   *right;
	Oid			opno;

	if (IsA(clause, OpExpr) && list_length(((OpExpr *) clause)->args) == 2)
	{
		OpExpr	   *op = (OpExpr *) clause;

		opno = op->opno;
		left = linitial(op->args);
		right = lsecond(op->args);
		if (!lookup_names_column(left, key, rti, col))
		{
			Node	   *tmp = left;

			left = right;
			right = tmp;
			opno = get_commutator(opno);
			if (!OidIsValid(opno) ||
				!lookup_names_column(left, key, rti, col))
				return false;
		}
		if (!lookup_value_fixed(right) ||
			!lookup_operator_fits(opno, op->inputcollid, key, col, &right,
								  exprType(right), &binding->cast[col]))
			return false;
		binding->array = false;
	}
	else if (IsA(clause, ScalarArrayOpExpr) && key->nkeys == 1)
	{
		ScalarArrayOpExpr *saop = (ScalarArrayOpExpr *) clause;

		opno = saop->opno;
		left = linitial(saop->args);
		right = lsecond(saop->args);
		if (!saop->useOr || !lookup_names_column(left, key, rti, col) ||
			!lookup_value_fixed(right) ||
			get_element_type(exprType(right)) != key->opcintype[col] ||
			!lookup_operator_fits(opno, saop->inputcollid, key, col, &right,
								  key->opcintype[col], &binding->cast[col]))
			return false;
		binding->array = true;
	}
	else
		return false;
	if (need_leakproof && !get_func_leakproof(get_opcode(opno)))
		return false;
	binding->values[col] = (Expr *) right;
	binding->clauses[col] = clause;
	return true;
}

/*
 * Do the clauses (an implicit AND) bind every key column?  A key of one
 * column may also be bound to an array; a plain equality is preferred.
 */
static bool
lookup_bind(List *clauses, LookupKey *key, Index rti, bool need_leakproof,
			LookupBinding *binding)
{
	LookupBinding array_binding;
	bool		have_array = false;

	for (int col = 0; col < key->nkeys; col++)
	{
		bool		bound = false;
		ListCell   *lc;

		foreach(lc, clauses)
		{
			Node	   *clause = (Node *) lfirst(lc);

			if (IsA(clause, RestrictInfo))
				clause = (Node *) ((RestrictInfo *) clause)->clause;
			if (!lookup_clause_binds(clause, key, rti, col, binding,
									 need_leakproof))
				continue;
			if (!binding->array)
			{
				bound = true;
				break;
			}
			if (!have_array)
				array_binding = *binding;
			have_array = true;
		}
		if (!bound && !(have_array && key->nkeys == 1))
			return false;
		if (!bound)
			*binding = array_binding;
	}
	binding->nkeys = key->nkeys;
	return true;
}

/* The clauses of an AND tree, as a flat list. */
static List *
lookup_flatten_and(Node *node, List *result)
{
	if (node == NULL)
		return result;
	if (is_andclause(node))
	{
		ListCell   *lc;

		foreach(lc, ((BoolExpr *) node)->args)
			result = lookup_flatten_and((Node *) lfirst(lc), result);
		return result;
	}
	if (IsA(node, List))
	{
		ListCell   *lc;

		foreach(lc, (List *) node)
			result = lookup_flatten_and((Node *) lfirst(lc), result);
		return result;
	}
	return lappend(result, node);
}

/* Is range table entry rti a relation the query's FROM reads? */
static bool
lookup_in_jointree(Node *node, Index rti)
{
	if (node == NULL)
		return false;
	if (IsA(node, RangeTblRef))
		return ((RangeTblRef *) node)->rtindex == rti;
	if (IsA(node, FromExpr))
	{
		ListCell   *lc;

		foreach(lc, ((FromExpr *) node)->fromlist)
			if (lookup_in_jointree((Node *) lfirst(lc), rti))
				return true;
		return false;
	}
	if (IsA(node, JoinExpr))
		return lookup_in_jointree(((JoinExpr *) node)->larg, rti) ||
			lookup_in_jointree(((JoinExpr *) node)->rarg, rti);
	return false;
}

typedef struct SystemColumnsContext
{
	Index		rti;
	int			sublevels_up;
} SystemColumnsContext;

/*
 * Does the query read a system column of the table other than tableoid and
 * ctid?  The scan returns rows in the table's own row type, which has no
 * xmin or xmax of the partition's tuple.
 */
static bool
lookup_system_column_walker(Node *node, SystemColumnsContext *cxt)
{
	if (node == NULL)
		return false;
	if (IsA(node, Var))
	{
		Var		   *var = (Var *) node;

		return var->varno == cxt->rti &&
			var->varlevelsup == cxt->sublevels_up &&
			var->varattno < 0 && var->varattno != TableOidAttributeNumber &&
			var->varattno != SelfItemPointerAttributeNumber;
	}
	if (IsA(node, Query))
	{
		bool		result;

		cxt->sublevels_up++;
		result = query_tree_walker((Query *) node,
								   lookup_system_column_walker,
								   (void *) cxt, 0);
		cxt->sublevels_up--;
		return result;
	}
	return expression_tree_walker(node, lookup_system_column_walker,
								  (void *) cxt);
}

/*
 * Would PostgreSQL prune to one partition anyway: does every column of the
 * partition key have an equality with a fixed value among the clauses?
 */
static bool
lookup_partition_key_bound(Relation table, Index rti, List *clauses)
{
	PartitionKey pkey = RelationGetPartitionKey(table);

	for (int i = 0; i < pkey->partnatts; i++)
	{
		bool		bound = false;
		ListCell   *lc;

		if (pkey->partattrs[i] == 0)
			return false;
		foreach(lc, clauses)
		{
			OpExpr	   *op = (OpExpr *) lfirst(lc);
			Node	   *left;
			Node	   *right;

			if (!IsA(op, OpExpr) || list_length(op->args) != 2)
				continue;
			left = strip_implicit_coercions(linitial(op->args));
			right = strip_implicit_coercions(lsecond(op->args));
			if (!IsA(left, Var))
			{
				Node	   *tmp = left;

				left = right;
				right = tmp;
			}
			if (IsA(left, Var) && ((Var *) left)->varno == rti &&
				((Var *) left)->varlevelsup == 0 &&
				((Var *) left)->varattno == pkey->partattrs[i] &&
				lookup_value_fixed(right) &&
				op_mergejoinable(op->opno, exprType(linitial(op->args))))
				bound = true;
		}
		if (!bound)
			return false;
	}
	return true;
}

/*
 * The gunique index of the table whose key the clauses bind, or
 * InvalidOid; what binds it into *found, if not NULL.  Only a valid index
 * that is unique across the tree (tree.c), whose predicate, if any, the
 * clauses imply.
 */
static Oid
lookup_find_index(Relation table, Index rti, List *clauses,
				  bool need_leakproof, LookupBinding *found)
{
	List	   *indexes = RelationGetIndexList(table);
	ListCell   *lc;
	Oid			result = InvalidOid;

	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);
		Relation	index;
		LookupKey	key;
		LookupBinding binding;

		if (!gunique_is_gunique_index(indexoid))
			continue;
		index = index_open(indexoid, AccessShareLock);
		if (index->rd_index->indisvalid && index->rd_index->indisunique)
		{
			lookup_key_make(&key, index, rti);
			if (lookup_bind(clauses, &key, rti, need_leakproof, &binding) &&
				(key.predicate == NIL ||
				 predicate_implied_by(key.predicate, clauses, false)))
			{
				result = indexoid;
				if (found != NULL)
					*found = binding;
			}
		}
		index_close(index, NoLock);
		if (OidIsValid(result))
			break;
	}
	list_free(indexes);
	return result;
}

/*
 * The clauses that hold for every row the query reads from the relations
 * of "node" (a join tree): those of its WHERE and of the WHERE of
 * subqueries pulled up into it, and of inner joins, as a flat list; and
 * those of the semi and anti joins that EXISTS and IN (SELECT ...) become,
 * which hold for the rows of the subquery's relations that they name
 * alone.  The clauses of an outer join, and those below one, are left
 * out.
 */
static List *
lookup_unconditional_quals(Node *node, List *result)
{
	ListCell   *lc;

	if (node == NULL)
		return result;
	if (IsA(node, FromExpr))
	{
		FromExpr   *from = (FromExpr *) node;

		result = lookup_flatten_and(from->quals, result);
		foreach(lc, from->fromlist)
			result = lookup_unconditional_quals((Node *) lfirst(lc), result);
	}
	else if (IsA(node, JoinExpr) &&
			 (((JoinExpr *) node)->jointype == JOIN_INNER ||
			  ((JoinExpr *) node)->jointype == JOIN_SEMI ||
			  ((JoinExpr *) node)->jointype == JOIN_ANTI))
	{
		JoinExpr   *join = (JoinExpr *) node;

		result = lookup_flatten_and(join->quals, result);
		result = lookup_unconditional_quals(join->larg, result);
		result = lookup_unconditional_quals(join->rarg, result);
	}
	return result;
}

/*
 * Can the lookup path serve tables of this query at all: a plain SELECT
 * (no FOR UPDATE, no data-modifying WITH)?
 */
static bool
lookup_query_fits(Query *parse)
{
	if (parse->commandType != CMD_SELECT || parse->utilityStmt != NULL ||
		parse->rowMarks != NIL || parse->hasModifyingCTE ||
		parse->jointree == NULL)
		return false;

	/*
	 * Aggregates of a query of one table and no GROUP BY may be planned as
	 * MIN or MAX over an ordered scan (planagg.c), from a copy of the query
	 * at another query level, which the path hook does not recognize.
	 */
	if (parse->hasAggs && parse->groupClause == NIL &&
		list_length(parse->jointree->fromlist) == 1)
		return false;
	return true;
}

/*
 * The gunique index by whose key the lookup path can read range table
 * entry rti of the query, a partitioned table in its FROM read whole (not
 * ONLY, no TABLESAMPLE), given the clauses that hold for its rows; or
 * InvalidOid: no clause binds the key of one of its gunique indexes, or
 * the query reads a system column of it that the scan cannot give.  (The
 * relation hook still declines it where PostgreSQL's plan costs less:
 * lookup_append_cheaper.)
 */
static Oid
lookup_mark_table(Query *parse, Index rti, RangeTblEntry *rte, List *clauses)
{
	SystemColumnsContext syscols;
	Relation	table;
	Oid			indexoid = InvalidOid;

	if (rte->rtekind != RTE_RELATION ||
		rte->relkind != RELKIND_PARTITIONED_TABLE || !rte->inh ||
		rte->tablesample != NULL ||
		!lookup_in_jointree((Node *) parse->jointree, rti))
		return InvalidOid;
	syscols.rti = rti;
	syscols.sublevels_up = 0;
	if (query_tree_walker(parse, lookup_system_column_walker,
						  (void *) &syscols, 0))
		return InvalidOid;
	/* locked by the rewriter, or by the plan cache before replanning */
	table = table_open(rte->relid, NoLock);
	indexoid = lookup_find_index(table, rti, clauses,
								 rte->securityQuals != NIL, NULL);
	table_close(table, NoLock);
	return indexoid;
}

static LookupMark *
lookup_mark_add(List **marks, Index rti, Oid indexoid)
{
	LookupMark *mark = palloc0(sizeof(LookupMark));

	mark->rti = rti;
	mark->indexoid = indexoid;
	*marks = lappend(*marks, mark);
	return mark;
}

/*
 * The tables of the query that the lookup path can read, as LookupMarks.
 * The caller has checked that the query fits (lookup_query_fits).
 */
static List *
lookup_mark_query(Query *parse)
{
	List	   *marks = NIL;
	List	   *clauses;
	Index		rti = 0;
	ListCell   *lc;

	clauses = lookup_unconditional_quals((Node *) parse->jointree, NIL);
	if (clauses == NIL)
		return NIL;
	foreach(lc, parse->rtable)
	{
		Oid			indexoid;

		rti++;
		indexoid = lookup_mark_table(parse, rti, lfirst(lc), clauses);
		if (OidIsValid(indexoid))
			(void) lookup_mark_add(&marks, rti, indexoid);
	}
	return marks;
}

/*
 * An UPDATE or DELETE of a partitioned table whose WHERE binds the key of
 * a gunique index to one value per column: plan it for the key's
 * partition (keyprune.c), when the values are known now.  Not with
 * row-level security (a plan that shows whether a key exists would tell
 * what the policy hides), nor in a serializable transaction (a scan of
 * every partition leaves predicate locks in each), nor with a
 * data-modifying WITH, nor when the partition key is bound too
 * (PostgreSQL prunes then).  NULL if not.
 */
static GuniqueKeyPrune *
lookup_prune_query(Query *parse, ParamListInfo boundParams, Oid forced_table,
				   Oid forced)
{
	Index		rti = parse->resultRelation;
	RangeTblEntry *rte;
	List	   *clauses;
	Relation	table;
	LookupBinding binding;
	Oid			indexoid = InvalidOid;
	GuniqueKeyPrune *prune = NULL;

	if ((parse->commandType != CMD_UPDATE &&
		 parse->commandType != CMD_DELETE) ||
		rti == 0 || parse->hasModifyingCTE || parse->jointree == NULL ||
		IsolationIsSerializable() || RecoveryInProgress() ||
		!gunique_keyprune_allowed())
		return NULL;
	rte = rt_fetch(rti, parse->rtable);
	if (rte->rtekind != RTE_RELATION ||
		rte->relkind != RELKIND_PARTITIONED_TABLE || !rte->inh ||
		rte->securityQuals != NIL)
		return NULL;
	clauses = lookup_flatten_and(parse->jointree->quals, NIL);
	if (clauses == NIL)
		return NULL;
	/* locked by the rewriter, or by the plan cache before replanning */
	table = table_open(rte->relid, NoLock);
	if (!lookup_partition_key_bound(table, rti, clauses))
		indexoid = lookup_find_index(table, rti, clauses, false, &binding);
	if (OidIsValid(indexoid) && !binding.array)
	{
		List	   *values = NIL;

		for (int i = 0; i < binding.nkeys; i++)
			values = lappend(values, binding.values[i]);
		prune = gunique_keyprune_begin(table, rti, indexoid, values,
									   boundParams,
									   forced_table == rte->relid ?
									   forced : InvalidOid);
	}
	table_close(table, NoLock);
	return prune;
}

/*
 * Does a subquery of the query (a view or a subquery in FROM, a WITH
 * query, a sublink: EXISTS, IN (SELECT ...)) read a partitioned table
 * with a gunique index?  The planner may pull it up into the query
 * (pull_up_subqueries, pull_up_sublinks), where the relation hook can
 * still take it out of expansion (gunique_lookup_get_relation_info).
 * *depth is the query level of "node"'s query, 1 for the query planned.
 */
static bool
lookup_nests_walker(Node *node, int *depth)
{
	if (node == NULL)
		return false;
	if (IsA(node, Query))
	{
		bool		result;

		(*depth)++;
		result = query_tree_walker((Query *) node, lookup_nests_walker,
								   (void *) depth, QTW_EXAMINE_RTES_BEFORE);
		(*depth)--;
		return result;
	}
	if (IsA(node, RangeTblEntry))
	{
		RangeTblEntry *rte = (RangeTblEntry *) node;
		Relation	table;
		List	   *indexes;
		bool		found = false;
		ListCell   *lc;

		if (*depth < 2 || rte->rtekind != RTE_RELATION ||
			rte->relkind != RELKIND_PARTITIONED_TABLE || !rte->inh)
			return false;
		/* locked by the rewriter, or by the plan cache */
		table = table_open(rte->relid, NoLock);
		indexes = RelationGetIndexList(table);
		foreach(lc, indexes)
			found |= gunique_is_gunique_index(lfirst_oid(lc));
		list_free(indexes);
		table_close(table, NoLock);
		return found;
	}
	return expression_tree_walker(node, lookup_nests_walker, (void *) depth);
}

static bool
lookup_query_nests(Query *parse)
{
	int			depth = 0;

	return lookup_nests_walker((Node *) parse, &depth);
}

/*
 * Call the next planner with "this" as the planning under way (every call
 * has one: the hooks must never take an outer call's marks or pruning for
 * this one's).
 */
static PlannedStmt *
lookup_call_planner(LookupPlanning *this, Query *parse,
					const char *query_string, int cursorOptions,
					ParamListInfo boundParams)
{
	PlannedStmt *result;

	this->glob = NULL;
	this->outer = planning;
	planning = this;
	PG_TRY();
	{
		result = this->next(parse, query_string, cursorOptions, boundParams);
	}
	PG_FINALLY();
	{
		planning = this->outer;
	}
	PG_END_TRY();
	return result;
}

/* Plan a query again, untouched: a planning with no marks, no pruning. */
static PlannedStmt *
lookup_plan_untouched(Query *parse, const char *query_string,
					  int cursorOptions, ParamListInfo boundParams,
					  planner_hook_type next)
{
	LookupPlanning none;

	none.marks = NIL;
	none.nested = false;
	none.prune = NULL;
	none.next = next;
	return lookup_call_planner(&none, parse, query_string, cursorOptions,
							   boundParams);
}

/*
 * The planner hook's part (hooks.c): take the tables the lookup path can
 * read out of inheritance expansion, then plan through "next" (the
 * previous planner hook or standard_planner).  A table that some root of
 * the planning could not give the lookup path (its clauses, as the
 * planner rewrote them, do not bind the key), or whose paths the planner
 * never asked for, would be read as an empty ONLY table: then plan the
 * query again, untouched, from a copy.  An UPDATE or DELETE by the key is
 * planned for the key's partition (keyprune.c), and its plan given the
 * check, which keeps the copy to plan again from at execution.
 */
PlannedStmt *
gunique_lookup_planner(Query *parse, const char *query_string,
					   int cursorOptions, ParamListInfo boundParams,
					   planner_hook_type next)
{
	LookupPlanning this;
	Query	   *copy = NULL;
	PlannedStmt *result;
	bool		complete = true;
	Oid			forced_table;
	Oid			forced = gunique_keyplan_take_forced(parse, &forced_table);
	Oid			stub_table;
	ParamListInfo params = boundParams;
	ListCell   *lc;

	this.marks = NIL;
	this.nested = false;
	this.prune = NULL;
	this.next = next;
	if (lookup_query_fits(parse))
	{
		if (gunique_enable_lookup)
		{
			this.marks = lookup_mark_query(parse);
			this.nested = lookup_query_nests(parse);
		}
	}
	else
		this.prune = lookup_prune_query(parse, boundParams, forced_table,
										forced);

	/*
	 * A stub does not depend on the parameters' values: it is planned
	 * without them, once, and each later planning of its family, custom
	 * ones too, is a copy of the one kept (src/README 4.8).
	 */
	if (this.prune != NULL &&
		OidIsValid(stub_table = gunique_keyprune_stub_table(this.prune)))
	{
		result = gunique_keyplan_stub(parse, cursorOptions, stub_table);
		if (result != NULL)
		{
			result->queryId = parse->queryId;
			result->stmt_location = parse->stmt_location;
			result->stmt_len = parse->stmt_len;
			return result;
		}
		params = NULL;
	}
	if (this.marks != NIL || this.nested || this.prune != NULL)
		copy = copyObject(parse);
	result = lookup_call_planner(&this, parse, query_string, cursorOptions,
								 params);

	/* marks the relation hook added are in the list too */
	foreach(lc, this.marks)
	{
		LookupMark *mark = (LookupMark *) lfirst(lc);

		complete &= (mark->planned && !mark->failed) || mark->declined;
	}
	if (!complete)
		result = lookup_plan_untouched(copy, query_string, cursorOptions,
									   boundParams, next);
	else if (this.prune != NULL &&
			 !gunique_keyprune_plan(this.prune, result, copy, cursorOptions))
		result = lookup_plan_untouched(copy, query_string, cursorOptions,
									   boundParams, next);
	return result;
}

/* What a btree search for one key costs, in either plan. */
static Cost
lookup_probe_cost(void)
{
	return 2 * random_page_cost + cpu_index_tuple_cost + cpu_tuple_cost;
}

/*
 * Would PostgreSQL's plan of the table cost less than the lookup?  Its
 * plan searches each key in every partition that pruning at planning
 * keeps: PostgreSQL's own pruning (prune_append_rel_partitions) on the
 * clauses of the query that name the table alone, as they will be its
 * restriction clauses, without opening a partition.  The lookup searches
 * each key where its summaries cannot rule it out, usually one partition,
 * after reading a group's filter and some summaries (LOOKUP_FILTER_READS
 * operators' worth).  So PostgreSQL's plan wins only where pruning keeps
 * one partition or none; partitions pruned at execution (parameters of a
 * generic plan, stable functions) are still planned and locked, and are
 * counted.
 */
#define LOOKUP_FILTER_READS 10

static bool
lookup_append_cheaper(PlannerInfo *root, RelOptInfo *rel, List *clauses)
{
	List	   *saved = rel->baserestrictinfo;
	List	   *own = NIL;
	Cost		append_cost;
	Cost		lookup_cost;
	ListCell   *lc;

	if (rel->part_scheme == NULL || rel->nparts <= 0)
		return false;
	foreach(lc, clauses)
	{
		Node	   *clause = (Node *) lfirst(lc);
		Relids		relids = pull_varnos(root, clause);

		if (bms_is_empty(relids) || !bms_equal(relids, rel->relids) ||
			contain_volatile_functions(clause) || contain_subplans(clause) ||
			checkExprHasSubLink(clause))
			continue;
		own = lappend(own, make_simple_restrictinfo(root, (Expr *) clause));
	}
	rel->baserestrictinfo = own;
	append_cost = bms_num_members(prune_append_rel_partitions(rel)) *
		lookup_probe_cost();
	rel->baserestrictinfo = saved;
	lookup_cost = lookup_probe_cost() + LOOKUP_FILTER_READS * cpu_operator_cost;
	return append_cost < lookup_cost;
}

/*
 * The relation hook's part (hooks.c).  A partitioned table of the query
 * being planned, about to be expanded:
 * one the planner hook marked, or one that a subquery read (a view, a
 * subquery in FROM, EXISTS), now pulled up into the query, whose clauses
 * bind a gunique key (marked here).  Unless PostgreSQL's plan costs less
 * (lookup_append_cheaper: the mark is declined), take it out of expansion
 * and forget the partitioning that get_relation_info found for it, which
 * a relation that is not expanded does not have.  PostgreSQL reads
 * rte->inh again only after this (add_other_rels_to_query and later), for
 * a relation of the query being planned.  The same marks follow
 * (gunique_lookup_set_rel_pathlist, and the planner hook's check that
 * every mark got its path).  In the planning of an UPDATE or DELETE by the key, the
 * relations of its query go to keyprune.c instead, which prunes the
 * table's partitions.
 */
void
gunique_lookup_get_relation_info(PlannerInfo *root, Oid relationObjectId,
								 bool inhparent, RelOptInfo *rel)
{
	RangeTblEntry *rte;
	LookupMark *mark = NULL;
	List	   *clauses;
	ListCell   *lc;

	if (planning != NULL && planning->prune != NULL &&
		root->query_level == 1)
	{
		if (planning->glob == NULL)
			planning->glob = root->glob;
		if (root->glob == planning->glob)
			gunique_keyprune_relation(planning->prune, root, rel);
		return;
	}
	if (planning == NULL || (planning->marks == NIL && !planning->nested) ||
		!inhparent || root->query_level != 1 ||
		rel->reloptkind != RELOPT_BASEREL)
		return;
	if (planning->glob == NULL)
		planning->glob = root->glob;
	if (root->glob != planning->glob)
		return;
	rte = planner_rt_fetch(rel->relid, root);
	clauses = lookup_unconditional_quals((Node *) root->parse->jointree, NIL);
	foreach(lc, planning->marks)
		if (((LookupMark *) lfirst(lc))->rti == rel->relid)
			mark = (LookupMark *) lfirst(lc);
	if (mark == NULL && planning->nested)
	{
		Oid			indexoid = InvalidOid;

		if (lookup_query_fits(root->parse))
			indexoid = lookup_mark_table(root->parse, rel->relid, rte,
										 clauses);
		if (!OidIsValid(indexoid))
			return;
		mark = lookup_mark_add(&planning->marks, rel->relid, indexoid);
	}
	if (mark == NULL || mark->declined)
		return;
	if (lookup_append_cheaper(root, rel, clauses))
	{
		mark->declined = true;
		return;
	}
	rte->inh = false;
	rel->part_scheme = NULL;
	rel->nparts = -1;
	rel->boundinfo = NULL;
	rel->partition_qual = NIL;
	rel->partexprs = NULL;
	rel->nullable_partexprs = NULL;
}

/*
 * Rows and cost: one descent of a btree and one heap fetch per key, and a
 * few cache lines of filters; an array of keys counts its elements, or ten
 * if they are not known yet.
 */
static void
lookup_estimate(PlannerInfo *root, RelOptInfo *rel, LookupBinding *binding,
				CustomPath *path)
{
	double		nkeys = 1;

	if (binding->array)
	{
		Node	   *arr = (Node *) binding->values[0];

		nkeys = 10;
		if (IsA(arr, Const) && !((Const *) arr)->constisnull)
		{
			ArrayType  *a = DatumGetArrayTypeP(((Const *) arr)->constvalue);

			nkeys = Max(1, ArrayGetNItems(ARR_NDIM(a), ARR_DIMS(a)));
		}
	}
	set_baserel_size_estimates(root, rel);
	rel->rows = clamp_row_est(nkeys);
	path->path.rows = rel->rows;
	path->path.startup_cost = 0;
	path->path.total_cost = nkeys * (lookup_probe_cost() +
									 rel->baserestrictcost.per_tuple);
}

/*
 * Give a table the planner hook marked the lookup path as its only path.
 * False if its clauses do not bind the key now (the hook saw the query
 * before the planner rewrote it).
 */
static bool
lookup_add_path(PlannerInfo *root, RelOptInfo *rel, RangeTblEntry *rte,
				LookupMark *mark)
{
	Relation	index = index_open(mark->indexoid, NoLock);
	LookupKey	key;
	LookupBinding binding;
	CustomPath *path;
	List	   *values = NIL;
	List	   *bound_clauses = NIL;
	bool		bound;

	lookup_key_make(&key, index, rel->relid);
	index_close(index, NoLock);
	bound = lookup_bind(rel->baserestrictinfo, &key, rel->relid,
						rte->securityQuals != NIL, &binding);
	if (!bound)
		return false;
	for (int i = 0; i < (binding.array ? 1 : key.nkeys); i++)
	{
		values = lappend(values, binding.values[i]);
		if (!binding.cast[i])
			bound_clauses = lappend(bound_clauses, binding.clauses[i]);
	}

	path = makeNode(CustomPath);
	path->path.pathtype = T_CustomScan;
	path->path.parent = rel;
	path->path.pathtarget = rel->reltarget;
	path->path.param_info = NULL;
	path->path.parallel_aware = false;
	path->path.parallel_safe = false;
	path->path.parallel_workers = 0;
	path->path.pathkeys = NIL;
	path->flags = CUSTOMPATH_SUPPORT_BACKWARD_SCAN |
		CUSTOMPATH_SUPPORT_MARK_RESTORE | CUSTOMPATH_SUPPORT_PROJECTION;
	path->custom_paths = NIL;
	path->custom_private = list_make3(list_make2_oid(mark->indexoid,
													 binding.array ? 1 : 0),
									  values, bound_clauses);
	path->methods = &lookup_path_methods;
	lookup_estimate(root, rel, &binding, path);

	rel->pathlist = NIL;
	rel->partial_pathlist = NIL;
	add_path(rel, &path->path);
	return true;
}

/*
 * The path hook's part (hooks.c): a table the planner hook or the relation
 * hook marked, now a relation without children, gets the lookup path as
 * its only path.
 */
void
gunique_lookup_set_rel_pathlist(PlannerInfo *root, RelOptInfo *rel,
								Index rti, RangeTblEntry *rte)
{
	ListCell   *lc;

	if (planning == NULL || planning->marks == NIL)
		return;
	if (planning->glob == NULL)
		planning->glob = root->glob;
	if (root->glob != planning->glob || root->query_level != 1 ||
		rel->reloptkind != RELOPT_BASEREL ||
		rte->rtekind != RTE_RELATION || rte->inh ||
		rte->relkind != RELKIND_PARTITIONED_TABLE)
		return;
	foreach(lc, planning->marks)
	{
		LookupMark *mark = (LookupMark *) lfirst(lc);

		if (mark->rti != rti)
			continue;
		if (lookup_add_path(root, rel, rte, mark))
			mark->planned = true;
		else
			mark->failed = true;
	}
}

/*
 * The plan: every clause but those that bind the key without a cast is a
 * qual (the btree search applies those, with the same operators), and the
 * plan depends on the index, so that its drop or any change to it plans
 * the query again.
 */
static Plan *
lookup_plan_path(PlannerInfo *root, RelOptInfo *rel, CustomPath *best_path,
				 List *tlist, List *clauses, List *custom_plans)
{
	CustomScan *cscan = makeNode(CustomScan);
	List	   *private = (List *) linitial(best_path->custom_private);
	List	   *bound_clauses = (List *) lthird(best_path->custom_private);
	List	   *quals = NIL;
	ListCell   *lc;

	cscan->scan.plan.targetlist = tlist;

	foreach(lc, clauses)
	{
		RestrictInfo *rinfo = lfirst_node(RestrictInfo, lc);

		if (!list_member_ptr(bound_clauses, rinfo->clause))
			quals = lappend(quals, rinfo);
	}
	cscan->scan.plan.qual = extract_actual_clauses(quals, false);
	cscan->scan.scanrelid = rel->relid;
	cscan->flags = best_path->flags;
	cscan->custom_plans = NIL;
	cscan->custom_exprs = (List *) lsecond(best_path->custom_private);
	cscan->custom_private = list_copy(private);
	cscan->custom_scan_tlist = NIL;
	cscan->custom_relids = bms_make_singleton(rel->relid);
	cscan->methods = &lookup_scan_methods;
	root->glob->relationOids =
		lappend_oid(root->glob->relationOids,
					list_nth_oid(private, LOOKUP_PRIVATE_INDEX));
	return &cscan->scan.plan;
}

/* Called once, at load (hooks.c). */
void
gunique_lookup_register_scan(void)
{
	RegisterCustomScanMethods(&lookup_scan_methods);
}

/*-------------------------------------------------------------------------
 *
 * passnode.c
 *	  Put a CustomScan between a finished plan's ModifyTable and the plan
 *	  it reads.
 *
 * The node is added to a PlannedStmt the planner has finished (after
 * set_plan_references), so it is made in its final form: no scan
 * relation, its target list the child's columns in order, by reference
 * to its outer plan (EXPLAIN VERBOSE shows them through the child), with
 * their names, which ModifyTable looks junk columns up by (ctid, tableoid).
 * Its provider returns the child's slots; it may drop rows, never change
 * them.  Used by onconflict.c (the conflict check of ON CONFLICT DO
 * NOTHING) and keyprune.c (the key check of UPDATE and DELETE by the key).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "executor/executor.h"
#include "nodes/makefuncs.h"

#include "read/passnode.h"

/* The highest plan node ID in a plan tree, or -1. */
static int
passnode_max_id(Plan *plan)
{
	List	   *children = NIL;
	int			max;
	ListCell   *lc;

	if (plan == NULL)
		return -1;
	max = Max(plan->plan_node_id, Max(passnode_max_id(plan->lefttree),
									  passnode_max_id(plan->righttree)));
	if (IsA(plan, Append))
		children = ((Append *) plan)->appendplans;
	else if (IsA(plan, MergeAppend))
		children = ((MergeAppend *) plan)->mergeplans;
	else if (IsA(plan, BitmapAnd))
		children = ((BitmapAnd *) plan)->bitmapplans;
	else if (IsA(plan, BitmapOr))
		children = ((BitmapOr *) plan)->bitmapplans;
	else if (IsA(plan, CustomScan))
		children = ((CustomScan *) plan)->custom_plans;
	else if (IsA(plan, SubqueryScan))
		max = Max(max, passnode_max_id(((SubqueryScan *) plan)->subplan));
	foreach(lc, children)
		max = Max(max, passnode_max_id((Plan *) lfirst(lc)));
	return max;
}

/* A plan node ID no node of the statement has. */
static int
passnode_new_id(PlannedStmt *stmt)
{
	int			max = passnode_max_id(stmt->planTree);
	ListCell   *lc;

	foreach(lc, stmt->subplans)
		max = Max(max, passnode_max_id((Plan *) lfirst(lc)));
	return max + 1;
}

/*
 * Put a node of "methods" between ModifyTable "mt" of the statement and
 * its child, and return it, for the caller to fill custom_private and
 * custom_exprs.
 */
CustomScan *
gunique_passnode_insert(PlannedStmt *stmt, ModifyTable *mt,
						const CustomScanMethods *methods)
{
	Plan	   *child = outerPlan(mt);
	CustomScan *cscan = makeNode(CustomScan);
	ListCell   *lc;

	cscan->scan.plan.startup_cost = child->startup_cost;
	cscan->scan.plan.total_cost = child->total_cost;
	cscan->scan.plan.plan_rows = child->plan_rows;
	cscan->scan.plan.plan_width = child->plan_width;
	cscan->scan.plan.extParam = bms_copy(child->extParam);
	cscan->scan.plan.allParam = bms_copy(child->allParam);
	cscan->scan.plan.plan_node_id = passnode_new_id(stmt);

	/*
	 * The same columns, dropped ones (of an INSERT's rows) still null
	 * constants, which the executor checks for.
	 */
	foreach(lc, child->targetlist)
	{
		TargetEntry *tle = (TargetEntry *) lfirst(lc);
		TargetEntry *copy = flatCopyTargetEntry(tle);

		if (!IsA(tle->expr, Const))
			copy->expr = (Expr *) makeVarFromTargetEntry(OUTER_VAR, tle);
		cscan->scan.plan.targetlist = lappend(cscan->scan.plan.targetlist,
											  copy);
	}
	cscan->scan.plan.lefttree = child;
	cscan->scan.scanrelid = 0;
	cscan->methods = methods;
	outerPlan(mt) = (Plan *) cscan;
	return cscan;
}

/*
 * Start the node's child.  The node returns the child's slots, so it
 * declares the child's slot type as its own (as nodeLimit.c does), not the
 * virtual slots ExecInitCustomScan declared: a parent compiles its reads
 * of the node's rows for that type.
 */
void
gunique_passnode_begin(CustomScanState *node, EState *estate, int eflags)
{
	PlanState  *child = ExecInitNode(outerPlan(node->ss.ps.plan), estate,
									 eflags);

	outerPlanState(node) = child;
	node->ss.ps.resultops = ExecGetResultSlotOps(child,
												 &node->ss.ps.resultopsfixed);
	node->ss.ps.resultopsset = true;
}

/*-------------------------------------------------------------------------
 *
 * onconflict.c
 *	  INSERT ... ON CONFLICT on tables with gunique indexes.
 *
 * Before PostgreSQL 18, the executor prepares every unique index of the
 * target table for speculative insertion with BuildSpeculativeIndexInfo,
 * which raises an internal error for any index that is not btree.  gunique
 * refuses such statements as the executor starts, with an error that says
 * why.  Parse analysis would be too early: it sees neither the table behind
 * an auto-updatable view nor the actions of rules, which only the rewriter
 * adds.  The plan holds them all: a ModifyTable with an ON CONFLICT action,
 * at the top of the statement's plan or of one of its subplans (a
 * data-modifying WITH query is one; a rule's action is a statement of its
 * own).
 * Checking every execution also covers a cached plan made before the index
 * was created on a partition below the target table, which need not
 * invalidate it.
 *
 * From 18 on, the executor asks the access method for its equality
 * strategy, and ON CONFLICT works: conflicts within the target partition
 * are arbitrated as usual, and a conflict with another partition is a
 * unique violation raised by the probe (see probe.c), because the
 * executor's conflict pre-check only looks at the target partition.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/index.h"
#include "catalog/pg_inherits.h"
#include "executor/executor.h"
#include "nodes/plannodes.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"

#include "compat.h"
#include "onconflict.h"
#include "tree.h"

#ifdef GUNIQUE_NO_SPECULATIVE_INSERT

static ExecutorStart_hook_type prev_ExecutorStart = NULL;

/* A gunique index on the table or any partition under it, or InvalidOid. */
static Oid
find_gunique_index(Oid tableoid)
{
	List	   *members = find_all_inheritors(tableoid, NoLock, NULL);
	ListCell   *lc;

	foreach(lc, members)
	{
		List	   *indexes = gunique_table_indexes(lfirst_oid(lc));

		if (indexes != NIL)
			return linitial_oid(indexes);
	}
	return InvalidOid;
}

/*
 * Refuse a plan node that would insert with ON CONFLICT into a table with a
 * gunique index.  An INSERT has one result relation, locked by now.
 */
static void
check_modify_table(PlannedStmt *pstmt, Plan *plan)
{
	ModifyTable *mt = (ModifyTable *) plan;
	ListCell   *lc;

	if (plan == NULL || !IsA(plan, ModifyTable) ||
		mt->onConflictAction == ONCONFLICT_NONE)
		return;
	foreach(lc, mt->resultRelations)
	{
		Oid			tableoid = rt_fetch(lfirst_int(lc), pstmt->rtable)->relid;
		Oid			indexoid = find_gunique_index(tableoid);

		if (OidIsValid(indexoid))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("INSERT ... ON CONFLICT is not supported on a table with a gunique index before PostgreSQL 18"),
					 errdetail("Table \"%s\" has gunique index \"%s\"; this server can only arbitrate ON CONFLICT with btree unique indexes.",
							   get_rel_name(IndexGetRelation(indexoid, false)),
							   get_rel_name(indexoid)),
					 errhint("Check for the key first, or catch unique_violation (SQLSTATE 23505) in a subtransaction.")));
	}
}

/*
 * The planner puts a ModifyTable only at the top of the plan of the query
 * it belongs to: the statement's, or a subplan's.
 */
static void
gunique_ExecutorStart(QueryDesc *queryDesc, int eflags)
{
	PlannedStmt *pstmt = queryDesc->plannedstmt;
	ListCell   *lc;

	if (pstmt->commandType != CMD_SELECT || pstmt->hasModifyingCTE)
	{
		check_modify_table(pstmt, pstmt->planTree);
		foreach(lc, pstmt->subplans)
			check_modify_table(pstmt, (Plan *) lfirst(lc));
	}

	if (prev_ExecutorStart)
		prev_ExecutorStart(queryDesc, eflags);
	else
		standard_ExecutorStart(queryDesc, eflags);
}

void
gunique_onconflict_init(void)
{
	prev_ExecutorStart = ExecutorStart_hook;
	ExecutorStart_hook = gunique_ExecutorStart;
}

#else

void
gunique_onconflict_init(void)
{
}

#endif

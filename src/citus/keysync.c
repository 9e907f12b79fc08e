/*-------------------------------------------------------------------------
 *
 * keysync.c
 *	  INSERT, UPDATE and DELETE on a distributed table with a global key:
 *	  the statement returns each changed row's keys to the node that runs
 *	  it, and a CustomScan on top writes them to the key tables before the
 *	  statement ends.
 *
 * The planner hook adds the key columns (old and new) and the distribution
 * column to the statement's RETURNING list, lets Citus plan it, and puts
 * the "gunique keys" CustomScan above Citus's plan.  That node reads every
 * row Citus returns, keeps the user's RETURNING columns to hand on, removes
 * the old keys from the key tables and adds the new ones (globalkey.c), all
 * in the transaction that wrote the rows.  src/citus/README, "Writes",
 * gives the order and why it is exact.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/tstoreReceiver.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/nodeFuncs.h"
#include "parser/parsetree.h"
#include "utils/datum.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/tuplestore.h"

#include "compat.h"
#include "citus/globalkey.h"
#include "citus/keyroute.h"
#include "citus/keysync.h"

#ifdef GUNIQUE_EXPLAIN_HEADERS
#include "commands/explain_format.h"
#endif

typedef struct KeySyncState
{
	CustomScanState css;
	CmdType		cmd;
	int			nuser;			/* the user's RETURNING columns */
	List	   *gks;			/* GuniqueGlobalKey *, in plan order */
	Plan	   *child_plan;		/* Citus's plan of the statement */
	Tuplestorestate *rows;		/* the rows it returned */
	TupleTableSlot *stored;
	bool		synced;
} KeySyncState;

static Node *keysync_create_state(CustomScan *cscan);
static void run_statement(KeySyncState *state);
static void keysync_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *keysync_exec(CustomScanState *node);
static void keysync_end(CustomScanState *node);
static void keysync_rescan(CustomScanState *node);
static void keysync_explain(CustomScanState *node, List *ancestors,
							ExplainState *es);

static const CustomScanMethods keysync_plan_methods = {
	.CustomName = "gunique keys",
	.CreateCustomScanState = keysync_create_state,
};

static const CustomExecMethods keysync_exec_methods = {
	.CustomName = "gunique keys",
	.BeginCustomScan = keysync_begin,
	.ExecCustomScan = keysync_exec,
	.EndCustomScan = keysync_end,
	.ReScanCustomScan = keysync_rescan,
	.ExplainCustomScan = keysync_explain,
};

void
gunique_citus_register_scan(void)
{
	RegisterCustomScanMethods(&keysync_plan_methods);
}

static Var *
column_var(Relation rel, int varno, AttrNumber attno)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attno - 1);

	return makeVar(varno, attno, att->atttypid, att->atttypmod,
				   att->attcollation, 0);
}

/*
 * The columns a global key adds: the old key (UPDATE, DELETE), the new key
 * (INSERT, UPDATE), then the distribution value.
 */
static List *
add_key_columns(List *returning, CmdType cmd, Relation rel, int varno,
				GuniqueGlobalKey *gk)
{
	int			resno = list_length(returning);

	if (cmd == CMD_UPDATE || cmd == CMD_DELETE)
		for (int i = 0; i < gk->nkeys; i++)
		{
			Var		   *v = column_var(rel, varno, gk->keyattno[i]);

			if (cmd == CMD_UPDATE)
				GUNIQUE_VAR_RETURNING_OLD(v);
			returning = lappend(returning,
								makeTargetEntry((Expr *) v, ++resno,
												pstrdup("gunique_old_key"), false));
		}
	if (cmd == CMD_UPDATE || cmd == CMD_INSERT)
		for (int i = 0; i < gk->nkeys; i++)
			returning = lappend(returning,
								makeTargetEntry((Expr *) column_var(rel, varno, gk->keyattno[i]),
												++resno, pstrdup("gunique_new_key"), false));
	returning = lappend(returning,
						makeTargetEntry((Expr *) column_var(rel, varno, gk->distattno),
										++resno, pstrdup("gunique_dist"), false));
	return returning;
}

/* Whether an UPDATE sets a column of a global key. */
static bool
update_sets_key(Query *parse, List *gks)
{
	ListCell   *lc;

	foreach(lc, parse->targetList)
	{
		TargetEntry *tle = lfirst(lc);
		ListCell   *lg;

		if (tle->resjunk)
			continue;
		foreach(lg, gks)
		{
			GuniqueGlobalKey *gk = lfirst(lg);

			for (int i = 0; i < gk->nkeys; i++)
				if (gk->keyattno[i] == tle->resno)
					return true;
		}
	}
	return false;
}

/* Puts the "gunique keys" node above the plan of an augmented statement. */
static void
wrap_plan(PlannedStmt *result, List *returning, int nuser, CmdType cmd,
		  Relation rel, List *gks)
{
	CustomScan *cs = makeNode(CustomScan);
	Plan	   *child = result->planTree;
	List	   *indexes = NIL;
	ListCell   *lc;

	if (list_length(child->targetlist) != list_length(returning))
		elog(ERROR, "the plan of a statement on a table with a global key returns %d columns, not %d",
			 list_length(child->targetlist), list_length(returning));

	for (int i = 0; i < nuser; i++)
	{
		TargetEntry *tle = list_nth(returning, i);
		Var		   *v = makeVar(INDEX_VAR, i + 1, exprType((Node *) tle->expr),
								exprTypmod((Node *) tle->expr),
								exprCollation((Node *) tle->expr), 0);

		cs->scan.plan.targetlist =
			lappend(cs->scan.plan.targetlist,
					makeTargetEntry((Expr *) v, i + 1, tle->resname, false));
	}
	foreach(lc, gks)
	{
		GuniqueGlobalKey *gk = lfirst(lc);

		indexes = lappend_oid(indexes, gk->indexoid);
		result->relationOids = lappend_oid(result->relationOids, gk->keytable);
	}
	cs->custom_scan_tlist = returning;
	cs->custom_plans = list_make1(child);
	cs->custom_private = list_make3(makeInteger((int) cmd), makeInteger(nuser),
									list_make2(list_make1_oid(RelationGetRelid(rel)),
											   indexes));
	cs->methods = &keysync_plan_methods;
	cs->scan.scanrelid = 0;
	cs->scan.plan.startup_cost = child->startup_cost;
	cs->scan.plan.total_cost = child->total_cost;
	cs->scan.plan.plan_rows = child->plan_rows;
	cs->scan.plan.plan_width = child->plan_width;
	result->planTree = (Plan *) cs;
	result->hasReturning = (nuser > 0);
}

/*
 * INSERT, UPDATE or DELETE on a relation with global keys: planned with the
 * keys in RETURNING, under the "gunique keys" node.  An UPDATE that sets no
 * key column changes no key (Citus refuses to change the distribution
 * value) and is planned as it is.
 */
static PlannedStmt *
plan_modification(Query *parse, const char *query_string, int cursorOptions,
				  ParamListInfo boundParams, planner_hook_type next,
				  Relation rel, List *gks)
{
	CmdType		cmd = parse->commandType;
	int			nuser = list_length(parse->returningList);
	List	   *returning;
	PlannedStmt *result;
	ListCell   *lc;

	if (parse->onConflict != NULL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("INSERT ... ON CONFLICT is not supported on distributed table \"%s\"",
						RelationGetRelationName(rel)),
				 errdetail("The table has a global gunique key, which no conflict arbiter covers across shards."),
				 errhint("Insert the rows with a plain INSERT, which raises a unique violation for a key that exists.")));
	if (cmd == CMD_UPDATE && !update_sets_key(parse, gks))
		return next(parse, query_string, cursorOptions, boundParams);
#ifndef GUNIQUE_HAS_RETURNING_OLD
	if (cmd == CMD_UPDATE)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("UPDATE of a global gunique key column of distributed table \"%s\" requires PostgreSQL 18",
						RelationGetRelationName(rel)),
				 errdetail("The key table is kept from the rows' old and new keys, and before PostgreSQL 18 an UPDATE cannot return a row's old values."),
				 errhint("Delete the row and insert it with its new key.")));
#endif

	/*
	 * Citus sends the statement to the workers as text, where an old value
	 * is written under the name the statement gives old rows: one the
	 * statement may not have given.
	 */
	if (cmd == CMD_UPDATE)
		GUNIQUE_NAME_RETURNING_OLD(parse);
	returning = parse->returningList;
	foreach(lc, gks)
		returning = add_key_columns(returning, cmd, rel, parse->resultRelation,
									lfirst(lc));
	parse->returningList = returning;
	returning = copyObject(returning);
	result = next(parse, query_string, cursorOptions, boundParams);
	wrap_plan(result, returning, nuser, cmd, rel, gks);
	return result;
}

/*
 * The planner's part: lookups by a global key are routed (keyroute.c), and
 * statements that modify a relation with global keys are kept in sync with
 * them; everything else goes to "next" untouched.
 * Called first, before gunique's other planning.
 */
PlannedStmt *
gunique_citus_planner(Query *parse, const char *query_string,
					  int cursorOptions, ParamListInfo boundParams,
					  planner_hook_type next)
{
	PlannedStmt *result;
	Relation	rel;
	List	   *gks;
	List	   *routes;

	if (!gunique_citus_present() || parse->commandType == CMD_UTILITY)
		return next(parse, query_string, cursorOptions, boundParams);
	routes = gunique_citus_route(parse, cursorOptions, boundParams);
	if (parse->resultRelation == 0 ||
		(parse->commandType != CMD_INSERT && parse->commandType != CMD_UPDATE &&
		 parse->commandType != CMD_DELETE && parse->commandType != CMD_MERGE))
		result = next(parse, query_string, cursorOptions, boundParams);
	else
	{
		rel = relation_open(rt_fetch(parse->resultRelation, parse->rtable)->relid,
							NoLock);
		gks = gunique_citus_global_keys(rel);
		if (gks == NIL)
			result = next(parse, query_string, cursorOptions, boundParams);
		else if (parse->commandType == CMD_MERGE)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("MERGE is not supported on distributed table \"%s\"",
							RelationGetRelationName(rel)),
					 errdetail("The table has a global gunique key, and MERGE does not return the rows it changes before PostgreSQL 19."),
					 errhint("Use INSERT, UPDATE and DELETE.")));
		else
			result = plan_modification(parse, query_string, cursorOptions,
									   boundParams, next, rel, gks);
		relation_close(rel, NoLock);
	}
	if (routes != NIL)
		gunique_citus_route_plan(result, routes);
	return result;
}

static Node *
keysync_create_state(CustomScan *cscan)
{
	KeySyncState *state = palloc0(sizeof(KeySyncState));

	NodeSetTag(state, T_CustomScanState);
	state->css.methods = &keysync_exec_methods;
	return (Node *) state;
}

static void
keysync_begin(CustomScanState *node, EState *estate, int eflags)
{
	KeySyncState *state = (KeySyncState *) node;
	CustomScan *cs = (CustomScan *) node->ss.ps.plan;
	List	   *oids = lthird(cs->custom_private);
	ListCell   *lc;

	state->cmd = (CmdType) intVal(linitial(cs->custom_private));
	state->nuser = intVal(lsecond(cs->custom_private));
	state->child_plan = linitial(cs->custom_plans);
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		node->custom_ps = list_make1(ExecInitNode(state->child_plan, estate,
												  eflags));

	/* The global keys again, in the plan's order (the plan is still valid). */
	foreach(lc, (List *) lsecond(oids))
		state->gks = lappend(state->gks,
							 gunique_citus_planned_key(linitial_oid(linitial(oids)),
													   lfirst_oid(lc)));

	state->rows = tuplestore_begin_heap(false, false, work_mem);
	state->stored = ExecInitExtraTupleSlot(estate,
										   ExecTypeFromTL(state->child_plan->targetlist),
										   &TTSOpsMinimalTuple);
}

/*
 * Runs Citus's plan of the statement as a statement of its own, inside
 * this one, into the tuplestore.  Not as a child node: Citus writes a
 * single shard outside a remote transaction block unless it sees a
 * statement nested in another, with citus.function_opens_transaction_block
 * on (set here, whatever the session says), and the row must be written in
 * the transaction that writes its key.
 */
static void
run_statement(KeySyncState *state)
{
	EState	   *estate = state->css.ss.ps.state;
	PlannedStmt *inner = makeNode(PlannedStmt);
	DestReceiver *dest = CreateDestReceiver(DestTuplestore);
	QueryDesc  *qd;
	int			nest;

	memcpy(inner, estate->es_plannedstmt, sizeof(PlannedStmt));
	inner->planTree = state->child_plan;
	inner->hasReturning = true;
	SetTuplestoreDestReceiverParams(dest, state->rows, CurrentMemoryContext,
									false, NULL, NULL);
	qd = CreateQueryDesc(inner, estate->es_sourceText, GetActiveSnapshot(),
						 InvalidSnapshot, dest, estate->es_param_list_info,
						 estate->es_queryEnv, 0);
	nest = NewGUCNestLevel();
	(void) set_config_option("citus.function_opens_transaction_block", "on",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	ExecutorStart(qd, 0);
	gunique_executor_run(qd);
	ExecutorFinish(qd);
	AtEOXact_GUC(true, nest);
	estate->es_processed = qd->estate->es_processed;
	ExecutorEnd(qd);
	FreeQueryDesc(qd);
	dest->rDestroy(dest);
}

/* Whether a row's key columns starting at "at" hold no NULL. */
static bool
key_present(TupleTableSlot *slot, int at, int nkeys)
{
	for (int i = 0; i < nkeys; i++)
		if (slot->tts_isnull[at + i])
			return false;
	return true;
}

static bool
same_key(GuniqueGlobalKey *gk, TupleTableSlot *slot, int old_at, int new_at)
{
	for (int i = 0; i < gk->nkeys; i++)
	{
		int16		len;
		bool		byval;

		get_typlenbyval(gk->keytype[i], &len, &byval);
		if (!datumIsEqual(slot->tts_values[old_at + i],
						  slot->tts_values[new_at + i], byval, len))
			return false;
	}
	return true;
}

/*
 * Reads every row the statement changed, then removes the old keys of all
 * global keys and adds the new ones: removals first, so that one statement
 * may hand a key from one row to another.
 */
static void
keysync_run(KeySyncState *state)
{
	int			ngks = list_length(state->gks);
	GuniqueKeyBatch **removed = palloc(sizeof(GuniqueKeyBatch *) * ngks);
	GuniqueKeyBatch **added = palloc(sizeof(GuniqueKeyBatch *) * ngks);
	TupleTableSlot *slot;
	int			j;

	for (j = 0; j < ngks; j++)
	{
		removed[j] = gunique_keybatch_new(list_nth(state->gks, j));
		added[j] = gunique_keybatch_new(list_nth(state->gks, j));
	}
	run_statement(state);
	slot = state->stored;
	while (tuplestore_gettupleslot(state->rows, true, false, slot))
	{
		int			at = state->nuser;

		slot_getallattrs(slot);
		for (j = 0; j < ngks; j++)
		{
			GuniqueGlobalKey *gk = list_nth(state->gks, j);
			int			old_at = -1;
			int			new_at = -1;
			int			dist_at;

			if (state->cmd != CMD_INSERT)
			{
				old_at = at;
				at += gk->nkeys;
			}
			if (state->cmd != CMD_DELETE)
			{
				new_at = at;
				at += gk->nkeys;
			}
			dist_at = at++;
			if (old_at >= 0 && new_at >= 0 &&
				key_present(slot, old_at, gk->nkeys) &&
				key_present(slot, new_at, gk->nkeys) &&
				same_key(gk, slot, old_at, new_at))
				continue;
			if (old_at >= 0 && key_present(slot, old_at, gk->nkeys))
				gunique_keybatch_add(gk, removed[j], &slot->tts_values[old_at],
									 slot->tts_values[dist_at]);
			if (new_at >= 0 && key_present(slot, new_at, gk->nkeys))
				gunique_keybatch_add(gk, added[j], &slot->tts_values[new_at],
									 slot->tts_values[dist_at]);
		}
	}
	tuplestore_rescan(state->rows);
	for (j = 0; j < ngks; j++)
		gunique_keys_delete(list_nth(state->gks, j), removed[j]);
	for (j = 0; j < ngks; j++)
		gunique_keys_insert(list_nth(state->gks, j), added[j]);
}

static TupleTableSlot *
keysync_exec(CustomScanState *node)
{
	KeySyncState *state = (KeySyncState *) node;
	TupleTableSlot *result = node->ss.ps.ps_ResultTupleSlot;

	if (!state->synced)
	{
		keysync_run(state);
		state->synced = true;
	}
	if (state->nuser == 0 ||
		!tuplestore_gettupleslot(state->rows, true, false, state->stored))
		return NULL;
	slot_getallattrs(state->stored);
	ExecClearTuple(result);
	for (int i = 0; i < state->nuser; i++)
	{
		result->tts_values[i] = state->stored->tts_values[i];
		result->tts_isnull[i] = state->stored->tts_isnull[i];
	}
	return ExecStoreVirtualTuple(result);
}

static void
keysync_end(CustomScanState *node)
{
	KeySyncState *state = (KeySyncState *) node;

	if (node->custom_ps != NIL)
		ExecEndNode(linitial(node->custom_ps));
	tuplestore_end(state->rows);
}

static void
keysync_rescan(CustomScanState *node)
{
	elog(ERROR, "a statement that keeps a global key cannot be rescanned");
}

static void
keysync_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	KeySyncState *state = (KeySyncState *) node;
	StringInfoData buf;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, state->gks)
	{
		GuniqueGlobalKey *gk = lfirst(lc);

		appendStringInfo(&buf, "%s%s", buf.len > 0 ? ", " : "",
						 get_rel_name(gk->topindex));
	}
	ExplainPropertyText("Global Keys", buf.data, es);
}

/*-------------------------------------------------------------------------
 *
 * ddl.c
 *	  DDL handling for gunique indexes.
 *
 * DefineIndex() refuses a UNIQUE index on a partitioned table unless the
 * index covers the partition key, and no access method callback runs before
 * that check.  A ProcessUtility hook is therefore the only place where
 * gunique can take over such statements, and the hook is installed only when
 * the library is preloaded (see gunique.c).
 *
 * Without the preload an event trigger created by the extension stands
 * guard instead: it cannot do the work, but it turns PostgreSQL's
 * partition-key error into one that says what is missing.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/namespace.h"
#include "commands/event_trigger.h"
#include "nodes/parsenodes.h"
#include "storage/lmgr.h"
#include "tcop/utility.h"
#include "utils/lsyscache.h"

#include "compat.h"
#include "ddl.h"
#include "gunique.h"

PG_FUNCTION_INFO_V1(gunique_ddl_guard);

static ProcessUtility_hook_type prev_ProcessUtility = NULL;

static void gunique_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
								   bool readOnlyTree,
								   ProcessUtilityContext context,
								   ParamListInfo params,
								   QueryEnvironment *queryEnv,
								   DestReceiver *dest, QueryCompletion *qc);

void
gunique_ddl_init(void)
{
	prev_ProcessUtility = ProcessUtility_hook;
	ProcessUtility_hook = gunique_ProcessUtility;
}

static bool
index_stmt_is_gunique(IndexStmt *stmt)
{
	return stmt->accessMethod != NULL &&
		strcmp(stmt->accessMethod, GUNIQUE_AM_NAME) == 0;
}

/*
 * Is the table named by a CREATE INDEX statement partitioned?  The caller
 * passes the lock that DefineIndex itself will take, so the answer cannot
 * change before the statement runs.
 */
static bool
index_stmt_on_partitioned(IndexStmt *stmt, LOCKMODE lockmode)
{
	Oid			relid;

	relid = RangeVarGetRelid(stmt->relation, lockmode, true);
	if (!OidIsValid(relid))
		return false;			/* DefineIndex reports the missing table */
	return get_rel_relkind(relid) == RELKIND_PARTITIONED_TABLE;
}

/*
 * Checks that apply to every CREATE INDEX ... USING gunique, preloaded or
 * not.
 */
static void
check_gunique_index_stmt(IndexStmt *stmt)
{
	if (!stmt->unique)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("access method \"%s\" supports only unique indexes",
						GUNIQUE_AM_NAME),
				 errdetail("A gunique index exists to enforce uniqueness; without UNIQUE it would enforce nothing."),
				 errhint("Use CREATE UNIQUE INDEX, or access method \"btree\" for a non-unique index.")));
}

static void
gunique_index_stmt(IndexStmt *stmt)
{
	LOCKMODE	lockmode = stmt->concurrent ? ShareUpdateExclusiveLock : ShareLock;

	check_gunique_index_stmt(stmt);

	if (index_stmt_on_partitioned(stmt, lockmode))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("gunique indexes on partitioned tables are not supported yet")));
}

static void
gunique_ProcessUtility(PlannedStmt *pstmt, const char *queryString,
					   bool readOnlyTree, ProcessUtilityContext context,
					   ParamListInfo params, QueryEnvironment *queryEnv,
					   DestReceiver *dest, QueryCompletion *qc)
{
	Node	   *parsetree = pstmt->utilityStmt;

	if (IsA(parsetree, IndexStmt) &&
		index_stmt_is_gunique((IndexStmt *) parsetree))
		gunique_index_stmt((IndexStmt *) parsetree);

	if (prev_ProcessUtility)
		prev_ProcessUtility(pstmt, queryString, readOnlyTree, context,
							params, queryEnv, dest, qc);
	else
		standard_ProcessUtility(pstmt, queryString, readOnlyTree, context,
								params, queryEnv, dest, qc);
}

/*
 * Event trigger on ddl_command_start, created by the extension script.
 *
 * When the library is preloaded the utility hook has already handled the
 * statement and this does nothing.  Otherwise it refuses the statements that
 * need the hook, before PostgreSQL reports something misleading.
 */
Datum
gunique_ddl_guard(PG_FUNCTION_ARGS)
{
	EventTriggerData *trigdata;

	if (!CALLED_AS_EVENT_TRIGGER(fcinfo))
		ereport(ERROR,
				(errcode(ERRCODE_E_R_I_E_TRIGGER_PROTOCOL_VIOLATED),
				 errmsg("function \"gunique_ddl_guard\" was not called by the event trigger manager")));

	if (gunique_preloaded)
		PG_RETURN_VOID();

	trigdata = (EventTriggerData *) fcinfo->context;
	if (IsA(trigdata->parsetree, IndexStmt))
	{
		IndexStmt  *stmt = (IndexStmt *) trigdata->parsetree;

		if (index_stmt_is_gunique(stmt))
		{
			check_gunique_index_stmt(stmt);
			if (index_stmt_on_partitioned(stmt, NoLock))
				gunique_report_not_preloaded("create a gunique index on a partitioned table");
		}
	}

	PG_RETURN_VOID();
}

/*-------------------------------------------------------------------------
 *
 * ddl.h
 *	  The DDL that lets gunique indexes live on partitioned tables: what
 *	  the utility and object access hooks (hooks.c) do.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_DDL_H
#define GUNIQUE_DDL_H

#include "catalog/objectaccess.h"
#include "fmgr.h"
#include "tcop/utility.h"
#include "utils/rel.h"

/*
 * The arguments of one ProcessUtility call, for the parts of the utility
 * hook that run the statement in the middle of their own work (ddl.c,
 * citus/citusddl.c).
 */
typedef struct GuniqueUtilityCall
{
	PlannedStmt *pstmt;
	const char *queryString;
	bool		readOnlyTree;
	ProcessUtilityContext context;
	ParamListInfo params;
	QueryEnvironment *queryEnv;
	DestReceiver *dest;
	QueryCompletion *qc;
	ProcessUtility_hook_type next;	/* runs the statement: the previous
									 * hook or standard_ProcessUtility */
} GuniqueUtilityCall;

extern void gunique_utility_run(GuniqueUtilityCall *call);
extern Node *gunique_utility_writable(GuniqueUtilityCall *call);

extern void gunique_ddl_utility(PlannedStmt *pstmt, const char *queryString,
								bool readOnlyTree,
								ProcessUtilityContext context,
								ParamListInfo params,
								QueryEnvironment *queryEnv,
								DestReceiver *dest, QueryCompletion *qc,
								ProcessUtility_hook_type next);
extern void gunique_ddl_object_access(ObjectAccessType access, Oid classId,
									  Oid objectId, int subId, void *arg);
extern bool gunique_ddl_nonunique_build_allowed(void);
extern void gunique_ddl_check_index(Relation index);

extern Datum gunique_ddl_guard(PG_FUNCTION_ARGS);

#endif							/* GUNIQUE_DDL_H */

/*-------------------------------------------------------------------------
 *
 * citusddl.h
 *	  Utility statements on Citus distributed tables with a global key
 *	  (citusddl.c).
 *
 * The design and its invariants: src/citus/README.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_CITUS_CITUSDDL_H
#define GUNIQUE_CITUS_CITUSDDL_H

#include "catalog/objectaccess.h"
#include "tcop/utility.h"

extern bool gunique_citus_utility(PlannedStmt *pstmt, const char *queryString,
								  bool readOnlyTree,
								  ProcessUtilityContext context,
								  ParamListInfo params,
								  QueryEnvironment *queryEnv,
								  DestReceiver *dest, QueryCompletion *qc,
								  ProcessUtility_hook_type next);

extern void gunique_citus_object_access(ObjectAccessType access, Oid classId,
										Oid objectId, int subId);

#endif							/* GUNIQUE_CITUS_CITUSDDL_H */

/*-------------------------------------------------------------------------
 *
 * keysync.h
 *	  Statements on a distributed table with a global key: routed by the
 *	  key, and kept in sync with its key tables (keysync.c).
 *
 * The design and its invariants: src/citus/README.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_CITUS_KEYSYNC_H
#define GUNIQUE_CITUS_KEYSYNC_H

#include "optimizer/planner.h"

extern void gunique_citus_register_scan(void);
extern PlannedStmt *gunique_citus_planner(Query *parse,
										  const char *query_string,
										  int cursorOptions,
										  ParamListInfo boundParams,
										  planner_hook_type next);

#endif							/* GUNIQUE_CITUS_KEYSYNC_H */

/*-------------------------------------------------------------------------
 *
 * keyroute.h
 *	  Lookups by a global key on a Citus distributed table, routed to the
 *	  row's shard through its key table (keyroute.c).
 *
 * The design and its invariants: src/citus/README.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_CITUS_KEYROUTE_H
#define GUNIQUE_CITUS_KEYROUTE_H

#include "nodes/params.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"

extern void gunique_citus_register_route(void);
extern List *gunique_citus_route(Query *parse, int cursorOptions,
								 ParamListInfo boundParams);
extern void gunique_citus_route_plan(PlannedStmt *result, List *routes);

#endif							/* GUNIQUE_CITUS_KEYROUTE_H */

/*-------------------------------------------------------------------------
 *
 * lookupplan.h
 *	  Planning the read path: lookups by a gunique key, and UPDATE and
 *	  DELETE by the key (with keyprune.c).  See src/README, "Lookups".
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_LOOKUPPLAN_H
#define GUNIQUE_LOOKUPPLAN_H

#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"
#include "optimizer/planner.h"

extern bool gunique_enable_lookup;

extern void gunique_lookup_register_scan(void);
extern PlannedStmt *gunique_lookup_planner(Query *parse,
										   const char *query_string,
										   int cursorOptions,
										   ParamListInfo boundParams,
										   planner_hook_type next);
extern void gunique_lookup_get_relation_info(PlannerInfo *root,
											 Oid relationObjectId,
											 bool inhparent,
											 RelOptInfo *rel);
extern void gunique_lookup_set_rel_pathlist(PlannerInfo *root,
											RelOptInfo *rel, Index rti,
											RangeTblEntry *rte);

#endif							/* GUNIQUE_LOOKUPPLAN_H */

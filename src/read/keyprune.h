/*-------------------------------------------------------------------------
 *
 * keyprune.h
 *	  UPDATE and DELETE by a gunique key, planned for the key's partition
 *	  and checked at executor start.  See src/README, "Modifying by the
 *	  key".
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_KEYPRUNE_H
#define GUNIQUE_KEYPRUNE_H

#include "executor/execdesc.h"
#include "nodes/params.h"
#include "nodes/pathnodes.h"
#include "nodes/plannodes.h"
#include "utils/relcache.h"

#define GUNIQUE_KEYCHECK_NAME "GuniqueKeyCheck"

typedef struct GuniqueKeyPrune GuniqueKeyPrune;

extern bool gunique_enable_modify_by_key;

extern void gunique_keyprune_register_scan(void);
extern void gunique_keyprune_executor_start(QueryDesc *queryDesc, int eflags);
extern bool gunique_keyprune_allowed(void);
extern GuniqueKeyPrune *gunique_keyprune_begin(Relation table, Index rti,
											   Oid indexoid, List *values,
											   ParamListInfo boundParams,
											   Oid forced);
extern Oid	gunique_keyprune_stub_table(GuniqueKeyPrune *prune);
extern void gunique_keyprune_relation(GuniqueKeyPrune *prune,
									  PlannerInfo *root, RelOptInfo *rel);
extern bool gunique_keyprune_plan(GuniqueKeyPrune *prune, PlannedStmt *stmt,
								  Query *original, int cursorOptions);

#endif							/* GUNIQUE_KEYPRUNE_H */

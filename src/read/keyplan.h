/*-------------------------------------------------------------------------
 *
 * keyplan.h
 *	  Plans of an UPDATE or DELETE by a gunique key, one per partition,
 *	  kept for the statement's later executions.  See src/README,
 *	  "Modifying by the key".
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_KEYPLAN_H
#define GUNIQUE_KEYPLAN_H

#include "access/xact.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"

extern int	gunique_keyplan_family(Query *query, int cursorOptions);
extern PlannedStmt *gunique_keyplan_stub(Query *query, int cursorOptions,
										 Oid tableoid);
extern void gunique_keyplan_keep_stub(int id, Query *query, int cursorOptions,
									  Oid tableoid, PlannedStmt *stmt);
extern Oid	gunique_keyplan_take_forced(Query *parse, Oid *tableoid);
extern PlannedStmt *gunique_keyplan_get(int id, Query *query,
										int cursorOptions, Oid tableoid,
										Oid partoid, const char *sourceText);
extern void gunique_keyplan_relcache_inval(Oid relid);
extern void gunique_keyplan_syscache_inval(int cacheid, uint32 hashvalue);
extern void gunique_keyplan_executor_end(PlannedStmt *stmt);
extern void gunique_keyplan_subxact_event(SubXactEvent event,
										  SubTransactionId mySubid);
extern void gunique_keyplan_xact_event(XactEvent event);

#endif							/* GUNIQUE_KEYPLAN_H */

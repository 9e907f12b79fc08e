/*-------------------------------------------------------------------------
 *
 * onconflict.h
 *	  INSERT ... ON CONFLICT on tables with gunique indexes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_ONCONFLICT_H
#define GUNIQUE_ONCONFLICT_H

#include "access/xact.h"
#include "executor/execdesc.h"
#include "nodes/plannodes.h"

extern bool gunique_enable_conflict_check;

/* For hooks.c: the custom scan, the hooks' and callbacks' parts. */
extern void gunique_onconflict_register_scan(void);
extern PlannedStmt *gunique_onconflict_plan(PlannedStmt *stmt);
extern void gunique_onconflict_executor_start(QueryDesc *queryDesc,
											  int eflags);
extern void gunique_onconflict_executor_started(QueryDesc *queryDesc,
												int eflags);
extern void gunique_onconflict_xact_event(XactEvent event);
extern void gunique_onconflict_subxact_event(SubXactEvent event,
											 SubTransactionId mySubid,
											 SubTransactionId parentSubid);
extern void gunique_onconflict_relcache_inval(Oid relid);

/* For the insert path. */
extern void gunique_onconflict_release_locks(Oid top,
											 TransactionId xwait);
extern void gunique_onconflict_release_waits(Oid top);
extern bool gunique_onconflict_must_wait(Oid top, uint32 hash,
										 Oid partition);
extern bool gunique_onconflict_holder_waits(Oid top, uint32 hash);
extern void gunique_onconflict_wait(Oid top, uint32 hash);

#endif							/* GUNIQUE_ONCONFLICT_H */

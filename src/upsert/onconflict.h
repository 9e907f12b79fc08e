/*-------------------------------------------------------------------------
 *
 * onconflict.h
 *	  INSERT ... ON CONFLICT on tables with gunique indexes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_ONCONFLICT_H
#define GUNIQUE_ONCONFLICT_H

#include "nodes/plannodes.h"

extern void gunique_onconflict_init(void);
extern PlannedStmt *gunique_onconflict_plan(PlannedStmt *stmt);
extern void gunique_onconflict_release_locks(Oid top,
											 TransactionId xwait);
extern void gunique_onconflict_release_waits(Oid top);
extern bool gunique_onconflict_must_wait(Oid top, uint32 hash,
										 Oid partition);
extern bool gunique_onconflict_holder_waits(Oid top, uint32 hash);
extern void gunique_onconflict_wait(Oid top, uint32 hash);

#endif							/* GUNIQUE_ONCONFLICT_H */

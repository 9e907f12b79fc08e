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
extern void gunique_onconflict_release_locks(Oid top);
extern bool gunique_onconflict_checking(Oid top);

#endif							/* GUNIQUE_ONCONFLICT_H */

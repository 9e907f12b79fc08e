/*-------------------------------------------------------------------------
 *
 * passnode.h
 *	  A CustomScan put, after planning, between a ModifyTable and the plan
 *	  it reads, returning that plan's rows as they are: onconflict.c's
 *	  conflict check and keyprune.c's key check.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_PASSNODE_H
#define GUNIQUE_PASSNODE_H

#include "nodes/execnodes.h"
#include "nodes/extensible.h"
#include "nodes/plannodes.h"

extern CustomScan *gunique_passnode_insert(PlannedStmt *stmt,
										   ModifyTable *mt,
										   const CustomScanMethods *methods);
extern void gunique_passnode_begin(CustomScanState *node, EState *estate,
								   int eflags);

#endif							/* GUNIQUE_PASSNODE_H */

/*-------------------------------------------------------------------------
 *
 * lookup.h
 *	  Lookups by a gunique key: the planner's side (lookupplan.c) and the
 *	  executor's (lookup.c).  See src/README, "Lookups".
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_LOOKUP_H
#define GUNIQUE_LOOKUP_H

#include "nodes/extensible.h"

#define GUNIQUE_LOOKUP_NAME "GuniqueLookup"

/*
 * What the plan hands the executor in custom_private: the gunique index,
 * and whether the one key expression in custom_exprs is an array of keys
 * (key = ANY (...)) rather than one expression per key column.
 */
#define LOOKUP_PRIVATE_INDEX	0
#define LOOKUP_PRIVATE_ARRAY	1

extern bool gunique_enable_lookup;

extern void gunique_lookup_plan_init(void);
extern Node *gunique_lookup_create_state(CustomScan *cscan);

#endif							/* GUNIQUE_LOOKUP_H */

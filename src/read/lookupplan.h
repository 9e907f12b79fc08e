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

extern bool gunique_enable_lookup;

extern void gunique_lookup_plan_init(void);

#endif							/* GUNIQUE_LOOKUPPLAN_H */

/*-------------------------------------------------------------------------
 *
 * leafcheck.h
 *	  gunique_check_leaves(): amcheck's nbtree checks on every leaf of a tree.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_LEAFCHECK_H
#define GUNIQUE_LEAFCHECK_H

#include "fmgr.h"

extern void gunique_leafcheck_relcache_inval(Oid relid);
extern Datum gunique_check_leaves(PG_FUNCTION_ARGS);

#endif							/* GUNIQUE_LEAFCHECK_H */

/*-------------------------------------------------------------------------
 *
 * ddl.h
 *	  The utility hook that lets gunique indexes live on partitioned tables.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_DDL_H
#define GUNIQUE_DDL_H

#include "fmgr.h"
#include "utils/rel.h"

extern void gunique_ddl_init(void);
extern bool gunique_ddl_nonunique_build_allowed(void);
extern void gunique_ddl_check_index(Relation index);

extern Datum gunique_ddl_guard(PG_FUNCTION_ARGS);

#endif							/* GUNIQUE_DDL_H */

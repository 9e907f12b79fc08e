/*-------------------------------------------------------------------------
 *
 * builder.h
 *	  Key filters built in the background, by a worker per database.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_BUILDER_H
#define GUNIQUE_BUILDER_H

#include "utils/rel.h"

extern void gunique_builder_shmem_request(void);
extern void gunique_builder_shmem_startup(void);
extern void gunique_builder_request(Oid group, Oid leafindex);
extern int	gunique_builder_build_group(Relation index, bool force);
extern void gunique_builder_database_gone(Oid dbid);

#endif							/* GUNIQUE_BUILDER_H */

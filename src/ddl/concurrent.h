/*-------------------------------------------------------------------------
 *
 * concurrent.h
 *	  Building a gunique tree without stopping its writers: CREATE UNIQUE
 *	  INDEX CONCURRENTLY on a partitioned table, and REINDEX INDEX
 *	  CONCURRENTLY finishing an invalid tree.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_CONCURRENT_H
#define GUNIQUE_CONCURRENT_H

#include "nodes/pg_list.h"

extern void gunique_concurrent_complete(Oid topindex, bool reindex);
extern void gunique_concurrent_share_lock(Oid relid);
extern void gunique_concurrent_lock_all(List *relids, List *modes);
extern List *gunique_concurrent_lock_tables(Oid table);
extern void gunique_concurrent_rethrow(MemoryContext cxt,
									   const char *topname);

#endif							/* GUNIQUE_CONCURRENT_H */

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

extern void gunique_concurrent_complete(Oid topindex, bool reindex);
extern void gunique_concurrent_share_lock(Oid relid);

#endif							/* GUNIQUE_CONCURRENT_H */

/*-------------------------------------------------------------------------
 *
 * waitgraph.h
 *	  Would waiting for a lock close a cycle at once?
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_WAITGRAPH_H
#define GUNIQUE_WAITGRAPH_H

#include "storage/lock.h"

/*
 * Upsert locks (onconflict.c) are heavyweight locks in the advisory lock
 * space with this field4 (pg_advisory_lock uses 1 and 2); field1 is the
 * database, field2 the tree's top index, field3 the key's lock hash.  The
 * wait graph follows waits for them as waits for a row.
 */
#define GUNIQUE_UPSERT_LOCK_FIELD4	0x6775

extern bool gunique_lock_holder_waits_for_me(const LOCKTAG *tag,
											 LOCKMODE mode);

#endif							/* GUNIQUE_WAITGRAPH_H */

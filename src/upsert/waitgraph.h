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

extern bool gunique_lock_holder_waits_for_me(const LOCKTAG *tag,
											 LOCKMODE mode);

#endif							/* GUNIQUE_WAITGRAPH_H */

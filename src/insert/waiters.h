/*-------------------------------------------------------------------------
 *
 * waiters.h
 *	  Inserters that wait with their entry already in own leaf.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_WAITERS_H
#define GUNIQUE_WAITERS_H

#include "storage/itemptr.h"

extern void gunique_waiters_shmem_request(void);
extern void gunique_waiters_shmem_startup(void);
extern void gunique_waiter_set(Oid topindex, Oid heapoid, ItemPointer tid,
							   TransactionId xid);
extern void gunique_waiter_clear(void);
extern bool gunique_waiter_is(Oid topindex, Oid heapoid, ItemPointer tid,
							  TransactionId xid);

#endif							/* GUNIQUE_WAITERS_H */

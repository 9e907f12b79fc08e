/*-------------------------------------------------------------------------
 *
 * keylock.h
 *	  Locks that serialize inserters of equal keys into a gunique tree.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_KEYLOCK_H
#define GUNIQUE_KEYLOCK_H

#include "storage/lwlock.h"

extern void gunique_keylock_shmem_request(void);
extern void gunique_keylock_shmem_startup(void);
extern LWLock *gunique_keylock_for(Oid topindex, uint32 keyhash);
extern void gunique_keylock_barrier(void);

#endif							/* GUNIQUE_KEYLOCK_H */

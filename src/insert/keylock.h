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

/* Upsert locks one backend may hold at once (onconflict.c). */
#define GUNIQUE_MAX_UPSERT_LOCKS 32

extern void gunique_keylock_shmem_request(void);
extern void gunique_keylock_shmem_startup(void);
extern LWLock *gunique_keylock_for(Oid topindex, uint32 keyhash);
extern void gunique_keylock_barrier(void);
extern void gunique_keylock_upsert_begin(Oid topindex, uint32 keyhash,
										 Oid partition);
extern void gunique_keylock_upsert_end(Oid topindex, uint32 keyhash);
extern bool gunique_keylock_upserts_elsewhere(Oid topindex, uint32 keyhash,
											  Oid partition);
extern void gunique_keylock_wait_out(Oid topindex, uint32 keyhash);

#endif							/* GUNIQUE_KEYLOCK_H */

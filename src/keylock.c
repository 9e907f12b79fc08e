/*-------------------------------------------------------------------------
 *
 * keylock.c
 *	  Locks that serialize inserters of equal keys into a gunique tree.
 *
 * An inserter holds the lock of its key from the moment it reads the other
 * leaves' summaries and btrees until nbtree has inserted its own entry
 * (probe.c).  The locks are a fixed array of LWLocks in shared memory,
 * picked by a hash of the top index and the key; unequal keys may share
 * one, which costs only some waiting.  Why no deadlock can go through them
 * is src/README, invariant 4.
 *
 * Summaries (summary.c) use the locks as a barrier: a backend holding no
 * key lock takes and releases each in turn, after which every probe or
 * insert that was under a key lock when it started has finished
 * (src/README, invariant 6).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "keylock.h"

#define GUNIQUE_KEYLOCKS	1024	/* a power of two */

static LWLockPadded *keylocks = NULL;

void
gunique_keylock_shmem_request(void)
{
	RequestNamedLWLockTranche("gunique key locks", GUNIQUE_KEYLOCKS);
}

void
gunique_keylock_shmem_startup(void)
{
	keylocks = GetNamedLWLockTranche("gunique key locks");
}

LWLock *
gunique_keylock_for(Oid topindex, uint32 keyhash)
{
	uint32		h = hash_combine(murmurhash32((uint32) topindex), keyhash);

	return &keylocks[h & (GUNIQUE_KEYLOCKS - 1)].lock;
}

/*
 * Wait until every backend that holds a key lock now has released it.  The
 * caller holds none.
 */
void
gunique_keylock_barrier(void)
{
	for (int i = 0; i < GUNIQUE_KEYLOCKS; i++)
	{
		LWLockAcquire(&keylocks[i].lock, LW_EXCLUSIVE);
		LWLockRelease(&keylocks[i].lock);
	}
}

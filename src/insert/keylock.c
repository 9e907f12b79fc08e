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
 * is src/README, I4.
 *
 * Summaries (summary.c) use the locks as a barrier: a backend holding no
 * key lock takes and releases each in turn, after which every probe or
 * insert that was under a key lock when it started has finished
 * (src/README, I6).
 *
 * Beside each lock is a count of pending upserts: ON CONFLICT DO NOTHING
 * checks (onconflict.c) that found nothing for a key under the lock and
 * hold its upsert lock until their row is done, with the partition their
 * rows go to when all go to one; and each backend lists its pending
 * upserts by key, for when they go to more.  An inserter reads them under
 * the key lock, just before it would insert, and waits for the upsert lock
 * if an upsert of its key is pending into another partition than its own;
 * the check, having counted itself, waits out the key's lock before it
 * looks for the key.
 * Why that makes the check and a plain insert of the key see one another,
 * and why an upsert into the inserter's own partition needs no wait:
 * src/README, "INSERT ... ON CONFLICT", point 5.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "common/hashfn.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#include "gunique.h"
#include "insert/keylock.h"

#define GUNIQUE_KEYLOCKS	1024	/* a power of two */

/*
 * The pending upserts of a key lock, alone in a cache line (upserts of one
 * key do not slow others): their count in the low 32 bits, and in the high
 * 32 the partition every one of them goes to, or InvalidOid if they go to
 * more than one (or one did not know).  The partition is set by the first
 * upsert counted from zero and stays InvalidOid, once mixed, until the
 * count is zero again: while the count is not zero, a partition there is
 * that of every pending upsert.
 */
typedef union PendingUpserts
{
	pg_atomic_uint64 state;
	char		pad[PG_CACHE_LINE_SIZE];
} PendingUpserts;

#define PENDING_COUNT(state)		((uint32) ((state) & 0xFFFFFFFF))
#define PENDING_PARTITION(state)	((Oid) ((state) >> 32))
#define PENDING_STATE(count, partition) \
	(((uint64) (partition) << 32) | (uint64) (count))

/*
 * Each backend's pending upserts, by key.  Only one backend at a time
 * holds a key's upsert lock in ExclusiveLock, so where a key lock's
 * pending upserts go to more than one partition, an inserter finds where
 * its own key's goes here.  Written by its backend only, under the
 * spinlock: a key is added before the count is raised and taken out
 * before it is lowered.
 */
typedef struct PendingKey
{
	Oid			topindex;
	uint32		keyhash;
	Oid			partition;
} PendingKey;

typedef struct BackendPending
{
	slock_t		mutex;
	int			nkeys;
	PendingKey	keys[GUNIQUE_MAX_UPSERT_LOCKS];
} BackendPending;

static LWLockPadded *keylocks = NULL;
static PendingUpserts *pending = NULL;
static BackendPending *backend_pending = NULL;

static Size
pending_size(void)
{
	return mul_size(GUNIQUE_KEYLOCKS, sizeof(PendingUpserts));
}

static Size
backend_pending_size(void)
{
	return mul_size(MaxBackends, sizeof(BackendPending));
}

void
gunique_keylock_shmem_request(void)
{
	RequestNamedLWLockTranche("gunique key locks", GUNIQUE_KEYLOCKS);
	RequestAddinShmemSpace(pending_size());
	RequestAddinShmemSpace(backend_pending_size());
}

void
gunique_keylock_shmem_startup(void)
{
	bool		found;

	keylocks = GetNamedLWLockTranche("gunique key locks");
	pending = ShmemInitStruct("gunique pending upserts", pending_size(),
							  &found);
	if (!found)
		for (int i = 0; i < GUNIQUE_KEYLOCKS; i++)
			pg_atomic_init_u64(&pending[i].state, 0);
	backend_pending = ShmemInitStruct("gunique pending upserts by backend",
									  backend_pending_size(), &found);
	if (!found)
		for (int i = 0; i < MaxBackends; i++)
		{
			SpinLockInit(&backend_pending[i].mutex);
			backend_pending[i].nkeys = 0;
		}
}

static BackendPending *
my_pending(void)
{
	return &backend_pending[gunique_backend_slot()];
}

static inline uint32
keylock_slot(Oid topindex, uint32 keyhash)
{
	uint32		h = hash_combine(murmurhash32((uint32) topindex), keyhash);

	return h & (GUNIQUE_KEYLOCKS - 1);
}

LWLock *
gunique_keylock_for(Oid topindex, uint32 keyhash)
{
	return &keylocks[keylock_slot(topindex, keyhash)].lock;
}

/*
 * An upsert check of a key (its hash as the key lock's) passed, and holds
 * its upsert lock, for a row going to "partition" (InvalidOid if it does
 * not know): count it until the lock goes.  The compare-and-exchange is a
 * full barrier, so the count is raised before the caller waits out the
 * key's lock.
 */
void
gunique_keylock_upsert_begin(Oid topindex, uint32 keyhash, Oid partition)
{
	pg_atomic_uint64 *state = &pending[keylock_slot(topindex, keyhash)].state;
	BackendPending *mine = my_pending();
	uint64		old;

	/* the caller holds fewer than GUNIQUE_MAX_UPSERT_LOCKS upsert locks */
	SpinLockAcquire(&mine->mutex);
	Assert(mine->nkeys < GUNIQUE_MAX_UPSERT_LOCKS);
	mine->keys[mine->nkeys].topindex = topindex;
	mine->keys[mine->nkeys].keyhash = keyhash;
	mine->keys[mine->nkeys].partition = partition;
	mine->nkeys++;
	SpinLockRelease(&mine->mutex);

	old = pg_atomic_read_u64(state);

	for (;;)
	{
		uint32		count = PENDING_COUNT(old);
		Oid			into = partition;

		if (count > 0 && PENDING_PARTITION(old) != partition)
			into = InvalidOid;
		if (pg_atomic_compare_exchange_u64(state, &old,
										   PENDING_STATE(count + 1, into)))
			break;
	}
}

/* The count goes down; the partition, if mixed, stays so until zero. */
void
gunique_keylock_upsert_end(Oid topindex, uint32 keyhash)
{
	BackendPending *mine = my_pending();

	SpinLockAcquire(&mine->mutex);
	for (int i = mine->nkeys - 1; i >= 0; i--)
	{
		if (mine->keys[i].topindex == topindex &&
			mine->keys[i].keyhash == keyhash)
		{
			mine->keys[i] = mine->keys[--mine->nkeys];
			break;
		}
	}
	SpinLockRelease(&mine->mutex);
	(void) pg_atomic_fetch_sub_u64(&pending[keylock_slot(topindex,
														  keyhash)].state, 1);
}

/*
 * Does some backend list a pending upsert of the key into another
 * partition than "partition", or into one it did not know?  A key left
 * behind can only make a needless wait.
 */
static bool
pending_key_elsewhere(Oid topindex, uint32 keyhash, Oid partition)
{
	for (int i = 0; i < MaxBackends; i++)
	{
		BackendPending *other = &backend_pending[i];
		bool		elsewhere = false;

		if (other->nkeys == 0)
			continue;			/* read again under the spinlock if not */
		SpinLockAcquire(&other->mutex);
		for (int k = 0; k < other->nkeys && !elsewhere; k++)
			elsewhere = other->keys[k].topindex == topindex &&
				other->keys[k].keyhash == keyhash &&
				other->keys[k].partition != partition;
		SpinLockRelease(&other->mutex);
		if (elsewhere)
			return true;
	}
	return false;
}

/*
 * Is an upsert check of a key under this key lock holding its upsert lock
 * for a row that goes to another partition than "partition", or to one it
 * did not know?  Read under the key lock, whose acquisition was a barrier.
 * Keys that share a lock share the count: where all their pending upserts
 * go to one partition, that is the answer for the key too (a needless
 * wait at worst, never a missed one); where they go to more, the key's own
 * pending upsert, of which there is one at most, is looked up by backend
 * (listed before the count was raised).
 */
bool
gunique_keylock_upserts_elsewhere(Oid topindex, uint32 keyhash,
								  Oid partition)
{
	uint64		state = pg_atomic_read_u64(&pending[keylock_slot(topindex,
																  keyhash)].state);

	if (PENDING_COUNT(state) == 0)
		return false;
	if (OidIsValid(PENDING_PARTITION(state)))
		return PENDING_PARTITION(state) != partition;
	pg_read_barrier();
	return pending_key_elsewhere(topindex, keyhash, partition);
}

/*
 * Wait until whoever holds the key's lock now has released it: an inserter
 * that read no pending upsert under it has then inserted its entry, or
 * given up (it never waits with the lock held).  The caller holds no key
 * lock.
 */
void
gunique_keylock_wait_out(Oid topindex, uint32 keyhash)
{
	LWLock	   *lock = gunique_keylock_for(topindex, keyhash);

	LWLockAcquire(lock, LW_SHARED);
	LWLockRelease(lock);
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

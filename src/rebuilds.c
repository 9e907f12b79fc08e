/*-------------------------------------------------------------------------
 *
 * rebuilds.c
 *	  Leaf rebuilds that some snapshot may not see yet.
 *
 * Summaries hold every key of their leaves as the leaves are now (src/README,
 * invariants 5 and 6).  That is what a probe needs; a lookup (lookup.c)
 * needs every key of the entries its snapshot sees, and a leaf rebuilt by a
 * TRUNCATE that committed after the snapshot was taken has lost entries the
 * snapshot still sees, and its summary, and a group's filter rebuilt since,
 * may have lost their keys.  (VACUUM removes only entries that no snapshot
 * sees, and REINDEX, VACUUM FULL and CLUSTER keep every entry some snapshot
 * may see.)  So every build of a leaf notes its transaction here, and a
 * lookup that found nothing trusts the summaries it read only if every
 * transaction noted is one its snapshot sees as finished: see src/README,
 * "Lookups".
 *
 * The notes are a few transaction IDs in shared memory.  A note is dropped
 * once no snapshot anywhere can still take its transaction for running (it
 * precedes every backend's xmin); if none can be dropped, the oldest is,
 * and "evicted" keeps the newest such, which a snapshot whose xmin is not
 * past it treats as unseen.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/snapmgr.h"

#include "rebuilds.h"

#define GUNIQUE_REBUILD_NOTES 16

typedef struct RebuildNotes
{
	slock_t		mutex;			/* serializes writers; readers take none */
	pg_atomic_uint32 xids[GUNIQUE_REBUILD_NOTES];	/* 0: free */
	pg_atomic_uint32 evicted;	/* the newest note evicted while needed */
} RebuildNotes;

static RebuildNotes *notes = NULL;

void
gunique_rebuilds_shmem_request(void)
{
	RequestAddinShmemSpace(MAXALIGN(sizeof(RebuildNotes)));
}

void
gunique_rebuilds_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	notes = ShmemInitStruct("gunique rebuilds", sizeof(RebuildNotes), &found);
	if (!found)
	{
		SpinLockInit(&notes->mutex);
		for (int i = 0; i < GUNIQUE_REBUILD_NOTES; i++)
			pg_atomic_init_u32(&notes->xids[i], InvalidTransactionId);
		pg_atomic_init_u32(&notes->evicted, InvalidTransactionId);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * The current transaction is rebuilding a leaf (ambuild).  Noted before the
 * build publishes anything, so before its commit: a reader that reads the
 * notes after a summary made since sees the note.
 */
void
gunique_rebuilds_note(void)
{
	TransactionId xid;
	TransactionId horizon;
	int			slot = -1;
	TransactionId victim = InvalidTransactionId;

	if (notes == NULL)
		return;
	xid = GetTopTransactionId();
	horizon = GetOldestNonRemovableTransactionId(NULL);
	SpinLockAcquire(&notes->mutex);
	for (int i = 0; i < GUNIQUE_REBUILD_NOTES; i++)
	{
		TransactionId cur = pg_atomic_read_u32(&notes->xids[i]);

		if (cur == xid)
		{
			SpinLockRelease(&notes->mutex);
			return;
		}
		if (!TransactionIdIsValid(cur) || TransactionIdPrecedes(cur, horizon))
			slot = i;
		else if (slot < 0 &&
				 (!TransactionIdIsValid(victim) ||
				  TransactionIdPrecedes(cur, victim)))
			victim = cur;
	}
	if (slot < 0)
	{
		TransactionId evicted = pg_atomic_read_u32(&notes->evicted);

		for (int i = 0; i < GUNIQUE_REBUILD_NOTES && slot < 0; i++)
			if (pg_atomic_read_u32(&notes->xids[i]) == victim)
				slot = i;
		if (!TransactionIdIsValid(evicted) ||
			TransactionIdPrecedes(evicted, victim))
			pg_atomic_write_u32(&notes->evicted, victim);
	}
	pg_atomic_write_u32(&notes->xids[slot], xid);
	SpinLockRelease(&notes->mutex);
	pg_memory_barrier();
}

/*
 * Might a leaf have been rebuilt by a transaction that "snapshot" does not
 * see as finished (still running when the snapshot was taken, or begun
 * after)?  The caller has read the summaries it relies on before.
 */
bool
gunique_rebuilds_unseen(Snapshot snapshot)
{
	TransactionId evicted;

	if (notes == NULL)
		return false;
	pg_memory_barrier();
	for (int i = 0; i < GUNIQUE_REBUILD_NOTES; i++)
	{
		TransactionId xid = pg_atomic_read_u32(&notes->xids[i]);

		if (TransactionIdIsValid(xid) &&
			!TransactionIdIsCurrentTransactionId(xid) &&
			XidInMVCCSnapshot(xid, snapshot))
			return true;
	}
	evicted = pg_atomic_read_u32(&notes->evicted);
	return TransactionIdIsValid(evicted) &&
		!TransactionIdPrecedes(evicted, snapshot->xmin);
}

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
 * may see.)  So every build of a leaf notes its transaction and the leaf
 * here, as does every group filter built in a transaction that may forget
 * it at abort (summary.c), and a lookup that found nothing trusts the
 * summaries it read only if every transaction noted for a leaf or group it
 * read is one its snapshot sees as finished: see src/README, "Lookups".
 *
 * The notes are a few (transaction, database, index) triples in shared
 * memory, one per leaf or group a transaction rebuilds.  A note is dropped
 * once no snapshot anywhere can still take its transaction for running (it
 * precedes every backend's xmin); if none can be dropped, the oldest is,
 * and "evicted" keeps the newest such, which a snapshot whose xmin is not
 * past it treats as unseen, for every index.
 *
 * A note is also "pending" from the build until its transaction's
 * summaries are final: a rollback forgets the rebuilt summaries only in
 * its transaction callbacks, after the transaction has stopped running for
 * every snapshot, so a snapshot taken in between sees the rebuild as
 * finished and its summary as current.  A reader with no snapshot (dirty:
 * INSERT ... ON CONFLICT) needs the same for a rebuild still running,
 * which a rollback may undo.  Each pending note that ends counts in
 * "ends" first, so that a reader that read a summary before a rollback
 * forgot it, and the note after it ended, can tell.  Pending notes are
 * never dropped; a transaction whose note finds every slot pending is
 * "unplaced", and every reader trusts nothing while it runs.  See
 * src/README, "Lookups".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/snapmgr.h"

#include "rebuilds.h"

#define GUNIQUE_REBUILD_NOTES GUNIQUE_REBUILDS_MAX

typedef struct RebuildNotes
{
	slock_t		mutex;			/* serializes writers; readers take none */
	pg_atomic_uint32 xids[GUNIQUE_REBUILD_NOTES];	/* 0: free */
	pg_atomic_uint32 pending[GUNIQUE_REBUILD_NOTES];	/* 1: pending */
	pg_atomic_uint32 dbs[GUNIQUE_REBUILD_NOTES];	/* the index's database */
	pg_atomic_uint32 indexes[GUNIQUE_REBUILD_NOTES];	/* the leaf or group */
	pg_atomic_uint32 running;	/* transactions with pending notes */
	pg_atomic_uint32 newest;	/* the newest transaction ever noted */
	pg_atomic_uint32 unplaced;	/* transactions pending with no slot */
	pg_atomic_uint64 ends;		/* pending transactions ended so far */
	pg_atomic_uint32 evicted;	/* the newest note evicted while needed */
} RebuildNotes;

static RebuildNotes *notes = NULL;

/* This backend's pending notes: their transaction, slots, or unplaced */
static TransactionId my_xid = InvalidTransactionId;
static int	my_slots[GUNIQUE_REBUILD_NOTES];
static int	my_nslots = 0;
static bool my_unplaced = false;

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
		{
			pg_atomic_init_u32(&notes->xids[i], InvalidTransactionId);
			pg_atomic_init_u32(&notes->pending[i], 0);
			pg_atomic_init_u32(&notes->dbs[i], InvalidOid);
			pg_atomic_init_u32(&notes->indexes[i], InvalidOid);
		}
		pg_atomic_init_u32(&notes->running, 0);
		pg_atomic_init_u32(&notes->newest, InvalidTransactionId);
		pg_atomic_init_u32(&notes->unplaced, 0);
		pg_atomic_init_u64(&notes->ends, 0);
		pg_atomic_init_u32(&notes->evicted, InvalidTransactionId);
	}
	LWLockRelease(AddinShmemInitLock);
}

/*
 * A slot for a new note: one free, or whose transaction no snapshot can
 * take for running; else the oldest that is not pending, evicted; else
 * none, and this transaction is unplaced.  "evicted" keeps the newest
 * transaction a slot no longer holds while some snapshot may need it,
 * written before the slot is.  Returns the slot, or -1.  Under the mutex.
 */
static int
rebuilds_slot(TransactionId xid, TransactionId horizon)
{
	TransactionId victim = InvalidTransactionId;
	TransactionId evicted = pg_atomic_read_u32(&notes->evicted);
	int			slot = -1;

	for (int i = 0; i < GUNIQUE_REBUILD_NOTES; i++)
	{
		TransactionId cur = pg_atomic_read_u32(&notes->xids[i]);

		if (pg_atomic_read_u32(&notes->pending[i]) != 0)
			continue;
		if (!TransactionIdIsValid(cur) || TransactionIdPrecedes(cur, horizon))
			return i;
		if (slot < 0 || TransactionIdPrecedes(cur, victim))
		{
			slot = i;
			victim = cur;
		}
	}
	if (slot < 0)
	{
		victim = xid;
		pg_atomic_fetch_add_u32(&notes->unplaced, 1);
		my_unplaced = true;
	}
	if (!TransactionIdIsValid(evicted) || TransactionIdPrecedes(evicted, victim))
		pg_atomic_write_u32(&notes->evicted, victim);
	pg_write_barrier();
	return slot;
}

/*
 * The current transaction is rebuilding the summary of the leaf (ambuild)
 * or group (a merge).  Noted, pending, before it publishes anything, so
 * before its commit: a reader that reads the notes after a summary made
 * since sees the note.
 */
void
gunique_rebuilds_note(Oid index)
{
	TransactionId xid;
	TransactionId horizon;
	int			slot;

	if (notes == NULL)
		return;
	xid = GetTopTransactionId();
	/* a transaction whose end we missed (no summary callback) ends now */
	if (TransactionIdIsValid(my_xid) && xid != my_xid)
		gunique_rebuilds_end();
	if (my_unplaced)
		return;
	for (int i = 0; i < my_nslots; i++)
		if (pg_atomic_read_u32(&notes->indexes[my_slots[i]]) == index &&
			pg_atomic_read_u32(&notes->dbs[my_slots[i]]) == MyDatabaseId)
			return;
	horizon = GetOldestNonRemovableTransactionId(NULL);
	SpinLockAcquire(&notes->mutex);
	if (!TransactionIdIsValid(my_xid))
	{
		TransactionId newest = pg_atomic_read_u32(&notes->newest);

		pg_atomic_fetch_add_u32(&notes->running, 1);
		if (!TransactionIdIsValid(newest) || TransactionIdPrecedes(newest, xid))
			pg_atomic_write_u32(&notes->newest, xid);
		my_xid = xid;
	}
	slot = rebuilds_slot(xid, horizon);
	if (slot >= 0)
	{
		pg_atomic_write_u32(&notes->pending[slot], 1);
		pg_atomic_write_u32(&notes->dbs[slot], MyDatabaseId);
		pg_atomic_write_u32(&notes->indexes[slot], index);
		pg_write_barrier();
		pg_atomic_write_u32(&notes->xids[slot], xid);
		my_slots[my_nslots++] = slot;
	}
	SpinLockRelease(&notes->mutex);
	pg_memory_barrier();
}

/*
 * The current transaction's summaries are final: it is committing (they
 * stand), or it has forgotten the ones it rebuilt as it rolls back or
 * prepares (summary.c).  Its pending notes end: counted first, then
 * cleared.
 */
void
gunique_rebuilds_end(void)
{
	if (!TransactionIdIsValid(my_xid))
		return;
	pg_atomic_fetch_add_u64(&notes->ends, 1);	/* a full barrier */
	SpinLockAcquire(&notes->mutex);
	for (int i = 0; i < my_nslots; i++)
		pg_atomic_write_u32(&notes->pending[my_slots[i]], 0);
	if (my_unplaced)
		pg_atomic_fetch_sub_u32(&notes->unplaced, 1);
	pg_atomic_fetch_sub_u32(&notes->running, 1);
	SpinLockRelease(&notes->mutex);
	my_xid = InvalidTransactionId;
	my_nslots = 0;
	my_unplaced = false;
}

/*
 * Read before the summaries a lookup relies on, for gunique_rebuilds_unseen.
 */
uint64
gunique_rebuilds_mark(void)
{
	uint64		mark;

	if (notes == NULL)
		return 0;
	mark = pg_atomic_read_u64(&notes->ends);
	pg_read_barrier();
	return mark;
}

/*
 * The common case, told from two words: no other transaction has a note
 * pending, and (with a snapshot) every transaction ever noted, evicted
 * ones too, precedes the snapshot's xmin, so the snapshot sees it as
 * finished.  Each transaction counts as running from before its first note
 * is written until after its end is counted, and "newest" is raised before
 * a note is written.
 */
static bool
rebuilds_none_unseen(Snapshot snapshot)
{
	uint32		others = pg_atomic_read_u32(&notes->running) -
		(TransactionIdIsValid(my_xid) ? 1 : 0);
	TransactionId newest = pg_atomic_read_u32(&notes->newest);

	if (others != 0)
		return false;
	return snapshot == NULL || !TransactionIdIsValid(newest) ||
		TransactionIdPrecedes(newest, snapshot->xmin);
}

/*
 * Which leaves and groups of this database might a summary read since
 * "mark" have come from a rebuild that is not final for "snapshot": one it
 * does not see as finished (still running when the snapshot was taken, or
 * begun after), one whose transaction may still forget it (pending), or
 * one that ended since?  With no snapshot (a dirty read), only the last
 * two.  This transaction's own rebuilds are final for it.  Returns how
 * many index OIDs it put in "noted" (room for GUNIQUE_REBUILDS_MAX, some
 * maybe repeated), or -1 if it cannot tell which: then any may be.
 */
int
gunique_rebuilds_unseen(Snapshot snapshot, uint64 mark, Oid *noted)
{
	TransactionId evicted;
	int			n = 0;

	if (notes == NULL)
		return 0;
	pg_memory_barrier();
	if (rebuilds_none_unseen(snapshot))
	{
		pg_read_barrier();
		return pg_atomic_read_u64(&notes->ends) == mark ? 0 : -1;
	}
	if (pg_atomic_read_u32(&notes->unplaced) > (my_unplaced ? 1 : 0))
		return -1;
	for (int i = 0; i < GUNIQUE_REBUILD_NOTES; i++)
	{
		TransactionId xid = pg_atomic_read_u32(&notes->xids[i]);

		pg_read_barrier();
		if (!TransactionIdIsValid(xid) ||
			pg_atomic_read_u32(&notes->dbs[i]) != MyDatabaseId ||
			TransactionIdIsCurrentTransactionId(xid))
			continue;
		if (pg_atomic_read_u32(&notes->pending[i]) != 0 ||
			(snapshot != NULL && XidInMVCCSnapshot(xid, snapshot)))
			noted[n++] = pg_atomic_read_u32(&notes->indexes[i]);
	}
	pg_read_barrier();
	if (pg_atomic_read_u64(&notes->ends) != mark)
		return -1;
	if (snapshot == NULL)
		return n;
	evicted = pg_atomic_read_u32(&notes->evicted);
	if (TransactionIdIsValid(evicted) &&
		!TransactionIdPrecedes(evicted, snapshot->xmin))
		return -1;
	return n;
}

/*-------------------------------------------------------------------------
 *
 * rebuilds.c
 *	  Leaf rebuilds that some snapshot may not see yet.
 *
 * A lookup that found nothing must know whether a leaf it relied on was
 * rebuilt in a way its snapshot does not see (a TRUNCATE committed since),
 * or may yet be undone (a rebuild whose transaction has not ended): why,
 * and the order of reads that makes the answer sound, are src/README,
 * "Lookups".  This file keeps the notes that answer it:
 *
 *	 - a few (transaction, database, index) notes in shared memory, one per
 *	   leaf or group a transaction rebuilds (summary.c notes them), with
 *	   64-bit transaction IDs; a note's slot is free once every snapshot
 *	   sees its transaction as finished (GlobalVis);
 *	 - "pending" from the build until the transaction's summaries are final
 *	   (summary.c's transaction callback calls gunique_rebuilds_end);
 *	   pending notes are never dropped;
 *	 - "evicted": the newest transaction whose note lost its slot while
 *	   some snapshot may need it (a start counts every earlier one);
 *	 - "unplaced": transactions pending with no slot, while which every
 *	   reader trusts nothing;
 *	 - "ends": transactions that forgot summaries, counted after forgetting
 *	   them and before their notes stop pending.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "access/xlog.h"
#include "access/xact.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "storage/spin.h"
#include "utils/snapmgr.h"

#include "locate/rebuilds.h"

#define GUNIQUE_REBUILD_NOTES GUNIQUE_REBUILDS_MAX

typedef struct RebuildNotes
{
	slock_t		mutex;			/* serializes writers; readers take none */
	pg_atomic_uint64 fxids[GUNIQUE_REBUILD_NOTES];	/* 0: free */
	pg_atomic_uint32 pending[GUNIQUE_REBUILD_NOTES];	/* 1: pending */
	pg_atomic_uint32 dbs[GUNIQUE_REBUILD_NOTES];	/* the index's database */
	pg_atomic_uint32 indexes[GUNIQUE_REBUILD_NOTES];	/* the leaf or group */
	pg_atomic_uint32 primed;	/* 1 once "evicted" covers the start */
	pg_atomic_uint32 running;	/* transactions with pending notes */
	pg_atomic_uint64 newest;	/* the newest transaction noted or evicted */
	pg_atomic_uint32 unplaced;	/* transactions pending with no slot */
	pg_atomic_uint64 ends;		/* transactions that forgot summaries */
	pg_atomic_uint64 evicted;	/* the newest note evicted while needed */
} RebuildNotes;

static RebuildNotes *notes = NULL;

/* This backend's pending notes: their transaction, slots, or unplaced */
static FullTransactionId my_fxid = {0};
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
			pg_atomic_init_u64(&notes->fxids[i], 0);
			pg_atomic_init_u32(&notes->pending[i], 0);
			pg_atomic_init_u32(&notes->dbs[i], InvalidOid);
			pg_atomic_init_u32(&notes->indexes[i], InvalidOid);
		}
		pg_atomic_init_u32(&notes->primed, 0);
		pg_atomic_init_u32(&notes->running, 0);
		pg_atomic_init_u64(&notes->newest, 0);
		pg_atomic_init_u32(&notes->unplaced, 0);
		pg_atomic_init_u64(&notes->ends, 0);
		pg_atomic_init_u64(&notes->evicted, 0);
	}
	LWLockRelease(AddinShmemInitLock);
}

/* Raise a 64-bit transaction ID kept in shared memory to fxid. */
static void
rebuilds_raise(pg_atomic_uint64 *word, uint64 fxid)
{
	if (pg_atomic_read_u64(word) < fxid)
		pg_atomic_write_u64(word, fxid);
}

/*
 * The first use after the server started (or, on a standby, was promoted):
 * every transaction before it counts as evicted, so that a prepared
 * transaction that rebuilt a leaf before the restart is not seen as
 * finished by a snapshot that saw it prepared.  A standby's lookups trust
 * no summary, and nothing is noted in recovery: the caller is not in
 * recovery, and read "next" since.  Under the mutex.
 */
static void
rebuilds_prime(FullTransactionId nextfxid)
{
	uint64		next = U64FromFullTransactionId(nextfxid);

	if (pg_atomic_read_u32(&notes->primed) != 0)
		return;
	rebuilds_raise(&notes->evicted, next - 1);
	rebuilds_raise(&notes->newest, next - 1);
	pg_write_barrier();
	pg_atomic_write_u32(&notes->primed, 1);
}

/* A 32-bit transaction ID no more than 2^31 before "next", made 64-bit. */
static uint64
rebuilds_widen(TransactionId xid, FullTransactionId next)
{
	return U64FromFullTransactionId(next) -
		(uint32) (XidFromFullTransactionId(next) - xid);
}

/*
 * A slot for a new note: one free, or whose transaction every snapshot
 * sees as finished; else the oldest that is not pending, evicted; else
 * none, and this transaction is unplaced.  "evicted" keeps the newest
 * transaction a slot no longer holds while some snapshot may need it,
 * written before the slot is.  Returns the slot, or -1.  Under the mutex.
 */
static int
rebuilds_slot(uint64 fxid, uint64 horizon)
{
	uint64		victim = 0;
	int			slot = -1;

	for (int i = 0; i < GUNIQUE_REBUILD_NOTES; i++)
	{
		uint64		cur = pg_atomic_read_u64(&notes->fxids[i]);

		if (pg_atomic_read_u32(&notes->pending[i]) != 0)
			continue;
		if (cur < horizon)
			return i;
		if (slot < 0 || cur < victim)
		{
			slot = i;
			victim = cur;
		}
	}
	if (slot < 0)
	{
		victim = fxid;
		pg_atomic_fetch_add_u32(&notes->unplaced, 1);
		my_unplaced = true;
	}
	rebuilds_raise(&notes->evicted, victim);
	pg_write_barrier();
	return slot;
}

/*
 * The current transaction is rebuilding the summary of the index: a leaf
 * (ambuild) or a group (a merge).  Noted, pending, before it publishes
 * anything, so before its commit: a reader that reads the notes after a
 * summary made since sees the note.
 */
void
gunique_rebuilds_note(Oid index)
{
	FullTransactionId fxid;
	FullTransactionId next;
	uint64		horizon;
	int			slot;

	if (notes == NULL)
		return;
	fxid = GetTopFullTransactionId();
	/* a transaction whose end we missed (no summary callback) ends now */
	if (FullTransactionIdIsValid(my_fxid) &&
		!FullTransactionIdEquals(fxid, my_fxid))
		gunique_rebuilds_end(true);
	if (my_unplaced)
		return;
	for (int i = 0; i < my_nslots; i++)
		if (pg_atomic_read_u32(&notes->indexes[my_slots[i]]) == index &&
			pg_atomic_read_u32(&notes->dbs[my_slots[i]]) == MyDatabaseId)
			return;
	next = ReadNextFullTransactionId();
	horizon = rebuilds_widen(GetOldestNonRemovableTransactionId(NULL), next);
	SpinLockAcquire(&notes->mutex);
	rebuilds_prime(next);
	if (!FullTransactionIdIsValid(my_fxid))
	{
		pg_atomic_fetch_add_u32(&notes->running, 1);
		rebuilds_raise(&notes->newest, U64FromFullTransactionId(fxid));
		my_fxid = fxid;
	}
	slot = rebuilds_slot(U64FromFullTransactionId(fxid), horizon);
	if (slot >= 0)
	{
		pg_atomic_write_u32(&notes->pending[slot], 1);
		pg_atomic_write_u32(&notes->dbs[slot], MyDatabaseId);
		pg_atomic_write_u32(&notes->indexes[slot], index);
		pg_write_barrier();
		pg_atomic_write_u64(&notes->fxids[slot], U64FromFullTransactionId(fxid));
		my_slots[my_nslots++] = slot;
	}
	SpinLockRelease(&notes->mutex);
	pg_memory_barrier();
}

/*
 * The current transaction's summaries are final: it is committing (they
 * stand), or it has forgotten the ones it rebuilt as it rolls back or
 * prepares ("forgot"; summary.c).  Its pending notes end: counted first
 * if it forgot, then cleared.
 */
void
gunique_rebuilds_end(bool forgot)
{
	if (!FullTransactionIdIsValid(my_fxid))
		return;
	if (forgot)
		pg_atomic_fetch_add_u64(&notes->ends, 1);	/* a full barrier */
	SpinLockAcquire(&notes->mutex);
	for (int i = 0; i < my_nslots; i++)
		pg_atomic_write_u32(&notes->pending[my_slots[i]], 0);
	if (my_unplaced)
		pg_atomic_fetch_sub_u32(&notes->unplaced, 1);
	pg_atomic_fetch_sub_u32(&notes->running, 1);
	SpinLockRelease(&notes->mutex);
	my_fxid = InvalidFullTransactionId;
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
	if (pg_atomic_read_u32(&notes->primed) == 0 && !RecoveryInProgress())
	{
		FullTransactionId next = ReadNextFullTransactionId();

		SpinLockAcquire(&notes->mutex);
		rebuilds_prime(next);
		SpinLockRelease(&notes->mutex);
	}
	mark = pg_atomic_read_u64(&notes->ends);
	pg_read_barrier();
	return mark;
}

/*
 * Does every snapshot anywhere see the transaction (none: 0) as finished?
 * Once it precedes PostgreSQL's horizon; until then it is within 2^31 of
 * any snapshot's xmin, and its 32 bits tell the rest.
 */
static bool
rebuilds_finished_everywhere(uint64 fxid)
{
	return fxid == 0 ||
		GlobalVisCheckRemovableFullXid(NULL, FullTransactionIdFromU64(fxid));
}

/* Does the snapshot see the transaction as finished? */
static bool
rebuilds_seen(uint64 fxid, Snapshot snapshot)
{
	return rebuilds_finished_everywhere(fxid) ||
		!XidInMVCCSnapshot(XidFromFullTransactionId(FullTransactionIdFromU64(fxid)),
						   snapshot);
}

/* As rebuilds_seen, for the newest transaction noted: before the xmin? */
static bool
rebuilds_before_xmin(uint64 fxid, Snapshot snapshot)
{
	return rebuilds_finished_everywhere(fxid) ||
		TransactionIdPrecedes(XidFromFullTransactionId(FullTransactionIdFromU64(fxid)),
							  snapshot->xmin);
}

/*
 * The common case, told from two words: no other transaction has a note
 * pending, and (with a snapshot) every transaction ever noted or evicted
 * precedes the snapshot's xmin.  Each transaction counts as running from
 * before its first note is written until after its end is counted, and
 * "newest" is raised before a note is written.
 */
static bool
rebuilds_none_unseen(Snapshot snapshot)
{
	uint32		others = pg_atomic_read_u32(&notes->running) -
		(FullTransactionIdIsValid(my_fxid) ? 1 : 0);

	if (others != 0)
		return false;
	return snapshot == NULL ||
		rebuilds_before_xmin(pg_atomic_read_u64(&notes->newest), snapshot);
}

/*
 * Which leaves and groups of this database might a summary read since
 * "mark" have come from a rebuild that is not final for "snapshot": one it
 * does not see as finished (still running when the snapshot was taken, or
 * begun after), one whose transaction may still forget it (pending), or
 * one forgotten since?  With no snapshot (a dirty read), only the last
 * two.  This transaction's own rebuilds are final for it.  Returns how
 * many index OIDs it put in "noted" (room for GUNIQUE_REBUILDS_MAX, some
 * maybe repeated), or -1 if it cannot tell which: then any may be.  The
 * caller has a snapshot (GlobalVis needs one), dirty or not.
 */
int
gunique_rebuilds_unseen(Snapshot snapshot, uint64 mark, Oid *noted)
{
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
		uint64		fxid = pg_atomic_read_u64(&notes->fxids[i]);

		pg_read_barrier();
		if (fxid == 0 ||
			pg_atomic_read_u32(&notes->dbs[i]) != MyDatabaseId ||
			FullTransactionIdEquals(FullTransactionIdFromU64(fxid), my_fxid))
			continue;
		if (pg_atomic_read_u32(&notes->pending[i]) != 0 ||
			(snapshot != NULL && !rebuilds_seen(fxid, snapshot)))
			noted[n++] = pg_atomic_read_u32(&notes->indexes[i]);
	}
	pg_read_barrier();
	if (pg_atomic_read_u64(&notes->ends) != mark)
		return -1;
	if (snapshot != NULL &&
		!rebuilds_before_xmin(pg_atomic_read_u64(&notes->evicted), snapshot))
		return -1;
	return n;
}

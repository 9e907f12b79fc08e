/*-------------------------------------------------------------------------
 *
 * waiters.c
 *	  Inserters that wait with their entry already in own leaf.
 *
 * nbtree checks own leaf in its partial mode, under the key lock, and
 * inserts the entry whatever it finds (probe.c).  When it found the key
 * held by a transaction in progress, the inserter waits for that
 * transaction with its entry in place, and says so here first: one slot
 * per backend names the tree, the row (table and heap TID) and the
 * transaction that inserted it.  An inserter looking at own leaf again
 * after nbtree's partial check passes over the entries of such waiters,
 * so that waiters for one key never wait for each other (src/README,
 * I4a).
 *
 * A slot is written by its backend only, and read by others under the key
 * lock of the key they look for; each slot has a spinlock so that nobody
 * reads half a row.  A slot left behind by an error names a row that its
 * transaction's abort kills, and a dead row is never asked about: only
 * rows inserted by a transaction in progress are.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/transam.h"
#include "miscadmin.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "storage/spin.h"

#include "gunique.h"
#include "insert/waiters.h"

typedef struct WaiterSlot
{
	slock_t		mutex;
	TransactionId xid;			/* invalid: the backend waits for nothing */
	Oid			topindex;
	Oid			heapoid;
	ItemPointerData tid;
} WaiterSlot;

static WaiterSlot *slots = NULL;

static Size
waiters_size(void)
{
	return mul_size(MaxBackends, sizeof(WaiterSlot));
}

void
gunique_waiters_shmem_request(void)
{
	RequestAddinShmemSpace(waiters_size());
}

void
gunique_waiters_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	slots = ShmemInitStruct("gunique waiters", waiters_size(), &found);
	if (!found)
		for (int i = 0; i < MaxBackends; i++)
		{
			SpinLockInit(&slots[i].mutex);
			slots[i].xid = InvalidTransactionId;
		}
	LWLockRelease(AddinShmemInitLock);
}

static WaiterSlot *
my_slot(void)
{
	return &slots[gunique_backend_slot()];
}

/* Say that this backend waits, its row inserted into own leaf. */
void
gunique_waiter_set(Oid topindex, Oid heapoid, ItemPointer tid,
				   TransactionId xid)
{
	WaiterSlot *slot = my_slot();

	SpinLockAcquire(&slot->mutex);
	slot->xid = xid;
	slot->topindex = topindex;
	slot->heapoid = heapoid;
	slot->tid = *tid;
	SpinLockRelease(&slot->mutex);
}

/* It waits no more. */
void
gunique_waiter_clear(void)
{
	WaiterSlot *slot = my_slot();

	SpinLockAcquire(&slot->mutex);
	slot->xid = InvalidTransactionId;
	SpinLockRelease(&slot->mutex);
}

/* Is this row, inserted by "xid", a waiter's? */
bool
gunique_waiter_is(Oid topindex, Oid heapoid, ItemPointer tid,
				  TransactionId xid)
{
	for (int i = 0; i < MaxBackends; i++)
	{
		WaiterSlot *slot = &slots[i];
		bool		match;

		if (slot->xid != xid)
			continue;			/* checked again under the spinlock */
		SpinLockAcquire(&slot->mutex);
		match = TransactionIdEquals(slot->xid, xid) &&
			slot->topindex == topindex && slot->heapoid == heapoid &&
			ItemPointerEquals(&slot->tid, tid);
		SpinLockRelease(&slot->mutex);
		if (match)
			return true;
	}
	return false;
}

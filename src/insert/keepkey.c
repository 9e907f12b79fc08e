/*-------------------------------------------------------------------------
 *
 * keepkey.c
 *	  An UPDATE that keeps its key: the proof, read in own leaf, that no
 *	  other partition needs to be searched.
 *
 * A non-HOT UPDATE inserts the new version of a row into every index, with
 * the key the old version had when no key column changed.  The key is then
 * in own leaf's key filter and in its group's (the old version's), so no
 * filter rules it out, and without this every such row would be looked for
 * in the partitions whose filters cannot tell one key from another: with
 * random keys, all of them.
 *
 * Instead, own leaf is searched for the key, and the heap tuples its equal
 * entries lead to (along their HOT chains) are read: if one of them was
 * updated by this transaction into the very tuple being inserted, the
 * insert is the new version of a row that held the key, live, until this
 * transaction updated it, and no other partition needs looking at.  Why
 * that is safe is src/README, I8.  The executor's hint
 * (indexUnchanged) only says when to try; the proof reads the tuples
 * themselves, so a BEFORE trigger that changed the key, or a row that came
 * from another partition, never passes it.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/heapam.h"
#include "access/htup_details.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/tuptable.h"
#include "storage/bufmgr.h"
#include "utils/snapmgr.h"

#include "am/btread.h"
#include "insert/keepkey.h"

typedef struct KeepKeyVisit
{
	ProbeScan  *own;
	ItemPointer newtid;
} KeepKeyVisit;

/*
 * Was the heap tuple in the slot updated by this transaction into the tuple
 * at newtid?  Read under the buffer's share lock: a concurrent locker of
 * the row may turn its xmax into a MultiXactId meanwhile.
 */
static bool
updated_into(TupleTableSlot *slot, ItemPointer newtid)
{
	BufferHeapTupleTableSlot *bslot = (BufferHeapTupleTableSlot *) slot;
	HeapTupleHeader htup = bslot->base.tuple->t_data;
	bool		result = false;

	LockBuffer(bslot->buffer, BUFFER_LOCK_SHARE);
	if (!(htup->t_infomask & HEAP_XMAX_INVALID) &&
		!HEAP_XMAX_IS_LOCKED_ONLY(htup->t_infomask) &&
		!HeapTupleHeaderIndicatesMovedPartitions(htup) &&
		ItemPointerEquals(&htup->t_ctid, newtid) &&
		TransactionIdIsCurrentTransactionId(HeapTupleHeaderGetUpdateXid(htup)))
		result = true;
	LockBuffer(bslot->buffer, BUFFER_LOCK_UNLOCK);
	return result;
}

/*
 * For each heap TID of an entry equal to the key: walk its HOT chain (every
 * member of which has the entry's key) for the old version of the row.
 */
static bool
keepkey_visit(void *arg, ItemPointer htid, bool *dead)
{
	KeepKeyVisit *visit = (KeepKeyVisit *) arg;
	ProbeScan  *own = visit->own;
	ItemPointerData tid = *htid;
	bool		call_again = false;
	bool		all_dead = false;

	do
	{
		if (!table_index_fetch_tuple(own->fetch, &tid, SnapshotAny,
									 own->slot, &call_again, &all_dead))
			return false;
		if (updated_into(own->slot, visit->newtid))
			return true;
	} while (call_again);
	return false;
}

/*
 * Is the tuple at newtid, with the key in values/isnull, the new version
 * of a row of own leaf's partition that had the same key?  "own" is own
 * leaf's scan, ready; the caller holds the key lock.
 */
bool
gunique_update_keeps_key(ProbeScan *own, int nkeys, Datum *values,
						 bool *isnull, ItemPointer newtid)
{
	KeepKeyVisit visit = {own, newtid};
	BlockNumber first;
	bool		found;

	if (!TTS_IS_BUFFERTUPLE(own->slot))
		return false;			/* not heap: nothing to read */
	gunique_bt_set_search_key(own->itup_key, own->index, nkeys, values,
							  isnull);
	found = gunique_bt_search_equal(own->index, own->heap, own->itup_key,
									keepkey_visit, &visit, &first);
	gunique_probescan_done(own);
	return found;
}

/*-------------------------------------------------------------------------
 *
 * btread.c
 *	  Reading a gunique leaf's btree directly.
 *
 * The probe (probe.c) and the merge check (merge.c) descend a leaf's btree
 * with an insertion scan key, as nbtree's own insert does, rather than
 * through an index scan; key-range summaries (summary.c) and ATTACH's
 * range (merge.c) need the smallest and largest key a leaf holds; the merge
 * and key filters (filter.c) read a leaf's pages left to right.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "utils/datum.h"
#include "utils/snapmgr.h"

#include "btread.h"
#include "compat.h"

/*
 * An insertion scan key for the index, without arguments: set them with
 * gunique_bt_set_search_key before each descent.
 */
BTScanInsert
gunique_bt_search_key(Relation index)
{
	BTScanInsert key = _bt_mkscankey(index, NULL);

	_bt_metaversion(index, &key->heapkeyspace, &key->allequalimage);
	return key;
}

/*
 * Point the key at the first "nkeys" key columns of a key, to find the
 * first entry not less than it (no heap TID).
 */
void
gunique_bt_set_search_key(BTScanInsert key, Relation index, int nkeys,
						  Datum *values, bool *isnull)
{
	int16	   *indoption = index->rd_indoption;

	key->keysz = nkeys;
	key->scantid = NULL;
	key->anynullkeys = false;
	for (int i = 0; i < nkeys; i++)
	{
		key->scankeys[i].sk_argument = isnull[i] ? (Datum) 0 : values[i];
		key->scankeys[i].sk_flags = (isnull[i] ? SK_ISNULL : 0) |
			(indoption[i] << SK_BT_INDOPTION_SHIFT);
		key->anynullkeys |= isnull[i];
	}
}

/*
 * The first non-NULL value of the first key column at one end of the index
 * (in index order), dead entries included, copied into the current memory
 * context.  False if the index holds no such entry.
 */
bool
gunique_bt_end_key(Relation heap, Relation index, ScanDirection dir,
				   Datum *value)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(index), 0);
	ScanKeyData notnull;
	IndexScanDesc scan;
	bool		found = false;

	ScanKeyEntryInitialize(&notnull, SK_ISNULL | SK_SEARCHNOTNULL, 1,
						   InvalidStrategy, InvalidOid, InvalidOid,
						   InvalidOid, (Datum) 0);
	scan = gunique_index_beginscan(heap, index, SnapshotAny, 1);
	scan->xs_want_itup = true;
	index_rescan(scan, &notnull, 1, NULL, 0);
	if (index_getnext_tid(scan, dir) != NULL)
	{
		bool		isnull;
		Datum		v = index_getattr(scan->xs_itup, 1, scan->xs_itupdesc,
									  &isnull);

		if (!isnull)
		{
			*value = datumCopy(v, att->attbyval, att->attlen);
			found = true;
		}
	}
	index_endscan(scan);
	return found;
}

/*
 * Read-lock a page of the leaf level, read through "strategy" (or shared
 * buffers' default, if NULL).  A merge or a filter build reads a whole
 * leaf level once: a ring of buffers (BAS_BULKREAD) keeps it from pushing
 * the working set out of shared buffers, as a sequential scan does, and
 * reuses buffers already in the CPU's and the kernel's caches.
 */
Buffer
gunique_bt_read_page(Relation index, BlockNumber blkno,
					 BufferAccessStrategy strategy)
{
	Buffer		buf = ReadBufferExtended(index, MAIN_FORKNUM, blkno,
										 RBM_NORMAL, strategy);

	LockBuffer(buf, BT_READ);
	_bt_checkpage(index, buf);
	return buf;
}

/*
 * Copy leaf page "buf" (read-locked) into "page", BLCKSZ bytes, and release
 * it; deleted and half-dead pages are passed over to the right, read
 * through "strategy".  *next is the copy's right sibling, or
 * InvalidBlockNumber.  False when no page is left.
 *
 * Reading a copy with no buffer held, then its right sibling, sees every
 * entry that was in the leaf level before the first copy was taken: a page
 * that splits later moves entries only to its right, where the walk goes.
 */
bool
gunique_bt_copy_leaf(Relation index, Buffer buf, char *page,
					 BlockNumber *next, BufferAccessStrategy strategy)
{
	for (;;)
	{
		BTPageOpaque opaque;

		memcpy(page, BufferGetPage(buf), BLCKSZ);
		_bt_relbuf(index, buf);
		opaque = BTPageGetOpaque((Page) page);
		*next = P_RIGHTMOST(opaque) ? InvalidBlockNumber : opaque->btpo_next;
		if (!P_IGNORE(opaque))
			return true;
		if (!BlockNumberIsValid(*next))
			return false;
		buf = gunique_bt_read_page(index, *next, strategy);
	}
}

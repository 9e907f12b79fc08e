/*-------------------------------------------------------------------------
 *
 * btread.c
 *	  Reading a gunique leaf's btree directly.
 *
 * Every use of nbtree's internals (its scan keys, descent, page layout and
 * support functions) is here, apart from the access method routine itself
 * (handler.c).  The probe (probe.c) descends a leaf's btree with an
 * insertion scan key and walks the entries equal to the key, as nbtree's
 * own unique check does; summaries (summary.c) and ATTACH's range
 * (merge.c) need the smallest and largest key a leaf holds; the merge and
 * filter builds read a leaf level left to right.  See src/README, I1,
 * and B11 and "Where gunique mirrors PostgreSQL code" for what this
 * relies on.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "catalog/pg_index.h"
#include "miscadmin.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "am/btread.h"

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
static Buffer
bt_read_page(Relation index, BlockNumber blkno,
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
static bool
bt_copy_leaf(Relation index, Buffer buf, char *page, BlockNumber *next,
			 BufferAccessStrategy strategy)
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
		buf = bt_read_page(index, *next, strategy);
	}
}

/* The first item on a leaf page that is not less than the key. */
static OffsetNumber
bt_first_candidate(Relation index, BTScanInsert key, Page page)
{
	OffsetNumber low = P_FIRSTDATAKEY(BTPageGetOpaque(page));
	OffsetNumber high = PageGetMaxOffsetNumber(page) + 1;

	while (low < high)
	{
		OffsetNumber mid = low + (high - low) / 2;

		if (_bt_compare(index, key, page, mid) > 0)
			low = mid + 1;
		else
			high = mid;
	}
	return low;
}

/*
 * Visit the entries equal to the key on one page, from offset "off"; sets
 * *past_key at the first greater one.  True if a visit stopped the search.
 */
static bool
bt_visit_page(Relation index, BTScanInsert key, Buffer buf, OffsetNumber off,
			  GuniqueBtVisit visit, void *arg, bool *past_key)
{
	Page		page = BufferGetPage(buf);
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);

	for (; off <= maxoff; off++)
	{
		ItemId		iid = PageGetItemId(page, off);
		IndexTuple	itup;
		bool		alldead = true;

		if (_bt_compare(index, key, page, off) != 0)
		{
			*past_key = true;
			return false;
		}
		if (ItemIdIsDead(iid))
			continue;			/* known dead to everyone */
		itup = (IndexTuple) PageGetItem(page, iid);
		for (int i = 0; i < gunique_bt_tuple_ntids(itup); i++)
		{
			bool		dead = false;

			if (visit(arg, gunique_bt_tuple_tid(itup, i), &dead))
				return true;
			alldead = alldead && dead;
		}
		/* a hint, set under a share lock as _bt_killitems sets it */
		if (alldead)
		{
			ItemIdMarkDead(iid);
			BTPageGetOpaque(page)->btpo_flags |= BTP_HAS_GARBAGE;
			MarkBufferDirtyHint(buf, true);
		}
	}
	return false;
}

/*
 * Visit every heap TID of the entries equal to the key (set with
 * gunique_bt_set_search_key): one descent of the btree to the first entry
 * not less than the key, then every equal entry, moving right while the
 * high key equals the key, as nbtree's own unique check does.  *first
 * receives the first page the key could be on, where nbtree's unique check
 * looks for serialization conflicts and an index scan for the key takes
 * its predicate lock.  Returns true if a visit stopped the search.  Holds
 * one page read-locked at a time, and nothing on return.
 */
bool
gunique_bt_search_equal(Relation index, Relation heap, BTScanInsert key,
						GuniqueBtVisit visit, void *arg, BlockNumber *first)
{
	Buffer		buf;
	Page		page;
	BTPageOpaque opaque;
	OffsetNumber off;
	bool		stopped = false;
	bool		past_key = false;

	_bt_freestack(gunique_bt_search(index, heap, key, &buf));
	*first = InvalidBlockNumber;
	if (!BufferIsValid(buf))
		return false;			/* the btree is empty */

	*first = BufferGetBlockNumber(buf);
	page = BufferGetPage(buf);
	off = bt_first_candidate(index, key, page);
	for (;;)
	{
		stopped = bt_visit_page(index, key, buf, off, visit, arg, &past_key);
		opaque = BTPageGetOpaque(page);
		if (stopped || past_key || P_RIGHTMOST(opaque) ||
			_bt_compare(index, key, page, P_HIKEY) != 0)
			break;
		/* Equal keys may continue on the next page that is not deleted. */
		do
		{
			if (P_RIGHTMOST(opaque))
				elog(ERROR, "fell off the end of index \"%s\"",
					 RelationGetRelationName(index));
			buf = _bt_relandgetbuf(index, buf, opaque->btpo_next, BT_READ);
			page = BufferGetPage(buf);
			opaque = BTPageGetOpaque(page);
		} while (P_IGNORE(opaque));
		off = P_FIRSTDATAKEY(opaque);
	}
	_bt_relbuf(index, buf);
	return stopped;
}

/*
 * Set up "ssup" to compare column i of the index in index order, through
 * the operator class's sort support if it has one (a direct comparator for
 * most types), else through its comparison function.
 * PrepareSortSupportFromIndexRel would do this, but accepts only btree's
 * own relations.
 */
void
gunique_bt_sortsupport(SortSupport ssup, Relation index, int i)
{
	Oid			opfamily = index->rd_opfamily[i];
	Oid			opcintype = index->rd_opcintype[i];
	Oid			sortsupport;

	memset(ssup, 0, sizeof(SortSupportData));
	ssup->ssup_cxt = CurrentMemoryContext;
	ssup->ssup_collation = index->rd_indcollation[i];
	ssup->ssup_reverse = (index->rd_indoption[i] & INDOPTION_DESC) != 0;
	ssup->ssup_nulls_first = (index->rd_indoption[i] & INDOPTION_NULLS_FIRST) != 0;
	ssup->ssup_attno = i + 1;

	sortsupport = get_opfamily_proc(opfamily, opcintype, opcintype,
									BTSORTSUPPORT_PROC);
	if (OidIsValid(sortsupport))
		OidFunctionCall1(sortsupport, PointerGetDatum(ssup));
	if (ssup->comparator == NULL)
		PrepareSortSupportComparisonShim(get_opfamily_proc(opfamily, opcintype,
														   opcintype,
														   BTORDER_PROC),
										 ssup);
}

/*
 * Read a leaf level through "strategy": see bt_read_page and bt_copy_leaf
 * for why a copy, and why a ring of buffers.
 */
void
gunique_bt_reader_init(GuniqueBtReader *reader, Relation index,
					   BufferAccessStrategy strategy)
{
	memset(reader, 0, sizeof(GuniqueBtReader));
	reader->index = index;
	reader->strategy = strategy;
	reader->page = palloc(BLCKSZ);
	reader->next = InvalidBlockNumber;
	reader->off = FirstOffsetNumber;
	reader->maxoff = InvalidOffsetNumber;	/* nothing read yet */
}

/* Copy leaf page "buf" (read-locked), released at once; false if none. */
static bool
bt_reader_load(GuniqueBtReader *reader, Buffer buf)
{
	if (!BufferIsValid(buf) ||
		!bt_copy_leaf(reader->index, buf, reader->page, &reader->next,
					  reader->strategy))
		return false;
	reader->off = P_FIRSTDATAKEY(BTPageGetOpaque((Page) reader->page));
	reader->maxoff = PageGetMaxOffsetNumber((Page) reader->page);
	reader->pages_read++;
	CHECK_FOR_INTERRUPTS();
	return true;
}

/*
 * Does the reader skip its page's entries?  Every change to an entry of a
 * WAL-logged btree's page is a WAL record that sets the page's LSN to its
 * end, after the change: a page whose LSN is not past min_lsn holds no entry
 * added since an insert position read as min_lsn.
 */
static bool
bt_reader_unchanged(GuniqueBtReader *reader)
{
	return reader->min_lsn != InvalidXLogRecPtr &&
		reader->off == P_FIRSTDATAKEY(BTPageGetOpaque((Page) reader->page)) &&
		PageGetLSN((Page) reader->page) <= reader->min_lsn;
}

/* Start at the leftmost leaf page; false if the btree is empty. */
bool
gunique_bt_reader_start(GuniqueBtReader *reader)
{
	return bt_reader_load(reader,
						  gunique_bt_get_endpoint(reader->index, 0, false));
}

/*
 * Start at the leaf page where "first", a value of the first key column,
 * would be; false if the btree is empty.
 */
bool
gunique_bt_reader_start_at(GuniqueBtReader *reader, Relation heap,
						   Datum first)
{
	BTScanInsert key = gunique_bt_search_key(reader->index);
	bool		isnull = false;
	Buffer		buf;

	gunique_bt_set_search_key(key, reader->index, 1, &first, &isnull);
	_bt_freestack(gunique_bt_search(reader->index, heap, key, &buf));
	pfree(key);
	return bt_reader_load(reader, buf);
}

/*
 * The next entry of the leaf level that is not LP_DEAD (dead to everyone),
 * in index order, or NULL at its end.  It points into the reader's copy of
 * its page, valid until the next call.
 */
IndexTuple
gunique_bt_reader_next(GuniqueBtReader *reader)
{
	Page		page = (Page) reader->page;

	reader->high_key = false;
	for (;;)
	{
		ItemId		iid;

		if (reader->off > reader->maxoff)
		{
			if (!BlockNumberIsValid(reader->next) ||
				!bt_reader_load(reader, bt_read_page(reader->index,
													 reader->next,
													 reader->strategy)))
				return NULL;
			continue;
		}
		if (bt_reader_unchanged(reader))
		{
			/* a page no WAL record changed since min_lsn: its high key */
			reader->off = reader->maxoff + 1;
			if (P_RIGHTMOST(BTPageGetOpaque(page)))
				return NULL;
			reader->high_key = true;
			return (IndexTuple) PageGetItem(page,
											PageGetItemId(page, P_HIKEY));
		}
		iid = PageGetItemId(page, reader->off++);
		if (!ItemIdIsDead(iid))
			return (IndexTuple) PageGetItem(page, iid);
	}
}

void
gunique_bt_reader_end(GuniqueBtReader *reader)
{
	pfree(reader->page);
	reader->page = NULL;
}

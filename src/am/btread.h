/*-------------------------------------------------------------------------
 *
 * btread.h
 *	  Reading a gunique leaf's btree directly: the only module, beside the
 *	  access method routine (handler.c), that uses nbtree's internals.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_BTREAD_H
#define GUNIQUE_BTREAD_H

#include "access/nbtree.h"
#include "access/sdir.h"
#include "access/xlogdefs.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"
#include "utils/sortsupport.h"

/*
 * A leaf level read left to right, one page copy at a time, with no buffer
 * held between pages; see gunique_bt_reader_next.
 */
typedef struct GuniqueBtReader
{
	Relation	index;
	BufferAccessStrategy strategy;
	char	   *page;			/* a copy, BLCKSZ bytes */
	BlockNumber next;			/* its right sibling, or InvalidBlockNumber */
	OffsetNumber off;			/* next item */
	OffsetNumber maxoff;
	BlockNumber pages_read;

	/*
	 * With min_lsn set, a page whose LSN is not past it (changed by no WAL
	 * record since) yields no entry, only its high key, with high_key set.
	 */
	XLogRecPtr	min_lsn;
	bool		high_key;
} GuniqueBtReader;

/*
 * Called for each heap TID of an entry equal to the key searched for; true
 * stops the search.  Setting *dead says that the TID's rows are dead to
 * everyone: an entry whose TIDs all are is marked LP_DEAD, as an index
 * scan marks it, and nbtree's own check of the insert that follows skips
 * it.
 */
typedef bool (*GuniqueBtVisit) (void *arg, ItemPointer tid, bool *dead);

extern BTScanInsert gunique_bt_search_key(Relation index);
extern void gunique_bt_set_search_key(BTScanInsert key, Relation index,
									  int nkeys, Datum *values, bool *isnull);
extern bool gunique_bt_search_equal(Relation index, Relation heap,
									BTScanInsert key, GuniqueBtVisit visit,
									void *arg, BlockNumber *first);
extern bool gunique_bt_end_key(Relation heap, Relation index,
							   ScanDirection dir, Datum *value);
extern void gunique_bt_sortsupport(SortSupport ssup, Relation index, int i);

extern void gunique_bt_reader_init(GuniqueBtReader *reader, Relation index,
								   BufferAccessStrategy strategy);
extern bool gunique_bt_reader_start(GuniqueBtReader *reader);
extern bool gunique_bt_reader_start_at(GuniqueBtReader *reader,
									   Relation heap, Datum first);
extern IndexTuple gunique_bt_reader_next(GuniqueBtReader *reader);
extern void gunique_bt_reader_end(GuniqueBtReader *reader);

/* The heap TIDs of an entry: one, or a posting list's. */
static inline int
gunique_bt_tuple_ntids(IndexTuple itup)
{
	return BTreeTupleIsPosting(itup) ? BTreeTupleGetNPosting(itup) : 1;
}

static inline ItemPointer
gunique_bt_tuple_tid(IndexTuple itup, int i)
{
	return BTreeTupleIsPosting(itup) ? BTreeTupleGetPostingN(itup, i) :
		&itup->t_tid;
}

#endif							/* GUNIQUE_BTREAD_H */

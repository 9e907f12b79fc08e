/*-------------------------------------------------------------------------
 *
 * merge.c
 *	  The CREATE / ATTACH check: one merge of the leaves' sorted keys.
 *
 * A k-way merge of every leaf's entries in index order, a leaf page at a
 * time through a ring of buffers (btread.c), finds every key that two live
 * rows share, across partitions and within one; see src/README, "DDL and
 * the merge".  The keys it reads fill the leaves' and the tree's key filters
 * (summary.c).
 *
 * The caller must hold a lock that keeps writers out of every leaf for the
 * duration of the check; gunique_check_tree takes ShareLock on each leaf
 * table itself, which CREATE INDEX already holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "catalog/partition.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "commands/progress.h"
#include "executor/tuptable.h"
#include "lib/binaryheap.h"
#include "pgstat.h"
#include "storage/lmgr.h"
#include "utils/backend_status.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/sortsupport.h"

#include "compat.h"
#include "am/btread.h"
#include "am/scope.h"
#include "ddl/concurrent.h"
#include "ddl/merge.h"
#include "locate/summary.h"

/*
 * A leaf's entries in index order, read a page at a time: each leaf page is
 * copied under a share lock and its entries are then read from the copy
 * without holding any buffer, while the check's ShareLock keeps writers
 * (and VACUUM) away from the leaf.
 */
typedef struct MergeCursor
{
	Relation	heap;
	Relation	index;
	IndexFetchTableData *fetch;
	TupleTableSlot *slot;
	bool		skip;			/* holds nothing the merge needs */

	/* The leaf level, read through the merge's ring of buffers. */
	GuniqueBtReader reader;
	IndexTuple	posting;		/* entry whose heap TIDs are being read */
	int			nposting;
	int			iposting;

	/* With a range (ATTACH), entries outside it are passed over. */
	bool		bounded;
	Datum		first;			/* first key column, index order */
	Datum		last;

	/* Pages of the leaf (metapage aside), pages read, and where to count. */
	BlockNumber npages;
	BlockNumber nread;
	int64	   *blocks_done;	/* the merge's count, or NULL: no report */

	/* The current entry. */
	ItemPointerData tid;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
} MergeCursor;

typedef struct MergeState
{
	int			nkeys;
	bool		nulls_not_distinct;
	SortSupportData ssup[INDEX_MAX_KEYS];	/* index order of each column */
	int16		typlen[INDEX_MAX_KEYS];
	bool		typbyval[INDEX_MAX_KEYS];
	int			ncursors;
	MergeCursor *cursors;

	/* The current run of equal keys. */
	MemoryContext runcxt;		/* holds the run's key, if copied */
	bool		runcopied;		/* runcxt holds something */
	bool		inrun;
	Datum		runvalues[INDEX_MAX_KEYS];
	bool		runisnull[INDEX_MAX_KEYS];
	struct MergeEntry *run;		/* the run's entries */
	int			nrun;
	int			maxrun;

	/* The key filters filled from the leaves read whole, or NULL. */
	GuniqueSummaryMerge *summaries;

	/* Visibility of the rows behind equal keys. */
	Snapshot	snapshot;

	/* Reporting to pg_stat_progress_create_index? */
	bool		progress;
	int64		blocks_done;

	/* What was found. */
	int64		nduplicates;
	GuniqueDuplicateCallback callback;
	void	   *callback_arg;
} MergeState;

/* How a check keeps writers out (check_tree). */
typedef enum CheckMode
{
	CHECK_LOCKED,				/* ShareLock on every leaf throughout */
	CHECK_CONCURRENT,			/* writers run: CREATE INDEX CONCURRENTLY */
	CHECK_ATTACHED_ONLINE		/* writers run, then ShareLock for what
								 * changed: ATTACH to a valid tree */
} CheckMode;

static void check_tree(Oid topindexoid, Oid attached, Oid only_attached,
					   CheckMode mode);

typedef struct MergeEntry
{
	int			cursor;
	ItemPointerData tid;
} MergeEntry;

static void
merge_state_init(MergeState *state, Relation index)
{
	state->nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	state->nulls_not_distinct = index->rd_index->indnullsnotdistinct;
	for (int i = 0; i < state->nkeys; i++)
	{
		Form_pg_attribute att = TupleDescAttr(RelationGetDescr(index), i);

		gunique_bt_sortsupport(&state->ssup[i], index, i);
		state->typlen[i] = att->attlen;
		state->typbyval[i] = att->attbyval;
	}
	state->runcxt = AllocSetContextCreate(CurrentMemoryContext,
										  "gunique merge run",
										  ALLOCSET_SMALL_SIZES);
	state->maxrun = 16;
	state->run = palloc(sizeof(MergeEntry) * state->maxrun);
}

/* Compare two keys in index order (NULLs compare equal to each other). */
static int
merge_compare_keys(MergeState *state, Datum *v1, bool *n1, Datum *v2, bool *n2)
{
	for (int i = 0; i < state->nkeys; i++)
	{
		int			c = ApplySortComparator(v1[i], n1[i], v2[i], n2[i],
											&state->ssup[i]);

		if (c != 0)
			return c;
	}
	return 0;
}

/* binaryheap keeps its largest element first: order cursors by key, reversed. */
static int
merge_heap_cmp(Datum a, Datum b, void *arg)
{
	MergeState *state = (MergeState *) arg;
	MergeCursor *ca = &state->cursors[DatumGetInt32(a)];
	MergeCursor *cb = &state->cursors[DatumGetInt32(b)];

	return -merge_compare_keys(state, ca->values, ca->isnull,
							   cb->values, cb->isnull);
}

/* Count the pages the reader has read since last asked, for the report. */
static void
merge_cursor_count_pages(MergeCursor *cursor)
{
	BlockNumber read = cursor->reader.pages_read;

	if (read == cursor->nread)
		return;
	if (cursor->blocks_done != NULL)
	{
		*cursor->blocks_done += read - cursor->nread;
		pgstat_progress_update_param(PROGRESS_SCAN_BLOCKS_DONE,
									 *cursor->blocks_done);
	}
	cursor->nread = read;
}

/* Where is the entry against the cursor's range? -1 before, 1 after. */
static int
merge_cursor_in_range(MergeState *state, MergeCursor *cursor)
{
	SortSupport ssup = &state->ssup[0];

	if (!cursor->bounded)
		return 0;
	if (ApplySortComparator(cursor->values[0], cursor->isnull[0],
							cursor->first, false, ssup) < 0)
		return -1;
	if (ApplySortComparator(cursor->values[0], cursor->isnull[0],
							cursor->last, false, ssup) > 0)
		return 1;
	return 0;
}

/* Step a cursor to its leaf's next entry; false at the end of the leaf. */
static bool
merge_cursor_next(MergeState *state, MergeCursor *cursor)
{
	TupleDesc	desc = RelationGetDescr(cursor->index);

	for (;;)
	{
		IndexTuple	itup;
		int			where;

		/* One entry per heap TID of a posting list tuple. */
		if (cursor->posting != NULL &&
			cursor->iposting < cursor->nposting)
		{
			cursor->tid = *gunique_bt_tuple_tid(cursor->posting,
												cursor->iposting++);
			return true;
		}
		cursor->posting = NULL;

		itup = gunique_bt_reader_next(&cursor->reader);
		merge_cursor_count_pages(cursor);
		if (itup == NULL)
			return false;
		if (cursor->reader.high_key)
		{
			/* a page passed over: the pages right of it hold keys >= it */
			cursor->values[0] = index_getattr(itup, 1, desc,
											  &cursor->isnull[0]);
			if (merge_cursor_in_range(state, cursor) > 0)
				return false;
			continue;
		}
		for (int i = 0; i < state->nkeys; i++)
			cursor->values[i] = index_getattr(itup, i + 1, desc,
											  &cursor->isnull[i]);
		where = merge_cursor_in_range(state, cursor);
		if (where < 0)
			continue;
		if (where > 0)
			return false;
		/* every key of a leaf read whole goes into the filters */
		if (state->summaries != NULL && !cursor->bounded)
			gunique_summary_merge_key(state->summaries,
									  cursor - state->cursors,
									  cursor->values, cursor->isnull);
		cursor->posting = itup;
		cursor->nposting = gunique_bt_tuple_ntids(itup);
		cursor->iposting = 0;
	}
}

/*
 * Start reading the leaf at its first page, or with a range at the page
 * where its first key would be.
 */
static void
merge_cursor_start(MergeCursor *cursor)
{
	bool		found;

	found = cursor->bounded ?
		gunique_bt_reader_start_at(&cursor->reader, cursor->heap,
								   cursor->first) :
		gunique_bt_reader_start(&cursor->reader);
	merge_cursor_count_pages(cursor);
	if (!found)
		cursor->skip = true;	/* the btree is empty */
}

static void
merge_cursor_open(MergeCursor *cursor, GuniqueLeaf *leaf,
				  BufferAccessStrategy strategy)
{
	/* locked already (gunique_tree_leaves_locked) */
	cursor->heap = table_open(leaf->heapoid, NoLock);
	cursor->index = index_open(leaf->indexoid, NoLock);
	cursor->fetch = table_index_fetch_begin(cursor->heap);
	cursor->slot = table_slot_create(cursor->heap, NULL);
	gunique_bt_reader_init(&cursor->reader, cursor->index, strategy);
	cursor->npages = RelationGetNumberOfBlocks(cursor->index);
	if (cursor->npages > 0)
		cursor->npages--;		/* the metapage is not read */
}

static void
merge_cursor_close(MergeCursor *cursor)
{
	gunique_bt_reader_end(&cursor->reader);
	ExecDropSingleTupleTableSlot(cursor->slot);
	table_index_fetch_end(cursor->fetch);
	index_close(cursor->index, NoLock);
	table_close(cursor->heap, NoLock);
}

/*
 * What one pass of ATTACH's check tells the next (gunique_check_attached).
 */
typedef struct MergePass
{
	XLogRecPtr	min_lsn;		/* the insert position as the last began */
	List	   *seen_indexes;	/* the leaf indexes it read */
	List	   *seen_files;		/* and their relfilenodes */
} MergePass;

/*
 * ATTACH: the rows already in the tree were unique among themselves, so only
 * keys equal to a key of the attached leaves matter, and the old leaves need
 * to be merged only over the range of the attached leaves' first key column.
 * With keys that follow the partitioning, that range holds none of theirs.
 */
typedef struct MergeRange
{
	bool		found;			/* the attached leaves hold a non-NULL key */
	Datum		first;			/* their smallest first column, index order */
	Datum		last;			/* and their largest */
} MergeRange;

/* Is the leaf under the table being attached? */
static bool
leaf_is_attached(GuniqueLeaf *leaf, Oid attached)
{
	List	   *ancestors;
	bool		result;

	if (leaf->heapoid == attached)
		return true;
	ancestors = get_partition_ancestors(leaf->heapoid);
	result = list_member_oid(ancestors, attached);
	list_free(ancestors);
	return result;
}

/*
 * Widen the range by a leaf's first non-NULL first column in one direction,
 * dead entries included.
 */
static void
merge_range_widen(MergeState *state, MergeCursor *cursor, ScanDirection dir,
				  MergeRange *range)
{
	SortSupport ssup = &state->ssup[0];
	Datum		value;

	if (!gunique_bt_end_key(cursor->heap, cursor->index, dir, &value))
		return;
	if (!range->found)
		range->first = range->last = value;
	else if (ApplySortComparator(value, false, range->first, false, ssup) < 0)
		range->first = value;
	else if (ApplySortComparator(value, false, range->last, false, ssup) > 0)
		range->last = value;
	range->found = true;
}

/*
 * Limit the old leaves' cursors to the attached leaves' range.  Not with
 * NULLS NOT DISTINCT, where NULL keys conflict too: then all is merged.
 */
static void
merge_restrict_to_attached(MergeState *state, List *leaves, Oid attached)
{
	MergeRange	range = {0};
	bool	   *isnew = palloc(sizeof(bool) * Max(state->ncursors, 1));
	ListCell   *lc;

	foreach(lc, leaves)
	{
		int			c = foreach_current_index(lc);

		isnew[c] = leaf_is_attached(lfirst(lc), attached);
		if (isnew[c])
		{
			merge_range_widen(state, &state->cursors[c], ForwardScanDirection,
							  &range);
			merge_range_widen(state, &state->cursors[c], BackwardScanDirection,
							  &range);
		}
	}
	for (int c = 0; c < state->ncursors; c++)
	{
		MergeCursor *cursor = &state->cursors[c];

		if (isnew[c])
			continue;
		if (!range.found)
		{
			cursor->skip = true;
			continue;
		}
		cursor->bounded = true;
		cursor->first = range.first;
		cursor->last = range.last;
	}
	pfree(isnew);
}

/*
 * A pass of ATTACH's check after the first (gunique_check_attached): the
 * old leaves' entries were merged already with writers running, so only
 * pages changed since the pass before began are read again, of a leaf
 * that pass read: the same index, in the same file.  One replaced since
 * (REINDEX CONCURRENTLY, or a rewrite: the locks are let go between
 * passes) is read over the range again, as is a btree without WAL
 * (unlogged, temporary), whose pages keep no LSN.
 */
static bool
pass_saw(MergePass *pass, Relation index)
{
	ListCell   *lc;
	ListCell   *lc2;

	forboth(lc, pass->seen_indexes, lc2, pass->seen_files)
	{
		if (lfirst_oid(lc) == RelationGetRelid(index) &&
			lfirst_oid(lc2) == index->rd_rel->relfilenode)
			return true;
	}
	return false;
}

static void
merge_only_changed(MergeState *state, List *leaves, Oid attached,
				   MergePass *pass)
{
	ListCell   *lc;

	foreach(lc, leaves)
	{
		MergeCursor *cursor = &state->cursors[foreach_current_index(lc)];

		if (!leaf_is_attached(lfirst(lc), attached) &&
			RelationNeedsWAL(cursor->index) && pass_saw(pass, cursor->index))
			cursor->reader.min_lsn = pass->min_lsn;
	}
}

/* What this pass read, for the next: each leaf's index and its file. */
static void
pass_remember(MergePass *pass, MergeState *state)
{
	list_free(pass->seen_indexes);
	list_free(pass->seen_files);
	pass->seen_indexes = NIL;
	pass->seen_files = NIL;
	for (int c = 0; c < state->ncursors; c++)
	{
		Relation	index = state->cursors[c].index;

		pass->seen_indexes = lappend_oid(pass->seen_indexes,
										 RelationGetRelid(index));
		pass->seen_files = lappend_oid(pass->seen_files,
									   index->rd_rel->relfilenode);
	}
}

/*
 * Is the row behind this index entry visible to the check's snapshot?
 * Without one (the check that lets writers in), is it live once any
 * transaction inserting or deleting it has ended, as _bt_check_unique asks:
 * wait for that transaction, then look again.
 */
static bool
merge_entry_live(MergeCursor *cursor, ItemPointer tid, Snapshot snapshot)
{
	for (;;)
	{
		ItemPointerData tmp = *tid;
		bool		call_again = false;
		bool		all_dead = false;
		SnapshotData dirty;
		TransactionId xwait;
		bool		found;

		if (snapshot == NULL)
			InitDirtySnapshot(dirty);
		found = table_index_fetch_tuple(cursor->fetch, &tmp,
										snapshot != NULL ? snapshot : &dirty,
										cursor->slot, &call_again, &all_dead);
		ExecClearTuple(cursor->slot);
		if (!found || snapshot != NULL)
			return found;
		xwait = TransactionIdIsValid(dirty.xmin) ? dirty.xmin : dirty.xmax;
		if (!TransactionIdIsValid(xwait))
			return true;
		table_index_fetch_reset(cursor->fetch);
		XactLockTableWait(xwait, cursor->heap, tid, XLTW_InsertIndexUnique);
	}
}

/* A run of equal keys has ended: is it a duplicate? */
static void
merge_close_run(MergeState *state)
{
	MergeCursor *holders[2] = {NULL, NULL};
	int			nlive = 0;

	if (state->nrun < 2)
		return;

	for (int i = 0; i < state->nrun; i++)
	{
		MergeEntry *entry = &state->run[i];
		MergeCursor *cursor = &state->cursors[entry->cursor];

		if (!merge_entry_live(cursor, &entry->tid, state->snapshot))
			continue;
		if (nlive < 2)
			holders[nlive] = cursor;
		if (++nlive >= 2)
			break;
	}
	if (nlive < 2)
		return;

	state->nduplicates++;
	state->callback(state->callback_arg, holders[0]->index,
					state->runvalues, state->runisnull,
					holders[0]->heap, holders[1]->heap);
}

/* Can two equal-comparing keys conflict?  Not if NULLs are distinct. */
static bool
merge_key_can_conflict(MergeState *state, bool *isnull)
{
	if (state->nulls_not_distinct)
		return true;
	for (int i = 0; i < state->nkeys; i++)
		if (isnull[i])
			return false;
	return true;
}

/* Start a run of equal keys with the cursor's key. */
static void
merge_start_run(MergeState *state, MergeCursor *cursor)
{
	if (state->runcopied)
		MemoryContextReset(state->runcxt);
	state->runcopied = false;
	for (int i = 0; i < state->nkeys; i++)
	{
		state->runisnull[i] = cursor->isnull[i];
		state->runvalues[i] = cursor->values[i];
		if (!cursor->isnull[i] && !state->typbyval[i])
		{
			MemoryContext oldcxt = MemoryContextSwitchTo(state->runcxt);

			state->runvalues[i] = datumCopy(cursor->values[i], false,
											state->typlen[i]);
			MemoryContextSwitchTo(oldcxt);
			state->runcopied = true;
		}
	}
	state->nrun = 0;
	state->inrun = true;
}

/* Take the smallest entry of the merge into the current run. */
static void
merge_consume(MergeState *state, int c)
{
	MergeCursor *cursor = &state->cursors[c];

	if (!state->inrun ||
		merge_compare_keys(state, state->runvalues, state->runisnull,
						   cursor->values, cursor->isnull) != 0 ||
		!merge_key_can_conflict(state, cursor->isnull))
	{
		if (state->inrun)
			merge_close_run(state);
		merge_start_run(state, cursor);
	}

	if (state->nrun == state->maxrun)
	{
		state->maxrun *= 2;
		state->run = repalloc(state->run, sizeof(MergeEntry) * state->maxrun);
	}
	state->run[state->nrun].cursor = c;
	state->run[state->nrun].tid = cursor->tid;
	state->nrun++;
}

/* What gunique_check_tree remembers of the first duplicate. */
typedef struct CheckFirst
{
	char	   *key;
	char	   *holders[2];
	bool		same;
} CheckFirst;

static void
check_remember_first(void *arg, Relation index, Datum *values, bool *isnull,
					 Relation heap1, Relation heap2)
{
	CheckFirst *first = (CheckFirst *) arg;

	if (first->holders[0] != NULL)
		return;
	first->key = BuildIndexValueDescription(index, values, isnull);
	first->holders[0] = pstrdup(RelationGetRelationName(heap1));
	first->holders[1] = pstrdup(RelationGetRelationName(heap2));
	first->same = RelationGetRelid(heap1) == RelationGetRelid(heap2);
}

/*
 * The detail of check_report's error: the first duplicate key, or "A key"
 * when the user may not see it, with the partitions that hold it and, when
 * there are more, how many keys are duplicated in all.  Each variant is one
 * whole message, for translation.
 */
static int
check_errdetail(CheckFirst *first, int64 nduplicates)
{
	const char *key = first->key;
	const char *p1 = first->holders[0];
	const char *p2 = first->holders[1];
	long long	n = (long long) nduplicates;

	if (nduplicates == 1)
	{
		if (key == NULL)
			return first->same ?
				errdetail("A key is duplicated in partition \"%s\".", p1) :
				errdetail("A key is duplicated in partitions \"%s\" and \"%s\".",
						  p1, p2);
		return first->same ?
			errdetail("Key %s is duplicated in partition \"%s\".", key, p1) :
			errdetail("Key %s is duplicated in partitions \"%s\" and \"%s\".",
					  key, p1, p2);
	}
	if (key == NULL)
		return first->same ?
			errdetail_plural("A key is duplicated in partition \"%s\"; %lld key is duplicated in all.",
							 "A key is duplicated in partition \"%s\"; %lld keys are duplicated in all.",
							 (unsigned long) nduplicates, p1, n) :
			errdetail_plural("A key is duplicated in partitions \"%s\" and \"%s\"; %lld key is duplicated in all.",
							 "A key is duplicated in partitions \"%s\" and \"%s\"; %lld keys are duplicated in all.",
							 (unsigned long) nduplicates, p1, p2, n);
	return first->same ?
		errdetail_plural("Key %s is duplicated in partition \"%s\"; %lld key is duplicated in all.",
						 "Key %s is duplicated in partition \"%s\"; %lld keys are duplicated in all.",
						 (unsigned long) nduplicates, key, p1, n) :
		errdetail_plural("Key %s is duplicated in partitions \"%s\" and \"%s\"; %lld key is duplicated in all.",
						 "Key %s is duplicated in partitions \"%s\" and \"%s\"; %lld keys are duplicated in all.",
						 (unsigned long) nduplicates, key, p1, p2, n);
}

static void
check_report(CheckFirst *first, int64 nduplicates, Relation topindex,
			 Oid attached)
{
	Relation	table = table_open(topindex->rd_index->indrelid, AccessShareLock);

	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 OidIsValid(attached) ?
			 errmsg("could not attach partition \"%s\": its keys would violate unique index \"%s\"",
					get_rel_name(attached), RelationGetRelationName(topindex)) :
			 errmsg("could not create unique index \"%s\"",
					RelationGetRelationName(topindex)),
			 check_errdetail(first, nduplicates),
			 errtableconstraint(table, RelationGetRelationName(topindex))));
}

/*
 * Report the check in pg_stat_progress_create_index, as a build phase of the
 * top index ("building index: checking uniqueness across partitions"; the
 * view names the phase through the access method in the report).  No
 * command is in progress when CREATE INDEX (DefineIndex has ended its own
 * report) or ATTACH gets here, so the check starts one and ends it after.
 * Should a CREATE INDEX report be in progress all the same, the check shows
 * itself in it and leaves it to its owner; any other command's report is
 * left alone, and the check then reports nothing.  Returns whether the
 * check reports, and sets *started if it started the command.
 */
static bool
merge_progress_start(Relation topindex, bool *started)
{
	const int	params[] = {
		PROGRESS_CREATEIDX_ACCESS_METHOD_OID,
		PROGRESS_CREATEIDX_PHASE,
		PROGRESS_CREATEIDX_SUBPHASE,
		PROGRESS_SCAN_BLOCKS_TOTAL,
		PROGRESS_SCAN_BLOCKS_DONE,
		PROGRESS_CREATEIDX_TUPLES_TOTAL,
		PROGRESS_CREATEIDX_TUPLES_DONE,
	};
	const int64 values[] = {
		topindex->rd_rel->relam,
		PROGRESS_CREATEIDX_PHASE_BUILD,
		GUNIQUE_PHASE_MERGE_CHECK,
		0, 0, 0, 0,
	};
	ProgressCommandType current = MyBEEntry != NULL ?
		MyBEEntry->st_progress_command : PROGRESS_COMMAND_INVALID;

	*started = false;
	if (current == PROGRESS_COMMAND_INVALID)
	{
		pgstat_progress_start_command(PROGRESS_COMMAND_CREATE_INDEX,
									  topindex->rd_index->indrelid);
		pgstat_progress_update_param(PROGRESS_CREATEIDX_COMMAND,
									 PROGRESS_CREATEIDX_COMMAND_CREATE);
		pgstat_progress_update_param(PROGRESS_CREATEIDX_INDEX_OID,
									 RelationGetRelid(topindex));
		*started = true;
	}
	else if (current != PROGRESS_COMMAND_CREATE_INDEX)
		return false;
	pgstat_progress_update_multi_param(lengthof(params), params, values);
	return true;
}

/*
 * A cursor is done with its leaf: count the pages it did not read (internal
 * and deleted pages, or the rest of a leaf read over ATTACH's range only),
 * so that blocks_done reaches blocks_total when the merge ends.
 */
static void
merge_progress_leaf_done(MergeState *state, MergeCursor *cursor)
{
	if (!state->progress || cursor->nread >= cursor->npages)
		return;
	state->blocks_done += cursor->npages - cursor->nread;
	cursor->nread = cursor->npages;
	pgstat_progress_update_param(PROGRESS_SCAN_BLOCKS_DONE,
								 state->blocks_done);
}

/* Report the pages of every leaf as the check's total, before it reads any. */
static void
merge_progress_begin(MergeState *state)
{
	int64		total = 0;

	if (!state->progress)
		return;
	for (int c = 0; c < state->ncursors; c++)
	{
		total += state->cursors[c].npages;
		state->cursors[c].blocks_done = &state->blocks_done;
	}
	pgstat_progress_update_param(PROGRESS_SCAN_BLOCKS_TOTAL, total);
}

/*
 * Let the leaves read whole, and the tree, get key filters from what the
 * merge reads (summary.c).  Before the merge starts, "skip" means left out
 * by ATTACH's range.
 */
static void
merge_fill_begin(MergeState *state, Relation topindex)
{
	Relation   *indexes = palloc(sizeof(Relation) * Max(state->ncursors, 1));
	bool	   *whole = palloc(sizeof(bool) * Max(state->ncursors, 1));

	for (int c = 0; c < state->ncursors; c++)
	{
		indexes[c] = state->cursors[c].index;
		whole[c] = !state->cursors[c].bounded && !state->cursors[c].skip &&
			state->cursors[c].reader.min_lsn == InvalidXLogRecPtr;
	}
	state->summaries = gunique_summary_merge_begin(topindex, indexes, whole,
												   state->ncursors);
	pfree(indexes);
	pfree(whole);
}

/* Merge the cursors' entries in key order. */
static void
merge_run(MergeState *state)
{
	binaryheap *heap;
	int64		done = 0;

	merge_progress_begin(state);
	heap = binaryheap_allocate(Max(state->ncursors, 1), merge_heap_cmp, state);
	for (int c = 0; c < state->ncursors; c++)
	{
		MergeCursor *cursor = &state->cursors[c];

		if (!cursor->skip)
			merge_cursor_start(cursor);
		if (!cursor->skip && merge_cursor_next(state, cursor))
			binaryheap_add_unordered(heap, Int32GetDatum(c));
		else
			merge_progress_leaf_done(state, cursor);
	}
	binaryheap_build(heap);

	while (!binaryheap_empty(heap))
	{
		int			c = DatumGetInt32(binaryheap_first(heap));

		merge_consume(state, c);
		if (merge_cursor_next(state, &state->cursors[c]))
			binaryheap_replace_first(heap, Int32GetDatum(c));
		else
		{
			(void) binaryheap_remove_first(heap);
			merge_progress_leaf_done(state, &state->cursors[c]);
		}

		if ((++done & 1023) == 0)
		{
			if (state->progress)
				pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE,
											 done);
			CHECK_FOR_INTERRUPTS();
		}
	}
	if (state->progress)
		pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, done);
	if (state->inrun)
		merge_close_run(state);
	binaryheap_free(heap);
}

/*
 * gunique_merge_tree, reporting its progress or not, and with "pass" one
 * of ATTACH's passes: after the first, reading only what changed since
 * the one before (merge_only_changed).  A pass with writers running lets
 * go of the leaves' locks once it has read them: REINDEX CONCURRENTLY of
 * a leaf, which waits for every holder of the leaf's table before it
 * stops maintaining the old index, would otherwise wait for the ATTACH,
 * whose last pass waits for it (src/README, 4.6).
 */
static int64
merge_tree(Oid topindexoid, LOCKMODE lockmode, Snapshot snapshot,
		   Oid attached, bool fill_filters,
		   GuniqueDuplicateCallback callback, void *arg, bool progress,
		   MergePass *pass)
{
	Relation	topindex = index_open(topindexoid, AccessShareLock);
	List	   *leaves = gunique_tree_leaves_locked(topindexoid, lockmode);
	MergeState *state = palloc0(sizeof(MergeState));
	BufferAccessStrategy strategy = GetAccessStrategy(BAS_BULKREAD);
	ListCell   *lc;
	int64		nduplicates;

	merge_state_init(state, topindex);
	state->snapshot = snapshot;
	state->progress = progress;
	state->callback = callback;
	state->callback_arg = arg;
	state->ncursors = list_length(leaves);
	state->cursors = palloc0(sizeof(MergeCursor) * Max(state->ncursors, 1));

	foreach(lc, leaves)
		merge_cursor_open(&state->cursors[foreach_current_index(lc)],
						  lfirst(lc), strategy);
	if (OidIsValid(attached) && !state->nulls_not_distinct)
		merge_restrict_to_attached(state, leaves, attached);
	if (pass != NULL && pass->min_lsn != InvalidXLogRecPtr)
		merge_only_changed(state, leaves, attached, pass);
	if (!fill_filters)
		merge_run(state);
	else
	{
		Assert(lockmode >= ShareLock);
		merge_fill_begin(state, topindex);
		PG_TRY();
		{
			merge_run(state);
		}
		PG_CATCH();
		{
			gunique_summary_merge_end(state->summaries, false);
			PG_RE_THROW();
		}
		PG_END_TRY();
		gunique_summary_merge_end(state->summaries, true);
	}

	if (pass != NULL)
		pass_remember(pass, state);
	for (int c = 0; c < state->ncursors; c++)
		merge_cursor_close(&state->cursors[c]);
	if (pass != NULL && lockmode < ShareLock)
		gunique_tree_leaves_unlock(leaves, lockmode);
	list_free_deep(leaves);
	MemoryContextDelete(state->runcxt);
	pfree(state->run);
	index_close(topindex, NoLock);
	nduplicates = state->nduplicates;
	pfree(state->cursors);
	pfree(state);
	FreeAccessStrategy(strategy);
	return nduplicates;
}

/*
 * Lock every leaf's table in ShareLock and its index, all at once, waiting
 * only while holding none of them (gunique_concurrent_lock_all): a check
 * that took them one after the other would keep out the writers of those
 * it holds while it waited for the next, for as long as a REINDEX
 * CONCURRENTLY of that leaf runs.  A leaf replaced meanwhile keeps its
 * table; the merge reads the tree again once it holds the leaves
 * (merge_tree).
 */
static void
tree_lock_share(Oid topindexoid)
{
	List	   *leaves = gunique_tree_leaves(topindexoid);
	List	   *relids = NIL;
	List	   *modes = NIL;
	ListCell   *lc;

	foreach(lc, leaves)
	{
		GuniqueLeaf *leaf = lfirst(lc);

		relids = lappend_oid(relids, leaf->heapoid);
		modes = lappend_int(modes, ShareLock);
		relids = lappend_oid(relids, leaf->indexoid);
		modes = lappend_int(modes, AccessShareLock);
	}
	gunique_concurrent_lock_all(relids, modes);
	list_free_deep(leaves);
	list_free(relids);
	list_free(modes);
}

/*
 * Take the locks gunique_check_tree takes on the tree's leaves ahead of
 * it: for a caller that must hold them before PostgreSQL locks anything
 * an inserter into the tree may then wait for (ddl.c: ATTACH and a default
 * partition).  Waiting for writers here shows as the check's phase, as in
 * the check.
 */
void
gunique_check_tree_lock(Oid topindexoid)
{
	Relation	topindex = index_open(topindexoid, AccessShareLock);
	bool		started;

	(void) merge_progress_start(topindex, &started);
	tree_lock_share(topindexoid);
	if (started)
		pgstat_progress_end_command();
	index_close(topindex, NoLock);
}

/*
 * Merge the keys of all leaves of the tree under topindex, calling
 * "callback" for every key that two or more live rows share.  Each leaf table
 * is locked in "lockmode".  Rows are live if "snapshot" sees them.  With
 * "attached", only keys that can equal a key of the leaves under that table
 * are merged.  With "fill_filters" (and writers locked out), every leaf
 * read whole gets a new key filter, and so does the tree.  Returns the
 * number of duplicated keys.
 */
int64
gunique_merge_tree(Oid topindexoid, LOCKMODE lockmode, Snapshot snapshot,
				   Oid attached, bool fill_filters,
				   GuniqueDuplicateCallback callback, void *arg)
{
	return merge_tree(topindexoid, lockmode, snapshot, attached,
					  fill_filters, callback, arg, false, NULL);
}

/*
 * Check that no key occurs twice among the live rows of all leaves of the
 * tree under topindex, with writers locked out of every leaf.  Raises a
 * unique violation naming the first duplicate key found and the partitions
 * that hold it; "attached" names the table being attached, if that is why
 * the check runs.  With "only_attached" (the same table, when the tree was
 * valid before it), only keys that can equal its keys are merged.
 *
 * Rows deleted by committed transactions do not count; rows inserted by
 * this transaction do (SnapshotSelf).  With writers locked out, no other
 * transaction is in progress on these rows.
 */
void
gunique_check_tree(Oid topindexoid, Oid attached, Oid only_attached)
{
	check_tree(topindexoid, attached, only_attached, CHECK_LOCKED);
}

/*
 * The check of an ATTACH to a valid tree, "attached" the attached table,
 * which the ATTACH holds in AccessExclusiveLock: first over the attached
 * keys' range with writers running, rows judged once their transactions
 * end; again so, over the old leaves' pages changed since the first pass
 * began; then with writers locked out (ShareLock), over those changed
 * since the second began.  The attached leaves are read whole each time.
 * An old entry on a page no WAL record changed since a pass began, of the
 * leaf that pass read in the same file, was merged in that pass, against
 * the same attached keys, and its row's liveness was final (a committed
 * deletion or an aborted insertion is not undone).  The first two passes
 * let go of the leaves' locks; the last takes them all at once.  See
 * src/README, "DDL and the merge".
 */
void
gunique_check_attached(Oid topindexoid, Oid attached)
{
	check_tree(topindexoid, attached, attached, CHECK_ATTACHED_ONLINE);
}

/*
 * The check of a tree built concurrently (concurrent.c): every leaf read
 * whole, with writers running.  The caller has waited out every writer that
 * might not have probed every leaf; a row's liveness is judged once the
 * transactions inserting or deleting it have ended.  Fills no filter: keys
 * inserted behind the merge are not read.  See src/README, 4.11.
 */
void
gunique_check_tree_concurrently(Oid topindexoid)
{
	check_tree(topindexoid, InvalidOid, InvalidOid, CHECK_CONCURRENT);
}

static void
check_tree(Oid topindexoid, Oid attached, Oid only_attached, CheckMode mode)
{
	Relation	topindex = index_open(topindexoid, AccessShareLock);
	CheckFirst	first = {0};
	int64		nduplicates;
	bool		started;
	bool		progress;
	MergePass	pass = {InvalidXLogRecPtr, NIL, NIL};
	MergePass  *passp = mode == CHECK_ATTACHED_ONLINE ? &pass : NULL;

	progress = merge_progress_start(topindex, &started);
	if (mode == CHECK_CONCURRENT)
		nduplicates = merge_tree(topindexoid, AccessShareLock, NULL,
								 InvalidOid, false,
								 check_remember_first, &first, progress,
								 NULL);
	else
	{
		nduplicates = 0;
		/* twice with writers running: the second reads what the first let in */
		for (int i = 0; passp != NULL && i < 2 && nduplicates == 0; i++)
		{
			XLogRecPtr	start = GetXLogInsertRecPtr();

			nduplicates = merge_tree(topindexoid, AccessShareLock, NULL,
									 only_attached, false,
									 check_remember_first, &first, progress,
									 passp);
			pass.min_lsn = start;
		}

		/*
		 * The last pass of an online ATTACH fills no filter: reading the
		 * attached keys again to fill them would keep the writers out for
		 * longer than the merge.  The attached leaves' own filters hold
		 * their keys already (every insert sets its leaf's bits, I6); the
		 * group filters, which lack them, are forgotten, with the writers
		 * and the builder still out, and built again on demand.
		 */
		if (nduplicates == 0)
		{
			tree_lock_share(topindexoid);
			nduplicates = merge_tree(topindexoid, ShareLock, SnapshotSelf,
									 only_attached, passp == NULL,
									 check_remember_first, &first, progress,
									 passp);
		}
		if (nduplicates == 0 && passp != NULL)
			gunique_summary_forget_groups(topindexoid);
	}
	list_free(pass.seen_indexes);
	list_free(pass.seen_files);
	if (nduplicates > 0)
		check_report(&first, nduplicates, topindex, attached);
	if (started)
		pgstat_progress_end_command();
	index_close(topindex, NoLock);
}

/*-------------------------------------------------------------------------
 *
 * merge.c
 *	  The CREATE / ATTACH check: one merge of the leaves' sorted keys.
 *
 * Every leaf of a gunique index tree is an nbtree index, already sorted by
 * the key.  A k-way merge of all leaves' entries, in index order, brings
 * equal keys next to each other wherever they live, so one pass finds every
 * duplicate across and within partitions: O(N log P) comparisons for N
 * entries in P leaves.  The heap is visited only for keys that occur more
 * than once, to tell live rows from dead ones.
 *
 * The caller must hold a lock that keeps writers out of every leaf for the
 * duration of the check; gunique_check_tree takes ShareLock on each leaf
 * table itself, which CREATE INDEX already holds.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "catalog/index.h"
#include "catalog/pg_index.h"
#include "commands/progress.h"
#include "executor/tuptable.h"
#include "lib/binaryheap.h"
#include "pgstat.h"
#include "storage/lmgr.h"
#include "utils/datum.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "compat.h"
#include "merge.h"
#include "scope.h"

typedef struct MergeCursor
{
	Relation	heap;
	Relation	index;
	IndexScanDesc scan;
	IndexFetchTableData *fetch;
	TupleTableSlot *slot;
	ItemPointerData tid;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
} MergeCursor;

typedef struct MergeState
{
	int			nkeys;
	bool		nulls_not_distinct;
	FmgrInfo	cmp[INDEX_MAX_KEYS];
	Oid			collation[INDEX_MAX_KEYS];
	bool		desc[INDEX_MAX_KEYS];
	bool		nulls_first[INDEX_MAX_KEYS];
	int16		typlen[INDEX_MAX_KEYS];
	bool		typbyval[INDEX_MAX_KEYS];
	int			ncursors;
	MergeCursor *cursors;

	/* The current run of equal keys. */
	MemoryContext runcxt;
	bool		inrun;
	Datum		runvalues[INDEX_MAX_KEYS];
	bool		runisnull[INDEX_MAX_KEYS];
	List	   *runentries;		/* MergeEntry * */

	/* Visibility of the rows behind equal keys. */
	Snapshot	snapshot;

	/* What was found. */
	int64		nduplicates;
	GuniqueDuplicateCallback callback;
	void	   *callback_arg;
} MergeState;

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

		fmgr_info_copy(&state->cmp[i],
					   index_getprocinfo(index, i + 1, BTORDER_PROC),
					   CurrentMemoryContext);
		state->collation[i] = index->rd_indcollation[i];
		state->desc[i] = (index->rd_indoption[i] & INDOPTION_DESC) != 0;
		state->nulls_first[i] = (index->rd_indoption[i] & INDOPTION_NULLS_FIRST) != 0;
		state->typlen[i] = att->attlen;
		state->typbyval[i] = att->attbyval;
	}
	state->runcxt = AllocSetContextCreate(CurrentMemoryContext,
										  "gunique merge run",
										  ALLOCSET_SMALL_SIZES);
}

/* Compare two keys in index order (NULLs compare equal to each other). */
static int
merge_compare_keys(MergeState *state, Datum *v1, bool *n1, Datum *v2, bool *n2)
{
	for (int i = 0; i < state->nkeys; i++)
	{
		int32		c;

		if (n1[i] || n2[i])
		{
			if (n1[i] && n2[i])
				continue;
			c = n1[i] ? -1 : 1;
			if (!state->nulls_first[i])
				c = -c;
			return c;
		}
		c = DatumGetInt32(FunctionCall2Coll(&state->cmp[i], state->collation[i],
											v1[i], v2[i]));
		if (c != 0)
			return state->desc[i] ? -c : c;
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

/* Step a cursor to its leaf's next entry; false at the end of the leaf. */
static bool
merge_cursor_next(MergeState *state, MergeCursor *cursor)
{
	ItemPointer tid = index_getnext_tid(cursor->scan, ForwardScanDirection);

	if (tid == NULL)
		return false;
	cursor->tid = *tid;
	for (int i = 0; i < state->nkeys; i++)
		cursor->values[i] = index_getattr(cursor->scan->xs_itup, i + 1,
										  cursor->scan->xs_itupdesc,
										  &cursor->isnull[i]);
	return true;
}

static void
merge_cursor_open(MergeCursor *cursor, GuniqueLeaf *leaf, LOCKMODE lockmode)
{
	cursor->heap = table_open(leaf->heapoid, lockmode);
	cursor->index = index_open(leaf->indexoid, AccessShareLock);
	cursor->scan = gunique_index_beginscan(cursor->heap, cursor->index,
										   SnapshotAny, 0);
	cursor->scan->xs_want_itup = true;
	index_rescan(cursor->scan, NULL, 0, NULL, 0);
	cursor->fetch = table_index_fetch_begin(cursor->heap);
	cursor->slot = table_slot_create(cursor->heap, NULL);
}

static void
merge_cursor_close(MergeCursor *cursor)
{
	ExecDropSingleTupleTableSlot(cursor->slot);
	table_index_fetch_end(cursor->fetch);
	index_endscan(cursor->scan);
	index_close(cursor->index, NoLock);
	table_close(cursor->heap, NoLock);
}

/* Is the row behind this index entry visible to the check's snapshot? */
static bool
merge_entry_live(MergeCursor *cursor, ItemPointer tid, Snapshot snapshot)
{
	ItemPointerData tmp = *tid;
	bool		call_again = false;
	bool		all_dead = false;
	bool		found;

	found = table_index_fetch_tuple(cursor->fetch, &tmp, snapshot,
									cursor->slot, &call_again, &all_dead);
	ExecClearTuple(cursor->slot);
	return found;
}

/* A run of equal keys has ended: is it a duplicate? */
static void
merge_close_run(MergeState *state)
{
	MergeCursor *holders[2] = {NULL, NULL};
	int			nlive = 0;
	ListCell   *lc;

	if (list_length(state->runentries) < 2)
		return;

	foreach(lc, state->runentries)
	{
		MergeEntry *entry = lfirst(lc);
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

/* Take the smallest entry of the merge into the current run. */
static void
merge_consume(MergeState *state, int c)
{
	MergeCursor *cursor = &state->cursors[c];
	MergeEntry *entry;
	MemoryContext oldcxt;

	if (!state->inrun ||
		merge_compare_keys(state, state->runvalues, state->runisnull,
						   cursor->values, cursor->isnull) != 0 ||
		!merge_key_can_conflict(state, cursor->isnull))
	{
		if (state->inrun)
			merge_close_run(state);
		MemoryContextReset(state->runcxt);
		state->runentries = NIL;
		oldcxt = MemoryContextSwitchTo(state->runcxt);
		for (int i = 0; i < state->nkeys; i++)
		{
			state->runisnull[i] = cursor->isnull[i];
			state->runvalues[i] = cursor->isnull[i] ? (Datum) 0 :
				datumCopy(cursor->values[i], state->typbyval[i],
						  state->typlen[i]);
		}
		MemoryContextSwitchTo(oldcxt);
		state->inrun = true;
	}

	oldcxt = MemoryContextSwitchTo(state->runcxt);
	entry = palloc(sizeof(MergeEntry));
	entry->cursor = c;
	entry->tid = cursor->tid;
	state->runentries = lappend(state->runentries, entry);
	MemoryContextSwitchTo(oldcxt);
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

static void
check_report(CheckFirst *first, int64 nduplicates, Relation topindex,
			 Oid attached)
{
	Relation	table = table_open(topindex->rd_index->indrelid, AccessShareLock);
	char	   *where;

	if (first->same)
		where = psprintf(_("is duplicated in partition \"%s\""),
						 first->holders[0]);
	else
		where = psprintf(_("is duplicated in partitions \"%s\" and \"%s\""),
						 first->holders[0], first->holders[1]);

	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 OidIsValid(attached) ?
			 errmsg("could not attach partition \"%s\": its keys would violate unique index \"%s\"",
					get_rel_name(attached), RelationGetRelationName(topindex)) :
			 errmsg("could not create unique index \"%s\"",
					RelationGetRelationName(topindex)),
			 nduplicates == 1 ?
			 (first->key ? errdetail("Key %s %s.", first->key, where) :
			  errdetail("A key %s.", where)) :
			 (first->key ? errdetail("Key %s %s; %lld keys are duplicated in all.",
									 first->key, where, (long long) nduplicates) :
			  errdetail("A key %s; %lld keys are duplicated in all.",
						where, (long long) nduplicates)),
			 errtableconstraint(table, RelationGetRelationName(topindex))));
}

/*
 * Report the check in pg_stat_progress_create_index, as a build phase of the
 * top index ("building index: checking uniqueness across partitions").
 */
static void
merge_progress_start(Relation topindex)
{
	const int	params[] = {
		PROGRESS_CREATEIDX_COMMAND,
		PROGRESS_CREATEIDX_INDEX_OID,
		PROGRESS_CREATEIDX_PHASE,
		PROGRESS_CREATEIDX_SUBPHASE,
	};
	const int64 values[] = {
		PROGRESS_CREATEIDX_COMMAND_CREATE,
		RelationGetRelid(topindex),
		PROGRESS_CREATEIDX_PHASE_BUILD,
		GUNIQUE_PHASE_MERGE_CHECK,
	};

	pgstat_progress_start_command(PROGRESS_COMMAND_CREATE_INDEX,
								  topindex->rd_index->indrelid);
	pgstat_progress_update_multi_param(lengthof(params), params, values);
}

/*
 * Merge the keys of all leaves of the tree under topindex, calling
 * "callback" for every key that two or more live rows share.  Each leaf table
 * is locked in "lockmode".  Rows are live if "snapshot" sees them.  Returns
 * the number of duplicated keys.
 */
int64
gunique_merge_tree(Oid topindexoid, LOCKMODE lockmode, Snapshot snapshot,
				   GuniqueDuplicateCallback callback, void *arg)
{
	Relation	topindex = index_open(topindexoid, AccessShareLock);
	List	   *leaves = gunique_tree_leaves(topindexoid);
	MergeState *state = palloc0(sizeof(MergeState));
	binaryheap *heap;
	ListCell   *lc;
	int64		done = 0;
	int64		nduplicates;

	merge_state_init(state, topindex);
	state->snapshot = snapshot;
	state->callback = callback;
	state->callback_arg = arg;
	state->ncursors = list_length(leaves);
	state->cursors = palloc0(sizeof(MergeCursor) * Max(state->ncursors, 1));

	heap = binaryheap_allocate(Max(state->ncursors, 1), merge_heap_cmp, state);
	foreach(lc, leaves)
	{
		int			c = foreach_current_index(lc);

		merge_cursor_open(&state->cursors[c], lfirst(lc), lockmode);
		if (merge_cursor_next(state, &state->cursors[c]))
			binaryheap_add_unordered(heap, Int32GetDatum(c));
	}
	binaryheap_build(heap);

	while (!binaryheap_empty(heap))
	{
		int			c = DatumGetInt32(binaryheap_first(heap));

		merge_consume(state, c);
		if (merge_cursor_next(state, &state->cursors[c]))
			binaryheap_replace_first(heap, Int32GetDatum(c));
		else
			(void) binaryheap_remove_first(heap);

		if ((++done & 1023) == 0)
		{
			pgstat_progress_update_param(PROGRESS_CREATEIDX_TUPLES_DONE, done);
			CHECK_FOR_INTERRUPTS();
		}
	}
	if (state->inrun)
		merge_close_run(state);

	for (int c = 0; c < state->ncursors; c++)
		merge_cursor_close(&state->cursors[c]);
	binaryheap_free(heap);
	MemoryContextDelete(state->runcxt);
	index_close(topindex, NoLock);
	nduplicates = state->nduplicates;
	pfree(state->cursors);
	pfree(state);
	return nduplicates;
}

/*
 * Check that no key occurs twice among the live rows of all leaves of the
 * tree under topindex, with writers locked out of every leaf.  Raises a
 * unique violation naming the first duplicate key found and the partitions
 * that hold it; "attached" names the table being attached, if that is why
 * the check runs.
 *
 * Rows deleted by committed transactions do not count; rows inserted by
 * this transaction do (SnapshotSelf).  With writers locked out, no other
 * transaction is in progress on these rows.
 */
void
gunique_check_tree(Oid topindexoid, Oid attached)
{
	Relation	topindex = index_open(topindexoid, AccessShareLock);
	CheckFirst	first = {0};
	int64		nduplicates;

	merge_progress_start(topindex);
	nduplicates = gunique_merge_tree(topindexoid, ShareLock, SnapshotSelf,
									 check_remember_first, &first);
	if (nduplicates > 0)
		check_report(&first, nduplicates, topindex, attached);
	pgstat_progress_end_command();
	index_close(topindex, NoLock);
}

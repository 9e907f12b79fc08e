/*-------------------------------------------------------------------------
 *
 * probe.c
 *	  Insert-time enforcement of uniqueness across partitions.
 *
 * nbtree checks a unique index by looking for the key before it inserts,
 * under a lock on the leaf page where the key goes; if it finds the key
 * inserted or deleted by a transaction still in progress, it waits for that
 * transaction with nothing inserted, then looks again.  gunique does the
 * same across all the leaves of a tree that could hold the key (the leaf's
 * group, see scope.c), with a dirty snapshot as PostgreSQL's exclusion
 * constraint check does, and in place of the page lock a key lock
 * (keylock.c):
 *
 *	 open the group's leaves (once per statement, probescan.c);
 *	 lock key;
 *	 look in every leaf of the group, own leaf included, whose key-range
 *	   summary (summary.c) or key filter (filter.c) does not rule the key
 *	   out: with serial keys that is none, not even own leaf, whose range
 *	   the key extends, and with random keys rarely any;
 *	 a live committed match, or one inserted by this transaction: unlock,
 *	   violation;
 *	 a match inserted or deleted by a transaction in progress: unlock, wait
 *	   for it, start again;
 *	 nothing: widen own leaf's summary and filter, insert into own leaf
 *	   (nbtree re-checks it); unlock;
 *	 then build the filters that the probe missed or own leaf outgrew.
 *
 * Two inserters of equal keys therefore never both insert before looking:
 * the second to take the key lock sees the first's summary and entry.  An
 * inserter never has an entry in an index while it waits, so nobody waits
 * on a waiter, and a definite conflict (this transaction's own row, say) is
 * reported before any wait: the same outcomes as a single unique btree.
 * The key lock is never held while waiting for a transaction, so every
 * wait between inserters is a transaction wait, and a genuine deadlock (two
 * transactions each holding a key the other wants) is detected.
 *
 * The relations of the tree are locked (AccessShareLock) before the key
 * lock, once per transaction, by the scope cache: every relation, or for a
 * light group (probescan.c) the partitioned ones, until a key gets past the
 * group's filter and the group is made whole, with the key lock released.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/nbtree.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/predicate.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"

#include "btread.h"
#include "compat.h"
#include "filter.h"
#include "handler.h"
#include "keylock.h"
#include "probe.h"
#include "probescan.h"
#include "scope.h"
#include "stats.h"
#include "summary.h"

/* What looking in the leaves found. */
typedef struct ProbeFinding
{
	/* a transaction in progress that inserted or deleted the key */
	TransactionId xwait;
	uint32		speculative_token;
	ItemPointerData tid;
	Oid			heapoid;
	/* a violation: the leaf index that holds the key, and where it went */
	Relation	holder_index;
	BlockNumber holder_blkno;
} ProbeFinding;

/*
 * The key as summaries and filters see it, mapped once per row.  Every leaf
 * of a tree, and the entry of its group's filter, has the same key type,
 * so any of their summaries maps it.
 */
typedef struct ProbeKey
{
	bool		summarized;		/* one non-NULL column of a summarized type */
	uint64		key;			/* gunique_summary_key() */
	uint64		hash;			/* gunique_filter_hash() */
} ProbeKey;

static bool
key_has_distinct_null(ProbeGroup *pg, bool *isnull)
{
	if (pg->nulls_not_distinct)
		return false;
	for (int i = 0; i < pg->nkeys; i++)
		if (isnull[i])
			return true;
	return false;
}

static uint32
key_hash(ProbeGroup *pg, Datum *values, bool *isnull)
{
	uint32		hash = 0;

	for (int i = 0; i < pg->nkeys; i++)
	{
		uint32		h = 0;

		if (!isnull[i] && pg->hashable[i])
			h = DatumGetUInt32(FunctionCall1Coll(&pg->hashfn[i],
												 pg->collation[i],
												 values[i]));
		hash = (hash << 1 | hash >> 31) ^ h;
	}
	return hash;
}

/* A summary that maps the group's keys, or NULL if none is kept. */
static GuniqueSummary *
probe_key_mapper(ProbeGroup *pg)
{
	if (pg->own_summary != NULL)
		return pg->own_summary;
	if (pg->any_summary != NULL)
		return pg->any_summary;
	return pg->group_summary;
}

static void
probe_key_map(ProbeKey *pk, GuniqueSummary *summary, int nkeys,
			  Datum *values, bool *isnull)
{
	pk->summarized = summary != NULL && nkeys == 1 && !isnull[0];
	pk->key = pk->hash = 0;
	if (!pk->summarized)
		return;
	pk->key = gunique_summary_key(summary, values[0]);
	pk->hash = gunique_filter_hash(summary, values[0]);
}

/*
 * A duplicate in the inserter's own partition reads exactly as nbtree's
 * report; one in another partition names that partition.  The key and the
 * partition are shown only as PostgreSQL shows a key (by
 * BuildIndexValueDescription) when a duplicate is within one partition: if
 * the user may read the key columns of the partition that holds the other
 * row, and row-level security is not enabled for it.  Otherwise the error
 * has no detail, as nbtree's has none then.
 *
 * Before that, as nbtree does, report a serialization failure that the
 * violation would mask: a serializable transaction that read the key where
 * the other row went (and found nothing) conflicts with this one.
 */
static void
report_conflict(Relation index, Relation heap, Relation holder,
				ProbeFinding *finding, Datum *values, bool *isnull,
				IndexUniqueCheck checkUnique)
{
	char	   *key_desc;
	bool		elsewhere = RelationGetRelid(holder) != RelationGetRelid(heap);

	CheckForSerializableConflictIn(finding->holder_index, NULL,
								   finding->holder_blkno);
	key_desc = BuildIndexValueDescription(finding->holder_index, values,
										  isnull);

	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("duplicate key value violates unique constraint \"%s\"",
					RelationGetRelationName(index)),
			 key_desc == NULL ? 0 :
			 !elsewhere ? errdetail("Key %s already exists.", key_desc) :
			 errdetail("Key %s already exists in partition \"%s\".",
					   key_desc, RelationGetRelationName(holder)),
			 elsewhere && checkUnique == UNIQUE_CHECK_PARTIAL ?
			 errhint("INSERT ... ON CONFLICT resolves conflicts within one partition only; this key is held by another partition.") : 0,
			 errtableconstraint(heap, RelationGetRelationName(index))));
}

/*
 * Check one heap TID an entry with the key points to, as _bt_check_unique
 * does.  Returns true if it is a live row or this transaction's (a
 * violation); otherwise records in *finding the first transaction in
 * progress that inserted or deleted it.
 */
static bool
probe_tid(ProbeScan *ps, ItemPointer htid, ProbeFinding *finding)
{
	ItemPointerData tid = *htid;
	bool		call_again = false;
	bool		all_dead = false;
	TransactionId xwait;

	if (!table_index_fetch_tuple(ps->fetch, &tid, &ps->dirty, ps->slot,
								 &call_again, &all_dead))
		return false;
	xwait = TransactionIdIsValid(ps->dirty.xmin) ?
		ps->dirty.xmin : ps->dirty.xmax;
	if (!TransactionIdIsValid(xwait))
		return true;
	if (!TransactionIdIsValid(finding->xwait))
	{
		finding->xwait = xwait;
		finding->speculative_token = ps->dirty.speculativeToken;
		finding->tid = tid;
		finding->heapoid = RelationGetRelid(ps->heap);
	}
	return false;
}

/* The first item on a leaf page that is not less than the key. */
static OffsetNumber
first_candidate(Relation rel, BTScanInsert key, Page page)
{
	OffsetNumber low = P_FIRSTDATAKEY(BTPageGetOpaque(page));
	OffsetNumber high = PageGetMaxOffsetNumber(page) + 1;

	while (low < high)
	{
		OffsetNumber mid = low + (high - low) / 2;

		if (_bt_compare(rel, key, page, mid) > 0)
			low = mid + 1;
		else
			high = mid;
	}
	return low;
}

/* Check the entries equal to the key on one page, from offset "off". */
static bool
probe_page(ProbeScan *ps, Page page, OffsetNumber off, bool *past_key,
		   ProbeFinding *finding)
{
	OffsetNumber maxoff = PageGetMaxOffsetNumber(page);

	for (; off <= maxoff; off++)
	{
		ItemId		iid = PageGetItemId(page, off);
		IndexTuple	itup;

		if (_bt_compare(ps->index, ps->itup_key, page, off) != 0)
		{
			*past_key = true;
			return false;
		}
		if (ItemIdIsDead(iid))
			continue;			/* known dead to everyone */
		itup = (IndexTuple) PageGetItem(page, iid);
		if (!BTreeTupleIsPosting(itup))
		{
			if (probe_tid(ps, &itup->t_tid, finding))
				return true;
			continue;
		}
		for (int i = 0; i < BTreeTupleGetNPosting(itup); i++)
			if (probe_tid(ps, BTreeTupleGetPostingN(itup, i), finding))
				return true;
	}
	return false;
}

/*
 * Look for the key in one leaf: one descent of its btree to the first entry
 * not less than the key, then every equal entry, moving right while the
 * high key equals the key (as nbtree's own unique check does).  Returns the
 * leaf's table if it holds the key live or inserted by this transaction (a
 * violation, with the leaf's index and page in *finding); otherwise records
 * in *finding the first transaction in progress that holds the key.
 */
static Oid
probe_leaf(ProbeScan *ps, int nkeys, Datum *values, bool *isnull,
		   ProbeFinding *finding)
{
	Relation	rel = ps->index;
	Buffer		buf;
	Page		page;
	BTPageOpaque opaque;
	OffsetNumber off;
	BlockNumber first;
	bool		conflict = false;
	bool		past_key = false;

	gunique_bt_set_search_key(ps->itup_key, rel, nkeys, values, isnull);
	_bt_freestack(gunique_bt_search(rel, ps->heap, ps->itup_key, &buf));
	if (!BufferIsValid(buf))
		return InvalidOid;		/* the btree is empty */

	first = BufferGetBlockNumber(buf);
	page = BufferGetPage(buf);
	off = first_candidate(rel, ps->itup_key, page);
	for (;;)
	{
		conflict = probe_page(ps, page, off, &past_key, finding);
		opaque = BTPageGetOpaque(page);
		if (conflict || past_key || P_RIGHTMOST(opaque) ||
			_bt_compare(rel, ps->itup_key, page, P_HIKEY) != 0)
			break;
		/* Equal keys may continue on the next page that is not deleted. */
		do
		{
			if (P_RIGHTMOST(opaque))
				elog(ERROR, "fell off the end of index \"%s\"",
					 RelationGetRelationName(rel));
			buf = _bt_relandgetbuf(rel, buf, opaque->btpo_next, BT_READ);
			page = BufferGetPage(buf);
			opaque = BTPageGetOpaque(page);
		} while (P_IGNORE(opaque));
		off = P_FIRSTDATAKEY(opaque);
	}
	_bt_relbuf(rel, buf);
	gunique_probescan_done(ps);
	if (!conflict)
		return InvalidOid;

	/*
	 * The first page the key could be on, where nbtree's unique check looks
	 * for serialization conflicts, and where an index scan for the key
	 * takes its predicate lock.
	 */
	finding->holder_index = rel;
	finding->holder_blkno = first;
	return RelationGetRelid(ps->heap);
}

/* Read a leaf's range and filter (under the key lock); NULL: all keys. */
static inline void
probe_view_read(GuniqueSummary *summary, ProbeLeafView *view)
{
	view->min = 0;
	view->max = PG_UINT64_MAX;
	view->filter = 0;
	if (summary == NULL)
		return;
	gunique_summary_range(summary, &view->min, &view->max);
	view->filter = gunique_filter_ref(summary);
}

/*
 * Could leaf i hold the key, as far as its range and filter (read now, or
 * the statement's copies) tell?  Notes in the group when a leaf without a
 * filter has been searched often enough to be worth one.
 */
static inline bool
probe_view_needed(ProbeGroup *pg, int i, ProbeLeafView *view, ProbeKey *pk,
				  GuniqueFilterKey *fkey, uint64 *counts)
{
	if (pk->key < view->min || pk->key > view->max)
	{
		counts[GUNIQUE_STAT_LEAVES_SKIPPED]++;
		return false;
	}
	if (gunique_filter_ref_excludes(view->filter, fkey))
	{
		counts[GUNIQUE_STAT_LEAVES_FILTERED]++;
		return false;
	}
	if (pg->summaries[i] != NULL &&
		gunique_filter_wanted(pg->summaries[i], pg->targets[i]->index,
							  &pg->targets[i]->filter_after))
		pg->filters_wanted = true;
	return true;
}

/* Leaves ahead of the one checked whose filters a probe starts loading. */
#define PROBE_AHEAD 4

static inline void
probe_view_prefetch(ProbeLeafView *view, ProbeKey *pk, GuniqueFilterKey *fkey)
{
	if (pk->key >= view->min && pk->key <= view->max)
		gunique_filter_ref_prefetch(view->filter, fkey);
}

static int
probe_view_min_cmp(const void *a, const void *b, void *arg)
{
	ProbeLeafView *leaves = arg;
	uint64		ma = leaves[*(const int *) a].min;
	uint64		mb = leaves[*(const int *) b].min;

	return ma < mb ? -1 : ma > mb ? 1 : 0;
}

/*
 * Sort the leaves by the low ends of their ranges, and note for each place
 * in that order the highest high end so far, so that the leaves whose range
 * may hold a key are found by a binary search and a short walk back: with
 * keys that follow the partitioning, one or two leaves of hundreds.  Ranges
 * only widen, so after the first sort the order is nearly right, and an
 * insertion sort puts it right in one pass.
 */
static void
probe_views_order(ProbeViews *views, int n)
{
	ProbeLeafView *leaves = views->leaves;
	int		   *order = views->order;
	uint64		reach = 0;

	if (!views->ordered)
		qsort_arg(order, n, sizeof(int), probe_view_min_cmp, leaves);
	else
		for (int j = 1; j < n; j++)
		{
			int			x = order[j];
			int			k = j;

			for (; k > 0 && leaves[order[k - 1]].min > leaves[x].min; k--)
				order[k] = order[k - 1];
			order[k] = x;
		}
	views->ordered = true;
	for (int j = 0; j < n; j++)
	{
		reach = Max(reach, leaves[order[j]].max);
		views->reach[j] = reach;
	}
}

/* How many leaves, in views->order, have ranges that start at or below key. */
static int
probe_views_upto(ProbeViews *views, int n, uint64 key)
{
	int			lo = 0;
	int			hi = n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (views->leaves[views->order[mid]].min <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Under the key lock: the copies of the group's leaves' ranges and
 * filters, read again if the group's count of changes moved since.  They
 * serve the key because whoever inserted it into a leaf widened that
 * leaf's range and bumped the count under this key lock, before releasing
 * it; and a leaf's filter is replaced only after a bump, and freed only
 * once every key lock has been released since (filter.c).  A leaf without
 * a summary is searched.
 */
static ProbeViews *
probe_views(ProbeGroup *pg)
{
	ProbeViews *views = pg->views;
	uint64		changes = pg_atomic_read_u64(&pg->group_summary->changes);

	pg_read_barrier();
	if (views->valid && views->changes == changes)
		return views;
	for (int i = 0; i < pg->ntargets; i++)
		probe_view_read(pg->summaries[i], &views->leaves[i]);
	probe_views_order(views, pg->ntargets);
	views->changes = changes;
	views->valid = true;
	return views;
}

/* Does the group's filter rule the key out of its n leaves? */
static inline bool
probe_group_excludes(GuniqueSummary *group_summary, GuniqueFilterKey *fkey,
					 int n, uint64 *counts)
{
	if (!gunique_filter_ref_excludes(gunique_filter_ref(group_summary), fkey))
		return false;
	counts[GUNIQUE_STAT_LEAVES_FILTERED] += n;
	return true;
}

/*
 * Could any leaf of the group hold the key, as far as the group's filter
 * tells?  One cache line rules out every leaf for most new keys.  Notes in
 * the group when probes have checked enough leaves one by one to make the
 * group's filter worth building.
 */
static bool
probe_group_needed(ProbeGroup *pg, GuniqueFilterKey *fkey, uint64 *counts)
{
	GuniqueSummary *summary = pg->group_summary;

	if (summary == NULL || !pg->use_group_filter)
		return true;
	if (probe_group_excludes(summary, fkey, pg->ntargets, counts))
		return false;
	if (pg->self >= 0 && gunique_filter_missing(summary))
	{
		if (pg->group_keys == 0)
			for (int i = 0; i < pg->ntargets; i++)
				pg->group_keys +=
					gunique_filter_keys_estimate(pg->targets[i]->index) + 1;
		if (gunique_filter_group_wanted(summary, pg->ntargets, pg->group_keys))
			pg->group_filter_wanted = pg->filters_wanted = true;
	}
	return true;
}

/*
 * Search leaf i of the group, unless its scan is not ready (then it is left
 * in *unready for the caller to make ready without the key lock).
 */
static Oid
probe_target(ProbeGroup *pg, int i, ProbeFinding *finding, Datum *values,
			 bool *isnull, uint64 *counts, ProbeScan **unready)
{
	if (!pg->targets[i]->ready)
	{
		*unready = pg->targets[i];
		return InvalidOid;
	}
	counts[GUNIQUE_STAT_LEAVES_PROBED]++;
	return probe_leaf(pg->targets[i], pg->nkeys, values, isnull, finding);
}

/*
 * Past the group's filter: the leaves whose range may hold the key, found
 * in the statement's copies (probe_views_order), then their filters.
 */
static Oid
probe_group_views(ProbeGroup *pg, ProbeKey *pk, GuniqueFilterKey *fkey,
				  ProbeFinding *finding, Datum *values, bool *isnull,
				  uint64 *counts, ProbeScan **unready)
{
	ProbeViews *views = probe_views(pg);
	ProbeLeafView *leaves = views->leaves;
	int			upto = probe_views_upto(views, pg->ntargets, pk->key);
	int			walked = 0;
	Oid			conflict = InvalidOid;

	for (int j = upto - 1; j >= upto - PROBE_AHEAD && j >= 0; j--)
		probe_view_prefetch(&leaves[views->order[j]], pk, fkey);
	for (int j = upto - 1;
		 j >= 0 && views->reach[j] >= pk->key && !OidIsValid(conflict) &&
		 *unready == NULL; j--)
	{
		int			i = views->order[j];

		walked++;
		if (j >= PROBE_AHEAD)
			probe_view_prefetch(&leaves[views->order[j - PROBE_AHEAD]], pk,
								fkey);
		if (probe_view_needed(pg, i, &leaves[i], pk, fkey, counts))
			conflict = probe_target(pg, i, finding, values, isnull, counts,
									unready);
	}
	/* the rest start above the key or end below it */
	if (!OidIsValid(conflict) && *unready == NULL)
		counts[GUNIQUE_STAT_LEAVES_SKIPPED] += pg->ntargets - walked;
	return conflict;
}

/*
 * Under the key lock: look for the key in every leaf of the group that its
 * summary and filter do not rule out, own leaf included.  Returns the table
 * of a leaf that holds the key (a violation) or InvalidOid, with what it
 * found in progress in *finding; or stops at the first leaf to search whose
 * scan is not ready, in *unready.
 */
static Oid
probe_group(ProbeGroup *pg, ProbeKey *pk, ProbeFinding *finding,
			Datum *values, bool *isnull, uint64 *counts, ProbeScan **unready)
{
	Oid			conflict = InvalidOid;
	ProbeLeafView view;
	GuniqueFilterKey fkey;
	ProbeScanContext cxt;

	memset(finding, 0, sizeof(ProbeFinding));
	counts[GUNIQUE_STAT_PROBES]++;
	gunique_filter_key(&fkey, pk->hash);
	if (pk->summarized && !probe_group_needed(pg, &fkey, counts))
		return InvalidOid;
	gunique_probescan_enter(&cxt);
	if (pk->summarized && pg->views != NULL)
		conflict = probe_group_views(pg, pk, &fkey, finding, values, isnull,
									 counts, unready);
	else
		for (int i = 0; i < pg->ntargets && !OidIsValid(conflict) &&
			 *unready == NULL; i++)
		{
			if (pk->summarized && pg->summaries[i] != NULL)
			{
				probe_view_read(pg->summaries[i], &view);
				if (!probe_view_needed(pg, i, &view, pk, &fkey, counts))
					continue;
			}
			conflict = probe_target(pg, i, finding, values, isnull, counts,
									unready);
		}
	gunique_probescan_leave(&cxt);
	return conflict;
}

/*
 * Under the key lock, for a light group (probescan.c): does the group's
 * filter rule the key out of every leaf?  If not, the caller makes the
 * group whole and probes again.
 */
static bool
probe_light(ProbeGroup *pg, ProbeKey *pk, uint64 *counts)
{
	GuniqueFilterKey fkey;

	if (!pk->summarized)
		return false;
	gunique_filter_key(&fkey, pk->hash);
	if (!probe_group_excludes(pg->group_summary, &fkey, pg->nleaves, counts))
		return false;
	counts[GUNIQUE_STAT_PROBES]++;
	return true;
}

/* Wait for the transaction that holds the key, as nbtree would. */
static void
probe_wait(ProbeFinding *finding)
{
	Relation	holder;

	if (finding->speculative_token != 0)
	{
		SpeculativeInsertionWait(finding->xwait, finding->speculative_token);
		return;
	}
	holder = table_open(finding->heapoid, NoLock);
	XactLockTableWait(finding->xwait, holder, &finding->tid, XLTW_InsertIndex);
	table_close(holder, NoLock);
}

/*
 * Let the index's summary and filter, and its group's filter, cover the key
 * before nbtree inserts it.  True if the index has outgrown its filter;
 * *group_full if the group has outgrown its own.  The group's filter gets
 * the key even if the index has no summary (the table of summaries was
 * full): probes from the other leaves rely on it.
 */
static bool
cover_own_key(GuniqueSummary *summary, GuniqueSummary *group_summary,
			  ProbeKey *pk, Datum *values, bool *group_full)
{
	*group_full = false;
	if (!pk->summarized)
		return false;
	if (group_summary != NULL)
		*group_full = gunique_filter_add(group_summary, pk->hash);
	if (summary == NULL)
		return false;
	/* probes keep copies of the range while the group's count stays put */
	if (gunique_summary_widen(summary, values[0]) && group_summary != NULL)
		pg_atomic_fetch_add_u64(&group_summary->changes, 1);
	return gunique_filter_add(summary, pk->hash);
}

/*
 * Build the group's filter from all its leaves, unless this transaction
 * has changed the tree (DETACH, DROP, TRUNCATE, REINDEX of a member, ...):
 * the filter would hold the keys of the leaves as this transaction sees
 * them, and light probes of other transactions, which lock no leaf, would
 * rely on it before a rollback brings the old leaves back.  The filter
 * there is keeps taking every key meanwhile (a full one only rules out
 * fewer keys); a later transaction replaces it.
 */
static void
build_group_filter(ProbeGroup *pg, Relation index)
{
	Relation   *indexes;

	if (pg->tree_changed == 0)
		pg->tree_changed = gunique_tree_changed_here(index) ? 'y' : 'n';
	if (pg->tree_changed == 'y')
		return;
	indexes = palloc(sizeof(Relation) * pg->ntargets);
	for (int i = 0; i < pg->ntargets; i++)
		indexes[i] = pg->targets[i]->index;
	(void) gunique_filter_build(pg->group_summary, indexes, pg->ntargets,
								NULL);
	pfree(indexes);
}

/*
 * With the key lock released: build the filters of the leaves that the
 * probe searched for want of one, and a bigger one for own leaf if it
 * outgrew its filter.  The statement holds every leaf of the group open.
 */
static void
build_filters(ProbeGroup *pg, Relation index, bool own_full, bool group_full)
{
	Relation	indexes[1] = {index};

	if (pg->filters_wanted)
	{
		pg->filters_wanted = false;
		for (int i = 0; i < pg->ntargets; i++)
			if (pg->summaries[i] != NULL &&
				gunique_filter_due(pg->summaries[i],
								   pg->targets[i]->filter_after))
				gunique_filter_build(pg->summaries[i],
									 &pg->targets[i]->index, 1,
									 pg->group_summary);
	}
	if (own_full)
		gunique_filter_build(pg->own_summary, indexes, 1, pg->group_summary);
	/* a group's filter is built from all its leaves, own leaf included */
	if ((pg->group_filter_wanted || group_full) && pg->self >= 0 &&
		pg->use_group_filter)
		build_group_filter(pg, index);
	pg->group_filter_wanted = false;
}

/*
 * Insert without a probe: nbtree's own check of the leaf is complete.  The
 * key lock is not needed for the filter either (see filter.c), and could not
 * be held here: nbtree may wait for a transaction.
 */
static bool
insert_unprobed(Relation index, GuniqueSummary *summary, Datum *values,
				bool *isnull, ItemPointer heap_tid, Relation heap,
				IndexUniqueCheck checkUnique, bool indexUnchanged,
				IndexInfo *indexInfo, uint64 *counts)
{
	bool		group_full;
	ProbeKey	pk;

	counts[GUNIQUE_STAT_UNPROBED] = 1;
	gunique_stats_add(index, counts);
	probe_key_map(&pk, summary, IndexRelationGetNumberOfKeyAttributes(index),
				  values, isnull);
	(void) cover_own_key(summary, NULL, &pk, values, &group_full);
	return gunique_btinsert(index, values, isnull, heap_tid, heap,
							checkUnique, indexUnchanged, indexInfo);
}

bool
gunique_probe_insert(Relation index, Datum *values, bool *isnull,
					 ItemPointer heap_tid, Relation heap,
					 IndexUniqueCheck checkUnique, bool indexUnchanged,
					 IndexInfo *indexInfo)
{
	bool		skip_self = checkUnique == UNIQUE_CHECK_PARTIAL;
	ProbeGroup *pg;
	LWLock	   *keylock;
	bool		result;
	bool		own_full;
	bool		group_full;
	uint64		counts[GUNIQUE_NSTATS] = {0};
	uint64		saved[GUNIQUE_NSTATS];
	ProbeKey	pk;

	counts[GUNIQUE_STAT_INSERTS] = 1;

	/*
	 * Not part of a tree: nothing to probe.  A speculative insertion (ON
	 * CONFLICT) leaves conflicts within its own partition to nbtree and the
	 * executor, which arbitrate them, so its own leaf is left out.
	 */
	if (checkUnique == UNIQUE_CHECK_NO || !index->rd_rel->relispartition)
		return insert_unprobed(index, gunique_summary_for(index), values,
							   isnull, heap_tid, heap, checkUnique,
							   indexUnchanged, indexInfo, counts);
	if (checkUnique == UNIQUE_CHECK_EXISTING)
		elog(ERROR, "gunique index \"%s\" cannot be rechecked as deferred",
			 RelationGetRelationName(index));

	/*
	 * The statement's scans of the group's leaves, opened (and the tree
	 * locked) before the key lock is taken.
	 */
	gunique_probescan_bind(indexInfo->ii_Context);
	for (;;)
	{
		ProbeFinding finding;
		Oid			conflict;
		ProbeScan  *unready;

		pg = gunique_probescan_group(index, skip_self);
		if (!pg->needed || key_has_distinct_null(pg, isnull))
			return insert_unprobed(index, pg->own_summary, values, isnull,
								   heap_tid, heap, checkUnique,
								   indexUnchanged, indexInfo, counts);
		probe_key_map(&pk, probe_key_mapper(pg), pg->nkeys, values, isnull);
		keylock = gunique_keylock_for(pg->topindex,
									  key_hash(pg, values, isnull));

		LWLockAcquire(keylock, LW_EXCLUSIVE);
		if (pg->light)
		{
			if (probe_light(pg, &pk, counts))
				break;
			LWLockRelease(keylock);
			(void) gunique_probescan_group_whole(index, skip_self);
			continue;
		}
		memcpy(saved, counts, sizeof(saved));
		unready = NULL;
		conflict = probe_group(pg, &pk, &finding, values, isnull, counts,
							   &unready);
		if (unready != NULL)
		{
			/* make the scan ready without the key lock, then look again */
			LWLockRelease(keylock);
			memcpy(counts, saved, sizeof(saved));
			gunique_probescan_prepare(unready);
			continue;
		}
		if (!OidIsValid(conflict) && !TransactionIdIsValid(finding.xwait))
			break;
		LWLockRelease(keylock);

		if (OidIsValid(conflict))
		{
			Relation	holder = table_open(conflict, NoLock);

			counts[GUNIQUE_STAT_CONFLICTS]++;
			gunique_stats_add(index, counts);
			report_conflict(index, heap, holder, &finding, values, isnull,
							checkUnique);
		}
		counts[GUNIQUE_STAT_WAITS]++;
		probe_wait(&finding);
	}
	gunique_stats_add(index, counts);

	/*
	 * Nobody else holds the key: widen own summary and filter (only now, so
	 * that a key refused or waited for does not widen them), insert, and let
	 * others see it.  An error releases the key lock with all other LWLocks.
	 */
	own_full = cover_own_key(pg->own_summary, pg->group_summary, &pk, values,
							 &group_full);
	result = gunique_btinsert(index, values, isnull, heap_tid, heap,
							  checkUnique, indexUnchanged, indexInfo);
	LWLockRelease(keylock);
	if (pg->light && group_full)
		pg = gunique_probescan_group_whole(index, skip_self);	/* to build it */
	if (pg->filters_wanted || own_full || group_full)
		build_filters(pg, index, own_full, group_full);
	return result;
}

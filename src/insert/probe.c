/*-------------------------------------------------------------------------
 *
 * probe.c
 *	  Insert-time enforcement of uniqueness across partitions.
 *
 * nbtree checks a unique index by looking for the key before it inserts,
 * under a lock on the leaf page where the key goes, and waits with nothing
 * inserted for a transaction in progress that holds the key.  gunique does
 * the same across the leaves of a tree that could hold the key (the leaf's
 * group, scope.c), with a dirty snapshot, under a key lock (keylock.c) in
 * place of the page lock; own leaf is nbtree's to check, and this file
 * looks at it too when nbtree reports it may hold the key.  The steps are
 * src/README, "The insert path"; why two inserters of equal keys never
 * both insert, why nobody waits on a waiter, and why the only deadlocks
 * are genuine ones: I3, I4 and I4a there.
 *
 * The access method's insert (handler.c) calls gunique_probe_before_insert,
 * which returns holding the key lock if it probed, then nbtree's insert,
 * then gunique_probe_after_insert.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relscan.h"
#include "access/table.h"
#include "access/heapam.h"
#include "access/tableam.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "port/pg_bitutils.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "storage/predicate.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "admin/stats.h"
#include "am/btread.h"
#include "insert/keepkey.h"
#include "insert/keylock.h"
#include "insert/probe.h"
#include "insert/probegroup.h"
#include "insert/probescan.h"
#include "insert/waiters.h"
#include "locate/builder.h"
#include "locate/filter.h"
#include "locate/keymap.h"
#include "locate/summary.h"
#include "upsert/onconflict.h"

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
			 !elsewhere || checkUnique != UNIQUE_CHECK_PARTIAL ? 0 :
			 errhint("Only ON CONFLICT DO NOTHING looks for the key in other partitions, and not for a key with a null column or one that a trigger or a generated column may change; use MERGE or UPDATE for a row that may be in another partition."),
			 errtableconstraint(heap, RelationGetRelationName(index))));
}

/*
 * What probe_tid needs: the leaf's scan, where to note findings, and in own
 * leaf after nbtree's insert, the row just inserted (else NULL).
 */
typedef struct ProbeVisit
{
	ProbeScan  *ps;
	ProbeFinding *finding;
	Oid			topindex;
	ItemPointer own;
} ProbeVisit;

/*
 * Check one heap TID an entry with the key points to, as _bt_check_unique
 * does.  Returns true if it is a live row or this transaction's (a
 * violation); otherwise records in the finding the first transaction in
 * progress that inserted or deleted it, passing over the entries of
 * inserters that wait with theirs in place (waiters.c): such an inserter
 * looks at every leaf again before its insert stands, as if it had
 * inserted nothing yet (src/README, I4a).  The entry nbtree has just made
 * for the row being inserted is passed over too.
 */
static bool
probe_tid(void *arg, ItemPointer htid, bool *dead)
{
	ProbeVisit *visit = (ProbeVisit *) arg;
	ProbeScan  *ps = visit->ps;
	ProbeFinding *finding = visit->finding;
	ItemPointerData tid = *htid;
	bool		call_again = false;
	bool		all_dead = false;
	TransactionId xwait;

	if (visit->own != NULL && ItemPointerEquals(htid, visit->own))
	{
		*dead = false;
		return false;
	}
	if (!table_index_fetch_tuple(ps->fetch, &tid, &ps->dirty, ps->slot,
								 &call_again, &all_dead))
	{
		*dead = all_dead;
		return false;
	}
	xwait = TransactionIdIsValid(ps->dirty.xmin) ?
		ps->dirty.xmin : ps->dirty.xmax;
	if (!TransactionIdIsValid(xwait))
		return true;
	if (!TransactionIdIsValid(finding->xwait) &&
		!gunique_waiter_is(visit->topindex, RelationGetRelid(ps->heap), htid,
						   xwait))
	{
		finding->xwait = xwait;
		finding->speculative_token = ps->dirty.speculativeToken;
		finding->tid = tid;
		finding->heapoid = RelationGetRelid(ps->heap);
	}
	return false;
}

/*
 * Look for the key in one leaf (btread.c: one descent, then every equal
 * entry).  Returns the leaf's table if it holds the key live or inserted by
 * this transaction (a violation, with the leaf's index and first page in
 * *finding); otherwise records in *finding the first transaction in
 * progress that holds the key.  "own" is the row just inserted into the
 * leaf, in own leaf after nbtree's insert, else NULL.
 */
static Oid
probe_leaf(ProbeScan *ps, Oid topindex, int nkeys, Datum *values,
		   bool *isnull, ItemPointer own, ProbeFinding *finding)
{
	ProbeVisit	visit = {ps, finding, topindex, own};
	BlockNumber first;
	bool		conflict;

	gunique_bt_set_search_key(ps->itup_key, ps->index, nkeys, values, isnull);
	conflict = gunique_bt_search_equal(ps->index, ps->heap, ps->itup_key,
									   probe_tid, &visit, &first);
	gunique_probescan_done(ps);
	if (!conflict)
		return InvalidOid;
	finding->holder_index = ps->index;
	finding->holder_blkno = first;
	return RelationGetRelid(ps->heap);
}

/*
 * Could the leaf of scan "ps" hold the key, as far as a copy of its summary
 * (taken now, or the statement's) tells?  Notes in the group when a leaf
 * without a filter has been searched often enough to be worth one.
 */
static inline bool
probe_copy_needed(ProbeGroup *pg, ProbeScan *ps, GuniqueSummaryCopy *copy,
				  GuniqueKeyImage *key, GuniqueFilterKey *fkey,
				  uint64 *counts)
{
	if (gunique_summary_copy_outside(copy, key))
	{
		counts[GUNIQUE_STAT_LEAVES_SKIPPED]++;
		return false;
	}
	if (gunique_filter_excludes(copy->filter, fkey))
	{
		counts[GUNIQUE_STAT_LEAVES_FILTERED]++;
		return false;
	}
	if (ps->summary != NULL &&
		gunique_summary_searched(ps->summary, ps->index, &ps->filter_after))
		pg->filters_wanted = true;
	return true;
}

/* Leaves ahead of the one checked whose filters a probe starts loading. */
#define PROBE_AHEAD 4

static inline void
probe_copy_prefetch(GuniqueSummaryCopy *copy, GuniqueKeyImage *key,
					GuniqueFilterKey *fkey)
{
	if (!gunique_summary_copy_outside(copy, key))
		gunique_filter_prefetch(copy->filter, fkey);
}

/* Does the group's filter rule the key out of its n leaves? */
static inline bool
probe_group_excludes(GuniqueSummary *group_summary, GuniqueFilterKey *fkey,
					 int n, uint64 *counts)
{
	if (!gunique_filter_excludes(gunique_summary_filter(group_summary), fkey))
		return false;
	counts[GUNIQUE_STAT_LEAVES_FILTERED] += n;
	return true;
}

/*
 * Could any leaf of the group hold the key, as far as the group's filter
 * tells?  One cache line rules out every leaf for most new keys.  Notes in
 * the group when it has no filter, for the statement to ask for one.
 */
static bool
probe_group_needed(ProbeGroup *pg, GuniqueFilterKey *fkey, uint64 *counts)
{
	GuniqueSummary *summary = pg->group_summary;

	if (summary == NULL || !pg->use_group_filter)
		return true;
	if (probe_group_excludes(summary, fkey, pg->ntargets, counts))
		return false;
	if (gunique_summary_filter_missing(summary))
		pg->group_filter_wanted = true;
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
	return probe_leaf(pg->targets[i], pg->topindex, pg->nkeys, values,
					  isnull, NULL, finding);
}

/*
 * Past the group's filter, when it tags keys by leaf: only the leaves of
 * the tags and subtags the key may have, then their ranges and filters.
 * The others cannot hold the key: the tag parts are set with the bloom
 * part, by every insert and every build (src/README, I6).
 */
static Oid
probe_group_tags(ProbeGroup *pg, LeafSummaryCopies *copies, uint64 groupref,
				 GuniqueKeyImage *key, GuniqueFilterKey *fkey,
				 ProbeFinding *finding, Datum *values, bool *isnull,
				 uint64 *counts, ProbeScan **unready)
{
	Oid			conflict = InvalidOid;
	int			walked = 0;
	uint64		tags;
	uint64		subs;
	int			n;

	tags = gunique_leaftags_match(&copies->tags, groupref, fkey, &subs);
	n = gunique_leaftags_list(&copies->tags, tags, subs, copies->wanted);
	/* start loading every filter to be read, so the misses overlap */
	for (int w = 0; w < n; w++)
		probe_copy_prefetch(&copies->leaves[copies->wanted[w]], key, fkey);
	for (int w = 0; w < n && !OidIsValid(conflict) && *unready == NULL; w++)
	{
		int			i = copies->wanted[w];

		walked++;
		if (i == pg->self)
			continue;			/* own leaf is nbtree's to check */
		if (probe_copy_needed(pg, pg->targets[i], &copies->leaves[i], key,
							  fkey, counts))
			conflict = probe_target(pg, i, finding, values, isnull, counts,
									unready);
	}
	if (!OidIsValid(conflict) && *unready == NULL)
		counts[GUNIQUE_STAT_LEAVES_FILTERED] += pg->ntargets - walked;
	return conflict;
}

/*
 * Past the group's filter: the leaves whose range may hold the key, found
 * in the statement's copies of their summaries (probegroup.c), then their
 * filters; or, if the group's filter tags keys by leaf, the leaves of the
 * key's tags and subtags.
 */
static Oid
probe_group_copies(ProbeGroup *pg, GuniqueKeyImage *key,
				   GuniqueFilterKey *fkey, ProbeFinding *finding,
				   Datum *values, bool *isnull, uint64 *counts,
				   ProbeScan **unready)
{
	LeafSummaryCopies *copies = gunique_probegroup_copies(pg);
	GuniqueSummaryCopy *leaves = copies->leaves;
	uint64		groupref = gunique_summary_filter(pg->group_summary);
	int			upto;
	int			walked = 0;
	Oid			conflict = InvalidOid;

	if (gunique_filter_tagged(groupref))
		return probe_group_tags(pg, copies, groupref, key, fkey, finding,
								values, isnull, counts, unready);
	/* a key without an order image (a NULL leading column) may be anywhere */
	upto = key->ordered ?
		gunique_probegroup_copies_upto(copies, pg->ntargets, key->order) :
		pg->ntargets;
	for (int j = upto - 1; j >= upto - PROBE_AHEAD && j >= 0; j--)
		probe_copy_prefetch(&leaves[copies->order[j]], key, fkey);
	for (int j = upto - 1;
		 j >= 0 && copies->reach[j] >= key->order && !OidIsValid(conflict) &&
		 *unready == NULL; j--)
	{
		int			i = copies->order[j];

		walked++;
		if (j >= PROBE_AHEAD)
			probe_copy_prefetch(&leaves[copies->order[j - PROBE_AHEAD]], key,
								fkey);
		if (i == pg->self)
			continue;
		if (probe_copy_needed(pg, pg->targets[i], &leaves[i], key, fkey,
							  counts))
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
probe_group(ProbeGroup *pg, GuniqueKeyImage *key, ProbeFinding *finding,
			Datum *values, bool *isnull, uint64 *counts, ProbeScan **unready)
{
	Oid			conflict = InvalidOid;
	GuniqueSummaryCopy copy;
	GuniqueFilterKey fkey;
	ProbeScanContext cxt;

	memset(finding, 0, sizeof(ProbeFinding));
	counts[GUNIQUE_STAT_PROBES]++;
	gunique_filter_key(&fkey, key->hash);
	if (key->hashed && !probe_group_needed(pg, &fkey, counts))
		return InvalidOid;
	gunique_probescan_enter(pg->stmt, &cxt);
	/*
	 * Ranges and filters are checked for keys with a hash; a key with none
	 * (a column whose equality has no hash function) searches every leaf.
	 */
	if (key->hashed && pg->copies != NULL)
		conflict = probe_group_copies(pg, key, &fkey, finding, values, isnull,
									  counts, unready);
	else
		for (int i = 0; i < pg->ntargets && !OidIsValid(conflict) &&
			 *unready == NULL; i++)
		{
			if (i == pg->self)
				continue;
			if (key->hashed && pg->summaries[i] != NULL)
			{
				gunique_summary_copy(pg->summaries[i], &copy);
				if (!probe_copy_needed(pg, pg->targets[i], &copy, key, &fkey,
									   counts))
					continue;
			}
			conflict = probe_target(pg, i, finding, values, isnull, counts,
									unready);
		}
	gunique_probescan_leave(&cxt);
	return conflict;
}

/* What a light group's probe found (probe_light). */
typedef enum LightOutcome
{
	LIGHT_CLEAR,				/* the group's filter rules every leaf out */
	LIGHT_WHOLE,				/* it cannot: make the group whole */
	LIGHT_OPEN,					/* open the leaves of these tags and subtags
								 * first */
	LIGHT_UNREADY,				/* make this leaf's scan ready first */
	LIGHT_SEARCHED				/* the leaves of the key's tags and subtags
								 * were looked at: see the conflict and the
								 * finding */
} LightOutcome;

/*
 * The leaves of a light group listed under "tags" whose subtag is one of
 * "subs", own leaf left out (it is nbtree's to check), into ll->wanted;
 * how many, and in *walked how many with own leaf.
 */
static int
light_wanted(ProbeGroup *pg, uint64 tags, uint64 subs, int *walked,
			 bool *all_open)
{
	LightLeaves *ll = pg->ll;
	int			n = 0;

	*walked = gunique_leaftags_list(&ll->tags, tags, subs, ll->wanted);
	*all_open = true;
	for (int w = 0; w < *walked; w++)
	{
		int			i = ll->wanted[w];

		if (ll->leaves[i].heapoid == pg->own_heap)
			continue;
		ll->wanted[n++] = i;
		if (ll->scans[i] == NULL)
			*all_open = false;
	}
	return n;
}

/*
 * Under the key lock, for a light group (probegroup.c): does the group's
 * filter rule the key out of every leaf?  If not and the filter tags keys
 * by leaf, look only in the leaves of the key's tags and subtags, if they
 * are open (else *tags and *subs say which to open, without the key lock);
 * the other leaves, which the tags rule out, stay unlocked (src/README,
 * "Light probes and tags").  A leaf to search whose scan is not ready
 * stops it, in *unready.
 */
static LightOutcome
probe_light(ProbeGroup *pg, GuniqueKeyImage *key, ProbeFinding *finding,
			Datum *values, bool *isnull, uint64 *counts, Oid *conflict,
			uint64 *tags, uint64 *subs, ProbeScan **unready)
{
	LightLeaves *ll = pg->ll;
	GuniqueFilterKey fkey;
	uint64		ref;
	uint64		changes;
	int			nwanted;
	int			walked;
	bool		all_open;

	memset(finding, 0, sizeof(ProbeFinding));
	*conflict = InvalidOid;
	if (!key->hashed)
		return LIGHT_WHOLE;
	gunique_filter_key(&fkey, key->hash);
	if (probe_group_excludes(pg->group_summary, &fkey, pg->nleaves, counts))
	{
		counts[GUNIQUE_STAT_PROBES]++;
		return LIGHT_CLEAR;
	}
	ref = gunique_summary_filter(pg->group_summary);
	if (ll == NULL || !gunique_filter_tagged(ref))
		return LIGHT_WHOLE;
	*tags = gunique_leaftags_match(&ll->tags, ref, &fkey, subs);
	nwanted = light_wanted(pg, *tags, *subs, &walked, &all_open);
	if (!all_open)
		return LIGHT_OPEN;
	counts[GUNIQUE_STAT_PROBES]++;

	/*
	 * The statement's copies of the leaves' summaries serve while the
	 * group's count of changes stays put (src/README, I5).  Copy
	 * those missing first, then start loading the filters to be read, so
	 * that the cache misses of several leaves overlap; then check them.
	 */
	changes = gunique_summary_changes(pg->group_summary);
	if (ll->changes != changes)
	{
		memset(ll->copied, 0, sizeof(bool) * ll->n);
		ll->changes = changes;
	}
	for (int w = 0; w < nwanted; w++)
	{
		int			i = ll->wanted[w];

		if (!ll->copied[i] && ll->scans[i]->summary != NULL)
			gunique_prefetch(ll->scans[i]->summary);
	}
	for (int w = 0; w < nwanted; w++)
	{
		int			i = ll->wanted[w];

		if (!ll->copied[i])
		{
			gunique_summary_copy(ll->scans[i]->summary, &ll->copies[i]);
			ll->copied[i] = true;
		}
		probe_copy_prefetch(&ll->copies[i], key, &fkey);
	}
	for (int w = 0; w < nwanted && !OidIsValid(*conflict); w++)
	{
		int			i = ll->wanted[w];
		ProbeScan  *ps = ll->scans[i];

		if (probe_copy_needed(pg, ps, &ll->copies[i], key, &fkey, counts))
		{
			/*
			 * Most leaves of a tag are ruled out by their summaries; only a
			 * leaf to search needs its scan made ready.
			 */
			if (!ps->ready)
			{
				*unready = ps;
				return LIGHT_UNREADY;
			}
			counts[GUNIQUE_STAT_LEAVES_PROBED]++;
			*conflict = probe_leaf(ps, pg->topindex, pg->nkeys, values,
								   isnull, NULL, finding);
		}
	}
	if (!OidIsValid(*conflict))
		counts[GUNIQUE_STAT_LEAVES_FILTERED] += ll->n - walked;
	return LIGHT_SEARCHED;
}

/* Own leaf's scan in the statement, ready or not. */
static ProbeScan *
probe_own_get(ProbeGroup *pg, Relation index, Relation heap)
{
	ProbeScanContext cxt;
	ProbeScan  *own;

	gunique_probescan_enter(pg->stmt, &cxt);
	own = gunique_probescan_get(pg->stmt, RelationGetRelid(heap),
								RelationGetRelid(index));
	gunique_probescan_leave(&cxt);
	return own;
}

/*
 * Own leaf's scan, made ready without the key lock, for an insert that may
 * be an UPDATE keeping its key (keepkey.c); NULL if it cannot be one.
 */
static ProbeScan *
probe_own_scan(ProbeGroup *pg, Relation index, Relation heap,
			   bool indexUnchanged)
{
	ProbeScan  *own;

	if (!indexUnchanged || pg->skip_self ||
		heap->rd_tableam != GetHeapamTableAmRoutine())
		return NULL;
	own = probe_own_get(pg, index, heap);
	gunique_probescan_prepare(pg->stmt, own);
	return own;
}

/*
 * Under the key lock: is the insert an UPDATE that keeps the key of a row
 * own leaf holds (keepkey.c, src/README, I8)?  Then no other leaf
 * needs looking at, light group or whole.
 */
static bool
probe_keeps_key(ProbeGroup *pg, ProbeScan *own, Datum *values, bool *isnull,
				ItemPointer heap_tid)
{
	ProbeScanContext cxt;
	bool		kept;

	if (own == NULL)
		return false;
	gunique_probescan_enter(pg->stmt, &cxt);
	kept = gunique_update_keeps_key(own, pg->nkeys, values, isnull, heap_tid);
	gunique_probescan_leave(&cxt);
	return kept;
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
 * With the key lock released: ask for the filters of the group that the
 * probe missed, or that own leaf or the group outgrew, at most every
 * PROBE_ASK_MS in a statement.  A background worker builds them
 * (builder.c); the statement goes on.
 */
#define PROBE_ASK_MS 100

static void
ask_filters(ProbeGroup *pg, Relation index)
{
	TimestampTz now = GetCurrentTimestamp();

	pg->filters_wanted = false;
	pg->group_filter_wanted = false;
	if (pg->filters_asked != 0 &&
		!TimestampDifferenceExceeds(pg->filters_asked, now, PROBE_ASK_MS))
		return;
	pg->filters_asked = now;
	gunique_builder_request(pg->group, RelationGetRelid(index));
}

/*
 * Insert without a probe: nbtree's own check of the leaf is complete.  The
 * key lock is not needed for the summary either (src/README, I6),
 * and could not be held: nbtree may wait for a transaction.
 */
static void
before_unprobed(GuniqueProbe *probe, GuniqueSummary *summary, Datum *values,
				bool *isnull, uint64 *counts)
{
	GuniqueKeyImage key;

	counts[GUNIQUE_STAT_UNPROBED] = 1;
	gunique_stats_add(probe->index, counts);
	gunique_keymap_image(&key, gunique_probegroup_keymap(probe->indexInfo,
														 probe->index),
						 values, isnull);
	(void) gunique_summary_cover(summary, NULL, &key, probe->index);
}

/*
 * How probe_others ended: nothing holds the key in the other leaves, or the
 * insert is an UPDATE that keeps its key (I8), and the key lock
 * is held; or the leaf has no other leaf to look in.
 */
typedef enum ProbeOutcome
{
	PROBE_CLEAR,
	PROBE_KEPT,
	PROBE_ALONE
} ProbeOutcome;

/*
 * Under the key lock, nothing found: has a check of ON CONFLICT DO NOTHING
 * passed for the key, for a row going to another partition, and not
 * inserted yet (onconflict.c)?  Then release the key lock, wait for the
 * check's upsert lock, and return true to look again, holding it; the
 * check's entry may be in by then.  An inserter whose entry is in own leaf
 * already (it waits for a holder there) needs no such wait: a check that
 * passes after it finds its entry.  Nor one that the check waits for: with
 * the key lock released (asking costs the lock manager's partition locks),
 * it asks, and if so sets *holder_waits and looks again; that look, and
 * only that one ("asked"), goes in.  src/README, "INSERT ... ON CONFLICT",
 * points 4 and 5.
 */
static bool
probe_upsert_pending(GuniqueProbe *probe, ProbeGroup *pg,
					 GuniqueKeyImage *key, bool entry_in_place, bool asked,
					 bool *holder_waits)
{
	uint32		hash = gunique_keymap_lock_hash(key);

	if (entry_in_place || asked ||
		!gunique_onconflict_must_wait(pg->topindex, hash, pg->own_heap))
		return false;
	LWLockRelease(probe->keylock);
	if (gunique_onconflict_holder_waits(pg->topindex, hash))
		*holder_waits = true;
	else
		gunique_onconflict_wait(pg->topindex, hash);
	return true;
}

/*
 * Look for the probe's key in the other leaves of its group, waiting for
 * holders in progress with the key lock released, until none holds it,
 * and for a pending upsert of the key.  The statement's scans of the
 * group's leaves are opened (and the tree locked) before the key lock is
 * taken, with no upsert lock held in ShareLock.  A violation is reported.
 * Sets probe->pg, probe->keylock and *key unless it returns PROBE_ALONE.
 */
static ProbeOutcome
probe_others(GuniqueProbe *probe, bool indexUnchanged, GuniqueKeyImage *key,
			 uint64 *counts, bool entry_in_place)
{
	uint64		saved[GUNIQUE_NSTATS];
	bool		holder_waits = false;

	for (;;)
	{
		/* the last look found the pending upsert waiting for us: go in */
		bool		asked = holder_waits;
		ProbeGroup *pg;
		ProbeFinding finding;
		Oid			conflict;
		ProbeScan  *unready;
		ProbeScan  *own;

		holder_waits = false;
		pg = gunique_probegroup_for(probe->indexInfo, probe->index,
									probe->skip_self);
		if (!pg->needed || key_has_distinct_null(pg, probe->isnull))
		{
			probe->pg = pg;
			return PROBE_ALONE;
		}
		gunique_keymap_image(key, pg->keymap, probe->values, probe->isnull);
		own = probe_own_scan(pg, probe->index, probe->heap, indexUnchanged);
		probe->pg = pg;
		probe->keylock = gunique_keylock_for(pg->topindex,
											 gunique_keymap_lock_hash(key));

		LWLockAcquire(probe->keylock, LW_EXCLUSIVE);
		if (probe_keeps_key(pg, own, probe->values, probe->isnull,
							probe->heap_tid))
			return PROBE_KEPT;
		/*
		 * Start loading the key's blocks of the group's filter, which the
		 * probe reads first, and of own leaf's, which the cover reads, so
		 * that their cache misses overlap.
		 */
		gunique_summary_prefetch(pg->group_summary, key);
		gunique_summary_prefetch(pg->own_summary, key);
		memcpy(saved, counts, sizeof(saved));
		unready = NULL;
		if (pg->light)
		{
			uint64		tags = 0;
			uint64		subs = 0;
			ProbeScanContext cxt;
			LightOutcome outcome;

			gunique_probescan_enter(pg->stmt, &cxt);
			outcome = probe_light(pg, key, &finding, probe->values,
								  probe->isnull, counts, &conflict, &tags,
								  &subs, &unready);
			gunique_probescan_leave(&cxt);
			if (outcome == LIGHT_CLEAR)
			{
				if (!probe_upsert_pending(probe, pg, key, entry_in_place,
										  asked, &holder_waits))
					return PROBE_CLEAR;
				memcpy(counts, saved, sizeof(saved));
				continue;
			}
			if (outcome != LIGHT_SEARCHED)
			{
				LWLockRelease(probe->keylock);
				gunique_onconflict_release_waits(pg->topindex);
				memcpy(counts, saved, sizeof(saved));
				if (outcome == LIGHT_OPEN)
					gunique_probegroup_light_open(pg, tags, subs);
				else if (outcome == LIGHT_UNREADY)
					gunique_probescan_prepare(pg->stmt, unready);
				else
					(void) gunique_probegroup_whole(probe->indexInfo,
													probe->index,
													probe->skip_self);
				continue;
			}
		}
		else
			conflict = probe_group(pg, key, &finding, probe->values,
								   probe->isnull, counts, &unready);
		if (unready != NULL)
		{
			/* make the scan ready without the key lock, then look again */
			LWLockRelease(probe->keylock);
			gunique_onconflict_release_waits(pg->topindex);
			memcpy(counts, saved, sizeof(saved));
			gunique_probescan_prepare(pg->stmt, unready);
			continue;
		}
		if (!OidIsValid(conflict) && !TransactionIdIsValid(finding.xwait))
		{
			if (!probe_upsert_pending(probe, pg, key, entry_in_place,
									  asked, &holder_waits))
				return PROBE_CLEAR;
			memcpy(counts, saved, sizeof(saved));
			continue;
		}
		LWLockRelease(probe->keylock);

		if (OidIsValid(conflict))
		{
			Relation	holder = table_open(conflict, NoLock);

			counts[GUNIQUE_STAT_CONFLICTS]++;
			gunique_stats_add(probe->index, counts);
			report_conflict(probe->index, probe->heap, holder, &finding,
							probe->values, probe->isnull, probe->checkUnique);
		}
		counts[GUNIQUE_STAT_WAITS]++;
		/* let go the upsert locks this wait could deadlock on */
		gunique_onconflict_release_locks(pg->topindex, finding.xwait);
		probe_wait(&finding);
	}
}

/*
 * Before nbtree inserts a key into a leaf: look for it in the other leaves
 * that could hold it, under the key lock, and report a violation or wait
 * as nbtree would.  Returns holding the key lock if it probed, with own
 * leaf's summary covering the key; gunique_probe_after_insert releases it.
 */
void
gunique_probe_before_insert(GuniqueProbe *probe, Relation index,
							Datum *values, bool *isnull,
							ItemPointer heap_tid, Relation heap,
							IndexUniqueCheck checkUnique,
							bool indexUnchanged, IndexInfo *indexInfo)
{
	bool		skip_self = checkUnique == UNIQUE_CHECK_PARTIAL;
	uint64		counts[GUNIQUE_NSTATS] = {0};
	GuniqueKeyImage key;

	memset(probe, 0, sizeof(GuniqueProbe));
	probe->index = index;
	probe->indexInfo = indexInfo;
	probe->skip_self = skip_self;
	probe->heap = heap;
	probe->heap_tid = heap_tid;
	probe->values = values;
	probe->isnull = isnull;
	probe->checkUnique = checkUnique;
	counts[GUNIQUE_STAT_INSERTS] = 1;

	/*
	 * Not part of a tree: nothing to probe.  A speculative insertion (ON
	 * CONFLICT) leaves conflicts within its own partition to nbtree and the
	 * executor, which arbitrate them, so its own leaf is left out.
	 */
	if (checkUnique == UNIQUE_CHECK_NO || !index->rd_rel->relispartition)
	{
		before_unprobed(probe, gunique_summary_for(index), values, isnull,
						counts);
		return;
	}
	if (checkUnique == UNIQUE_CHECK_EXISTING)
		elog(ERROR, "gunique index \"%s\" cannot be rechecked as deferred",
			 RelationGetRelationName(index));

	switch (probe_others(probe, indexUnchanged, &key, counts, false))
	{
		case PROBE_ALONE:
			/* the tree changed after a wait for a pending upsert */
			gunique_onconflict_release_waits(probe->pg->topindex);
			before_unprobed(probe, probe->pg->own_summary, values, isnull,
							counts);
			probe->pg = NULL;
			return;
		case PROBE_KEPT:

			/*
			 * The old version's entry has the key covered already, and own
			 * leaf can hold nothing else equal to it but the old version's
			 * chain and entries of inserters that wait for this transaction
			 * (src/README, I8): no conflict, so nbtree need not
			 * look (its full check would wait for those inserters: a
			 * deadlock).
			 */
			counts[GUNIQUE_STAT_UNPROBED] = 1;
			counts[GUNIQUE_STAT_LEAVES_PROBED] = 1; /* own leaf's, the proof */
			gunique_stats_add(index, counts);
			probe->kept = true;
			return;
		case PROBE_CLEAR:
			break;
	}
	gunique_stats_add(index, counts);

	/*
	 * Nobody else holds the key: let own summary and the group's filter
	 * cover it (only now, so that a key refused or waited for does not
	 * widen them), and leave the key lock held for nbtree's insert, which
	 * checks own leaf in its partial mode unless ON CONFLICT leaves it out.
	 * An error releases the key lock with all other LWLocks.
	 */
	probe->own_partial = !skip_self;
	probe->cover = gunique_summary_cover(probe->pg->own_summary,
										 probe->pg->group_summary, &key,
										 index);
}

/*
 * Announce that this backend waits with its entry in own leaf, release the
 * key lock, and call "release" (a wait for the holder, or the opening of
 * own leaf's scan); then look in the other leaves again, since others pass
 * over an announced entry, and return holding the key lock.
 */
static void
own_leaf_release(GuniqueProbe *probe, TransactionId xid, uint64 *counts,
				 ProbeFinding *finding, ProbeScan *unready)
{
	GuniqueKeyImage key;

	gunique_waiter_set(probe->pg->topindex, RelationGetRelid(probe->heap),
					   probe->heap_tid, xid);
	LWLockRelease(probe->keylock);
	if (unready != NULL)
	{
		/* an entry in place needs no upsert lock (probe_upsert_pending) */
		gunique_onconflict_release_waits(probe->pg->topindex);
		gunique_probescan_prepare(probe->pg->stmt, unready);
	}
	else
	{
		counts[GUNIQUE_STAT_WAITS]++;
		gunique_onconflict_release_locks(probe->pg->topindex,
										 finding->xwait);
		probe_wait(finding);
	}
	if (probe_others(probe, false, &key, counts, true) == PROBE_ALONE)
		LWLockAcquire(probe->keylock, LW_EXCLUSIVE);
}

/*
 * nbtree's partial check found the key in own leaf, and inserted the row's
 * entry all the same; the key lock is held.  Look at own leaf again: a
 * live match, or one of this transaction's, is a violation; one inserted
 * or deleted by a transaction in progress is waited for, with the entry in
 * place and the wait announced (waiters.c), and then every leaf is looked
 * at again, the others first as before the insert; entries of announced
 * waiters do not count.  Returns with the key lock released.  Why the
 * outcomes are a unique btree's: src/README, I4a.
 */
static void
own_leaf_resolve(GuniqueProbe *probe)
{
	TransactionId xid = GetCurrentTransactionId();
	uint64		counts[GUNIQUE_NSTATS] = {0};

	PG_TRY();
	{
		for (;;)
		{
			ProbeScan  *own = probe_own_get(probe->pg, probe->index,
											probe->heap);
			ProbeFinding finding;
			ProbeScanContext cxt;
			Oid			conflict;

			if (!own->ready)
			{
				/* relations are opened without the key lock (I4) */
				own_leaf_release(probe, xid, counts, NULL, own);
				continue;
			}
			memset(&finding, 0, sizeof(ProbeFinding));
			counts[GUNIQUE_STAT_LEAVES_PROBED]++;
			gunique_probescan_enter(probe->pg->stmt, &cxt);
			conflict = probe_leaf(own, probe->pg->topindex, probe->pg->nkeys,
								  probe->values, probe->isnull,
								  probe->heap_tid, &finding);
			gunique_probescan_leave(&cxt);
			if (!OidIsValid(conflict) && !TransactionIdIsValid(finding.xwait))
				break;
			if (OidIsValid(conflict))
			{
				LWLockRelease(probe->keylock);
				counts[GUNIQUE_STAT_CONFLICTS]++;
				gunique_stats_add(probe->index, counts);
				report_conflict(probe->index, probe->heap, probe->heap,
								&finding, probe->values, probe->isnull,
								probe->checkUnique);
			}
			own_leaf_release(probe, xid, counts, &finding, NULL);
		}
	}
	PG_CATCH();
	{
		gunique_waiter_clear();
		PG_RE_THROW();
	}
	PG_END_TRY();
	gunique_waiter_clear();
	LWLockRelease(probe->keylock);
	gunique_stats_add(probe->index, counts);
}

/*
 * nbtree has inserted the key: settle what its partial check of own leaf
 * left open, let others see the key, then build filters.  Returns what the
 * access method's insert returns.
 */
bool
gunique_probe_after_insert(GuniqueProbe *probe, bool unique)
{
	ProbeGroup *pg = probe->pg;

	if (pg == NULL)
		return unique;
	if (probe->own_partial && !unique)
		own_leaf_resolve(probe);
	else
		LWLockRelease(probe->keylock);
	/* a check's upsert locks stay until the row is done (onconflict.c) */
	gunique_onconflict_release_waits(pg->topindex);
	if (pg->filters_wanted || pg->group_filter_wanted || probe->cover != 0)
		ask_filters(pg, probe->index);
	return probe->own_partial || probe->kept ? true : unique;
}

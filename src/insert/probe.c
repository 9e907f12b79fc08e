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
 * place of the page lock; locate.c tells which of them may hold it.  Own
 * leaf is nbtree's to check, and this file looks at it too when nbtree
 * reports it may hold the key.  The steps are src/README, "The insert
 * path"; why a leaf ruled out does not hold the key: "Locating a key"; why
 * two inserters of equal keys never both insert, why nobody waits on a
 * waiter, and why the only deadlocks are genuine ones: I3, I4 and I4a.
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
#include "locate/keymap.h"
#include "locate/locate.h"
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
 * Is the row being inserted dead already, to this transaction?  nbtree asks
 * before it reports a duplicate (_bt_check_unique), for CREATE INDEX
 * CONCURRENTLY: a concurrent build's validation (and REINDEX CONCURRENTLY's)
 * inserts rows its snapshot saw, by the root of their HOT chain, that may
 * have been updated or deleted by a committed transaction since.  Such an
 * entry is a dead row's, and its key no violation.  A row this transaction
 * is inserting is never dead to it.
 */
static bool
inserted_row_dead(Relation heap, ItemPointer heap_tid)
{
	ItemPointerData tid = *heap_tid;

	return !table_index_fetch_tuple_check(heap, &tid, SnapshotSelf, NULL);
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

/* Count what locating ruled out (locate.c). */
static inline void
probe_count_located(uint64 *counts, GuniqueLocateCounts *located)
{
	counts[GUNIQUE_STAT_LEAVES_SKIPPED] += located->range;
	counts[GUNIQUE_STAT_LEAVES_FILTERED] += located->filter;
}

/*
 * Search a leaf that may hold the key, unless its scan is not ready (then
 * it is left in *unready for the caller to make ready without the key
 * lock).  Notes in the group when a leaf without a filter has been searched
 * often enough to be worth one.
 */
static Oid
probe_target(ProbeGroup *pg, ProbeScan *ps, ProbeFinding *finding,
			 Datum *values, bool *isnull, uint64 *counts, ProbeScan **unready)
{
	if (!ps->ready)
	{
		*unready = ps;
		return InvalidOid;
	}
	if (ps->summary != NULL &&
		gunique_summary_searched(ps->summary, ps->index, &ps->filter_after))
		pg->filters_wanted = true;
	counts[GUNIQUE_STAT_LEAVES_PROBED]++;
	return probe_leaf(ps, pg->topindex, pg->nkeys, values, isnull, NULL,
					  finding);
}

/*
 * Under the key lock: look for the key in every leaf of the group that its
 * summaries do not rule out (locate.c), own leaf left to nbtree.  Returns
 * the table of a leaf that holds the key (a violation) or InvalidOid, with
 * what it found in progress in *finding; or stops at the first leaf to
 * search whose scan is not ready, in *unready.  The leaves are locked: the
 * statement locked every leaf of the tree (scope.c) before the key lock.
 */
static Oid
probe_group(ProbeGroup *pg, GuniqueLocateKey *key, ProbeFinding *finding,
			Datum *values, bool *isnull, uint64 *counts, ProbeScan **unready)
{
	GuniqueLocator *loc = pg->loc;
	GuniqueLocateCounts located = {0};
	Oid			conflict = InvalidOid;
	ProbeScanContext cxt;
	int			n;

	memset(finding, 0, sizeof(ProbeFinding));
	counts[GUNIQUE_STAT_PROBES]++;
	n = gunique_locate(loc, key, pg->self, loc->wanted, &located);
	probe_count_located(counts, &located);
	if (located.group == LOCATE_GROUP_ANY && loc->group != NULL &&
		key->image.hashed && gunique_summary_filter_missing(loc->group))
		pg->group_filter_wanted = true;
	if (n == 0)
		return InvalidOid;
	gunique_probescan_enter(pg->stmt, &cxt);
	for (int w = 0; w < n && !OidIsValid(conflict) && *unready == NULL; w++)
		conflict = probe_target(pg, pg->targets[loc->wanted[w]], finding,
								values, isnull, counts, unready);
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
 * "subs", own partition's left out (they are nbtree's to check), into
 * loc->wanted; how many, and in *listed how many with own partition's.
 */
static int
light_wanted(ProbeGroup *pg, uint64 tags, uint64 subs, int *listed,
			 bool *all_open)
{
	LightLeaves *ll = pg->ll;
	int		   *wanted = ll->loc->wanted;
	int			n = 0;

	*listed = gunique_locate_tagged(ll->loc, tags, subs, wanted);
	*all_open = true;
	for (int w = 0; w < *listed; w++)
	{
		int			i = wanted[w];

		if (ll->leaves[i].heapoid == pg->own_heap)
			continue;
		wanted[n++] = i;
		if (ll->scans[i] == NULL)
			*all_open = false;
	}
	return n;
}

/*
 * Under the key lock, for a light group (probegroup.c): does the group's
 * filter rule the key out of every leaf?  If not and the filter tags keys
 * by leaf, look only in the leaves of the key's tags and subtags that their
 * summaries do not rule out (locate.c), once they are locked and open
 * (else *tags and *subs say which to open, without the key lock); the
 * other leaves stay unlocked (src/README, "Locating a key").  A leaf to
 * search whose scan is not ready stops it, in *unready.
 */
static LightOutcome
probe_light(ProbeGroup *pg, GuniqueLocateKey *key, ProbeFinding *finding,
			Datum *values, bool *isnull, uint64 *counts, Oid *conflict,
			uint64 *tags, uint64 *subs, ProbeScan **unready)
{
	LightLeaves *ll = pg->ll;
	GuniqueLocateCounts located = {0};
	int			ncand;
	int			listed;
	int			n;
	bool		all_open;

	memset(finding, 0, sizeof(ProbeFinding));
	*conflict = InvalidOid;
	switch (gunique_locate_group(ll->loc, key, tags, subs))
	{
		case LOCATE_GROUP_OUT:
			counts[GUNIQUE_STAT_LEAVES_FILTERED] += pg->nleaves;
			counts[GUNIQUE_STAT_PROBES]++;
			return LIGHT_CLEAR;
		case LOCATE_GROUP_ANY:
			return LIGHT_WHOLE;
		case LOCATE_GROUP_TAGS:
			break;
	}
	ncand = light_wanted(pg, *tags, *subs, &listed, &all_open);
	if (!all_open)
		return LIGHT_OPEN;
	counts[GUNIQUE_STAT_PROBES]++;
	n = gunique_locate_leaves(ll->loc, key, ll->loc->wanted, ncand, -1,
							  ll->loc->wanted, &located);
	probe_count_located(counts, &located);
	for (int w = 0; w < n && !OidIsValid(*conflict); w++)
	{
		/*
		 * Most leaves of a tag are ruled out by their summaries; only a leaf
		 * to search needs its scan made ready.
		 */
		*conflict = probe_target(pg, ll->scans[ll->loc->wanted[w]], finding,
								 values, isnull, counts, unready);
		if (*unready != NULL)
			return LIGHT_UNREADY;
	}
	if (!OidIsValid(*conflict))
		counts[GUNIQUE_STAT_LEAVES_FILTERED] += ll->n - listed;
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

	/* I8 rests on the old version's key being unique: a valid tree */
	if (own == NULL || !pg->valid)
		return false;
	gunique_probescan_enter(pg->stmt, &cxt);
	kept = gunique_update_keeps_key(own, pg->nkeys, values, isnull, heap_tid);
	gunique_probescan_leave(&cxt);
	return kept;
}

/*
 * The insert path meets upserts (src/README, "INSERT ... ON CONFLICT") in
 * these three only, and in probe_others when the tree no longer needs a
 * probe: probe_unlock, probe_wait and probe_upsert_pending.
 *
 * probe_unlock: release the key lock, to look again or once the entry is
 * in; the upsert locks this look took in ShareLock go with it (an inserter
 * holds one only while it probes and inserts).  With the key lock held,
 * probe->pg is set.
 */
static void
probe_unlock(GuniqueProbe *probe)
{
	LWLockRelease(probe->keylock);
	gunique_onconflict_release_waits(probe->pg->topindex);
}

/*
 * probe_wait: with the key lock released, wait for the transaction that
 * holds the key, as nbtree would, after letting go the upsert locks this
 * wait could deadlock on.
 */
static void
probe_wait(GuniqueProbe *probe, ProbeFinding *finding)
{
	Relation	holder;

	gunique_onconflict_release_locks(probe->pg->topindex, finding->xwait);
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
 * probe_upsert_pending: under the key lock, nothing found: has a check of
 * ON CONFLICT DO NOTHING passed for the key, for a row going to another
 * partition, and not inserted yet (onconflict.c)?  Then release the key
 * lock, wait for the check's upsert lock, and return true to look again,
 * holding it; the check's entry may be in by then.  An inserter whose entry
 * is in own leaf already (it waits for a holder there) needs no such wait:
 * a check that passes after it finds its entry.  Nor one that the check
 * waits for: with the key lock released (asking costs the lock manager's
 * partition locks), it asks, and if so sets *holder_waits and looks again;
 * that look, and only that one ("asked"), goes in.  src/README, "INSERT ...
 * ON CONFLICT", points 4 and 5.
 */
static bool
probe_upsert_pending(GuniqueProbe *probe, ProbeGroup *pg, bool entry_in_place,
					 bool asked, bool *holder_waits)
{
	uint32		hash = gunique_keymap_lock_hash(&probe->key.image);

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
before_unprobed(GuniqueProbe *probe, GuniqueSummary *summary, uint64 *counts)
{
	counts[GUNIQUE_STAT_UNPROBED] = 1;
	gunique_stats_add(probe->index, counts);
	(void) gunique_summary_cover(summary, NULL, &probe->key.image,
								 probe->index);
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
 * Look for the probe's key in the other leaves of its group, waiting for
 * holders in progress with the key lock released, until none holds it,
 * and for a pending upsert of the key.  The statement's scans of the
 * group's leaves are opened (and the tree locked) before the key lock is
 * taken, with no upsert lock held in ShareLock.  A violation is reported.
 * Sets probe->pg, and probe->keylock unless it returns PROBE_ALONE.
 */
static ProbeOutcome
probe_others(GuniqueProbe *probe, bool indexUnchanged, uint64 *counts,
			 bool entry_in_place)
{
	GuniqueLocateKey *key = &probe->key;
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
			/* the tree changed, maybe after a wait for a pending upsert */
			gunique_onconflict_release_waits(pg->topindex);
			probe->pg = pg;
			return PROBE_ALONE;
		}
		own = probe_own_scan(pg, probe->index, probe->heap, indexUnchanged);
		probe->pg = pg;
		probe->keylock =
			gunique_keylock_for(pg->topindex,
								gunique_keymap_lock_hash(&key->image));

		LWLockAcquire(probe->keylock, LW_EXCLUSIVE);
		if (probe_keeps_key(pg, own, probe->values, probe->isnull,
							probe->heap_tid))
			return PROBE_KEPT;
		/*
		 * Start loading the key's blocks of the group's filter, which the
		 * probe reads first, and of own leaf's, which the cover reads, so
		 * that their cache misses overlap.
		 */
		gunique_locate_prefetch(pg->group_summary, key);
		gunique_locate_prefetch(pg->own_summary, key);
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
				if (!probe_upsert_pending(probe, pg, entry_in_place, asked,
										  &holder_waits))
					return PROBE_CLEAR;
				memcpy(counts, saved, sizeof(saved));
				continue;
			}
			if (outcome != LIGHT_SEARCHED)
			{
				probe_unlock(probe);
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
			probe_unlock(probe);
			memcpy(counts, saved, sizeof(saved));
			gunique_probescan_prepare(pg->stmt, unready);
			continue;
		}
		if (!OidIsValid(conflict) && !TransactionIdIsValid(finding.xwait))
		{
			if (!probe_upsert_pending(probe, pg, entry_in_place, asked,
									  &holder_waits))
				return PROBE_CLEAR;
			memcpy(counts, saved, sizeof(saved));
			continue;
		}
		if (OidIsValid(conflict) &&
			inserted_row_dead(probe->heap, probe->heap_tid))
			return PROBE_CLEAR;
		probe_unlock(probe);

		if (OidIsValid(conflict))
		{
			Relation	holder = table_open(conflict, NoLock);

			counts[GUNIQUE_STAT_CONFLICTS]++;
			gunique_stats_add(probe->index, counts);
			report_conflict(probe->index, probe->heap, holder, &finding,
							probe->values, probe->isnull, probe->checkUnique);
		}
		counts[GUNIQUE_STAT_WAITS]++;
		probe_wait(probe, &finding);
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
	/* the key's images, once for the row, however often it is looked for */
	gunique_locate_key(&probe->key,
					   gunique_probegroup_keymap(indexInfo, index),
					   values, isnull);

	/*
	 * Not part of a tree: nothing to probe.  A speculative insertion (ON
	 * CONFLICT) leaves conflicts within its own partition to nbtree and the
	 * executor, which arbitrate them, so its own leaf is left out.
	 */
	if (checkUnique == UNIQUE_CHECK_NO || !index->rd_rel->relispartition)
	{
		before_unprobed(probe, gunique_summary_for(index), counts);
		return;
	}
	if (checkUnique == UNIQUE_CHECK_EXISTING)
		elog(ERROR, "gunique index \"%s\" cannot be rechecked as deferred",
			 RelationGetRelationName(index));

	switch (probe_others(probe, indexUnchanged, counts, false))
	{
		case PROBE_ALONE:
			before_unprobed(probe, probe->pg->own_summary, counts);
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
										 probe->pg->group_summary,
										 &probe->key.image, index);
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
	gunique_waiter_set(probe->pg->topindex, RelationGetRelid(probe->heap),
					   probe->heap_tid, xid);
	/* an entry in place needs no upsert lock (probe_upsert_pending) */
	probe_unlock(probe);
	if (unready != NULL)
		gunique_probescan_prepare(probe->pg->stmt, unready);
	else
	{
		counts[GUNIQUE_STAT_WAITS]++;
		probe_wait(probe, finding);
	}
	if (probe_others(probe, false, counts, true) == PROBE_ALONE)
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
			if (OidIsValid(conflict) &&
				inserted_row_dead(probe->heap, probe->heap_tid))
				break;
			if (OidIsValid(conflict))
			{
				probe_unlock(probe);
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
	probe_unlock(probe);
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
	/* a check's upsert locks stay until the row is done (onconflict.c) */
	if (probe->own_partial && !unique)
		own_leaf_resolve(probe);
	else
		probe_unlock(probe);
	if (pg->filters_wanted || pg->group_filter_wanted || probe->cover != 0)
		ask_filters(pg, probe->index);
	return probe->own_partial || probe->kept ? true : unique;
}

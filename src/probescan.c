/*-------------------------------------------------------------------------
 *
 * probescan.c
 *	  Index scans on the leaves of gunique trees, kept open for a statement.
 *
 * Every row inserted into a gunique tree looks its key up in the other
 * leaves.  Opening the leaf's relations, making an insertion scan key, a
 * heap fetch state and a tuple slot for every lookup costs more than the
 * btree descent itself, so the first probe of a statement makes them and
 * later probes only set the key's arguments and descend (probe.c).
 *
 * The scans outlive the executor's memory and resource owners, so they live
 * in a memory context of their own and everything they pin or open belongs
 * to the transaction's resource owner: probe code brackets its work with
 * gunique_probescan_enter and _leave.  They are released
 *
 *	 - when a statement ends (ExecutorEnd), or the executor memory of the
 *	   inserts that use them is freed (the apply worker of logical
 *	   replication ends no statement), and before any utility statement
 *	   runs, so that the statement that follows an INSERT or COPY (DROP or
 *	   DETACH of a partition, say) finds no reference of ours to the
 *	   relations it changes;
 *	 - before commit or prepare, where a reference still held would be
 *	   reported as a leak;
 *	 - on subtransaction abort, properly, since the transaction's resource
 *	   owner keeps the buffers an interrupted scan pinned;
 *	 - on transaction abort, by forgetting them: the transaction's resource
 *	   owner releases their pins and references itself.
 *
 * Between probes a scan keeps no buffer pinned: the probe releases the
 * btree page it searched, and gunique_probescan_done drops the heap's.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "executor/executor.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/snapmgr.h"

#include "btread.h"
#include "compat.h"
#include "filter.h"
#include "probescan.h"
#include "scope.h"
#include "stats.h"

static MemoryContext ProbeScanMemory = NULL;
static HTAB *probe_scans = NULL;
static HTAB *probe_groups = NULL;
static ProbeGroup *last_group = NULL;	/* the group asked for last: rows go
										 * to one partition in runs */

/*
 * The first leaf of each group to be built in the statement, whose targets
 * the group's other leaves share: a statement that inserts into every one
 * of n leaves would otherwise set up n * n targets.
 */
typedef struct GroupOwner
{
	Oid			group;			/* hash key */
	ProbeGroup *pg;
} GroupOwner;

static HTAB *group_owners = NULL;

static ExecutorEnd_hook_type prev_ExecutorEnd = NULL;

/* The executor memory whose deletion releases the scans, if any. */
static MemoryContext bound_context = NULL;

static void probescan_ExecutorEnd(QueryDesc *queryDesc);
static void probescan_xact_callback(XactEvent event, void *arg);
static void probescan_subxact_callback(SubXactEvent event,
									   SubTransactionId mySubid,
									   SubTransactionId parentSubid,
									   void *arg);

void
gunique_probescan_init(void)
{
	prev_ExecutorEnd = ExecutorEnd_hook;
	ExecutorEnd_hook = probescan_ExecutorEnd;
	RegisterXactCallback(probescan_xact_callback, NULL);
	RegisterSubXactCallback(probescan_subxact_callback, NULL);
}

/* Make the transaction own what the scans pin, and their memory hold it. */
void
gunique_probescan_enter(ProbeScanContext *cxt)
{
	if (ProbeScanMemory == NULL)
		ProbeScanMemory = AllocSetContextCreate(TopMemoryContext,
												"gunique probe scans",
												ALLOCSET_DEFAULT_SIZES);
	cxt->saved_owner = CurrentResourceOwner;
	cxt->saved_context = MemoryContextSwitchTo(ProbeScanMemory);
	CurrentResourceOwner = TopTransactionResourceOwner;
}

void
gunique_probescan_leave(ProbeScanContext *cxt)
{
	CurrentResourceOwner = cxt->saved_owner;
	MemoryContextSwitchTo(cxt->saved_context);
}

/* A hash table keyed by an OID, living as long as the statement's scans. */
static HTAB *
statement_hash(const char *name, Size entrysize)
{
	HASHCTL		ctl;

	ctl.keysize = sizeof(Oid);
	ctl.entrysize = entrysize;
	ctl.hcxt = ProbeScanMemory;
	return hash_create(name, 16, &ctl, HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/*
 * The open scan of a leaf index, made on first use in the statement.  The
 * caller is between gunique_probescan_enter and _leave, and holds a lock on
 * both relations for the transaction.
 */
ProbeScan *
gunique_probescan_get(Oid heapoid, Oid indexoid)
{
	ProbeScan  *ps;
	bool		found;

	Assert(CurrentMemoryContext == ProbeScanMemory);
	if (probe_scans == NULL)
		probe_scans = statement_hash("gunique probe scans",
									 sizeof(ProbeScan));

	ps = hash_search(probe_scans, &indexoid, HASH_ENTER, &found);
	if (found)
		return ps;

	/*
	 * Leave no half-made entry, nor a reference, behind if opening fails:
	 * the reference belongs to the transaction's resource owner, which a
	 * subtransaction's abort does not release.
	 */
	ps->heap = NULL;
	ps->index = NULL;
	PG_TRY();
	{
		ps->heap = table_open(heapoid, NoLock);
		ps->index = index_open(indexoid, NoLock);
		ps->ready = false;
		ps->itup_key = NULL;
		ps->fetch = NULL;
		ps->slot = NULL;
		ps->summary = gunique_summary_for(ps->index);
		ps->filter_after = 0;	/* found when first needed */
	}
	PG_CATCH();
	{
		if (ps->index != NULL)
			index_close(ps->index, NoLock);
		if (ps->heap != NULL)
			table_close(ps->heap, NoLock);
		hash_search(probe_scans, &indexoid, HASH_REMOVE, NULL);
		PG_RE_THROW();
	}
	PG_END_TRY();
	return ps;
}

/*
 * Make the scan ready to search its leaf: what only a search needs is made
 * the first time one is needed in the statement, since with key ranges and
 * filters most leaves of a group are never searched.  Not under a key
 * lock: the first use of an index's support functions may read catalogs.
 */
void
gunique_probescan_prepare(ProbeScan *ps)
{
	ProbeScanContext cxt;

	if (ps->ready)
		return;
	gunique_probescan_enter(&cxt);
	InitDirtySnapshot(ps->dirty);
	if (ps->itup_key == NULL)
		ps->itup_key = gunique_bt_search_key(ps->index);
	if (ps->fetch == NULL)
		ps->fetch = table_index_fetch_begin(ps->heap);
	if (ps->slot == NULL)
		ps->slot = table_slot_create(ps->heap, NULL);
	ps->ready = true;
	gunique_probescan_leave(&cxt);
}

/* A probe of this leaf is over: unpin the heap page it last looked at. */
void
gunique_probescan_done(ProbeScan *ps)
{
	ExecClearTuple(ps->slot);
	table_index_fetch_reset(ps->fetch);
}

/* Copy the tree's key description into the group. */
static void
group_set_key(ProbeGroup *pg, GuniqueScope *scope)
{
	pg->topindex = scope->topindex;
	pg->nkeys = scope->nkeys;
	pg->nulls_not_distinct = scope->nulls_not_distinct;
	for (int i = 0; i < scope->nkeys; i++)
	{
		pg->collation[i] = scope->collation[i];
		pg->hashable[i] = scope->hashable[i];
		if (scope->hashable[i])
			fmgr_info_copy(&pg->hashfn[i], &scope->hashfn[i],
						   ProbeScanMemory);
	}
}

/*
 * A copy of the leaves of the index's group, own leaf left out if
 * skip_self; *nleaves receives their count, *self own leaf's place among
 * them (-1 if left out).  Other indexes of own partition (siblings, see
 * scope.c) are left out too: the row is nbtree's to check there, and it
 * may already be in them.
 */
static GuniqueLeaf *
group_leaves(GuniqueScope *scope, GuniqueLeafPlace *place, bool skip_self,
			 int *nleaves, int *self)
{
	GuniqueLeaf *leaves = palloc(sizeof(GuniqueLeaf) * place->count);
	Oid			ownheap = scope->leaves[place->first + place->self].heapoid;

	*nleaves = 0;
	*self = -1;
	for (int i = 0; i < place->count; i++)
	{
		GuniqueLeaf *leaf = &scope->leaves[place->first + i];

		if (i == place->self)
		{
			if (skip_self)
				continue;
			*self = *nleaves;
		}
		else if (leaf->heapoid == ownheap)
			continue;
		leaves[(*nleaves)++] = *leaf;
	}
	return leaves;
}

/*
 * Open the scans of the group's leaves and compute their summaries.
 * Opening a leaf for the first time in the statement may build relcache
 * entries, so the leaves were copied out of the scope cache beforehand.
 */
static void
group_open(ProbeGroup *pg, GuniqueLeaf *leaves, int nleaves)
{
	pg->targets = palloc(sizeof(ProbeScan *) * Max(nleaves, 1));
	pg->summaries = palloc(sizeof(GuniqueSummary *) * Max(nleaves, 1));
	for (int i = 0; i < nleaves; i++)
	{
		ProbeScan  *ps = gunique_probescan_get(leaves[i].heapoid,
											   leaves[i].indexoid);

		if (ps->summary != NULL && gunique_summary_needs_compute(ps->summary))
			gunique_summary_compute(ps->summary, ps->heap, ps->index);
		if (ps->summary != NULL)
			pg->any_summary = ps->summary;
		pg->targets[i] = ps;
		pg->summaries[i] = ps->summary;
		pg->ntargets = i + 1;
	}
}

/*
 * The summary entry that holds a group's key filter: the group's top index,
 * a partitioned index of the tree, locked with it.
 */
static GuniqueSummary *
group_summary(Oid group)
{
	Relation	groupindex = index_open(group, NoLock);
	GuniqueSummary *summary = NULL;

	if (groupindex->rd_rel->relkind == RELKIND_PARTITIONED_INDEX)
		summary = gunique_summary_for(groupindex);
	index_close(groupindex, NoLock);
	return summary;
}

/*
 * Share the targets of a leaf of the same group built earlier in the
 * statement under the same scope, if there is one; own leaf is among them.
 */
static bool
group_share(ProbeGroup *pg, int self, uint64 generation)
{
	GroupOwner *owner;
	ProbeGroup *from;

	if (group_owners == NULL ||
		(owner = hash_search(group_owners, &pg->group, HASH_FIND,
							 NULL)) == NULL)
		return false;
	from = owner->pg;
	if (from->scope_generation != generation || from->skip_self ||
		!from->needed || from->light)
		return false;
	pg->ntargets = from->ntargets;
	pg->targets = from->targets;
	pg->summaries = from->summaries;
	pg->any_summary = from->any_summary;
	pg->group_summary = from->group_summary;
	pg->use_group_filter = from->use_group_filter;
	pg->views = from->views;
	pg->self = self;
	return true;
}

/* Let later leaves of the group share this one's targets. */
static void
group_own(ProbeGroup *pg)
{
	GroupOwner *owner;

	if (group_owners == NULL)
		group_owners = statement_hash("gunique group owners",
									  sizeof(GroupOwner));
	owner = hash_search(group_owners, &pg->group, HASH_ENTER, NULL);
	owner->pg = pg;
}

/*
 * Can the group's filter stand in for its leaves?  A probe of a group of
 * many leaves that the group's filter rules out reads nothing else: not
 * the leaves' ranges, filters or btrees, so the group is made "light",
 * without locking or opening any leaf but own (which the executor has
 * locked).  Only the tree's partitioned tables and indexes are locked, so
 * that no leaf is dropped or detached (both lock the partition's parent
 * first).  The group's filter holds every key of every leaf of the group
 * without that: every insert into any of them sets the key's bits in it
 * first, whoever inserts, and rebuilding a leaf (TRUNCATE, REINDEX, even
 * CONCURRENTLY) leaves it a superset (filter.c).  The first key it cannot
 * rule out makes the group whole (gunique_probescan_group_whole).
 */
static bool
group_light_possible(GuniqueLeafPlace *place, bool skip_self)
{
	return !skip_self && gunique_key_filters &&
		place->count >= GUNIQUE_GROUP_FILTER_MIN_LEAVES;
}

/* A group's fields before it is built. */
static void
group_init(ProbeGroup *pg, bool skip_self, GuniqueLeafPlace *place,
		   GuniqueScope *scope)
{
	pg->scope_generation = 0;	/* not valid until built */
	pg->skip_self = skip_self;
	/* a sibling's rows go into its leaf too, which probes for them */
	pg->needed = !place->sibling && place->count > (skip_self ? 0 : 1);
	pg->light = false;
	pg->filters_wanted = false;
	pg->self = skip_self ? -1 : place->self;
	pg->nleaves = place->count;
	pg->ntargets = 0;
	pg->targets = NULL;
	pg->summaries = NULL;
	pg->own_summary = NULL;
	pg->any_summary = NULL;
	pg->group = place->group;
	pg->group_summary = NULL;
	pg->use_group_filter = false;
	pg->views = NULL;
	pg->group_keys = 0;
	pg->group_filter_wanted = false;
	pg->tree_changed = 0;
	group_set_key(pg, scope);
}

/* Open every leaf of the group, or share another leaf's targets. */
static void
group_make_whole(ProbeGroup *pg, GuniqueLeaf *leaves, int nleaves, int self,
				 GuniqueLeafPlace *place, uint64 generation)
{
	bool		shared = !pg->skip_self && !place->siblings;

	/* with siblings, each partition leaves out its own: nothing to share */
	if (shared && group_share(pg, place->self, generation))
		return;
	pg->self = self;
	group_open(pg, leaves, nleaves);
	/* kept up to date always, used only by groups of many leaves */
	pg->group_summary = group_summary(pg->group);
	pg->use_group_filter = nleaves >= GUNIQUE_GROUP_FILTER_MIN_LEAVES;
	if (pg->use_group_filter && pg->group_summary != NULL)
	{
		pg->views = palloc0(sizeof(ProbeViews));
		pg->views->leaves = palloc(sizeof(ProbeLeafView) * pg->ntargets);
		pg->views->order = palloc(sizeof(int) * pg->ntargets);
		pg->views->reach = palloc(sizeof(uint64) * pg->ntargets);
		for (int i = 0; i < pg->ntargets; i++)
			pg->views->order[i] = i;
	}
	if (shared)
		group_own(pg);
}

/*
 * (Re)make the statement's group of a leaf index: light if it can be
 * (group_light_possible) and "light_ok", else whole.
 */
static ProbeGroup *
group_build(Relation index, bool skip_self, bool light_ok)
{
	Oid			indexoid = RelationGetRelid(index);

	for (;;)
	{
		GuniqueLeafPlace place;
		GuniqueScope *scope;
		uint64		generation;
		ProbeGroup *pg;
		ProbeScanContext cxt;
		bool		light;
		GuniqueLeaf *leaves;
		int			nleaves = 0;
		int			self = -1;

		/* Lock the tree only if another leaf can hold the keys. */
		scope = gunique_scope_for_leaf(index, &place, GUNIQUE_LOCK_NONE);
		light = light_ok && group_light_possible(&place, skip_self);
		if (place.count > (skip_self ? 0 : 1))
			scope = gunique_scope_for_leaf(index, &place,
										   light ? GUNIQUE_LOCK_INNER :
										   GUNIQUE_LOCK_ALL);
		generation = gunique_scope_generation();

		gunique_probescan_enter(&cxt);
		if (probe_groups == NULL)
			probe_groups = statement_hash("gunique probe groups",
										  sizeof(ProbeGroup));
		/* a rebuilt group's old arrays may be shared: the context frees them */
		pg = hash_search(probe_groups, &indexoid, HASH_ENTER, NULL);

		/*
		 * Copy what the scope says before anything that may process
		 * invalidations (opening a relation, a catalog lookup) flushes it.
		 */
		group_init(pg, skip_self, &place, scope);
		leaves = pg->needed ?
			group_leaves(scope, &place, skip_self, &nleaves, &self) : NULL;
		scope = NULL;

		pg->own_summary = gunique_summary_for(index);
		if (pg->needed && light)
		{
			pg->group_summary = group_summary(place.group);
			pg->light = pg->group_summary != NULL;
		}
		if (pg->needed && !pg->light)
		{
			if (light)
			{
				/* no group filter to stand in: lock every leaf after all */
				if (leaves != NULL)
					pfree(leaves);
				gunique_probescan_leave(&cxt);
				light_ok = false;
				continue;
			}
			group_make_whole(pg, leaves, nleaves, self, &place, generation);
		}
		if (leaves != NULL)
			pfree(leaves);
		gunique_probescan_leave(&cxt);

		if (generation == gunique_scope_generation())
		{
			pg->scope_generation = generation;
			return pg;
		}
	}
}

/*
 * The statement's probe group of a leaf index, made on first use and after
 * any change to the tree's scope.  Valid until the next call that may
 * process invalidations or end the statement's scans.
 */
ProbeGroup *
gunique_probescan_group(Relation index, bool skip_self)
{
	Oid			indexoid = RelationGetRelid(index);
	ProbeGroup *pg = last_group;

	if ((pg == NULL || pg->indexoid != indexoid) && probe_groups != NULL)
		pg = hash_search(probe_groups, &indexoid, HASH_FIND, NULL);
	if (pg == NULL || pg->skip_self != skip_self ||
		pg->scope_generation != gunique_scope_generation())
		pg = group_build(index, skip_self, true);
	last_group = pg;
	return pg;
}

/*
 * The statement's group of a leaf index, made whole: every leaf locked and
 * opened, for a key that the group's filter of a light group could not rule
 * out.  Not under a key lock.
 */
ProbeGroup *
gunique_probescan_group_whole(Relation index, bool skip_self)
{
	ProbeGroup *pg = gunique_probescan_group(index, skip_self);

	if (!pg->light)
		return pg;
	last_group = group_build(index, skip_self, false);
	return last_group;
}

/* Forget every scan and group; their memory goes with them. */
static void
probescan_reset(void)
{
	if (probe_scans == NULL && probe_groups == NULL)
		return;
	group_owners = NULL;
	probe_scans = NULL;
	probe_groups = NULL;
	last_group = NULL;
	MemoryContextReset(ProbeScanMemory);
}

/* End every scan and close its relations. */
void
gunique_probescan_release_all(void)
{
	HASH_SEQ_STATUS status;
	ProbeScan  *ps;
	ResourceOwner saved_owner;

	gunique_stats_flush();
	if (probe_scans != NULL)
	{
		saved_owner = CurrentResourceOwner;
		CurrentResourceOwner = TopTransactionResourceOwner;
		hash_seq_init(&status, probe_scans);
		while ((ps = hash_seq_search(&status)) != NULL)
		{
			if (ps->slot != NULL)
				ExecDropSingleTupleTableSlot(ps->slot);
			if (ps->fetch != NULL)
				table_index_fetch_end(ps->fetch);
			index_close(ps->index, NoLock);
			table_close(ps->heap, NoLock);
		}
		CurrentResourceOwner = saved_owner;
	}
	probescan_reset();
}

/* Forget the scans of an aborted transaction: its resource owner frees them. */
static void
probescan_forget_all(void)
{
	gunique_stats_flush();
	probescan_reset();
}

static void
probescan_context_reset(void *arg)
{
	if (bound_context == (MemoryContext) arg)
		bound_context = NULL;
	gunique_probescan_release_all();
}

/*
 * Release the scans also when the executor memory of the inserts that use
 * them goes (the IndexInfo's context: FreeExecutorState), not only at
 * ExecutorEnd.  The logical replication apply worker makes an executor
 * state per change and never runs ExecutorEnd; scans kept open until
 * commit made a TRUNCATE later in the same remote transaction fail on
 * "being used by active queries in this session".
 */
void
gunique_probescan_bind(MemoryContext cxt)
{
	MemoryContextCallback *cb;

	if (cxt == NULL || cxt == bound_context)
		return;
	cb = MemoryContextAlloc(cxt, sizeof(MemoryContextCallback));
	cb->func = probescan_context_reset;
	cb->arg = cxt;
	MemoryContextRegisterResetCallback(cxt, cb);
	bound_context = cxt;
}

static void
probescan_ExecutorEnd(QueryDesc *queryDesc)
{
	if (prev_ExecutorEnd)
		prev_ExecutorEnd(queryDesc);
	else
		standard_ExecutorEnd(queryDesc);
	gunique_probescan_release_all();
}

static void
probescan_xact_callback(XactEvent event, void *arg)
{
	switch (event)
	{
		case XACT_EVENT_PRE_COMMIT:
		case XACT_EVENT_PARALLEL_PRE_COMMIT:
		case XACT_EVENT_PRE_PREPARE:
			gunique_probescan_release_all();
			break;
		case XACT_EVENT_ABORT:
		case XACT_EVENT_PARALLEL_ABORT:
			probescan_forget_all();
			break;
		default:
			break;
	}
}

static void
probescan_subxact_callback(SubXactEvent event, SubTransactionId mySubid,
						   SubTransactionId parentSubid, void *arg)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		gunique_probescan_release_all();
}

/*-------------------------------------------------------------------------
 *
 * probegroup.c
 *	  What a statement's probes from one leaf index search: its group.
 *
 * A probe from a leaf searches the other leaves of its group (scope.c):
 * the statement's ProbeGroup for the leaf lists their open scans
 * (probescan.c) and summaries, and describes the key.  It is made on the
 * first row, kept in the insert's IndexInfo (ii_AmCache) for the rest of
 * the statement, and made again after any change to the tree's scope.
 * Leaves of one group share one list of targets within a statement: a
 * statement that inserts into every one of n leaves would otherwise set up
 * n * n targets.
 *
 * A group of GUNIQUE_GROUP_FILTER_MIN_LEAVES leaves or more starts light:
 * without locking or opening any leaf but its own, as long as the group's
 * filter rules each key out; for the first key it cannot rule out, the
 * leaves of the key's tags and subtags are locked and opened, or, without
 * tags, the group is made whole.  Which leaves may hold a key, a group's
 * locator tells (locate.c).  Why that is safe is in src/README, "Locating
 * a key".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "port/pg_bitutils.h"
#include "storage/lmgr.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"
#include "utils/regproc.h"
#include "utils/rel.h"
#include "utils/relcache.h"
#include "utils/syscache.h"

#include "compat.h"
#include "am/scope.h"
#include "insert/probegroup.h"
#include "insert/probescan.h"
#include "locate/keymap.h"
#include "locate/summary.h"

/* What a gunique insert keeps in its IndexInfo's ii_AmCache. */
typedef struct InsertCache
{
	ProbeStatement *stmt;
	ProbeGroup *groups[2];		/* by skip_self */
	GuniqueKeyMap *keymap;		/* the index's, made on first use */
} InsertCache;

/*
 * The first leaf of each group to be built in the statement, whose targets
 * the group's other leaves share.
 */
typedef struct GroupOwner
{
	Oid			group;			/* hash key */
	ProbeGroup *pg;				/* a whole group's targets, or NULL */
	LightLeaves *ll;			/* a light group's leaves by tag, or NULL */
} GroupOwner;

/* Copy the tree's key description into the group. */
static void
group_set_key(ProbeGroup *pg, GuniqueScope *scope)
{
	pg->topindex = scope->topindex;
	pg->nkeys = scope->nkeys;
	pg->nulls_not_distinct = scope->nulls_not_distinct;
	pg->valid = scope->valid;
}

/*
 * A copy of every leaf of the index's group, siblings included, for the
 * list a light group keeps: the statement's light groups of every leaf of
 * the group share it, and each passes over the indexes of its own
 * partition.
 */
static GuniqueLeaf *
group_all_leaves(GuniqueScope *scope, GuniqueLeafPlace *place, int *nleaves)
{
	GuniqueLeaf *leaves = palloc(sizeof(GuniqueLeaf) * Max(place->count, 1));

	memcpy(leaves, &scope->leaves[place->first],
		   sizeof(GuniqueLeaf) * place->count);
	*nleaves = place->count;
	return leaves;
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
 * Open the scans of the group's leaves and prepare their summaries.
 * Opening a leaf for the first time in the statement may build relcache
 * entries, so the leaves were copied out of the scope cache beforehand.
 */
static void
group_open(ProbeGroup *pg, GuniqueLeaf *leaves, int nleaves)
{
	pg->targets = palloc(sizeof(ProbeScan *) * Max(nleaves, 1));
	for (int i = 0; i < nleaves; i++)
	{
		ProbeScan  *ps = gunique_probescan_get(pg->stmt, leaves[i].heapoid,
											   leaves[i].indexoid);

		gunique_summary_prepare(ps->summary, ps->heap, ps->index);
		pg->targets[i] = ps;
		pg->ntargets = i + 1;
	}
}

/*
 * The summary that holds a group's key filter: the group's top index, a
 * partitioned index of the tree, locked with it.  Asked for only while the
 * tree's top is valid: until then leaves join groups without a merge that
 * fills their filters (src/README, I6).
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

	if (pg->stmt->group_owners == NULL ||
		(owner = hash_search(pg->stmt->group_owners, &pg->group, HASH_FIND,
							 NULL)) == NULL)
		return false;
	from = owner->pg;
	if (from == NULL || from->scope_generation != generation || from->skip_self ||
		!from->needed || from->light)
		return false;
	pg->ntargets = from->ntargets;
	pg->targets = from->targets;
	pg->loc = from->loc;
	pg->group_summary = from->group_summary;
	pg->self = self;
	return true;
}

/* The statement's entry for a group, made on first use. */
static GroupOwner *
group_owner_entry(ProbeStatement *stmt, Oid group)
{
	GroupOwner *owner;
	bool		found;

	if (stmt->group_owners == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(GroupOwner);
		ctl.hcxt = stmt->cxt;
		stmt->group_owners = hash_create("gunique group owners", 16,
										 &ctl, HASH_ELEM | HASH_BLOBS |
										 HASH_CONTEXT);
	}
	owner = hash_search(stmt->group_owners, &group, HASH_ENTER, &found);
	if (!found)
	{
		owner->pg = NULL;
		owner->ll = NULL;
	}
	return owner;
}

/* Let later leaves of the group share this one's targets. */
static void
group_own(ProbeGroup *pg)
{
	GroupOwner *owner;

	owner = group_owner_entry(pg->stmt, pg->group);
	owner->pg = pg;
}

/*
 * Can the group's filter stand in for its leaves?  A probe of a group of
 * many leaves that the group's filter rules out reads nothing else, so the
 * group is made "light", without locking or opening any leaf but own
 * (which the executor has locked); only the tree's partitioned tables and
 * indexes are locked (src/README, "Locating a key").  So too for a
 * speculative insertion, which leaves own leaf out: a light probe passes
 * over own leaf anyway.
 */
static bool
group_light_possible(GuniqueLeafPlace *place)
{
	return gunique_key_filters &&
		place->count >= GUNIQUE_GROUP_FILTER_MIN_LEAVES;
}

/* A group's fields before it is built. */
static void
group_init(ProbeGroup *pg, ProbeStatement *stmt, bool skip_self,
		   GuniqueLeafPlace *place, GuniqueScope *scope)
{
	memset(pg, 0, sizeof(ProbeGroup));
	pg->stmt = stmt;
	pg->scope_generation = 0;	/* not valid until built */
	pg->skip_self = skip_self;
	/* a sibling's rows go into its leaf too, which probes for them */
	pg->needed = !place->sibling && place->count > (skip_self ? 0 : 1);
	pg->self = skip_self ? -1 : place->self;
	pg->nleaves = place->count;
	pg->group = place->group;
	group_set_key(pg, scope);
}

/*
 * Which of the group's leaves may hold a key (locate.c): the group's filter
 * is read first in a group of many leaves, and then the statement keeps
 * copies of the leaves' summaries, sorted by range.
 */
static GuniqueLocator *
group_locator(ProbeGroup *pg)
{
	bool		use_group = pg->ntargets >= GUNIQUE_GROUP_FILTER_MIN_LEAVES;
	Oid		   *heapoids = palloc(sizeof(Oid) * Max(pg->ntargets, 1));
	GuniqueLocator *loc;

	for (int i = 0; i < pg->ntargets; i++)
		heapoids[i] = RelationGetRelid(pg->targets[i]->heap);
	loc = gunique_locator_make(pg->ntargets, heapoids,
							   use_group ? pg->group_summary : NULL,
							   LOCATE_KEEP_COPIES | LOCATE_BY_RANGE);
	for (int i = 0; i < pg->ntargets; i++)
		loc->summaries[i] = pg->targets[i]->summary;
	pfree(heapoids);
	return loc;
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
	pg->group_summary = pg->valid ? group_summary(pg->group) : NULL;
	pg->loc = group_locator(pg);
	if (shared)
		group_own(pg);
}

/*
 * The statement's list of a light group's leaves by tag, shared by its
 * light groups of every leaf of the group: made from "leaves" (which it
 * keeps) if there is none for this scope yet.  "summary" is the group's
 * entry, which holds its filter.
 */
static LightLeaves *
group_light_leaves(ProbeStatement *stmt, Oid group, GuniqueLeaf *leaves,
				   int nleaves, GuniqueSummary *summary, uint64 generation)
{
	GroupOwner *owner = group_owner_entry(stmt, group);
	LightLeaves *ll = owner->ll;
	Oid		   *heapoids;

	if (ll != NULL && ll->generation == generation)
		return ll;
	ll = palloc0(sizeof(LightLeaves));
	ll->generation = generation;
	ll->n = nleaves;
	ll->leaves = leaves;
	ll->scans = palloc0(sizeof(ProbeScan *) * Max(nleaves, 1));
	heapoids = palloc(sizeof(Oid) * Max(nleaves, 1));
	for (int i = 0; i < nleaves; i++)
		heapoids[i] = leaves[i].heapoid;
	/* a leaf's summary is set as it is opened */
	ll->loc = gunique_locator_make(nleaves, heapoids, summary,
								   LOCATE_KEEP_COPIES);
	pfree(heapoids);
	owner->ll = ll;
	return ll;
}

/* The statement's list for this scope, if one was made. */
static LightLeaves *
group_light_shared(ProbeStatement *stmt, Oid group, uint64 generation)
{
	GroupOwner *owner;

	if (stmt->group_owners == NULL ||
		(owner = hash_search(stmt->group_owners, &group, HASH_FIND,
							 NULL)) == NULL ||
		owner->ll == NULL || owner->ll->generation != generation)
		return NULL;
	return owner->ll;
}

/*
 * Lock and open the leaves of a light group that have one of "tags" and
 * one of "subs", for a key the group's filter could not rule out
 * (src/README, "Locating a key"): each index before its table, as the
 * scope cache locks a light group's.  Not under a key lock.  Locking may
 * process invalidations: the caller gets its group again before it
 * probes.
 */
void
gunique_probegroup_light_open(ProbeGroup *pg, uint64 tags, uint64 subs)
{
	LightLeaves *ll = pg->ll;
	int		   *wanted = ll->loc->wanted;
	int			n = gunique_locate_tagged(ll->loc, tags, subs, wanted);

	for (int w = 0; w < n; w++)
	{
		int			i = wanted[w];
		GuniqueLeaf *leaf = &ll->leaves[i];
		ProbeScanContext cxt;
		ProbeScan  *ps;

		if (ll->scans[i] != NULL || leaf->heapoid == pg->own_heap)
			continue;			/* open, or nbtree's to check */
		LockRelationOid(leaf->indexoid, AccessShareLock);
		LockRelationOid(leaf->heapoid, AccessShareLock);
		gunique_probescan_enter(pg->stmt, &cxt);
		ps = gunique_probescan_get(pg->stmt, leaf->heapoid, leaf->indexoid);
		gunique_probescan_leave(&cxt);
		/* made ready only if its summary lets the key in: see probe.c */
		gunique_summary_prepare(ps->summary, ps->heap, ps->index);
		ll->loc->summaries[i] = ps->summary;
		ll->scans[i] = ps;
	}
}

/*
 * Fill in a group from the scope: light if it can be (group_light_possible)
 * and "light_ok", else whole.  False if it was to be light but has no
 * group filter to stand in for the leaves.  Runs in the statement's memory.
 */
static bool
group_fill(ProbeGroup *pg, Relation index, GuniqueScope *scope,
		   GuniqueLeafPlace *place, bool light, uint64 generation)
{
	GuniqueLeaf *leaves = NULL;
	int			nleaves = 0;
	int			self = -1;
	bool		result = true;

	/*
	 * Copy what the scope says before anything that may process
	 * invalidations (opening a relation, a catalog lookup) flushes it; a
	 * light group shares the statement's list of its leaves.
	 */
	if (pg->needed && light)
		pg->ll = group_light_shared(pg->stmt, place->group, generation);
	/*
	 * A light group's list keeps every leaf, own leaf and its siblings
	 * too, even for a speculative insertion: the list is shared with the
	 * light groups of the other leaves, for which they are not own.  Light
	 * probes pass over the indexes of own partition.
	 */
	if (pg->needed && pg->ll == NULL)
		leaves = light ? group_all_leaves(scope, place, &nleaves) :
			group_leaves(scope, place, pg->skip_self, &nleaves, &self);

	pg->own_summary = gunique_summary_for(index);
	if (pg->needed && light)
	{
		pg->group_summary = pg->valid ? group_summary(place->group) : NULL;
		pg->light = pg->group_summary != NULL;
		result = pg->light;
		if (pg->light && pg->ll == NULL)
		{
			pg->ll = group_light_leaves(pg->stmt, place->group, leaves,
										nleaves, pg->group_summary,
										generation);
			leaves = NULL;		/* kept */
		}
		if (!pg->light)
			pg->ll = NULL;
	}
	else if (pg->needed)
		group_make_whole(pg, leaves, nleaves, self, place, generation);
	if (leaves != NULL)
		pfree(leaves);
	return result;
}

/*
 * A probe calls the key's comparison function under the key lock, where a
 * function that runs SQL could wait forever, uncancellable, or take the
 * lock again (src/README, I4).  CREATE INDEX refuses such a
 * function (ddl.c); a tree made before it did, or whose function was
 * replaced since, takes no insert that must probe.  Asked of the syscache
 * as each statement makes its group, so a replaced function is seen.
 */
static void
refuse_user_comparison(Relation index)
{
	for (int i = 0; i < IndexRelationGetNumberOfKeyAttributes(index); i++)
	{
		Oid			proc = gunique_key_user_comparison(index, i);

		if (OidIsValid(proc))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot insert into index \"%s\"",
							RelationGetRelationName(index)),
					 errdetail("The comparison function %s of its key is not written in C.  gunique calls it while other inserters of the key wait on a lock that cannot be cancelled, and a function that runs SQL there could wait forever.",
							   format_procedure_qualified(proc)),
					 errhint("Give the operator class a comparison function written in C, or drop the index.")));
	}
}

/*
 * (Re)make the statement's group of a leaf index: light if it can be and
 * "light_ok", else whole.  A rebuilt group's old arrays may be shared:
 * the statement's memory frees them.
 */
static ProbeGroup *
group_build(InsertCache *cache, Relation index, bool skip_self,
			bool light_ok)
{
	ProbeStatement *stmt = cache->stmt;

	for (;;)
	{
		GuniqueLeafPlace place;
		GuniqueScope *scope;
		uint64		generation;
		ProbeGroup *pg;
		ProbeScanContext cxt;
		bool		light;
		bool		filled;

		/* Lock the tree only if another leaf can hold the keys. */
		scope = gunique_scope_for_leaf(index, &place, GUNIQUE_LOCK_NONE);
		light = light_ok && scope->valid && group_light_possible(&place);
		if (place.count > (skip_self ? 0 : 1))
		{
			refuse_user_comparison(index);
			scope = gunique_scope_for_leaf(index, &place,
										   light ? GUNIQUE_LOCK_INNER :
										   GUNIQUE_LOCK_ALL);
		}
		generation = gunique_scope_generation();

		gunique_probescan_enter(stmt, &cxt);
		pg = palloc(sizeof(ProbeGroup));
		group_init(pg, stmt, skip_self, &place, scope);
		pg->own_index = RelationGetRelid(index);
		pg->own_heap = index->rd_index->indrelid;
		filled = group_fill(pg, index, scope, &place, light, generation);
		gunique_probescan_leave(&cxt);

		if (!filled)
		{
			/* no group filter to stand in: lock every leaf after all */
			light_ok = false;
			continue;
		}
		if (generation == gunique_scope_generation())
		{
			pg->scope_generation = generation;
			return pg;
		}
	}
}

/*
 * The insert's cache, made on first use with the index's key map, in the
 * IndexInfo's memory: the index's definition cannot change while the
 * executor inserts through it.
 */
static InsertCache *
insert_cache(IndexInfo *indexInfo, Relation index)
{
	InsertCache *cache = (InsertCache *) indexInfo->ii_AmCache;
	MemoryContext parent = indexInfo->ii_Context;

	/* makeIndexInfo sets it: the memory the IndexInfo lives in */
	Assert(parent != NULL);
	if (cache == NULL)
	{
		cache = MemoryContextAllocZero(parent, sizeof(InsertCache));
		cache->keymap = MemoryContextAlloc(parent, sizeof(GuniqueKeyMap));
		gunique_keymap_make(cache->keymap, index, parent);
		indexInfo->ii_AmCache = cache;
	}
	return cache;
}

/* The insert's cache, with a live statement for its probe groups. */
static InsertCache *
insert_cache_probing(IndexInfo *indexInfo, Relation index)
{
	InsertCache *cache = insert_cache(indexInfo, index);

	if (cache->stmt == NULL || cache->stmt->cxt == NULL)
	{
		cache->stmt = gunique_probe_statement(indexInfo->ii_Context);
		cache->groups[0] = cache->groups[1] = NULL;
	}
	return cache;
}

/*
 * The statement's probe group of a leaf index, made on first use and after
 * any change to the tree's scope.  Valid until the next call that may
 * process invalidations or release the statement's scans.
 */
ProbeGroup *
gunique_probegroup_for(IndexInfo *indexInfo, Relation index, bool skip_self)
{
	InsertCache *cache = insert_cache_probing(indexInfo, index);
	ProbeGroup *pg = cache->groups[skip_self];

	if (pg == NULL || pg->scope_generation != gunique_scope_generation())
	{
		pg = group_build(cache, index, skip_self, true);
		cache->groups[skip_self] = pg;
	}
	return pg;
}

/*
 * The statement's group of a leaf index, made whole: every leaf locked and
 * opened, for a key that the group's filter of a light group could not
 * rule out.  Not under a key lock.
 */
ProbeGroup *
gunique_probegroup_whole(IndexInfo *indexInfo, Relation index, bool skip_self)
{
	ProbeGroup *pg = gunique_probegroup_for(indexInfo, index, skip_self);
	InsertCache *cache;

	if (!pg->light)
		return pg;
	cache = insert_cache_probing(indexInfo, index);
	pg = group_build(cache, index, skip_self, false);
	cache->groups[skip_self] = pg;
	return pg;
}

/*
 * How the index maps its keys (keymap.c), made once per IndexInfo; an
 * insert that does not probe needs no ProbeStatement for it.
 */
GuniqueKeyMap *
gunique_probegroup_keymap(IndexInfo *indexInfo, Relation index)
{
	return insert_cache(indexInfo, index)->keymap;
}

/*
 * The executor is done with the inserts (aminsertcleanup): release the
 * statement's scans now rather than with its memory.
 */
void
gunique_probegroup_cleanup(IndexInfo *indexInfo)
{
	InsertCache *cache = (InsertCache *) indexInfo->ii_AmCache;

	if (cache == NULL || cache->stmt == NULL)
		return;
	gunique_probe_statement_release(cache->stmt);
	cache->groups[0] = cache->groups[1] = NULL;
}

/*-------------------------------------------------------------------------
 *
 * scope.c
 *	  Per-backend cache of gunique index trees.
 *
 * An insert into one leaf of a gunique index tree must look for its key in
 * the other leaves.  Finding them takes catalog scans (pg_inherits, pg_index,
 * partition keys), so each backend caches, per top index, the list of leaf
 * indexes and their tables, and per leaf, the top index and the leaf's group.
 *
 * Groups: walking down from the top index, a partitioned table whose
 * partition key is determined by the index key (every partition key column
 * is an index key column with the same collation and equality operator, the
 * rule DefineIndex applies to btree, or an expression over index key columns
 * whose equality is image equality, such as lower(left(id::text, 1)) over a
 * uuid) sends equal keys to the same partition, so each of its partitions
 * starts a group of its own.  Two leaves in
 * different groups can never hold equal keys, and a leaf alone in its group
 * needs no probe at all.
 *
 * The cache is flushed whenever a relcache invalidation arrives for any
 * relation of any cached tree; ATTACH, DETACH, CREATE TABLE ... PARTITION OF
 * and DROP all invalidate the partitioned table above the partition, which
 * is a member.  A flush can happen in the middle of a lookup (locking a
 * relation processes invalidations), so lookups build in a private context
 * and retry if the cache generation moved under them; while a tree is being
 * walked, every invalidation moves it, since the walk's relations are not
 * members yet.  Callers copy what they need from a scope before anything
 * that may process invalidations.
 *
 * Siblings: beside each leaf, the other ready indexes of its partition with
 * the same access method and definition that are no partition of another
 * index (REINDEX CONCURRENTLY's copy, then the index it replaced); see
 * src/README, I7.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/indexing.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "miscadmin.h"
#include "nodes/readfuncs.h"
#include "optimizer/optimizer.h"
#include "partitioning/partdefs.h"
#include "storage/lmgr.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/builtins.h"
#include "utils/fmgroids.h"
#include "utils/partcache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "compat.h"
#include "am/scope.h"
#include "locate/keymap.h"

typedef struct LeafEntry
{
	Oid			leafindex;		/* hash key */
	Oid			topindex;
	GuniqueLeafPlace place;
} LeafEntry;

typedef struct TreeWalk
{
	bool		siblings;		/* look for the leaves' siblings too */
	List	   *leaves;			/* GuniqueLeaf * */
	List	   *members;		/* every table and index OID */
	List	   *inner;			/* the partitioned ones, top down */
	bool		stale;			/* met a relation gone: read it again */
} TreeWalk;

static MemoryContext ScopeContext = NULL;
static HTAB *scope_by_top = NULL;
static HTAB *leaf_map = NULL;
static HTAB *member_set = NULL;

/* Bumped whenever the cache is flushed. */
static uint64 cache_generation = 1;

/* A tree is being walked for the cache (scope_build). */
static bool walking = false;

/* Bumped whenever locks taken by gunique_scope_lock may have been released. */
static uint64 lock_generation = 1;

static void
scope_flush(void)
{
	if (ScopeContext != NULL)
		MemoryContextReset(ScopeContext);
	scope_by_top = NULL;
	leaf_map = NULL;
	member_set = NULL;
	cache_generation++;
}

/*
 * While a tree is being walked, any invalidation may concern what the walk
 * has read so far (its relations are not members yet), so the generation
 * moves and the lookup starts again (scope_build).
 */
void
gunique_scope_relcache_inval(Oid relid)
{
	if (walking)
		cache_generation++;
	if (member_set == NULL)
		return;
	if (!OidIsValid(relid) ||
		hash_search(member_set, &relid, HASH_FIND, NULL) != NULL)
		scope_flush();
}

/* Every transaction event (hooks.c) ends its hold on its locks, or may. */
void
gunique_scope_xact_event(XactEvent event)
{
	lock_generation++;
}

/* A subtransaction's abort releases the locks it took (hooks.c). */
void
gunique_scope_subxact_event(SubXactEvent event, SubTransactionId mySubid,
							SubTransactionId parentSubid)
{
	if (event == SUBXACT_EVENT_ABORT_SUB)
		lock_generation++;
}

/*
 * The top index of the tree that indexoid belongs to (indexoid itself if it
 * is not a partition of another index).
 */
Oid
gunique_tree_top(Oid indexoid)
{
	List	   *ancestors = get_partition_ancestors(indexoid);
	Oid			top = ancestors == NIL ? indexoid : llast_oid(ancestors);

	list_free(ancestors);
	return top;
}

/*
 * Does index key column j compare equal only values that are the same
 * image (btequalimage, support function 4)?  Then equal keys make equal
 * arguments to any expression over the column.
 */
static bool
column_equal_image(Relation index, int j)
{
	Oid			opcintype = index->rd_opcintype[j];
	Oid			proc = get_opfamily_proc(index->rd_opfamily[j], opcintype,
										 opcintype, BTEQUALIMAGE_PROC);

	return OidIsValid(proc) &&
		DatumGetBool(OidFunctionCall1Coll(proc, index->rd_indcollation[j],
										  ObjectIdGetDatum(opcintype)));
}

/* The index key column on table column attnum, or -1. */
static int
index_column_of(Relation index, AttrNumber attnum)
{
	int			nkeyatts = IndexRelationGetNumberOfKeyAttributes(index);

	for (int j = 0; j < nkeyatts; j++)
		if (index->rd_index->indkey.values[j] == attnum)
			return j;
	return -1;
}

/*
 * Is a partition key expression a function of image-equal index key
 * columns only?  Partition expressions are immutable, so equal keys then
 * give equal partition key values.
 */
static bool
expression_determined(Relation index, Node *expr)
{
	Bitmapset  *attnos = NULL;
	int			x = -1;

	pull_varattnos(expr, 1, &attnos);
	if (bms_is_empty(attnos))
		return false;
	while ((x = bms_next_member(attnos, x)) >= 0)
	{
		AttrNumber	attnum = x + FirstLowInvalidHeapAttributeNumber;
		int			j = attnum > 0 ? index_column_of(index, attnum) : -1;

		if (j < 0 || !column_equal_image(index, j))
			return false;
	}
	return true;
}

/* Is partition key column i an index key column with the same equality? */
static bool
column_determined(Relation index, PartitionKey key, int i)
{
	Oid			ptkey_eqop;
	int			nkeyatts = IndexRelationGetNumberOfKeyAttributes(index);

	ptkey_eqop = get_opfamily_member(key->partopfamily[i],
									 key->partopcintype[i],
									 key->partopcintype[i],
									 key->strategy == PARTITION_STRATEGY_HASH ?
									 HTEqualStrategyNumber :
									 BTEqualStrategyNumber);
	for (int j = 0; j < nkeyatts; j++)
	{
		Oid			idx_eqop;

		if (index->rd_index->indkey.values[j] != key->partattrs[i] ||
			index->rd_indcollation[j] != key->partcollation[i])
			continue;
		idx_eqop = get_opfamily_member(index->rd_opfamily[j],
									   index->rd_opcintype[j],
									   index->rd_opcintype[j],
									   BTEqualStrategyNumber);
		if (OidIsValid(idx_eqop) && idx_eqop == ptkey_eqop)
			return true;
	}
	return false;
}

/*
 * Does the partition key of the table under partitioned index "index" send
 * equal index keys to the same partition?  Yes if every partition key
 * column is an index key column with the same equality (the test
 * DefineIndex makes for a unique btree index on a partitioned table), and
 * also if a partition key expression depends only on index key columns
 * whose equality is image equality.
 */
static bool
partition_key_determined(Relation index, Relation table)
{
	PartitionKey key = RelationGetPartitionKey(table);
	ListCell   *partexpr = list_head(key->partexprs);

	for (int i = 0; i < key->partnatts; i++)
	{
		if (key->partattrs[i] == 0)
		{
			Node	   *expr = lfirst(partexpr);

			partexpr = lnext(key->partexprs, partexpr);
			if (!expression_determined(index, expr))
				return false;
		}
		else if (!column_determined(index, key, i))
			return false;
	}
	return true;
}

/*
 * The walk met a relation that is gone: have the lookup read the tree
 * again (scope_build, gunique_tree_leaves).
 */
static void
walk_stale(TreeWalk *walk)
{
	walk->stale = true;
	cache_generation++;
}

static void
walk_add_leaf(TreeWalk *walk, Oid indexoid, Oid heapoid, Oid group,
			  bool sibling)
{
	GuniqueLeaf *leaf = palloc(sizeof(GuniqueLeaf));

	leaf->indexoid = indexoid;
	leaf->heapoid = heapoid;
	leaf->group = group;
	leaf->sibling = sibling;
	walk->leaves = lappend(walk->leaves, leaf);
}

/* Is a column of two pg_index rows the same, byte for byte? */
static bool
index_field_equal(HeapTuple a, HeapTuple b, int attnum, TupleDesc desc)
{
	bool		anull;
	bool		bnull;
	Datum		ad = heap_getattr(a, attnum, desc, &anull);
	Datum		bd = heap_getattr(b, attnum, desc, &bnull);
	struct varlena *av;
	struct varlena *bv;

	if (anull || bnull)
		return anull && bnull;
	av = pg_detoast_datum((struct varlena *) DatumGetPointer(ad));
	bv = pg_detoast_datum((struct varlena *) DatumGetPointer(bd));
	return VARSIZE(av) == VARSIZE(bv) &&
		memcmp(av, bv, VARSIZE(av)) == 0;
}

/*
 * Is an expression column (indexprs, indpred) of two pg_index rows the
 * same tree?  Compared as nodes: REINDEX CONCURRENTLY's copy stores them
 * read back from the original's text, which loses their token locations.
 */
static bool
index_expr_equal(HeapTuple a, HeapTuple b, int attnum, TupleDesc desc)
{
	bool		anull;
	bool		bnull;
	Datum		ad = heap_getattr(a, attnum, desc, &anull);
	Datum		bd = heap_getattr(b, attnum, desc, &bnull);

	if (anull || bnull)
		return anull && bnull;
	return equal(stringToNode(TextDatumGetCString(ad)),
				 stringToNode(TextDatumGetCString(bd)));
}

/* Do two pg_index rows define the same index key? */
static bool
index_same_definition(HeapTuple a, HeapTuple b, TupleDesc desc)
{
	Form_pg_index fa = (Form_pg_index) GETSTRUCT(a);
	Form_pg_index fb = (Form_pg_index) GETSTRUCT(b);
	static const int fields[] = {
		Anum_pg_index_indkey, Anum_pg_index_indcollation,
		Anum_pg_index_indclass, Anum_pg_index_indoption
	};

	if (fa->indnatts != fb->indnatts || fa->indnkeyatts != fb->indnkeyatts ||
		fa->indnullsnotdistinct != fb->indnullsnotdistinct)
		return false;
	for (int i = 0; i < lengthof(fields); i++)
		if (!index_field_equal(a, b, fields[i], desc))
			return false;
	return index_expr_equal(a, b, Anum_pg_index_indexprs, desc) &&
		index_expr_equal(a, b, Anum_pg_index_indpred, desc);
}

/* pg_index.indisready; false for an index gone. */
static bool
index_is_ready(Oid indexoid)
{
	HeapTuple	tup = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
	bool		ready;

	if (!HeapTupleIsValid(tup))
		return false;
	ready = ((Form_pg_index) GETSTRUCT(tup))->indisready;
	ReleaseSysCache(tup);
	return ready;
}

/* Is the index of access method "relam" and no partition of another? */
static bool
index_standalone_of_am(Oid indexoid, Oid relam)
{
	HeapTuple	tup = SearchSysCache1(RELOID, ObjectIdGetDatum(indexoid));
	bool		result;

	if (!HeapTupleIsValid(tup))
		return false;
	result = ((Form_pg_class) GETSTRUCT(tup))->relam == relam &&
		!((Form_pg_class) GETSTRUCT(tup))->relispartition;
	ReleaseSysCache(tup);
	return result;
}

/*
 * Add the siblings of a leaf: the other indexes of its partition that
 * receive inserts (indisready), have its access method and definition and
 * are no partition of another index.  REINDEX CONCURRENTLY makes one (the
 * copy it builds, until it swaps it in as the leaf; then the index it
 * replaced, until that is marked dead): while both take inserts, inserters
 * that saw the swap and inserters that did not probe through different
 * indexes of the partition, so probes search both (src/README, I7).
 */
static void
walk_siblings(Oid indexoid, Oid heapoid, Oid group, TreeWalk *walk)
{
	HeapTuple	leaftup = SearchSysCache1(INDEXRELID,
										  ObjectIdGetDatum(indexoid));
	HeapTuple	reltup;
	Oid			relam;
	Relation	pg_index;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	tup;

	if (!HeapTupleIsValid(leaftup))
		return;
	reltup = SearchSysCache1(RELOID, ObjectIdGetDatum(indexoid));
	if (!HeapTupleIsValid(reltup))
	{
		ReleaseSysCache(leaftup);
		return;
	}
	relam = ((Form_pg_class) GETSTRUCT(reltup))->relam;
	ReleaseSysCache(reltup);

	pg_index = table_open(IndexRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_index_indrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(heapoid));
	scan = systable_beginscan(pg_index, IndexIndrelidIndexId, true, NULL,
							  1, &key);
	while (HeapTupleIsValid(tup = systable_getnext(scan)))
	{
		Form_pg_index form = (Form_pg_index) GETSTRUCT(tup);

		if (form->indexrelid == indexoid || !form->indisready ||
			!index_same_definition(leaftup, tup, RelationGetDescr(pg_index)) ||
			!index_standalone_of_am(form->indexrelid, relam))
			continue;
		walk_add_leaf(walk, form->indexrelid, heapoid, group, true);
		walk->members = lappend_oid(walk->members, form->indexrelid);
	}
	systable_endscan(scan);
	table_close(pg_index, AccessShareLock);
	ReleaseSysCache(leaftup);
}

/*
 * Walk the index tree below indexoid.  "group" is the group that indexoid
 * belongs to; it equals indexoid when every partitioned table above has its
 * key determined by the index key.  Takes AccessShareLock on what it opens.
 */
static void
walk_tree(Oid indexoid, Oid group, TreeWalk *walk)
{
	Oid			heapoid = IndexGetRelation(indexoid, true);
	char		relkind = get_rel_relkind(indexoid);

	/*
	 * Gone since its parent's children were read (REINDEX CONCURRENTLY drops
	 * the index it replaced), or the catalog snapshot is newer than the
	 * caches: what was read is stale, read again.
	 */
	if (!OidIsValid(heapoid) ||
		(relkind != RELKIND_INDEX && relkind != RELKIND_PARTITIONED_INDEX))
	{
		walk_stale(walk);
		return;
	}

	walk->members = lappend_oid(walk->members, indexoid);
	walk->members = lappend_oid(walk->members, heapoid);

	if (relkind == RELKIND_INDEX)
	{
		/*
		 * A leaf that CREATE INDEX CONCURRENTLY has made but not yet built
		 * holds nothing and takes no insert: a member, so that its becoming
		 * ready flushes the cache, but no leaf (src/README, 4.11).
		 */
		if (!index_is_ready(indexoid))
			return;
		walk_add_leaf(walk, indexoid, heapoid, group, false);
		if (walk->siblings)
			walk_siblings(indexoid, heapoid, group, walk);
	}
	else
	{
		bool		split = false;
		List	   *children;
		ListCell   *lc;

		walk->inner = lappend_oid(walk->inner, indexoid);
		walk->inner = lappend_oid(walk->inner, heapoid);

		if (group == indexoid)
		{
			Relation	table = try_table_open(heapoid, AccessShareLock);
			Relation	index = try_relation_open(indexoid, AccessShareLock);

			if (table != NULL && index != NULL)
				split = partition_key_determined(index, table);
			if (index != NULL)
				relation_close(index, NoLock);
			if (table != NULL)
				table_close(table, NoLock);
			if (table == NULL || index == NULL)
			{
				walk_stale(walk);
				return;
			}
		}

		/* find_inheritance_children_extended fails on a relation gone */
		if (!SearchSysCacheExists1(RELOID, ObjectIdGetDatum(indexoid)))
		{
			walk_stale(walk);
			return;
		}
		children = find_inheritance_children_extended(indexoid, false, NoLock,
													  NULL, NULL);
		foreach(lc, children)
		{
			Oid			child = lfirst_oid(lc);

			walk_tree(child, split ? child : group, walk);
		}
	}
}

static int
leaf_cmp(const ListCell *a, const ListCell *b)
{
	const GuniqueLeaf *la = lfirst(a);
	const GuniqueLeaf *lb = lfirst(b);

	if (la->indexoid == lb->indexoid)
		return 0;
	return la->indexoid < lb->indexoid ? -1 : 1;
}

/* By group, then by OID: each group's leaves side by side. */
static int
leaf_group_cmp(const ListCell *a, const ListCell *b)
{
	const GuniqueLeaf *la = lfirst(a);
	const GuniqueLeaf *lb = lfirst(b);

	if (la->group != lb->group)
		return la->group < lb->group ? -1 : 1;
	return leaf_cmp(a, b);
}

/* A tree read again this often while it changes is reported, not waited on. */
#define TREE_READ_TRIES 100

/*
 * Every leaf index of the tree under topindex, as a list of GuniqueLeaf in
 * OID order, allocated in the caller's memory context; siblings are not
 * looked for.  A walk that met a relation gone since its parent's children
 * were read (REINDEX CONCURRENTLY drops the index it replaced) would miss
 * that leaf's replacement: the tree is read again, from a fresh catalog
 * snapshot, until a walk meets none.
 */
List *
gunique_tree_leaves(Oid topindex)
{
	for (int tries = 0;; tries++)
	{
		TreeWalk	walk = {false, NIL, NIL, NIL, false};

		walk_tree(topindex, InvalidOid, &walk);
		list_free(walk.members);
		list_free(walk.inner);
		if (!walk.stale)
		{
			list_sort(walk.leaves, leaf_cmp);
			return walk.leaves;
		}
		list_free_deep(walk.leaves);
		if (tries >= TREE_READ_TRIES)
			ereport(ERROR,
					(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
					 errmsg("could not read the partitions of gunique index \"%s\"",
							get_rel_name(topindex)),
					 errdetail("Partitions of its table were replaced or removed each of the %d times they were read.",
							   TREE_READ_TRIES)));
		CHECK_FOR_INTERRUPTS();
		AcceptInvalidationMessages();
		InvalidateCatalogSnapshot();
	}
}

static bool
leaf_listed(List *leaves, Oid indexoid)
{
	ListCell   *lc;

	foreach(lc, leaves)
	{
		if (((GuniqueLeaf *) lfirst(lc))->indexoid == indexoid)
			return true;
	}
	return false;
}

/* Lock, or let go of, the leaves of "leaves" that "others" does not list. */
static void
leaves_lock(List *leaves, List *others, LOCKMODE heapmode, bool lock)
{
	ListCell   *lc;

	foreach(lc, leaves)
	{
		GuniqueLeaf *leaf = lfirst(lc);

		if (leaf_listed(others, leaf->indexoid))
			continue;
		if (lock)
		{
			LockRelationOid(leaf->heapoid, heapmode);
			LockRelationOid(leaf->indexoid, AccessShareLock);
		}
		else
		{
			UnlockRelationOid(leaf->indexoid, AccessShareLock);
			UnlockRelationOid(leaf->heapoid, heapmode);
		}
	}
}

/*
 * gunique_tree_leaves, with each leaf's table locked in "heapmode" and its
 * index in AccessShareLock, once each by this call (a caller may let go of
 * them: merge.c).  REINDEX CONCURRENTLY replaces a leaf under locks that
 * conflict with neither (src/README, "Lock order"), so a list read before
 * the locks were held may name an index that is gone, or no longer the
 * leaf.  The tree is read again, from a catalog snapshot taken once they
 * are held, until the list stays the same: each leaf returned was its
 * partition's leaf while this transaction held its table, so writers go
 * on inserting into it until this transaction ends (REINDEX CONCURRENTLY
 * waits for every holder of the table before it stops maintaining the old
 * index).  The locks taken for a leaf replaced meanwhile are let go at
 * once (those of the new one taken first): the old index's drop waits for
 * them.
 */
List *
gunique_tree_leaves_locked(Oid topindex, LOCKMODE heapmode)
{
	List	   *leaves = gunique_tree_leaves(topindex);

	leaves_lock(leaves, NIL, heapmode, true);
	for (;;)
	{
		List	   *again;

		AcceptInvalidationMessages();
		InvalidateCatalogSnapshot();
		again = gunique_tree_leaves(topindex);
		if (list_length(again) == list_length(leaves))
		{
			ListCell   *lc;
			bool		same = true;

			foreach(lc, leaves)
				same = same && leaf_listed(again, ((GuniqueLeaf *) lfirst(lc))->indexoid);
			if (same)
			{
				list_free_deep(again);
				return leaves;
			}
		}
		leaves_lock(again, leaves, heapmode, true);
		leaves_lock(leaves, again, heapmode, false);
		list_free_deep(leaves);
		leaves = again;
		CHECK_FOR_INTERRUPTS();
	}
}

/* Let go of the locks gunique_tree_leaves_locked took for "leaves". */
void
gunique_tree_leaves_unlock(List *leaves, LOCKMODE heapmode)
{
	leaves_lock(leaves, NIL, heapmode, false);
}

static void
scope_create_hashes(void)
{
	HASHCTL		ctl;

	if (ScopeContext == NULL)
		ScopeContext = AllocSetContextCreate(CacheMemoryContext,
											 "gunique scope cache",
											 ALLOCSET_DEFAULT_SIZES);
	ctl.keysize = sizeof(Oid);
	ctl.hcxt = ScopeContext;
	ctl.entrysize = sizeof(GuniqueScope);
	scope_by_top = hash_create("gunique scopes", 16, &ctl,
							   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ctl.entrysize = sizeof(LeafEntry);
	leaf_map = hash_create("gunique leaves", 64, &ctl,
						   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	ctl.entrysize = sizeof(Oid);
	member_set = hash_create("gunique members", 64, &ctl,
							 HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
}

/* The tree's key, as a probe compares it. */
static void
scope_fill_key(GuniqueScope *scope, Relation index, Oid top)
{
	scope->nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	scope->nulls_not_distinct = index->rd_index->indnullsnotdistinct;
	scope->valid = get_index_isvalid(top);
}

/*
 * Note where each leaf sits: its group's leaves are side by side in
 * scope->leaves, so a probe finds them without looking at the others.
 */
static void
scope_install_places(GuniqueScope *scope, Oid topindex)
{
	for (int first = 0, end; first < scope->nleaves; first = end)
	{
		bool		siblings = scope->leaves[first].sibling;

		/* the group's leaves: [first, end) */
		for (end = first + 1; end < scope->nleaves &&
			 scope->leaves[end].group == scope->leaves[first].group; end++)
			siblings |= scope->leaves[end].sibling;
		for (int i = first; i < end; i++)
		{
			LeafEntry  *entry = hash_search(leaf_map,
											&scope->leaves[i].indexoid,
											HASH_ENTER, NULL);

			entry->topindex = topindex;
			entry->place.group = scope->leaves[i].group;
			entry->place.first = first;
			entry->place.count = end - first;
			entry->place.self = i - first;
			entry->place.sibling = scope->leaves[i].sibling;
			entry->place.siblings = siblings;
		}
	}
}

/*
 * A tree built again replaces its old scope: its leaves' places must not
 * point into the new one.
 */
static void
scope_forget_leaves(GuniqueScope *scope)
{
	for (int i = 0; i < scope->nleaves; i++)
	{
		LeafEntry  *entry = hash_search(leaf_map, &scope->leaves[i].indexoid,
										HASH_FIND, NULL);

		if (entry != NULL && entry->topindex == scope->topindex)
			hash_search(leaf_map, &scope->leaves[i].indexoid, HASH_REMOVE,
						NULL);
	}
	pfree(scope->leaves);
	pfree(scope->inneroids);
	pfree(scope->lockoids);
}

/*
 * Copy a finished walk and its key into the cache.  Nothing here can
 * process invalidations.
 */
static void
scope_install(Oid topindex, TreeWalk *walk, GuniqueScope *key)
{
	GuniqueScope *scope;
	ListCell   *lc;
	int			i;
	bool		found;

	if (scope_by_top == NULL)
		scope_create_hashes();

	scope = hash_search(scope_by_top, &topindex, HASH_ENTER, &found);
	if (found)
		scope_forget_leaves(scope);
	scope->nleaves = list_length(walk->leaves);
	scope->leaves = MemoryContextAlloc(ScopeContext,
									   sizeof(GuniqueLeaf) * Max(scope->nleaves, 1));
	i = 0;
	foreach(lc, walk->leaves)
		scope->leaves[i++] = *(GuniqueLeaf *) lfirst(lc);
	scope_install_places(scope, topindex);

	scope->ninner = list_length(walk->inner);
	scope->inneroids = MemoryContextAlloc(ScopeContext,
										  sizeof(Oid) * Max(scope->ninner, 1));
	i = 0;
	foreach(lc, walk->inner)
		scope->inneroids[i++] = lfirst_oid(lc);

	list_sort(walk->members, list_oid_cmp);
	list_deduplicate_oid(walk->members);
	scope->nlocks = list_length(walk->members);
	scope->lockoids = MemoryContextAlloc(ScopeContext,
										 sizeof(Oid) * scope->nlocks);
	i = 0;
	foreach(lc, walk->members)
	{
		Oid			oid = lfirst_oid(lc);

		scope->lockoids[i++] = oid;
		(void) hash_search(member_set, &oid, HASH_ENTER, NULL);
	}
	scope->locked_generation = 0;
	scope->inner_locked_generation = 0;

	scope->nkeys = key->nkeys;
	scope->nulls_not_distinct = key->nulls_not_distinct;
	scope->valid = key->valid;
}

/*
 * Build the cache entry for the tree that index belongs to: the tree whose
 * top index is "top", or, if that is InvalidOid, the tree of leaf index
 * "index".  The index's key is the tree's.  Returns
 * false if the cache was flushed meanwhile and the caller must look again.
 */
static bool
scope_build(Relation index, Oid top)
{
	Oid			indexoid = RelationGetRelid(index);
	uint64		generation = cache_generation;
	MemoryContext buildcxt;
	MemoryContext oldcxt;
	TreeWalk	walk = {true, NIL, NIL, NIL, false};
	GuniqueScope key;
	bool		current;

	buildcxt = AllocSetContextCreate(CurrentMemoryContext,
									 "gunique scope build",
									 ALLOCSET_SMALL_SIZES);
	oldcxt = MemoryContextSwitchTo(buildcxt);

	walking = true;
	PG_TRY();
	{
		if (!OidIsValid(top))
			top = gunique_tree_top(indexoid);
		/* a scope made from the middle of a tree would hide its leaves */
		Assert(gunique_tree_top(top) == top);
		walk_tree(top, top, &walk);
		scope_fill_key(&key, index, top);
	}
	PG_FINALLY();
	{
		walking = false;
	}
	PG_END_TRY();
	list_sort(walk.leaves, leaf_group_cmp);

	MemoryContextSwitchTo(oldcxt);
	current = (generation == cache_generation);
	if (current)
		scope_install(top, &walk, &key);
	MemoryContextDelete(buildcxt);
	return current;
}

/*
 * Changes whenever the cache is flushed: a caller that keeps what it learnt
 * from a scope across calls that may process invalidations compares this.
 */
uint64
gunique_scope_generation(void)
{
	return cache_generation;
}

/*
 * Lock what "lock" asks for; false if that flushed the cache.  With
 * "nowait", only locks to be had at once: *unavailable is set, and false
 * returned, at the first that is not (the locks taken are kept).
 */
static bool
scope_lock(GuniqueScope *scope, GuniqueScopeLock lock, bool nowait,
		   bool *unavailable)
{
	uint64		generation = cache_generation;
	bool		all = lock == GUNIQUE_LOCK_ALL;
	int			n = all ? scope->nlocks : scope->ninner;
	Oid		   *oids = palloc(sizeof(Oid) * Max(n, 1));

	/* locking may flush the cache, and the scope with it */
	memcpy(oids, all ? scope->lockoids : scope->inneroids, sizeof(Oid) * n);
	for (int i = 0; i < n; i++)
	{
		if (!nowait)
			LockRelationOid(oids[i], AccessShareLock);
		else if (!ConditionalLockRelationOid(oids[i], AccessShareLock))
		{
			*unavailable = true;
			pfree(oids);
			return false;
		}
	}
	pfree(oids);
	if (generation != cache_generation)
		return false;
	scope->inner_locked_generation = lock_generation;
	if (all)
		scope->locked_generation = lock_generation;
	return true;
}

/*
 * Has the transaction locked what "lock" asks for of the scope's tree, or
 * does it now?  False if locking flushed the cache: look the scope up again.
 */
static bool
scope_locked(GuniqueScope *scope, GuniqueScopeLock lock)
{
	uint64		locked = lock == GUNIQUE_LOCK_ALL ? scope->locked_generation :
		scope->inner_locked_generation;

	return lock == GUNIQUE_LOCK_NONE || locked == lock_generation ||
		scope_lock(scope, lock, false, NULL);
}

/*
 * The cached tree of leaf index "index"; *place receives where the leaf
 * sits in it.  Locks (AccessShareLock, held to the end of the transaction)
 * what "lock" asks for first: GUNIQUE_LOCK_ALL every relation of the tree,
 * so that no leaf is truncated, rewritten or reindexed under a probe that
 * reads it; GUNIQUE_LOCK_INNER its partitioned tables and indexes, which
 * keeps every partition from being dropped or detached (both lock the
 * partition's parent first), enough for a probe that reads nothing but its
 * group's key filter (probescan.c).  The result stays valid until the next
 * call that can process invalidations (any relation lock).
 */
GuniqueScope *
gunique_scope_for_leaf(Relation index, GuniqueLeafPlace *place,
					   GuniqueScopeLock lock)
{
	Oid			leafoid = RelationGetRelid(index);
	int			misses = 0;

	for (;;)
	{
		LeafEntry  *entry = NULL;
		GuniqueScope *scope;

		if (leaf_map != NULL)
			entry = hash_search(leaf_map, &leafoid, HASH_FIND, NULL);
		if (entry == NULL)
		{
			if (!scope_build(index, InvalidOid))
				continue;
			entry = hash_search(leaf_map, &leafoid, HASH_FIND, NULL);
			if (entry == NULL)
			{
				/*
				 * The walk down from the top that the leaf's ancestors
				 * named did not meet the leaf, with no invalidation in
				 * between: the catalogs changed under two reads of them.
				 * Read them again; never probe a tree without the leaf.
				 */
				if (++misses < 3)
				{
					scope_flush();
					continue;
				}
				ereport(ERROR,
						(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
						 errmsg("index \"%s\" is not part of its gunique index tree",
								RelationGetRelationName(index)),
						 errdetail("The index is a partition of another index, but the index tree does not contain it."),
						 errhint("Retry the statement.")));
			}
		}
		scope = hash_search(scope_by_top, &entry->topindex, HASH_FIND, NULL);
		Assert(scope != NULL);
		*place = entry->place;
		Assert(place->first + place->self < scope->nleaves &&
			   scope->leaves[place->first + place->self].indexoid == leafoid);

		if (scope_locked(scope, lock))
			return scope;
	}
}

/*
 * The cached tree whose top index is "topoid" (gunique_tree_top), locked as
 * gunique_scope_for_leaf locks it; "member" is any index of the tree, whose
 * key is the tree's.  For a reader that starts from a table, not from a
 * leaf (lookup.c).
 */
GuniqueScope *
gunique_scope_for_top(Oid topoid, Relation member, GuniqueScopeLock lock)
{
	for (;;)
	{
		GuniqueScope *scope = NULL;

		if (scope_by_top != NULL)
			scope = hash_search(scope_by_top, &topoid, HASH_FIND, NULL);
		if (scope == NULL)
		{
			(void) scope_build(member, topoid);
			continue;
		}
		if (scope_locked(scope, lock))
			return scope;
	}
}

/*
 * Lock every relation of the tree of leaf index "index" as
 * gunique_scope_for_leaf(GUNIQUE_LOCK_ALL) does, but without waiting:
 * false as soon as a lock is not to be had at once.  The locks taken are
 * kept either way, for the caller's transaction to release.  For a caller
 * that holds other locks and must never wait while it does (builder.c).
 */
bool
gunique_scope_try_lock_all(Relation index)
{
	bool		unavailable = false;

	/* the tree changed while it was locked: lock what it is now */
	for (int tries = 0; tries < 3 && !unavailable; tries++)
	{
		GuniqueLeafPlace place;
		GuniqueScope *scope = gunique_scope_for_leaf(index, &place,
													 GUNIQUE_LOCK_NONE);

		if (scope->locked_generation == lock_generation ||
			scope_lock(scope, GUNIQUE_LOCK_ALL, true, &unavailable))
			return true;
	}
	return false;
}

/*
 * Has this transaction changed, or may it still change, the tree of leaf
 * index "index" in a way that a rollback undoes: does it hold a lock
 * stronger than an inserter's on any of the tree's relations?  DETACH,
 * DROP and CREATE TABLE ... PARTITION OF lock the partition's parent
 * (ShareUpdateExclusiveLock or stronger), which is a member; TRUNCATE,
 * REINDEX, VACUUM FULL and CLUSTER lock the leaf or its table.  Locks of
 * an aborted subtransaction are gone with its changes.  What such a
 * transaction sees of the tree must not be published as a group's filter
 * (src/README, I6).  Walks every relation of the tree: call it only
 * when about to build something from the tree.
 */
bool
gunique_tree_changed_here(Relation index)
{
	GuniqueLeafPlace place;
	GuniqueScope *scope = gunique_scope_for_leaf(index, &place,
												 GUNIQUE_LOCK_NONE);

	for (int i = 0; i < scope->nlocks; i++)
	{
		LOCKTAG		tag;

		SET_LOCKTAG_RELATION(tag, MyDatabaseId, scope->lockoids[i]);
		if (gunique_lock_held_or_stronger(&tag, ShareUpdateExclusiveLock))
			return true;
	}
	return false;
}


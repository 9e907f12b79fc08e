/*-------------------------------------------------------------------------
 *
 * lookup.c
 *	  Read a partitioned table by a gunique key: only the partitions whose
 *	  summaries can hold the key.
 *
 * The executor's side of the lookup path that lookupplan.c plans.  For each
 * key, the partitions whose summaries cannot hold it (the group's filter
 * and its tags, then each leaf's key range and filter) are ruled out
 * without locking them (locate.c); the rest are locked and searched with
 * the query's snapshot through their btrees, until a row is found: the
 * index holds at most one row visible to a snapshot.  Where a summary
 * cannot be trusted (a serializable transaction, which must leave
 * predicate locks where a btree scan of every partition would; a standby,
 * whose btrees change by WAL replay without gunique), every partition is
 * searched.  The proofs are src/README, "Locating a key" (why a partition
 * ruled out holds no such row) and "Lookups".
 *
 * Rows found are kept, converted to the table's row type, so that the scan
 * can go backward and mark its position (a cursor, a merge join); there is
 * one per key.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/relation.h"
#include "access/relscan.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/tupconvert.h"
#include "access/xact.h"
#include "access/xlog.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "commands/explain.h"
#include "executor/executor.h"
#include "executor/tuptable.h"
#include "miscadmin.h"
#include "nodes/execnodes.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "partitioning/partdesc.h"
#include "rewrite/rewriteManip.h"
#include "storage/lmgr.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/ruleutils.h"
#include "utils/fmgroids.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"
#include "utils/timestamp.h"

#include "compat.h"
#ifdef GUNIQUE_EXPLAIN_HEADERS
#include "commands/explain_format.h"
#include "commands/explain_state.h"
#endif
#include "am/scope.h"
#include "am/tree.h"
#include "insert/keylock.h"
#include "locate/builder.h"
#include "locate/filter.h"
#include "locate/keymap.h"
#include "locate/locate.h"
#include "locate/rebuilds.h"
#include "locate/summary.h"
#include "read/lookup.h"

/* A leaf partition of the table, as the lookup reads it. */
typedef struct LookupPart
{
	Oid			heapoid;
	Oid			indexoid;		/* its leaf of the gunique tree; for a
								 * stray, the index found when it is
								 * locked, or InvalidOid until then */
	bool		stray;			/* no leaf in the scope: lookup_tree_parts */
} LookupPart;

/*
 * What a partition descriptor said.  A descriptor that leaves out a
 * partition being detached concurrently is built again for each query
 * (partdesc.c), so descriptors are compared by what they hold.
 */
typedef struct LookupDescCopy
{
	int			nparts;
	Oid		   *oids;
	bool	   *is_leaf;
} LookupDescCopy;

/*
 * The backend's view of one table's partitions for lookups, by top index:
 * made from the scope (scope.c) and the partition descriptors a reader
 * sees, and made again when either changes.
 */
typedef struct LookupTree
{
	Oid			index;			/* hash key: the index on the table read */
	MemoryContext cxt;			/* NULL until made */
	uint64		scope_generation;
	Oid			top;			/* the top index of its gunique tree */
	int			ndescs;
	Oid		   *desc_tables;	/* the partitioned tables, top first */
	LookupDescCopy *descs;		/* what their descriptors said */
	int			nparts;
	LookupPart *parts;
	int			nstrays;
	int		   *strays;			/* the parts that are strays */
	Oid			group;			/* the group of every part's leaf, or
								 * InvalidOid if they differ */
	int			group_leaves;	/* the group's leaves, in the whole tree */
	GuniqueLocator *loc;		/* which parts may hold a key (locate.c) */
	GuniqueKeyMap map;
	Oid			opcintype[INDEX_MAX_KEYS];
	Oid			collation[INDEX_MAX_KEYS];
	RegProcedure eqproc[INDEX_MAX_KEYS];
	FmgrInfo	cmp;			/* the first column's order, for arrays */
} LookupTree;

/* A row found, in the table's row type. */
typedef struct LookupRow
{
	HeapTuple	tuple;
	Oid			tableoid;
	ItemPointerData tid;		/* in its partition */
	TransactionId xwait;		/* read with a dirty snapshot: the
								 * transaction still inserting or deleting
								 * it, or invalid */
	uint32		speculative_token;
} LookupRow;

typedef struct LookupScanState
{
	CustomScanState css;
	Relation	index;			/* the gunique index on the table */
	Snapshot	snapshot;		/* the query's, or a reader's dirty one */
	bool		array;			/* one expression: an array of keys */
	List	   *key_exprs;		/* ExprStates */
	MemoryContext rowcxt;		/* the rows found, until a rescan */
	bool		fetched;
	int			nrows;
	int			maxrows;
	LookupRow  *rows;
	int			pos;			/* of the row returned last */
	int			markpos;
	PartitionDirectory pdir;	/* the partitions a reader sees, per query */
	List	   *waited;			/* relations whose locks it waited for */
	/* for EXPLAIN ANALYZE, over every execution */
	int64		searched;
	int64		ruled_out;
} LookupScanState;

static HTAB *lookup_trees = NULL;
static TimestampTz filters_asked = 0;

#define LOOKUP_ASK_MS 100

static void lookup_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *lookup_exec(CustomScanState *node);
static void lookup_end(CustomScanState *node);
static void lookup_rescan(CustomScanState *node);
static void lookup_mark(CustomScanState *node);
static void lookup_restore(CustomScanState *node);
static void lookup_explain(CustomScanState *node, List *ancestors,
						   ExplainState *es);

static const CustomExecMethods lookup_exec_methods = {
	.CustomName = GUNIQUE_LOOKUP_NAME,
	.BeginCustomScan = lookup_begin,
	.ExecCustomScan = lookup_exec,
	.EndCustomScan = lookup_end,
	.ReScanCustomScan = lookup_rescan,
	.MarkPosCustomScan = lookup_mark,
	.RestrPosCustomScan = lookup_restore,
	.ExplainCustomScan = lookup_explain,
};

Node *
gunique_lookup_create_state(CustomScan *cscan)
{
	LookupScanState *state = palloc0(sizeof(LookupScanState));

	NodeSetTag(state, T_CustomScanState);
	state->css.methods = &lookup_exec_methods;
	state->array = list_nth_oid(cscan->custom_private,
								LOOKUP_PRIVATE_ARRAY) != 0;
	return (Node *) state;
}

/*
 * The leaf partitions a reader of "table" sees now, and the descriptors
 * that say so: a partition being detached concurrently is left out as the
 * planner leaves it out, by the query's partition directory (one
 * descriptor per table and query, whatever the number of lookups).
 * Partitioned partitions are locked as the planner's expansion locks them.
 */
static void
lookup_collect(PartitionDirectory pdir, Relation table, List **tables,
			   List **descs, List **leaves)
{
	PartitionDesc pd = PartitionDirectoryLookup(pdir, table);

	*tables = lappend_oid(*tables, RelationGetRelid(table));
	*descs = lappend(*descs, pd);
	for (int i = 0; i < pd->nparts; i++)
	{
		Relation	sub;

		if (pd->is_leaf[i])
		{
			*leaves = lappend_oid(*leaves, pd->oids[i]);
			continue;
		}
		sub = table_open(pd->oids[i], AccessShareLock);
		lookup_collect(pdir, sub, tables, descs, leaves);
		table_close(sub, NoLock);
	}
}

static bool
lookup_desc_same(LookupDescCopy *copy, PartitionDesc pd)
{
	return copy->nparts == pd->nparts &&
		memcmp(copy->oids, pd->oids, sizeof(Oid) * pd->nparts) == 0 &&
		memcmp(copy->is_leaf, pd->is_leaf, sizeof(bool) * pd->nparts) == 0;
}

/* Do the partitioned tables hold the partitions the tree was made from? */
static bool
lookup_tree_current(LookupTree *tree, PartitionDirectory pdir,
					Relation table)
{
	if (tree->cxt == NULL ||
		tree->scope_generation != gunique_scope_generation())
		return false;
	for (int i = 0; i < tree->ndescs; i++)
	{
		Relation	rel = i == 0 ? table : table_open(tree->desc_tables[i],
													  AccessShareLock);
		bool		same = lookup_desc_same(&tree->descs[i],
											PartitionDirectoryLookup(pdir, rel));

		if (i > 0)
			table_close(rel, NoLock);
		if (!same)
			return false;
	}
	return tree->scope_generation == gunique_scope_generation();
}

static int
lookup_leaf_cmp(const void *a, const void *b)
{
	Oid			x = ((const GuniqueLeaf *) a)->heapoid;
	Oid			y = ((const GuniqueLeaf *) b)->heapoid;

	return x < y ? -1 : x > y;
}

/*
 * Each leaf partition's leaf index, from the scope.
 *
 * The descriptors and the scope read pg_inherits at different moments, and
 * a partition the descriptors hold may have no leaf in the scope: an
 * ATTACH PARTITION that committed after the scope was read (its
 * invalidations, which flush the scope, are sent after its commit is
 * visible), or the second transaction of a DETACH ... CONCURRENTLY that
 * committed after the descriptor was read (the query's partition directory
 * keeps its descriptors to its end).  Such a partition, a stray, is read all
 * the same, as a plan made with the descriptors would read it: through an
 * index found when it is locked (lookup_stray_index), never ruled out by a
 * summary, which need not hold its keys.
 */
static void
lookup_tree_parts(LookupTree *tree, GuniqueScope *scope, List *leaves)
{
	GuniqueLeaf *sorted = palloc(sizeof(GuniqueLeaf) * Max(scope->nleaves, 1));
	int			nsorted = 0;
	ListCell   *lc;
	int			i = 0;
	bool		first = true;

	for (int j = 0; j < scope->nleaves; j++)
		if (!scope->leaves[j].sibling)
			sorted[nsorted++] = scope->leaves[j];
	qsort(sorted, nsorted, sizeof(GuniqueLeaf), lookup_leaf_cmp);
	tree->group = InvalidOid;

	tree->nparts = list_length(leaves);
	tree->parts = MemoryContextAlloc(tree->cxt,
									 sizeof(LookupPart) * Max(tree->nparts, 1));
	tree->strays = MemoryContextAlloc(tree->cxt,
									  sizeof(int) * Max(tree->nparts, 1));
	tree->nstrays = 0;
	foreach(lc, leaves)
	{
		GuniqueLeaf probe;
		GuniqueLeaf *leaf;

		probe.heapoid = lfirst_oid(lc);
		leaf = bsearch(&probe, sorted, nsorted, sizeof(GuniqueLeaf),
					   lookup_leaf_cmp);
		tree->parts[i].heapoid = probe.heapoid;
		tree->parts[i].stray = leaf == NULL;
		if (leaf == NULL)
		{
			tree->parts[i].indexoid = InvalidOid;
			tree->strays[tree->nstrays++] = i++;
			continue;
		}
		tree->parts[i].indexoid = leaf->indexoid;
		if (first || leaf->group != tree->group)
			tree->group = first ? leaf->group : InvalidOid;
		first = false;
		i++;
	}
	tree->group_leaves = 0;
	for (int j = 0; j < nsorted; j++)
		tree->group_leaves += sorted[j].group == tree->group;
	pfree(sorted);
}

/*
 * The summary of the parts' group, which keeps the group's filter: every
 * key of every leaf of the group, read without any leaf lock (src/README,
 * "Locating a key").  Its index, a partitioned index of the tree, is locked.
 */
static GuniqueSummary *
lookup_group_summary(Oid group)
{
	Relation	groupindex;
	GuniqueSummary *summary = NULL;

	if (!OidIsValid(group))
		return NULL;
	groupindex = index_open(group, NoLock);
	if (groupindex->rd_rel->relkind == RELKIND_PARTITIONED_INDEX)
		summary = gunique_summary_for(groupindex);
	index_close(groupindex, NoLock);
	return summary;
}

/*
 * Which parts may hold a key (locate.c): the group's filter is read first
 * if every part's leaf is in one group of many leaves.  A stray is listed
 * under no tag: the group's filter need not hold its keys.
 */
static void
lookup_tree_locator(LookupTree *tree)
{
	GuniqueSummary *group = NULL;
	Oid		   *heapoids;
	MemoryContext old;

	if (tree->group_leaves >= GUNIQUE_GROUP_FILTER_MIN_LEAVES)
		group = lookup_group_summary(tree->group);
	old = MemoryContextSwitchTo(tree->cxt);
	heapoids = palloc(sizeof(Oid) * Max(tree->nparts, 1));
	for (int c = 0; c < tree->nparts; c++)
		heapoids[c] = tree->parts[c].stray ? InvalidOid :
			tree->parts[c].heapoid;
	tree->loc = gunique_locator_make(tree->nparts, heapoids, group, 0);
	pfree(heapoids);
	MemoryContextSwitchTo(old);
}

/* The key as the leaves compare and hash it. */
static void
lookup_tree_key(LookupTree *tree, Relation index)
{
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(index);

	gunique_keymap_make(&tree->map, index, tree->cxt);
	for (int i = 0; i < nkeys; i++)
	{
		Oid			eqop = gunique_key_equality(index, i);

		tree->opcintype[i] = index->rd_opcintype[i];
		tree->collation[i] = index->rd_indcollation[i];
		tree->eqproc[i] = get_opcode(eqop);
	}
	fmgr_info_cxt(get_opfamily_proc(index->rd_opfamily[0],
									index->rd_opcintype[0],
									index->rd_opcintype[0], BTORDER_PROC),
				  &tree->cmp, tree->cxt);
}

/* Make the tree again from the scope and the descriptors. */
static void
lookup_tree_make(LookupTree *tree, GuniqueScope *scope,
				 PartitionDirectory pdir, Relation table, Relation index,
				 uint64 generation)
{
	List	   *tables = NIL;
	List	   *descs = NIL;
	List	   *leaves = NIL;
	MemoryContext old;
	ListCell   *lc;
	int			i = 0;

	/* not current until made whole: an error on the way leaves it stale */
	tree->scope_generation = 0;
	if (tree->cxt != NULL)
		MemoryContextDelete(tree->cxt);
	tree->cxt = NULL;
	lookup_collect(pdir, table, &tables, &descs, &leaves);
	if (generation != gunique_scope_generation())
		return;					/* the scope changed: look again */

	tree->cxt = AllocSetContextCreate(CacheMemoryContext,
									  "gunique lookup tree",
									  ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(tree->cxt);
	tree->ndescs = list_length(tables);
	tree->desc_tables = palloc(sizeof(Oid) * tree->ndescs);
	tree->descs = palloc(sizeof(LookupDescCopy) * tree->ndescs);
	foreach(lc, tables)
	{
		PartitionDesc pd = list_nth(descs, i);
		LookupDescCopy *copy = &tree->descs[i];

		tree->desc_tables[i] = lfirst_oid(lc);
		copy->nparts = pd->nparts;
		copy->oids = palloc(sizeof(Oid) * Max(pd->nparts, 1));
		copy->is_leaf = palloc(sizeof(bool) * Max(pd->nparts, 1));
		memcpy(copy->oids, pd->oids, sizeof(Oid) * pd->nparts);
		memcpy(copy->is_leaf, pd->is_leaf, sizeof(bool) * pd->nparts);
		i++;
	}
	MemoryContextSwitchTo(old);
	lookup_tree_parts(tree, scope, leaves);
	lookup_tree_locator(tree);
	lookup_tree_key(tree, index);
	tree->scope_generation = generation;
}

/*
 * The table's tree, current; the tree's partitioned tables and indexes are
 * locked (AccessShareLock, to the end of the transaction), which keeps
 * every partition from being dropped or detached.
 */
static LookupTree *
lookup_tree_get(LookupScanState *state)
{
	Relation	table = state->css.ss.ss_currentRelation;
	Oid			indexoid = RelationGetRelid(state->index);

	if (lookup_trees == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(LookupTree);
		ctl.hcxt = CacheMemoryContext;
		lookup_trees = hash_create("gunique lookup trees", 16, &ctl,
								   HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	}
	for (;;)
	{
		bool		found;
		LookupTree *tree = hash_search(lookup_trees, &indexoid, HASH_ENTER,
									   &found);
		GuniqueScope *scope;
		uint64		generation;

		if (!found)
		{
			tree->cxt = NULL;
			tree->scope_generation = 0;
		}

		/*
		 * The table read may be a partition of the tree's top table: the
		 * scope is the whole tree's, never one made from the middle of it.
		 */
		if (tree->cxt == NULL ||
			tree->scope_generation != gunique_scope_generation())
			tree->top = gunique_tree_top(indexoid);
		scope = gunique_scope_for_top(tree->top, state->index,
									  GUNIQUE_LOCK_INNER);
		generation = gunique_scope_generation();
		if (lookup_tree_current(tree, state->pdir, table))
			return tree;
		if (generation != gunique_scope_generation())
			continue;
		lookup_tree_make(tree, scope, state->pdir, table, state->index,
						 generation);
		if (tree->cxt != NULL && lookup_tree_current(tree, state->pdir, table))
			return tree;
		CHECK_FOR_INTERRUPTS();
	}
}

/* Forget the rows found, and the locks waited for, before another key. */
static void
lookup_forget_rows(LookupScanState *state)
{
	MemoryContextReset(state->rowcxt);
	state->rows = NULL;
	state->nrows = 0;
	state->maxrows = 0;
	state->waited = NIL;
}

/* Keep a row found, in the table's row type. */
static void
lookup_keep(LookupScanState *state, TupleTableSlot *found, Relation heap)
{
	Snapshot	snapshot = state->snapshot;
	TupleTableSlot *out = state->css.ss.ss_ScanTupleSlot;
	TupleDesc	desc = RelationGetDescr(state->css.ss.ss_currentRelation);
	TupleConversionMap *map = convert_tuples_by_name(RelationGetDescr(heap),
													 desc);
	MemoryContext old = MemoryContextSwitchTo(state->rowcxt);
	LookupRow  *row;

	if (map != NULL)
		out = execute_attr_map_slot(map->attrMap, found, out);
	else
	{
		ExecClearTuple(out);
		slot_getallattrs(found);
		memcpy(out->tts_values, found->tts_values,
			   sizeof(Datum) * desc->natts);
		memcpy(out->tts_isnull, found->tts_isnull,
			   sizeof(bool) * desc->natts);
		ExecStoreVirtualTuple(out);
	}
	if (state->nrows == state->maxrows)
	{
		state->maxrows = Max(4, state->maxrows * 2);
		state->rows = state->rows == NULL ?
			palloc(sizeof(LookupRow) * state->maxrows) :
			repalloc(state->rows, sizeof(LookupRow) * state->maxrows);
	}
	row = &state->rows[state->nrows++];
	row->tuple = ExecCopySlotHeapTuple(out);
	row->tableoid = RelationGetRelid(heap);
	row->tid = found->tts_tid;
	row->xwait = InvalidTransactionId;
	row->speculative_token = 0;
	if (snapshot->snapshot_type == SNAPSHOT_DIRTY)
	{
		/* as the visibility check of the row left them */
		row->xwait = TransactionIdIsValid(snapshot->xmin) ?
			snapshot->xmin : snapshot->xmax;
		row->speculative_token = snapshot->speculativeToken;
	}
	ExecClearTuple(out);
	MemoryContextSwitchTo(old);
	if (map != NULL)
		free_conversion_map(map);
}

/*
 * Was the partition's storage replaced (TRUNCATE; also VACUUM FULL and
 * CLUSTER, which keep the rows) by a transaction that the snapshot does
 * not see, or by this one after the snapshot?  Only then is its row of
 * pg_class newer than the snapshot, and the row the snapshot sees names
 * another relfilenode.  A partition the snapshot does not see at all (made
 * since) has no row it sees.
 */
static bool
lookup_storage_replaced(Relation heap, Snapshot snapshot)
{
	Oid			relid = RelationGetRelid(heap);
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	TransactionId xmin;
	Relation	pg_class;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	seen;
	bool		replaced;

	if (!HeapTupleIsValid(tuple))
		return false;
	xmin = HeapTupleHeaderGetXmin(tuple->t_data);
	ReleaseSysCache(tuple);
	if (!TransactionIdIsNormal(xmin) ||
		(!TransactionIdIsCurrentTransactionId(xmin) &&
		 !XidInMVCCSnapshot(xmin, snapshot)))
		return false;
	pg_class = table_open(RelationRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_class_oid, BTEqualStrategyNumber, F_OIDEQ,
				ObjectIdGetDatum(relid));
	scan = systable_beginscan(pg_class, ClassOidIndexId, true, snapshot, 1,
							  &key);
	seen = systable_getnext(scan);
	replaced = HeapTupleIsValid(seen) &&
		((Form_pg_class) GETSTRUCT(seen))->relfilenode !=
		heap->rd_rel->relfilenode;
	systable_endscan(scan);
	table_close(pg_class, AccessShareLock);
	return replaced;
}

/*
 * A key found nowhere, and a partition searched for it, its locks had
 * without waiting: had its rows been truncated after the query's snapshot
 * was taken?  A scan of
 * every partition locks them all before the snapshot is taken, so that a
 * TRUNCATE waits for the query; a lookup locks a partition only when it
 * reads it, and a TRUNCATE committed in between would make the row the
 * snapshot sees vanish.  That is refused as a serialization failure rather
 * than answered wrongly.  (A VACUUM FULL or CLUSTER in between, which keeps
 * the rows, is refused too when the key is not there: the lookup cannot
 * tell them apart.)  A lookup that waited for the TRUNCATE's lock reads
 * the partition empty, as a scan of every partition would have, having
 * waited for that lock before taking its snapshot.
 */
static void
lookup_check_storage(LookupScanState *state, Oid heapoid)
{
	Snapshot	snapshot = state->snapshot;
	Relation	heap;

	if (!IsMVCCSnapshot(snapshot))
		return;
	heap = table_open(heapoid, NoLock);
	if (lookup_storage_replaced(heap, snapshot))
		ereport(ERROR,
				(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
				 errmsg("could not serialize access due to a concurrent rewrite of partition \"%s\"",
						RelationGetRelationName(heap)),
				 errdetail("The partition was truncated or rewritten after the query's snapshot was taken, before the lookup by gunique index \"%s\" read it.",
						   RelationGetRelationName(state->index)),
				 errhint("Retry the transaction.")));
	table_close(heap, NoLock);
}

/*
 * Search one partition's btree for the key with the query's snapshot (its
 * index scan takes the predicate locks a btree scan takes); keep what it
 * finds, all of it if "all", else the first row.  True if it found a row.
 * Unless "all" (which a lookup that trusts no summary asks for), an invalid
 * key range is made valid first, as a probe would.
 */
static bool
lookup_search(LookupScanState *state, LookupTree *tree, LookupPart *part,
			  Datum *values, bool all)
{
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(state->index);
	Relation	heap = table_open(part->heapoid, NoLock);
	Relation	index = index_open(part->indexoid, NoLock);
	ScanKeyData skeys[INDEX_MAX_KEYS];
	IndexScanDesc scan;
	TupleTableSlot *slot = table_slot_create(heap, NULL);
	bool		found = false;

	/* a range made valid here lets later lookups rule the leaf out */
	if (!all && !part->stray)
		gunique_summary_prepare(gunique_summary_for(index), heap, index);
	for (int i = 0; i < nkeys; i++)
		ScanKeyEntryInitialize(&skeys[i], 0, i + 1, BTEqualStrategyNumber,
							   tree->opcintype[i], tree->collation[i],
							   tree->eqproc[i], values[i]);
	scan = gunique_index_beginscan(heap, index, state->snapshot, nkeys);
	index_rescan(scan, skeys, nkeys, NULL, 0);
	while (index_getnext_slot(scan, ForwardScanDirection, slot))
	{
		lookup_keep(state, slot, heap);
		found = true;
		if (!all)
			break;
	}
	index_endscan(scan);
	ExecDropSingleTupleTableSlot(slot);
	index_close(index, NoLock);
	table_close(heap, NoLock);
	state->searched++;
	return found;
}

/*
 * Lock a relation of the tree, noting in the scan the relations whose
 * locks it had to wait for, in this execution.
 */
static void
lookup_lock(LookupScanState *state, Oid relid)
{
	MemoryContext old;

	if (ConditionalLockRelationOid(relid, AccessShareLock))
		return;
	LockRelationOid(relid, AccessShareLock);
	old = MemoryContextSwitchTo(state->rowcxt);
	state->waited = lappend_oid(state->waited, relid);
	MemoryContextSwitchTo(old);
}

/* Did this execution wait for the lock of the partition or its leaf? */
static bool
lookup_waited(LookupScanState *state, LookupPart *part)
{
	return list_member_oid(state->waited, part->heapoid) ||
		list_member_oid(state->waited, part->indexoid);
}

/*
 * Can a row of partition "heap" be read as a row of the table: has it
 * each of the table's columns, by name, with its type?  A partition has;
 * a stray, detached since, may have been altered.
 */
static bool
lookup_stray_readable(Relation heap, Relation table)
{
	TupleDesc	desc = RelationGetDescr(table);

	for (int i = 0; i < desc->natts; i++)
	{
		Form_pg_attribute att = TupleDescAttr(desc, i);
		Form_pg_attribute its;
		HeapTuple	tuple;
		bool		same;

		if (att->attisdropped)
			continue;
		tuple = SearchSysCacheAttName(RelationGetRelid(heap),
									  NameStr(att->attname));
		if (!HeapTupleIsValid(tuple))
			return false;
		its = (Form_pg_attribute) GETSTRUCT(tuple);
		same = its->atttypid == att->atttypid &&
			its->atttypmod == att->atttypmod;
		ReleaseSysCache(tuple);
		if (!same)
			return false;
	}
	return true;
}

/*
 * Is the relation "relid" a partition of "table", at any depth, now (being
 * detached counts)?  Each level is one read of pg_inherits, as of now.
 */
static bool
lookup_under_table(Oid relid, Relation table)
{
	Relation	inherits = table_open(InheritsRelationId, AccessShareLock);
	bool		under = false;

	while (OidIsValid(relid) && !under)
	{
		ScanKeyData key;
		SysScanDesc scan;
		HeapTuple	tuple;

		ScanKeyInit(&key, Anum_pg_inherits_inhrelid, BTEqualStrategyNumber,
					F_OIDEQ, ObjectIdGetDatum(relid));
		scan = systable_beginscan(inherits, InheritsRelidSeqnoIndexId, true,
								  NULL, 1, &key);
		tuple = systable_getnext(scan);
		relid = HeapTupleIsValid(tuple) ?
			((Form_pg_inherits) GETSTRUCT(tuple))->inhparent : InvalidOid;
		systable_endscan(scan);
		under = relid == RelationGetRelid(table);
	}
	table_close(inherits, AccessShareLock);
	return under;
}

/*
 * Does one of the indexes of "heap" hold its rows as the gunique index
 * would: the index's definition (key, collations, operator families,
 * predicate, access method), matched as ALTER TABLE ... ATTACH PARTITION
 * matches a partition's index to its parent's?  Each is locked first.
 */
static Oid
lookup_matching_index(LookupScanState *state, Relation heap)
{
	Relation	table = state->css.ss.ss_currentRelation;
	IndexInfo  *want = BuildIndexInfo(state->index);
	AttrMap    *attmap = gunique_attrmap_by_name(RelationGetDescr(heap),
												 RelationGetDescr(table));
	List	   *indexes = RelationGetIndexList(heap);
	Oid			result = InvalidOid;
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);
		Relation	index;
		bool		same;

		if (!gunique_is_gunique_index(indexoid))
			continue;
		lookup_lock(state, indexoid);
		index = try_relation_open(indexoid, NoLock);
		if (index == NULL)
			continue;			/* dropped concurrently */
		same = index->rd_index->indisvalid &&
			CompareIndexInfo(BuildIndexInfo(index), want,
							 index->rd_indcollation,
							 state->index->rd_indcollation,
							 index->rd_opfamily, state->index->rd_opfamily,
							 attmap);
		relation_close(index, NoLock);
		if (same)
		{
			result = indexoid;
			break;
		}
	}
	list_free(indexes);
	free_attrmap(attmap);
	return result;
}

/*
 * Lock a stray (lookup_tree_parts), then the index to search it through,
 * and return that index: a leaf attached since the scope was read, or one
 * detached with its partition since the descriptor was read, which still
 * holds every row of the partition.  InvalidOid if there is nothing to
 * search: the partition was dropped, or, for a dirty snapshot (which reads
 * the tree as it is now), is no longer under the table; such a partition is
 * not even locked, so that a reader that holds the tree's locks never
 * waits for an ATTACH of it, which takes them first.  *lost is set if an
 * MVCC snapshot may see rows in it that cannot be read: the partition
 * dropped, or altered or without such an index since it was detached.
 */
static Oid
lookup_stray_index(LookupScanState *state, Oid heapoid, bool *lost)
{
	Relation	table = state->css.ss.ss_currentRelation;
	bool		mvcc = IsMVCCSnapshot(state->snapshot);
	Relation	heap;
	Oid			result = InvalidOid;

	if (!mvcc && !lookup_under_table(heapoid, table))
		return InvalidOid;
	lookup_lock(state, heapoid);
	heap = try_table_open(heapoid, NoLock);
	if (heap == NULL)
	{
		*lost |= mvcc;
		return InvalidOid;
	}
	if (mvcc || lookup_under_table(heapoid, table))
	{
		if (lookup_stray_readable(heap, table))
			result = lookup_matching_index(state, heap);
		*lost |= mvcc && !OidIsValid(result);
	}
	table_close(heap, NoLock);
	return result;
}

/*
 * A key found nowhere, and a stray partition the query's descriptors hold
 * that could not be read: a plan made with those descriptors would have
 * locked it before it could be detached, and read it.
 */
static void
lookup_stray_lost(LookupScanState *state, Oid heapoid)
{
	ereport(ERROR,
			(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
			 errmsg("could not serialize access due to a concurrent detach of a partition"),
			 errdetail("Partition %u of table \"%s\" was detached, then dropped or changed, after the query read the table's partitions and before the lookup by gunique index \"%s\" read it.",
					   heapoid,
					   RelationGetRelationName(state->css.ss.ss_currentRelation),
					   RelationGetRelationName(state->index)),
			 errhint("Retry the transaction.")));
}

/* Ask, at most every LOOKUP_ASK_MS, for the group's filter to be built. */
static void
lookup_ask_filter(LookupScanState *state, LookupTree *tree)
{
	TimestampTz now = GetCurrentTimestamp();
	int			c = 0;

	while (c < tree->nparts && tree->parts[c].stray)
		c++;
	if (c == tree->nparts ||
		(filters_asked != 0 &&
		 !TimestampDifferenceExceeds(filters_asked, now, LOOKUP_ASK_MS)))
		return;
	filters_asked = now;
	gunique_builder_request(tree->group, tree->parts[c].indexoid);
}

/*
 * Under a key lock taken shared: the parts the group's filter lets the key
 * in, and the strays, into loc->wanted; how many.  Any key lock would keep
 * the filter from being freed (src/README, I6); a reader takes
 * the key's own.
 */
static int
lookup_group_candidates(LookupScanState *state, LookupTree *tree,
						GuniqueLocateKey *key, LWLock *lock)
{
	GuniqueLocator *loc = tree->loc;
	GuniqueLocateGroup said = LOCATE_GROUP_ANY;
	uint64		tags = 0;
	uint64		subs = 0;
	int			n = 0;

	if (loc->group != NULL && key->image.hashed)
	{
		LWLockAcquire(lock, LW_SHARED);
		gunique_locate_prefetch(loc->group, key);	/* its tag blocks too */
		said = gunique_locate_group(loc, key, &tags, &subs);
		LWLockRelease(lock);
		if (said == LOCATE_GROUP_ANY &&
			gunique_summary_filter_missing(loc->group))
			lookup_ask_filter(state, tree);
	}
	switch (said)
	{
		case LOCATE_GROUP_OUT:
			break;
		case LOCATE_GROUP_TAGS:
			n = gunique_locate_tagged(loc, tags, subs, loc->wanted);
			break;
		case LOCATE_GROUP_ANY:
			for (int c = 0; c < tree->nparts; c++)
				if (!tree->parts[c].stray)
					loc->wanted[n++] = c;
			break;
	}
	for (int s = 0; s < tree->nstrays; s++)
		loc->wanted[n++] = tree->strays[s];
	return n;
}

/*
 * The parts that may hold the key, copied out of the tree, which locking
 * may make stale: with "trust", those that the summaries do not rule out
 * (locate.c), read under a key lock taken shared and without the leaves'
 * locks: a summary holds every key of its leaf as the leaf is, whatever
 * rebuild is under way, and a leaf loses entries the snapshot sees only by
 * a rebuild that lookup_key looks for (src/README, "Locating a key" and
 * "Lookups").  A stray has no summary and is never ruled out.  Without
 * "trust", every part.
 */
static LookupPart *
lookup_candidates(LookupScanState *state, LookupTree *tree,
				  GuniqueLocateKey *key, bool trust, int *n)
{
	GuniqueLocator *loc = tree->loc;
	LookupPart *parts = palloc(sizeof(LookupPart) * Max(tree->nparts, 1));
	GuniqueLocateCounts located = {0};
	LWLock	   *lock;
	int			ncand;

	if (!trust)
	{
		memcpy(parts, tree->parts, sizeof(LookupPart) * tree->nparts);
		*n = tree->nparts;
		return parts;
	}
	lock = gunique_keylock_for(tree->top,
							   gunique_keymap_lock_hash(&key->image));
	ncand = lookup_group_candidates(state, tree, key, lock);
	for (int c = 0; c < ncand; c++)
	{
		LookupPart *part = &tree->parts[loc->wanted[c]];

		loc->summaries[loc->wanted[c]] = part->stray ? NULL :
			gunique_summary_find(part->indexoid);
	}
	LWLockAcquire(lock, LW_SHARED);
	*n = gunique_locate_leaves(loc, key, loc->wanted, ncand, -1, loc->wanted,
							   &located);
	LWLockRelease(lock);
	for (int c = 0; c < *n; c++)
		parts[c] = tree->parts[loc->wanted[c]];
	return parts;
}

/* What lookup_one came to. */
typedef enum LookupOutcome
{
	LOOKUP_FOUND,
	LOOKUP_NOT_FOUND,
	LOOKUP_AGAIN				/* locking changed the tree: look again */
} LookupOutcome;

/*
 * Look for one key in the tree: with "trust", only in the parts that may
 * hold it (lookup_candidates); lock them and the strays (each table before
 * its index), then search them until the row is found.  Without "trust",
 * every partition is searched, and every row kept.  A key found nowhere,
 * with a stray that could not be read, is a serialization failure
 * (lookup_stray_lost).
 */
static LookupOutcome
lookup_one(LookupScanState *state, LookupTree *tree, GuniqueLocateKey *key,
		   Datum *values, bool trust)
{
	uint64		generation = tree->scope_generation;
	LookupPart *parts;
	bool	   *keep;
	bool		found = false;
	Oid			lost = InvalidOid;
	int			n;
	int			ruled_out;

	parts = lookup_candidates(state, tree, key, trust, &n);
	ruled_out = tree->nparts - n;
	keep = palloc(sizeof(bool) * Max(n, 1));
	for (int c = 0; c < n; c++)
	{
		bool		unread = false;

		keep[c] = true;
		/* as PostgreSQL's scans and TRUNCATE do: table, then index */
		if (!parts[c].stray)
		{
			lookup_lock(state, parts[c].heapoid);
			lookup_lock(state, parts[c].indexoid);
		}
		else if (!OidIsValid(parts[c].indexoid =
							 lookup_stray_index(state, parts[c].heapoid,
												&unread)))
		{
			keep[c] = false;
			if (unread)
				lost = parts[c].heapoid;
		}
	}
	if (generation != gunique_scope_generation())
	{
		pfree(keep);
		pfree(parts);
		return LOOKUP_AGAIN;
	}
	for (int c = 0; c < n && !(found && trust); c++)
	{
		if (!keep[c])
			continue;
		found |= lookup_search(state, tree, &parts[c], values, !trust);
		/* past the key's only row, the others cannot hold it */
		if (found && trust)
			for (int r = c + 1; r < n; r++)
				ruled_out += keep[r];
	}
	state->ruled_out += ruled_out;
	/* uniqueness: only a key found nowhere can have lost its row */
	if (!found && OidIsValid(lost))
		lookup_stray_lost(state, lost);
	for (int c = 0; c < n && !found; c++)
		if (keep[c] && !lookup_waited(state, &parts[c]))
			lookup_check_storage(state, parts[c].heapoid);
	pfree(keep);
	pfree(parts);
	return found ? LOOKUP_FOUND : LOOKUP_NOT_FOUND;
}

/*
 * Might one of the tree's leaves, or its group, have been rebuilt in a way
 * its summary, read since "mark", does not show to this snapshot (NULL: a
 * dirty one)?  See rebuilds.c.
 */
static bool
lookup_rebuilt(LookupTree *tree, Snapshot snapshot, uint64 mark)
{
	Oid			noted[GUNIQUE_REBUILDS_MAX];
	int			n = gunique_rebuilds_unseen(snapshot, mark, noted);

	if (n < 0)
		return true;
	for (int i = 0; i < n; i++)
	{
		if (noted[i] == tree->group)
			return true;
		for (int c = 0; c < tree->nparts; c++)
			if (tree->parts[c].indexoid == noted[i])
				return true;
	}
	return false;
}

/*
 * Find the key's row.  Summaries are not trusted in a serializable
 * transaction (predicate locks must be where a btree scan of every
 * partition would leave them) nor in recovery (WAL replay keeps none).
 * Nor, for a key not found, if a leaf it read may have been rebuilt by a
 * transaction the snapshot does not see (a TRUNCATE that committed since:
 * rebuilds.c), or, for any snapshot (dirty too), one whose rollback may yet
 * bring back what it took away: then the key is looked for again in every
 * partition.  "key" is the key mapped by the caller, or NULL: it is mapped
 * here, once however often it is looked for.
 */
static void
lookup_key(LookupScanState *state, Datum *values, bool *isnull,
		   GuniqueLocateKey *key)
{
	GuniqueLocateKey mapped;
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(state->index);
	Snapshot	snapshot = state->snapshot;
	bool		dirty = snapshot->snapshot_type == SNAPSHOT_DIRTY;
	bool		trust = !RecoveryInProgress() &&
		(dirty || (!IsolationIsSerializable() && IsMVCCSnapshot(snapshot)));

	/* "=" is never true of a null, whatever NULLS NOT DISTINCT says */
	for (int i = 0; i < nkeys; i++)
		if (isnull[i])
			return;
	for (;;)
	{
		uint64		mark = gunique_rebuilds_mark();
		LookupTree *tree = lookup_tree_get(state);
		LookupOutcome outcome;

		if (key == NULL)
		{
			gunique_locate_key(&mapped, &tree->map, values, isnull);
			key = &mapped;
		}
		outcome = lookup_one(state, tree, key, values, trust);
		CHECK_FOR_INTERRUPTS();
		if (outcome == LOOKUP_AGAIN)
			continue;
		if (outcome == LOOKUP_NOT_FOUND && trust &&
			lookup_rebuilt(tree, dirty ? NULL : snapshot, mark))
		{
			trust = false;
			continue;
		}
		break;
	}
}

/* The order of an array's keys, the key's. */
typedef struct LookupSort
{
	FmgrInfo	cmp;
	Oid			collation;
} LookupSort;

static int
lookup_datum_cmp(const void *a, const void *b, void *arg)
{
	LookupSort *sort = (LookupSort *) arg;

	return DatumGetInt32(FunctionCall2Coll(&sort->cmp, sort->collation,
										   *(const Datum *) a,
										   *(const Datum *) b));
}

/* key = ANY (array): each distinct key once, in the index's order. */
static void
lookup_array(LookupScanState *state, Datum array)
{
	LookupTree *tree = lookup_tree_get(state);
	ArrayType  *arr = DatumGetArrayTypeP(array);
	int16		typlen;
	bool		typbyval;
	char		typalign;
	Datum	   *elems;
	bool	   *nulls;
	int			n;
	int			kept = 0;
	LookupSort	sorter;

	get_typlenbyvalalign(ARR_ELEMTYPE(arr), &typlen, &typbyval, &typalign);
	deconstruct_array(arr, ARR_ELEMTYPE(arr), typlen, typbyval, typalign,
					  &elems, &nulls, &n);
	for (int i = 0; i < n; i++)
		if (!nulls[i])
			elems[kept++] = elems[i];
	/* the tree may be made again while the keys are looked up */
	fmgr_info_copy(&sorter.cmp, &tree->cmp, CurrentMemoryContext);
	sorter.collation = tree->collation[0];
	qsort_arg(elems, kept, sizeof(Datum), lookup_datum_cmp, &sorter);
	for (int i = 0; i < kept; i++)
	{
		bool		isnull = false;

		if (i > 0 && lookup_datum_cmp(&elems[i - 1], &elems[i], &sorter) == 0)
			continue;
		lookup_key(state, &elems[i], &isnull, NULL);
	}
}

/*
 * Evaluate the keys and find their rows.  Everything but the rows found
 * (lookup_keep) lives in the per-tuple memory, reset at the end.
 */
static void
lookup_fetch(LookupScanState *state)
{
	ExprContext *econtext = state->css.ss.ps.ps_ExprContext;
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	int			i = 0;
	ListCell   *lc;
	MemoryContext old;

	/*
	 * A cached plan runs without taking a new lock, and so without
	 * processing invalidations; the scope it reads must be current as of
	 * the snapshot, taken before (a REINDEX CONCURRENTLY's swap committed
	 * since the transaction's last lock is seen here, not later).
	 */
	AcceptInvalidationMessages();
	ResetExprContext(econtext);
	old = MemoryContextSwitchTo(econtext->ecxt_per_tuple_memory);
	foreach(lc, state->key_exprs)
	{
		values[i] = ExecEvalExpr((ExprState *) lfirst(lc), econtext,
								 &isnull[i]);
		i++;
	}
	if (!state->array)
		lookup_key(state, values, isnull, NULL);
	else if (!isnull[0])
		lookup_array(state, values[0]);
	MemoryContextSwitchTo(old);
	ResetExprContext(econtext);
	state->fetched = true;
}

static void
lookup_begin(CustomScanState *node, EState *estate, int eflags)
{
	LookupScanState *state = (LookupScanState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	Oid			indexoid = list_nth_oid(cscan->custom_private,
										LOOKUP_PRIVATE_INDEX);

	state->index = index_open(indexoid, AccessShareLock);
	if (!state->index->rd_index->indisvalid)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gunique index \"%s\" is not valid",
						RelationGetRelationName(state->index)),
				 errdetail("The query was planned to find its rows through the index."),
				 errhint("Run the query again.")));
	state->key_exprs = ExecInitExprList(cscan->custom_exprs, &node->ss.ps);
	state->rowcxt = AllocSetContextCreate(estate->es_query_cxt,
										  "gunique lookup rows",
										  ALLOCSET_SMALL_SIZES);
	state->pos = -1;
	state->markpos = -1;
	state->pdir = CreatePartitionDirectory(estate->es_query_cxt, true);
	state->snapshot = estate->es_snapshot;
}

static TupleTableSlot *
lookup_next(ScanState *ss)
{
	LookupScanState *state = (LookupScanState *) ss;
	TupleTableSlot *slot = ss->ss_ScanTupleSlot;
	LookupRow  *row;

	if (!state->fetched)
		lookup_fetch(state);
	if (ScanDirectionIsBackward(ss->ps.state->es_direction))
	{
		if (state->pos >= 0)
			state->pos--;
		if (state->pos < 0)
			return ExecClearTuple(slot);
	}
	else
	{
		if (state->pos < state->nrows)
			state->pos++;
		if (state->pos >= state->nrows)
			return ExecClearTuple(slot);
	}
	row = &state->rows[state->pos];
	ExecForceStoreHeapTuple(row->tuple, slot, false);
	slot->tts_tableOid = row->tableoid;
	slot->tts_tid = row->tid;
	return slot;
}

/* No EvalPlanQual: the path is planned only for plain SELECTs. */
static bool
lookup_recheck(ScanState *ss, TupleTableSlot *slot)
{
	return true;
}

static TupleTableSlot *
lookup_exec(CustomScanState *node)
{
	return ExecScan(&node->ss, lookup_next, lookup_recheck);
}

static void
lookup_end(CustomScanState *node)
{
	LookupScanState *state = (LookupScanState *) node;

	if (state->pdir != NULL)
		DestroyPartitionDirectory(state->pdir);
	if (state->index != NULL)
		index_close(state->index, NoLock);
	ExecClearTuple(node->ss.ss_ScanTupleSlot);
}

static void
lookup_rescan(CustomScanState *node)
{
	LookupScanState *state = (LookupScanState *) node;

	lookup_forget_rows(state);
	state->fetched = false;
	state->pos = -1;
	state->markpos = -1;
	ExecScanReScan(&node->ss);
}

static void
lookup_mark(CustomScanState *node)
{
	LookupScanState *state = (LookupScanState *) node;

	state->markpos = state->pos;
}

static void
lookup_restore(CustomScanState *node)
{
	LookupScanState *state = (LookupScanState *) node;

	state->pos = state->markpos;
}

/* "key = value", or "key = ANY (array)", as EXPLAIN shows an index's. */
static char *
lookup_explain_key(LookupScanState *state, List *dpcontext)
{
	CustomScan *cscan = (CustomScan *) state->css.ss.ps.plan;
	Relation	index = state->index;
	List	   *exprs = RelationGetIndexExpressions(index);
	ListCell   *next_expr = list_head(exprs);
	StringInfoData buf;
	int			i = 0;
	ListCell   *lc;

	initStringInfo(&buf);
	foreach(lc, cscan->custom_exprs)
	{
		AttrNumber	attno = index->rd_index->indkey.values[i];
		Node	   *column;

		if (attno != 0)
			column = (Node *) makeVar(cscan->scan.scanrelid, attno,
									  TupleDescAttr(RelationGetDescr(index), i)->atttypid,
									  -1, InvalidOid, 0);
		else
		{
			column = (Node *) lfirst(next_expr);
			next_expr = lnext(exprs, next_expr);
			ChangeVarNodes(column, 1, cscan->scan.scanrelid, 0);
		}
		appendStringInfo(&buf, state->array ? "%s(%s = ANY (%s))" : "%s(%s = %s)",
						 i > 0 ? " AND " : "",
						 deparse_expression(column, dpcontext, false, false),
						 deparse_expression((Node *) lfirst(lc), dpcontext,
											false, false));
		i++;
	}
	return buf.data;
}

static void
lookup_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	LookupScanState *state = (LookupScanState *) node;
	List	   *dpcontext;

	dpcontext = set_deparse_context_plan(es->deparse_cxt,
										 node->ss.ps.plan, ancestors);
	ExplainPropertyText("Index", RelationGetRelationName(state->index), es);
	ExplainPropertyText("Key", lookup_explain_key(state, dpcontext), es);
	if (es->analyze)
	{
		ExplainPropertyInteger("Partitions Searched", NULL, state->searched,
							   es);
		ExplainPropertyInteger("Partitions Ruled Out", NULL,
							   state->ruled_out, es);
	}
}

/*
 * A reader of a gunique tree for other modules: the lookup without its
 * plan node.  "table" is a partitioned table of the tree and "index" its
 * gunique index (onconflict.c: the top ones), both locked by the caller.
 * "snapshot" is a dirty one, which takes no predicate locks and sees each
 * leaf as it is, every key of it held by its summary (onconflict.c, and
 * keyprune.c's guess at planning), or a statement's MVCC snapshot, read as
 * the lookup scan reads it (keyprune.c's check).  Made in the caller's
 * memory context.
 */
GuniqueLookupReader *
gunique_lookup_reader_begin(Relation table, Relation index, Snapshot snapshot)
{
	LookupScanState *state = palloc0(sizeof(LookupScanState));

	Assert(snapshot->snapshot_type == SNAPSHOT_DIRTY ||
		   IsMVCCSnapshot(snapshot));
	state->css.ss.ss_currentRelation = table;
	state->css.ss.ss_ScanTupleSlot =
		MakeSingleTupleTableSlot(RelationGetDescr(table), &TTSOpsVirtual);
	state->index = index;
	state->snapshot = snapshot;
	state->rowcxt = AllocSetContextCreate(CurrentMemoryContext,
										  "gunique lookup rows",
										  ALLOCSET_SMALL_SIZES);
	/*
	 * A partition being detached holds its keys until it is gone; one gone
	 * since the descriptor was read is not searched (lookup_stray_index).
	 */
	state->pdir = CreatePartitionDirectory(CurrentMemoryContext, false);
	return (GuniqueLookupReader *) state;
}

/*
 * The first row of the key found in the tree, if any, into "hit".  "key"
 * is the key as the caller mapped it with a key map of an index of the
 * tree (every member maps keys alike, invariant 6), or NULL.
 */
bool
gunique_lookup_reader_find(GuniqueLookupReader *reader, Datum *values,
						   bool *isnull, GuniqueLocateKey *key,
						   GuniqueLookupHit *hit)
{
	LookupScanState *state = (LookupScanState *) reader;
	LookupRow  *row;

	lookup_forget_rows(state);
	lookup_key(state, values, isnull, key);
	if (state->nrows == 0)
		return false;
	row = &state->rows[0];
	hit->heapoid = row->tableoid;
	hit->tid = row->tid;
	hit->xwait = row->xwait;
	hit->speculative_token = row->speculative_token;
	return true;
}

/*
 * Where the key's row that the reader's MVCC snapshot sees must be, found
 * without reading it, when the summaries leave one leaf partition or none
 * (no stray, and no leaf that a rebuild the snapshot does not see may have
 * emptied of the key): that partition, into "heapoid", locked as a search
 * locks it, or InvalidOid.  Whether the row is there is left to the
 * caller's plan, which reads the partition with the same snapshot.  False
 * if the summaries leave more, or cannot be trusted, or the partition's
 * storage was replaced since the snapshot without this lock waiting for
 * it (lookup_check_storage): then gunique_lookup_reader_find.  The proof
 * is src/README, "Modifying by the key".
 */
bool
gunique_lookup_reader_only(GuniqueLookupReader *reader, Datum *values,
						   bool *isnull, Oid *heapoid)
{
	LookupScanState *state = (LookupScanState *) reader;
	Snapshot	snapshot = state->snapshot;
	int			nkeys = IndexRelationGetNumberOfKeyAttributes(state->index);
	GuniqueLocateKey key;
	LookupTree *tree;
	LookupPart *parts;
	LookupPart	part = {0};
	uint64		mark;
	uint64		generation;
	int			n;

	if (RecoveryInProgress() || IsolationIsSerializable() ||
		!IsMVCCSnapshot(snapshot))
		return false;
	for (int i = 0; i < nkeys; i++)
		if (isnull[i])
			return false;
	lookup_forget_rows(state);
	mark = gunique_rebuilds_mark();
	tree = lookup_tree_get(state);
	generation = tree->scope_generation;
	gunique_locate_key(&key, &tree->map, values, isnull);
	parts = lookup_candidates(state, tree, &key, true, &n);
	if (n == 1)
		part = parts[0];
	pfree(parts);
	if (n > 1 || part.stray || lookup_rebuilt(tree, snapshot, mark))
		return false;
	*heapoid = InvalidOid;
	if (n == 0)
		return true;
	/* as a search locks it: table, then index */
	lookup_lock(state, part.heapoid);
	lookup_lock(state, part.indexoid);
	if (generation != gunique_scope_generation())
		return false;
	/* a rewrite that kept the row needs a search to tell (lookup_one) */
	if (!lookup_waited(state, &part))
	{
		Relation	heap = table_open(part.heapoid, NoLock);
		bool		replaced = lookup_storage_replaced(heap, snapshot);

		table_close(heap, NoLock);
		if (replaced)
			return false;
	}
	*heapoid = part.heapoid;
	return true;
}

void
gunique_lookup_reader_end(GuniqueLookupReader *reader)
{
	LookupScanState *state = (LookupScanState *) reader;

	DestroyPartitionDirectory(state->pdir);
	ExecDropSingleTupleTableSlot(state->css.ss.ss_ScanTupleSlot);
	MemoryContextDelete(state->rowcxt);
	pfree(state);
}

/*-------------------------------------------------------------------------
 *
 * probescan.h
 *	  Index scans on the leaves of gunique trees, kept open for a statement.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_PROBESCAN_H
#define GUNIQUE_PROBESCAN_H

#include "access/genam.h"
#include "access/nbtree.h"
#include "access/relscan.h"
#include "executor/tuptable.h"
#include "utils/rel.h"
#include "utils/resowner.h"
#include "utils/snapshot.h"

#include "summary.h"

/*
 * What a statement needs to search one leaf index for keys: the open
 * relations, an insertion scan key to descend the btree with, and a dirty
 * snapshot to fetch the heap tuples its entries point to.
 */
typedef struct ProbeScan
{
	Oid			indexoid;		/* hash key */
	Relation	heap;
	Relation	index;
	bool		ready;			/* the rest is made: see
								 * gunique_probescan_prepare */
	BTScanInsert itup_key;		/* arguments set per key searched */
	IndexFetchTableData *fetch;
	TupleTableSlot *slot;
	GuniqueSummary *summary;	/* the leaf's key-range summary, or NULL */
	uint32		filter_after;	/* searches without a filter that make one
								 * worth building; 0 until needed */
	SnapshotData dirty;			/* HeapTupleSatisfiesDirty leaves the matching
								 * tuple's xmin/xmax here */
} ProbeScan;

/* A leaf's range and filter as a probe last read them (probe.c). */
typedef struct ProbeLeafView
{
	uint64		min;
	uint64		max;
	uint64		filter;			/* a reference, or 0 */
} ProbeLeafView;

/*
 * Copies of the ranges and filters of a group's leaves, side by side, valid
 * while the group's count of changes is "changes".  A probe past the
 * group's filter checks every leaf: with hundreds of them, one array read
 * in order costs much less than hundreds of summaries spread over shared
 * memory.
 */
typedef struct ProbeViews
{
	bool		valid;
	uint64		changes;
	ProbeLeafView *leaves;		/* one per target */
	bool		ordered;		/* "order" has been sorted once */
	int		   *order;			/* the targets by the low end of their range */
	uint64	   *reach;			/* reach[j]: the highest high end of the
								 * ranges of order[0 .. j] */
} ProbeViews;

/*
 * What a statement's probes from one leaf index need: the open scans of the
 * leaves of its group and the key's description, made on its first row.
 */
typedef struct ProbeGroup
{
	Oid			indexoid;		/* hash key: the inserter's leaf index */
	uint64		scope_generation;	/* valid while the scope cache is */
	bool		skip_self;		/* own leaf left out (ON CONFLICT) */
	bool		needed;			/* another leaf can hold the leaf's keys */
	bool		light;			/* only the group's filter: no targets, see
								 * group_light_possible */
	bool		filters_wanted; /* a probe searched a leaf without a filter */
	Oid			topindex;
	int			nleaves;		/* the group's leaves, own leaf included */
	int			ntargets;
	ProbeScan **targets;		/* the group's leaves, own leaf at "self" */
	GuniqueSummary **summaries; /* their summaries (or NULLs), side by side
								 * for the loop that skips leaves */
	int			self;			/* -1 if own leaf is left out */
	GuniqueSummary *own_summary;	/* own leaf's summary, or NULL */
	GuniqueSummary *any_summary;	/* some target's summary, or NULL */

	/* The group's key filter, kept by the group's top index (filter.c). */
	Oid			group;
	GuniqueSummary *group_summary;	/* NULL if the key is not summarized */
	bool		use_group_filter;	/* the group has leaves enough */
	uint64		group_keys;		/* keys the group seems to hold; 0 until
								 * needed */
	bool		group_filter_wanted;	/* worth building now */
	char		tree_changed;	/* 0 until asked, then 'y' or 'n': see
								 * gunique_tree_changed_here */
	ProbeViews *views;			/* with the group's filter in use, else NULL */

	/* The key, as in GuniqueScope. */
	int			nkeys;
	bool		nulls_not_distinct;
	Oid			collation[INDEX_MAX_KEYS];
	bool		hashable[INDEX_MAX_KEYS];
	FmgrInfo	hashfn[INDEX_MAX_KEYS];
} ProbeGroup;

/* What a probe scan runs under; see probescan.c. */
typedef struct ProbeScanContext
{
	ResourceOwner saved_owner;
	MemoryContext saved_context;
} ProbeScanContext;

extern void gunique_probescan_init(void);
extern void gunique_probescan_enter(ProbeScanContext *cxt);
extern void gunique_probescan_leave(ProbeScanContext *cxt);
extern ProbeScan *gunique_probescan_get(Oid heapoid, Oid indexoid);
extern void gunique_probescan_prepare(ProbeScan *ps);
extern void gunique_probescan_done(ProbeScan *ps);
extern ProbeGroup *gunique_probescan_group(Relation index, bool skip_self);
extern ProbeGroup *gunique_probescan_group_whole(Relation index,
												 bool skip_self);
extern void gunique_probescan_release_all(void);
extern void gunique_probescan_bind(MemoryContext cxt);

#endif							/* GUNIQUE_PROBESCAN_H */

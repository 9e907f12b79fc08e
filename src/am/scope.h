/*-------------------------------------------------------------------------
 *
 * scope.h
 *	  Per-backend cache of the partitions a gunique index must probe.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_SCOPE_H
#define GUNIQUE_SCOPE_H

#include "access/xact.h"
#include "fmgr.h"
#include "storage/lockdefs.h"
#include "utils/relcache.h"

/* One leaf (non-partitioned) index of a gunique index tree. */
typedef struct GuniqueLeaf
{
	Oid			indexoid;
	Oid			heapoid;
	Oid			group;			/* leaves of different groups never share a
								 * key: see scope.c */
	bool		sibling;		/* not a leaf: another index of a leaf's
								 * partition with the same definition, such
								 * as REINDEX CONCURRENTLY's copy */
} GuniqueLeaf;

/* Where a leaf sits in its tree's scope. */
typedef struct GuniqueLeafPlace
{
	Oid			group;
	int			first;			/* the group's first leaf in scope->leaves */
	int			count;			/* the group's leaves, this one included */
	int			self;			/* this leaf's place among them */
	bool		sibling;		/* this index is a sibling, not a leaf */
	bool		siblings;		/* the group has siblings */
} GuniqueLeafPlace;

/* What gunique_scope_for_leaf locks. */
typedef enum GuniqueScopeLock
{
	GUNIQUE_LOCK_NONE,
	GUNIQUE_LOCK_INNER,			/* the partitioned tables and indexes */
	GUNIQUE_LOCK_ALL			/* every relation of the tree */
} GuniqueScopeLock;

/* A whole gunique index tree, as seen from the top index. */
typedef struct GuniqueScope
{
	Oid			topindex;		/* hash key */
	int			nleaves;
	GuniqueLeaf *leaves;		/* by group, each group's in OID order */
	int			nlocks;
	Oid		   *lockoids;		/* every relation of the tree, locked in
								 * this order */
	int			ninner;
	Oid		   *inneroids;		/* its partitioned tables and indexes, top
								 * down, each index before its table */
	uint64		locked_generation;	/* see gunique_scope_for_leaf */
	uint64		inner_locked_generation;

	/* The key, the same for every leaf of the tree. */
	int			nkeys;
	bool		nulls_not_distinct;

	/*
	 * The top is valid: only then are the group filters trusted and an
	 * UPDATE that keeps its key spared the probe (src/README, I6, I8).  Its
	 * pg_index row changing flushes the scope.
	 */
	bool		valid;
} GuniqueScope;

extern void gunique_scope_relcache_inval(Oid relid);
extern void gunique_scope_xact_event(XactEvent event);
extern void gunique_scope_subxact_event(SubXactEvent event,
										SubTransactionId mySubid,
										SubTransactionId parentSubid);

extern GuniqueScope *gunique_scope_for_leaf(Relation index,
											 GuniqueLeafPlace *place,
											 GuniqueScopeLock lock);

extern GuniqueScope *gunique_scope_for_top(Oid topoid, Relation member,
											 GuniqueScopeLock lock);
extern uint64 gunique_scope_generation(void);
extern bool gunique_scope_try_lock_all(Relation index);

extern bool gunique_tree_changed_here(Relation index);

extern List *gunique_tree_leaves(Oid topindex);
extern List *gunique_tree_leaves_locked(Oid topindex, LOCKMODE heapmode);
extern void gunique_tree_leaves_unlock(List *leaves, LOCKMODE heapmode);

extern Oid	gunique_tree_top(Oid indexoid);

#endif							/* GUNIQUE_SCOPE_H */

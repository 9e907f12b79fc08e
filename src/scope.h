/*-------------------------------------------------------------------------
 *
 * scope.h
 *	  Per-backend cache of the partitions a gunique index must probe.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_SCOPE_H
#define GUNIQUE_SCOPE_H

#include "fmgr.h"
#include "utils/relcache.h"

/* One leaf (non-partitioned) index of a gunique index tree. */
typedef struct GuniqueLeaf
{
	Oid			indexoid;
	Oid			heapoid;
	Oid			group;			/* leaves of different groups never share a
								 * key: see scope.c */
} GuniqueLeaf;

/* A whole gunique index tree, as seen from the top index. */
typedef struct GuniqueScope
{
	Oid			topindex;		/* hash key */
	int			nleaves;
	GuniqueLeaf *leaves;		/* in OID order */
	int			nlocks;
	Oid		   *lockoids;		/* every relation of the tree, locked in
								 * this order */
	uint64		locked_generation;	/* see gunique_scope_for_leaf */

	/* The key, the same for every leaf of the tree. */
	int			nkeys;
	bool		nulls_not_distinct;
	Oid			collation[INDEX_MAX_KEYS];
	bool		hashable[INDEX_MAX_KEYS];
	FmgrInfo	hashfn[INDEX_MAX_KEYS]; /* hash consistent with "=" */
} GuniqueScope;

extern void gunique_scope_init(void);

extern GuniqueScope *gunique_scope_for_leaf(Relation index, Oid *group,
											 bool lock);

extern uint64 gunique_scope_generation(void);

extern List *gunique_tree_leaves(Oid topindex);

extern Oid	gunique_tree_top(Oid indexoid);

#endif							/* GUNIQUE_SCOPE_H */

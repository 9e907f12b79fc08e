/*-------------------------------------------------------------------------
 *
 * probegroup.h
 *	  What a statement's probes from one leaf index search: its group.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_PROBEGROUP_H
#define GUNIQUE_PROBEGROUP_H

#include "nodes/execnodes.h"
#include "utils/timestamp.h"

#include "am/scope.h"
#include "insert/probescan.h"
#include "locate/filter.h"
#include "locate/leaftags.h"
#include "locate/summary.h"

/*
 * Copies of the summaries of a group's leaves, side by side, taken under a
 * key lock and valid while the group's count of changes is "changes"
 * (src/README, I5).  A probe past the group's filter checks every
 * leaf: with hundreds of them, one array read in order costs much less
 * than hundreds of summaries spread over shared memory.  The leaves are
 * also kept sorted by the low ends of their ranges, so that those whose
 * range may hold a key are found by a binary search.
 */
typedef struct LeafSummaryCopies
{
	bool		valid;
	uint64		changes;
	GuniqueSummaryCopy *leaves; /* one per target */
	bool		ordered;		/* "order" has been sorted once */
	int		   *order;			/* the targets by the low end of their range */
	uint64	   *reach;			/* reach[j]: the highest high end of the
								 * ranges of order[0 .. j] */
	LeafTags	tags;			/* the targets by tag */
	int		   *wanted;			/* scratch: the targets a key may be in */
} LeafSummaryCopies;

/*
 * A light group of GUNIQUE_GROUP_TAG_MIN_LEAVES leaves or more: its leaves
 * by their tag in the group's filter, each locked and opened only when a
 * key may have its tag and subtag, and never the inserter's own leaf,
 * which nbtree checks (gunique_probegroup_light_open).  Made once per
 * statement and group, and shared by the statement's light groups of every
 * leaf of the group: a statement that inserts into all n leaves would
 * otherwise list n * n.
 */
typedef struct LightLeaves
{
	uint64		generation;		/* of the scope it was made from */
	int			n;				/* leaves listed */
	GuniqueLeaf *leaves;
	ProbeScan **scans;			/* NULL until opened */
	GuniqueSummaryCopy *copies; /* copies of their summaries, taken under a
								 * key lock, kept while the group's count
								 * of changes is "changes" (src/README,
								 * I5) */
	bool	   *copied;			/* copies[i] is one */
	uint64		changes;
	LeafTags	tags;			/* the leaves by tag */
	int		   *wanted;			/* scratch: the leaves a key may be in */
} LightLeaves;

/*
 * What a statement's probes from one leaf index need: the open scans of the
 * leaves of its group and the key's description, made on its first row.
 */
typedef struct ProbeGroup
{
	ProbeStatement *stmt;		/* whose memory and scans it uses */
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
	Oid			own_index;		/* own leaf */
	Oid			own_heap;		/* own partition: its indexes are nbtree's
								 * to check (a light group passes over
								 * them) */
	GuniqueSummary *own_summary;	/* own leaf's summary, or NULL */
	GuniqueKeyMap *keymap;		/* how summaries map the key (keymap.c) */

	/* The group's key filter, kept by the group's top index (summary.c). */
	Oid			group;
	GuniqueSummary *group_summary;	/* NULL if the key is not summarized */
	bool		use_group_filter;	/* the group has leaves enough */
	bool		group_filter_wanted;	/* missing, or outgrown */
	TimestampTz filters_asked;	/* when the statement last asked for them */
	LeafSummaryCopies *copies;	/* with the group's filter in use, else NULL */

	/* A light group's leaves by tag, or NULL (see LightLeaves) */
	struct LightLeaves *ll;

	/* The key, as in GuniqueScope. */
	int			nkeys;
	bool		nulls_not_distinct;
} ProbeGroup;

extern ProbeGroup *gunique_probegroup_for(IndexInfo *indexInfo,
										  Relation index, bool skip_self);
extern ProbeGroup *gunique_probegroup_whole(IndexInfo *indexInfo,
											Relation index, bool skip_self);
extern void gunique_probegroup_cleanup(IndexInfo *indexInfo);
extern void gunique_probegroup_light_open(ProbeGroup *pg, uint64 tags,
										  uint64 subs);
extern GuniqueKeyMap *gunique_probegroup_keymap(IndexInfo *indexInfo,
												Relation index);
extern LeafSummaryCopies *gunique_probegroup_copies(ProbeGroup *pg);
extern int	gunique_probegroup_copies_upto(LeafSummaryCopies *copies, int n,
										   uint64 key);

#endif							/* GUNIQUE_PROBEGROUP_H */

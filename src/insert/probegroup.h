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
#include "locate/locate.h"
#include "locate/summary.h"

/*
 * A light group's leaves, each locked and opened only when a key may have
 * its tag and subtag in the group's filter, and never the inserter's own
 * leaf, which nbtree checks (gunique_probegroup_light_open).  Made once per
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
	GuniqueLocator *loc;		/* the leaves by tag, and copies of the
								 * summaries of those opened, kept while
								 * the group's count of changes stays
								 * (locate.c) */
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
	GuniqueLocator *loc;		/* which of them may hold a key (locate.c) */
	int			self;			/* -1 if own leaf is left out */
	Oid			own_index;		/* own leaf */
	Oid			own_heap;		/* own partition: its indexes are nbtree's
								 * to check (a light group passes over
								 * them) */
	GuniqueSummary *own_summary;	/* own leaf's summary, or NULL */

	/* The group's key filter, kept by the group's top index (summary.c). */
	Oid			group;
	GuniqueSummary *group_summary;	/* NULL if the key is not summarized */
	bool		group_filter_wanted;	/* missing, or outgrown */
	TimestampTz filters_asked;	/* when the statement last asked for them */

	/* A light group's leaves (see LightLeaves), or NULL */
	struct LightLeaves *ll;

	/* The key, and the top's validity, as in GuniqueScope. */
	int			nkeys;
	bool		nulls_not_distinct;
	bool		valid;
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

#endif							/* GUNIQUE_PROBEGROUP_H */

/*-------------------------------------------------------------------------
 *
 * locate.c
 *	  Which leaves may hold a key.
 *
 * A key is looked for only in the leaves whose summaries cannot rule it
 * out: first the group's filter, whose one cache line rules every leaf of
 * the group out for almost every new key, and, when it tags keys by leaf,
 * its tag and subtag parts, which rule out the leaves of the other tags and
 * subtags; then each remaining leaf's key range and filter.  The insert
 * probe (probe.c) and lookups (lookup.c, whose reader serves the ON
 * CONFLICT check and modify-by-key) ask here, each about the leaves it
 * lists in a locator.  What a caller holds while it asks, and what it does
 * with the answer (lock, open, search, wait), is its own.  Why a leaf
 * ruled out cannot hold the key, and what the caller must hold for that:
 * src/README, "Locating a key".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/pg_bitutils.h"

#include "compat.h"
#include "locate/locate.h"

/* Leaves ahead of the one checked whose filters are being loaded. */
#define LOCATE_AHEAD 4

/* Map a key once for the row: its images, and its filter key. */
void
gunique_locate_key(GuniqueLocateKey *key, GuniqueKeyMap *map, Datum *values,
				   bool *isnull)
{
	gunique_keymap_image(&key->image, map, values, isnull);
	gunique_filter_key(&key->fkey, key->image.hash);
}

/*
 * Start loading the key's block of a leaf's or a group's filter, so that
 * the waits for memory overlap.  Under a key lock, which keeps the filter
 * from being freed (src/README, I6).
 */
void
gunique_locate_prefetch(GuniqueSummary *summary, GuniqueLocateKey *key)
{
	if (summary != NULL && key->image.hashed)
		gunique_filter_prefetch(gunique_summary_filter(summary), &key->fkey);
}

/* List leaf i, of table "heapoid", under its tag. */
static void
locate_list_leaf(GuniqueLocator *loc, int i, Oid heapoid)
{
	int			both = gunique_summary_leaf_tag(heapoid);
	int			tag = GUNIQUE_FILTER_TAG_OF(both);

	loc->next[i] = loc->first[tag];
	loc->first[tag] = i;
	loc->sub[i] = (uint8) GUNIQUE_FILTER_SUBTAG_OF(both);
	loc->present |= UINT64CONST(1) << tag;
}

/*
 * A locator of n leaves, in the current memory context.  heapoids[i] is
 * leaf i's table, whose tag the group's filter gives its keys, or
 * InvalidOid for a leaf the group's filter does not cover (a lookup's
 * stray), which is never ruled out by it.  "group" is the entry whose
 * filter is read first, or NULL; without it copies are never kept.  The
 * caller sets each leaf's summary in loc->summaries.
 */
GuniqueLocator *
gunique_locator_make(int n, const Oid *heapoids, GuniqueSummary *group,
					 int flags)
{
	GuniqueLocator *loc = palloc0(sizeof(GuniqueLocator));
	int			room = Max(n, 1);

	loc->n = n;
	loc->group = group;
	loc->flags = group != NULL ? flags : 0;
	loc->summaries = palloc0(sizeof(GuniqueSummary *) * room);
	loc->next = palloc(sizeof(int) * room);
	loc->sub = palloc(sizeof(uint8) * room);
	for (int t = 0; t < GUNIQUE_FILTER_TAGS; t++)
		loc->first[t] = -1;
	/* from the last to the first, so that each tag lists its leaves in order */
	if (group != NULL)
		for (int i = n - 1; i >= 0; i--)
			if (OidIsValid(heapoids[i]))
				locate_list_leaf(loc, i, heapoids[i]);
	loc->copies = palloc(sizeof(GuniqueSummaryCopy) * room);
	loc->copied = palloc0(sizeof(bool) * room);
	loc->wanted = palloc(sizeof(int) * room);
	if (loc->flags & LOCATE_BY_RANGE)
	{
		loc->order = palloc(sizeof(int) * room);
		loc->reach = palloc(sizeof(uint64) * room);
		for (int i = 0; i < n; i++)
			loc->order[i] = i;
	}
	return loc;
}

/*
 * Under a key lock: how far does the group's filter let the key in?  If it
 * tags keys by leaf, *tags and *subs receive the tags and subtags the key
 * may have (gunique_locate_tagged lists their leaves).
 */
GuniqueLocateGroup
gunique_locate_group(GuniqueLocator *loc, GuniqueLocateKey *key,
					 uint64 *tags, uint64 *subs)
{
	uint64		ref;
	uint64		candidates = 0;

	if (loc->group == NULL || !key->image.hashed)
		return LOCATE_GROUP_ANY;
	ref = gunique_summary_filter(loc->group);
	if (gunique_filter_excludes(ref, &key->fkey))
		return LOCATE_GROUP_OUT;
	if (!gunique_filter_tagged(ref))
		return LOCATE_GROUP_ANY;
	*tags = gunique_filter_tags(ref, &key->fkey, loc->present);
	for (uint64 left = *tags; left != 0; left &= left - 1)
		for (int i = loc->first[pg_rightmost_one_pos64(left)]; i >= 0;
			 i = loc->next[i])
			candidates |= UINT64CONST(1) << loc->sub[i];
	*subs = gunique_filter_subtags(ref, &key->fkey, candidates);
	return LOCATE_GROUP_TAGS;
}

/*
 * The leaves listed under one of "tags" whose subtag is one of "subs", by
 * tag, into "out" (room for every leaf); how many.
 */
int
gunique_locate_tagged(GuniqueLocator *loc, uint64 tags, uint64 subs,
					  int *out)
{
	int			n = 0;

	for (uint64 left = tags & loc->present; left != 0; left &= left - 1)
		for (int i = loc->first[pg_rightmost_one_pos64(left)]; i >= 0;
			 i = loc->next[i])
			if ((subs >> loc->sub[i]) & 1)
				out[n++] = i;
	return n;
}

/*
 * Kept copies serve while the group's count of changes stays where it was
 * when they were read (src/README, I5); past it, read them again.
 */
static inline void
locate_refresh(GuniqueLocator *loc)
{
	uint64		changes = gunique_summary_changes(loc->group);

	if (changes == loc->changes)
		return;
	memset(loc->copied, 0, sizeof(bool) * loc->n);
	loc->changes = changes;
	loc->sorted = false;
}

/* Read leaf i's summary into its kept copy, unless that serves. */
static inline void
locate_copy(GuniqueLocator *loc, int i)
{
	if (loc->copied[i])
		return;
	gunique_summary_copy(loc->summaries[i], &loc->copies[i]);
	loc->copied[i] = true;
}

/* Start loading the key's block of the filter of a copy that may hold it. */
static inline void
locate_prefetch(GuniqueSummaryCopy *copy, GuniqueLocateKey *key)
{
	if (key->image.hashed && !gunique_summary_copy_outside(copy, &key->image))
		gunique_filter_prefetch(copy->filter, &key->fkey);
}

/* Can the copy hold the key?  Counts what rules it out. */
static inline bool
locate_copy_holds(GuniqueSummaryCopy *copy, GuniqueLocateKey *key,
				  GuniqueLocateCounts *counts)
{
	if (gunique_summary_copy_outside(copy, &key->image))
	{
		counts->range++;
		return false;
	}
	if (key->image.hashed && gunique_filter_excludes(copy->filter, &key->fkey))
	{
		counts->filter++;
		return false;
	}
	return true;
}

static int
locate_min_cmp(const void *a, const void *b, void *arg)
{
	GuniqueSummaryCopy *copies = arg;
	uint64		ma = copies[*(const int *) a].min;
	uint64		mb = copies[*(const int *) b].min;

	return ma < mb ? -1 : ma > mb ? 1 : 0;
}

/*
 * Copy every leaf's summary, sort the leaves by the low ends of their
 * ranges, and note for each place in that order the highest high end so
 * far, so that the leaves whose range may hold a key are found by a binary
 * search and a short walk back: with keys that follow the partitioning,
 * one or two leaves of hundreds.  Ranges only widen, so after the first
 * sort the order is nearly right, and an insertion sort puts it right in
 * one pass.
 */
static void
locate_sort(GuniqueLocator *loc)
{
	GuniqueSummaryCopy *copies = loc->copies;
	int		   *order = loc->order;
	uint64		reach = 0;

	for (int i = 0; i < loc->n; i++)
		locate_copy(loc, i);
	if (!loc->ordered)
		qsort_arg(order, loc->n, sizeof(int), locate_min_cmp, copies);
	else
		for (int j = 1; j < loc->n; j++)
		{
			int			x = order[j];
			int			k = j;

			for (; k > 0 && copies[order[k - 1]].min > copies[x].min; k--)
				order[k] = order[k - 1];
			order[k] = x;
		}
	loc->ordered = true;
	for (int j = 0; j < loc->n; j++)
	{
		reach = Max(reach, copies[order[j]].max);
		loc->reach[j] = reach;
	}
	loc->sorted = true;
}

/* How many leaves, in loc->order, have ranges that start at or below key. */
static int
locate_upto(GuniqueLocator *loc, uint64 key)
{
	int			lo = 0;
	int			hi = loc->n;

	while (lo < hi)
	{
		int			mid = lo + (hi - lo) / 2;

		if (loc->copies[loc->order[mid]].min <= key)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/*
 * Every leaf, by range (LOCATE_BY_RANGE): walk back from the last leaf
 * whose range starts at or below the key while the ranges so far may still
 * reach it; the rest start above the key or end below it.
 */
static int
locate_by_range(GuniqueLocator *loc, GuniqueLocateKey *key, int self,
				int *out, GuniqueLocateCounts *counts)
{
	GuniqueSummaryCopy *copies = loc->copies;
	GuniqueKeyImage *image = &key->image;
	int			upto;
	int			walked = 0;
	int			m = 0;

	if (!loc->sorted)
		locate_sort(loc);
	/* a key without an order image (a NULL leading column) may be anywhere */
	upto = image->ordered ? locate_upto(loc, image->order) : loc->n;
	for (int j = upto - 1; j >= upto - LOCATE_AHEAD && j >= 0; j--)
		locate_prefetch(&copies[loc->order[j]], key);
	for (int j = upto - 1; j >= 0 && loc->reach[j] >= image->order; j--)
	{
		int			i = loc->order[j];

		walked++;
		if (j >= LOCATE_AHEAD)
			locate_prefetch(&copies[loc->order[j - LOCATE_AHEAD]], key);
		if (i != self && locate_copy_holds(&copies[i], key, counts))
			out[m++] = i;
	}
	counts->range += loc->n - walked;
	return m;
}

/*
 * Under a key lock: of the leaves "cand" (NULL: every leaf), those whose
 * summaries may hold the key, into "out" (which may be "cand"), in their
 * order; how many.  Leaf "self" (-1: none) is passed over, neither
 * returned nor counted.  The summaries of the leaves asked about must be
 * set.  Without kept copies each summary is read and checked in turn (few
 * leaves, or a lookup's few candidates); with them, the summaries not
 * copied yet are read first, then the filter blocks to be read are
 * loaded, so that the cache misses of several leaves overlap, and then
 * the copies are checked.
 */
int
gunique_locate_leaves(GuniqueLocator *loc, GuniqueLocateKey *key,
					  const int *cand, int ncand, int self, int *out,
					  GuniqueLocateCounts *counts)
{
	int			m = 0;

	if (!(loc->flags & LOCATE_KEEP_COPIES))
	{
		for (int c = 0; c < ncand; c++)
		{
			int			i = cand != NULL ? cand[c] : c;
			GuniqueSummaryCopy copy;

			if (i == self)
				continue;
			gunique_summary_copy(loc->summaries[i], &copy);
			if (locate_copy_holds(&copy, key, counts))
				out[m++] = i;
		}
		return m;
	}
	locate_refresh(loc);
	if (cand == NULL && (loc->flags & LOCATE_BY_RANGE))
		return locate_by_range(loc, key, self, out, counts);
	for (int c = 0; c < ncand; c++)
	{
		int			i = cand != NULL ? cand[c] : c;

		if (!loc->copied[i] && loc->summaries[i] != NULL)
			gunique_prefetch(loc->summaries[i]);
	}
	for (int c = 0; c < ncand; c++)
	{
		int			i = cand != NULL ? cand[c] : c;

		locate_copy(loc, i);
		locate_prefetch(&loc->copies[i], key);
	}
	for (int c = 0; c < ncand; c++)
	{
		int			i = cand != NULL ? cand[c] : c;

		if (i != self && locate_copy_holds(&loc->copies[i], key, counts))
			out[m++] = i;
	}
	return m;
}

/*
 * Under a key lock: the leaves that may hold the key, into "out" (room
 * for every leaf), for a caller that has set every leaf's summary: the
 * group's filter first, then the summaries of the leaves it lets in.
 * counts->group says what the group's filter said.
 */
int
gunique_locate(GuniqueLocator *loc, GuniqueLocateKey *key, int self,
			   int *out, GuniqueLocateCounts *counts)
{
	uint64		tags = 0;
	uint64		subs = 0;
	int			ncand;

	counts->group = gunique_locate_group(loc, key, &tags, &subs);
	switch (counts->group)
	{
		case LOCATE_GROUP_OUT:
			counts->filter += loc->n;
			return 0;
		case LOCATE_GROUP_TAGS:
			ncand = gunique_locate_tagged(loc, tags, subs, out);
			counts->filter += loc->n - ncand;
			return gunique_locate_leaves(loc, key, out, ncand, self, out,
										 counts);
		case LOCATE_GROUP_ANY:
			break;
	}
	return gunique_locate_leaves(loc, key, NULL, loc->n, self, out, counts);
}

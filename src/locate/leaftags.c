/*-------------------------------------------------------------------------
 *
 * leaftags.c
 *	  A group's leaves listed by their tag and subtag in its filter.
 *
 * A group's filter of 64 leaves or more tags each key by the leaf that
 * holds it, with a tag and a subtag (filter.c); a leaf that holds a key
 * has both among the key's (src/README, I6).  Lookups (lookup.c) keep
 * their leaves listed here, and ask the filter which of them a key may be
 * in.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "port/pg_bitutils.h"

#include "locate/leaftags.h"
#include "locate/summary.h"

/* An empty list of n leaves; gunique_leaftags_add fills it. */
void
gunique_leaftags_init(LeafTags *lt, int n)
{
	lt->present = 0;
	lt->next = palloc(sizeof(int) * Max(n, 1));
	lt->sub = palloc(sizeof(uint8) * Max(n, 1));
	for (int t = 0; t < GUNIQUE_FILTER_TAGS; t++)
		lt->first[t] = -1;
}

/*
 * List leaf i, of table "heapoid", under its tag; leaves added from the
 * last to the first are listed in their order.
 */
void
gunique_leaftags_add(LeafTags *lt, int i, Oid heapoid)
{
	int			both = gunique_summary_leaf_tag(heapoid);
	int			tag = GUNIQUE_FILTER_TAG_OF(both);

	lt->next[i] = lt->first[tag];
	lt->first[tag] = i;
	lt->sub[i] = (uint8) GUNIQUE_FILTER_SUBTAG_OF(both);
	lt->present |= UINT64CONST(1) << tag;
}

/*
 * The tags the key may have in the group's filter "ref", and in *subs the
 * subtags of their leaves it may have.  Under a key lock, which keeps the
 * filter from being freed.
 */
uint64
gunique_leaftags_match(LeafTags *lt, uint64 ref, GuniqueFilterKey *fkey,
					   uint64 *subs)
{
	uint64		tags = gunique_filter_tags(ref, fkey, lt->present);
	uint64		candidates = 0;

	for (uint64 left = tags; left != 0; left &= left - 1)
		for (int i = lt->first[pg_rightmost_one_pos64(left)]; i >= 0;
			 i = lt->next[i])
			candidates |= UINT64CONST(1) << lt->sub[i];
	*subs = gunique_filter_subtags(ref, fkey, candidates);
	return tags;
}

/*
 * The leaves listed under one of "tags" whose subtag is one of "subs", by
 * tag, into "out" (room for every leaf); how many.
 */
int
gunique_leaftags_list(LeafTags *lt, uint64 tags, uint64 subs, int *out)
{
	int			n = 0;

	for (uint64 left = tags & lt->present; left != 0; left &= left - 1)
		for (int i = lt->first[pg_rightmost_one_pos64(left)]; i >= 0;
			 i = lt->next[i])
			if ((subs >> lt->sub[i]) & 1)
				out[n++] = i;
	return n;
}

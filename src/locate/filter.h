/*-------------------------------------------------------------------------
 *
 * filter.h
 *	  Key filters: blocked bloom filters in dynamic shared memory.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_FILTER_H
#define GUNIQUE_FILTER_H

/*
 * A key's hash and the bits it sets in a filter's block, worked out once
 * (on the first filter checked) for a probe that may check many filters.
 */
#define GUNIQUE_FILTER_BLOCK_WORDS 8	/* 64 bytes */
#define GUNIQUE_FILTER_TAGS		64	/* tags a tagged filter tells apart,
									 * and as many subtags */
#define GUNIQUE_FILTER_TAG_BITS 6	/* bits a key and a tag set */

/*
 * A leaf's tag in a tagged filter (summary.c) has two parts, a tag and a
 * subtag, each below GUNIQUE_FILTER_TAGS.
 */
#define GUNIQUE_FILTER_TAG_MAKE(tag, sub) \
	((tag) + (sub) * GUNIQUE_FILTER_TAGS)
#define GUNIQUE_FILTER_TAG_OF(t)		((t) % GUNIQUE_FILTER_TAGS)
#define GUNIQUE_FILTER_SUBTAG_OF(t)		((t) / GUNIQUE_FILTER_TAGS)

typedef struct GuniqueFilterKey
{
	uint64		hash;
	bool		masked;			/* masks worked out */
	uint64		masks[GUNIQUE_FILTER_BLOCK_WORDS];
} GuniqueFilterKey;

/* What the filters take of shared memory (gunique_filter_memory()). */
typedef struct GuniqueFilterMemory
{
	uint64		limit;			/* bytes filters may take */
	uint64		bytes;			/* bytes they take */
	uint64		filters;		/* filters there are */
	uint64		refused;		/* filters not made since the server started */
} GuniqueFilterMemory;

/* A filter as saved at shutdown and loaded at start (persist.c). */
typedef struct GuniqueFilterSaved
{
	uint64		shape;			/* the reference's shape bits: its number of
								 * blocks, tagged or not (filter.c) */
	uint64		capacity;
	uint64		nkeys;
	uint32		tags_lost;
	uint64		nbytes;			/* of its bits, bloom, tag and subtag
								 * parts */
} GuniqueFilterSaved;

extern int	gunique_filter_memory;
extern bool gunique_key_filters;

extern void gunique_filter_shmem_request(void);
extern void gunique_filter_shmem_startup(void);
extern bool gunique_filter_arena_ready(void);
extern void gunique_filter_freeze(void);
extern void gunique_filter_thaw(void);
extern void gunique_filter_memory_usage(GuniqueFilterMemory *usage);
extern void gunique_filter_set_inplace_extra(uint64 bytes);
extern char *gunique_filter_saved(uint64 ref, GuniqueFilterSaved *saved);
extern uint64 gunique_filter_load(const GuniqueFilterSaved *saved,
								  char **bits);
extern void gunique_filter_unload(uint64 ref);
extern void gunique_filter_load_done(void);

/* Filters are named by a reference, 0 for none; see filter.c. */
extern uint64 gunique_filter_alloc(uint64 keys, bool tagged);
extern void gunique_filter_free(uint64 ref);
extern bool gunique_filter_set(uint64 ref, uint64 hash, int tag, bool count);
extern void gunique_filter_set_alone(uint64 ref, uint64 hash, int tag);
extern uint64 gunique_filter_count(uint64 ref);
extern bool gunique_filter_full(uint64 ref);
extern void gunique_filter_add_count(uint64 ref, uint64 n);
extern void gunique_filter_set_capacity(uint64 ref, uint64 capacity);

extern void gunique_filter_key(GuniqueFilterKey *fkey, uint64 hash);
extern bool gunique_filter_excludes(uint64 ref, GuniqueFilterKey *fkey);
extern void gunique_filter_prefetch(uint64 ref, GuniqueFilterKey *fkey);
extern uint64 gunique_filter_tags(uint64 ref, GuniqueFilterKey *fkey,
								  uint64 candidates);
extern uint64 gunique_filter_subtags(uint64 ref, GuniqueFilterKey *fkey,
									 uint64 candidates);
extern bool gunique_filter_tagged(uint64 ref);

#endif							/* GUNIQUE_FILTER_H */

/*-------------------------------------------------------------------------
 *
 * filter.c
 *	  The key filter arena: blocked bloom filters in shared memory.
 *
 * A key filter answers "surely not here" for almost every key its owner
 * does not hold, for the price of one cache line: a key sets one bit in
 * each of the eight words of one 64-byte block, chosen by the key's 64-bit
 * hash (keymap.c).  This file knows filters only by their reference; what
 * a filter stands for, when it is built, grown or dropped, and why a probe
 * may trust it, is summary.c's (src/README, invariant 6).
 *
 * A group's filter is tagged: beside its bloom filter it has a second part
 * of the same size, where a key sets GUNIQUE_FILTER_TAG_BITS bits of the
 * block parallel to its bloom block, chosen by the key and by the tag (0 to
 * GUNIQUE_FILTER_TAGS - 1) of the leaf that holds it.  A key the bloom part
 * cannot rule out is then checked against each tag in one more cache line,
 * and only the leaves of the tags it may have are looked at (summary.c
 * gives each leaf its tag).  Every setter names the tag: a tagged filter
 * set without one stops ruling tags out.
 *
 * Filters live in one arena of gunique.filter_memory bytes, carved into
 * power-of-two sizes with a free list per size; a filter may take a freed
 * block of a bigger size, and the arena starts afresh whenever its last
 * filter is freed.  When the arena has no room, the caller goes without a
 * new filter.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"

#include "compat.h"
#include "filter.h"
#include "port/pg_bitutils.h"
#include "keymap.h"

#define FILTER_BLOCK_WORDS	GUNIQUE_FILTER_BLOCK_WORDS	/* a key's bits */
#define FILTER_BITS_PER_KEY 12
#define FILTER_MIN_CLASS	10	/* 1 kB of bits: 682 keys */
#define FILTER_MAX_CLASS	40

/*
 * The count of keys is sampled: one key in 16 (by hash) adds 16, so that
 * most inserts do not write the shared counter.
 */
#define FILTER_SAMPLE_SHIFT 60

typedef union FilterHeader
{
	struct
	{
		pg_atomic_uint64 capacity;	/* keys it holds at its designed false
									 * positive rate */
		pg_atomic_uint64 nkeys; /* keys added, estimated */
		pg_atomic_uint32 tags_lost; /* tagged, but set without a tag */
		uint64		nextfree;	/* on a free list, the next one there */
		int			sizeclass;	/* log2 of the bytes of bits */
		int			blockclass; /* that of the block it occupies, which
								 * may be bigger (see gunique_filter_alloc) */
	}			h;
	char		pad[64];		/* keeps the bits cache-line aligned */
} FilterHeader;

typedef struct FilterArena
{
	uint64		size;			/* bytes that filters may use */
	uint64		used;			/* bytes handed out, from the start */
	uint64		nlive;			/* filters allocated and not freed */
	uint64		freelist[FILTER_MAX_CLASS + 1];	/* offsets, 0 if empty */
} FilterArena;

int			gunique_filter_memory = 32 * 1024;	/* kB */
bool		gunique_key_filters = true;

static FilterArena *arena = NULL;
static char *arena_base = NULL;
static LWLock *arena_lock = NULL;

static Size
filter_arena_size(void)
{
	return (Size) gunique_filter_memory * 1024;
}

void
gunique_filter_shmem_request(void)
{
	if (gunique_filter_memory <= 0)
		return;
	RequestAddinShmemSpace(add_size(MAXALIGN(sizeof(FilterArena)) + 64,
									filter_arena_size()));
	RequestNamedLWLockTranche("gunique filters", 1);
}

void
gunique_filter_shmem_startup(void)
{
	bool		found;
	Size		header = MAXALIGN(sizeof(FilterArena)) + 64;

	if (gunique_filter_memory <= 0)
		return;
	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	arena = ShmemInitStruct("gunique filters",
							add_size(header, filter_arena_size()), &found);
	arena_base = (char *) TYPEALIGN(64, (char *) arena +
									MAXALIGN(sizeof(FilterArena)));
	if (!found)
	{
		memset(arena, 0, sizeof(FilterArena));
		arena->size = filter_arena_size();
		arena->used = 64;		/* offset 0 means "no filter" */
	}
	arena_lock = &(GetNamedLWLockTranche("gunique filters"))->lock;
	LWLockRelease(AddinShmemInitLock);
}

/*
 * Filters are named by a reference: the offset of their header in the
 * arena (a multiple of 64) with log2 of their number of blocks in the low
 * six bits, so that a probe finds a key's block without reading the header,
 * and FILTER_REF_TAGGED if the filter has a tag part after its bloom part.
 */
#define FILTER_REF_LOG2_MASK	UINT64CONST(63)
#define FILTER_REF_TAGGED		(UINT64CONST(1) << 62)

static inline FilterHeader *
filter_at(uint64 ref)
{
	Assert(ref != 0);			/* 0 names no filter */
	return (FilterHeader *) (arena_base +
							 (ref & ~(FILTER_REF_LOG2_MASK | FILTER_REF_TAGGED)));
}

static inline pg_atomic_uint64 *
filter_block(uint64 ref, uint64 hash)
{
	pg_atomic_uint64 *bits = (pg_atomic_uint64 *) (filter_at(ref) + 1);
	uint64		mask = (UINT64CONST(1) << (ref & FILTER_REF_LOG2_MASK)) - 1;

	return bits + (hash & mask) * FILTER_BLOCK_WORDS;
}

/* The tag block parallel to the key's bloom block, in a tagged filter. */
static inline pg_atomic_uint64 *
filter_tag_block(uint64 ref, uint64 hash)
{
	uint64		nblocks = UINT64CONST(1) << (ref & FILTER_REF_LOG2_MASK);

	return filter_block(ref, hash) + nblocks * FILTER_BLOCK_WORDS;
}

/*
 * The bits a key and a tag set in the key's tag block: GUNIQUE_FILTER_TAG_BITS
 * positions of the block's 512, by double hashing: the i-th is a_i + tag *
 * b_i (mod 512), with a_i and b_i (odd) from the key's hash, so that a probe
 * works out every tag's positions with additions, and two tags of one key
 * never share a position.
 */
typedef struct FilterTagBase
{
	int			a[GUNIQUE_FILTER_TAG_BITS];
	int			b[GUNIQUE_FILTER_TAG_BITS];
} FilterTagBase;

static inline void
filter_tag_base(uint64 hash, FilterTagBase *base)
{
	uint64		h = gunique_mix64(hash ^ UINT64CONST(0xc2b2ae3d27d4eb4f));

	for (int i = 0; i < GUNIQUE_FILTER_TAG_BITS; i++)
	{
		base->a[i] = (int) ((h >> (9 * i)) & 511);
		base->b[i] = (int) ((h >> (36 + 7 * i)) & 127) * 2 + 1;
	}
}

static inline void
filter_tag_positions(uint64 hash, int tag, int *pos)
{
	FilterTagBase base;

	filter_tag_base(hash, &base);
	for (int i = 0; i < GUNIQUE_FILTER_TAG_BITS; i++)
		pos[i] = (base.a[i] + tag * base.b[i]) & 511;
}

static void
filter_set_tag(uint64 ref, uint64 hash, int tag, bool alone)
{
	pg_atomic_uint64 *block = filter_tag_block(ref, hash);
	int			pos[GUNIQUE_FILTER_TAG_BITS];

	if (tag < 0 || tag >= GUNIQUE_FILTER_TAGS)
	{
		pg_atomic_write_u32(&filter_at(ref)->h.tags_lost, 1);
		return;
	}
	filter_tag_positions(hash, tag, pos);
	for (int i = 0; i < GUNIQUE_FILTER_TAG_BITS; i++)
	{
		pg_atomic_uint64 *word = &block[pos[i] >> 6];
		uint64		bit = UINT64CONST(1) << (pos[i] & 63);

		if (alone)
			*(uint64 *) word |= bit;
		else if ((pg_atomic_read_u64(word) & bit) == 0)
			pg_atomic_fetch_or_u64(word, bit);
	}
}

/*
 * Which bits of its block a key sets: one in each word (a split block bloom
 * filter), as one mask per word.  Each mask is worked out on its own, with
 * no word of the block written twice.
 */
static inline void
filter_masks(uint64 hash, uint64 *masks)
{
	uint64		h = gunique_mix64(hash ^ UINT64CONST(0x9e3779b97f4a7c15));

	for (int i = 0; i < FILTER_BLOCK_WORDS; i++)
		masks[i] = UINT64CONST(1) << ((h >> (6 * i)) & 63);
}

static bool
filter_holds(uint64 ref, uint64 hash, const uint64 *masks)
{
	pg_atomic_uint64 *block = filter_block(ref, hash);

	for (int i = 0; i < FILTER_BLOCK_WORDS; i++)
		if ((pg_atomic_read_u64(&block[i]) & masks[i]) != masks[i])
			return false;
	return true;
}

/*
 * Set the key's bits, and in a tagged filter those of the key with the tag
 * of its leaf; with "count", also count the key (by sampling), and return
 * true if the filter now holds more keys than it was made for.
 */
bool
gunique_filter_set(uint64 ref, uint64 hash, int tag, bool count)
{
	FilterHeader *f = filter_at(ref);
	pg_atomic_uint64 *block = filter_block(ref, hash);
	uint64		masks[FILTER_BLOCK_WORDS];

	filter_masks(hash, masks);
	for (int i = 0; i < FILTER_BLOCK_WORDS; i++)
		if ((pg_atomic_read_u64(&block[i]) & masks[i]) == 0)
			pg_atomic_fetch_or_u64(&block[i], masks[i]);
	if (ref & FILTER_REF_TAGGED)
		filter_set_tag(ref, hash, tag, false);
	if (!count || (hash >> FILTER_SAMPLE_SHIFT) != 0)
		return false;
	return pg_atomic_add_fetch_u64(&f->h.nkeys, 16) >
		pg_atomic_read_u64(&f->h.capacity);
}

/* Set the key's bits in a filter nobody else can be reading or writing. */
void
gunique_filter_set_alone(uint64 ref, uint64 hash, int tag)
{
	uint64	   *block = (uint64 *) filter_block(ref, hash);
	uint64		masks[FILTER_BLOCK_WORDS];

	filter_masks(hash, masks);
	for (int i = 0; i < FILTER_BLOCK_WORDS; i++)
		block[i] |= masks[i];
	if (ref & FILTER_REF_TAGGED)
		filter_set_tag(ref, hash, tag, true);
}

void
gunique_filter_key(GuniqueFilterKey *fkey, uint64 hash)
{
	fkey->hash = hash;
	fkey->masked = false;
}

/*
 * Is the key surely not in filter "ref"?  False
 * without a filter, or with filters turned off.
 */
bool
gunique_filter_excludes(uint64 ref, GuniqueFilterKey *fkey)
{
	if (ref == 0 || !gunique_key_filters)
		return false;
	if (!fkey->masked)
	{
		filter_masks(fkey->hash, fkey->masks);
		fkey->masked = true;
	}
	return !filter_holds(ref, fkey->hash, fkey->masks);
}

/*
 * Of the tags in "candidates" (bit t for tag t), those the key may have in
 * filter "ref": all of them unless the filter is tagged and every setter
 * named a tag.
 */
uint64
gunique_filter_tags(uint64 ref, GuniqueFilterKey *fkey, uint64 candidates)
{
	pg_atomic_uint64 *block;
	uint64		words[FILTER_BLOCK_WORDS];
	uint64		result = 0;
	FilterTagBase base;

	if (ref == 0 || !(ref & FILTER_REF_TAGGED) || !gunique_key_filters ||
		pg_atomic_read_u32(&filter_at(ref)->h.tags_lost) != 0)
		return candidates;
	block = filter_tag_block(ref, fkey->hash);
	for (int i = 0; i < FILTER_BLOCK_WORDS; i++)
		words[i] = pg_atomic_read_u64(&block[i]);
	filter_tag_base(fkey->hash, &base);
	while (candidates != 0)
	{
		int			tag = pg_rightmost_one_pos64(candidates);
		bool		all = true;

		candidates &= candidates - 1;
		for (int i = 0; i < GUNIQUE_FILTER_TAG_BITS && all; i++)
		{
			int			pos = (base.a[i] + tag * base.b[i]) & 511;

			all = (words[pos >> 6] >> (pos & 63)) & 1;
		}
		if (all)
			result |= UINT64CONST(1) << tag;
	}
	return result;
}

/* Does the filter have a tag part that tells leaves apart? */
bool
gunique_filter_tagged(uint64 ref)
{
	return ref != 0 && (ref & FILTER_REF_TAGGED) != 0 &&
		pg_atomic_read_u32(&filter_at(ref)->h.tags_lost) == 0;
}

/*
 * Start loading the key's block of filter "ref" into the CPU's cache, a
 * few leaves before it is checked, so that the checks of many leaves wait
 * for memory together rather than one after another.
 */
void
gunique_filter_prefetch(uint64 ref, GuniqueFilterKey *fkey)
{
	if (ref != 0)
		gunique_prefetch(filter_block(ref, fkey->hash));
}

/*
 * Take a free block of at least "sizeclass" for a filter, under the arena's
 * lock: one of that class, else from the unused end, else one of a bigger
 * class (its excess unused until it is freed), so that the memory of freed
 * filters serves smaller ones.  Its offset, or 0; *blockclass its class.
 */
static uint64
filter_take_block(int sizeclass, int *blockclass)
{
	uint64		bytes = UINT64CONST(1) << sizeclass;
	uint64		offset = 0;

	*blockclass = sizeclass;
	if (arena->freelist[sizeclass] == 0 &&
		arena->size - arena->used >= sizeof(FilterHeader) + bytes)
	{
		offset = arena->used;
		arena->used += sizeof(FilterHeader) + bytes;
		return offset;
	}
	for (int c = sizeclass; c <= FILTER_MAX_CLASS && offset == 0; c++)
	{
		if (arena->freelist[c] == 0)
			continue;
		offset = arena->freelist[c];
		arena->freelist[c] = filter_at(offset)->h.nextfree;
		*blockclass = c;
	}
	return offset;
}

/*
 * A zeroed filter for about "keys" keys (its reference), or 0 if no room;
 * "tagged" doubles it for a tag part.
 */
uint64
gunique_filter_alloc(uint64 keys, bool tagged)
{
	int			sizeclass = FILTER_MIN_CLASS;
	int			bloomclass;
	int			blockclass;
	uint64		bytes;
	uint64		offset;
	FilterHeader *f;

	while (sizeclass < FILTER_MAX_CLASS - 1 &&
		   (UINT64CONST(1) << sizeclass) * 8 < keys * FILTER_BITS_PER_KEY)
		sizeclass++;
	bloomclass = sizeclass;
	if (tagged)
		sizeclass++;
	bytes = UINT64CONST(1) << sizeclass;

	LWLockAcquire(arena_lock, LW_EXCLUSIVE);
	offset = filter_take_block(sizeclass, &blockclass);
	if (offset != 0)
		arena->nlive++;
	LWLockRelease(arena_lock);
	if (offset == 0)
		return 0;

	f = filter_at(offset);
	memset(f + 1, 0, bytes);
	pg_atomic_init_u64(&f->h.capacity,
					   (UINT64CONST(1) << bloomclass) * 8 / FILTER_BITS_PER_KEY);
	pg_atomic_init_u64(&f->h.nkeys, 0);
	pg_atomic_init_u32(&f->h.tags_lost, 0);
	f->h.nextfree = 0;
	f->h.sizeclass = sizeclass;
	f->h.blockclass = blockclass;
	pg_write_barrier();
	/* bloom blocks of 64 bytes: 2^(bloomclass - 6) of them */
	return offset | (bloomclass - 6) | (tagged ? FILTER_REF_TAGGED : 0);
}

/*
 * Give a filter's block back.  Free blocks are never merged, so the last
 * filter to go takes the whole arena back to its unused state: after a
 * table's indexes are all dropped or rebuilt, blocks of any size can be
 * carved again.
 */
void
gunique_filter_free(uint64 ref)
{
	FilterHeader *f = filter_at(ref);

	LWLockAcquire(arena_lock, LW_EXCLUSIVE);
	f->h.nextfree = arena->freelist[f->h.blockclass];
	arena->freelist[f->h.blockclass] =
		ref & ~(FILTER_REF_LOG2_MASK | FILTER_REF_TAGGED);
	Assert(arena->nlive > 0);
	if (--arena->nlive == 0)
	{
		arena->used = 64;
		memset(arena->freelist, 0, sizeof(arena->freelist));
	}
	LWLockRelease(arena_lock);
}


/* Could filters be made at all? */
bool
gunique_filter_arena_ready(void)
{
	return arena != NULL;
}

/* About how many keys the filter holds. */
uint64
gunique_filter_count(uint64 ref)
{
	return pg_atomic_read_u64(&filter_at(ref)->h.nkeys);
}

/* Count "n" keys set without counting (gunique_filter_set's "count"). */
void
gunique_filter_add_count(uint64 ref, uint64 n)
{
	pg_atomic_fetch_add_u64(&filter_at(ref)->h.nkeys, n);
}

/*
 * Let the filter take keys up to "capacity" before gunique_filter_set says
 * it is full again: for a filter that could not be replaced for want of
 * room, which then fills up with more false positives.
 */
void
gunique_filter_set_capacity(uint64 ref, uint64 capacity)
{
	pg_atomic_write_u64(&filter_at(ref)->h.capacity, capacity);
}

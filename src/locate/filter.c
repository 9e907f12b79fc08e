/*-------------------------------------------------------------------------
 *
 * filter.c
 *	  Key filters: blocked bloom filters in dynamic shared memory.
 *
 * A key filter answers "surely not here" for almost every key its owner
 * does not hold, for the price of one cache line: a key sets one bit in
 * each of the eight words of one 64-byte block, chosen by the key's 64-bit
 * hash (keymap.c).  In a large filter the hash picks a 4 kB page first,
 * and keys close in order share pages (filter_block).  This file knows
 * filters only by their reference; what a filter stands for, when it is
 * built, grown or dropped, and why a probe may trust it, is summary.c's
 * (src/README, I6).
 *
 * A group's filter is tagged: each bloom block is followed by a tag block
 * of the same size, where a key sets GUNIQUE_FILTER_TAG_BITS bits chosen
 * by the key and by the tag (0 to GUNIQUE_FILTER_TAGS - 1) of the leaf
 * that holds it, and has a subtag block, where the key sets as many bits
 * chosen by the key and by the leaf's subtag (another 0 to
 * GUNIQUE_FILTER_TAGS - 1): the three blocks side by side.  A key the
 * bloom part cannot rule out is then checked against each tag in the next
 * cache line, and against the subtags of the leaves of the tags it may
 * have in the third; only the leaves whose tag and subtag it may have are
 * looked at (summary.c gives each leaf both).  With 512 leaves, about 8
 * share a leaf's tag, and each of those shares its subtag 1 time in 64.
 * Every setter names them: a tagged filter set without them stops ruling
 * tags out.
 *
 * Filters live in a dynamic shared memory area (utils/dsa.h) that grows
 * as filters are made, up to gunique.filter_memory (by default a sixteenth
 * of the machine's memory).  The area starts in a small part of the main
 * shared memory segment, made at server start; more segments are created
 * as needed.  Creating a segment can fail with an error (a full /dev/shm,
 * for one), so a filter is allocated in a subtransaction of its own, and
 * a failure, or no room under the limit, leaves the caller without a new
 * filter, counted and logged (gunique_filter_memory()).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <unistd.h>

#include "access/xact.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/dsa.h"
#include "utils/memutils.h"
#include "utils/resowner.h"
#include "utils/timestamp.h"

#include "compat.h"
#include "locate/filter.h"
#include "locate/keymap.h"

#define FILTER_BLOCK_WORDS	GUNIQUE_FILTER_BLOCK_WORDS	/* a key's bits */
#define FILTER_BITS_PER_KEY 12

/*
 * The count of keys is sampled: one key in 16 (by four bits of the low
 * half of its hash, which keys close in order do not share) adds 16, so
 * that most inserts do not write the shared counter.
 */
#define FILTER_SAMPLED(hash)	((((hash) >> 16) & 15) == 0)

/* A page of blocks (or of 21 triples, in a tagged filter): 4 kB. */
#define FILTER_PAGE_BYTES	4096
#define FILTER_PAGE_BLOCKS	(FILTER_PAGE_BYTES / 64)

typedef union FilterHeader
{
	struct
	{
		pg_atomic_uint64 capacity;	/* keys it holds at its designed false
									 * positive rate */
		pg_atomic_uint64 nkeys; /* keys added, estimated */
		pg_atomic_uint32 tags_lost; /* tagged, but set without a tag */
		dsa_pointer allocated;	/* what dsa_allocate gave, to free */
		uint64		bytes;		/* bytes taken from the area */
	}			h;
	char		pad[64];		/* keeps the bits cache-line aligned */
} FilterHeader;

/*
 * The part of the main shared memory segment that gunique's filters own:
 * counters under filter_lock, then the area's first segment.
 */
typedef struct FilterArena
{
	int			tranche_id;		/* of the area's own lock */
	uint64		bytes;			/* taken by live filters */
	uint64		nlive;			/* filters allocated and not freed */
	uint64		refused;		/* filters not made: no room, or an error */
	TimestampTz refused_logged; /* when a refusal was last logged */
	size_t		limit;			/* the area's size limit, last set */
	bool		frozen;			/* being saved: no new filter (persist.c) */
} FilterArena;

/* The area's first segment, in the main shared memory segment. */
#define FILTER_INPLACE_SIZE		(256 * 1024)
/* A refusal is logged at most this often (ms). */
#define FILTER_REFUSED_LOG_MS	60000

int			gunique_filter_memory = -1; /* kB; -1: by the machine's memory */
bool		gunique_key_filters = true;

static FilterArena *arena = NULL;
static void *arena_place = NULL;	/* the area's in-place start */
static LWLock *filter_lock = NULL;
static dsa_area *filter_area = NULL;	/* this backend's attachment */
static dsa_area *startup_area = NULL;	/* the postmaster's, while it loads */
static uint64 inplace_extra = 0;	/* room for the filters it loads */

/* The area's first segment: its own size, and the saved filters' room. */
static size_t filter_memory_limit(void);

static Size
filter_inplace_size(void)
{
	return add_size(FILTER_INPLACE_SIZE, inplace_extra);
}

static Size
filter_shmem_size(void)
{
	return add_size(MAXALIGN(sizeof(FilterArena)) + 64, filter_inplace_size());
}

/*
 * Before shared memory is sized (persist.c, in the postmaster): the bytes
 * of the filters it will load at start, which the area's first segment
 * then has room for.  The same every time shared memory is made again.
 */
void
gunique_filter_set_inplace_extra(uint64 bytes)
{
	/* never more than gunique.filter_memory allows all filters */
	if (bytes <= filter_memory_limit())
		inplace_extra = bytes;
}

void
gunique_filter_shmem_request(void)
{
	RequestAddinShmemSpace(filter_shmem_size());
	RequestNamedLWLockTranche("gunique filter memory", 1);
}

/*
 * Make the area at server start (in the postmaster), or find it.  The
 * postmaster's own reference keeps the area, and the segments it grows,
 * alive until shared memory is reinitialized (a restart, or a crash).
 */
void
gunique_filter_shmem_startup(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	arena = ShmemInitStruct("gunique filters", filter_shmem_size(), &found);
	arena_place = (void *) TYPEALIGN(64, (char *) arena +
									 MAXALIGN(sizeof(FilterArena)));
	if (!found)
	{
		memset(arena, 0, sizeof(FilterArena));
		arena->tranche_id = LWLockNewTrancheId();
		startup_area = dsa_create_in_place(arena_place, filter_inplace_size(),
										   arena->tranche_id, NULL);
		/* while the postmaster loads filters, no segment may be made */
		dsa_set_size_limit(startup_area, filter_inplace_size());
	}
	filter_lock = &(GetNamedLWLockTranche("gunique filter memory"))->lock;
	LWLockRelease(AddinShmemInitLock);
}

/*
 * The limit on the area's size, in bytes: gunique.filter_memory, or by
 * default a sixteenth of the machine's physical memory (at least 64 MB).
 */
static size_t
filter_memory_limit(void)
{
	long		pages;
	long		pagesize;
	uint64		bytes = UINT64CONST(256) * 1024 * 1024;

	/* the area's first segment is there whatever the limit */
	if (gunique_filter_memory >= 0)
		return Max((size_t) gunique_filter_memory * 1024, filter_inplace_size());
#if defined(_SC_PHYS_PAGES) && defined(_SC_PAGESIZE)
	pages = sysconf(_SC_PHYS_PAGES);
	pagesize = sysconf(_SC_PAGESIZE);
	if (pages > 0 && pagesize > 0)
		bytes = (uint64) pages * (uint64) pagesize / 16;
#endif
	bytes = Max(bytes, UINT64CONST(64) * 1024 * 1024);
	return (size_t) Max(bytes, filter_inplace_size());
}

/*
 * This backend's attachment to the area, made on first use, for the rest
 * of the session: it belongs to no resource owner, and its segments stay
 * mapped.
 */
static inline dsa_area *
filter_area_get(void)
{
	if (likely(filter_area != NULL))
		return filter_area;
	{
		MemoryContext oldcxt = MemoryContextSwitchTo(TopMemoryContext);
		ResourceOwner oldowner = CurrentResourceOwner;

		LWLockRegisterTranche(arena->tranche_id, "gunique filter area");
		CurrentResourceOwner = NULL;
		filter_area = dsa_attach_in_place(arena_place, NULL);
		dsa_pin_mapping(filter_area);
		CurrentResourceOwner = oldowner;
		on_shmem_exit(dsa_on_shmem_exit_release_in_place,
					  PointerGetDatum(arena_place));
		MemoryContextSwitchTo(oldcxt);
	}
	return filter_area;
}

/*
 * Filters are named by a reference: the address of their header in the
 * area (a dsa_pointer, a multiple of 64, below 2^50), with their number of
 * blocks as m << e (m, 8 bits, in bits 50 to 57, and e in the low six
 * bits), so that a probe finds a key's block without reading the header,
 * and FILTER_REF_TAGGED if the filter has tag and subtag parts after its
 * bloom part.
 * A filter so has any number of blocks within 1% (not only powers of
 * two), and a key's block (or page of blocks) is picked by multiplying
 * half of its hash by that number (filter_block).
 */
#define FILTER_REF_EXP_MASK		UINT64CONST(63)
#define FILTER_REF_MANT_SHIFT	50
#define FILTER_REF_MANT_MASK	(UINT64CONST(255) << FILTER_REF_MANT_SHIFT)
#define FILTER_REF_TAGGED		(UINT64CONST(1) << 62)
#define FILTER_REF_SHAPE		(FILTER_REF_EXP_MASK | FILTER_REF_MANT_MASK | \
								 FILTER_REF_TAGGED)
#define FILTER_MIN_BLOCKS		16	/* 1 kB of bits: 682 keys */
#define FILTER_MAX_BLOCKS		(UINT64CONST(1) << 31)	/* 128 GB */

static inline uint64
filter_nblocks(uint64 ref)
{
	return ((ref & FILTER_REF_MANT_MASK) >> FILTER_REF_MANT_SHIFT) <<
		(ref & FILTER_REF_EXP_MASK);
}

/* The shape of a filter of at least "nblocks" blocks. */
static uint64
filter_shape(uint64 nblocks)
{
	int			e = 0;

	while ((nblocks + (UINT64CONST(1) << e) - 1) >> e > 255)
		e++;
	return (((nblocks + (UINT64CONST(1) << e) - 1) >> e) <<
			FILTER_REF_MANT_SHIFT) | (uint64) e;
}

static inline FilterHeader *
filter_at(uint64 ref)
{
	Assert(ref != 0);			/* 0 names no filter */
	return (FilterHeader *)
		dsa_get_address(filter_area_get(),
						(dsa_pointer) (ref & ~FILTER_REF_SHAPE));
}

/*
 * Is a filter of "nblocks" blocks made of whole pages of them?  Every
 * filter of more than 8,160 blocks (some 350,000 keys) is, since
 * filter_shape keeps eight significant bits of a count that large, and
 * some smaller ones.
 */
static inline bool
filter_paged(uint64 nblocks)
{
	return nblocks % FILTER_PAGE_BLOCKS == 0;
}

/*
 * The key's bloom block.  In a tagged filter, blocks come in triples, bloom,
 * tag and subtag, side by side, so that a probe that reads all three meets
 * one page of memory (always in a paged filter; in a smaller one, but for
 * one triple in 21 or so that straddles two).
 *
 * In a paged filter, the high half of the hash picks a page of blocks (64
 * blocks, or 21 triples: 4 kB, the last 64 bytes of a page of triples
 * unused) and the low half a block in it.  Keys that are close in order
 * share the high half of their hash (keymap.c), so a run of them sets and
 * reads bits in one page: a backend that has not touched the filter before
 * (a new session, or any after a restart) then maps a page per run of
 * keys, not one per key.  The low half spreads a run's keys over its
 * page's blocks.  Other filters place a key by the low half alone: by the
 * high half, a run's keys would all go to one block.
 */
#define FILTER_PAGE_TRIPLES		(FILTER_PAGE_BYTES / (3 * 64))

/* The pages of a paged filter of "nblocks" blocks, tagged or not. */
static inline uint64
filter_npages(uint64 nblocks, bool tagged)
{
	return tagged ?
		(nblocks + FILTER_PAGE_TRIPLES - 1) / FILTER_PAGE_TRIPLES :
		nblocks / FILTER_PAGE_BLOCKS;
}

static inline pg_atomic_uint64 *
filter_block(uint64 ref, uint64 hash)
{
	pg_atomic_uint64 *bits = (pg_atomic_uint64 *) (filter_at(ref) + 1);
	bool		tagged = (ref & FILTER_REF_TAGGED) != 0;
	int			stride = FILTER_BLOCK_WORDS * (tagged ? 3 : 1);
	uint64		nblocks = filter_nblocks(ref);

	if (filter_paged(nblocks))
	{
		int			per_page = tagged ? FILTER_PAGE_TRIPLES :
			FILTER_PAGE_BLOCKS;
		uint64		npages = filter_npages(nblocks, tagged);
		uint64		page = ((hash >> 32) * npages) >> 32;

		return bits + page * (FILTER_PAGE_BYTES / sizeof(uint64)) +
			((((uint64) (uint32) hash) * per_page) >> 32) * stride;
	}
	return bits + ((((uint64) (uint32) hash) * nblocks) >> 32) * stride;
}

/* The tag block of the key's triple, in a tagged filter. */
static inline pg_atomic_uint64 *
filter_tag_block(uint64 ref, uint64 hash)
{
	Assert(ref & FILTER_REF_TAGGED);
	return filter_block(ref, hash) + FILTER_BLOCK_WORDS;
}

/* The subtag block of the key's triple, in a tagged filter. */
static inline pg_atomic_uint64 *
filter_subtag_block(uint64 ref, uint64 hash)
{
	Assert(ref & FILTER_REF_TAGGED);
	return filter_block(ref, hash) + 2 * FILTER_BLOCK_WORDS;
}

/*
 * Where a filter's header goes in memory allocated at "dp": the first
 * place, 64-byte aligned, after which the bits start 128-byte aligned, so
 * that an untagged filter's blocks start on the pairs of cache lines that
 * CPUs often fetch together; a paged filter's bits start 4 kB aligned, so
 * that its pages of blocks are the system's pages where the area's
 * segments are page-aligned.  The allocation has that alignment to spare
 * (filter_bytes).
 */
static inline Size
filter_align(uint64 nblocks)
{
	return filter_paged(nblocks) ? FILTER_PAGE_BYTES : 128;
}

static inline dsa_pointer
filter_place(dsa_pointer dp, uint64 nblocks)
{
	return TYPEALIGN(filter_align(nblocks), dp + sizeof(FilterHeader)) -
		sizeof(FilterHeader);
}

/*
 * The bytes of a filter's bits: bloom blocks, and as many tag blocks and
 * subtag blocks; whole pages in a paged filter.
 */
static inline uint64
filter_bits_bytes(uint64 nblocks, bool tagged)
{
	if (filter_paged(nblocks))
		return filter_npages(nblocks, tagged) * FILTER_PAGE_BYTES;
	return nblocks * 64 * (tagged ? 3 : 1);
}

/* What a filter of "nblocks" blocks allocates. */
static inline uint64
filter_bytes(uint64 nblocks, bool tagged)
{
	return filter_bits_bytes(nblocks, tagged) + sizeof(FilterHeader) +
		filter_align(nblocks);
}

/*
 * The bits a key and a tag set in the key's tag block: one in each of
 * GUNIQUE_FILTER_TAG_BITS words of the block's eight, chosen by the key's
 * hash, where tag t sets bit (t + r) mod 64, with a rotation r chosen by the
 * key's hash for each of them.  Two tags of one key never share a bit in a
 * word, and a probe reads which of all 64 tags the key may have with one
 * rotation and one AND per word (filter_tags_in).  A subtag sets its bits
 * in the subtag block the same way, from other bits of the key's hash
 * ("seed").
 */
#define FILTER_TAG_SEED		UINT64CONST(0xc2b2ae3d27d4eb4f)
#define FILTER_SUBTAG_SEED	UINT64CONST(0x165667b19e3779f9)

typedef struct FilterTagBase
{
	int			word[GUNIQUE_FILTER_TAG_BITS];
	int			rot[GUNIQUE_FILTER_TAG_BITS];
} FilterTagBase;

static inline void
filter_tag_base(uint64 hash, uint64 seed, FilterTagBase *base)
{
	uint64		h = gunique_mix64(hash ^ seed);

	StaticAssertStmt(9 * GUNIQUE_FILTER_TAG_BITS <= 64,
					 "a key's tag bits are taken from one 64-bit hash");
	for (int i = 0; i < GUNIQUE_FILTER_TAG_BITS; i++)
	{
		base->word[i] = (int) ((h >> (9 * i)) & 7);
		base->rot[i] = (int) ((h >> (9 * i + 3)) & 63);
	}
}

/* "word" rotated right by "n" (0 to 63) bits. */
static inline uint64
filter_rotate_right(uint64 word, int n)
{
	return (word >> n) | (word << ((64 - n) & 63));
}

/* Set the bits of one tag (or subtag) "t" in "block". */
static void
filter_set_tag_bits(pg_atomic_uint64 *block, uint64 hash, uint64 seed, int t,
					bool alone)
{
	FilterTagBase base;

	filter_tag_base(hash, seed, &base);
	for (int i = 0; i < GUNIQUE_FILTER_TAG_BITS; i++)
	{
		pg_atomic_uint64 *word = &block[base.word[i]];
		uint64		bit = UINT64CONST(1) << ((t + base.rot[i]) & 63);

		if (alone)
			*(uint64 *) word |= bit;
		else if ((pg_atomic_read_u64(word) & bit) == 0)
			pg_atomic_fetch_or_u64(word, bit);
	}
}

/*
 * Set the key's bits for "tag" (GUNIQUE_FILTER_TAG_OF and _SUBTAG_OF tell
 * its two parts), or, for a tag out of range, stop ruling tags out.
 */
static void
filter_set_tag(uint64 ref, uint64 hash, int tag, bool alone)
{
	if (tag < 0 || tag >= GUNIQUE_FILTER_TAGS * GUNIQUE_FILTER_TAGS)
	{
		pg_atomic_write_u32(&filter_at(ref)->h.tags_lost, 1);
		return;
	}
	filter_set_tag_bits(filter_tag_block(ref, hash), hash, FILTER_TAG_SEED,
						GUNIQUE_FILTER_TAG_OF(tag), alone);
	filter_set_tag_bits(filter_subtag_block(ref, hash), hash,
						FILTER_SUBTAG_SEED, GUNIQUE_FILTER_SUBTAG_OF(tag),
						alone);
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
	bool		added = false;

	filter_masks(hash, masks);
	for (int i = 0; i < FILTER_BLOCK_WORDS; i++)
		if ((pg_atomic_read_u64(&block[i]) & masks[i]) == 0)
		{
			pg_atomic_fetch_or_u64(&block[i], masks[i]);
			added = true;
		}
	if (ref & FILTER_REF_TAGGED)
		filter_set_tag(ref, hash, tag, false);

	/*
	 * A key whose bits were all set already (one that comes back, mostly) is
	 * not counted again: the count says when the filter is full.
	 */
	if (!count || !added || !FILTER_SAMPLED(hash))
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
 * Of the tags (or subtags) in "candidates", bit t for t, those whose bits
 * are all set in "block": each of the key's words, rotated back by its
 * rotation, has bit t where tag t's bit in it is set.  No branch on the
 * filter's bits and no loop over tags: a key that comes back, at hundreds
 * of partitions, once spent more time testing tag after tag than in
 * reading its filters.
 */
static uint64
filter_tags_in(pg_atomic_uint64 *block, uint64 hash, uint64 seed,
			   uint64 candidates)
{
	uint64		standing = candidates;
	FilterTagBase base;

	filter_tag_base(hash, seed, &base);
	for (int i = 0; i < GUNIQUE_FILTER_TAG_BITS; i++)
	{
		uint64		word = pg_atomic_read_u64(&block[base.word[i]]);

		standing &= filter_rotate_right(word, base.rot[i]);
	}
	return standing;
}

/*
 * Of the tags in "candidates" (bit t for tag t), those the key may have in
 * filter "ref": all of them unless the filter is tagged and every setter
 * named a tag.
 */
uint64
gunique_filter_tags(uint64 ref, GuniqueFilterKey *fkey, uint64 candidates)
{
	if (!gunique_filter_tagged(ref) || !gunique_key_filters)
		return candidates;
	return filter_tags_in(filter_tag_block(ref, fkey->hash), fkey->hash,
						  FILTER_TAG_SEED, candidates);
}

/*
 * Of the subtags in "candidates" (bit s for subtag s), those the key may
 * have in filter "ref", as for gunique_filter_tags.  A leaf of a tag the
 * key may have can hold the key only if its subtag is one of them.
 */
uint64
gunique_filter_subtags(uint64 ref, GuniqueFilterKey *fkey, uint64 candidates)
{
	if (!gunique_filter_tagged(ref) || !gunique_key_filters)
		return candidates;
	return filter_tags_in(filter_subtag_block(ref, fkey->hash), fkey->hash,
						  FILTER_SUBTAG_SEED, candidates);
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
 * for memory together rather than one after another; in a tagged filter,
 * its tag and subtag blocks too, which a key the bloom block cannot rule
 * out reads next.
 */
void
gunique_filter_prefetch(uint64 ref, GuniqueFilterKey *fkey)
{
	pg_atomic_uint64 *block;

	if (ref == 0)
		return;
	block = filter_block(ref, fkey->hash);
	gunique_prefetch(block);
	if (ref & FILTER_REF_TAGGED)
	{
		gunique_prefetch(block + FILTER_BLOCK_WORDS);
		gunique_prefetch(block + 2 * FILTER_BLOCK_WORDS);
	}
}

/*
 * Log a filter refused, at most once a minute, and count it.  A refusal is
 * not an error: the leaves without a filter are searched, as they were.
 */
static void
filter_refused(uint64 bytes, const char *reason)
{
	TimestampTz now = GetCurrentTimestamp();
	bool		log;
	uint64		used;
	uint64		refused;

	LWLockAcquire(filter_lock, LW_EXCLUSIVE);
	refused = ++arena->refused;
	used = arena->bytes;
	log = arena->refused_logged == 0 ||
		TimestampDifferenceExceeds(arena->refused_logged, now,
								   FILTER_REFUSED_LOG_MS);
	if (log)
		arena->refused_logged = now;
	LWLockRelease(filter_lock);
	if (!log)
		return;
	if (reason != NULL)
		ereport(LOG,
				(errmsg("gunique could not make a key filter of %llu bytes: %s",
						(unsigned long long) bytes, reason),
				 errdetail_plural("Inserts search the btrees of partitions without a filter; %llu filter has been refused since the server started.",
								  "Inserts search the btrees of partitions without a filter; %llu filters have been refused since the server started.",
								  refused, (unsigned long long) refused)));
	else
		ereport(LOG,
				(errmsg("gunique could not make a key filter of %llu bytes: key filters use %llu bytes of the %llu that gunique.filter_memory allows",
						(unsigned long long) bytes, (unsigned long long) used,
						(unsigned long long) filter_memory_limit()),
				 errdetail_plural("Inserts search the btrees of partitions without a filter; %llu filter has been refused since the server started.",
								  "Inserts search the btrees of partitions without a filter; %llu filters have been refused since the server started.",
								  refused, (unsigned long long) refused),
				 errhint("Increase gunique.filter_memory: key filters take from 2 to 9 bytes for each key of a table with a gunique index.")));
}

/*
 * Allocate "bytes" of the area, zeroed; InvalidDsaPointer if the limit
 * leaves no room, or if growing the area failed.  Growing creates a
 * dynamic shared memory segment, which raises an error when the system
 * cannot make one: it runs in a subtransaction, so that the error costs a
 * filter and not the caller's statement.  The caller holds no LWLock (the
 * subtransaction's abort would release them all).
 */
static dsa_pointer
filter_dsa_allocate(Size bytes)
{
	MemoryContext oldcxt = CurrentMemoryContext;
	ResourceOwner oldowner = CurrentResourceOwner;
	dsa_area   *area = filter_area_get();
	size_t		limit = filter_memory_limit();
	dsa_pointer dp = InvalidDsaPointer;

	if (!IsTransactionState() || IsInParallelMode())
		return InvalidDsaPointer;
	LWLockAcquire(filter_lock, LW_EXCLUSIVE);
	/* being saved (gunique_filter_freeze): no new filter */
	if (arena->frozen)
	{
		LWLockRelease(filter_lock);
		return InvalidDsaPointer;
	}
	if (arena->limit != limit)
	{
		dsa_set_size_limit(area, limit);
		arena->limit = limit;
	}
	LWLockRelease(filter_lock);

	BeginInternalSubTransaction(NULL);
	MemoryContextSwitchTo(oldcxt);
	PG_TRY();
	{
		dp = dsa_allocate_extended(area, bytes, DSA_ALLOC_HUGE |
								   DSA_ALLOC_NO_OOM | DSA_ALLOC_ZERO);
		ReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
	}
	PG_CATCH();
	{
		ErrorData  *edata;

		MemoryContextSwitchTo(oldcxt);
		edata = CopyErrorData();
		FlushErrorState();
		RollbackAndReleaseCurrentSubTransaction();
		MemoryContextSwitchTo(oldcxt);
		CurrentResourceOwner = oldowner;
		if (edata->sqlerrcode == ERRCODE_QUERY_CANCELED)
		{
			/* a cancel comes back at the caller's next interrupt check */
			QueryCancelPending = true;
			InterruptPending = true;
		}
		else
			filter_refused(bytes, edata->message);
		FreeErrorData(edata);
		return InvalidDsaPointer;
	}
	PG_END_TRY();
	if (!DsaPointerIsValid(dp))
		filter_refused(bytes, NULL);
	return dp;
}

/*
 * A zeroed filter for about "keys" keys (its reference), or 0 if no room;
 * "tagged" triples it for the tag and subtag parts.
 */
uint64
gunique_filter_alloc(uint64 keys, bool tagged)
{
	uint64		nblocks;
	uint64		shape;
	uint64		bytes;
	dsa_pointer dp;
	dsa_pointer aligned;
	FilterHeader *f;

	if (!gunique_filter_arena_ready())
		return 0;
	/* FILTER_BITS_PER_KEY bits a key, 512 bits a block */
	nblocks = (keys * FILTER_BITS_PER_KEY + 511) / 512;
	nblocks = Min(Max(nblocks, FILTER_MIN_BLOCKS), FILTER_MAX_BLOCKS);
	shape = filter_shape(nblocks);
	nblocks = filter_nblocks(shape);
	/* the header and the bits (three times as many with tags), placed */
	bytes = filter_bytes(nblocks, tagged);

	dp = filter_dsa_allocate(bytes);
	if (!DsaPointerIsValid(dp))
		return 0;
	aligned = filter_place(dp, nblocks);
	f = (FilterHeader *) dsa_get_address(filter_area_get(), aligned);
	Assert(((uintptr_t) f & 63) == 0);
	Assert((aligned & FILTER_REF_SHAPE) == 0);
	pg_atomic_init_u64(&f->h.capacity, nblocks * 512 / FILTER_BITS_PER_KEY);
	pg_atomic_init_u64(&f->h.nkeys, 0);
	pg_atomic_init_u32(&f->h.tags_lost, 0);
	f->h.allocated = dp;
	f->h.bytes = bytes;
	LWLockAcquire(filter_lock, LW_EXCLUSIVE);
	arena->nlive++;
	arena->bytes += bytes;
	LWLockRelease(filter_lock);
	pg_write_barrier();
	return (uint64) aligned | shape | (tagged ? FILTER_REF_TAGGED : 0);
}

/* Give a filter's memory back to the area. */
void
gunique_filter_free(uint64 ref)
{
	FilterHeader *f = filter_at(ref);
	dsa_pointer dp = f->h.allocated;
	uint64		bytes = f->h.bytes;

	dsa_free(filter_area_get(), dp);
	LWLockAcquire(filter_lock, LW_EXCLUSIVE);
	Assert(arena->nlive > 0);
	arena->nlive--;
	arena->bytes -= bytes;
	LWLockRelease(filter_lock);
}

/*
 * At shutdown, before the filters are saved (persist.c): no filter is made
 * from now on, so that no build begins while they are copied.
 */
void
gunique_filter_freeze(void)
{
	LWLockAcquire(filter_lock, LW_EXCLUSIVE);
	arena->frozen = true;
	LWLockRelease(filter_lock);
}

/* The keeper starts (again): filters may be made. */
void
gunique_filter_thaw(void)
{
	LWLockAcquire(filter_lock, LW_EXCLUSIVE);
	arena->frozen = false;
	LWLockRelease(filter_lock);
}

/* Could filters be made at all? */
bool
gunique_filter_arena_ready(void)
{
	return arena != NULL && gunique_filter_memory != 0;
}

/* What gunique_filter_memory() shows. */
void
gunique_filter_memory_usage(GuniqueFilterMemory *usage)
{
	memset(usage, 0, sizeof(GuniqueFilterMemory));
	usage->limit = filter_memory_limit();
	if (arena == NULL)
		return;
	LWLockAcquire(filter_lock, LW_SHARED);
	usage->bytes = arena->bytes;
	usage->filters = arena->nlive;
	usage->refused = arena->refused;
	LWLockRelease(filter_lock);
}

/* About how many keys the filter holds. */
uint64
gunique_filter_count(uint64 ref)
{
	return pg_atomic_read_u64(&filter_at(ref)->h.nkeys);
}

/* Does the filter hold more keys than it was made for? */
bool
gunique_filter_full(uint64 ref)
{
	FilterHeader *f = filter_at(ref);

	return pg_atomic_read_u64(&f->h.nkeys) > pg_atomic_read_u64(&f->h.capacity);
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

/*
 * A filter to save (persist.c): its shape and counts in *saved, and its
 * bits, read in place.
 */
char *
gunique_filter_saved(uint64 ref, GuniqueFilterSaved *saved)
{
	FilterHeader *f = filter_at(ref);

	saved->shape = ref & FILTER_REF_SHAPE;
	saved->capacity = pg_atomic_read_u64(&f->h.capacity);
	saved->nkeys = pg_atomic_read_u64(&f->h.nkeys);
	saved->tags_lost = pg_atomic_read_u32(&f->h.tags_lost);
	saved->nbytes = filter_bits_bytes(filter_nblocks(ref),
									  (ref & FILTER_REF_TAGGED) != 0);
	return (char *) (f + 1);
}

/*
 * In the postmaster at start, before any other process exists: a filter of
 * the saved shape from the area's first segment (sized for the saved
 * filters: no segment is made), its bits to be copied into *bits, all of
 * them, by the caller (they are not zeroed first: that would touch every
 * page twice).  Returns its reference, or 0 if the shape is not one of a
 * filter's or there is no room.
 */
uint64
gunique_filter_load(const GuniqueFilterSaved *saved, char **bits)
{
	uint64		nblocks = filter_nblocks(saved->shape);
	bool		tagged = (saved->shape & FILTER_REF_TAGGED) != 0;
	uint64		bytes;
	dsa_pointer dp;
	dsa_pointer aligned;
	FilterHeader *f;

	Assert(!IsUnderPostmaster);
	if (startup_area == NULL || (saved->shape & ~FILTER_REF_SHAPE) != 0 ||
		nblocks < FILTER_MIN_BLOCKS || nblocks > FILTER_MAX_BLOCKS ||
		filter_shape(nblocks) != (saved->shape & ~FILTER_REF_TAGGED))
		return 0;
	if (filter_bits_bytes(nblocks, tagged) != saved->nbytes)
		return 0;
	bytes = filter_bytes(nblocks, tagged);
	dp = dsa_allocate_extended(startup_area, bytes, DSA_ALLOC_HUGE |
							   DSA_ALLOC_NO_OOM);
	if (!DsaPointerIsValid(dp))
		return 0;
	aligned = filter_place(dp, nblocks);
	f = (FilterHeader *) dsa_get_address(startup_area, aligned);
	pg_atomic_init_u64(&f->h.capacity, saved->capacity);
	pg_atomic_init_u64(&f->h.nkeys, saved->nkeys);
	pg_atomic_init_u32(&f->h.tags_lost, saved->tags_lost);
	f->h.allocated = dp;
	f->h.bytes = bytes;
	arena->nlive++;
	arena->bytes += bytes;
	*bits = (char *) (f + 1);
	return (uint64) aligned | saved->shape;
}

/*
 * In the postmaster at start: free a filter that gunique_filter_load made,
 * whose file proved not whole after all.
 */
void
gunique_filter_unload(uint64 ref)
{
	FilterHeader *f;

	Assert(!IsUnderPostmaster && startup_area != NULL);
	f = (FilterHeader *) dsa_get_address(startup_area,
										 (dsa_pointer) (ref & ~FILTER_REF_SHAPE));
	Assert(arena->nlive > 0);
	arena->nlive--;
	arena->bytes -= f->h.bytes;
	dsa_free(startup_area, f->h.allocated);
}

/* The postmaster has loaded what it could: the area may grow again. */
void
gunique_filter_load_done(void)
{
	if (startup_area == NULL)
		return;
	dsa_set_size_limit(startup_area, filter_memory_limit());
	arena->limit = 0;			/* set again at the next allocation */
	startup_area = NULL;
}

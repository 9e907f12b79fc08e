/*-------------------------------------------------------------------------
 *
 * filter.c
 *	  Key filters: a bloom filter of each leaf index's keys, in shared memory.
 *
 * Key-range summaries (summary.c) rule a partition out only when keys follow
 * the partitioning.  With random keys every range covers every key, and a
 * probe would search every other leaf's btree.  A key filter answers "surely
 * not here" for almost every key the leaf does not hold, for the price of
 * one cache line: each leaf whose key is summarized also gets a blocked
 * bloom filter (a key sets one bit in each word of one 64-byte block).  So does each
 * group of leaves that can share keys (probe.c), kept in the summary entry
 * of the group's top index: for a new key it rules every leaf out at once,
 * whatever the number of partitions.  What is said below of a leaf holds
 * for a group's filter and all the leaves of the group.
 *
 * A filter may hold keys the leaf no longer has, but while a probe can see
 * it, it holds every key in the leaf.  That holds because:
 *
 *	 - every insert sets the key's bits before nbtree inserts the key, in the
 *	   leaf's filter and in the one being built to replace it, if any, and a
 *	   probing insert does so under its key lock (keylock.c);
 *	 - a filter is built (first use, or a bigger one when the leaf outgrows
 *	   its filter) by publishing it as "next", then taking and releasing
 *	   every key lock: after that barrier every insert either sets its bits
 *	   in "next" too or has its entry in the btree.  Then every leaf page is
 *	   read left to right (btread.c), which sees every entry already there,
 *	   and only then is the new filter published for probes;
 *	 - probes read the filter only under a key lock, so the barrier taken
 *	   after publishing the new filter is the moment the old one can be
 *	   freed;
 *	 - inserts that do not probe (the leaf's group has no other leaf, or the
 *	   leaf is not a partition) set bits without the key lock.  Nobody
 *	   builds such a leaf's filter meanwhile: only probes of the leaf's group
 *	   want one, and the DDL that gives the leaf a group (ATTACH, a new
 *	   partition) waits for its writers first;
 *	 - whatever rebuilds the btree or drops the index resets the filter with
 *	   inserters and probers of the leaf locked out (summary.c), as does
 *	   the rollback of the (sub)transaction that rebuilt it; a group's
 *	   filter is never built by a transaction that has changed the tree
 *	   (probe.c), is dropped by the rollback of a CREATE INDEX or ATTACH
 *	   that read it whole, and is extended or dropped by ATTACH (merge.c);
 *	   see the README, invariant 6.  A filter taken away is
 *	   freed only after one more barrier: light probes (probescan.c) read
 *	   a group's filter without locking the leaf being rebuilt.
 *
 * Filters live in one arena of gunique.filter_memory bytes, carved into
 * power-of-two sizes with a free list per size.  When the arena has no room
 * a leaf keeps the filter it has (more false positives) or goes without one
 * (always searched).  Only one backend builds a leaf's filter at a time; a
 * backend that dies while building leaves the leaf with the filter it had
 * until the server restarts.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/itup.h"
#include "access/nbtree.h"
#include "catalog/pg_type.h"
#include "miscadmin.h"
#include "port/atomics.h"
#include "storage/bufmgr.h"
#include "storage/ipc.h"
#include "storage/lwlock.h"
#include "storage/shmem.h"
#include "utils/uuid.h"

#include "btread.h"
#include "compat.h"
#include "filter.h"
#include "keylock.h"

#define FILTER_BLOCK_WORDS	GUNIQUE_FILTER_BLOCK_WORDS	/* a key's bits */
#define FILTER_BITS_PER_KEY 12
#define FILTER_MIN_CLASS	10	/* 1 kB of bits: 682 keys */
#define FILTER_MAX_CLASS	40
#define FILTER_MIN_KEYS		1024
#define FILTER_KEYS_PER_PAGE 300	/* a guess for an index built of its
									 * size: small keys, pages 90% full */
#define FILTER_BUILD_COST	32	/* entries read by a build per btree search */

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
		uint64		nextfree;	/* on a free list, the next one there */
		int			sizeclass;	/* log2 of the bytes of bits */
	}			h;
	char		pad[64];		/* keeps the bits cache-line aligned */
} FilterHeader;

typedef struct FilterArena
{
	uint64		size;			/* bytes that filters may use */
	uint64		used;			/* bytes handed out, from the start */
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
 * six bits, so that a probe finds a key's block without reading the header.
 */
#define FILTER_REF_LOG2_MASK	UINT64CONST(63)

static inline FilterHeader *
filter_at(uint64 ref)
{
	return (FilterHeader *) (arena_base + (ref & ~FILTER_REF_LOG2_MASK));
}

static inline pg_atomic_uint64 *
filter_block(uint64 ref, uint64 hash)
{
	pg_atomic_uint64 *bits = (pg_atomic_uint64 *) (filter_at(ref) + 1);
	uint64		mask = (UINT64CONST(1) << (ref & FILTER_REF_LOG2_MASK)) - 1;

	return bits + (hash & mask) * FILTER_BLOCK_WORDS;
}

static inline uint64
filter_mix(uint64 h)
{
	h ^= h >> 33;
	h *= UINT64CONST(0xff51afd7ed558ccd);
	h ^= h >> 33;
	h *= UINT64CONST(0xc4ceb9fe1a85ec53);
	h ^= h >> 33;
	return h;
}

/*
 * Which bits of its block a key sets: one in each word (a split block bloom
 * filter), as one mask per word.  Each mask is worked out on its own, with
 * no word of the block written twice.
 */
static inline void
filter_masks(uint64 hash, uint64 *masks)
{
	uint64		h = filter_mix(hash ^ UINT64CONST(0x9e3779b97f4a7c15));

	for (int i = 0; i < FILTER_BLOCK_WORDS; i++)
		masks[i] = UINT64CONST(1) << ((h >> (6 * i)) & 63);
}

/*
 * The key's hash.  Keys of the summarized types are equal exactly when
 * their images are, so the hash of the image serves.
 */
uint64
gunique_filter_hash(GuniqueSummary *summary, Datum value)
{
	if (summary->typid == UUIDOID)
	{
		const unsigned char *b = DatumGetUUIDP(value)->data;
		uint64		w[2];

		memcpy(w, b, sizeof(w));
		return filter_mix(w[0]) ^ filter_mix(w[1] + UINT64CONST(0x632be59bd9b4e019));
	}
	return filter_mix(gunique_summary_key(summary, value));
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
 * Set the key's bits; with "count", also count the key (by sampling), and
 * return true if the filter now holds more keys than it was made for.
 */
static bool
filter_set(uint64 ref, uint64 hash, bool count)
{
	FilterHeader *f = filter_at(ref);
	pg_atomic_uint64 *block = filter_block(ref, hash);
	uint64		masks[FILTER_BLOCK_WORDS];

	filter_masks(hash, masks);
	for (int i = 0; i < FILTER_BLOCK_WORDS; i++)
		if ((pg_atomic_read_u64(&block[i]) & masks[i]) == 0)
			pg_atomic_fetch_or_u64(&block[i], masks[i]);
	if (!count || (hash >> FILTER_SAMPLE_SHIFT) != 0)
		return false;
	return pg_atomic_add_fetch_u64(&f->h.nkeys, 16) >
		pg_atomic_read_u64(&f->h.capacity);
}

/* Set the key's bits in a filter nobody else can be reading or writing. */
static void
filter_set_alone(uint64 ref, uint64 hash)
{
	uint64	   *block = (uint64 *) filter_block(ref, hash);
	uint64		masks[FILTER_BLOCK_WORDS];

	filter_masks(hash, masks);
	for (int i = 0; i < FILTER_BLOCK_WORDS; i++)
		block[i] |= masks[i];
}

/*
 * The leaf's filter as it is now (0 if none), read under a key lock.  A
 * probe may keep it while its group's count of changes stays the same: a
 * filter is replaced only after that count is bumped, and freed only after
 * a key lock barrier, so a reference read under one key lock serves under
 * the next as long as the count has not moved (probe.c).
 */
uint64
gunique_filter_ref(GuniqueSummary *summary)
{
	uint64		ref = pg_atomic_read_u64(&summary->filter);

	pg_read_barrier();
	return ref;
}

void
gunique_filter_key(GuniqueFilterKey *fkey, uint64 hash)
{
	fkey->hash = hash;
	fkey->masked = false;
}

/*
 * Is the key surely not in filter "ref" (from gunique_filter_ref)?  Read
 * under a key lock, or see gunique_filter_ref.  False without a filter.
 */
bool
gunique_filter_ref_excludes(uint64 ref, GuniqueFilterKey *fkey)
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
 * Start loading the key's block of filter "ref" into the CPU's cache, a
 * few leaves before it is checked, so that the checks of many leaves wait
 * for memory together rather than one after another.
 */
void
gunique_filter_ref_prefetch(uint64 ref, GuniqueFilterKey *fkey)
{
	if (ref != 0)
		gunique_prefetch(filter_block(ref, fkey->hash));
}

/* Could a filter be built for the leaf, and is none there or on its way? */
bool
gunique_filter_missing(GuniqueSummary *summary)
{
	return arena != NULL && gunique_key_filters &&
		pg_atomic_read_u64(&summary->filter) == 0 &&
		pg_atomic_read_u64(&summary->filter_next) == 0 &&
		pg_atomic_read_u32(&summary->filter_busy) == 0;
}

/*
 * How many searches of a leaf without a filter a build is worth: building
 * reads every entry, about as costly as FILTER_BUILD_COST entries per
 * search.  A leaf searched rarely (keys that mostly follow the partitioning)
 * is not worth it.
 */
static uint32
filter_threshold(Relation index)
{
	uint64		keys = gunique_filter_keys_estimate(index);

	return (uint32) Min(Max(keys / FILTER_BUILD_COST, 16), PG_UINT32_MAX);
}

/*
 * A probe searched the leaf's btree, which has no filter: is it time to
 * build one?  The count of such searches is shared, so that one-row
 * statements add up; "index" gives the threshold, once per statement.
 */
bool
gunique_filter_wanted(GuniqueSummary *summary, Relation index,
					  uint32 *threshold)
{
	if (!gunique_filter_missing(summary))
		return false;
	if (*threshold == 0)
		*threshold = filter_threshold(index);
	return pg_atomic_add_fetch_u32(&summary->filter_searches, 1) >= *threshold;
}

/*
 * A probe checked "n" leaves of a group that has no group filter: is it
 * time to build one?  Checking a leaf costs about what reading one entry
 * of a btree costs, so the filter is worth building once probes have
 * checked as many leaves as the group holds keys ("keys", found by the
 * caller once per statement).
 */
bool
gunique_filter_group_wanted(GuniqueSummary *summary, uint32 n, uint64 keys)
{
	uint32		threshold = (uint32) Min(Max(keys, 16), PG_UINT32_MAX / 2);

	return gunique_filter_missing(summary) &&
		pg_atomic_add_fetch_u32(&summary->filter_searches, n) >= threshold;
}

/* Did probes of this statement find the leaf worth a filter? */
bool
gunique_filter_due(GuniqueSummary *summary, uint32 threshold)
{
	return threshold != 0 && gunique_filter_missing(summary) &&
		pg_atomic_read_u32(&summary->filter_searches) >= threshold;
}

/*
 * Let the leaf's filters hold a key, before nbtree inserts it.  True if the
 * leaf has outgrown its filter and nobody is building a bigger one.
 */
bool
gunique_filter_add(GuniqueSummary *summary, uint64 hash)
{
	uint64		next = pg_atomic_read_u64(&summary->filter_next);
	uint64		current;
	bool		full = false;

	/* "next" first: a builder publishes the new filter before clearing it */
	pg_read_barrier();
	current = pg_atomic_read_u64(&summary->filter);
	if (next != 0)
		(void) filter_set(next, hash, true);
	if (current != 0 && current != next)
		full = filter_set(current, hash, true);
	return full && next == 0 &&
		pg_atomic_read_u32(&summary->filter_busy) == 0;
}

/* A zeroed filter for about "keys" keys (its reference), or 0 if no room. */
static uint64
filter_alloc(uint64 keys)
{
	int			sizeclass = FILTER_MIN_CLASS;
	uint64		bytes;
	uint64		offset = 0;
	FilterHeader *f;

	while (sizeclass < FILTER_MAX_CLASS &&
		   (UINT64CONST(1) << sizeclass) * 8 < keys * FILTER_BITS_PER_KEY)
		sizeclass++;
	bytes = UINT64CONST(1) << sizeclass;

	LWLockAcquire(arena_lock, LW_EXCLUSIVE);
	if (arena->freelist[sizeclass] != 0)
	{
		offset = arena->freelist[sizeclass];
		arena->freelist[sizeclass] = filter_at(offset)->h.nextfree;
	}
	else if (arena->size - arena->used >= sizeof(FilterHeader) + bytes)
	{
		offset = arena->used;
		arena->used += sizeof(FilterHeader) + bytes;
	}
	LWLockRelease(arena_lock);
	if (offset == 0)
		return 0;

	f = filter_at(offset);
	memset(f + 1, 0, bytes);
	pg_atomic_init_u64(&f->h.capacity, bytes * 8 / FILTER_BITS_PER_KEY);
	pg_atomic_init_u64(&f->h.nkeys, 0);
	f->h.nextfree = 0;
	f->h.sizeclass = sizeclass;
	pg_write_barrier();
	/* blocks of 64 bytes: 2^(sizeclass - 6) of them */
	return offset | (sizeclass - 6);
}

static void
filter_free(uint64 ref)
{
	FilterHeader *f = filter_at(ref);

	LWLockAcquire(arena_lock, LW_EXCLUSIVE);
	f->h.nextfree = arena->freelist[f->h.sizeclass];
	arena->freelist[f->h.sizeclass] = ref & ~FILTER_REF_LOG2_MASK;
	LWLockRelease(arena_lock);
}

/* About how many keys a leaf holds, judged by its size. */
uint64
gunique_filter_keys_estimate(Relation index)
{
	return (uint64) RelationGetNumberOfBlocks(index) * FILTER_KEYS_PER_PAGE;
}

/*
 * How many keys the new filter should be made for: what the leaves seem to
 * hold, or twice what the filter it replaces was given.
 */
static uint64
filter_keys_wanted(GuniqueSummary *summary, uint64 estimate)
{
	uint64		current = pg_atomic_read_u64(&summary->filter);
	uint64		keys = estimate;

	if (current != 0)
		keys = Max(keys, 2 * pg_atomic_read_u64(&filter_at(current)->h.nkeys));
	return Max(keys, FILTER_MIN_KEYS);
}

/*
 * Start filling a new filter for a leaf (or a group of leaves) of about
 * "estimate" keys, published as "next" so that inserts set their bits in it
 * too; the caller then takes the key lock barrier before it reads the
 * leaves.  With "exclusive", the caller's locks keep every inserter and
 * prober of the leaves out until it is done: no barrier is needed, and bits
 * are set without atomic operations.  False if another backend is building
 * one or the arena has no room.
 */
bool
gunique_filter_fill_begin(GuniqueFilterFill *fill, GuniqueSummary *summary,
						  uint64 estimate, bool exclusive)
{
	uint32		expected = 0;

	memset(fill, 0, sizeof(GuniqueFilterFill));
	if (arena == NULL || summary == NULL ||
		!pg_atomic_compare_exchange_u32(&summary->filter_busy, &expected, 1))
		return false;
	fill->summary = summary;
	fill->exclusive = exclusive;
	fill->old = pg_atomic_read_u64(&summary->filter);
	fill->next = filter_alloc(filter_keys_wanted(summary, estimate));
	if (fill->next == 0)
	{
		/* No room: keep the filter there is, and ask again at twice its load */
		if (fill->old != 0)
		{
			FilterHeader *f = filter_at(fill->old);

			pg_atomic_write_u64(&f->h.capacity,
								2 * pg_atomic_read_u64(&f->h.nkeys));
		}
		pg_atomic_write_u32(&summary->filter_busy, 0);
		return false;
	}
	fill->ref = fill->next;
	pg_atomic_write_u64(&summary->filter_next, fill->next);
	return true;
}

/* A key read from the leaf after the barrier. */
void
gunique_filter_fill_key(GuniqueFilterFill *fill, Datum value)
{
	uint64		hash = gunique_filter_hash(fill->summary, value);

	/* counted all at once when published */
	if (fill->exclusive)
		filter_set_alone(fill->ref, hash);
	else
		(void) filter_set(fill->ref, hash, false);
	fill->nkeys++;
}

/*
 * Every entry of the leaf has been read: let probes use the new filter.  The
 * caller then takes the barrier again and calls gunique_filter_fill_done.
 */
void
gunique_filter_fill_publish(GuniqueFilterFill *fill)
{
	GuniqueSummary *summary = fill->summary;

	pg_atomic_fetch_add_u64(&filter_at(fill->ref)->h.nkeys, fill->nkeys);
	if (fill->extending)
		return;
	/* probes that keep the old reference must see the change first */
	if (fill->group != NULL)
		pg_atomic_fetch_add_u64(&fill->group->changes, 1);
	/* publish before clearing "next": see gunique_filter_add */
	pg_write_barrier();
	pg_atomic_write_u64(&summary->filter, fill->next);
	pg_write_barrier();
	pg_atomic_write_u64(&summary->filter_next, 0);
	fill->next = 0;
}

/*
 * After the barrier that follows publishing (or an error): no probe or
 * insert reads the filter that was replaced, or the one that was being
 * filled if the fill failed.
 */
void
gunique_filter_fill_done(GuniqueFilterFill *fill)
{
	GuniqueSummary *summary = fill->summary;

	if (summary == NULL)
		return;
	if (fill->next != 0)
		filter_free(fill->next);
	else if (fill->old != 0 && !fill->extending)
		filter_free(fill->old);
	pg_atomic_write_u32(&summary->filter_searches, 0);
	pg_atomic_write_u32(&summary->filter_busy, 0);
	fill->summary = NULL;
}

/*
 * The fill failed: stop inserts from setting bits in its filter.  An
 * extension that failed may have set some of the keys' bits, which only
 * adds false positives.
 */
void
gunique_filter_fill_abort(GuniqueFilterFill *fill)
{
	if (fill->summary != NULL && fill->next != 0)
		pg_atomic_write_u64(&fill->summary->filter_next, 0);
}

/* Read every key in the leaf's btree into the filter being filled. */
static void
filter_fill_leaf(GuniqueFilterFill *fill, Relation index)
{
	TupleDesc	desc = RelationGetDescr(index);
	char	   *page = palloc(BLCKSZ);
	BufferAccessStrategy strategy = GetAccessStrategy(BAS_BULKREAD);
	Buffer		buf = gunique_bt_get_endpoint(index, 0, false);
	BlockNumber next = InvalidBlockNumber;

	while (BufferIsValid(buf) &&
		   gunique_bt_copy_leaf(index, buf, page, &next, strategy))
	{
		BTPageOpaque opaque = BTPageGetOpaque((Page) page);
		OffsetNumber maxoff = PageGetMaxOffsetNumber((Page) page);

		for (OffsetNumber off = P_FIRSTDATAKEY(opaque); off <= maxoff; off++)
		{
			ItemId		iid = PageGetItemId((Page) page, off);
			bool		isnull;
			Datum		value;

			if (ItemIdIsDead(iid))	/* LP_DEAD: dead to everyone */
				continue;
			value = index_getattr((IndexTuple) PageGetItem((Page) page, iid),
								  1, desc, &isnull);
			if (!isnull)
				gunique_filter_fill_key(fill, value);
		}
		CHECK_FOR_INTERRUPTS();
		buf = BlockNumberIsValid(next) ?
			gunique_bt_read_page(index, next, strategy) : InvalidBuffer;
	}
	FreeAccessStrategy(strategy);
	pfree(page);
}

/*
 * Give a leaf a filter, or a bigger one, from its btree; or a group of
 * leaves, from all of theirs.  The caller holds locks on the leaves that
 * keep their btrees from being rebuilt, and no key lock.  Does nothing if
 * another backend is building one or the arena has no room; returns
 * whether it built one.  A leaf's "group" (its group's entry, if the leaf
 * has one) counts the change.
 */
bool
gunique_filter_build(GuniqueSummary *summary, Relation *indexes, int n,
					 GuniqueSummary *group)
{
	GuniqueFilterFill fill;
	uint64		estimate = 0;

	for (int i = 0; i < n; i++)
		estimate += gunique_filter_keys_estimate(indexes[i]);
	if (!gunique_filter_fill_begin(&fill, summary, estimate, false))
		return false;
	fill.group = group;
	PG_TRY();
	{
		gunique_keylock_barrier();
		for (int i = 0; i < n; i++)
			filter_fill_leaf(&fill, indexes[i]);
	}
	PG_CATCH();
	{
		gunique_filter_fill_abort(&fill);
		gunique_keylock_barrier();
		gunique_filter_fill_done(&fill);
		PG_RE_THROW();
	}
	PG_END_TRY();
	gunique_filter_fill_publish(&fill);
	if (fill.old != 0)
		gunique_keylock_barrier();
	gunique_filter_fill_done(&fill);
	return true;
}

/*
 * Add keys to the filter there is, with every inserter and prober of the
 * leaves it covers locked out (ATTACH adds a partition to a group): false
 * if there is none.  Finish with gunique_filter_fill_publish and
 * gunique_filter_fill_done, or gunique_filter_fill_abort.
 */
bool
gunique_filter_extend_begin(GuniqueFilterFill *fill, GuniqueSummary *summary)
{
	memset(fill, 0, sizeof(GuniqueFilterFill));
	if (arena == NULL || summary == NULL ||
		pg_atomic_read_u64(&summary->filter) == 0 ||
		pg_atomic_read_u64(&summary->filter_next) != 0 ||
		pg_atomic_read_u32(&summary->filter_busy) != 0)
		return false;
	pg_atomic_write_u32(&summary->filter_busy, 1);
	fill->summary = summary;
	fill->exclusive = true;
	fill->extending = true;
	fill->ref = pg_atomic_read_u64(&summary->filter);
	return true;
}

void
gunique_filter_init(GuniqueSummary *summary)
{
	pg_atomic_init_u64(&summary->filter, 0);
	pg_atomic_init_u64(&summary->filter_next, 0);
	pg_atomic_init_u32(&summary->filter_busy, 0);
	pg_atomic_init_u32(&summary->filter_searches, 0);
}

/*
 * Take the leaf's filters away from it.  The caller has inserters and
 * probers of the leaf locked out, and frees them with
 * gunique_filter_free_detached once it holds no LWLock.
 */
void
gunique_filter_detach(GuniqueSummary *summary, GuniqueFilterRefs *refs)
{
	refs->current = pg_atomic_exchange_u64(&summary->filter, 0);
	refs->next = pg_atomic_exchange_u64(&summary->filter_next, 0);
	if (refs->next == refs->current)
		refs->next = 0;
	pg_atomic_write_u32(&summary->filter_searches, 0);
	pg_atomic_write_u32(&summary->filter_busy, 0);
}

/*
 * Free the filters taken away by gunique_filter_detach.  A group's filter
 * is read by light probes (probescan.c) under nothing but a key lock: their
 * locks keep the group's partitions from being dropped, not from being
 * rebuilt, so the rollback of a CREATE INDEX or ATTACH that read the group
 * whole can drop its filter while they read it.  Once every key
 * lock has been taken and released since the filter was taken away, nobody
 * can still be reading it.
 */
void
gunique_filter_free_detached(GuniqueFilterRefs *refs)
{
	if (refs->current == 0 && refs->next == 0)
		return;
	gunique_keylock_barrier();
	if (refs->current != 0)
		filter_free(refs->current);
	if (refs->next != 0)
		filter_free(refs->next);
}

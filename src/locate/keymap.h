/*-------------------------------------------------------------------------
 *
 * keymap.h
 *	  The 64-bit images of a key that key ranges and key filters keep.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_KEYMAP_H
#define GUNIQUE_KEYMAP_H

#include "fmgr.h"
#include "utils/rel.h"

/*
 * How an index's keys are mapped: to an order image (key ranges) when the
 * key's leading column is of a type whose ordering is an integer ordering,
 * and to a 64-bit hash (key filters) when every key column's equality has
 * a hash function consistent with it.
 */
typedef struct GuniqueKeyMap
{
	Oid			rangetype;		/* the leading column's type, or InvalidOid */
	bool		hashed;			/* keys have a hash */
	bool		nulls_not_distinct;
	int			nkeys;
	/*
	 * Per key column, in the memory gunique_keymap_make was given (a
	 * statement makes one map per partition it inserts into, so they are
	 * only as long as the key): whether the column has a 64-bit hash
	 * function, and that function and the column's collation, unless the
	 * key is one column with a rangetype.  The key is "hashed" if every
	 * column has one.
	 */
	bool	   *hashable;
	Oid		   *collation;
	FmgrInfo   *hashfn;
} GuniqueKeyMap;

/*
 * A key as ranges and filters see it, mapped once per row: "order" sorts
 * as the key does in the index, and equal keys have equal "hash".
 */
typedef struct GuniqueKeyImage
{
	bool		ordered;		/* "order" is set: the key has a range image */
	bool		hashed;			/* "hash" is set: filters can hold the key */
	uint64		order;
	uint64		hash;
	uint32		lockhash;		/* see gunique_keymap_lock_hash */
} GuniqueKeyImage;

extern bool gunique_keymap_hashable_type(Oid typid);
extern Oid	gunique_key_equality(Relation index, int i);
extern Oid	gunique_key_user_comparison(Relation index, int i);
extern void gunique_keymap_make(GuniqueKeyMap *map, Relation index,
								MemoryContext cxt);
extern void gunique_keymap_image(GuniqueKeyImage *image, GuniqueKeyMap *map,
								 Datum *values, bool *isnull);
extern uint64 gunique_keymap_order(Oid typid, Datum value);

/*
 * The 32 bits that a key's key lock, upsert lock and pending upsert count
 * are picked by (keylock.c, onconflict.c): of its hash, or for a key
 * without one, of the hashes of those of its columns that have a hash
 * function (0 if none has).  Equal keys share it, whoever maps them.
 */
static inline uint32
gunique_keymap_lock_hash(GuniqueKeyImage *image)
{
	return image->lockhash;
}

/* Does the map give keys any image at all? */
static inline bool
gunique_keymap_kept(GuniqueKeyMap *map)
{
	return OidIsValid(map->rangetype) || map->hashed;
}

/* A 64-bit finalizer that spreads every input bit over the output. */
static inline uint64
gunique_mix64(uint64 h)
{
	h ^= h >> 33;
	h *= UINT64CONST(0xff51afd7ed558ccd);
	h ^= h >> 33;
	h *= UINT64CONST(0xc4ceb9fe1a85ec53);
	h ^= h >> 33;
	return h;
}

#endif							/* GUNIQUE_KEYMAP_H */

/*-------------------------------------------------------------------------
 *
 * keymap.h
 *	  The 64-bit images of a key that key ranges and key filters keep.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_KEYMAP_H
#define GUNIQUE_KEYMAP_H

#include "utils/rel.h"

/*
 * A key as ranges and filters see it, mapped once per row: "order" sorts
 * as the key does in the index, and equal keys have equal "hash".
 */
typedef struct GuniqueKeyImage
{
	bool		mapped;			/* one non-NULL column of a mapped type */
	uint64		order;
	uint64		hash;
} GuniqueKeyImage;

extern Oid	gunique_keymap_type(Relation index);
extern uint64 gunique_keymap_order(Oid typid, Datum value);
extern uint64 gunique_keymap_hash(Oid typid, Datum value);
extern void gunique_keymap_image(GuniqueKeyImage *image, Oid typid,
								 int nkeys, Datum *values, bool *isnull);

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

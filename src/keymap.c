/*-------------------------------------------------------------------------
 *
 * keymap.c
 *	  The 64-bit images of a key that key ranges and key filters keep.
 *
 * A key range (summary.c) is a [min, max] of 64-bit images that sort as
 * the keys do in the index; a key filter (filter.c) sets bits chosen by a
 * 64-bit hash under which equal keys hash equally.  Only single-column
 * keys of types whose default gunique ordering is an integer ordering are
 * mapped: int2, int4, int8, oid, date, time, timestamp, timestamptz, and
 * uuid by its first eight bytes (its hash by all sixteen).  Keys of these
 * types are equal exactly when their images are, so the hash of the image
 * serves as the key's hash.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/pg_opclass.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "utils/lsyscache.h"
#include "utils/uuid.h"

#include "keymap.h"

/* Maps signed 64-bit values to unsigned ones in the same order. */
#define SIGN_FLIP	(UINT64CONST(1) << 63)

static bool
keymap_type_supported(Oid typid)
{
	switch (typid)
	{
		case INT2OID:
		case INT4OID:
		case INT8OID:
		case OIDOID:
		case DATEOID:
		case TIMEOID:
		case TIMESTAMPOID:
		case TIMESTAMPTZOID:
		case UUIDOID:
			return true;
		default:
			return false;
	}
}

/*
 * The key column's type, if the index's keys can be mapped: one key
 * column, ordered by the default gunique operator class of a supported
 * type.  InvalidOid otherwise.
 */
Oid
gunique_keymap_type(Relation index)
{
	Oid			typid;
	Oid			opclass;

	if (IndexRelationGetNumberOfKeyAttributes(index) != 1)
		return InvalidOid;
	typid = TupleDescAttr(RelationGetDescr(index), 0)->atttypid;
	if (!keymap_type_supported(typid) || index->rd_opcintype[0] != typid)
		return InvalidOid;
	opclass = GetDefaultOpClass(typid, index->rd_rel->relam);
	if (!OidIsValid(opclass) ||
		get_opclass_family(opclass) != index->rd_opfamily[0])
		return InvalidOid;
	return typid;
}

/* A key as an unsigned integer in the same order as the operator class. */
uint64
gunique_keymap_order(Oid typid, Datum value)
{
	switch (typid)
	{
		case INT2OID:
			return (uint64) (int64) DatumGetInt16(value) ^ SIGN_FLIP;
		case INT4OID:
		case DATEOID:
			return (uint64) (int64) DatumGetInt32(value) ^ SIGN_FLIP;
		case OIDOID:
			return (uint64) DatumGetObjectId(value);
		case UUIDOID:
			{
				const unsigned char *b = DatumGetUUIDP(value)->data;
				uint64		prefix = 0;

				/* uuid sorts by memcmp: the first bytes are the high ones */
				for (int i = 0; i < 8; i++)
					prefix = (prefix << 8) | b[i];
				return prefix;
			}
		default:
			return (uint64) DatumGetInt64(value) ^ SIGN_FLIP;
	}
}

/* The key's hash: equal keys of a mapped type hash equally. */
uint64
gunique_keymap_hash(Oid typid, Datum value)
{
	if (typid == UUIDOID)
	{
		const unsigned char *b = DatumGetUUIDP(value)->data;
		uint64		w[2];

		memcpy(w, b, sizeof(w));
		return gunique_mix64(w[0]) ^
			gunique_mix64(w[1] + UINT64CONST(0x632be59bd9b4e019));
	}
	return gunique_mix64(gunique_keymap_order(typid, value));
}

/* Map a key of the index's "nkeys" columns, of type "typid" if mapped. */
void
gunique_keymap_image(GuniqueKeyImage *image, Oid typid, int nkeys,
					 Datum *values, bool *isnull)
{
	image->mapped = OidIsValid(typid) && nkeys == 1 && !isnull[0];
	image->order = image->hash = 0;
	if (!image->mapped)
		return;
	image->order = gunique_keymap_order(typid, values[0]);
	image->hash = gunique_keymap_hash(typid, values[0]);
}

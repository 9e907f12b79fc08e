/*-------------------------------------------------------------------------
 *
 * keymap.c
 *	  The 64-bit images of a key that key ranges and key filters keep.
 *
 * A key range (summary.c) is a [min, max] of 64-bit images that sort as
 * the keys do in the index; a key filter (filter.c) sets bits chosen by a
 * 64-bit hash under which equal keys hash equally.
 *
 * Order images exist for keys whose leading column is of a type whose
 * default gunique ordering is an integer ordering: int2, int4, int8, oid,
 * date, time, timestamp, timestamptz, and uuid by its first eight bytes;
 * the image is that column's.  A key of one such column is equal to
 * another exactly when their images are (a uuid's hash takes all sixteen
 * bytes), so the hash of the image serves as the key's hash; keys close
 * in order share half of it (keymap_range_hash).
 *
 * Any other key is hashed when the equality operator of each of its
 * columns belongs to a hash operator family with an extended (64-bit)
 * hash function: the function hash joins and hash aggregation would use
 * for that operator, so equal keys hash equally by construction, under the
 * column's collation (a nondeterministic one included) and whatever their
 * representation (numeric 1.0 and 1.00).  The columns' hashes are combined
 * in order; a NULL column, which conflicts only under NULLS NOT DISTINCT,
 * hashes as a constant there, and a key with one is not hashed otherwise.
 * A key with a column whose equality has no such function is not hashed:
 * its probes search every leaf of the group that can hold it.  Its key
 * lock is still picked by a hash of the columns that have one (a constant
 * for the others), which an ON CONFLICT check computes alike.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/hash.h"
#include "access/htup_details.h"
#include "access/nbtree.h"
#include "access/stratnum.h"
#include "catalog/pg_am.h"
#include "catalog/pg_amop.h"
#include "catalog/pg_index.h"
#include "catalog/pg_language.h"
#include "catalog/pg_opclass.h"
#include "catalog/pg_proc.h"
#include "catalog/pg_type.h"
#include "utils/catcache.h"
#include "utils/lsyscache.h"
#include "utils/syscache.h"
#include "utils/typcache.h"
#include "utils/uuid.h"

#include "locate/keymap.h"

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
 * The leading key column's type, if the index's keys have an order image:
 * that column is ordered by the default gunique operator class of a
 * supported type.  InvalidOid otherwise.
 */
/* The operator class of the index's first column (relcache copy of pg_index). */
static Oid
keymap_first_opclass(Relation index)
{
	bool		isnull;
	Datum		d = SysCacheGetAttr(INDEXRELID, index->rd_indextuple,
									Anum_pg_index_indclass, &isnull);

	return isnull ? InvalidOid : ((oidvector *) DatumGetPointer(d))->values[0];
}

/* Is the operator class its input type's default for its access method? */
static bool
keymap_opclass_default(Oid opclass)
{
	HeapTuple	tuple = SearchSysCache1(CLAOID, ObjectIdGetDatum(opclass));
	bool		result;

	if (!HeapTupleIsValid(tuple))
		return false;
	result = ((Form_pg_opclass) GETSTRUCT(tuple))->opcdefault;
	ReleaseSysCache(tuple);
	return result;
}

static Oid
keymap_range_type(Relation index)
{
	Oid			typid;
	Oid			opclass;

	typid = TupleDescAttr(RelationGetDescr(index), 0)->atttypid;
	if (!keymap_type_supported(typid) || index->rd_opcintype[0] != typid)
		return InvalidOid;

	/*
	 * The column's operator class must be the type's default one (gunique's
	 * own, ordered as the image orders): asked of the syscache, since this
	 * runs for every leaf a statement inserts into.
	 */
	opclass = keymap_first_opclass(index);
	if (!keymap_opclass_default(opclass) ||
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

/*
 * Keys with an exact order image come in runs of 2^KEYMAP_RUN_SHIFT
 * consecutive images, which share the high half of their hash.
 */
#define KEYMAP_RUN_SHIFT	5

/*
 * The hash of a key with an order image: equal keys hash equally.  A key
 * of a type whose image is the whole key (all but uuid) takes the high
 * half of its hash from its run's image and the low half from its own, so
 * that filters, which place keys by the high half first, keep keys close
 * in order on the same pages (filter.c, filter_block).  A run has at most
 * 32 keys, however dense the keys are: a page of a filter holds some 1,300
 * to 2,700 keys, so it still takes keys from dozens of runs, and its load
 * stays near the filter's average (false positives rise by about a
 * quarter: 0.12% to 0.15% for 400,000 consecutive keys in a filter made
 * for them, simulated).  A uuid's image is only its first eight
 * bytes, which any number of keys may share: its hash is its own.
 */
static uint64
keymap_range_hash(Oid typid, Datum value)
{
	uint64		order;

	if (typid == UUIDOID)
	{
		const unsigned char *b = DatumGetUUIDP(value)->data;
		uint64		w[2];

		memcpy(w, b, sizeof(w));
		return gunique_mix64(w[0]) ^
			gunique_mix64(w[1] + UINT64CONST(0x632be59bd9b4e019));
	}
	order = gunique_keymap_order(typid, value);
	return (gunique_mix64(order >> KEYMAP_RUN_SHIFT) &
			UINT64CONST(0xFFFFFFFF00000000)) |
		(gunique_mix64(order) & UINT64CONST(0xFFFFFFFF));
}

/*
 * The extended hash function of the hash operator family that holds "eqop",
 * the equality of a key column: InvalidOid if there is none.
 */
static Oid
keymap_hash_proc(Oid eqop)
{
	CatCList   *catlist = SearchSysCacheList1(AMOPOPID, ObjectIdGetDatum(eqop));
	Oid			proc = InvalidOid;

	for (int i = 0; i < catlist->n_members && !OidIsValid(proc); i++)
	{
		Form_pg_amop aop = (Form_pg_amop) GETSTRUCT(&catlist->members[i]->tuple);

		if (aop->amopmethod == HASH_AM_OID &&
			aop->amopstrategy == HTEqualStrategyNumber &&
			aop->amoplefttype == aop->amoprighttype)
			proc = get_opfamily_proc(aop->amopfamily, aop->amoplefttype,
									 aop->amoplefttype, HASHEXTENDED_PROC);
	}
	ReleaseSysCacheList(catlist);
	return proc;
}

/*
 * Can the hash functions of a column of this type hash every value?  An
 * array's, a range's or a composite's hash their elements (subtype,
 * fields) with theirs, and fail at run time if one has none (money[], a
 * range over a type without hashing): the type cache knows, as it does
 * for hash joins.
 */
bool
gunique_keymap_hashable_type(Oid typid)
{
	char		typtype = get_typtype(getBaseType(typid));
	TypeCacheEntry *entry;

	if (typtype != TYPTYPE_RANGE && typtype != TYPTYPE_MULTIRANGE &&
		typtype != TYPTYPE_COMPOSITE &&
		!OidIsValid(get_element_type(getBaseType(typid))))
		return true;
	entry = lookup_type_cache(typid, TYPECACHE_HASH_PROC |
							  TYPECACHE_HASH_EXTENDED_PROC);
	return OidIsValid(entry->hash_proc) &&
		OidIsValid(entry->hash_extended_proc);
}

/*
 * The equality operator of key column i of the index: its operator
 * family's, for the column's own type.  Every gunique operator family has
 * one (they mirror btree's), so its absence is an internal error.
 */
Oid
gunique_key_equality(Relation index, int i)
{
	Oid			eqop = get_opfamily_member(index->rd_opfamily[i],
										   index->rd_opcintype[i],
										   index->rd_opcintype[i],
										   BTEqualStrategyNumber);

	if (!OidIsValid(eqop))
		elog(ERROR, "missing operator %d(%u,%u) in opfamily %u",
			 BTEqualStrategyNumber, index->rd_opcintype[i],
			 index->rd_opcintype[i], index->rd_opfamily[i]);
	return eqop;
}

/*
 * The comparison function (support function 1) of key column i, for the
 * column's own type, if it is written in another language than C (SQL,
 * PL/pgSQL, ...): such a function may run queries and wait, and gunique
 * calls it under a key lock (src/README, I4).  InvalidOid if it
 * is written in C, as every function of gunique's own operator classes is.
 */
Oid
gunique_key_user_comparison(Relation index, int i)
{
	Oid			proc = get_opfamily_proc(index->rd_opfamily[i],
										 index->rd_opcintype[i],
										 index->rd_opcintype[i],
										 BTORDER_PROC);
	HeapTuple	tuple;
	Oid			lang;

	if (!OidIsValid(proc))
		elog(ERROR, "missing support function %d(%u,%u) in opfamily %u",
			 BTORDER_PROC, index->rd_opcintype[i], index->rd_opcintype[i],
			 index->rd_opfamily[i]);
	tuple = SearchSysCache1(PROCOID, ObjectIdGetDatum(proc));
	if (!HeapTupleIsValid(tuple))
		elog(ERROR, "cache lookup failed for function %u", proc);
	lang = ((Form_pg_proc) GETSTRUCT(tuple))->prolang;
	ReleaseSysCache(tuple);
	return lang == ClanguageId || lang == INTERNALlanguageId ?
		InvalidOid : proc;
}

/*
 * Work out how the index's keys are mapped, with the hash functions'
 * lookup data in "cxt".  Reads the catalogs: not under a key lock.
 */
void
gunique_keymap_make(GuniqueKeyMap *map, Relation index, MemoryContext cxt)
{
	memset(map, 0, sizeof(GuniqueKeyMap));
	map->nkeys = IndexRelationGetNumberOfKeyAttributes(index);
	map->nulls_not_distinct = index->rd_index->indnullsnotdistinct;
	map->rangetype = keymap_range_type(index);
	map->hashed = true;
	if (OidIsValid(map->rangetype) && map->nkeys == 1)
		return;					/* hashed by its image */
	map->hashable = MemoryContextAllocZero(cxt, sizeof(bool) * map->nkeys);
	map->collation = MemoryContextAllocZero(cxt, sizeof(Oid) * map->nkeys);
	map->hashfn = MemoryContextAllocZero(cxt, sizeof(FmgrInfo) * map->nkeys);
	for (int i = 0; i < map->nkeys; i++)
	{
		Oid			eqop = get_opfamily_member(index->rd_opfamily[i],
											   index->rd_opcintype[i],
											   index->rd_opcintype[i],
											   BTEqualStrategyNumber);
		Oid			proc = OidIsValid(eqop) ? keymap_hash_proc(eqop) :
			InvalidOid;

		map->hashable[i] = OidIsValid(proc) &&
			gunique_keymap_hashable_type(TupleDescAttr(RelationGetDescr(index),
													   i)->atttypid);
		if (map->hashable[i])
		{
			map->collation[i] = index->rd_indcollation[i];
			fmgr_info_cxt(proc, &map->hashfn[i], cxt);
		}
		else
			map->hashed = false;
	}
}

/* NULL's hash under NULLS NOT DISTINCT: any constant serves. */
#define KEYMAP_NULL_HASH	UINT64CONST(0x5bd1e9955bd1e995)

/* The 32 bits of a 64-bit hash that key locks are picked by. */
static inline uint32
keymap_fold(uint64 hash)
{
	return (uint32) (hash ^ (hash >> 32));
}

/*
 * Map a key of the index (all its key columns).  Every key that can
 * conflict gets a lock hash, from the columns that have a hash function
 * when not all have one (the others count as one value each): equal keys
 * share it, and a key without a filter hash takes its key lock by it.
 */
void
gunique_keymap_image(GuniqueKeyImage *image, GuniqueKeyMap *map,
					 Datum *values, bool *isnull)
{
	uint64		hash = 0;

	image->ordered = image->hashed = false;
	image->order = image->hash = 0;
	image->lockhash = 0;
	if (OidIsValid(map->rangetype) && !isnull[0])
	{
		image->ordered = true;
		image->order = gunique_keymap_order(map->rangetype, values[0]);
	}
	if (OidIsValid(map->rangetype) && map->nkeys == 1)
	{
		image->hashed = image->ordered;
		image->hash = image->hashed ?
			keymap_range_hash(map->rangetype, values[0]) : 0;
		image->lockhash = keymap_fold(image->hash);
		return;
	}
	for (int i = 0; i < map->nkeys; i++)
	{
		uint64		h = 0;

		if (isnull[i])
		{
			if (!map->nulls_not_distinct)
				return;			/* conflicts with nothing */
			h = KEYMAP_NULL_HASH;
		}
		else if (map->hashable[i])
			h = DatumGetUInt64(FunctionCall2Coll(&map->hashfn[i],
												 map->collation[i],
												 values[i],
												 UInt64GetDatum(i)));
		hash = gunique_mix64(hash ^ h) + (uint64) i;
	}
	image->lockhash = keymap_fold(hash);
	if (!map->hashed)
		return;
	image->hashed = true;
	image->hash = hash;
}

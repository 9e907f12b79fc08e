/*-------------------------------------------------------------------------
 *
 * lookup.h
 *	  Lookups by a gunique key: the scan and the reader (lookup.c); what
 *	  the plan hands them (lookupplan.c).  See src/README, "Lookups".
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_LOOKUP_H
#define GUNIQUE_LOOKUP_H

#include "nodes/extensible.h"
#include "storage/itemptr.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

#include "locate/locate.h"

#define GUNIQUE_LOOKUP_NAME "GuniqueLookup"

/*
 * What the plan hands the executor in custom_private: the gunique index,
 * and whether the one key expression in custom_exprs is an array of keys
 * (key = ANY (...)) rather than one expression per key column.
 */
#define LOOKUP_PRIVATE_INDEX	0
#define LOOKUP_PRIVATE_ARRAY	1

/* A row of a key found by a reader, with a dirty snapshot. */
typedef struct GuniqueLookupHit
{
	Oid			heapoid;		/* its partition */
	ItemPointerData tid;
	TransactionId xwait;		/* still inserting or deleting it, or
								 * invalid */
	uint32		speculative_token;
} GuniqueLookupHit;

typedef struct GuniqueLookupReader GuniqueLookupReader;

extern Node *gunique_lookup_create_state(CustomScan *cscan);
extern GuniqueLookupReader *gunique_lookup_reader_begin(Relation table,
														Relation index,
														Snapshot snapshot);
extern bool gunique_lookup_reader_find(GuniqueLookupReader *reader,
									   Datum *values, bool *isnull,
									   GuniqueLocateKey *key,
									   GuniqueLookupHit *hit);
extern bool gunique_lookup_reader_only(GuniqueLookupReader *reader,
									   Datum *values, bool *isnull,
									   Oid *heapoid);
extern void gunique_lookup_reader_end(GuniqueLookupReader *reader);

#endif							/* GUNIQUE_LOOKUP_H */

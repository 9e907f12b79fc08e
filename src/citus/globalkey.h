/*-------------------------------------------------------------------------
 *
 * globalkey.h
 *	  A gunique index's global key on a Citus distributed table: its key
 *	  table, found by name, and the writes that keep it (globalkey.c).
 *
 * The design and its invariants: src/citus/README.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_CITUS_GLOBALKEY_H
#define GUNIQUE_CITUS_GLOBALKEY_H

#include "access/attnum.h"
#include "nodes/pg_list.h"
#include "utils/relcache.h"

/* The schema that holds every key table. */
#define GUNIQUE_KEYS_SCHEMA "gunique_keys"

typedef struct GuniqueGlobalKey
{
	Oid			indexoid;		/* the gunique index on the relation */
	Oid			topindex;		/* its top ancestor, which names the key table */
	Oid			keytable;		/* gunique_keys."<schema>.<top index>" */
	Oid			keyowner;		/* its owner, as whom it is written */
	int			nkeys;
	AttrNumber	keyattno[INDEX_MAX_KEYS];	/* in the relation */
	Oid			keytype[INDEX_MAX_KEYS];
	Oid			opfamily[INDEX_MAX_KEYS];	/* the index's, per key column */
	AttrNumber	distattno;		/* the distribution column, in the relation */
	Oid			disttype;
} GuniqueGlobalKey;

/* A batch of rows' keys and distribution values, to add or remove. */
typedef struct GuniqueKeyBatch
{
	int			nrows;
	int			maxrows;
	Datum	   *keys;			/* nrows * nkeys */
	Datum	   *dist;			/* nrows */
} GuniqueKeyBatch;

extern bool gunique_citus_present(void);
extern List *gunique_citus_global_keys(Relation rel);
extern char *gunique_citus_keytable_name(Oid indexoid);
extern Oid	gunique_citus_keytable_of(Oid indexoid);
extern GuniqueGlobalKey *gunique_citus_planned_key(Oid relid, Oid indexoid);

extern GuniqueKeyBatch *gunique_keybatch_new(GuniqueGlobalKey *gk);
extern void gunique_keybatch_add(GuniqueGlobalKey *gk, GuniqueKeyBatch *batch,
								 Datum *keys, Datum dist);
extern void gunique_keys_insert(GuniqueGlobalKey *gk, GuniqueKeyBatch *batch);
extern void gunique_keys_delete(GuniqueGlobalKey *gk, GuniqueKeyBatch *batch);
extern void gunique_keys_truncate(GuniqueGlobalKey *gk);
typedef void (*GuniqueVerifyReport) (void *arg, const char *problem,
									 const char *detail);
extern GuniqueGlobalKey *gunique_citus_global_key_of(Oid topindex);
extern void gunique_citus_verify(GuniqueGlobalKey *gk,
								 GuniqueVerifyReport report, void *arg);
extern bool gunique_keys_route_owner(GuniqueGlobalKey *gk, Datum *keys,
									 Datum *dist);

#endif							/* GUNIQUE_CITUS_GLOBALKEY_H */

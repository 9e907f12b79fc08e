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
	int			nkeys;
	AttrNumber	keyattno[INDEX_MAX_KEYS];	/* in the relation */
	Oid			keytype[INDEX_MAX_KEYS];
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

extern GuniqueKeyBatch *gunique_keybatch_new(GuniqueGlobalKey *gk);
extern void gunique_keybatch_add(GuniqueGlobalKey *gk, GuniqueKeyBatch *batch,
								 Datum *keys, Datum dist);
extern void gunique_keys_insert(GuniqueGlobalKey *gk, GuniqueKeyBatch *batch);
extern void gunique_keys_delete(GuniqueGlobalKey *gk, GuniqueKeyBatch *batch);

#endif							/* GUNIQUE_CITUS_GLOBALKEY_H */

/*-------------------------------------------------------------------------
 *
 * globalkey.c
 *	  A gunique index's global key on a Citus distributed table: finding its
 *	  key table, and adding and removing rows' keys there.
 *
 * The key table of a gunique index on a distributed table is the
 * distributed table gunique_keys."<schema>.<index>", distributed by its
 * first key column: one row per live row of the table whose key has no
 * NULL, holding the key and the row's distribution value.  Its primary key
 * is the guarantee; this file only writes it, through SPI, so that Citus
 * routes each write to the key's shard within the transaction that writes
 * the row.  Why it is found by name and what keeps it exact: src/citus/README.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/stratnum.h"
#include "access/table.h"
#include "catalog/index.h"
#include "catalog/namespace.h"
#include "catalog/partition.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_namespace.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "utils/array.h"
#include "utils/builtins.h"
#include "utils/datum.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "gunique.h"
#include "am/scope.h"
#include "am/tree.h"
#include "citus/globalkey.h"

/*
 * The statements on a key table.  KEYS_INSERT is an INSERT ... VALUES of
 * any number of rows; its one-row form is kept per key table, as all the
 * others but KEYS_INSERT_BULK are.
 */
typedef enum KeyStatement
{
	KEYS_INSERT,
	KEYS_INSERT_BULK,
	KEYS_DELETE_ONE,
	KEYS_DELETE_MANY,
	KEYS_OWNER,
	KEYS_LOCK_SHARD,
	KEYS_NSTATEMENTS
} KeyStatement;

typedef struct KeyPlans
{
	Oid			keytable;		/* hash key */
	SPIPlanPtr	plans[KEYS_NSTATEMENTS];
} KeyPlans;

static HTAB *key_plans = NULL;

/*
 * From how many keys one INSERT ... SELECT FROM unnest(...) adds them all,
 * through the coordinator and a connection per shard: cheaper than one
 * VALUES list for one statement's thousands of keys (a COPY of 20,000
 * rows: ×0.8 of its time, with two workers), dearer for many writers'
 * hundreds (bench workload 10: 100-row INSERTs of 8 clients took 7 times
 * as long as with VALUES lists).
 */
#define KEYS_BULK 1000

/* True when some key table may exist in this database. */
bool
gunique_citus_present(void)
{
	return OidIsValid(get_namespace_oid(GUNIQUE_KEYS_SCHEMA, true));
}

/* The key table's name for an index: "<schema>.<index>". */
char *
gunique_citus_keytable_name(Oid indexoid)
{
	char	   *nsp = get_namespace_name(get_rel_namespace(indexoid));
	char	   *rel = get_rel_name(indexoid);

	if (nsp == NULL || rel == NULL)
		return NULL;
	return psprintf("%s.%s", nsp, rel);
}

/*
 * The top of an index's tree: a partition's index asks pg_inherits, any
 * other index is its own top (without the catalog scan, on the planner's
 * path).
 */
static Oid
top_index(Oid indexoid)
{
	return get_rel_relispartition(indexoid) ? gunique_tree_top(indexoid) : indexoid;
}

/*
 * True when Citus distributes both relations: each has a row in Citus's
 * catalog pg_dist_partition, whose first column, logicalrelid, names the
 * table (B22 in src/citus/README).
 */
static bool
citus_distributes(Oid relid1, Oid relid2)
{
	Oid			relids[2] = {relid1, relid2};
	Oid			catalog = get_relname_relid("pg_dist_partition",
											PG_CATALOG_NAMESPACE);
	Oid			index = get_relname_relid("pg_dist_partition_logical_relid_index",
										  PG_CATALOG_NAMESPACE);
	Relation	rel;
	SysScanDesc scan;
	ScanKeyData key;
	bool		found = true;
	char	   *first;

	/*
	 * Without Citus in the database nothing is distributed.  With it, a
	 * catalog not as read here is an error: taking no table for a key
	 * table would leave global keys unchecked.
	 */
	if (!OidIsValid(catalog))
	{
		if (!OidIsValid(get_extension_oid("citus", true)))
			return false;
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gunique cannot read Citus's catalog of distributed tables"),
				 errdetail("The citus extension is installed, but there is no table pg_catalog.pg_dist_partition."),
				 errhint("Use a Citus version that gunique supports.")));
	}
	first = get_attname(catalog, 1, true);
	if (first == NULL || strcmp(first, "logicalrelid") != 0)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("gunique cannot read Citus's catalog of distributed tables"),
				 errdetail("The first column of pg_catalog.pg_dist_partition is not logicalrelid."),
				 errhint("Use a Citus version that gunique supports.")));
	rel = table_open(catalog, AccessShareLock);
	for (int i = 0; i < 2 && found; i++)
	{
		ScanKeyInit(&key, 1, BTEqualStrategyNumber, F_OIDEQ,
					ObjectIdGetDatum(relids[i]));
		scan = systable_beginscan(rel, index, OidIsValid(index), NULL, 1, &key);
		found = HeapTupleIsValid(systable_getnext(scan));
		systable_endscan(scan);
	}
	table_close(rel, AccessShareLock);
	return found;
}

/*
 * The key table named after a top index, or InvalidOid: a table of that
 * name in gunique_keys that Citus distributes, for an index of a table
 * Citus distributes.  Any other is no key table: a pg_dump of a
 * coordinator restores key tables as plain tables, and since gunique_keys
 * lets any user create tables, one may take the name of a plain table's
 * index.
 */
static Oid
keytable_of_top(Oid topindex)
{
	Oid			nsp = get_namespace_oid(GUNIQUE_KEYS_SCHEMA, true);
	char	   *name;
	Oid			keytable;

	if (!OidIsValid(nsp))
		return InvalidOid;
	name = gunique_citus_keytable_name(topindex);
	if (name == NULL || strlen(name) >= NAMEDATALEN)
		return InvalidOid;
	keytable = get_relname_relid(name, nsp);
	if (!OidIsValid(keytable) ||
		!citus_distributes(keytable, IndexGetRelation(topindex, false)))
		return InvalidOid;
	return keytable;
}

/* The key table of an index's top ancestor, or InvalidOid. */
Oid
gunique_citus_keytable_of(Oid indexoid)
{
	return keytable_of_top(top_index(indexoid));
}

/* The global key of one index, or NULL when it has none. */
static GuniqueGlobalKey *
global_key(Relation rel, Oid indexoid)
{
	HeapTuple	tuple;
	Form_pg_index index;
	GuniqueGlobalKey *gk;
	Oid			topindex;
	Oid			keytable;
	char	   *distname;
	Datum		indclass;
	bool		isnull;
	HeapTuple	classtup;

	if (!gunique_is_gunique_index(indexoid))
		return NULL;
	topindex = top_index(indexoid);
	keytable = keytable_of_top(topindex);
	if (!OidIsValid(keytable))
		return NULL;

	tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
	if (!HeapTupleIsValid(tuple))
		return NULL;
	index = (Form_pg_index) GETSTRUCT(tuple);
	gk = palloc0(sizeof(GuniqueGlobalKey));
	gk->indexoid = indexoid;
	gk->topindex = topindex;
	gk->keytable = keytable;
	classtup = SearchSysCache1(RELOID, ObjectIdGetDatum(keytable));
	if (!HeapTupleIsValid(classtup))
		elog(ERROR, "cache lookup failed for relation %u", keytable);
	gk->keyowner = ((Form_pg_class) GETSTRUCT(classtup))->relowner;
	ReleaseSysCache(classtup);
	gk->nkeys = index->indnkeyatts;
	for (int i = 0; i < gk->nkeys; i++)
	{
		gk->keyattno[i] = index->indkey.values[i];
		gk->keytype[i] = get_atttype(RelationGetRelid(rel), gk->keyattno[i]);
	}
	indclass = SysCacheGetAttr(INDEXRELID, tuple, Anum_pg_index_indclass,
							   &isnull);
	Assert(!isnull);
	for (int i = 0; i < gk->nkeys; i++)
		gk->opfamily[i] =
			get_opclass_family(((oidvector *) DatumGetPointer(indclass))->values[i]);
	ReleaseSysCache(tuple);

	/* The key table's last column is named as the distribution column. */
	distname = get_attname(keytable, gk->nkeys + 1, false);
	gk->distattno = get_attnum(RelationGetRelid(rel), distname);
	if (gk->distattno == InvalidAttrNumber)
		ereport(ERROR,
				(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
				 errmsg("key table \"%s\" of index \"%s\" does not match table \"%s\"",
						get_rel_name(keytable), get_rel_name(indexoid),
						RelationGetRelationName(rel)),
				 errdetail("The table has no column \"%s\", which the key table names as its distribution column.",
						   distname)));
	gk->disttype = get_atttype(RelationGetRelid(rel), gk->distattno);
	return gk;
}

/*
 * The global key of index indexoid on relation relid, which the caller
 * knows it has (a plan made for it, revalidated before it runs; a key
 * table just made): an error if it has none, which only a fault gets to.
 */
GuniqueGlobalKey *
gunique_citus_planned_key(Oid relid, Oid indexoid)
{
	Relation	rel = relation_open(relid, NoLock);
	GuniqueGlobalKey *gk = global_key(rel, indexoid);

	relation_close(rel, NoLock);
	if (gk == NULL)
		elog(ERROR, "global key of index %u is gone", indexoid);
	return gk;
}

/*
 * The global keys of a relation (a distributed table or one of its
 * partitions): one per gunique index whose top ancestor has a key table.
 */
List *
gunique_citus_global_keys(Relation rel)
{
	List	   *result = NIL;
	List	   *indexes;
	ListCell   *lc;

	if (!gunique_citus_present())
		return NIL;
	indexes = RelationGetIndexList(rel);
	foreach(lc, indexes)
	{
		GuniqueGlobalKey *gk = global_key(rel, lfirst_oid(lc));

		if (gk != NULL)
			result = lappend(result, gk);
	}
	list_free(indexes);
	return result;
}

GuniqueKeyBatch *
gunique_keybatch_new(GuniqueGlobalKey *gk)
{
	GuniqueKeyBatch *batch = palloc0(sizeof(GuniqueKeyBatch));

	batch->maxrows = 16;
	batch->keys = palloc(sizeof(Datum) * batch->maxrows * gk->nkeys);
	batch->dist = palloc(sizeof(Datum) * batch->maxrows);
	return batch;
}

/* Adds one row's key (no NULL in it) and distribution value, copied. */
void
gunique_keybatch_add(GuniqueGlobalKey *gk, GuniqueKeyBatch *batch,
					 Datum *keys, Datum dist)
{
	int16		len;
	bool		byval;

	if (batch->nrows == batch->maxrows)
	{
		batch->maxrows *= 2;
		batch->keys = repalloc(batch->keys,
							   sizeof(Datum) * batch->maxrows * gk->nkeys);
		batch->dist = repalloc(batch->dist, sizeof(Datum) * batch->maxrows);
	}
	for (int i = 0; i < gk->nkeys; i++)
	{
		get_typlenbyval(gk->keytype[i], &len, &byval);
		batch->keys[batch->nrows * gk->nkeys + i] = datumCopy(keys[i], byval, len);
	}
	get_typlenbyval(gk->disttype, &len, &byval);
	batch->dist[batch->nrows] = datumCopy(dist, byval, len);
	batch->nrows++;
}

/* The SQL text of one statement on a key table. */
static char *
statement_text(GuniqueGlobalKey *gk, KeyStatement which, int nrows)
{
	StringInfoData buf;
	char	   *table = quote_qualified_identifier(GUNIQUE_KEYS_SCHEMA,
												   get_rel_name(gk->keytable));
	const char *dist = quote_identifier(get_attname(gk->keytable,
													gk->nkeys + 1, false));

	initStringInfo(&buf);
	switch (which)
	{
		case KEYS_INSERT_BULK:
			appendStringInfo(&buf, "WITH added AS (INSERT INTO %s SELECT * FROM unnest(",
							 table);
			for (int i = 0; i <= gk->nkeys; i++)
				appendStringInfo(&buf, "%s$%d", i > 0 ? ", " : "", i + 1);
			appendStringInfoString(&buf, ") ON CONFLICT DO NOTHING RETURNING 1) "
								   "SELECT count(*) FROM added");
			break;
		case KEYS_DELETE_MANY:
			appendStringInfo(&buf, "DELETE FROM %s WHERE %s = ANY ($1)", table,
							 quote_identifier(get_attname(gk->keytable, 1, false)));
			break;
		case KEYS_DELETE_ONE:
		case KEYS_OWNER:
			if (which == KEYS_DELETE_ONE)
				appendStringInfo(&buf, "DELETE FROM %s WHERE ", table);
			else
				appendStringInfo(&buf, "SELECT %s FROM %s WHERE ", dist, table);
			for (int i = 0; i < gk->nkeys; i++)
				appendStringInfo(&buf, "%s%s = $%d", i > 0 ? " AND " : "",
								 quote_identifier(get_attname(gk->keytable, i + 1, false)),
								 i + 1);
			break;
		case KEYS_LOCK_SHARD:
			/* ShareLock (5), as Citus's writers take it */
			appendStringInfo(&buf, "SELECT pg_catalog.lock_shard_metadata(5, "
							 "ARRAY[pg_catalog.get_shard_id_for_distribution_column(%u::pg_catalog.regclass, $1)])",
							 gk->keytable);
			break;
		case KEYS_INSERT:
			appendStringInfo(&buf, "INSERT INTO %s VALUES ", table);
			for (int r = 0, n = 0; r < nrows; r++)
			{
				appendStringInfoString(&buf, r > 0 ? ", (" : "(");
				for (int i = 0; i <= gk->nkeys; i++)
					appendStringInfo(&buf, "%s$%d", i > 0 ? ", " : "", ++n);
				appendStringInfoChar(&buf, ')');
			}
			appendStringInfoString(&buf, " ON CONFLICT DO NOTHING");
			break;
		default:
			elog(ERROR, "unexpected key table statement %d", (int) which);
	}
	return buf.data;
}

/*
 * A statement's argument types, the key's and the distribution column's,
 * into types, which has room for them; their count.
 */
static int
statement_types(GuniqueGlobalKey *gk, KeyStatement which, int nrows, Oid *types)
{
	bool		arrays = (which == KEYS_DELETE_MANY || which == KEYS_INSERT_BULK);
	bool		insert = (which == KEYS_INSERT);
	int			n = insert ? nrows * (gk->nkeys + 1) :
		which == KEYS_INSERT_BULK ? gk->nkeys + 1 :
		(which == KEYS_DELETE_MANY || which == KEYS_LOCK_SHARD ? 1 : gk->nkeys);

	for (int i = 0; i < n; i++)
	{
		int			col = insert ? i % (gk->nkeys + 1) : i;
		Oid			type = col < gk->nkeys ? gk->keytype[col] : gk->disttype;

		types[i] = arrays ? get_array_type(type) : type;
		if (!OidIsValid(types[i]))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("type %s has no array type", format_type_be(type))));
	}
	return n;
}

/*
 * One statement on a key table, prepared once per backend and kept: the
 * plan cache revalidates it when the key table changes.  Run by the
 * caller between keys_connect and keys_finish.
 */
static SPIPlanPtr
key_statement(GuniqueGlobalKey *gk, KeyStatement which)
{
	KeyPlans   *entry;
	bool		found;

	if (key_plans == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(KeyPlans);
		key_plans = hash_create("gunique key table statements", 16, &ctl,
								HASH_ELEM | HASH_BLOBS);
	}
	entry = hash_search(key_plans, &gk->keytable, HASH_ENTER, &found);
	if (!found)
		memset(entry->plans, 0, sizeof(entry->plans));
	if (entry->plans[which] == NULL)
	{
		Oid			types[INDEX_MAX_KEYS + 1];
		int			n = statement_types(gk, which, 1, types);
		SPIPlanPtr	plan = SPI_prepare(statement_text(gk, which, 1), n, types);

		if (plan == NULL)
			elog(ERROR, "SPI_prepare failed for a key table statement: %s",
				 SPI_result_code_string(SPI_result));
		SPI_keepplan(plan);
		entry->plans[which] = plan;
	}
	return entry->plans[which];
}

/* Rows i of the batch as the arguments of a one-row statement. */
static void
row_arguments(GuniqueGlobalKey *gk, GuniqueKeyBatch *batch, int i,
			  bool with_dist, Datum *args)
{
	for (int k = 0; k < gk->nkeys; k++)
		args[k] = batch->keys[i * gk->nkeys + k];
	if (with_dist)
		args[gk->nkeys] = batch->dist[i];
}

/* Column k of the batch (the distribution value for k == nkeys), as an array. */
static Datum
column_array(GuniqueGlobalKey *gk, GuniqueKeyBatch *batch, int k)
{
	Oid			type = k < gk->nkeys ? gk->keytype[k] : gk->disttype;
	Datum	   *values = palloc(sizeof(Datum) * batch->nrows);
	int16		len;
	bool		byval;
	char		align;

	for (int i = 0; i < batch->nrows; i++)
		values[i] = k < gk->nkeys ? batch->keys[i * gk->nkeys + k] : batch->dist[i];
	get_typlenbyvalalign(type, &len, &byval, &align);
	return PointerGetDatum(construct_array(values, batch->nrows, type,
										   len, byval, align));
}

/* "(a, b)=(1, 2)" for a key, or "(d)=(3)" for a distribution value. */
static char *
describe(GuniqueGlobalKey *gk, int first, int n, Datum *values)
{
	StringInfoData buf;

	initStringInfo(&buf);
	appendStringInfoChar(&buf, '(');
	for (int i = 0; i < n; i++)
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 quote_identifier(get_attname(gk->keytable, first + i + 1, false)));
	appendStringInfoString(&buf, ")=(");
	for (int i = 0; i < n; i++)
	{
		Oid			type = first + i < gk->nkeys ? gk->keytype[first + i] : gk->disttype;
		Oid			out;
		bool		varlena;

		getTypeOutputInfo(type, &out, &varlena);
		appendStringInfo(&buf, "%s%s", i > 0 ? ", " : "",
						 OidOutputFunctionCall(out, values[i]));
	}
	appendStringInfoChar(&buf, ')');
	return buf.data;
}

/*
 * Statements on a key table run as its owner, as PostgreSQL's foreign key
 * checks run as the referenced table's owner: the key table is the index's
 * structure, not the user's, and needs no privilege of its own
 * (src/citus/README, "Privileges").  An error restores the user with the
 * (sub)transaction's abort.
 */
static void
keys_connect(GuniqueGlobalKey *gk, Oid *save_user, int *save_sec)
{
	GetUserIdAndSecContext(save_user, save_sec);
	SetUserIdAndSecContext(gk->keyowner,
						   *save_sec | SECURITY_LOCAL_USERID_CHANGE);
	SPI_connect();
}

static void
keys_finish(Oid save_user, int save_sec)
{
	SPI_finish();
	SetUserIdAndSecContext(save_user, save_sec);
}

/*
 * The distribution value the key table holds for a key into *dist, in the
 * caller's memory context; false when the key is not there.  In the
 * statement's snapshot, or with "latest" in a new one that sees this
 * statement's own keys and what committed since (a conflict's holder: a
 * worker reads a key table shard of its own locally, in the snapshot
 * given, not in a remote transaction that sees both).  Run between
 * keys_connect and keys_finish.
 */
static bool
lookup_owner(GuniqueGlobalKey *gk, Datum *keys, Datum *dist,
			 MemoryContext cxt, bool latest)
{
	bool		isnull = true;
	Datum		d;
	int16		len;
	bool		byval;
	MemoryContext old;

	if (SPI_execute_plan(key_statement(gk, KEYS_OWNER), keys, NULL, !latest,
						 1) != SPI_OK_SELECT)
		elog(ERROR, "reading key table \"%s\" failed",
			 get_rel_name(gk->keytable));
	if (SPI_processed != 1)
		return false;
	d = SPI_getbinval(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1,
					  &isnull);
	if (isnull)
		return false;
	get_typlenbyval(gk->disttype, &len, &byval);
	old = MemoryContextSwitchTo(cxt);
	*dist = datumCopy(d, byval, len);
	MemoryContextSwitchTo(old);
	return true;
}

/*
 * For a statement routed by a key: the distribution value of the row that
 * holds it, read from the key table in this transaction's snapshot; false
 * when no row holds it.
 *
 * First takes, until the transaction ends, the lock Citus's writers take
 * (ShareLock) on the metadata of the key table's shard of the key.  A
 * shard move blocks writes by that lock; without it, a move could finish
 * between this read and a later write of the key in the transaction (a
 * routed DELETE's, at once), which Citus then sent to the placement the
 * read used, the old one: the write was lost (src/citus/README,
 * "Lookups").
 */
bool
gunique_keys_route_owner(GuniqueGlobalKey *gk, Datum *keys, Datum *dist)
{
	MemoryContext cxt = CurrentMemoryContext;
	Oid			save_user;
	int			save_sec;
	bool		found;

	keys_connect(gk, &save_user, &save_sec);
	if (SPI_execute_plan(key_statement(gk, KEYS_LOCK_SHARD), keys, NULL,
						 false, 1) != SPI_OK_SELECT)
		elog(ERROR, "locking the shard of key table \"%s\" failed",
			 get_rel_name(gk->keytable));
	found = lookup_owner(gk, keys, dist, cxt, false);
	keys_finish(save_user, save_sec);
	return found;
}

/*
 * A key already in the key table: 23505 naming the index, with the other
 * row's distribution value where the key table still has it.
 */
static void
report_duplicate(GuniqueGlobalKey *gk, Datum *keys)
{
	char	   *key = describe(gk, 0, gk->nkeys, keys);
	char	   *owner = NULL;
	Relation	rel = relation_open(IndexGetRelation(gk->topindex, false),
									NoLock);
	Datum		d;

	if (lookup_owner(gk, keys, &d, CurrentMemoryContext, true))
		owner = describe(gk, gk->nkeys, 1, &d);
	ereport(ERROR,
			(errcode(ERRCODE_UNIQUE_VIOLATION),
			 errmsg("duplicate key value violates unique constraint \"%s\"",
					get_rel_name(gk->topindex)),
			 owner ? errdetail("Key %s already exists in the row with %s.", key, owner) :
			 errdetail("Key %s already exists.", key),
			 errtableconstraint(rel, get_rel_name(gk->topindex))));
}

/*
 * After an insert of the batch's keys added fewer than the batch's rows:
 * the first row whose key the key table gives another distribution value
 * is the duplicate.  A key the batch holds twice for
 * one distribution value is the shards' own index's to refuse, which it
 * did before this.
 */
static void
report_duplicate_in_batch(GuniqueGlobalKey *gk, GuniqueKeyBatch *batch)
{
	Datum		args[INDEX_MAX_KEYS + 1];
	Datum		owner;
	int16		len;
	bool		byval;

	get_typlenbyval(gk->disttype, &len, &byval);
	for (int i = 0; i < batch->nrows; i++)
	{
		row_arguments(gk, batch, i, true, args);
		if (!lookup_owner(gk, args, &owner, CurrentMemoryContext, true) ||
			!datumIsEqual(owner, batch->dist[i], byval, len))
			report_duplicate(gk, args);
	}
	row_arguments(gk, batch, 0, true, args);
	report_duplicate(gk, args);
}

/*
 * Adds the batch's keys to the key table, in this transaction, or raises
 * 23505 for the first key that is there already (or twice in the batch).
 * ON CONFLICT DO NOTHING, not a plain INSERT: a key another transaction is
 * inserting or deleting is waited for, as btree waits, and a conflict is
 * known without a subtransaction on every node.  One statement: an INSERT
 * ... VALUES of the batch's rows, which Citus splits by shard and sends
 * over one connection per worker (kept for one row, planned with its
 * values for more: one statement's round trips, where 64, 32, ... rows a
 * statement took ×1.25 of its time for 100 rows and ×1.6 to ×2 for 500,
 * with two workers), or, from KEYS_BULK keys, an INSERT ... SELECT.  The
 * count of an INSERT ... VALUES is of the rows it added; an INSERT ...
 * SELECT's, of those it tried, so a CTE's SELECT counts its RETURNING rows
 * (SPI refuses the two counts differing).
 */
void
gunique_keys_insert(GuniqueGlobalKey *gk, GuniqueKeyBatch *batch)
{
	bool		bulk = (batch->nrows >= KEYS_BULK);
	int			nargs = bulk ? gk->nkeys + 1 : batch->nrows * (gk->nkeys + 1);
	Datum	   *args;
	Oid			save_user;
	int			save_sec;
	int			ret;
	uint64		added;

	if (batch->nrows == 0)
		return;
	args = palloc(sizeof(Datum) * nargs);
	if (bulk)
	{
		for (int k = 0; k <= gk->nkeys; k++)
			args[k] = column_array(gk, batch, k);
	}
	else
	{
		for (int r = 0; r < batch->nrows; r++)
			row_arguments(gk, batch, r, true, args + r * (gk->nkeys + 1));
	}
	keys_connect(gk, &save_user, &save_sec);
	if (batch->nrows == 1)
		ret = SPI_execute_plan(key_statement(gk, KEYS_INSERT), args, NULL,
							   false, 0);
	else
	{
		/*
		 * Planned with its values, not kept: a plan per row count would be
		 * kept for every count met, and Citus cannot plan an INSERT ...
		 * SELECT over parameters it is not given (a generic plan).
		 */
		KeyStatement which = bulk ? KEYS_INSERT_BULK : KEYS_INSERT;
		Oid		   *types = palloc(sizeof(Oid) * nargs);	/* in SPI's context */

		statement_types(gk, which, batch->nrows, types);
		ret = SPI_execute_with_args(statement_text(gk, which, batch->nrows),
									nargs, types, args, NULL, false, 0);
	}
	if (ret != (bulk ? SPI_OK_SELECT : SPI_OK_INSERT) ||
		(bulk && SPI_processed != 1))
		elog(ERROR, "inserting into key table \"%s\" failed",
			 get_rel_name(gk->keytable));
	if (bulk)
	{
		bool		isnull;

		added = DatumGetInt64(SPI_getbinval(SPI_tuptable->vals[0],
											SPI_tuptable->tupdesc, 1, &isnull));
	}
	else
		added = SPI_processed;
	if (added != (uint64) batch->nrows)
		report_duplicate_in_batch(gk, batch);
	keys_finish(save_user, save_sec);
	pfree(args);
}

/*
 * Empties the key table, after a TRUNCATE of its table by a user who may
 * truncate the table (and needs no privilege on the key table).
 */
void
gunique_keys_truncate(GuniqueGlobalKey *gk)
{
	Oid			save_user;
	int			save_sec;

	keys_connect(gk, &save_user, &save_sec);
	if (SPI_execute(psprintf("TRUNCATE %s",
							 quote_qualified_identifier(GUNIQUE_KEYS_SCHEMA,
														get_rel_name(gk->keytable))),
					false, 0) != SPI_OK_UTILITY)
		elog(ERROR, "truncating key table \"%s\" failed",
			 get_rel_name(gk->keytable));
	keys_finish(save_user, save_sec);
}

/* Removes the batch's keys from the key table, in this transaction. */
void
gunique_keys_delete(GuniqueGlobalKey *gk, GuniqueKeyBatch *batch)
{
	Datum		args[INDEX_MAX_KEYS + 1];
	Oid			save_user;
	int			save_sec;

	if (batch->nrows == 0)
		return;
	keys_connect(gk, &save_user, &save_sec);
	if (batch->nrows > 1 && gk->nkeys == 1)
	{
		args[0] = column_array(gk, batch, 0);
		if (SPI_execute_plan(key_statement(gk, KEYS_DELETE_MANY), args, NULL,
							 false, 0) != SPI_OK_DELETE)
			elog(ERROR, "deleting from key table \"%s\" failed",
				 get_rel_name(gk->keytable));
	}
	else
	{
		for (int i = 0; i < batch->nrows; i++)
		{
			row_arguments(gk, batch, i, false, args);
			if (SPI_execute_plan(key_statement(gk, KEYS_DELETE_ONE), args, NULL,
								 false, 0) != SPI_OK_DELETE)
				elog(ERROR, "deleting from key table \"%s\" failed",
					 get_rel_name(gk->keytable));
		}
	}
	keys_finish(save_user, save_sec);
}

/* "(a, b)" of the columns of a key table, each with a prefix. */
static char *
key_columns(GuniqueGlobalKey *gk, const char *prefix, bool with_dist)
{
	StringInfoData buf;

	initStringInfo(&buf);
	for (int i = 1; i <= gk->nkeys + (with_dist ? 1 : 0); i++)
		appendStringInfo(&buf, "%s%s%s", i > 1 ? ", " : "", prefix,
						 quote_identifier(get_attname(gk->keytable, i, false)));
	return buf.data;
}

/*
 * Invariant K, checked across the cluster: the table's rows with a whole
 * key, and the key table's rows, as (key, distribution value), are the same
 * set, and no key is held twice.  Both sides are read into the node that
 * runs it (materialized CTEs, which Citus runs first and joins here), in
 * the statement's snapshot on each node: run it with the table locked
 * (gunique_verify's lock) for an answer that no concurrent write blurs.
 * As the key table's owner, as every read of it (the caller's privileges
 * on the table are gunique_verify's to check).
 */
void
gunique_citus_verify(GuniqueGlobalKey *gk, GuniqueVerifyReport report,
					 void *arg)
{
	Oid			relid = IndexGetRelation(gk->topindex, false);
	char	   *table = quote_qualified_identifier(get_namespace_name(get_rel_namespace(relid)),
												   get_rel_name(relid));
	char	   *keytable = quote_qualified_identifier(GUNIQUE_KEYS_SCHEMA,
													  get_rel_name(gk->keytable));
	const char *first = quote_identifier(get_attname(gk->keytable, 1, false));
	const char *dist = quote_identifier(get_attname(gk->keytable, gk->nkeys + 1,
													false));
	StringInfoData sql;
	Oid			save_user;
	int			save_sec;

	initStringInfo(&sql);
	appendStringInfo(&sql, "WITH t AS MATERIALIZED (SELECT %s FROM %s WHERE ",
					 key_columns(gk, "", true), table);
	for (int i = 1; i <= gk->nkeys; i++)
		appendStringInfo(&sql, "%s%s IS NOT NULL", i > 1 ? " AND " : "",
						 quote_identifier(get_attname(gk->keytable, i, false)));
	appendStringInfo(&sql, "), k AS MATERIALIZED (SELECT %s FROM %s) ",
					 key_columns(gk, "", true), keytable);
	appendStringInfo(&sql,
					 "SELECT 1, (t.%s IS NULL)::int, row(%s)::text, coalesce(t.%s, k.%s)::text, NULL "
					 "FROM t FULL JOIN k USING (%s) WHERE t.%s IS NULL OR k.%s IS NULL "
					 "UNION ALL SELECT 2, 0, row(%s)::text, NULL, count(*) FROM t GROUP BY %s "
					 "HAVING count(*) > 1",
					 first, key_columns(gk, "", false), dist, dist,
					 key_columns(gk, "", true), first, first,
					 key_columns(gk, "", false), key_columns(gk, "", false));

	keys_connect(gk, &save_user, &save_sec);
	if (SPI_execute(sql.data, true, 0) != SPI_OK_SELECT)
		elog(ERROR, "checking key table \"%s\" failed", get_rel_name(gk->keytable));
	for (uint64 i = 0; i < SPI_processed; i++)
	{
		HeapTuple	tuple = SPI_tuptable->vals[i];
		TupleDesc	desc = SPI_tuptable->tupdesc;
		char	   *kind = SPI_getvalue(tuple, desc, 1);
		char	   *in_keys_only = SPI_getvalue(tuple, desc, 2);
		char	   *key = psprintf("(%s)=%s", key_columns(gk, "", false),
								   SPI_getvalue(tuple, desc, 3));
		char	   *value = SPI_getvalue(tuple, desc, 4);

		if (strcmp(kind, "2") == 0)
			report(arg, "duplicate key",
				   psprintf("Key %s is held by %s rows of the table.", key,
							SPI_getvalue(tuple, desc, 5)));
		else if (strcmp(in_keys_only, "1") == 0)
			report(arg, "key table not exact",
				   psprintf("Key %s with (%s)=(%s) is in key table \"%s\" but in no row of the table.",
							key, dist, value ? value : "NULL",
							get_rel_name(gk->keytable)));
		else
			report(arg, "key table not exact",
				   psprintf("Key %s of the row with (%s)=(%s) is not in key table \"%s\".",
							key, dist, value ? value : "NULL",
							get_rel_name(gk->keytable)));
	}
	keys_finish(save_user, save_sec);
}

/*
 * The global key whose key table is named after a top index, for
 * gunique_verify (NULL when it has none).
 */
GuniqueGlobalKey *
gunique_citus_global_key_of(Oid topindex)
{
	Relation	rel;
	GuniqueGlobalKey *gk;

	if (!gunique_citus_present() || !OidIsValid(keytable_of_top(topindex)))
		return NULL;
	rel = relation_open(IndexGetRelation(topindex, false), AccessShareLock);
	gk = global_key(rel, topindex);
	relation_close(rel, AccessShareLock);
	return gk;
}

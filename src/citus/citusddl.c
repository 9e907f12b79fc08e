/*-------------------------------------------------------------------------
 *
 * citusddl.c
 *	  Utility statements on distributed tables with a global key: CREATE
 *	  INDEX ... USING gunique makes and fills the key table, TRUNCATE
 *	  empties it too, COPY goes through INSERT, and what would leave the
 *	  key table behind its table is refused.
 *
 * Only on the node a user's statement reaches: statements that Citus
 * itself sends to other nodes (its DDL propagation turned off for them)
 * pass untouched.  The design: src/citus/README.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/relation.h"
#include "access/table.h"
#include "catalog/pg_class.h"
#include "catalog/pg_database.h"
#include "catalog/namespace.h"
#include "catalog/pg_type.h"
#include "commands/defrem.h"
#include "commands/extension.h"
#include "executor/spi.h"
#include "lib/stringinfo.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "tcop/utility.h"
#include "utils/acl.h"
#include "utils/builtins.h"
#include "utils/guc.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/ruleutils.h"
#include "utils/rel.h"

#include "compat.h"
#include "gunique.h"
#include "citus/citusddl.h"
#include "citus/globalkey.h"
#include "ddl/ddl.h"

/* Whether Citus is installed here and propagates this session's DDL. */
static bool
citus_propagates(void)
{
	const char *propagate;

	if (!OidIsValid(get_extension_oid("citus", true)))
		return false;
	propagate = GetConfigOption("citus.enable_ddl_propagation", true, false);
	return propagate == NULL || strcmp(propagate, "on") == 0;
}

/*
 * Whether this backend serves Citus itself (the application_name Citus
 * gives its own connections, "citus_internal gpid=..."): the statements it
 * runs are Citus's metadata work, such as worker_drop_all_shell_tables on
 * a node added again, which drops the key tables' shells with the rest.
 */
static bool
citus_internal_backend(void)
{
	return application_name != NULL &&
		strncmp(application_name, "citus_internal", strlen("citus_internal")) == 0;
}

/*
 * The distribution column of a hash-distributed Citus table, or NULL for
 * any other table.
 */
static char *
distribution_column(Oid relid)
{
	Oid			argtypes[1] = {REGCLASSOID};
	Datum		args[1] = {ObjectIdGetDatum(relid)};
	char	   *result = NULL;

	SPI_connect();
	if (SPI_execute_with_args("SELECT pg_catalog.column_to_column_name(logicalrelid, partkey) "
							  "FROM pg_catalog.pg_dist_partition "
							  "WHERE logicalrelid = $1 AND partmethod = 'h'",
							  1, argtypes, args, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		char	   *name = SPI_getvalue(SPI_tuptable->vals[0], SPI_tuptable->tupdesc, 1);

		if (name != NULL)
			result = MemoryContextStrdup(TopTransactionContext, name);
	}
	SPI_finish();
	return result;
}

/*
 * Whether relid is a shard, "<table>_<shard id>", of a Citus table that
 * this node's metadata lists.
 */
static bool
is_citus_shard(Oid relid)
{
	char	   *name = get_rel_name(relid);
	char	   *suffix = name ? strrchr(name, '_') : NULL;
	Oid			argtypes[1] = {INT8OID};
	Datum		args[1];
	bool		result = false;
	char	   *end;
	int64		shardid;

	if (suffix == NULL || suffix[1] == '\0')
		return false;
	errno = 0;
	shardid = strtoi64(suffix + 1, &end, 10);
	if (errno != 0 || *end != '\0' || shardid <= 0)
		return false;
	args[0] = Int64GetDatum(shardid);
	SPI_connect();
	if (SPI_execute_with_args("SELECT logicalrelid FROM pg_catalog.pg_dist_shard WHERE shardid = $1",
							  1, argtypes, args, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed == 1)
	{
		bool		isnull;
		Oid			table = DatumGetObjectId(SPI_getbinval(SPI_tuptable->vals[0],
														   SPI_tuptable->tupdesc,
														   1, &isnull));
		char	   *tname = isnull ? NULL : get_rel_name(table);

		result = tname != NULL &&
			get_rel_namespace(table) == get_rel_namespace(relid) &&
			strlen(tname) == (size_t) (suffix - name) &&
			strncmp(tname, name, suffix - name) == 0;
	}
	SPI_finish();
	return result;
}

/*
 * The CREATE INDEX Citus sends to the shards of a partitioned table for a
 * global key: gunique made the statement non-unique for PostgreSQL on the
 * coordinator, which refuses a unique index on a partitioned table that
 * leaves out its partition key, and Citus sends the shards that statement.
 * On the shard it is made unique again and goes to gunique's partitioned
 * DDL (src/citus/README, B19).  Only a non-unique CREATE INDEX ... USING
 * gunique on a partitioned shard of a Citus table qualifies: gunique
 * refuses that statement from anyone else, and Citus sends it over
 * connections whether or not it turned their DDL propagation off.
 */
static bool
shard_index(GuniqueUtilityCall *u, IndexStmt *stmt)
{
	Oid			relid;

	if (stmt->unique || stmt->accessMethod == NULL ||
		strcmp(stmt->accessMethod, GUNIQUE_AM_NAME) != 0 ||
		stmt->relation == NULL)
		return false;
	relid = RangeVarGetRelid(stmt->relation, NoLock, true);
	if (!OidIsValid(relid) || get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE ||
		!is_citus_shard(relid))
		return false;
	stmt = (IndexStmt *) gunique_utility_writable(u);
	stmt->unique = true;
	gunique_utility_run(u);
	return true;
}

/* Runs one statement through SPI, or raises the error it raised. */
static void
run_sql(const char *sql)
{
	SPI_connect();
	if (SPI_execute(sql, false, 0) < 0)
		elog(ERROR, "could not run \"%s\"", sql);
	SPI_finish();
}

/*
 * What a global key cannot be made for (the key must be columns, compared
 * as the key table's primary key compares them).
 */
static void
check_index_statement(IndexStmt *stmt, Relation rel, const char *distcol)
{
	ListCell   *lc;

	if (stmt->concurrent)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("CREATE INDEX CONCURRENTLY of a global gunique key on distributed table \"%s\" is not supported",
						RelationGetRelationName(rel)),
				 errdetail("The key table is filled in the transaction that creates the index, which CONCURRENTLY does not have."),
				 errhint("Create the index without CONCURRENTLY.")));
	if (stmt->whereClause != NULL || stmt->nulls_not_distinct)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("a global gunique key on distributed table \"%s\" cannot be partial or NULLS NOT DISTINCT",
						RelationGetRelationName(rel)),
				 errdetail("The key table holds the keys of all rows whose key has no NULL.")));
	foreach(lc, stmt->indexParams)
	{
		IndexElem  *elem = lfirst(lc);

		if (elem->name == NULL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a global gunique key on distributed table \"%s\" must be made of columns",
							RelationGetRelationName(rel)),
					 errdetail("The key table holds copies of the key columns; an expression has no column to copy.")));
		if (elem->opclass != NIL || elem->collation != NIL)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a global gunique key on distributed table \"%s\" must use the default operator class and collation",
							RelationGetRelationName(rel)),
					 errdetail("The key table's primary key compares the key with the columns' defaults.")));
		if (strcmp(elem->name, distcol) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("a global gunique key on distributed table \"%s\" cannot include its distribution column \"%s\"",
							RelationGetRelationName(rel), distcol),
					 errdetail("Citus enforces such a key on each shard by itself."),
					 errhint("Use a unique btree index.")));
	}
}

/* "name type COLLATE c" for column attno of rel. */
static void
append_column(StringInfo buf, Relation rel, AttrNumber attno)
{
	Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), attno - 1);

	appendStringInfo(buf, "%s %s", quote_identifier(NameStr(att->attname)),
					 format_type_with_typemod(att->atttypid, att->atttypmod));
	if (OidIsValid(att->attcollation) &&
		att->attcollation != get_typcollation(att->atttypid))
		appendStringInfo(buf, " COLLATE %s",
						 generate_collation_name(att->attcollation));
}

static void fill_key_table(Relation rel, Oid indexoid);

/*
 * Makes the key table of a global key about to be created, named after
 * the index, and distributes it by its first key column: before the index,
 * whose build on every shard makes the transaction's later schema changes
 * fail in Citus.
 *
 * The schema gunique_keys and the key table are made as the index's
 * creator, who owns the key table and fills it next: Citus refuses a
 * transaction's access to placements, or to a schema, that another user
 * made in it over its own connections.  USAGE and CREATE on the schema
 * for PUBLIC let whoever may index a table make its global key (a table
 * that takes a key table's name first is refused above, loudly)
 * (src/citus/README, "Privileges").
 */
static void
make_key_table(Relation rel, IndexStmt *stmt, const char *distcol)
{
	char	   *name = psprintf("%s.%s", get_namespace_name(RelationGetNamespace(rel)),
								stmt->idxname);
	char	   *qualified;
	StringInfoData sql;
	ListCell   *lc;

	if (strlen(name) >= NAMEDATALEN)
		ereport(ERROR,
				(errcode(ERRCODE_NAME_TOO_LONG),
				 errmsg("the key table name \"%s\" is too long", name),
				 errdetail("A global gunique key's table is named \"<schema>.<index>\", which must fit in %d bytes.",
						   NAMEDATALEN - 1),
				 errhint("Give the index a shorter name.")));
	qualified = quote_qualified_identifier(GUNIQUE_KEYS_SCHEMA, name);

	if (gunique_citus_present())
	{
		if (OidIsValid(get_relname_relid(name,
										 get_namespace_oid(GUNIQUE_KEYS_SCHEMA, false))))
			ereport(ERROR,
					(errcode(ERRCODE_DUPLICATE_TABLE),
					 errmsg("table \"%s\" already exists in schema \"%s\"",
							name, GUNIQUE_KEYS_SCHEMA),
					 errdetail("The global gunique key would keep its keys in a table of that name, which another table has: a pg_dump of a coordinator, for one, restores key tables as plain tables."),
					 errhint("Drop the table, then create the index again: it fills a new key table from the rows.")));
	}
	else
	{
		if (gunique_database_create_aclcheck() != ACLCHECK_OK)
			ereport(ERROR,
					(errcode(ERRCODE_INSUFFICIENT_PRIVILEGE),
					 errmsg("permission denied to create schema \"%s\"",
							GUNIQUE_KEYS_SCHEMA),
					 errdetail("The first global gunique key of a database makes the schema of the key tables, and its creator owns it."),
					 errhint("Make the first global key as a superuser, or as a user with CREATE on the database.")));
		run_sql("CREATE SCHEMA " GUNIQUE_KEYS_SCHEMA);
		run_sql("GRANT USAGE, CREATE ON SCHEMA " GUNIQUE_KEYS_SCHEMA " TO PUBLIC");
	}
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TABLE %s (", qualified);
	foreach(lc, stmt->indexParams)
	{
		append_column(&sql, rel, get_attnum(RelationGetRelid(rel),
											((IndexElem *) lfirst(lc))->name));
		appendStringInfoString(&sql, " NOT NULL, ");
	}
	append_column(&sql, rel, get_attnum(RelationGetRelid(rel), distcol));
	appendStringInfoString(&sql, ", PRIMARY KEY (");
	foreach(lc, stmt->indexParams)
		appendStringInfo(&sql, "%s%s", lc == list_head(stmt->indexParams) ? "" : ", ",
						 quote_identifier(((IndexElem *) lfirst(lc))->name));
	appendStringInfoString(&sql, "))");
	run_sql(sql.data);

	resetStringInfo(&sql);
	appendStringInfo(&sql, "SELECT pg_catalog.create_distributed_table(%s, %s, colocate_with => 'none')",
					 quote_literal_cstr(qualified),
					 quote_literal_cstr(((IndexElem *) linitial(stmt->indexParams))->name));
	run_sql(sql.data);
	CommandCounterIncrement();
}

/*
 * Adds the keys of every row of rel to its global key's key table, in
 * batches, raising 23505 for a duplicate.
 */
static void
fill_key_table(Relation rel, Oid indexoid)
{
	GuniqueGlobalKey *gk = gunique_citus_planned_key(RelationGetRelid(rel),
													 indexoid);
	StringInfoData sql;
	Portal		portal;
	SPIPlanPtr	plan;

	initStringInfo(&sql);
	appendStringInfoString(&sql, "SELECT ");
	for (int i = 0; i < gk->nkeys; i++)
		appendStringInfo(&sql, "%s, ",
						 quote_identifier(get_attname(RelationGetRelid(rel),
													  gk->keyattno[i], false)));
	appendStringInfo(&sql, "%s FROM %s WHERE",
					 quote_identifier(get_attname(RelationGetRelid(rel),
												  gk->distattno, false)),
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												RelationGetRelationName(rel)));
	for (int i = 0; i < gk->nkeys; i++)
		appendStringInfo(&sql, "%s %s IS NOT NULL", i > 0 ? " AND" : "",
						 quote_identifier(get_attname(RelationGetRelid(rel),
													  gk->keyattno[i], false)));

	SPI_connect();
	plan = SPI_prepare(sql.data, 0, NULL);
	if (plan == NULL)
		elog(ERROR, "could not read the keys of \"%s\"", RelationGetRelationName(rel));
	portal = SPI_cursor_open(NULL, plan, NULL, NULL, true);
	for (;;)
	{
		GuniqueKeyBatch *batch = gunique_keybatch_new(gk);
		Datum		keys[INDEX_MAX_KEYS];

		SPI_cursor_fetch(portal, true, 10000);
		if (SPI_processed == 0)
			break;
		for (uint64 r = 0; r < SPI_processed; r++)
		{
			bool		isnull;
			Datum		dist;

			for (int i = 0; i < gk->nkeys; i++)
				keys[i] = SPI_getbinval(SPI_tuptable->vals[r],
										SPI_tuptable->tupdesc, i + 1, &isnull);
			dist = SPI_getbinval(SPI_tuptable->vals[r], SPI_tuptable->tupdesc,
								 gk->nkeys + 1, &isnull);
			gunique_keybatch_add(gk, batch, keys, dist);
		}
		gunique_keys_insert(gk, batch);
	}
	SPI_cursor_close(portal);
	SPI_finish();
}

/*
 * The name PostgreSQL would give an index without one ("<table>_<columns>_
 * idx"), chosen here because the key table is made, under that name,
 * before the index.
 */
static char *
index_name(Relation rel, IndexStmt *stmt)
{
	StringInfoData cols;
	ListCell   *lc;

	initStringInfo(&cols);
	foreach(lc, stmt->indexParams)
		appendStringInfo(&cols, "%s%s", cols.len > 0 ? "_" : "",
						 ((IndexElem *) lfirst(lc))->name);
	return ChooseRelationName(RelationGetRelationName(rel), cols.data, "idx",
							  RelationGetNamespace(rel), true);
}

/*
 * Runs a statement that makes a global key's index on a distributed table
 * with citus.allow_unsafe_constraints on, for it alone (B16).
 */
static void
run_allowing_global_keys(GuniqueUtilityCall *u)
{
	int			nest = NewGUCNestLevel();

	(void) set_config_option("citus.allow_unsafe_constraints", "on",
							 PGC_USERSET, PGC_S_SESSION, GUC_ACTION_SAVE,
							 true, 0, false);
	gunique_utility_run(u);
	AtEOXact_GUC(true, nest);
}

/*
 * CREATE TABLE ... PARTITION OF a distributed table with global keys: the
 * new partition is empty, so its keys are all in the key table already
 * (none), and its index of each global key is allowed as the parent's is.
 */
static bool
create_partition(GuniqueUtilityCall *u, CreateStmt *stmt)
{
	Oid			parent;
	Relation	rel;
	bool		has_keys;

	if (stmt->partbound == NULL || list_length(stmt->inhRelations) != 1)
		return false;
	parent = RangeVarGetRelid(linitial(stmt->inhRelations), NoLock, true);
	if (!OidIsValid(parent) || get_rel_relkind(parent) != RELKIND_PARTITIONED_TABLE)
		return false;
	rel = relation_open(parent, AccessShareLock);
	has_keys = gunique_citus_global_keys(rel) != NIL;
	relation_close(rel, AccessShareLock);
	if (!has_keys)
		return false;
	run_allowing_global_keys(u);
	return true;
}

/*
 * CREATE UNIQUE INDEX ... USING gunique on a hash-distributed table whose
 * key leaves out the distribution column: Citus is told the index is
 * allowed (citus.allow_unsafe_constraints, for this statement only: the
 * key table is what makes it safe), makes it on every shard, and the key
 * table is made and filled after.
 */
static bool
create_global_key(GuniqueUtilityCall *u, IndexStmt *stmt)
{
	Oid			relid;
	Relation	rel;
	char	   *distcol;
	Oid			indexoid;

	if (stmt->accessMethod == NULL ||
		strcmp(stmt->accessMethod, GUNIQUE_AM_NAME) != 0 || !stmt->unique)
		return false;
	relid = RangeVarGetRelid(stmt->relation, ShareLock, true);
	if (!OidIsValid(relid) || (distcol = distribution_column(relid)) == NULL)
		return false;

	rel = table_open(relid, NoLock);
	check_index_statement(stmt, rel, distcol);
	stmt = (IndexStmt *) gunique_utility_writable(u);
	if (stmt->idxname == NULL)
		stmt->idxname = index_name(rel, stmt);
	make_key_table(rel, stmt, distcol);
	table_close(rel, NoLock);

	run_allowing_global_keys(u);
	CommandCounterIncrement();

	rel = table_open(relid, NoLock);
	indexoid = get_relname_relid(stmt->idxname, RelationGetNamespace(rel));
	if (!OidIsValid(indexoid))
		elog(ERROR, "index \"%s\" was not created", stmt->idxname);
	fill_key_table(rel, indexoid);
	table_close(rel, NoLock);
	return true;
}

/* A partition's global keys: refused, with the statement named. */
static void
refuse_partition(Relation rel, const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
			 errmsg("%s of partition \"%s\" is not supported", what,
					RelationGetRelationName(rel)),
			 errdetail("Its table has a global gunique key, whose key table would keep the keys of the partition's rows."),
			 errhint("Use DELETE on the partition, or the statement on the whole table.")));
}

/*
 * TRUNCATE of tables with global keys truncates their key tables after
 * them, in the same transaction, as the key tables' owner (what the user
 * may truncate is the table).
 */
static bool
truncate_global_keys(GuniqueUtilityCall *u, TruncateStmt *stmt)
{
	List	   *keys = NIL;
	ListCell   *lc;

	foreach(lc, stmt->relations)
	{
		Oid			relid = RangeVarGetRelid(lfirst(lc), AccessExclusiveLock, true);
		Relation	rel;
		List	   *gks;

		if (!OidIsValid(relid))
			continue;
		rel = relation_open(relid, NoLock);
		gks = gunique_citus_global_keys(rel);
		if (gks != NIL && rel->rd_rel->relispartition)
			refuse_partition(rel, "TRUNCATE");
		keys = list_concat(keys, gks);
		relation_close(rel, NoLock);
	}
	if (keys == NIL)
		return false;
	gunique_utility_run(u);
	foreach(lc, keys)
		gunique_keys_truncate(lfirst(lc));
	return true;
}

/*
 * COPY ... FROM into a table with global keys: the rows are copied into a
 * temporary table with the statement's columns, then inserted with INSERT
 * ... SELECT, which keeps the key tables as any INSERT does.
 */
static bool
copy_global_keys(GuniqueUtilityCall *u, CopyStmt *stmt)
{
	Oid			relid;
	Relation	rel;
	List	   *gks;
	StringInfoData cols;
	StringInfoData sql;
	static int	copies = 0;
	char	   *staging;
	uint64		copied;
	ListCell   *lc;

	if (!stmt->is_from || stmt->relation == NULL)
		return false;
	relid = RangeVarGetRelid(stmt->relation, RowExclusiveLock, true);
	if (!OidIsValid(relid))
		return false;
	rel = relation_open(relid, NoLock);
	gks = gunique_citus_global_keys(rel);
	if (gks == NIL)
	{
		relation_close(rel, NoLock);
		return false;
	}

	initStringInfo(&cols);
	if (stmt->attlist != NIL)
		foreach(lc, stmt->attlist)
			appendStringInfo(&cols, "%s%s", cols.len > 0 ? ", " : "",
							 quote_identifier(strVal(lfirst(lc))));
	else
		for (int i = 0; i < RelationGetDescr(rel)->natts; i++)
		{
			Form_pg_attribute att = TupleDescAttr(RelationGetDescr(rel), i);

			if (att->attisdropped || att->attgenerated)
				continue;
			appendStringInfo(&cols, "%s%s", cols.len > 0 ? ", " : "",
							 quote_identifier(NameStr(att->attname)));
		}

	staging = psprintf("gunique_copy_%d_%d", MyProcPid, ++copies);
	initStringInfo(&sql);
	appendStringInfo(&sql, "CREATE TEMPORARY TABLE %s AS SELECT %s FROM %s WITH NO DATA",
					 quote_identifier(staging), cols.data,
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												RelationGetRelationName(rel)));
	run_sql(sql.data);

	stmt = (CopyStmt *) gunique_utility_writable(u);
	stmt->relation = makeRangeVar("pg_temp", staging, -1);
	stmt->attlist = NIL;
	gunique_utility_run(u);
	copied = u->qc ? u->qc->nprocessed : 0;

	resetStringInfo(&sql);
	appendStringInfo(&sql, "INSERT INTO %s (%s) SELECT %s FROM pg_temp.%s",
					 quote_qualified_identifier(get_namespace_name(RelationGetNamespace(rel)),
												RelationGetRelationName(rel)),
					 cols.data, cols.data, quote_identifier(staging));
	run_sql(sql.data);
	resetStringInfo(&sql);
	appendStringInfo(&sql, "DROP TABLE pg_temp.%s", quote_identifier(staging));
	run_sql(sql.data);
	if (u->qc)
		SetQueryCompletion(u->qc, CMDTAG_COPY, copied);
	relation_close(rel, NoLock);
	return true;
}

/* Whether a key table is named after an index of the schema. */
static bool
schema_has_keys(const char *schema)
{
	Oid			argtypes[1] = {TEXTOID};
	Datum		args[1] = {CStringGetTextDatum(psprintf("%s.", schema))};
	bool		result;

	SPI_connect();
	result = SPI_execute_with_args("SELECT 1 FROM pg_catalog.pg_class c "
								   "JOIN pg_catalog.pg_namespace n ON n.oid = c.relnamespace "
								   "WHERE n.nspname = '" GUNIQUE_KEYS_SCHEMA "' "
								   "AND left(c.relname, length($1)) = $1",
								   1, argtypes, args, NULL, true, 1) == SPI_OK_SELECT &&
		SPI_processed > 0;
	SPI_finish();
	return result;
}

/* Drops a key table through Citus, which drops its shards too. */
static void
drop_key_table(Oid keytable)
{
	run_sql(psprintf("DROP TABLE %s",
					 quote_qualified_identifier(GUNIQUE_KEYS_SCHEMA,
												get_rel_name(keytable))));
}

/* Whether column "name" of relid is one of gk's key columns. */
static bool
is_key_column(GuniqueGlobalKey *gk, Oid relid, const char *name)
{
	for (int i = 0; i < gk->nkeys; i++)
		if (strcmp(get_attname(relid, gk->keyattno[i], false), name) == 0)
			return true;
	return false;
}

/*
 * The global keys of a table named by a statement, opened with "lockmode"
 * into *rel (NULL when it is not a table or has none).
 */
static List *
statement_keys(RangeVar *rv, LOCKMODE lockmode, Relation *rel)
{
	Oid			relid = rv ? RangeVarGetRelid(rv, NoLock, true) : InvalidOid;
	List	   *gks;

	*rel = NULL;
	if (!OidIsValid(relid) ||
		(get_rel_relkind(relid) != RELKIND_RELATION &&
		 get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE))
		return NIL;
	*rel = relation_open(relid, lockmode);
	gks = gunique_citus_global_keys(*rel);
	if (gks == NIL)
	{
		relation_close(*rel, lockmode);
		*rel = NULL;
	}
	return gks;
}

/*
 * Renames that would part an index from its key table's name, or the
 * key table from the distribution column it names: refused.
 */
static void
check_rename(RenameStmt *stmt)
{
	Oid			relid;
	Relation	rel;
	List	   *gks;
	ListCell   *lc;

	/* ALTER TABLE renames an index too */
	if ((stmt->renameType == OBJECT_INDEX || stmt->renameType == OBJECT_TABLE) &&
		stmt->relation != NULL &&
		OidIsValid(relid = RangeVarGetRelid(stmt->relation, NoLock, true)) &&
		(get_rel_relkind(relid) == RELKIND_INDEX ||
		 get_rel_relkind(relid) == RELKIND_PARTITIONED_INDEX) &&
		OidIsValid(gunique_citus_keytable_of(relid)))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot rename index \"%s\"", get_rel_name(relid)),
				 errdetail("It is a global gunique key, whose key table is named after it."),
				 errhint("Drop the index and create it again under the new name.")));
	if (stmt->renameType == OBJECT_SCHEMA &&
		OidIsValid(get_namespace_oid(stmt->subname, true)) &&
		schema_has_keys(stmt->subname))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot rename schema \"%s\"", stmt->subname),
				 errdetail("It holds global gunique keys, whose key tables are named after the schema.")));
	if (stmt->renameType != OBJECT_COLUMN)
		return;
	gks = statement_keys(stmt->relation, AccessShareLock, &rel);
	foreach(lc, gks)
	{
		GuniqueGlobalKey *gk = lfirst(lc);

		if (strcmp(get_attname(RelationGetRelid(rel), gk->distattno, false),
				   stmt->subname) == 0)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot rename column \"%s\" of table \"%s\"",
							stmt->subname, RelationGetRelationName(rel)),
					 errdetail("It is the distribution column that the key table of global gunique key \"%s\" names.",
							   get_rel_name(gk->topindex)),
					 errhint("Drop the index, rename the column, and create the index again.")));
	}
	if (rel)
		relation_close(rel, AccessShareLock);
}

/* A table with global keys moved to another schema: refused. */
static void
check_set_schema(AlterObjectSchemaStmt *stmt)
{
	Relation	rel;

	if (statement_keys(stmt->relation, AccessShareLock, &rel) != NIL)
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("cannot move table \"%s\" to another schema",
						RelationGetRelationName(rel)),
				 errdetail("It has a global gunique key, whose key table is named after the index's schema.")));
}

/*
 * ALTER TABLE of a table with global keys: a partition joining or
 * leaving, and a new type for a key column or the distribution column
 * (which drops the index and makes it again, without its key table), are
 * refused; a key column dropped drops its key table first, as the index
 * goes with the column.
 */
static void
alter_global_keys(AlterTableStmt *stmt)
{
	Relation	rel;
	List	   *gks = statement_keys(stmt->relation, AccessShareLock, &rel);
	ListCell   *lc;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst(lc);
		ListCell   *lg;

		if (gks == NIL)
			break;
		if (cmd->subtype == AT_AttachPartition ||
			cmd->subtype == AT_DetachPartition ||
			cmd->subtype == AT_DetachPartitionFinalize)
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("cannot attach or detach a partition of table \"%s\"",
							RelationGetRelationName(rel)),
					 errdetail("The table has a global gunique key, whose key table would have to gain or lose the partition's keys."),
					 errhint("Create new partitions with CREATE TABLE ... PARTITION OF, and move rows with INSERT and DELETE.")));
		foreach(lg, gks)
		{
			GuniqueGlobalKey *gk = lfirst(lg);
			Oid			relid = RelationGetRelid(rel);

			if (GUNIQUE_AT_REBUILDS_INDEXES(cmd->subtype) &&
				(is_key_column(gk, relid, cmd->name) ||
				 strcmp(get_attname(relid, gk->distattno, false), cmd->name) == 0))
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot change the type of column \"%s\" of table \"%s\"",
								cmd->name, RelationGetRelationName(rel)),
						 errdetail("Global gunique key \"%s\" would be made again without its key table.",
								   get_rel_name(gk->topindex)),
						 errhint("Drop the index, change the column, and create the index again.")));
			if (cmd->subtype == AT_DropColumn && is_key_column(gk, relid, cmd->name))
				drop_key_table(gk->keytable);
		}
	}
	if (rel)
		relation_close(rel, AccessShareLock);
}

/*
 * DROP INDEX and DROP TABLE of global keys drop their key tables first,
 * through Citus: a key table dropped along with its index by a dependency
 * would leave its shards behind on the workers.  A partition is refused,
 * as for TRUNCATE; any other way to drop the index is refused when it
 * comes (gunique_citus_object_access).
 */
static void
drop_global_keys(DropStmt *stmt)
{
	ListCell   *lc;

	if (stmt->removeType != OBJECT_INDEX && stmt->removeType != OBJECT_TABLE)
		return;
	foreach(lc, stmt->objects)
	{
		RangeVar   *rv = makeRangeVarFromNameList(lfirst(lc));
		Relation	rel;
		List	   *gks;
		ListCell   *lg;
		Oid			relid;

		if (stmt->removeType == OBJECT_INDEX)
		{
			relid = RangeVarGetRelid(rv, NoLock, true);
			if (!OidIsValid(relid) ||
				!OidIsValid(gunique_citus_keytable_of(relid)))
				continue;
			if (stmt->concurrent)
				ereport(ERROR,
						(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
						 errmsg("cannot drop global gunique key \"%s\" concurrently",
								get_rel_name(relid)),
						 errdetail("Its key table is dropped in the transaction that drops the index, which CONCURRENTLY does not have."),
						 errhint("Drop the index without CONCURRENTLY.")));
			drop_key_table(gunique_citus_keytable_of(relid));
			continue;
		}
		gks = statement_keys(rv, AccessExclusiveLock, &rel);
		if (gks != NIL && rel->rd_rel->relispartition)
			refuse_partition(rel, "DROP TABLE");
		foreach(lg, gks)
			drop_key_table(((GuniqueGlobalKey *) lfirst(lg))->keytable);
		if (rel)
			relation_close(rel, NoLock);
	}
}

/*
 * Object access, at the drop of an index: one whose key table is still
 * there is being dropped by a statement that did not drop the key table
 * first (DROP SCHEMA ... CASCADE, DROP OWNED, DROP EXTENSION ...), which
 * would leave the key table's shards behind: refused.  Statements Citus
 * sends from another node pass.
 */
void
gunique_citus_object_access(ObjectAccessType access, Oid classId,
							Oid objectId, int subId)
{
	char		relkind;

	if (access != OAT_DROP || classId != RelationRelationId || subId != 0 ||
		!gunique_citus_present())
		return;
	relkind = get_rel_relkind(objectId);
	if ((relkind != RELKIND_INDEX && relkind != RELKIND_PARTITIONED_INDEX) ||
		!OidIsValid(gunique_citus_keytable_of(objectId)) || !citus_propagates() ||
		citus_internal_backend())
		return;
	ereport(ERROR,
			(errcode(ERRCODE_DEPENDENT_OBJECTS_STILL_EXIST),
			 errmsg("cannot drop global gunique key \"%s\" this way",
					get_rel_name(objectId)),
			 errdetail("Its key table would be left behind on the workers."),
			 errhint("Drop the index, or its table, with DROP INDEX or DROP TABLE first.")));
}

/*
 * The utility hook's part: true when it ran the statement (through
 * "next"), false when the caller should run it as usual.
 */
bool
gunique_citus_utility(PlannedStmt *pstmt, const char *queryString,
					  bool readOnlyTree, ProcessUtilityContext context,
					  ParamListInfo params, QueryEnvironment *queryEnv,
					  DestReceiver *dest, QueryCompletion *qc,
					  ProcessUtility_hook_type next)
{
	Node	   *parsetree = pstmt->utilityStmt;
	GuniqueUtilityCall u = {pstmt, queryString, readOnlyTree, context, params,
	queryEnv, dest, qc, next};

	/*
	 * Only the statements below; never a catalog read for others (a
	 * ROLLBACK runs in a transaction that has failed).
	 */
	if (!IsA(parsetree, IndexStmt) && !IsA(parsetree, TruncateStmt) &&
		!IsA(parsetree, CopyStmt) && !IsA(parsetree, RenameStmt) &&
		!IsA(parsetree, CreateStmt) &&
		!IsA(parsetree, AlterObjectSchemaStmt) &&
		!IsA(parsetree, AlterTableStmt) && !IsA(parsetree, DropStmt))
		return false;
	if (!IsA(parsetree, IndexStmt) && !gunique_citus_present())
		return false;
	if (IsA(parsetree, IndexStmt) && gunique_citus_present() &&
		shard_index(&u, (IndexStmt *) parsetree))
		return true;
	if (!citus_propagates())
		return false;
	if (IsA(parsetree, IndexStmt))
		return create_global_key(&u, (IndexStmt *) parsetree);
	if (IsA(parsetree, TruncateStmt))
		return truncate_global_keys(&u, (TruncateStmt *) parsetree);
	if (IsA(parsetree, CopyStmt))
		return copy_global_keys(&u, (CopyStmt *) parsetree);
	if (IsA(parsetree, CreateStmt))
		return create_partition(&u, (CreateStmt *) parsetree);
	if (IsA(parsetree, RenameStmt))
		check_rename((RenameStmt *) parsetree);
	else if (IsA(parsetree, AlterObjectSchemaStmt))
		check_set_schema((AlterObjectSchemaStmt *) parsetree);
	else if (IsA(parsetree, AlterTableStmt))
		alter_global_keys((AlterTableStmt *) parsetree);
	else if (IsA(parsetree, DropStmt))
		drop_global_keys((DropStmt *) parsetree);
	return false;
}

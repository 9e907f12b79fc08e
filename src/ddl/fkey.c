/*-------------------------------------------------------------------------
 *
 * fkey.c
 *	  Foreign keys beside gunique indexes, before PostgreSQL 18.
 *
 * Before PostgreSQL 18, ATAddForeignKeyConstraint (through
 * transformFkeyCheckAttrs) takes the first unique index on the referenced
 * columns in OID order, and raises an internal error if it is not btree: it
 * has no other way to find the equality operators.  A table that has a
 * unique btree index on the same columns as a gunique index should not
 * depend on which of the two is older; after pg_restore it depends on their
 * names, and under pg_restore -j on chance.
 *
 * So while the utility hook runs an ALTER TABLE that adds foreign keys
 * (CREATE TABLE ... REFERENCES becomes one, and ADD COLUMN ... REFERENCES
 * is one), the gunique indexes that would be taken before a btree index on
 * the referenced columns are marked not unique in pg_index, and marked
 * unique again before the statement returns.  That is safe because:
 *
 * - the change is never committed, nor seen by anyone else: it is made and
 *	 undone in the statement's own (sub)transaction, and an error rolls it
 *	 back with everything else;
 * - the referenced table is locked first, as PostgreSQL locks it for a
 *	 foreign key (ShareRowExclusiveLock), after the altered table: no other
 *	 transaction can build, rebuild, attach or reindex its indexes meanwhile;
 * - only the referenced table's own indexes change, not the leaves of a
 *	 partitioned one: inserts into its partitions are checked as always;
 * - an insert into a table whose index is hidden, which only a function
 *	 run by the statement itself could make, is checked for uniqueness all
 *	 the same (see gunique_fkey_hidden); such functions, and event triggers
 *	 at the statement's end, are all that could see the index not unique;
 * - when the referenced table is the altered table, or a partition or
 *	 child of it, indexes are hidden only if the statement does nothing but
 *	 add foreign keys, since anything else could rebuild them.
 *
 * The foreign key then records and depends on the btree index.  Where there
 * is no btree alternative nothing is hidden, and the hook's clear error
 * stands.  From PostgreSQL 18 on foreign keys use gunique indexes, and none
 * of this is compiled.  src/README, "DDL and the merge" and B4.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/htup_details.h"
#include "access/table.h"
#include "catalog/namespace.h"
#include "catalog/pg_am.h"
#include "catalog/pg_class.h"
#include "catalog/pg_index.h"
#include "catalog/pg_inherits.h"
#include "commands/tablecmds.h"
#include "nodes/bitmapset.h"
#include "utils/lsyscache.h"
#include "utils/memutils.h"
#include "utils/rel.h"
#include "utils/syscache.h"

#include "compat.h"
#include "am/tree.h"
#include "ddl/fkey.h"

#ifdef GUNIQUE_NO_FOREIGN_KEYS

/* The gunique indexes that this backend has hidden, while it has. */
static List *hidden = NIL;

bool
gunique_fkey_hidden(Oid indexoid)
{
	return hidden != NIL && list_member_oid(hidden, indexoid);
}

/* The foreign keys an ALTER TABLE subcommand adds (ADD COLUMN's too). */
static List *
cmd_foreign_keys(AlterTableCmd *cmd)
{
	List	   *result = NIL;
	List	   *constraints = NIL;
	ListCell   *lc;

	if (cmd->subtype == AT_AddConstraint && IsA(cmd->def, Constraint))
		constraints = list_make1(cmd->def);
	else if (cmd->subtype == AT_AddColumn && IsA(cmd->def, ColumnDef))
		constraints = ((ColumnDef *) cmd->def)->constraints;

	foreach(lc, constraints)
	{
		Constraint *con = lfirst(lc);

		if (IsA(con, Constraint) && con->contype == CONSTR_FOREIGN)
			result = lappend(result, con);
	}
	return result;
}

/* The referenced columns as a set of attnums, or NULL if one is unknown. */
static Bitmapset *
referenced_columns(Oid pkoid, List *names)
{
	Bitmapset  *attrs = NULL;
	ListCell   *lc;

	foreach(lc, names)
	{
		AttrNumber	attnum = get_attnum(pkoid, strVal(lfirst(lc)));

		if (attnum <= 0)		/* PostgreSQL reports it */
			return NULL;
		attrs = bms_add_member(attrs, attnum);
	}
	return attrs;
}

/*
 * Would transformFkeyCheckAttrs take this index for a foreign key on exactly
 * these columns?  Its own test: as many key columns, unique, valid,
 * immediate, no predicate, no expressions, the same columns in any order.
 */
static bool
fk_could_use(Oid indexoid, Bitmapset *attrs)
{
	HeapTuple	tuple = SearchSysCache1(INDEXRELID, ObjectIdGetDatum(indexoid));
	Form_pg_index form;
	bool		usable;

	if (!HeapTupleIsValid(tuple))
		return false;
	form = (Form_pg_index) GETSTRUCT(tuple);
	usable = form->indnkeyatts == bms_num_members(attrs) &&
		form->indisunique && form->indisvalid && form->indimmediate &&
		heap_attisnull(tuple, Anum_pg_index_indpred, NULL) &&
		heap_attisnull(tuple, Anum_pg_index_indexprs, NULL);
	for (int i = 0; usable && i < form->indnkeyatts; i++)
		usable = bms_is_member(form->indkey.values[i], attrs);
	ReleaseSysCache(tuple);
	return usable;
}

/* pg_class.relam of a relation, InvalidOid if it is gone. */
static Oid
relation_am(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	Oid			am = InvalidOid;

	if (HeapTupleIsValid(tuple))
	{
		am = ((Form_pg_class) GETSTRUCT(tuple))->relam;
		ReleaseSysCache(tuple);
	}
	return am;
}

/*
 * The gunique indexes of the referenced table that a foreign key on attrs
 * would meet, in OID order, before a btree index it can use; NIL if it
 * would meet none, or no such btree index exists.
 */
static List *
indexes_in_the_way(Oid pkoid, Bitmapset *attrs)
{
	Relation	pkrel = table_open(pkoid, NoLock);
	List	   *indexes = RelationGetIndexList(pkrel);
	List	   *result = NIL;
	ListCell   *lc;

	table_close(pkrel, NoLock);
	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);

		if (!fk_could_use(indexoid, attrs))
			continue;
		if (relation_am(indexoid) == BTREE_AM_OID)
		{
			list_free(indexes);
			return result;
		}
		if (gunique_is_gunique_index(indexoid))
			result = lappend_oid(result, indexoid);
	}
	list_free(indexes);
	list_free(result);
	return NIL;
}

static bool
only_adds_foreign_keys(AlterTableStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->cmds)
	{
		AlterTableCmd *cmd = lfirst(lc);

		if (cmd->subtype != AT_AddConstraint || cmd_foreign_keys(cmd) == NIL)
			return false;
	}
	return true;
}

/* Is pkoid the altered table, or does the statement alter it as a child? */
static bool
alters_table(Oid relid, Oid pkoid)
{
	List	   *members;
	bool		result;

	if (relid == pkoid)
		return true;
	if (get_rel_relkind(relid) != RELKIND_PARTITIONED_TABLE &&
		!has_subclass(relid))
		return false;
	members = find_all_inheritors(relid, NoLock, NULL);
	result = list_member_oid(members, pkoid);
	list_free(members);
	return result;
}

/* Hide the indexes in the way of one foreign key; append them to *done. */
static void
hide_for_foreign_key(Constraint *con, Oid relid, bool fk_only, List **done)
{
	Oid			pkoid;
	Bitmapset  *attrs;
	ListCell   *lc;

	/* Without columns a foreign key references the primary key: btree. */
	if (con->pk_attrs == NIL || con->pktable == NULL)
		return;
	/* ATAddForeignKeyConstraint locks the referenced table this way. */
	pkoid = RangeVarGetRelid(con->pktable, ShareRowExclusiveLock, true);
	if (!OidIsValid(pkoid) ||
		(!fk_only && alters_table(relid, pkoid)) ||
		(attrs = referenced_columns(pkoid, con->pk_attrs)) == NULL)
		return;

	foreach(lc, indexes_in_the_way(pkoid, attrs))
	{
		Oid			indexoid = lfirst_oid(lc);
		MemoryContext oldcxt;

		if (list_member_oid(*done, indexoid))
			continue;
		gunique_index_set_unique(indexoid, false);
		*done = lappend_oid(*done, indexoid);
		/* Outlives the statements nested in this one. */
		oldcxt = MemoryContextSwitchTo(TopMemoryContext);
		hidden = lappend_oid(hidden, indexoid);
		MemoryContextSwitchTo(oldcxt);
	}
}

/*
 * Before an ALTER TABLE runs: hide from the foreign keys it adds the gunique
 * indexes that would stand before a usable btree index.  Returns them, for
 * gunique_fkey_unhide.
 */
List *
gunique_fkey_hide(AlterTableStmt *stmt)
{
	List	   *done = NIL;
	Oid			relid;
	bool		fk_only;
	ListCell   *lc;

	if (stmt->objtype != OBJECT_TABLE)
		return NIL;
	foreach(lc, stmt->cmds)
	{
		if (cmd_foreign_keys(lfirst(lc)) != NIL)
			break;
	}
	if (lc == NULL)
		return NIL;

	/* The altered table first, as ALTER TABLE locks it, owner checked. */
	relid = AlterTableLookupRelation(stmt, AlterTableGetLockLevel(stmt->cmds));
	if (!OidIsValid(relid))
		return NIL;
	fk_only = only_adds_foreign_keys(stmt);

	foreach(lc, stmt->cmds)
	{
		ListCell   *lc2;

		foreach(lc2, cmd_foreign_keys(lfirst(lc)))
			hide_for_foreign_key(lfirst(lc2), relid, fk_only, &done);
	}
	return done;
}

/*
 * After the ALTER TABLE: show the indexes again.  With "failed", the
 * statement's error is rolling the catalogs back already, and only this
 * backend's memory of them is cleared.
 */
void
gunique_fkey_unhide(List *indexes, bool failed)
{
	ListCell   *lc;

	foreach(lc, indexes)
	{
		Oid			indexoid = lfirst_oid(lc);

		if (!failed)
			gunique_index_set_unique(indexoid, true);
		hidden = list_delete_oid(hidden, indexoid);
	}
}

#else							/* foreign keys use gunique indexes */

bool
gunique_fkey_hidden(Oid indexoid)
{
	return false;
}

List *
gunique_fkey_hide(AlterTableStmt *stmt)
{
	return NIL;
}

void
gunique_fkey_unhide(List *indexes, bool failed)
{
}

#endif

/*-------------------------------------------------------------------------
 *
 * onconflict.c
 *	  INSERT ... ON CONFLICT on tables with gunique indexes.
 *
 * Before PostgreSQL 18, the executor prepares every unique index of the
 * target table for speculative insertion with BuildSpeculativeIndexInfo,
 * which raises an internal error for any index that is not btree.  gunique
 * refuses such statements at parse analysis instead, with an error that
 * says why.
 *
 * From 18 on, the executor asks the access method for its equality
 * strategy, and ON CONFLICT works: conflicts within the target partition
 * are arbitrated as usual, and a conflict with another partition is a
 * unique violation raised by the probe (see probe.c), because the
 * executor's conflict pre-check only looks at the target partition.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "catalog/index.h"
#include "catalog/pg_inherits.h"
#include "nodes/parsenodes.h"
#include "parser/analyze.h"
#include "parser/parsetree.h"
#include "utils/lsyscache.h"

#include "compat.h"
#include "onconflict.h"
#include "tree.h"

#ifdef GUNIQUE_NO_SPECULATIVE_INSERT

static post_parse_analyze_hook_type prev_post_parse_analyze_hook = NULL;

/* A gunique index on the table or any partition under it, or InvalidOid. */
static Oid
find_gunique_index(Oid tableoid)
{
	List	   *members = find_all_inheritors(tableoid, NoLock, NULL);
	ListCell   *lc;

	foreach(lc, members)
	{
		List	   *indexes = gunique_table_indexes(lfirst_oid(lc));

		if (indexes != NIL)
			return linitial_oid(indexes);
	}
	return InvalidOid;
}

static void
gunique_post_parse_analyze(ParseState *pstate, Query *query,
						   JumbleState *jstate)
{
	if (prev_post_parse_analyze_hook)
		prev_post_parse_analyze_hook(pstate, query, jstate);

	if (query->commandType == CMD_INSERT && query->onConflict != NULL)
	{
		Oid			tableoid = rt_fetch(query->resultRelation, query->rtable)->relid;
		Oid			indexoid = find_gunique_index(tableoid);

		if (OidIsValid(indexoid))
			ereport(ERROR,
					(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
					 errmsg("INSERT ... ON CONFLICT is not supported on a table with a gunique index before PostgreSQL 18"),
					 errdetail("Table \"%s\" has gunique index \"%s\"; this server can only arbitrate ON CONFLICT with btree unique indexes.",
							   get_rel_name(IndexGetRelation(indexoid, false)),
							   get_rel_name(indexoid)),
					 errhint("Check for the key first, or catch unique_violation (SQLSTATE 23505) in a subtransaction.")));
	}
}

void
gunique_onconflict_init(void)
{
	prev_post_parse_analyze_hook = post_parse_analyze_hook;
	post_parse_analyze_hook = gunique_post_parse_analyze;
}

#else

void
gunique_onconflict_init(void)
{
}

#endif

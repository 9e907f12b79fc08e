/*-------------------------------------------------------------------------
 *
 * keyplan.c
 *	  Plans of an UPDATE or DELETE by a gunique key, one per partition,
 *	  kept for the statement's later executions.
 *
 * An UPDATE or DELETE whose key is bound to parameters is planned as a
 * stub that modifies no partition (keyprune.c); as each execution starts,
 * keyprune.c finds the key's row with the statement's snapshot and asks
 * here for the statement's plan for that row's partition.  Planning it is
 * PostgreSQL's own planning of the statement, pruned to that partition
 * through the planner hook, with the parameters left unbound (a generic
 * plan of one partition), so the plan serves every key whose row is
 * there.  It is kept in this backend until a relation it names changes,
 * as PostgreSQL's plan cache keeps a generic plan.
 *
 * Plans are kept by family: the statements whose queries are equal (the
 * same query, after rewriting, with the same cursor options), which a
 * prepared statement's custom plans all are.  A stub records its family's
 * number; a family forgotten since is made again from the stub's query.
 *
 * A plan is used by the executor from ExecutorStart to ExecutorEnd, within
 * one transaction; an invalidation may arrive in between (a lock taken in
 * the middle of the statement).  So a plan or family that is invalidated
 * or evicted is unlinked at once and freed only once another transaction
 * has begun ("retired"), and the callbacks neither allocate nor read the
 * catalogs.  The proof is in src/README, "Modifying by the key".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/ilist.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "storage/lmgr.h"
#include "tcop/tcopprot.h"
#include "utils/hsearch.h"
#include "utils/memutils.h"

#include "read/keyplan.h"

/* Families kept at most; the least recently used goes first. */
#define KEYPLAN_MAX_FAMILIES 64

/* One partition's plan of a family. */
typedef struct KeyPlan
{
	Oid			partoid;
	MemoryContext context;		/* holds this struct and the plan */
	PlannedStmt *stmt;
	bool		valid;			/* false once retired */
	struct KeyPlan *next_retired;
} KeyPlan;

typedef struct KeyPlanEntry
{
	Oid			partoid;
	KeyPlan    *plan;
} KeyPlanEntry;

typedef struct KeyPlanFamily
{
	dlist_node	node;			/* in families, most recent first */
	int			id;
	MemoryContext context;		/* holds this struct, the query, the table */
	Query	   *query;
	int			cursorOptions;
	HTAB	   *plans;			/* KeyPlanEntry by partition */
	struct KeyPlanFamily *next_retired;
} KeyPlanFamily;

static dlist_head families = DLIST_STATIC_INIT(families);
static int	nfamilies = 0;
static int	next_family_id = 1;
static MemoryContext keyplan_context = NULL;

/*
 * Retired plans and families, and the transaction count at which each list
 * was last added to; freed once a transaction has ended since.
 */
static KeyPlan *retired_plans = NULL;
static KeyPlanFamily *retired_families = NULL;
static uint64 retired_at = 0;
static uint64 transactions_ended = 0;

/* The partition the next planning is for (keyplan_plan). */
static Oid	forced_table = InvalidOid;
static Oid	forced_partition = InvalidOid;

/* Free what was retired before the transaction under way began. */
static void
keyplan_free_retired(void)
{
	if (retired_at == transactions_ended)
		return;
	while (retired_plans != NULL)
	{
		KeyPlan    *plan = retired_plans;

		retired_plans = plan->next_retired;
		MemoryContextDelete(plan->context);
	}
	while (retired_families != NULL)
	{
		KeyPlanFamily *family = retired_families;

		retired_families = family->next_retired;
		MemoryContextDelete(family->context);
	}
}

/* Unlink a plan from its family; no allocation (relcache callbacks). */
static void
keyplan_retire(HTAB *plans, KeyPlan *plan)
{
	plan->valid = false;
	(void) hash_search(plans, &plan->partoid, HASH_REMOVE, NULL);
	plan->next_retired = retired_plans;
	retired_plans = plan;
	retired_at = transactions_ended;
}

static void
keyplan_retire_family(KeyPlanFamily *family)
{
	HASH_SEQ_STATUS status;
	KeyPlanEntry *entry;

	hash_seq_init(&status, family->plans);
	while ((entry = hash_seq_search(&status)) != NULL)
		keyplan_retire(family->plans, entry->plan);
	dlist_delete(&family->node);
	nfamilies--;
	family->next_retired = retired_families;
	retired_families = family;
	retired_at = transactions_ended;
}

static KeyPlanFamily *
keyplan_family_make(int id, Query *query, int cursorOptions)
{
	MemoryContext context;
	MemoryContext old;
	KeyPlanFamily *family;
	HASHCTL		ctl;

	if (keyplan_context == NULL)
		keyplan_context = AllocSetContextCreate(CacheMemoryContext,
												"gunique key plans",
												ALLOCSET_DEFAULT_SIZES);
	if (nfamilies >= KEYPLAN_MAX_FAMILIES)
		keyplan_retire_family(dlist_tail_element(KeyPlanFamily, node,
												 &families));
	context = AllocSetContextCreate(keyplan_context, "gunique key plan family",
									ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(context);
	family = palloc0(sizeof(KeyPlanFamily));
	family->id = id;
	family->context = context;
	family->query = copyObject(query);
	family->cursorOptions = cursorOptions;
	MemoryContextSwitchTo(old);
	ctl.keysize = sizeof(Oid);
	ctl.entrysize = sizeof(KeyPlanEntry);
	ctl.hcxt = context;
	family->plans = hash_create("gunique key plans of a family", 16, &ctl,
								HASH_ELEM | HASH_BLOBS | HASH_CONTEXT);
	dlist_push_head(&families, &family->node);
	nfamilies++;
	return family;
}

/* The family numbered "id", made again from "query" if it was forgotten. */
static KeyPlanFamily *
keyplan_family_get(int id, Query *query, int cursorOptions)
{
	dlist_iter	iter;

	dlist_foreach(iter, &families)
	{
		KeyPlanFamily *family = dlist_container(KeyPlanFamily, node, iter.cur);

		if (family->id == id)
		{
			dlist_move_head(&families, &family->node);
			return family;
		}
	}
	return keyplan_family_make(id, query, cursorOptions);
}

/*
 * The number of the family of a stub being planned: of the kept family
 * with an equal query, or of a new one.
 */
int
gunique_keyplan_family(Query *query, int cursorOptions)
{
	dlist_iter	iter;
	int			id;

	keyplan_free_retired();
	dlist_foreach(iter, &families)
	{
		KeyPlanFamily *family = dlist_container(KeyPlanFamily, node, iter.cur);

		if (family->cursorOptions == cursorOptions &&
			equal(family->query, query))
		{
			dlist_move_head(&families, &family->node);
			return family->id;
		}
	}
	id = next_family_id;
	/* 0 is "not a stub" (keyprune.c) */
	next_family_id = next_family_id == PG_INT32_MAX ? 1 : next_family_id + 1;
	(void) keyplan_family_make(id, query, cursorOptions);
	return id;
}

/*
 * The partition the planning now starting is for, if it plans "tableoid"
 * for keyplan_plan; whatever it is for, the request is used up.
 */
Oid
gunique_keyplan_take_forced(Oid *tableoid)
{
	Oid			result = forced_partition;

	*tableoid = forced_table;
	forced_table = InvalidOid;
	forced_partition = InvalidOid;
	return result;
}

/*
 * Lock the relations of a plan as the plan cache locks a cached plan's
 * before it runs (AcquireExecutorLocks), which processes the
 * invalidations that have arrived.
 */
static void
keyplan_lock(PlannedStmt *stmt)
{
	ListCell   *lc;

	foreach(lc, stmt->rtable)
	{
		RangeTblEntry *rte = (RangeTblEntry *) lfirst(lc);

		if (rte->rtekind == RTE_RELATION ||
			(rte->rtekind == RTE_SUBQUERY && OidIsValid(rte->relid)))
			LockRelationOid(rte->relid, rte->rellockmode);
	}
}

/*
 * Plan the query for partition "partoid" of "tableoid", its parameters
 * unbound: the planner hook gives keyprune.c the partition
 * (gunique_keyplan_take_forced).  The plan is copied into a context of its
 * own; the planner's leftovers stay in the caller's.
 */
static KeyPlan *
keyplan_plan(Oid tableoid, Oid partoid, Query *query, int cursorOptions,
			 const char *sourceText)
{
	Query	   *copy = copyObject(query);
	PlannedStmt *stmt;
	MemoryContext context;
	MemoryContext old;
	KeyPlan    *plan;

	forced_table = tableoid;
	forced_partition = partoid;
	PG_TRY();
	{
		stmt = pg_plan_query(copy, sourceText, cursorOptions, NULL);
	}
	PG_FINALLY();
	{
		forced_table = InvalidOid;
		forced_partition = InvalidOid;
	}
	PG_END_TRY();
	context = AllocSetContextCreate(CurrentMemoryContext, "gunique key plan",
									ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(context);
	plan = palloc0(sizeof(KeyPlan));
	plan->partoid = partoid;
	plan->context = context;
	plan->stmt = copyObject(stmt);
	plan->valid = true;
	MemoryContextSwitchTo(old);
	return plan;
}

/*
 * The plan of family "id" (made again from "query" if forgotten) for the
 * key's row in partition "partoid" of "tableoid": the kept one, once its
 * relations are locked and it is still valid, or a new one, kept.
 */
PlannedStmt *
gunique_keyplan_get(int id, Query *query, int cursorOptions, Oid tableoid,
					Oid partoid, const char *sourceText)
{
	KeyPlanFamily *family;
	KeyPlanEntry *entry;
	KeyPlan    *plan;
	bool		found;

	keyplan_free_retired();
	for (;;)
	{
		family = keyplan_family_get(id, query, cursorOptions);
		entry = hash_search(family->plans, &partoid, HASH_FIND, NULL);
		if (entry == NULL)
			break;
		plan = entry->plan;
		keyplan_lock(plan->stmt);
		/* still kept once the invalidations are in: use it */
		if (plan->valid)
			return plan->stmt;
	}

	/*
	 * Planning locks what the plan reads, and it reads the catalogs after
	 * that: the new plan is current, whatever invalidations its locks
	 * brought in.  Those may have retired the family: look it up again.
	 */
	plan = keyplan_plan(tableoid, partoid, query, cursorOptions, sourceText);
	family = keyplan_family_get(id, query, cursorOptions);
	MemoryContextSetParent(plan->context, keyplan_context);
	entry = hash_search(family->plans, &partoid, HASH_ENTER, &found);
	Assert(!found);
	entry->plan = plan;
	return plan->stmt;
}

/*
 * A relation changed (InvalidOid: any): retire every plan that names it.
 * Called from the relcache callback: no allocation.
 */
void
gunique_keyplan_relcache_inval(Oid relid)
{
	dlist_iter	iter;

	dlist_foreach(iter, &families)
	{
		KeyPlanFamily *family = dlist_container(KeyPlanFamily, node, iter.cur);
		HASH_SEQ_STATUS status;
		KeyPlanEntry *entry;

		hash_seq_init(&status, family->plans);
		while ((entry = hash_seq_search(&status)) != NULL)
			if (!OidIsValid(relid) ||
				list_member_oid(entry->plan->stmt->relationOids, relid))
				keyplan_retire(family->plans, entry->plan);
	}
}

/*
 * A function, type, operator, schema or foreign server changed, which the
 * plan cache resets its plans for: retire every family.  No allocation.
 */
void
gunique_keyplan_reset(void)
{
	while (!dlist_is_empty(&families))
		keyplan_retire_family(dlist_head_element(KeyPlanFamily, node,
												 &families));
}

/* A transaction ended: what was retired in it may go. */
void
gunique_keyplan_xact_event(XactEvent event)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT)
		transactions_ended++;
}

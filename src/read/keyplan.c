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
 * The stub itself, planned once without the parameters' values, is kept
 * with the family's plans, and later plannings of the family take a copy.
 *
 * A plan is used by the executor from ExecutorStart to ExecutorEnd, within
 * one transaction; an invalidation may arrive in between (a lock taken in
 * the middle of the statement).  So a plan or family that is invalidated
 * or evicted is unlinked at once ("retired") and freed once no executor
 * runs it (counted from ExecutorStart to ExecutorEnd, or to the abort of
 * the subtransaction or transaction it began in), and the callbacks
 * neither allocate nor read the catalogs.  The proof is in src/README,
 * "Modifying by the key".
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "lib/ilist.h"
#include "nodes/parsenodes.h"
#include "nodes/plannodes.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "storage/lmgr.h"
#include "utils/syscache.h"
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
	int			refcount;		/* executors running it (uses below) */
	struct KeyPlan *next_retired;
} KeyPlan;

/*
 * A kept plan handed to an executor, until its ExecutorEnd or the abort of
 * the subtransaction it started in: a retired plan is freed as soon as no
 * executor runs it.
 */
typedef struct KeyPlanUse
{
	KeyPlan    *plan;
	SubTransactionId subid;
} KeyPlanUse;

static KeyPlanUse *uses = NULL;
static int	nuses = 0;
static int	maxuses = 0;

/* Inside gunique_keyplan_get or _family: families are not freed then. */
static int	keyplan_depth = 0;

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
	List	   *relationOids;	/* what the query itself depends on, as the */
	List	   *invalItems;		/* plan cache takes it: a function folded at
								 * planning leaves no trace in the plans */
	HTAB	   *plans;			/* KeyPlanEntry by partition */
	struct KeyPlanFamily *next_retired;
} KeyPlanFamily;

static dlist_head families = DLIST_STATIC_INIT(families);
static int	nfamilies = 0;
static int	next_family_id = 1;
static MemoryContext keyplan_context = NULL;

/*
 * Retired plans and families: a plan is freed once no executor runs it, a
 * family once no call here holds it.
 */
static KeyPlan *retired_plans = NULL;
static KeyPlanFamily *retired_families = NULL;

/* The partition the next planning of forced_query is for (keyplan_plan). */
static Query *forced_query = NULL;
static Oid	forced_table = InvalidOid;
static Oid	forced_partition = InvalidOid;

/* Free what was retired and is no longer in use. */
static void
keyplan_free_retired(void)
{
	KeyPlan   **link = &retired_plans;

	while (*link != NULL)
	{
		KeyPlan    *plan = *link;

		if (plan->refcount > 0)
		{
			link = &plan->next_retired;
			continue;
		}
		*link = plan->next_retired;
		MemoryContextDelete(plan->context);
	}
	if (keyplan_depth > 0)
		return;
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
}

static KeyPlanFamily *
keyplan_family_make(int id, Query *query, int cursorOptions)
{
	MemoryContext context;
	MemoryContext old;
	KeyPlanFamily *family;
	HASHCTL		ctl;
	bool		rls;

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
	extract_query_dependencies((Node *) family->query, &family->relationOids,
							   &family->invalItems, &rls);
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

/* The kept family with an equal query, made most recent; or NULL. */
static KeyPlanFamily *
keyplan_family_find(Query *query, int cursorOptions)
{
	dlist_iter	iter;

	dlist_foreach(iter, &families)
	{
		KeyPlanFamily *family = dlist_container(KeyPlanFamily, node, iter.cur);

		if (family->cursorOptions == cursorOptions &&
			equal(family->query, query))
		{
			dlist_move_head(&families, &family->node);
			return family;
		}
	}
	return NULL;
}

/*
 * The number of the family of a stub being planned: of the kept family
 * with an equal query, or of a new one.
 */
int
gunique_keyplan_family(Query *query, int cursorOptions)
{
	KeyPlanFamily *family;
	int			id;

	keyplan_free_retired();
	family = keyplan_family_find(query, cursorOptions);
	if (family != NULL)
		return family->id;
	id = next_family_id;
	/* 0 is "not a stub" (keyprune.c) */
	next_family_id = next_family_id == PG_INT32_MAX ? 1 : next_family_id + 1;
	(void) keyplan_family_make(id, query, cursorOptions);
	return id;
}

/*
 * The partition the planning of "parse" now starting is for, if it plans
 * "tableoid" for keyplan_plan; a planning of another query (one that a
 * planner hook before gunique's runs first) leaves the request alone.
 */
Oid
gunique_keyplan_take_forced(Query *parse, Oid *tableoid)
{
	Oid			result = forced_partition;

	/* only the planning asked for, not one another hook runs first */
	if (parse != forced_query)
	{
		*tableoid = InvalidOid;
		return InvalidOid;
	}
	*tableoid = forced_table;
	forced_query = NULL;
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
static PlannedStmt *
keyplan_plan(Oid tableoid, Oid partoid, Query *query, int cursorOptions,
			 const char *sourceText)
{
	Query	   *copy = copyObject(query);
	PlannedStmt *stmt;

	forced_query = copy;
	forced_table = tableoid;
	forced_partition = partoid;
	PG_TRY();
	{
		stmt = pg_plan_query(copy, sourceText, cursorOptions, NULL);
	}
	PG_FINALLY();
	{
		forced_query = NULL;
		forced_table = InvalidOid;
		forced_partition = InvalidOid;
	}
	PG_END_TRY();
	return stmt;
}

/* Keep a copy of "stmt" in a context of its own. */
static KeyPlan *
keyplan_keep(PlannedStmt *stmt, Oid key)
{
	MemoryContext context;
	MemoryContext old;
	KeyPlan    *plan;

	context = AllocSetContextCreate(keyplan_context, "gunique key plan",
									ALLOCSET_SMALL_SIZES);
	old = MemoryContextSwitchTo(context);
	plan = palloc0(sizeof(KeyPlan));
	plan->partoid = key;
	plan->context = context;
	plan->stmt = copyObject(stmt);
	plan->valid = true;
	MemoryContextSwitchTo(old);
	return plan;
}

/* Keep a copy of "stmt" in the family under "key", retiring the one before. */
static KeyPlan *
keyplan_put(KeyPlanFamily *family, Oid key, PlannedStmt *stmt)
{
	KeyPlanEntry *entry;
	KeyPlan    *plan;
	bool		found;

	entry = hash_search(family->plans, &key, HASH_FIND, NULL);
	if (entry != NULL)
		keyplan_retire(family->plans, entry->plan);
	plan = keyplan_keep(stmt, key);
	entry = hash_search(family->plans, &key, HASH_ENTER, &found);
	Assert(!found);
	entry->plan = plan;
	return plan;
}

/*
 * A copy of the stub kept for the family of "query" (a query modifying
 * partitioned table "tableoid"), once its relations are locked, as the plan
 * cache locks a plan it reuses, and it is still valid; NULL if none is
 * kept.  The stub is kept under the table's own OID, which is no
 * partition's: it modifies the table alone.
 */
PlannedStmt *
gunique_keyplan_stub(Query *query, int cursorOptions, Oid tableoid)
{
	keyplan_free_retired();
	for (;;)
	{
		KeyPlanFamily *family = keyplan_family_find(query, cursorOptions);
		KeyPlanEntry *entry = NULL;
		KeyPlan    *plan;

		if (family != NULL)
			entry = hash_search(family->plans, &tableoid, HASH_FIND, NULL);
		if (entry == NULL)
			return NULL;
		plan = entry->plan;

		/*
		 * Invalidations retire, never free: the plan stays readable, and
		 * a retired one is looked for again (it is gone then).
		 */
		keyplan_lock(plan->stmt);
		if (plan->valid)
			return copyObject(plan->stmt);
	}
}

/* Keep "stmt", just planned, as the stub of family "id". */
void
gunique_keyplan_keep_stub(int id, Query *query, int cursorOptions,
						  Oid tableoid, PlannedStmt *stmt)
{
	(void) keyplan_put(keyplan_family_get(id, query, cursorOptions), tableoid,
					   stmt);
}

/*
 * How many result relations the ModifyTable of "stmt" has (the table, for
 * a stub), and whether partition "partoid" is one of them.
 */
static int
keyplan_modifies(PlannedStmt *stmt, Oid partoid, bool *found)
{
	ModifyTable *mt = (ModifyTable *) stmt->planTree;
	ListCell   *lc;

	*found = false;
	if (mt == NULL || !IsA(mt, ModifyTable))
		return 0;
	foreach(lc, mt->resultRelations)
		if (rt_fetch(lfirst_int(lc), stmt->rtable)->relid == partoid)
			*found = true;
	return list_length(mt->resultRelations);
}

/* Record that an executor is about to run "plan". */
static PlannedStmt *
keyplan_use(KeyPlan *plan)
{
	if (nuses == maxuses)
	{
		int			n = maxuses == 0 ? 8 : maxuses * 2;

		if (uses == NULL)
			uses = MemoryContextAlloc(TopMemoryContext, n * sizeof(KeyPlanUse));
		else
			uses = repalloc(uses, n * sizeof(KeyPlanUse));
		maxuses = n;
	}
	uses[nuses].plan = plan;
	uses[nuses].subid = GetCurrentSubTransactionId();
	nuses++;
	plan->refcount++;
	return plan->stmt;
}

/*
 * The plan of family "id" (made again from "query" if forgotten) for the
 * key's row in partition "partoid" of "tableoid": the kept one, once its
 * relations are locked and it is still valid, or a new one, kept.  A plan
 * that could not be pruned to the partition (a hash level, a default
 * partition) is kept once per family, under InvalidOid, and serves every
 * such partition it modifies (not once per partition).  NULL if the
 * planning did not give a plan for the partition (another planner hook
 * took the request): the caller plans the statement unpruned.
 */
PlannedStmt *
gunique_keyplan_get(int id, Query *query, int cursorOptions, Oid tableoid,
					Oid partoid, const char *sourceText)
{
	KeyPlanFamily *family;
	KeyPlanEntry *entry;
	KeyPlan    *plan;
	PlannedStmt *stmt;
	PlannedStmt *result = NULL;
	bool		modifies;
	Oid			key;
	int			n;

	keyplan_free_retired();
	keyplan_depth++;
	PG_TRY();
	{
		for (;;)
		{
			family = keyplan_family_get(id, query, cursorOptions);
			entry = hash_search(family->plans, &partoid, HASH_FIND, NULL);
			if (entry == NULL)
			{
				Oid			shared = InvalidOid;

				entry = hash_search(family->plans, &shared, HASH_FIND, NULL);
				if (entry != NULL)
				{
					(void) keyplan_modifies(entry->plan->stmt, partoid, &modifies);
					if (!modifies)
						entry = NULL;
				}
			}
			if (entry == NULL)
				break;
			plan = entry->plan;
			keyplan_lock(plan->stmt);
			/* still kept once the invalidations are in: use it */
			if (plan->valid)
			{
				result = keyplan_use(plan);
				break;
			}
		}

		/*
		 * Planning locks what the plan reads, and it reads the catalogs
		 * after that: the new plan is current, whatever invalidations its
		 * locks brought in.  Those may have retired the family: look it up
		 * again.
		 */
		if (result == NULL)
		{
			stmt = keyplan_plan(tableoid, partoid, query, cursorOptions,
								sourceText);
			/* a stub modifies the table alone: not the planning asked for */
			n = keyplan_modifies(stmt, partoid, &modifies);
			if (modifies)
			{
				key = n == 1 ? partoid : InvalidOid;
				family = keyplan_family_get(id, query, cursorOptions);
				result = keyplan_use(keyplan_put(family, key, stmt));
			}
		}
	}
	PG_FINALLY();
	{
		keyplan_depth--;
	}
	PG_END_TRY();
	return result;
}

/* An executor ended: the plan it ran, if kept here, is one use fewer. */
void
gunique_keyplan_executor_end(PlannedStmt *stmt)
{
	for (int i = nuses - 1; i >= 0; i--)
	{
		if (uses[i].plan->stmt != stmt)
			continue;
		uses[i].plan->refcount--;
		uses[i] = uses[--nuses];
		if (retired_plans != NULL || retired_families != NULL)
			keyplan_free_retired();
		return;
	}
}

/*
 * A subtransaction aborted: the executors started in it or in those it
 * began (every subtransaction begun while it was open) are gone.
 */
void
gunique_keyplan_subxact_event(SubXactEvent event, SubTransactionId mySubid)
{
	if (event != SUBXACT_EVENT_ABORT_SUB)
		return;
	for (int i = nuses - 1; i >= 0; i--)
		if (uses[i].subid >= mySubid)
		{
			uses[i].plan->refcount--;
			uses[i] = uses[--nuses];
		}
}

/* What an invalidation names: a relation, or a syscache entry. */
typedef struct KeyPlanInval
{
	Oid			relid;			/* a relation (InvalidOid: any), or */
	int			cacheid;		/* a syscache (-1: none) */
	uint32		hashvalue;		/* its entry (0: any) */
} KeyPlanInval;

/*
 * Does a plan or query with these dependencies depend on what the
 * invalidation names?  As the plan cache takes them: a relation it names,
 * a function or type among its invalidation items; any operator, schema or
 * foreign server.
 */
static bool
keyplan_depends(List *relationOids, List *invalItems,
				const KeyPlanInval *inval)
{
	ListCell   *lc;

	if (inval->cacheid < 0)
		return !OidIsValid(inval->relid) ||
			list_member_oid(relationOids, inval->relid);
	if (inval->cacheid != PROCOID && inval->cacheid != TYPEOID)
		return true;
	foreach(lc, invalItems)
	{
		PlanInvalItem *item = (PlanInvalItem *) lfirst(lc);

		if (item->cacheId == inval->cacheid &&
			(inval->hashvalue == 0 || item->hashValue == inval->hashvalue))
			return true;
	}
	return false;
}

/*
 * Retire every plan that depends on what the invalidation names, or whose
 * family's query does (a stub and every plan of it are planned from the
 * query).  Families stay: the query is equal however it is analysed again.
 * Called from the relcache and syscache callbacks: no allocation.
 */
static void
keyplan_invalidate(const KeyPlanInval *inval)
{
	dlist_iter	iter;

	dlist_foreach(iter, &families)
	{
		KeyPlanFamily *family = dlist_container(KeyPlanFamily, node, iter.cur);
		HASH_SEQ_STATUS status;
		KeyPlanEntry *entry;
		bool		all = keyplan_depends(family->relationOids,
										  family->invalItems, inval);

		hash_seq_init(&status, family->plans);
		while ((entry = hash_seq_search(&status)) != NULL)
			if (all || keyplan_depends(entry->plan->stmt->relationOids,
									   entry->plan->stmt->invalItems, inval))
				keyplan_retire(family->plans, entry->plan);
	}
}

/* A relation changed (InvalidOid: any). */
void
gunique_keyplan_relcache_inval(Oid relid)
{
	KeyPlanInval inval = {relid, -1, 0};

	keyplan_invalidate(&inval);
}

/* A function, type, operator, schema or foreign server changed. */
void
gunique_keyplan_syscache_inval(int cacheid, uint32 hashvalue)
{
	KeyPlanInval inval = {InvalidOid, cacheid, hashvalue};

	keyplan_invalidate(&inval);
}

/* A transaction ended: no executor of it runs a plan any longer. */
void
gunique_keyplan_xact_event(XactEvent event)
{
	if (event == XACT_EVENT_COMMIT || event == XACT_EVENT_ABORT ||
		event == XACT_EVENT_PREPARE || event == XACT_EVENT_PARALLEL_COMMIT ||
		event == XACT_EVENT_PARALLEL_ABORT)
	{
		for (int i = 0; i < nuses; i++)
			uses[i].plan->refcount--;
		nuses = 0;
	}
}

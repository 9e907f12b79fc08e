/*-------------------------------------------------------------------------
 *
 * onconflict.c
 *	  INSERT ... ON CONFLICT on tables with gunique indexes.
 *
 * Before PostgreSQL 18, the executor prepares every unique index of the
 * target table for speculative insertion with BuildSpeculativeIndexInfo,
 * which raises an internal error for any index that is not btree.  gunique
 * refuses such statements as the executor starts, with an error that says
 * why.  Parse analysis would be too early: it sees neither the table behind
 * an auto-updatable view nor the actions of rules, which only the rewriter
 * adds.  The plan holds them all: a ModifyTable with an ON CONFLICT action,
 * at the top of the statement's plan or of one of its subplans (a
 * data-modifying WITH query is one; a rule's action is a statement of its
 * own).
 * Checking every execution also covers a cached plan made before the index
 * was created on a partition below the target table, which need not
 * invalidate it.  gunique.enable_conflict_check changes nothing there.
 *
 * From 18 on, the executor asks the access method for its equality
 * strategy, and ON CONFLICT works within the target partition.  Its
 * conflict pre-check only searches the target partition, though, so for
 * ON CONFLICT DO NOTHING the planner hook puts a node of ours, a conflict
 * check, between the ModifyTable and the rows it inserts: a row whose key
 * another partition holds is skipped there.  A check that finds nothing
 * leaves the key's upsert lock held until the executor is done with the
 * row, so that two such statements never both pass the check with one
 * key.  The check looks the key up through lookup.c's reader, which looks
 * only in the partitions that may hold it (src/README, "Locating a key"),
 * with the key mapped once per row.  The protocol and what it does not
 * cover are in src/README, "INSERT ... ON CONFLICT".  DO UPDATE of a row in
 * another partition remains a unique violation raised by the probe (see
 * probe.c).
 *
 * With gunique.enable_conflict_check off, a statement whose plan has a
 * check is refused as the executor starts, every execution: without the
 * check, a row whose key another partition holds would not be skipped but
 * fail with the probe's unique violation, which is never a duplicate but
 * not what DO NOTHING promises.  The check stays in the plan whatever the
 * setting, so that a cached plan obeys the setting of each execution.
 *
 * The planner and executor start hooks and the transaction, subtransaction
 * and relcache callbacks are hooks.c's; they call the gunique_onconflict_*
 * functions here.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/genam.h"
#include "access/htup_details.h"
#include "access/relation.h"
#include "access/subtrans.h"
#include "access/sysattr.h"
#include "access/table.h"
#include "access/tableam.h"
#include "access/xact.h"
#include "catalog/index.h"
#include "catalog/pg_class.h"
#include "catalog/pg_inherits.h"
#include "catalog/pg_trigger.h"
#include "commands/trigger.h"
#include "executor/executor.h"
#include "executor/execPartition.h"
#include "miscadmin.h"
#include "nodes/extensible.h"
#include "nodes/makefuncs.h"
#include "nodes/plannodes.h"
#include "optimizer/optimizer.h"
#include "parser/parsetree.h"
#include "storage/lmgr.h"
#include "storage/lock.h"
#include "utils/fmgroids.h"
#include "utils/hsearch.h"
#include "utils/inval.h"
#include "utils/lsyscache.h"
#include "utils/rel.h"
#include "utils/snapmgr.h"
#include "utils/syscache.h"

#include "compat.h"
#ifdef GUNIQUE_EXPLAIN_HEADERS
#include "commands/explain_format.h"
#include "commands/explain_state.h"
#endif
#include "am/scope.h"
#include "am/tree.h"
#include "insert/keylock.h"
#include "locate/keymap.h"
#include "locate/locate.h"
#include "read/lookup.h"
#include "read/passnode.h"
#include "upsert/onconflict.h"
#include "upsert/waitgraph.h"

/* gunique.enable_conflict_check */
bool		gunique_enable_conflict_check = true;

#ifdef GUNIQUE_NO_SPECULATIVE_INSERT

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

/*
 * Refuse a plan node that would insert with ON CONFLICT into a table with a
 * gunique index.  An INSERT has one result relation, locked by now.
 */
static void
check_modify_table(PlannedStmt *pstmt, Plan *plan)
{
	ModifyTable *mt = (ModifyTable *) plan;
	ListCell   *lc;

	if (plan == NULL || !IsA(plan, ModifyTable) ||
		mt->onConflictAction == ONCONFLICT_NONE)
		return;
	foreach(lc, mt->resultRelations)
	{
		Oid			tableoid = rt_fetch(lfirst_int(lc), pstmt->rtable)->relid;
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

/*
 * Before the executor starts (hooks.c).  The planner puts a ModifyTable
 * only at the top of the plan of the query it belongs to: the statement's,
 * or a subplan's.
 */
void
gunique_onconflict_executor_start(QueryDesc *queryDesc, int eflags)
{
	PlannedStmt *pstmt = queryDesc->plannedstmt;
	ListCell   *lc;

	if (pstmt->commandType != CMD_SELECT || pstmt->hasModifyingCTE)
	{
		check_modify_table(pstmt, pstmt->planTree);
		foreach(lc, pstmt->subplans)
			check_modify_table(pstmt, (Plan *) lfirst(lc));
	}
}

void
gunique_onconflict_executor_started(QueryDesc *queryDesc, int eflags)
{
}

void
gunique_onconflict_register_scan(void)
{
}

void
gunique_onconflict_xact_event(XactEvent event)
{
}

void
gunique_onconflict_subxact_event(SubXactEvent event,
								 SubTransactionId mySubid,
								 SubTransactionId parentSubid)
{
}

void
gunique_onconflict_relcache_inval(Oid relid)
{
}

PlannedStmt *
gunique_onconflict_plan(PlannedStmt *stmt)
{
	return stmt;
}

void
gunique_onconflict_release_locks(Oid top, TransactionId xwait)
{
}

void
gunique_onconflict_release_waits(Oid top)
{
}

bool
gunique_onconflict_must_wait(Oid top, uint32 hash, Oid partition)
{
	return false;
}

bool
gunique_onconflict_holder_waits(Oid top, uint32 hash)
{
	return false;
}

void
gunique_onconflict_wait(Oid top, uint32 hash)
{
}

#else

/*
 * Upsert locks: heavyweight locks on (top index, key hash), in the
 * advisory lock space with a field4 of our own (GUNIQUE_UPSERT_LOCK_FIELD4),
 * so that pg_locks shows them and the deadlock detector sees them.
 * A check that passed holds its key's in ExclusiveLock, counted as a
 * pending upsert beside the key lock (keylock.c); an inserter that finds
 * the count raised waits for it in ShareLock and holds that until its
 * insert, so that no check passes in between (src/README, "INSERT ... ON
 * CONFLICT", point 5).
 */
typedef struct HeldUpsertLock
{
	LOCKTAG		tag;			/* field2 is the tree's top index, field3
								 * the key's hash */
	LOCKMODE	mode;			/* ExclusiveLock: counted as pending */
	SubTransactionId subid;		/* taken in this subtransaction */
	ResourceOwner owner;		/* and under this owner */
} HeldUpsertLock;

static HeldUpsertLock held_locks[GUNIQUE_MAX_UPSERT_LOCKS];
static int	nheld_locks = 0;

/* What the plan gives the check in custom_private: the indexes to check. */
#define CONFLICT_CHECK_NAME "GuniqueConflictCheck"

/* One arbiter gunique index of the target table, as the check reads it. */
typedef struct CheckedIndex
{
	Relation	index;			/* on the target table */
	IndexInfo  *info;
	ExprState  *predicate;		/* or NULL */
	Oid			top;			/* the tree's top index */
	Relation	toptable;		/* the tree's top table and index, read */
	Relation	topindex;
	GuniqueKeyMap map;
	GuniqueLookupReader *reader;
	/* the row being checked: its key, formed and mapped once */
	bool		skip;			/* not in the index, or "=" cannot hold */
	Datum		values[INDEX_MAX_KEYS];
	bool		isnull[INDEX_MAX_KEYS];
	GuniqueLocateKey key;
} CheckedIndex;

typedef struct ConflictCheckState
{
	CustomScanState css;
	ModifyTableState *mtstate;	/* above it, once the executor has started
								 * (gunique_onconflict_executor_started),
								 * or NULL */
	int			nchecked;
	CheckedIndex *checked;
	SnapshotData dirty;
	int64		skipped;
} ConflictCheckState;

static Node *conflict_create_state(CustomScan *cscan);
static void conflict_begin(CustomScanState *node, EState *estate, int eflags);
static TupleTableSlot *conflict_exec(CustomScanState *node);
static void conflict_end(CustomScanState *node);
static void conflict_rescan(CustomScanState *node);
static void conflict_explain(CustomScanState *node, List *ancestors,
							 ExplainState *es);

static const CustomScanMethods conflict_scan_methods = {
	.CustomName = CONFLICT_CHECK_NAME,
	.CreateCustomScanState = conflict_create_state,
};

static const CustomExecMethods conflict_exec_methods = {
	.CustomName = CONFLICT_CHECK_NAME,
	.BeginCustomScan = conflict_begin,
	.ExecCustomScan = conflict_exec,
	.EndCustomScan = conflict_end,
	.ReScanCustomScan = conflict_rescan,
	.ExplainCustomScan = conflict_explain,
};

/*
 * A held upsert lock is forgotten: a passed check's is no longer pending.
 * Its count is lowered before the lock goes, which is safe: the check's
 * entry is in its leaf by then, or the row is not going in, or it is about
 * to wait for a transaction in a probe, whose insert then meets the
 * check's entry or the other way round, as between any two inserters.
 */
static void
upsert_lock_forget(HeldUpsertLock *held)
{
	if (held->mode == ExclusiveLock)
		gunique_keylock_upsert_end(held->tag.locktag_field2,
								   held->tag.locktag_field3);
}

/*
 * Release the upsert locks held for the keys of a tree (InvalidOid: of
 * every tree), in any mode or only in ShareLock, each under the resource
 * owner that took it: a release may come from a subtransaction the lock
 * was not taken in.
 */
static void
upsert_locks_release_mode(Oid top, bool shared_only)
{
	ResourceOwner saved = CurrentResourceOwner;
	int			kept = 0;

	for (int i = 0; i < nheld_locks; i++)
	{
		HeldUpsertLock *held = &held_locks[i];

		if ((OidIsValid(top) && held->tag.locktag_field2 != top) ||
			(shared_only && held->mode != ShareLock))
		{
			held_locks[kept++] = *held;
			continue;
		}
		upsert_lock_forget(held);
		CurrentResourceOwner = held->owner;
		LockRelease(&held->tag, held->mode, false);
		CurrentResourceOwner = saved;
	}
	nheld_locks = kept;
}

static void
upsert_locks_release(Oid top)
{
	upsert_locks_release_mode(top, false);
}

/* The upsert lock of a key of a tree (onconflict.h). */
static void
upsert_lock_tag(LOCKTAG *tag, Oid top, uint32 hash)
{
	SET_LOCKTAG_ADVISORY(*tag, MyDatabaseId, top, hash,
						 GUNIQUE_UPSERT_LOCK_FIELD4);
}

/*
 * Take an upsert lock and remember it.  A check's (ExclusiveLock) is
 * counted as pending from then on; once it is counted, nothing before it is
 * remembered can fail (an error before leaves the lock to the lock
 * manager's release at abort, uncounted).
 */
static void
upsert_lock_acquire(Oid top, uint32 hash, LOCKMODE mode, Oid partition)
{
	HeldUpsertLock *held;

	if (nheld_locks == GUNIQUE_MAX_UPSERT_LOCKS)
		ereport(ERROR,
				(errcode(ERRCODE_PROGRAM_LIMIT_EXCEEDED),
				 errmsg("too many gunique index keys locked for one row"),
				 errdetail("INSERT ... ON CONFLICT DO NOTHING, and an insert that waits for it, can lock at most %d keys of a row at once.",
						   GUNIQUE_MAX_UPSERT_LOCKS)));
	held = &held_locks[nheld_locks];
	upsert_lock_tag(&held->tag, top, hash);
	held->mode = mode;
	held->subid = GetCurrentSubTransactionId();
	held->owner = CurrentResourceOwner;
	(void) LockAcquire(&held->tag, mode, false, false);
	if (mode == ExclusiveLock)
		gunique_keylock_upsert_begin(top, hash, partition);
	nheld_locks++;
}

/* Does this backend hold an upsert lock of a tree other than "top"? */
static bool
upsert_locks_elsewhere(Oid top)
{
	for (int i = 0; i < nheld_locks; i++)
		if (held_locks[i].tag.locktag_field2 != top)
			return true;
	return false;
}

/*
 * Is the transaction "xid", in progress, waiting now for a lock this
 * backend holds (an upsert lock, when it is an inserter of one of the
 * row's keys), directly or through others?  Its top-level transaction's
 * lock names its backend.
 */
static bool
xact_waits_for_me(TransactionId xid)
{
	LOCKTAG		tag;

	SET_LOCKTAG_TRANSACTION(tag, SubTransGetTopmostTransaction(xid));
	return gunique_lock_holder_waits_for_me(&tag, ShareLock);
}

/*
 * A probe into a tree is about to wait for the transaction "xwait": the
 * upsert locks of that tree's keys go, in any mode; and those of every
 * tree if that transaction waits for one of them (an inserter of the row's
 * key in another tree, that went in there first), which would otherwise be
 * a deadlock.  src/README, "INSERT ... ON CONFLICT", point 4.
 */
void
gunique_onconflict_release_locks(Oid top, TransactionId xwait)
{
	if (nheld_locks == 0)
		return;
	if (upsert_locks_elsewhere(top) && xact_waits_for_me(xwait))
		top = InvalidOid;
	upsert_locks_release(top);
}

/*
 * An inserter lets its upsert locks in ShareLock go: before it opens a
 * leaf (it may wait for the leaf's lock), once its entry is in own leaf,
 * or when its tree no longer needs a probe.  It takes them again, if it
 * still must, before it inserts.  A check's stay: the executor may take its
 * row back after a conflict within the partition and insert it again
 * (src/README, "INSERT ... ON CONFLICT"); the check lets them go when it
 * is asked for its next row.
 */
void
gunique_onconflict_release_waits(Oid top)
{
	if (nheld_locks > 0)
		upsert_locks_release_mode(top, true);
}

/* Does this backend hold the upsert lock of the key, in any mode? */
static bool
upsert_lock_held(Oid top, uint32 hash)
{
	for (int i = 0; i < nheld_locks; i++)
		if (held_locks[i].tag.locktag_field2 == top &&
			held_locks[i].tag.locktag_field3 == hash)
			return true;
	return false;
}

/*
 * With no LWLock held, before an inserter waits for a pending upsert
 * (gunique_onconflict_must_wait): is a check that holds the key's upsert
 * lock waiting now for this backend's transaction, directly or through
 * others (the executor's pre-check or a probe of another tree met a row
 * that this transaction, or one it waits for, inserted before)?  Waiting
 * for the check would then be a deadlock; the inserter goes in instead,
 * and the check's row meets its entry later, as an insert meets any row.
 * src/README, "INSERT ... ON CONFLICT", point 4.
 */
bool
gunique_onconflict_holder_waits(Oid top, uint32 hash)
{
	LOCKTAG		tag;

	upsert_lock_tag(&tag, top, hash);
	return gunique_lock_holder_waits_for_me(&tag, ShareLock);
}

/*
 * Under the key lock, just before an insert of a key into a tree through a
 * leaf on "partition": has a check of ON CONFLICT DO NOTHING passed for the
 * key (or one sharing its count) that is not this backend's, for a row that
 * goes to another partition, and not inserted yet?  Then the inserter must
 * wait for it (gunique_onconflict_wait) before it inserts, unless the
 * check waits for it (gunique_onconflict_holder_waits).  An upsert into
 * the inserter's own partition meets its entry there, as the executor
 * arbitrates within a partition, and must not be waited for: it may be
 * waiting for the inserter's row in another index of that partition.
 * "hash" is the upsert lock's: the key image's, folded, or 0.  src/README,
 * "INSERT ... ON CONFLICT", points 4 and 5.
 */
bool
gunique_onconflict_must_wait(Oid top, uint32 hash, Oid partition)
{
	return gunique_keylock_upserts_elsewhere(top, hash, partition) &&
		!upsert_lock_held(top, hash);
}

/*
 * With the key lock released: wait for the key's upsert lock in ShareLock,
 * and hold it until the insert into the tree, or a wait, releases it (as a
 * check's own).  No check passes for the key while it is held.
 */
void
gunique_onconflict_wait(Oid top, uint32 hash)
{
	upsert_lock_acquire(top, hash, ShareLock, InvalidOid);
}

/*
 * The transaction's end released the locks: no check of this backend is
 * pending any longer.  Any event (hooks.c), before the lock manager lets
 * the locks go.
 */
void
gunique_onconflict_xact_event(XactEvent event)
{
	for (int i = 0; i < nheld_locks; i++)
		upsert_lock_forget(&held_locks[i]);
	nheld_locks = 0;
}

/*
 * A subtransaction's abort released the locks taken in it; its commit
 * leaves them to its parent (hooks.c).
 */
void
gunique_onconflict_subxact_event(SubXactEvent event, SubTransactionId mySubid,
								 SubTransactionId parentSubid)
{
	int			kept = 0;

	if (event != SUBXACT_EVENT_ABORT_SUB && event != SUBXACT_EVENT_COMMIT_SUB)
		return;
	for (int i = 0; i < nheld_locks; i++)
	{
		if (held_locks[i].subid == mySubid)
		{
			if (event == SUBXACT_EVENT_ABORT_SUB)
			{
				upsert_lock_forget(&held_locks[i]);
				continue;
			}
			held_locks[i].subid = parentSubid;
		}
		held_locks[kept++] = held_locks[i];
	}
	nheld_locks = kept;
}

/* Does any column the index reads have a generated value? */
static bool
index_reads_generated(Relation table, Relation index)
{
	TupleDesc	desc = RelationGetDescr(table);
	Bitmapset  *attnos = NULL;
	int			attno = -1;

	for (int i = 0; i < index->rd_index->indnatts; i++)
		attnos = bms_add_member(attnos,
								index->rd_index->indkey.values[i] -
								FirstLowInvalidHeapAttributeNumber);
	pull_varattnos((Node *) RelationGetIndexExpressions(index), 1, &attnos);
	pull_varattnos((Node *) RelationGetIndexPredicate(index), 1, &attnos);
	while ((attno = bms_next_member(attnos, attno)) >= 0)
	{
		AttrNumber	a = attno + FirstLowInvalidHeapAttributeNumber;

		if (a > 0 && TupleDescAttr(desc, a - 1)->attgenerated)
			return true;
	}
	return false;
}

/* Has the relation a BEFORE INSERT row trigger, enabled or not? */
static bool
has_before_insert_row_trigger(Oid relid)
{
	HeapTuple	tuple = SearchSysCache1(RELOID, ObjectIdGetDatum(relid));
	bool		found = false;
	Relation	pg_trigger;
	ScanKeyData key;
	SysScanDesc scan;
	HeapTuple	trigger;

	if (!HeapTupleIsValid(tuple))
		return false;
	found = ((Form_pg_class) GETSTRUCT(tuple))->relhastriggers;
	ReleaseSysCache(tuple);
	if (!found)
		return false;
	found = false;
	pg_trigger = table_open(TriggerRelationId, AccessShareLock);
	ScanKeyInit(&key, Anum_pg_trigger_tgrelid, BTEqualStrategyNumber,
				F_OIDEQ, ObjectIdGetDatum(relid));
	scan = systable_beginscan(pg_trigger, TriggerRelidNameIndexId, true,
							  NULL, 1, &key);
	while (!found && HeapTupleIsValid(trigger = systable_getnext(scan)))
	{
		int16		type = ((Form_pg_trigger) GETSTRUCT(trigger))->tgtype;

		found = TRIGGER_FOR_ROW(type) && TRIGGER_FOR_BEFORE(type) &&
			TRIGGER_FOR_INSERT(type);
	}
	systable_endscan(scan);
	table_close(pg_trigger, AccessShareLock);
	return found;
}

/*
 * Whether the relations a target's rows can reach have BEFORE INSERT row
 * triggers, by target.  An answer goes stale when a relcache invalidation
 * names the target or one of the relations it was made from (CREATE
 * TRIGGER, ATTACH, DETACH and CREATE TABLE ... PARTITION OF send one for
 * the relations they change, the partitioned table a partition joins or
 * leaves among them), when one resets every entry, and when any arrives
 * while the answer is being made.  Only those: autovacuum's statistics of
 * one partition invalidate it too, and a target of many partitions would
 * otherwise read its tree's catalogs again after each.
 */
typedef struct TriggerAnswer
{
	Oid			target;			/* hash key */
	bool		stale;
	bool		making;			/* reading the catalogs */
	uint64		resets;			/* reset_count when made */
	int			nmembers;
	Oid		   *members;		/* sorted, in TopMemoryContext */
	bool		triggers;
} TriggerAnswer;

static HTAB *trigger_answers = NULL;
static uint64 reset_count = 0;

static int
oid_cmp_member(const void *a, const void *b)
{
	Oid			x = *(const Oid *) a;
	Oid			y = *(const Oid *) b;

	return x < y ? -1 : x > y;
}

/* Runs in invalidation processing: no allocation, no catalog access. */
void
gunique_onconflict_relcache_inval(Oid relid)
{
	HASH_SEQ_STATUS seq;
	TriggerAnswer *answer;

	if (!OidIsValid(relid))
	{
		reset_count++;
		return;
	}
	if (trigger_answers == NULL)
		return;
	hash_seq_init(&seq, trigger_answers);
	while ((answer = hash_seq_search(&seq)) != NULL)
		if (answer->making || answer->target == relid ||
			(answer->members != NULL &&
			 bsearch(&relid, answer->members, answer->nmembers, sizeof(Oid),
					 oid_cmp_member) != NULL))
			answer->stale = true;
}

/*
 * May a row routed from the target table have its key changed before it
 * is inserted?  A BEFORE INSERT row trigger of any relation the row can
 * reach may change it, so the check leaves such tables alone.  The caller
 * has processed invalidations.
 */
static bool
target_has_before_triggers(Oid target)
{
	TriggerAnswer *answer;
	List	   *members;
	bool		found;
	bool		triggers = false;
	ListCell   *lc;
	int			i = 0;

	if (trigger_answers == NULL)
	{
		HASHCTL		ctl;

		ctl.keysize = sizeof(Oid);
		ctl.entrysize = sizeof(TriggerAnswer);
		trigger_answers = hash_create("gunique ON CONFLICT triggers", 16,
									  &ctl, HASH_ELEM | HASH_BLOBS);
	}
	answer = hash_search(trigger_answers, &target, HASH_ENTER, &found);
	if (found && !answer->stale && !answer->making &&
		answer->resets == reset_count)
		return answer->triggers;
	if (!found)
		answer->members = NULL;

	/* an invalidation from here on makes the answer stale */
	answer->making = true;
	answer->stale = false;
	answer->resets = reset_count;
	if (answer->members != NULL)
		pfree(answer->members);
	answer->members = NULL;
	PG_TRY();
	{
		members = find_all_inheritors(target, NoLock, NULL);
		foreach(lc, members)
			if ((triggers = has_before_insert_row_trigger(lfirst_oid(lc))))
				break;
		answer->members = MemoryContextAlloc(TopMemoryContext,
											 sizeof(Oid) * Max(list_length(members), 1));
	}
	PG_CATCH();
	{
		/* not an answer: made again by the next statement */
		answer->making = false;
		answer->stale = true;
		PG_RE_THROW();
	}
	PG_END_TRY();
	answer->making = false;
	foreach(lc, members)
		answer->members[i++] = lfirst_oid(lc);
	qsort(answer->members, i, sizeof(Oid), oid_cmp_member);
	answer->nmembers = i;
	answer->triggers = triggers;
	return triggers;
}

static Node *
conflict_create_state(CustomScan *cscan)
{
	ConflictCheckState *state = palloc0(sizeof(ConflictCheckState));

	NodeSetTag(state, T_CustomScanState);
	state->css.methods = &conflict_exec_methods;
	return (Node *) state;
}

/*
 * Open one index to check, and the top of its tree to read; false if the
 * index cannot be checked here (the executor and the probe then handle
 * its conflicts as without the check).
 */
static bool
conflict_open(ConflictCheckState *state, CheckedIndex *ci, Relation table,
			  Oid indexoid, EState *estate)
{
	ci->index = index_open(indexoid, RowExclusiveLock);
	if (!ci->index->rd_index->indisvalid ||
		index_reads_generated(table, ci->index))
	{
		index_close(ci->index, RowExclusiveLock);
		return false;
	}
	ci->info = BuildIndexInfo(ci->index);
	if (ci->info->ii_Predicate != NIL)
		ci->predicate = ExecPrepareQual(ci->info->ii_Predicate, estate);
	ci->top = gunique_tree_top(indexoid);

	/* an index on a partition alone has no other partition to look in */
	if (get_rel_relkind(IndexGetRelation(ci->top, false)) !=
		RELKIND_PARTITIONED_TABLE)
	{
		index_close(ci->index, RowExclusiveLock);
		return false;
	}
	ci->topindex = index_open(ci->top, AccessShareLock);
	ci->toptable = table_open(IndexGetRelation(ci->top, false),
							  AccessShareLock);
	gunique_keymap_make(&ci->map, ci->index, estate->es_query_cxt);
	ci->reader = gunique_lookup_reader_begin(ci->toptable, ci->topindex,
											 &state->dirty);
	return true;
}

static void
conflict_begin(CustomScanState *node, EState *estate, int eflags)
{
	ConflictCheckState *state = (ConflictCheckState *) node;
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	Oid			target = linitial_oid(cscan->custom_private);
	Relation	table;
	ListCell   *lc;

	gunique_passnode_begin(node, estate, eflags);
	InitDirtySnapshot(state->dirty);
	if (eflags & EXEC_FLAG_EXPLAIN_ONLY)
		return;

	/* The statement reads its partitions' current definitions. */
	AcceptInvalidationMessages();
	if (target_has_before_triggers(target))
		return;
	table = table_open(target, NoLock);
	state->checked = palloc0(sizeof(CheckedIndex) *
							 list_length(cscan->custom_private));
	for_each_from(lc, cscan->custom_private, 1)
	{
		if (conflict_open(state, &state->checked[state->nchecked], table,
						  lfirst_oid(lc), estate))
			state->nchecked++;
	}
	table_close(table, NoLock);
	/* it returns its child's slots */
	node->ss.ps.resultopsfixed = false;
}

/* Wait for the transaction that is inserting or deleting the row found. */
static void
conflict_wait(GuniqueLookupHit *hit)
{
	Relation	heap;

	if (hit->speculative_token != 0)
	{
		SpeculativeInsertionWait(hit->xwait, hit->speculative_token);
		return;
	}
	heap = table_open(hit->heapoid, NoLock);
	XactLockTableWait(hit->xwait, heap, &hit->tid, XLTW_InsertIndex);
	table_close(heap, NoLock);
}

/*
 * A row is skipped for a key held elsewhere: in REPEATABLE READ and
 * SERIALIZABLE, only if the transaction's snapshot sees the holder, as
 * the executor requires of a conflict within the partition
 * (ExecCheckTIDVisible).
 */
static void
conflict_check_visible(EState *estate, GuniqueLookupHit *hit)
{
	Relation	heap;
	TupleTableSlot *slot;

	if (!IsolationUsesXactSnapshot())
		return;
	heap = table_open(hit->heapoid, NoLock);
	slot = table_slot_create(heap, NULL);
	if (!table_tuple_fetch_row_version(heap, &hit->tid, SnapshotAny, slot))
		elog(ERROR, "failed to fetch conflicting tuple for ON CONFLICT");
	if (!table_tuple_satisfies_snapshot(heap, slot, estate->es_snapshot))
	{
		bool		isnull;
		TransactionId xmin = DatumGetTransactionId(
			slot_getsysattr(slot, MinTransactionIdAttributeNumber, &isnull));

		if (!TransactionIdIsCurrentTransactionId(xmin))
			ereport(ERROR,
					(errcode(ERRCODE_T_R_SERIALIZATION_FAILURE),
					 errmsg("could not serialize access due to concurrent update")));
	}
	ExecDropSingleTupleTableSlot(slot);
	table_close(heap, NoLock);
}

typedef enum CheckOutcome
{
	CHECK_CLEAR,				/* nobody holds it: its upsert lock is held */
	CHECK_HELD,					/* a row holds it: skip */
	CHECK_WAITED				/* waited for a holder: check again */
} CheckOutcome;

/*
 * The partition the executor will put the row into, routed as ExecInsert
 * routes it, through the ModifyTable's own routing (which then finds the
 * partition set up): an upsert counts itself as pending into it.  Routing
 * opens and locks the partition, before the upsert lock is taken.
 * InvalidOid if the node does not know its ModifyTable.
 */
static Oid
conflict_row_partition(ConflictCheckState *state, TupleTableSlot *slot)
{
	ModifyTableState *mt = state->mtstate;
	ResultRelInfo *target;

	if (mt == NULL)
		return InvalidOid;
	target = mt->resultRelInfo;
	if (mt->mt_partition_tuple_routing != NULL)
		target = ExecFindPartition(mt, target, mt->mt_partition_tuple_routing,
								   slot, state->css.ss.ps.state);
	return RelationGetRelid(target->ri_RelationDesc);
}

/*
 * Check one key under its upsert lock.  *partition is the row's, or
 * InvalidOid until it is routed.
 */
static CheckOutcome
conflict_check_key(ConflictCheckState *state, CheckedIndex *ci,
				   TupleTableSlot *slot, Oid *partition)
{
	GuniqueLookupHit hit;

	/*
	 * Look first without the upsert lock: a row found needs none, and the
	 * lookup locks the partitions it searches, which a second one under
	 * the upsert lock then finds locked (its holder must not wait for
	 * relation locks: src/README).
	 */
	if (!gunique_lookup_reader_find(ci->reader, ci->values, ci->isnull,
									&ci->key, &hit))
	{
		uint32		hash = gunique_keymap_lock_hash(&ci->key.image);

		if (!OidIsValid(*partition))
			*partition = conflict_row_partition(state, slot);
		upsert_lock_acquire(ci->top, hash, ExclusiveLock, *partition);

		/*
		 * Counted as pending: an inserter of the key that had not seen the
		 * count has its entry in by the time its key lock, which the key's
		 * lock hash names whether the key has a hash or not, is free.  The
		 * lookup then finds it, or it waits for us.
		 */
		gunique_keylock_wait_out(ci->top, hash);
		if (!gunique_lookup_reader_find(ci->reader, ci->values, ci->isnull,
										&ci->key, &hit))
			return CHECK_CLEAR;
	}
	upsert_locks_release(InvalidOid);
	if (TransactionIdIsValid(hit.xwait))
	{
		conflict_wait(&hit);
		return CHECK_WAITED;
	}
	conflict_check_visible(state->css.ss.ps.state, &hit);
	return CHECK_HELD;
}

/*
 * Form the row's key in each checked index, and map it (keymap.c) once for
 * every look at it.
 */
static void
conflict_row_keys(ConflictCheckState *state, TupleTableSlot *slot)
{
	EState	   *estate = state->css.ss.ps.state;
	ExprContext *econtext = GetPerTupleExprContext(estate);

	for (int i = 0; i < state->nchecked; i++)
	{
		CheckedIndex *ci = &state->checked[i];

		ci->skip = ci->predicate != NULL && !ExecQual(ci->predicate, econtext);
		if (ci->skip)
			continue;
		FormIndexDatum(ci->info, slot, estate, ci->values, ci->isnull);
		for (int k = 0; k < ci->info->ii_NumIndexKeyAttrs; k++)
			ci->skip |= ci->isnull[k];
		/* "=" never holds of a null: left to the probe */
		if (!ci->skip)
			gunique_locate_key(&ci->key, &ci->map, ci->values, ci->isnull);
	}
}

/*
 * Is the row's key, in any checked index, held by a row of the tree?
 * Returns false holding the upsert locks of its keys.
 */
static bool
conflict_row_held(ConflictCheckState *state, TupleTableSlot *slot)
{
	EState	   *estate = state->css.ss.ps.state;

	/*
	 * FormIndexDatum evaluates expressions in the per-tuple context, which
	 * conflict_exec resets for each row.
	 */
	ExprContext *econtext = GetPerTupleExprContext(estate);
	TupleTableSlot *saved = econtext->ecxt_scantuple;
	bool		held = false;
	Oid			partition = InvalidOid;

	econtext->ecxt_scantuple = slot;
	conflict_row_keys(state, slot);
	for (int i = 0; i < state->nchecked && !held; i++)
	{
		CheckedIndex *ci = &state->checked[i];
		CheckOutcome outcome;

		if (ci->skip)
			continue;
		outcome = conflict_check_key(state, ci, slot, &partition);
		held = outcome == CHECK_HELD;
		if (outcome == CHECK_WAITED)
			i = -1;				/* every key again, its locks released */
		CHECK_FOR_INTERRUPTS();
	}
	econtext->ecxt_scantuple = saved;
	return held;
}

static TupleTableSlot *
conflict_exec(CustomScanState *node)
{
	ConflictCheckState *state = (ConflictCheckState *) node;

	for (;;)
	{
		TupleTableSlot *slot;

		/* the last row returned is in, or was left out by the executor */
		upsert_locks_release(InvalidOid);
		/* as ModifyTable does before each row it asks for */
		ResetPerTupleExprContext(state->css.ss.ps.state);
		slot = ExecProcNode(outerPlanState(state));
		if (TupIsNull(slot) || !conflict_row_held(state, slot))
			return slot;
		state->skipped++;
	}
}

static void
conflict_end(CustomScanState *node)
{
	ConflictCheckState *state = (ConflictCheckState *) node;

	upsert_locks_release(InvalidOid);
	for (int i = 0; i < state->nchecked; i++)
	{
		CheckedIndex *ci = &state->checked[i];

		gunique_lookup_reader_end(ci->reader);
		table_close(ci->toptable, NoLock);
		index_close(ci->topindex, NoLock);
		index_close(ci->index, NoLock);
	}
	ExecEndNode(outerPlanState(state));
}

static void
conflict_rescan(CustomScanState *node)
{
	upsert_locks_release(InvalidOid);
	if (outerPlanState(node)->chgParam == NULL)
		ExecReScan(outerPlanState(node));
}

static void
conflict_explain(CustomScanState *node, List *ancestors, ExplainState *es)
{
	CustomScan *cscan = (CustomScan *) node->ss.ps.plan;
	ConflictCheckState *state = (ConflictCheckState *) node;
	List	   *names = NIL;
	ListCell   *lc;

	for_each_from(lc, cscan->custom_private, 1)
		names = lappend(names, get_rel_name(lfirst_oid(lc)));
	ExplainPropertyList("Indexes", names, es);
	if (es->analyze)
		ExplainPropertyInteger("Rows Skipped", NULL, state->skipped, es);
}

/* A ModifyTable's conflict check learns of it. */
static void
conflict_find_modify_table(PlanState *ps)
{
	PlanState  *child;

	if (ps == NULL || !IsA(ps, ModifyTableState))
		return;
	child = outerPlanState(ps);
	if (child != NULL && IsA(child, CustomScanState) &&
		((CustomScanState *) child)->methods == &conflict_exec_methods)
		((ConflictCheckState *) child)->mtstate = (ModifyTableState *) ps;
}

/*
 * A conflict check routes its rows through its ModifyTable's routing,
 * which a node cannot reach from below: tell it, once the plan is started
 * (hooks.c, after standard_ExecutorStart).  The planner puts a ModifyTable
 * only at the top of a query's plan: the statement's, or a subplan's (a
 * data-modifying WITH query).
 */
void
gunique_onconflict_executor_started(QueryDesc *queryDesc, int eflags)
{
	PlannedStmt *pstmt = queryDesc->plannedstmt;
	ListCell   *lc;

	if ((pstmt->commandType != CMD_INSERT && !pstmt->hasModifyingCTE) ||
		(eflags & EXEC_FLAG_EXPLAIN_ONLY))
		return;
	conflict_find_modify_table(queryDesc->planstate);
	foreach(lc, queryDesc->estate->es_subplanstates)
		conflict_find_modify_table((PlanState *) lfirst(lc));
}

/*
 * Refuse a ModifyTable with a conflict check: gunique.enable_conflict_check
 * is off.  The check's custom_private is the target, then its indexes.
 */
static void
refuse_unchecked(Plan *plan)
{
	CustomScan *check;

	if (plan == NULL || !IsA(plan, ModifyTable) || outerPlan(plan) == NULL ||
		!IsA(outerPlan(plan), CustomScan))
		return;
	check = (CustomScan *) outerPlan(plan);
	if (check->methods != &conflict_scan_methods)
		return;
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("INSERT ... ON CONFLICT DO NOTHING into table \"%s\" is not allowed while \"%s\" is off",
					get_rel_name(linitial_oid(check->custom_private)),
					"gunique.enable_conflict_check"),
			 errdetail("Gunique index \"%s\" arbitrates the statement's conflicts; without the conflict check, a row whose key another partition holds would fail with a unique violation instead of being skipped.",
					   get_rel_name(lsecond_oid(check->custom_private))),
			 errhint("Set \"%s\" to on, or insert without ON CONFLICT and catch unique_violation (SQLSTATE 23505).",
					 "gunique.enable_conflict_check")));
}

/*
 * Before the executor starts (hooks.c): with gunique.enable_conflict_check
 * off, refuse a statement whose plan checks conflicts, before it locks or
 * opens anything more.  Its plan is the one that runs, and the setting is
 * read at each execution, so that a cached plan obeys it too.
 */
void
gunique_onconflict_executor_start(QueryDesc *queryDesc, int eflags)
{
	PlannedStmt *pstmt = queryDesc->plannedstmt;
	ListCell   *lc;

	if (gunique_enable_conflict_check ||
		(pstmt->commandType != CMD_INSERT && !pstmt->hasModifyingCTE))
		return;
	refuse_unchecked(pstmt->planTree);
	foreach(lc, pstmt->subplans)
		refuse_unchecked((Plan *) lfirst(lc));
}

/*
 * The gunique indexes that arbitrate the ModifyTable's conflicts, on a
 * table of a partition tree; NIL if none.
 */
static List *
arbiter_gunique_indexes(ModifyTable *mt, Oid target)
{
	List	   *result = NIL;
	ListCell   *lc;

	if (get_rel_relkind(target) != RELKIND_PARTITIONED_TABLE &&
		!get_rel_relispartition(target))
		return NIL;
	foreach(lc, gunique_table_indexes(target))
	{
		Oid			indexoid = lfirst_oid(lc);

		if (mt->arbiterIndexes == NIL ||
			list_member_oid(mt->arbiterIndexes, indexoid))
			result = lappend_oid(result, indexoid);
	}
	return result;
}

/*
 * Put a conflict check between an INSERT ... ON CONFLICT DO NOTHING and
 * its rows.
 */
static void
plan_modify_table(PlannedStmt *stmt, Plan *plan)
{
	ModifyTable *mt = (ModifyTable *) plan;
	CustomScan *cscan;
	List	   *indexes;
	Oid			target;

	if (plan == NULL || !IsA(plan, ModifyTable) ||
		mt->operation != CMD_INSERT ||
		mt->onConflictAction != ONCONFLICT_NOTHING)
		return;
	target = rt_fetch(linitial_int(mt->resultRelations), stmt->rtable)->relid;
	indexes = arbiter_gunique_indexes(mt, target);
	if (indexes == NIL)
		return;
	cscan = gunique_passnode_insert(stmt, mt, &conflict_scan_methods);
	cscan->custom_private = lcons_oid(target, indexes);
}

/*
 * The planner hook's last step (hooks.c), on the finished plan, whatever
 * gunique.enable_conflict_check says (see gunique_onconflict_executor_start).
 */
PlannedStmt *
gunique_onconflict_plan(PlannedStmt *stmt)
{
	ListCell   *lc;

	if (stmt->commandType == CMD_SELECT && !stmt->hasModifyingCTE)
		return stmt;
	plan_modify_table(stmt, stmt->planTree);
	foreach(lc, stmt->subplans)
		plan_modify_table(stmt, (Plan *) lfirst(lc));
	return stmt;
}

/* Called once, at load (hooks.c). */
void
gunique_onconflict_register_scan(void)
{
	RegisterCustomScanMethods(&conflict_scan_methods);
}

#endif

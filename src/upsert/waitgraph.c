/*-------------------------------------------------------------------------
 *
 * waitgraph.c
 *	  Would waiting for a lock close a cycle at once?
 *
 * An inserter that meets a pending upsert of its key waits for the
 * check's upsert lock (onconflict.c).  The check may itself be waiting,
 * in the executor or in a probe, for a row this inserter's transaction
 * inserted before, directly or through other transactions that wait for
 * each other's rows: then the wait would be a deadlock that the deadlock
 * detector breaks by cancelling one of them.  This file answers, from the
 * lock manager's own account (the one pg_blocking_pids reads), whether a
 * holder of a lock is waiting right now, through a chain of such waits,
 * for this backend's lock group.
 *
 * Only waits for a transaction (a row it inserted or deletes), for a
 * speculative insertion, and for an upsert lock are followed: where the
 * check waits for something else of the inserter's (an advisory lock its
 * CHECK function takes, a relation), the inserter going in would let the
 * check on only to fail on the key, and the deadlock detector's choice of
 * one to cancel is no worse.  A cycle that closes after the question was
 * asked is left to the deadlock detector too.  src/README, "INSERT ... ON
 * CONFLICT", point 4.
 *
 * The answer is put together from one look per process of the chain, each
 * consistent in itself, of something that changes; the caller must be
 * right whichever way it goes (waiting, or not waiting, never costs a
 * duplicate).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/xlog.h"
#include "miscadmin.h"
#include "storage/lock.h"
#include "storage/proc.h"

#include "compat.h"
#include "upsert/waitgraph.h"

/* The lock groups still to look at, and those seen, by leader's pid. */
typedef struct WaitWalk
{
	int		   *pids;
	int			npids;			/* seen: pids[0 .. npids) */
	int			next;			/* to look at: pids[next .. npids) */
	int			maxpids;
} WaitWalk;

static void
walk_add(WaitWalk *walk, int pid)
{
	if (pid == 0)
		return;					/* a prepared transaction: it waits not */
	for (int i = 0; i < walk->npids; i++)
		if (walk->pids[i] == pid)
			return;
	if (walk->npids == walk->maxpids)
	{
		walk->maxpids *= 2;
		walk->pids = repalloc(walk->pids, sizeof(int) * walk->maxpids);
	}
	walk->pids[walk->npids++] = pid;
}

/*
 * Does a wait for this lock count as a wait for a row, or for an upsert: a
 * transaction's lock, a speculative insertion's, or an upsert lock
 * (onconflict.c; the same tag in ShareLock or ExclusiveLock)?
 */
static bool
waits_for_row(const LOCKTAG *tag)
{
	return tag->locktag_type == LOCKTAG_TRANSACTION ||
		tag->locktag_type == LOCKTAG_SPECULATIVE_TOKEN ||
		(tag->locktag_type == LOCKTAG_ADVISORY &&
		 tag->locktag_field4 == GUNIQUE_UPSERT_LOCK_FIELD4);
}

/* Is "pid" among the processes ahead of a blocked one in its queue? */
static bool
waits_ahead(BlockedProcsData *data, BlockedProcData *bproc, int pid)
{
	int		   *ahead = data->waiter_pids + bproc->first_waiter;

	for (int i = 0; i < bproc->num_waiters; i++)
		if (ahead[i] == pid)
			return true;
	return false;
}

/*
 * Add to the walk the lock groups that one blocked process waits for: those
 * that hold its lock in a mode that conflicts with the one it asks for, and
 * those that wait for it in such a mode ahead of it in the queue.
 */
static void
walk_blockers(WaitWalk *walk, BlockedProcsData *data,
			  BlockedProcData *bproc)
{
	LockInstanceData *instances = data->locks + bproc->first_lock;
	LockInstanceData *own = NULL;
	LockMethod	method;
	LOCKMASK	conflicts;

	for (int i = 0; i < bproc->num_locks; i++)
		if (instances[i].pid == bproc->pid)
			own = &instances[i];
	if (own == NULL || own->waitLockMode == NoLock ||
		!waits_for_row(&own->locktag))
		return;
	method = GetLockTagsMethodTable(&own->locktag);
	conflicts = method->conflictTab[own->waitLockMode];
	for (int i = 0; i < bproc->num_locks; i++)
	{
		LockInstanceData *other = &instances[i];

		if (other->leaderPid == own->leaderPid)
			continue;
		if ((other->holdMask & conflicts) != 0 ||
			(other->waitLockMode != NoLock &&
			 (conflicts & LOCKBIT_ON(other->waitLockMode)) != 0 &&
			 waits_ahead(data, bproc, other->pid)))
			walk_add(walk, other->leaderPid);
	}
}

/* Add to the walk what the lock group of "pid" waits for. */
static void
walk_one(WaitWalk *walk, int pid)
{
	BlockedProcsData *data = GetBlockerStatusData(pid);

	for (int i = 0; i < data->nprocs; i++)
		walk_blockers(walk, data, &data->procs[i]);
	pfree(data->procs);
	pfree(data->locks);
	pfree(data->waiter_pids);
	pfree(data);
}

/*
 * Is a holder of the lock "tag", in a mode that conflicts with "mode",
 * waiting now for this backend's lock group, directly or through others?
 * Cheap when nobody holds the lock; otherwise it locks the lock manager's
 * tables once for each lock group of the chain, as pg_blocking_pids does
 * once, so callers ask only when they are about to sleep anyway, holding
 * no LWLock.
 */
bool
gunique_lock_holder_waits_for_me(const LOCKTAG *tag, LOCKMODE mode)
{
	VirtualTransactionId *holders;
	int			nholders;
	int			me;
	WaitWalk	walk;
	bool		waits = false;

	/* in recovery GetLockConflicts' array is its own; nobody inserts */
	Assert(!RecoveryInProgress());
	me = MyProc->lockGroupLeader != NULL ?
		MyProc->lockGroupLeader->pid : MyProcPid;
	walk.maxpids = 8;
	walk.pids = palloc(sizeof(int) * walk.maxpids);
	walk.npids = walk.next = 0;
	holders = GetLockConflicts(tag, mode, &nholders);
	for (int i = 0; i < nholders; i++)
	{
		PGPROC	   *proc = gunique_vxid_proc(holders[i]);

		/*
		 * A prepared transaction waits for nothing.  Its vxid may name the
		 * backend that prepared it (or one that took its slot since), which
		 * has gone on to another transaction: skip it.  Skip too a holder
		 * without a lock group that waits for no lock, as read without the
		 * lock manager's locks: one that begins to wait just now closes a
		 * cycle after the question, which is the deadlock detector's.
		 */
		if (proc == NULL ||
			gunique_proc_lxid(proc) != holders[i].localTransactionId ||
			(proc->lockGroupLeader == NULL && proc->waitLock == NULL))
			continue;
		walk_add(&walk, proc->pid);
	}
	pfree(holders);
	while (walk.next < walk.npids && !waits)
	{
		int			pid = walk.pids[walk.next++];

		if (pid == me)
			waits = true;
		else
			walk_one(&walk, pid);
	}
	pfree(walk.pids);
	return waits;
}

/*-------------------------------------------------------------------------
 *
 * waitgraph.c
 *	  Would waiting for a lock close a cycle at once?
 *
 * An inserter that meets a pending upsert of its key waits for the
 * check's upsert lock (onconflict.c).  The check may itself be waiting,
 * in the executor or in a probe, for a row this inserter's transaction
 * inserted before: then the wait would be a deadlock that the deadlock
 * detector breaks a second later by cancelling one of the two.  This
 * file answers, from the lock manager's own account (the one
 * pg_blocking_pids reads), whether a holder of a lock is waiting right now
 * for a lock that this backend's lock group holds.  It looks one step
 * only: a cycle through a third transaction, or one that closes after the
 * question was asked, is left to the deadlock detector.  src/README, "ON
 * CONFLICT DO NOTHING", points 4 and 5.
 *
 * The answer is a snapshot of something that changes; the caller must be
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
#include "waitgraph.h"

/*
 * Among the lock instances of the lock one blocked process awaits, is one
 * held by the lock group led by "leader" in a mode that blocks it?
 */
static bool
blocked_proc_waits_for(BlockedProcsData *data, BlockedProcData *bproc,
					   int leader)
{
	LockInstanceData *instances = data->locks + bproc->first_lock;
	LockInstanceData *own = NULL;
	LOCKMASK	blocking;

	for (int i = 0; i < bproc->num_locks; i++)
		if (instances[i].pid == bproc->pid)
			own = &instances[i];
	if (own == NULL || own->waitLockMode == NoLock)
		return false;
	blocking = GetLockTagsMethodTable(&own->locktag)->conflictTab[own->waitLockMode];
	for (int i = 0; i < bproc->num_locks; i++)
		if (instances[i].leaderPid == leader &&
			(instances[i].holdMask & blocking) != 0)
			return true;
	return false;
}

/* Is the process "pid" (or a member of its lock group) waiting for us? */
static bool
process_waits_for(int pid, int leader)
{
	BlockedProcsData *data = GetBlockerStatusData(pid);
	bool		waits = false;

	for (int i = 0; i < data->nprocs && !waits; i++)
		waits = blocked_proc_waits_for(data, &data->procs[i], leader);
	pfree(data->procs);
	pfree(data->locks);
	pfree(data->waiter_pids);
	pfree(data);
	return waits;
}

/*
 * Is a holder of the lock "tag", in a mode that conflicts with "mode",
 * waiting now for a lock that this backend's lock group holds (its
 * transaction's, a row's, a relation's)?  Cheap when nobody holds the
 * lock; otherwise it reads the lock manager's whole state, once for each
 * holder, as pg_blocking_pids does, so callers ask only when they are about
 * to sleep anyway.
 */
bool
gunique_lock_holder_waits_for_me(const LOCKTAG *tag, LOCKMODE mode)
{
	VirtualTransactionId *holders;
	int			nholders;
	int			leader;
	bool		waits = false;

	leader = MyProc->lockGroupLeader != NULL ?
		MyProc->lockGroupLeader->pid : MyProcPid;
	holders = GetLockConflicts(tag, mode, &nholders);
	for (int i = 0; i < nholders && !waits; i++)
	{
		PGPROC	   *proc = gunique_vxid_proc(holders[i]);
		int			pid = proc != NULL ? proc->pid : 0;

		/* a prepared transaction, or a backend gone since: it waits not */
		if (pid != 0 && pid != MyProcPid)
			waits = process_waits_for(pid, leader);
	}
	/* in recovery the array would be GetLockConflicts' own; nobody inserts */
	Assert(!RecoveryInProgress());
	pfree(holders);
	return waits;
}

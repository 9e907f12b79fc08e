/*-------------------------------------------------------------------------
 *
 * common.c
 *	  Helpers that every gunique module may call.
 *
 * This module calls no other gunique module, so that no call cycle runs
 * through it: gunique.c calls hooks.c, hooks.c calls the features, and any
 * module may call these.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "miscadmin.h"
#include "storage/proc.h"

#include "gunique.h"

/* Set by _PG_init under shared_preload_libraries, before any hook. */
bool		gunique_preloaded = false;

/*
 * Per-backend slots in shared memory (waiters.c, keylock.c) are indexed by
 * this: regular backends and background workers have the first MaxBackends
 * PGPROCs, auxiliary processes and prepared transactions the rest.
 */
int
gunique_backend_slot(void)
{
	int			procno = MyProc - ProcGlobal->allProcs;

	if (procno < 0 || procno >= MaxBackends)
		elog(ERROR, "gunique: process %d has no backend slot", MyProcPid);
	return procno;
}

/*
 * Refuse an operation that needs the preloaded library.  Each operation has
 * its own whole message, for translation.
 */
void
gunique_report_not_preloaded(GuniquePreloadNeed need)
{
	const char *msg = NULL;

	switch (need)
	{
		case GUNIQUE_NEED_CREATE_TREE:
			msg = gettext_noop("gunique must be loaded via shared_preload_libraries to create a gunique index on a partitioned table");
			break;
		case GUNIQUE_NEED_CREATE_PARTITION:
			msg = gettext_noop("gunique must be loaded via shared_preload_libraries to create a partition of a table with a gunique index");
			break;
		case GUNIQUE_NEED_ATTACH:
			msg = gettext_noop("gunique must be loaded via shared_preload_libraries to attach a partition to a gunique index");
			break;
		case GUNIQUE_NEED_ALTER_COLUMN:
			msg = gettext_noop("gunique must be loaded via shared_preload_libraries to alter a column that a gunique index on a partitioned table depends on");
			break;
		case GUNIQUE_NEED_BUILD:
			msg = gettext_noop("gunique must be loaded via shared_preload_libraries to build a partition of a gunique index");
			break;
		case GUNIQUE_NEED_INSERT:
			msg = gettext_noop("gunique must be loaded via shared_preload_libraries to insert into a partition of a gunique index");
			break;
	}
	if (msg == NULL)
		elog(ERROR, "unrecognized gunique preload need: %d", (int) need);

	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg_internal("%s", _(msg)),
			 errdetail("Uniqueness across partitions is enforced by hooks that gunique installs only when the server preloads it."),
			 errhint("Add \"gunique\" to shared_preload_libraries in postgresql.conf and restart the server.")));
}

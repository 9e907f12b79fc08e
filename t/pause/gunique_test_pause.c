/*-------------------------------------------------------------------------
 *
 * gunique_test_pause.c
 *	  For tests only: hold a backend at the end of its transaction, after
 *	  the transaction has stopped running for every other snapshot; a C
 *	  comparison function that calls SQL; gunique's key locks held.
 *
 * t/014_abort_window.pl holds a transaction in its abort, before gunique's
 * abort callbacks forget the summaries it rebuilt.  t/018_partition_windows.pl
 * holds one in its commit, before its invalidation messages are sent and its
 * locks released: other backends' fresh catalog reads see what it did, their
 * caches do not yet know.  sql/progress.sql: a comparison function written
 * in C that lets SQL look at the merge from inside it.
 * t/020_upsert_keylocks.pl: gunique's key locks held in share mode.
 *
 * LOAD it by path into a session of a server that preloads gunique:
 * PostgreSQL calls transaction callbacks newest first, so this one runs
 * before gunique's.  With gunique_test_pause.file set, a transaction that
 * ends as gunique_test_pause.event says (abort, the default, or commit)
 * while that file exists logs "gunique_test_pause: paused" and waits until
 * the file is gone, three minutes at most.  Never installed.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>

#include "access/xact.h"
#include "fmgr.h"
#include "miscadmin.h"
#include "nodes/makefuncs.h"
#include "nodes/value.h"
#include "parser/parse_func.h"
#include "storage/lwlock.h"
#include "utils/fmgrprotos.h"
#include "utils/guc.h"

PG_MODULE_MAGIC;

void		_PG_init(void);

#define PAUSE_MAX_WAITS 18000	/* of 10 ms */

static const struct config_enum_entry pause_events[] = {
	{"abort", XACT_EVENT_ABORT, false},
	{"commit", XACT_EVENT_COMMIT, false},
	{NULL, 0, false}
};

static char *pause_file = NULL;
static int	pause_event = XACT_EVENT_ABORT;

static bool
pause_file_exists(void)
{
	struct stat st;

	return pause_file != NULL && pause_file[0] != '\0' &&
		stat(pause_file, &st) == 0;
}

static void
pause_xact_callback(XactEvent event, void *arg)
{
	if ((int) event != pause_event || !pause_file_exists())
		return;
	ereport(LOG,
			(errmsg("gunique_test_pause: paused")));
	for (int i = 0; i < PAUSE_MAX_WAITS && pause_file_exists(); i++)
		pg_usleep(10000L);
}

/*
 * gunique_test_cmp(int4, int4): btint4cmp, after a call of the function
 * gunique_test_cmp_hook() if the search path has one.  gunique refuses a
 * comparison function that is not written in C, since it calls them under
 * its key locks; sql/progress.sql calls this one only from the check
 * across partitions (CREATE INDEX, ATTACH), which holds none, and reads
 * the backend's progress report from the hook.
 */
PG_FUNCTION_INFO_V1(gunique_test_cmp);

Datum
gunique_test_cmp(PG_FUNCTION_ARGS)
{
	Oid			hook = LookupFuncName(list_make1(makeString("gunique_test_cmp_hook")),
									  0, NULL, true);

	if (OidIsValid(hook))
		(void) OidFunctionCall0(hook);
	return DirectFunctionCall2(btint4cmp, PG_GETARG_DATUM(0),
							   PG_GETARG_DATUM(1));
}

/*
 * gunique_test_hold_keylocks(n int4): take the first n of gunique's key
 * locks (its LWLock tranche, found by name) in share mode, and hold them
 * while gunique_test_pause.file exists, three minutes at most.  Whatever
 * takes one of them exclusive waits meanwhile (an inserter of a key whose
 * lock it is, a filter build's barrier); whatever takes it shared does
 * not.  A backend holds at most MAX_SIMUL_LWLOCKS (200) LWLocks.
 */
PG_FUNCTION_INFO_V1(gunique_test_hold_keylocks);

Datum
gunique_test_hold_keylocks(PG_FUNCTION_ARGS)
{
	int			n = PG_GETARG_INT32(0);
	LWLockPadded *locks = GetNamedLWLockTranche("gunique key locks");

	if (n < 0 || n > 100)
		ereport(ERROR,
				(errcode(ERRCODE_INVALID_PARAMETER_VALUE),
				 errmsg("gunique_test_hold_keylocks holds 0 to 100 key locks")));
	for (int i = 0; i < n; i++)
		LWLockAcquire(&locks[i].lock, LW_SHARED);
	ereport(LOG,
			(errmsg("gunique_test_pause: holding %d key locks", n)));
	for (int i = 0; i < PAUSE_MAX_WAITS && pause_file_exists(); i++)
		pg_usleep(10000L);
	for (int i = 0; i < n; i++)
		LWLockRelease(&locks[i].lock);
	PG_RETURN_VOID();
}

void
_PG_init(void)
{
	DefineCustomStringVariable("gunique_test_pause.file",
							   "While this file exists, a transaction that ends as gunique_test_pause.event says pauses before gunique's callbacks.",
							   NULL,
							   &pause_file,
							   "",
							   PGC_USERSET,
							   0,
							   NULL, NULL, NULL);
	DefineCustomEnumVariable("gunique_test_pause.event",
							 "The end of a transaction that pauses: abort or commit.",
							 NULL,
							 &pause_event,
							 XACT_EVENT_ABORT,
							 pause_events,
							 PGC_USERSET,
							 0,
							 NULL, NULL, NULL);
	MarkGUCPrefixReserved("gunique_test_pause");
	RegisterXactCallback(pause_xact_callback, NULL);
}

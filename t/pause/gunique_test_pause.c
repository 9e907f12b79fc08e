/*-------------------------------------------------------------------------
 *
 * gunique_test_pause.c
 *	  For tests only: hold a backend at the end of its transaction, after
 *	  the transaction has stopped running for every other snapshot.
 *
 * t/014_abort_window.pl holds a transaction in its abort, before gunique's
 * abort callbacks forget the summaries it rebuilt.  t/018_partition_windows.pl
 * holds one in its commit, before its invalidation messages are sent and its
 * locks released: other backends' fresh catalog reads see what it did, their
 * caches do not yet know.
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

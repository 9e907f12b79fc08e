/*-------------------------------------------------------------------------
 *
 * gunique.c
 *	  Module entry point: load-time setup.
 *
 * gunique installs its utility hook only when loaded through
 * shared_preload_libraries.  A library loaded later, by the first call of the
 * access method's handler, would install the hook in the middle of the very
 * statement that needed it, and only in that one backend; instead, every
 * entry point that needs the hook refuses to work without the preload (see
 * gunique_report_not_preloaded).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "storage/ipc.h"
#include "storage/proc.h"
#include "utils/guc.h"

#include "compat.h"
#include "gunique.h"
#include "admin/stats.h"
#include "am/scope.h"
#include "ddl/ddl.h"
#include "insert/keylock.h"
#include "insert/probescan.h"
#include "insert/waiters.h"
#include "locate/builder.h"
#include "locate/filter.h"
#include "locate/persist.h"
#include "locate/rebuilds.h"
#include "locate/summary.h"
#include "read/keyprune.h"
#include "read/lookupplan.h"
#include "upsert/onconflict.h"

GUNIQUE_MODULE_MAGIC;

static shmem_request_hook_type prev_shmem_request_hook = NULL;
static shmem_startup_hook_type prev_shmem_startup_hook = NULL;

void		_PG_init(void);

static void
gunique_shmem_request(void)
{
	if (prev_shmem_request_hook)
		prev_shmem_request_hook();
	gunique_keylock_shmem_request();
	gunique_waiters_shmem_request();
	gunique_summary_shmem_request();
	gunique_rebuilds_shmem_request();
	gunique_persist_shmem_request();	/* before the filters' size */
	gunique_filter_shmem_request();
	gunique_stats_shmem_request();
	gunique_builder_shmem_request();
}

/*
 * The postmaster runs this at start and again after every crash restart,
 * when it has re-created shared memory, and so does each backend where
 * backends are not forked (EXEC_BACKEND): it only finds or creates gunique's
 * shared structures.  Per-process registrations (callbacks, hooks) belong
 * in _PG_init, which runs once in each process image.
 */
static void
gunique_shmem_startup(void)
{
	if (prev_shmem_startup_hook)
		prev_shmem_startup_hook();
	gunique_keylock_shmem_startup();
	gunique_waiters_shmem_startup();
	gunique_summary_shmem_startup();
	gunique_rebuilds_shmem_startup();
	gunique_filter_shmem_startup();
	gunique_stats_shmem_startup();
	gunique_builder_shmem_startup();
	gunique_persist_load();
}

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	DefineCustomIntVariable("gunique.max_summaries",
							"Sets the number of gunique indexes whose key ranges and filters the shared table is sized for.",
							"A probe skips a partition whose key range cannot hold the key.  Past this number, entries take the shared memory left spare; a leaf without one, once that runs out, is always probed.",
							&gunique_max_summaries,
							16384, 0, INT_MAX / 2,
							PGC_POSTMASTER, 0,
							NULL, NULL, NULL);
	DefineCustomIntVariable("gunique.filter_memory",
							"Sets the most shared memory the key filters of gunique indexes may take.",
							"Filters take memory as they are made, up to this limit; -1 sets it to a sixteenth of the machine's memory.  A probe skips a partition whose key filter rules the key out; without room for a filter a partition is always searched.  0 makes no new filters.",
							&gunique_filter_memory,
							-1, -1, INT_MAX / 2,
							PGC_SIGHUP, GUC_UNIT_KB,
							NULL, NULL, NULL);
	DefineCustomBoolVariable("gunique.key_filters",
							 "Lets probes rule partitions out by their key filters.",
							 "Off, probes rely on key ranges alone; inserts still keep the filters up to date.",
							 &gunique_key_filters,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	gunique_lookup_plan_init();
	MarkGUCPrefixReserved("gunique");

	prev_shmem_request_hook = shmem_request_hook;
	shmem_request_hook = gunique_shmem_request;
	prev_shmem_startup_hook = shmem_startup_hook;
	shmem_startup_hook = gunique_shmem_startup;

	gunique_preloaded = true;
	gunique_ddl_init();
	gunique_scope_init();
	gunique_onconflict_init();
	gunique_keyprune_init();
	gunique_probescan_init();
	gunique_stats_init();
	gunique_summary_init();
	gunique_persist_init();
}

/*-------------------------------------------------------------------------
 *
 * gunique.c
 *	  Module entry point: the settings, then the hooks.
 *
 * gunique installs its hooks only when loaded through
 * shared_preload_libraries.  A library loaded later, by the first call of the
 * access method's handler, would install the utility hook in the middle of
 * the very statement that needed it, and only in that one backend; instead,
 * every entry point that needs the hooks refuses to work without the preload
 * (see gunique_report_not_preloaded).  What the hooks call, and in which
 * order, is hooks.c.
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "fmgr.h"
#include "miscadmin.h"
#include "utils/guc.h"

#include "compat.h"
#include "gunique.h"
#include "hooks.h"
#include "locate/filter.h"
#include "locate/summary.h"
#include "read/keyprune.h"
#include "read/lookupplan.h"
#include "upsert/onconflict.h"

GUNIQUE_MODULE_MAGIC;

void		_PG_init(void);

/* The settings; README.md, "Settings", says when to change each. */
static void
define_settings(void)
{
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
	DefineCustomBoolVariable("gunique.enable_lookup",
							 "Enables the planner's use of lookups by a gunique key.",
							 "A lookup reads a partitioned table by the key of a gunique index through the partitions that can hold the key.  Off, such a query reads every partition the partition key does not rule out, as PostgreSQL plans it; plans already made keep their lookups.  UPDATE and DELETE by the key have their own setting, gunique.enable_modify_by_key.",
							 &gunique_enable_lookup,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("gunique.enable_modify_by_key",
							 "Enables the planning of UPDATE and DELETE by a gunique key for the key's partition alone.",
							 "Such a statement is planned for the partition that holds the key as it is planned, and checked again as it starts.  Off, it is planned for every partition the partition key does not rule out, as PostgreSQL plans it; plans already made keep theirs.",
							 &gunique_enable_modify_by_key,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	DefineCustomBoolVariable("gunique.enable_conflict_check",
							 "Enables the check of INSERT ... ON CONFLICT DO NOTHING against the other partitions (PostgreSQL 18).",
							 "The check skips a row whose key another partition holds.  Off, such a statement is refused as it starts, every execution, rather than fail with a unique violation at the first such row.  Before PostgreSQL 18 every INSERT ... ON CONFLICT on a table with a gunique index is refused whatever the setting.",
							 &gunique_enable_conflict_check,
							 true,
							 PGC_USERSET, 0,
							 NULL, NULL, NULL);
	MarkGUCPrefixReserved("gunique");
}

void
_PG_init(void)
{
	gunique_hooks_register_relcache();
	if (!process_shared_preload_libraries_in_progress)
		return;

	define_settings();
	gunique_preloaded = true;
	gunique_hooks_install();
}

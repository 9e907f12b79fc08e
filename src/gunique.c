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

#include "compat.h"
#include "ddl.h"
#include "gunique.h"
#include "onconflict.h"
#include "probescan.h"
#include "scope.h"

GUNIQUE_MODULE_MAGIC;

bool		gunique_preloaded = false;

void		_PG_init(void);

void
_PG_init(void)
{
	if (!process_shared_preload_libraries_in_progress)
		return;

	gunique_preloaded = true;
	gunique_ddl_init();
	gunique_scope_init();
	gunique_onconflict_init();
	gunique_probescan_init();
}

/*
 * Refuse an operation that needs the preloaded library.
 */
void
gunique_report_not_preloaded(const char *what)
{
	ereport(ERROR,
			(errcode(ERRCODE_OBJECT_NOT_IN_PREREQUISITE_STATE),
			 errmsg("gunique must be loaded via shared_preload_libraries to %s", what),
			 errdetail("Uniqueness across partitions is enforced by hooks that gunique installs only when the server preloads it."),
			 errhint("Add \"gunique\" to shared_preload_libraries in postgresql.conf and restart the server.")));
}

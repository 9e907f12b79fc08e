/*-------------------------------------------------------------------------
 *
 * handler.h
 *	  The gunique index access method handler.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_HANDLER_H
#define GUNIQUE_HANDLER_H

#include "access/genam.h"
#include "fmgr.h"
#include "nodes/execnodes.h"

extern Datum gunique_handler(PG_FUNCTION_ARGS);

extern bool gunique_btinsert(Relation index, Datum *values, bool *isnull,
							 ItemPointer heap_tid, Relation heap,
							 IndexUniqueCheck checkUnique, bool indexUnchanged,
							 IndexInfo *indexInfo);

#endif							/* GUNIQUE_HANDLER_H */

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

#endif							/* GUNIQUE_HANDLER_H */

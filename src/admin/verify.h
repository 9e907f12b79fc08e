/*-------------------------------------------------------------------------
 *
 * verify.h
 *	  gunique_verify(): audit a gunique index tree from scratch.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_VERIFY_H
#define GUNIQUE_VERIFY_H

#include "fmgr.h"

extern Datum gunique_verify(PG_FUNCTION_ARGS);

#endif							/* GUNIQUE_VERIFY_H */

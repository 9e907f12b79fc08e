/*-------------------------------------------------------------------------
 *
 * keepkey.h
 *	  An UPDATE that keeps its key: the proof, read in own leaf, that no
 *	  other partition needs to be searched.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_KEEPKEY_H
#define GUNIQUE_KEEPKEY_H

#include "storage/itemptr.h"

#include "insert/probescan.h"

extern bool gunique_update_keeps_key(ProbeScan *own, int nkeys,
									 Datum *values, bool *isnull,
									 ItemPointer newtid);

#endif							/* GUNIQUE_KEEPKEY_H */

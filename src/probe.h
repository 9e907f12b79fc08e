/*-------------------------------------------------------------------------
 *
 * probe.h
 *	  Insert-time enforcement of uniqueness across partitions.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_PROBE_H
#define GUNIQUE_PROBE_H

#include "access/genam.h"
#include "nodes/execnodes.h"

extern bool gunique_probe_insert(Relation index, Datum *values, bool *isnull,
								 ItemPointer heap_tid, Relation heap,
								 IndexUniqueCheck checkUnique,
								 bool indexUnchanged, IndexInfo *indexInfo);

#endif							/* GUNIQUE_PROBE_H */

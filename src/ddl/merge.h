/*-------------------------------------------------------------------------
 *
 * merge.h
 *	  The CREATE / ATTACH check: one merge of the leaves' sorted keys.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_MERGE_H
#define GUNIQUE_MERGE_H

#include "storage/lockdefs.h"
#include "utils/relcache.h"
#include "utils/snapshot.h"

/* Sub-phase reported in pg_stat_progress_create_index during the check. */
#define GUNIQUE_PHASE_MERGE_CHECK	6

/* Called for each key shared by live rows; heap1 may equal heap2. */
typedef void (*GuniqueDuplicateCallback) (void *arg, Relation index,
										  Datum *values, bool *isnull,
										  Relation heap1, Relation heap2);

extern int64 gunique_merge_tree(Oid topindex, LOCKMODE lockmode,
								Snapshot snapshot, Oid attached,
								bool fill_filters,
								GuniqueDuplicateCallback callback, void *arg);
extern void gunique_check_tree(Oid topindex, Oid attached,
							   Oid only_attached);
extern void gunique_check_tree_lock(Oid topindex);
extern void gunique_check_tree_concurrently(Oid topindex);
extern void gunique_check_attached(Oid topindex, Oid attached);

#endif							/* GUNIQUE_MERGE_H */

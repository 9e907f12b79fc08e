/*-------------------------------------------------------------------------
 *
 * merge.h
 *	  The CREATE / ATTACH check: one merge of the leaves' sorted keys.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_MERGE_H
#define GUNIQUE_MERGE_H

/* Sub-phase reported in pg_stat_progress_create_index during the check. */
#define GUNIQUE_PHASE_MERGE_CHECK	6

extern void gunique_check_tree(Oid topindex, Oid attached);

#endif							/* GUNIQUE_MERGE_H */

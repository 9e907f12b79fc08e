/*-------------------------------------------------------------------------
 *
 * rebuilds.h
 *	  Leaf rebuilds that some snapshot may not see yet (rebuilds.c).
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_REBUILDS_H
#define GUNIQUE_REBUILDS_H

#include "utils/snapshot.h"

extern void gunique_rebuilds_shmem_request(void);
extern void gunique_rebuilds_shmem_startup(void);
/* the most index OIDs gunique_rebuilds_unseen returns */
#define GUNIQUE_REBUILDS_MAX 64

extern void gunique_rebuilds_note(Oid index);
extern void gunique_rebuilds_end(bool forgot);
extern uint64 gunique_rebuilds_mark(void);
extern int	gunique_rebuilds_unseen(Snapshot snapshot, uint64 mark,
									Oid *noted);

#endif							/* GUNIQUE_REBUILDS_H */

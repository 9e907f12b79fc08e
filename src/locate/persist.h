/*-------------------------------------------------------------------------
 *
 * persist.h
 *	  Key ranges and filters saved at a clean shutdown, loaded at start.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_PERSIST_H
#define GUNIQUE_PERSIST_H

extern void gunique_persist_init(void);
extern void gunique_persist_shmem_request(void);
extern void gunique_persist_load(void);

#endif							/* GUNIQUE_PERSIST_H */

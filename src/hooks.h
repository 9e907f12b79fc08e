/*-------------------------------------------------------------------------
 *
 * hooks.h
 *	  Installing gunique's hooks and callbacks (hooks.c), from _PG_init.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_HOOKS_H
#define GUNIQUE_HOOKS_H

extern void gunique_hooks_register_relcache(void);
extern void gunique_hooks_install(void);

#endif							/* GUNIQUE_HOOKS_H */

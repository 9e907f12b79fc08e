/*-------------------------------------------------------------------------
 *
 * gunique.h
 *	  Declarations shared by every gunique module.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_H
#define GUNIQUE_H

#define GUNIQUE_AM_NAME "gunique"

/* True when the library was loaded through shared_preload_libraries. */
extern bool gunique_preloaded;

extern void gunique_report_not_preloaded(const char *what);

#endif							/* GUNIQUE_H */

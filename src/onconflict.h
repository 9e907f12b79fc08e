/*-------------------------------------------------------------------------
 *
 * onconflict.h
 *	  INSERT ... ON CONFLICT on tables with gunique indexes.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_ONCONFLICT_H
#define GUNIQUE_ONCONFLICT_H

extern void gunique_onconflict_init(void);

#endif							/* GUNIQUE_ONCONFLICT_H */

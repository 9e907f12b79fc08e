/*-------------------------------------------------------------------------
 *
 * gunique.h
 *	  Declarations shared by every gunique module: the helpers of
 *	  common.c, which calls no other module.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_H
#define GUNIQUE_H

#define GUNIQUE_AM_NAME "gunique"

/* True when the library was loaded through shared_preload_libraries. */
extern bool gunique_preloaded;

/* What an entry point refuses to do when the library was not preloaded. */
typedef enum GuniquePreloadNeed
{
	GUNIQUE_NEED_CREATE_TREE,	/* CREATE INDEX on a partitioned table */
	GUNIQUE_NEED_CREATE_PARTITION,	/* CREATE TABLE ... PARTITION OF */
	GUNIQUE_NEED_ATTACH,		/* ALTER ... ATTACH PARTITION */
	GUNIQUE_NEED_ALTER_COLUMN,	/* ALTER TABLE ... ALTER COLUMN ... TYPE */
	GUNIQUE_NEED_BUILD,			/* building a member of a tree */
	GUNIQUE_NEED_INSERT			/* inserting into a member of a tree */
} GuniquePreloadNeed;

extern void gunique_report_not_preloaded(GuniquePreloadNeed need);

/* This backend's index among the first MaxBackends PGPROCs. */
extern int	gunique_backend_slot(void);

#endif							/* GUNIQUE_H */

/*-------------------------------------------------------------------------
 *
 * fkey.h
 *	  Foreign keys beside gunique indexes, before PostgreSQL 18.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_FKEY_H
#define GUNIQUE_FKEY_H

#include "nodes/parsenodes.h"

extern bool gunique_fkey_hidden(Oid indexoid);
extern List *gunique_fkey_hide(AlterTableStmt *stmt);
extern void gunique_fkey_unhide(List *indexes, bool failed);

#endif							/* GUNIQUE_FKEY_H */

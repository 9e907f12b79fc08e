/*-------------------------------------------------------------------------
 *
 * tree.h
 *	  gunique index trees in the catalogs.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_TREE_H
#define GUNIQUE_TREE_H

#include "nodes/pg_list.h"
#include "storage/lockdefs.h"

extern bool gunique_is_gunique_index(Oid indexoid);
extern void gunique_require_gunique_index(Oid indexoid);
extern List *gunique_table_indexes(Oid tableoid);
extern List *gunique_tree_members(Oid topindex);
extern void gunique_tree_set_unique(Oid topindex, bool unique);
extern void gunique_index_set_unique(Oid indexoid, bool unique);
extern bool gunique_index_is_valid(Oid indexoid);
extern bool gunique_index_is_unique(Oid indexoid);
extern List *gunique_trees_on_columns(Oid tableoid, List *colnames);
extern bool gunique_index_is_replica_identity(Oid indexoid);
extern char *gunique_new_index(Oid relid, Oid *namespace, char *relkind);
extern List *gunique_attach_validation_path(Oid parent, Oid child);
extern bool gunique_attach_completes_top(Oid parent, Oid child);
extern void gunique_refuse_foreign_partitions(Oid tableoid,
											  LOCKMODE lockmode);

#endif							/* GUNIQUE_TREE_H */

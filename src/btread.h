/*-------------------------------------------------------------------------
 *
 * btread.h
 *	  Reading a gunique leaf's btree directly.
 *
 *-------------------------------------------------------------------------
 */
#ifndef GUNIQUE_BTREAD_H
#define GUNIQUE_BTREAD_H

#include "access/nbtree.h"
#include "access/sdir.h"
#include "storage/bufmgr.h"
#include "utils/rel.h"

extern BTScanInsert gunique_bt_search_key(Relation index);
extern void gunique_bt_set_search_key(BTScanInsert key, Relation index,
									  int nkeys, Datum *values, bool *isnull);
extern bool gunique_bt_end_key(Relation heap, Relation index,
							   ScanDirection dir, Datum *value);
extern Buffer gunique_bt_read_page(Relation index, BlockNumber blkno,
								   BufferAccessStrategy strategy);
extern bool gunique_bt_copy_leaf(Relation index, Buffer buf, char *page,
								 BlockNumber *next,
								 BufferAccessStrategy strategy);

#endif							/* GUNIQUE_BTREAD_H */

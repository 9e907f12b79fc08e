/*-------------------------------------------------------------------------
 *
 * handler.c
 *	  The gunique index access method: nbtree storage behind a wrapper.
 *
 * Every gunique index relation is an nbtree index.  The handler starts from
 * nbtree's own IndexAmRoutine, so scans, costing, options (fillfactor,
 * deduplicate_items), VACUUM, WAL and recovery are exactly nbtree's, and it
 * replaces only the callbacks where gunique has something to add: the build
 * and the insert.
 *
 * nbtree checks in a few places that the relation it works on is a btree:
 * its build sorts through PrepareSortSupportFromIndexRel, which before
 * PostgreSQL 18 raises an error for any other relam, and the macros that
 * read its reloptions (BTGetFillFactor, BTGetDeduplicateItems, used by the
 * build, by page splits and by deduplication on insert) assert it.  The
 * storage is nbtree's, the options are parsed by btoptions and the operator
 * families have the same members as btree's, so the delegated calls present
 * the relation as btree: only this backend's relcache entry, only for the
 * duration of the call, restored on every path (src/README, I1 and B1).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include "access/amapi.h"
#include "access/nbtree.h"
#include "catalog/pg_am.h"
#include "nodes/execnodes.h"
#include "utils/fmgrprotos.h"
#include "utils/rel.h"

#include "compat.h"
#include "gunique.h"
#include "am/handler.h"
#include "ddl/ddl.h"
#include "ddl/fkey.h"
#include "ddl/merge.h"
#include "insert/probe.h"
#include "insert/probegroup.h"
#include "locate/summary.h"

PG_FUNCTION_INFO_V1(gunique_handler);

/*
 * Run "call" with index presented as a btree.  The relcache entry is not
 * rebuilt during these calls: they take no heavyweight lock on a relation,
 * so they process no invalidations.
 */
#define GUNIQUE_AS_BTREE(index, call) \
	do { \
		Oid			saved_relam_ = (index)->rd_rel->relam; \
		(index)->rd_rel->relam = BTREE_AM_OID; \
		PG_TRY(); \
		{ \
			call; \
		} \
		PG_FINALLY(); \
		{ \
			(index)->rd_rel->relam = saved_relam_; \
		} \
		PG_END_TRY(); \
	} while (0)

static IndexBuildResult *gunique_build(Relation heap, Relation index,
									   IndexInfo *indexInfo);
static char *gunique_buildphasename(int64 phasenum);
static bool gunique_insert(Relation index, Datum *values, bool *isnull,
						   ItemPointer heap_tid, Relation heap,
						   IndexUniqueCheck checkUnique,
						   bool indexUnchanged, IndexInfo *indexInfo);
static void gunique_insert_cleanup(Relation index, IndexInfo *indexInfo);

Datum
gunique_handler(PG_FUNCTION_ARGS)
{
	IndexAmRoutine *amroutine;

	amroutine = (IndexAmRoutine *)
		DatumGetPointer(DirectFunctionCall1(bthandler, PointerGetDatum(NULL)));

	amroutine->ambuild = gunique_build;
	amroutine->aminsert = gunique_insert;
	GUNIQUE_SET_INSERT_CLEANUP(amroutine, gunique_insert_cleanup);
	amroutine->ambuildphasename = gunique_buildphasename;
	GUNIQUE_DISABLE_PARALLEL_BUILD(amroutine);

	PG_RETURN_POINTER(amroutine);
}

/*
 * nbtree's build phases, and the check that CREATE and ATTACH run across the
 * partitions afterwards (merge.c).
 */
static char *
gunique_buildphasename(int64 phasenum)
{
	if (phasenum == GUNIQUE_PHASE_MERGE_CHECK)
		return "checking uniqueness across partitions";
	return btbuildphasename(phasenum);
}

/*
 * Refuse builds that gunique cannot stand behind.
 */
static void
gunique_check_build(Relation index, IndexInfo *indexInfo)
{
	/*
	 * Look at the catalog, not at indexInfo: TRUNCATE rebuilds indexes with
	 * a dummy IndexInfo that never says unique.  An exclusion constraint's
	 * index is refused even while the hook lets non-unique trees be built:
	 * an ALTER TABLE that rebuilds trees may add one too.
	 */
	if (!index->rd_index->indisunique &&
		(!gunique_ddl_nonunique_build_allowed() ||
		 index->rd_index->indisexclusion))
		ereport(ERROR,
				(errcode(ERRCODE_FEATURE_NOT_SUPPORTED),
				 errmsg("access method \"%s\" supports only unique indexes",
						GUNIQUE_AM_NAME),
				 errdetail("Index \"%s\" was not declared UNIQUE.",
						   RelationGetRelationName(index)),
				 errhint("Use CREATE UNIQUE INDEX, or access method \"btree\" for a non-unique index.")));

	/* A new index (not a rebuild) must have key columns gunique can serve. */
	if (index->rd_createSubid != InvalidSubTransactionId)
		gunique_ddl_check_index(index);

	/* A member of a partitioned gunique index relies on the hooks. */
	if (index->rd_rel->relispartition && !gunique_preloaded)
		gunique_report_not_preloaded(GUNIQUE_NEED_BUILD);
}

/*
 * The index's nbtree options with deduplication off.  nbtree deduplicates
 * equal keys while building a non-unique index, at the price of comparing
 * every entry with the one before it.  A gunique tree is built non-unique
 * only to get past PostgreSQL's partition key check (ddl.c); its keys are
 * meant to be unique, and merge.c reports any that are not whether or not
 * they were merged into one entry, so the comparisons would buy nothing.
 * nbtree builds unique indexes the same way.
 */
static bytea *
build_options(Relation index)
{
	BTOptions  *options = palloc0(sizeof(BTOptions));

	if (index->rd_options != NULL)
		memcpy(options, index->rd_options, sizeof(BTOptions));
	else
	{
		SET_VARSIZE(options, sizeof(BTOptions));
		options->fillfactor = BTREE_DEFAULT_FILLFACTOR;
		options->vacuum_cleanup_index_scale_factor = -1;
	}
	options->deduplicate_items = false;
	return (bytea *) options;
}

static IndexBuildResult *
build_as_btree(Relation heap, Relation index, IndexInfo *indexInfo)
{
	IndexBuildResult *volatile result = NULL;

	GUNIQUE_AS_BTREE(index, result = btbuild(heap, index, indexInfo));
	return result;
}

static IndexBuildResult *
gunique_build(Relation heap, Relation index, IndexInfo *indexInfo)
{
	IndexBuildResult *volatile result = NULL;
	bytea	   *saved_options = index->rd_options;

	gunique_check_build(index, indexInfo);
	gunique_summary_leaf_rebuilt(heap, index);

	/* the options are restored, like relam, before anything else reads them */
	index->rd_options = build_options(index);
	PG_TRY();
	{
		result = build_as_btree(heap, index, indexInfo);
	}
	PG_FINALLY();
	{
		index->rd_options = saved_options;
	}
	PG_END_TRY();
	return result;
}

/*
 * nbtree's insert, with the relation presented as btree (see
 * GUNIQUE_AS_BTREE).
 */
static bool
gunique_btinsert(Relation index, Datum *values, bool *isnull,
				 ItemPointer heap_tid, Relation heap,
				 IndexUniqueCheck checkUnique, bool indexUnchanged,
				 IndexInfo *indexInfo)
{
	volatile bool result = false;

	GUNIQUE_AS_BTREE(index,
					 result = btinsert(index, values, isnull, heap_tid, heap,
									   checkUnique, indexUnchanged, indexInfo));
	return result;
}

static bool
gunique_insert(Relation index, Datum *values, bool *isnull,
			   ItemPointer heap_tid, Relation heap,
			   IndexUniqueCheck checkUnique, bool indexUnchanged,
			   IndexInfo *indexInfo)
{
	GuniqueProbe probe;
	bool		result;

	if (index->rd_rel->relispartition && !gunique_preloaded)
		gunique_report_not_preloaded(GUNIQUE_NEED_INSERT);

	/* Hidden from a foreign key being added, but unique all the same. */
	if (checkUnique == UNIQUE_CHECK_NO &&
		gunique_fkey_hidden(RelationGetRelid(index)))
		checkUnique = UNIQUE_CHECK_YES;

	gunique_probe_before_insert(&probe, index, values, isnull, heap_tid,
								heap, checkUnique, indexUnchanged, indexInfo);
	/*
	 * nbtree checks own leaf without waiting if the probe asks, and not at
	 * all for an UPDATE proven to keep its key (probe.c).
	 */
	result = gunique_btinsert(index, values, isnull, heap_tid, heap,
							  probe.kept ? UNIQUE_CHECK_NO :
							  probe.own_partial ? UNIQUE_CHECK_PARTIAL :
							  checkUnique, indexUnchanged, indexInfo);
	return gunique_probe_after_insert(&probe, result);
}

/* The executor is done inserting through this IndexInfo (17 on). */
static void
gunique_insert_cleanup(Relation index, IndexInfo *indexInfo)
{
	gunique_probegroup_cleanup(indexInfo);
}

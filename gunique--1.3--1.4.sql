/* gunique--1.3--1.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gunique UPDATE TO '1.4'" to load this file. \quit

-- The probe statistics are for whoever may read the server's statistics:
-- the view and the function behind it (which a view calls with the
-- caller's privileges) alike.  Resetting them stays with superusers, and
-- whoever they grant it to.
REVOKE ALL ON FUNCTION gunique_probe_stats() FROM PUBLIC;
GRANT EXECUTE ON FUNCTION gunique_probe_stats() TO pg_read_all_stats;
GRANT SELECT ON gunique_stat_probes TO pg_read_all_stats;
REVOKE ALL ON FUNCTION gunique_probe_stats_reset() FROM PUBLIC;

CREATE FUNCTION gunique_check_leaves(index regclass,
									 heapallindexed boolean DEFAULT false,
									 parent boolean DEFAULT false)
RETURNS integer
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

COMMENT ON FUNCTION gunique_check_leaves(regclass, boolean, boolean) IS
'run amcheck''s bt_index_check (bt_index_parent_check with parent) on every leaf under a gunique index; returns the number of leaves checked';

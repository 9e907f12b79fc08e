/* gunique--1.3--1.4.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gunique UPDATE TO '1.4'" to load this file. \quit

CREATE FUNCTION gunique_check_leaves(index regclass,
									 heapallindexed boolean DEFAULT false,
									 parent boolean DEFAULT false)
RETURNS integer
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

COMMENT ON FUNCTION gunique_check_leaves(regclass, boolean, boolean) IS
'run amcheck''s bt_index_check (bt_index_parent_check with parent) on every leaf under a gunique index; returns the number of leaves checked';

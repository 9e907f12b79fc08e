/* gunique--1.0--1.1.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gunique UPDATE TO '1.1'" to load this file. \quit

CREATE FUNCTION gunique_verify(index regclass, lock boolean DEFAULT false)
RETURNS TABLE (problem text, relation regclass, detail text)
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT;

COMMENT ON FUNCTION gunique_verify(regclass, boolean) IS
'audit a gunique index tree: coverage, flags, and uniqueness of every key across all partitions; no rows means sound';

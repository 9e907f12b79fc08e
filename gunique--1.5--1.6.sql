/* gunique--1.5--1.6.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gunique UPDATE TO '1.6'" to load this file. \quit

-- What the key filters take of shared memory: the limit
-- (gunique.filter_memory), the bytes the filters there are take, how many
-- there are, and how many could not be made, for want of room or because
-- the system could not give more shared memory, since the server started.
CREATE FUNCTION gunique_filter_memory(
	OUT limit_bytes bigint,
	OUT used_bytes bigint,
	OUT filters bigint,
	OUT filters_refused bigint)
RETURNS record
AS 'MODULE_PATHNAME', 'gunique_filter_memory_info'
LANGUAGE C STRICT VOLATILE;

-- The groups of partitions whose key filters are asked for, queued or being
-- built by the background worker of their database, in every database.
CREATE FUNCTION gunique_filter_builds(
	OUT database oid,
	OUT group_index oid,
	OUT state text,
	OUT queued_at timestamptz,
	OUT pid integer,
	OUT partitions integer,
	OUT partitions_done integer)
RETURNS SETOF record
AS 'MODULE_PATHNAME', 'gunique_filter_builds'
LANGUAGE C STRICT VOLATILE;

-- Build the key filters of a gunique index's tree now, in this session:
-- those missing or outgrown, or all of them with force.  Returns how many
-- were built.  The table's owner may.
CREATE FUNCTION gunique_build_filters(index regclass, force boolean DEFAULT false)
RETURNS integer
AS 'MODULE_PATHNAME', 'gunique_build_filters'
LANGUAGE C STRICT VOLATILE;

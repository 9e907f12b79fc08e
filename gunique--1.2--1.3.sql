/* gunique--1.2--1.3.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gunique UPDATE TO '1.3'" to load this file. \quit

-- The probe statistics gain partitions_filtered: partitions ruled out by
-- their key filter.
DROP VIEW gunique_stat_probes;
DROP FUNCTION gunique_probe_stats();

CREATE FUNCTION gunique_probe_stats(
	OUT index regclass,
	OUT inserts bigint,
	OUT inserts_unprobed bigint,
	OUT probes bigint,
	OUT partitions_probed bigint,
	OUT partitions_skipped bigint,
	OUT partitions_filtered bigint,
	OUT waits bigint,
	OUT conflicts bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE;

COMMENT ON FUNCTION gunique_probe_stats() IS
'per leaf index of a gunique tree: keys inserted, keys no other partition could hold, probes of the other partitions, partitions searched, skipped by their key range and ruled out by their key filter, waits for transactions holding the key, conflicts found';

CREATE VIEW gunique_stat_probes AS
	SELECT s.*, i.indrelid::regclass AS partition
	FROM gunique_probe_stats() s
	JOIN pg_index i ON i.indexrelid = s.index;

COMMENT ON VIEW gunique_stat_probes IS
'what gunique''s insert-time probes did, per leaf index, since the server started or gunique_probe_stats_reset()';

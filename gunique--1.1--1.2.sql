/* gunique--1.1--1.2.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gunique UPDATE TO '1.2'" to load this file. \quit

CREATE FUNCTION gunique_probe_stats(
	OUT index regclass,
	OUT inserts bigint,
	OUT inserts_unprobed bigint,
	OUT probes bigint,
	OUT partitions_probed bigint,
	OUT partitions_skipped bigint,
	OUT waits bigint,
	OUT conflicts bigint)
RETURNS SETOF record
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE;

COMMENT ON FUNCTION gunique_probe_stats() IS
'per leaf index of a gunique tree: keys inserted, keys no other partition could hold, probes of the other partitions, partitions searched and skipped by their key range, waits for transactions holding the key, conflicts found';

CREATE FUNCTION gunique_probe_stats_reset()
RETURNS void
AS 'MODULE_PATHNAME'
LANGUAGE C STRICT VOLATILE;

REVOKE ALL ON FUNCTION gunique_probe_stats_reset() FROM PUBLIC;

CREATE VIEW gunique_stat_probes AS
	SELECT s.*, i.indrelid::regclass AS partition
	FROM gunique_probe_stats() s
	JOIN pg_index i ON i.indexrelid = s.index;

COMMENT ON VIEW gunique_stat_probes IS
'what gunique''s insert-time probes did, per leaf index, since the server started or gunique_probe_stats_reset()';

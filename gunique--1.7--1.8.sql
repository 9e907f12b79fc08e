/* gunique--1.7--1.8.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gunique UPDATE TO '1.8'" to load this file. \quit

-- A comment on every function and on the event trigger, for \df+ and \dy+;
-- the access method, gunique_verify, gunique_check_leaves and
-- gunique_stat_probes keep theirs, and gunique_probe_stats' is shortened.
-- Operator classes and families have none, as btree's have none and psql
-- shows none for them.
COMMENT ON FUNCTION gunique_handler(internal) IS
'gunique index access method handler';

COMMENT ON FUNCTION gunique_ddl_guard() IS
'event trigger function: refuses DDL that needs gunique in shared_preload_libraries when it is not there';

COMMENT ON EVENT TRIGGER gunique_ddl_guard IS
'refuses DDL that needs gunique in shared_preload_libraries when it is not there';

COMMENT ON FUNCTION gunique_probe_stats() IS
'statistics of the insert-time probes per leaf index of every gunique tree in this database; gunique_stat_probes reads them';

COMMENT ON FUNCTION gunique_probe_stats_reset() IS
'reset the probe statistics of gunique_stat_probes to zero for this database';

COMMENT ON FUNCTION gunique_filter_memory() IS
'shared memory of the key filters: the limit, the bytes used, the filters there are and those refused since the server started';

COMMENT ON FUNCTION gunique_filter_builds() IS
'key filter builds queued for or running in the background worker, in every database, with their progress';

COMMENT ON FUNCTION gunique_build_filters(regclass, boolean) IS
'build the missing or outgrown key filters of a gunique index''s tree now (all of them with force); returns how many were built';

--
-- pg_stat_progress_create_index during the check across partitions, seen
-- from inside it: the comparison function of an operator class made for this
-- test reads the backend's own report each time the merge compares keys.
-- gunique takes comparison functions written in C only, so it is the test
-- module's gunique_test_cmp (t/pause), which calls gunique_test_cmp_hook().
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gp;
SET search_path = gp, public;

\getenv abs_builddir PG_ABS_BUILDDIR
\getenv dlsuffix PG_DLSUFFIX
\set test_module :abs_builddir '/../t/pause/gunique_test_pause' :dlsuffix
CREATE FUNCTION progress_cmp(int, int) RETURNS int
	AS :'test_module', 'gunique_test_cmp' LANGUAGE C IMMUTABLE STRICT;
CREATE FUNCTION gunique_test_cmp_hook() RETURNS void LANGUAGE plpgsql AS $$
DECLARE
	r record;
BEGIN
	PERFORM pg_stat_clear_snapshot();
	SELECT relid::regclass AS tab, index_relid::regclass AS idx, command,
		   phase, blocks_total, blocks_done
	  INTO r
	  FROM pg_stat_progress_create_index WHERE pid = pg_backend_pid();
	IF r.phase LIKE '%across partitions' THEN
		RAISE NOTICE '% on %: %, % (% of % blocks)',
			r.command, r.idx, r.tab, r.phase, r.blocks_done, r.blocks_total;
	END IF;
END
$$;
CREATE OPERATOR CLASS progress_ops FOR TYPE int USING gunique AS
	OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >,
	FUNCTION 1 progress_cmp(int, int);

CREATE TABLE t (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE t1 PARTITION OF t FOR VALUES FROM (0) TO (10);
CREATE TABLE t2 PARTITION OF t FOR VALUES FROM (10) TO (20);
INSERT INTO t VALUES (1, 1), (11, 2);

-- CREATE INDEX: the check shows as a build phase of the top index, and
-- counts the leaves' pages as it reads them
CREATE UNIQUE INDEX t_b ON t USING gunique (b progress_ops);

-- ATTACH: no command is in progress there, so the check starts one
CREATE TABLE t3 (a int, b int);
INSERT INTO t3 VALUES (21, 3);
ALTER TABLE t ATTACH PARTITION t3 FOR VALUES FROM (20) TO (30);

-- and ends it
SELECT count(*) FROM pg_stat_progress_create_index
 WHERE pid = pg_backend_pid();

RESET search_path;
DROP SCHEMA gp CASCADE;

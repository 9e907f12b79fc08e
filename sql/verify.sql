--
-- gunique_verify(): audit a gunique index tree, and extension upgrades
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS gunique CASCADE;
-- version 1.0 has no gunique_verify; the update script adds it
CREATE EXTENSION gunique VERSION '1.0';
RESET client_min_messages;
SELECT extversion FROM pg_extension WHERE extname = 'gunique';
SELECT count(*) FROM pg_proc WHERE proname = 'gunique_verify';
ALTER EXTENSION gunique UPDATE TO '1.2';
-- the library serves 1.2's probe statistics, which lack partitions_filtered
CREATE TABLE vs (a int, b int) PARTITION BY LIST (a);
CREATE TABLE vs1 PARTITION OF vs FOR VALUES IN (1);
CREATE TABLE vs2 PARTITION OF vs FOR VALUES IN (2);
CREATE UNIQUE INDEX vs_b ON vs USING gunique (b);
SELECT gunique_probe_stats_reset();
INSERT INTO vs SELECT 1 + g % 2, g FROM generate_series(1, 10) g;
INSERT INTO vs VALUES (2, 2);
SELECT partition, inserts, inserts_unprobed, probes, partitions_probed,
       partitions_skipped, waits, conflicts
  FROM gunique_stat_probes
 WHERE partition IN ('vs1'::regclass, 'vs2') ORDER BY 1;
ALTER EXTENSION gunique UPDATE;
SELECT extversion FROM pg_extension WHERE extname = 'gunique';
SELECT partition, inserts, probes, partitions_probed + partitions_skipped +
       partitions_filtered AS partitions, waits, conflicts
  FROM gunique_stat_probes
 WHERE partition IN ('vs1'::regclass, 'vs2') ORDER BY 1;
DROP TABLE vs;
-- the members of the extension (types are left out: psql 15 hides a view's
-- row type, later versions list it)
SELECT pg_describe_object(classid, objid, 0) AS object
  FROM pg_depend
 WHERE refclassid = 'pg_extension'::regclass AND deptype = 'e'
   AND refobjid = (SELECT oid FROM pg_extension WHERE extname = 'gunique')
   AND classid <> 'pg_type'::regclass
 ORDER BY pg_describe_object(classid, objid, 0) COLLATE "C";

CREATE SCHEMA gv;
SET search_path = gv, public;

CREATE TABLE t (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE t1 PARTITION OF t FOR VALUES FROM (0) TO (10);
CREATE TABLE t2 PARTITION OF t FOR VALUES FROM (10) TO (20)
	PARTITION BY RANGE (a);
CREATE TABLE t2a PARTITION OF t2 FOR VALUES FROM (10) TO (15);
CREATE TABLE t2b PARTITION OF t2 FOR VALUES FROM (15) TO (20);
INSERT INTO t SELECT g, g FROM generate_series(0, 19) g;
CREATE UNIQUE INDEX t_b ON t USING gunique (b);

-- a sound tree: no rows, from the top or from any member, locked or not
SELECT * FROM gunique_verify('t_b');
SELECT * FROM gunique_verify('t2a_b_idx', lock => true);

-- break it on purpose (superuser catalog surgery): a leaf that no longer
-- checks its inserts lets duplicates in, and the audit finds them all
UPDATE pg_index SET indisunique = false WHERE indexrelid = 't2b_b_idx'::regclass;
INSERT INTO t VALUES (16, 1), (17, 16), (18, 16);
SELECT * FROM gunique_verify('t_b') ORDER BY 1, 2, 3;
DELETE FROM t WHERE a IN (16, 17, 18) AND b IN (1, 16) AND ctid NOT IN
	(SELECT min(ctid) FROM t2b WHERE b = 16);
DELETE FROM t2b WHERE b = 1 OR (b = 16 AND a <> 16);
UPDATE pg_index SET indisunique = true WHERE indexrelid = 't2b_b_idx'::regclass;
SELECT * FROM gunique_verify('t_b');

-- an incomplete tree (ON ONLY, not every partition attached)
CREATE UNIQUE INDEX t_a ON ONLY t USING gunique (a);
CREATE UNIQUE INDEX t1_a ON t1 USING gunique (a);
ALTER INDEX t_a ATTACH PARTITION t1_a;
SELECT * FROM gunique_verify('t_a') ORDER BY 1, 2;

-- bad arguments
CREATE UNIQUE INDEX t1_btree ON t1 (b);
SELECT * FROM gunique_verify('t1_btree');
SELECT * FROM gunique_verify('t1');
CREATE ROLE gunique_verify_nobody;
GRANT USAGE ON SCHEMA gv TO gunique_verify_nobody;
SET ROLE gunique_verify_nobody;
SELECT * FROM gunique_verify('gv.t_b');
RESET ROLE;
REVOKE USAGE ON SCHEMA gv FROM gunique_verify_nobody;
DROP ROLE gunique_verify_nobody;

-- DROP EXTENSION needs CASCADE while gunique indexes exist; CASCADE drops
-- the indexes (and only them), and the extension can come back
DROP EXTENSION gunique;
SET client_min_messages = warning;
DROP EXTENSION gunique CASCADE;
RESET client_min_messages;
SELECT count(*) AS gunique_indexes FROM pg_class c JOIN pg_am a ON a.oid = c.relam
WHERE a.amname = 'gunique';
SELECT count(*) AS rows_kept FROM t;
SELECT count(*) AS event_triggers FROM pg_event_trigger WHERE evtname = 'gunique_ddl_guard';
CREATE EXTENSION gunique SCHEMA public;
CREATE UNIQUE INDEX t_b ON t USING gunique (b);
INSERT INTO t VALUES (1, 19);
SELECT * FROM gunique_verify('t_b');
DROP SCHEMA gv CASCADE;

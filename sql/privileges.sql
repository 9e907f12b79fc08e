--
-- Privileges: who may audit a tree (and lock it), what a duplicate key
-- error tells a user about the other partition's row, who may read and
-- reset the probe statistics
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gpriv;
SET search_path = gpriv, public;
CREATE ROLE regress_gunique_reader;
CREATE ROLE regress_gunique_writer;
CREATE ROLE regress_gunique_maintainer;
GRANT USAGE ON SCHEMA gpriv TO regress_gunique_reader, regress_gunique_writer,
	regress_gunique_maintainer;

CREATE TABLE t (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE t1 PARTITION OF t FOR VALUES FROM (0) TO (10);
CREATE TABLE t2 PARTITION OF t FOR VALUES FROM (10) TO (20);
CREATE UNIQUE INDEX t_b ON t USING gunique (b);
INSERT INTO t VALUES (1, 1), (11, 11);

-- gunique_verify reads through the top table, as SELECT does; locking
-- needs what LOCK TABLE ... IN SHARE MODE needs on the top table
GRANT SELECT ON t TO regress_gunique_reader;
GRANT SELECT, UPDATE ON t TO regress_gunique_maintainer;
GRANT INSERT ON t TO regress_gunique_writer;
SET ROLE regress_gunique_reader;
SELECT * FROM gunique_verify('t_b');
SELECT * FROM gunique_verify('t_b', lock => true);
SELECT * FROM gunique_verify('t1_b_idx', lock => true);
BEGIN;
LOCK TABLE t IN SHARE MODE;		-- PostgreSQL's own refusal
ROLLBACK;
SET ROLE regress_gunique_writer;
SELECT * FROM gunique_verify('t_b');
SET ROLE regress_gunique_maintainer;
SELECT * FROM gunique_verify('t_b', lock => true);
RESET ROLE;

-- nor where row-level security hides rows of the table from the user
ALTER TABLE t ENABLE ROW LEVEL SECURITY;
CREATE POLICY t_low ON t USING (a < 10);
SET ROLE regress_gunique_reader;
SELECT * FROM gunique_verify('t_b');
SELECT count(*) FROM t;
RESET ROLE;
SELECT * FROM gunique_verify('t_b');
DROP POLICY t_low ON t;
ALTER TABLE t DISABLE ROW LEVEL SECURITY;

-- A duplicate in another partition shows its key and partition only if
-- the user may read the key columns of that partition and row-level
-- security is not enabled for it, as PostgreSQL shows a key.  First,
-- PostgreSQL's own report of a duplicate within one partition, to a user
-- who may not read it (even with SELECT on the partitioned table), then
-- to one who may read its key columns:
CREATE TABLE s (a int, b int) PARTITION BY LIST (a);
CREATE TABLE s1 PARTITION OF s FOR VALUES IN (1);
CREATE UNIQUE INDEX s_a_b ON s (a, b);
INSERT INTO s VALUES (1, 1);
GRANT INSERT, SELECT ON s TO regress_gunique_writer;
SET ROLE regress_gunique_writer;
INSERT INTO s VALUES (1, 1);
RESET ROLE;
GRANT SELECT (a, b) ON s1 TO regress_gunique_writer;
SET ROLE regress_gunique_writer;
INSERT INTO s VALUES (1, 1);
RESET ROLE;
-- gunique: INSERT only, then SELECT on the partitioned table, then SELECT
-- on the inserting partition: the other partition's row stays hidden
SET ROLE regress_gunique_writer;
INSERT INTO t VALUES (12, 1);
RESET ROLE;
GRANT SELECT ON t, t2 TO regress_gunique_writer;
SET ROLE regress_gunique_writer;
INSERT INTO t VALUES (12, 1);
INSERT INTO t2 VALUES (12, 1);
-- a duplicate in the inserting partition reads as nbtree's
INSERT INTO t VALUES (12, 11);
RESET ROLE;
-- SELECT on the key column of the partition that holds the row shows it
GRANT SELECT (b) ON t1 TO regress_gunique_writer;
SET ROLE regress_gunique_writer;
INSERT INTO t VALUES (12, 1);
RESET ROLE;
-- unless row-level security is enabled for that partition (whatever its
-- policies let the user see)
ALTER TABLE t1 ENABLE ROW LEVEL SECURITY;
CREATE POLICY t1_all ON t1 USING (true);
SET ROLE regress_gunique_writer;
INSERT INTO t VALUES (12, 1);
RESET ROLE;
-- the table's owner bypasses row-level security, and sees it all
INSERT INTO t VALUES (12, 1);

-- The check of CREATE INDEX and ATTACH hides the key on the same terms:
-- here from the table's owner, whom FORCE ROW LEVEL SECURITY subjects to
-- row-level security; with more than one key duplicated, then one
CREATE TABLE m (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE m1 PARTITION OF m FOR VALUES FROM (0) TO (10);
CREATE TABLE m2 PARTITION OF m FOR VALUES FROM (10) TO (20);
INSERT INTO m VALUES (1, 1), (11, 1), (2, 2), (12, 2);
ALTER TABLE m OWNER TO regress_gunique_writer;
ALTER TABLE m1 OWNER TO regress_gunique_writer;
ALTER TABLE m2 OWNER TO regress_gunique_writer;
ALTER TABLE m1 ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
ALTER TABLE m2 ENABLE ROW LEVEL SECURITY, FORCE ROW LEVEL SECURITY;
GRANT CREATE ON SCHEMA gpriv TO regress_gunique_writer;
SET ROLE regress_gunique_writer;
CREATE UNIQUE INDEX m_b ON m USING gunique (b);
RESET ROLE;
DELETE FROM m WHERE a >= 10;
INSERT INTO m VALUES (3, 1);
SET ROLE regress_gunique_writer;
CREATE UNIQUE INDEX m_b ON m USING gunique (b);
RESET ROLE;
REVOKE CREATE ON SCHEMA gpriv FROM regress_gunique_writer;

-- The probe statistics: for roles that may read the server's statistics
-- (pg_read_all_stats, and pg_monitor, a member of it); their reset for
-- superusers and whoever they grant it to
SET ROLE regress_gunique_reader;
SELECT count(*) >= 0 AS readable FROM gunique_stat_probes;
SELECT count(*) >= 0 AS readable FROM gunique_probe_stats();
SELECT gunique_probe_stats_reset();
RESET ROLE;
GRANT pg_monitor TO regress_gunique_reader;
SET ROLE regress_gunique_reader;
SELECT count(*) >= 0 AS readable FROM gunique_stat_probes;
SELECT count(*) >= 0 AS readable FROM gunique_probe_stats();
SELECT gunique_probe_stats_reset();
RESET ROLE;

SET client_min_messages = warning;
DROP SCHEMA gpriv CASCADE;
RESET client_min_messages;
DROP ROLE regress_gunique_reader;
DROP ROLE regress_gunique_writer;
DROP ROLE regress_gunique_maintainer;

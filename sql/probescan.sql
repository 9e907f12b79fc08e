--
-- The probe keeps its scans of sibling partitions open for a statement.
-- Whatever ends a statement or a (sub)transaction must release them: the
-- next statement may drop or detach a partition the probe had open, and a
-- probe interrupted by an error must leave nothing pinned or half-made.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gps;
SET search_path = gps, public;

CREATE TABLE t (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE t1 PARTITION OF t FOR VALUES FROM (0) TO (100);
CREATE TABLE t2 PARTITION OF t FOR VALUES FROM (100) TO (200);
CREATE TABLE t3 PARTITION OF t FOR VALUES FROM (200) TO (300);
CREATE UNIQUE INDEX t_b_key ON t USING gunique (b);
INSERT INTO t SELECT g, g FROM generate_series(0, 299, 3) g;

-- INSERT, then DROP and DETACH in the same transaction.
BEGIN;
INSERT INTO t VALUES (1, 1001), (101, 1002), (201, 1003);
DROP TABLE t3;
ALTER TABLE t DETACH PARTITION t2;
INSERT INTO t VALUES (2, 102);	-- t2 is no longer a partition
ROLLBACK;

-- COPY, then DETACH and DROP in the same transaction.
BEGIN;
COPY t FROM stdin;
2	2002
102	2003
\.
ALTER TABLE t DETACH PARTITION t3;
DROP TABLE t3;
COPY t FROM stdin;
3	201
\.
SELECT tableoid::regclass, * FROM t WHERE b = 201;
ROLLBACK;

-- A conflict found by a probe, rolled back to a savepoint; the probe goes on.
BEGIN;
SAVEPOINT s;
INSERT INTO t VALUES (1, 1), (2, 102);
ROLLBACK TO SAVEPOINT s;
INSERT INTO t VALUES (4, 3003), (104, 3004);
INSERT INTO t VALUES (5, 3004);
ROLLBACK;

-- Conflicts caught by PL/pgSQL, inside the statement that runs the probes.
CREATE FUNCTION try_insert(a int, b int) RETURNS text LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO gps.t VALUES (a, b);
	RETURN 'inserted';
EXCEPTION WHEN unique_violation THEN
	RETURN 'duplicate';
END $$;
SELECT g, try_insert(g, CASE WHEN g % 2 = 0 THEN g * 3 ELSE 5000 + g END)
FROM generate_series(1, 8) g;
SELECT count(*), count(DISTINCT b) FROM t;

-- Probes inside a trigger of another table's INSERT, whose own statement
-- ends in the middle of the outer one.
CREATE TABLE log (b int);
CREATE FUNCTION log_to_t() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO gps.t VALUES (NEW.b % 100, NEW.b);
	RETURN NEW;
END $$;
CREATE TRIGGER log_to_t AFTER INSERT ON log FOR EACH ROW EXECUTE FUNCTION log_to_t();
INSERT INTO log SELECT 6000 + g FROM generate_series(1, 50) g;
INSERT INTO log VALUES (7001), (102);
SELECT count(*), count(DISTINCT b) FROM t;

-- A key with many dead entries spread over several leaf pages, with and
-- without deduplication: the probe walks right past them to the live row,
-- whose heap TID is the highest and so sorts last.
CREATE TABLE dv (a int, b int, d int) PARTITION BY RANGE (a);
CREATE TABLE dv1 PARTITION OF dv FOR VALUES FROM (0) TO (10);
CREATE TABLE dv2 PARTITION OF dv FOR VALUES FROM (10) TO (20);
ALTER TABLE dv1 SET (autovacuum_enabled = off);
CREATE UNIQUE INDEX dv_b ON dv USING gunique (b) WITH (deduplicate_items = off);
CREATE UNIQUE INDEX dv_d ON dv USING gunique (d);
DO $$
BEGIN
	FOR i IN 1..1500 LOOP
		INSERT INTO gps.dv VALUES (1, 1, 1);
		DELETE FROM gps.dv WHERE a = 1;
	END LOOP;
	INSERT INTO gps.dv VALUES (2, 1, 1);
END $$;
SELECT pg_relation_size('dv1_b_idx') / current_setting('block_size')::int > 4 AS several_pages;
INSERT INTO dv VALUES (11, 1, 11);
INSERT INTO dv VALUES (12, 12, 1);
INSERT INTO dv VALUES (13, 13, 13);
SELECT tableoid::regclass, * FROM dv ORDER BY a;
-- The merge of ATTACH and of gunique_verify reads the same dead entries
-- and posting lists page by page.
CREATE TABLE dv3 (a int, b int, d int);
INSERT INTO dv3 VALUES (21, 21, 1);
ALTER TABLE dv ATTACH PARTITION dv3 FOR VALUES FROM (20) TO (30);
UPDATE dv3 SET d = 21;
ALTER TABLE dv ATTACH PARTITION dv3 FOR VALUES FROM (20) TO (30);
SELECT * FROM gunique_verify('dv_b');
SELECT * FROM gunique_verify('dv_d');

DROP SCHEMA gps CASCADE;

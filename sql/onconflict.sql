--
-- INSERT ... ON CONFLICT on tables with gunique indexes.
--
-- PostgreSQL 15 and 17 can only arbitrate ON CONFLICT with btree indexes;
-- gunique refuses the statement with a clear error there (expected output
-- onconflict.out).  PostgreSQL 18 asks the access method, and ON CONFLICT
-- works within a partition; a conflict with another partition is a unique
-- violation with a hint (onconflict_1.out).
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA goc;
SET search_path = goc, public;

CREATE TABLE plain (a int, b text);
CREATE UNIQUE INDEX plain_a ON plain USING gunique (a);
INSERT INTO plain VALUES (1, 'one');
INSERT INTO plain VALUES (1, 'uno') ON CONFLICT DO NOTHING;
INSERT INTO plain VALUES (1, 'uno') ON CONFLICT (a) DO UPDATE SET b = excluded.b;
SELECT * FROM plain;

CREATE TABLE t (a int, b int, c text) PARTITION BY RANGE (a);
CREATE TABLE t1 PARTITION OF t FOR VALUES FROM (0) TO (10);
CREATE TABLE t2 PARTITION OF t FOR VALUES FROM (10) TO (20);
CREATE UNIQUE INDEX t_b ON t USING gunique (b);
INSERT INTO t VALUES (1, 1, 'first');
-- a conflict within the target partition
INSERT INTO t VALUES (2, 1, 'same partition') ON CONFLICT (b) DO UPDATE SET c = excluded.c;
INSERT INTO t VALUES (3, 1, 'ignored') ON CONFLICT DO NOTHING;
-- a conflict with another partition cannot be arbitrated
INSERT INTO t VALUES (11, 1, 'other partition') ON CONFLICT DO NOTHING;
INSERT INTO t VALUES (11, 1, 'other partition') ON CONFLICT (b) DO UPDATE SET c = excluded.c;
-- no conflict at all
INSERT INTO t VALUES (12, 2, 'new') ON CONFLICT DO NOTHING;
-- also when aimed at a partition directly
INSERT INTO t2 VALUES (13, 2, 'direct') ON CONFLICT (b) DO UPDATE SET c = excluded.c;
SELECT tableoid::regclass, * FROM t ORDER BY b;

DROP SCHEMA goc CASCADE;

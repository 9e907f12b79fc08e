--
-- The partition lifecycle under a gunique index: the guarantee survives
-- every DDL a DBA runs, or the DDL refuses.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gl;
SET search_path = gl, public;

CREATE TABLE t (a int, b int, c text) PARTITION BY RANGE (a);
CREATE TABLE t1 PARTITION OF t FOR VALUES FROM (0) TO (10);
CREATE TABLE t2 PARTITION OF t FOR VALUES FROM (10) TO (20);
CREATE TABLE t3 PARTITION OF t FOR VALUES FROM (20) TO (30);
CREATE TABLE t4 PARTITION OF t FOR VALUES FROM (30) TO (40);
CREATE UNIQUE INDEX t_b ON t USING gunique (b);
INSERT INTO t SELECT g, g, 'x' FROM generate_series(0, 39) g;

-- DETACH: the detached table keeps its index, which now enforces
-- uniqueness within that table only; the others keep the global guarantee.
ALTER TABLE t DETACH PARTITION t2;
\d t2
SELECT * FROM gunique_verify('t_b');
INSERT INTO t2 VALUES (15, 1, 'now allowed: t2 is on its own');
INSERT INTO t2 VALUES (16, 1, 'but not twice within t2');
INSERT INTO t VALUES (5, 15, 'the key t2 held is free now');
-- attaching it back re-checks
ALTER TABLE t ATTACH PARTITION t2 FOR VALUES FROM (10) TO (20);
DELETE FROM t2 WHERE c LIKE 'now allowed%';
DELETE FROM t WHERE c LIKE 'the key%';
ALTER TABLE t ATTACH PARTITION t2 FOR VALUES FROM (10) TO (20);
\d t2
SELECT * FROM gunique_verify('t_b');

-- DETACH CONCURRENTLY
ALTER TABLE t DETACH PARTITION t3 CONCURRENTLY;
\d t3
INSERT INTO t3 VALUES (25, 1, 'allowed after detach');
INSERT INTO t VALUES (5, 25, 'allowed after detach');
SELECT * FROM gunique_verify('t_b');
DROP TABLE t3;
DELETE FROM t WHERE a = 5 AND b = 25;

-- DROP and TRUNCATE of a partition
DROP TABLE t4;
INSERT INTO t VALUES (1, 35, 'key of the dropped partition');
TRUNCATE t2;
INSERT INTO t VALUES (2, 12, 'key of the truncated partition');
INSERT INTO t VALUES (12, 12, 'but only once');
SELECT * FROM gunique_verify('t_b');

-- REINDEX of the tree, of a leaf, and CONCURRENTLY of a leaf
REINDEX INDEX t_b;
REINDEX INDEX t1_b_idx;
REINDEX INDEX CONCURRENTLY t2_b_idx;
REINDEX TABLE t;
\d t1
INSERT INTO t VALUES (13, 1, 'still checked');
INSERT INTO t VALUES (3, 13, 'still checked');
SELECT * FROM gunique_verify('t_b');

-- VACUUM, VACUUM FULL and CLUSTER of a partition
DELETE FROM t WHERE b BETWEEN 6 AND 8;
VACUUM t1;
VACUUM FULL t1;
CLUSTER t1 USING t1_b_idx;
INSERT INTO t VALUES (14, 7, 'freed by the delete');
INSERT INTO t VALUES (4, 9, 'still taken');
SELECT * FROM gunique_verify('t_b');

-- DROP INDEX of the parent drops the whole tree
DROP INDEX t_b;
SELECT count(*) FROM pg_indexes WHERE schemaname = 'gl';
INSERT INTO t VALUES (15, 1, 'no index, no guarantee');
-- and it cannot be re-created over the duplicate
CREATE UNIQUE INDEX t_b ON t USING gunique (b);
-- a leaf index cannot be dropped on its own
DELETE FROM t WHERE a = 15 AND b = 1;
CREATE UNIQUE INDEX t_b ON t USING gunique (b);
DROP INDEX t1_b_idx;

-- ATTACH to a tree that was unique merges the other partitions only over
-- the key range of the attached rows; duplicates are found at the range's
-- ends, with descending keys and on multi-column keys.
CREATE TABLE ar (a int, b int, c text) PARTITION BY RANGE (a);
CREATE TABLE ar1 PARTITION OF ar FOR VALUES FROM (0) TO (100);
CREATE TABLE ar2 PARTITION OF ar FOR VALUES FROM (100) TO (200);
INSERT INTO ar SELECT g, g, 'x' || g FROM generate_series(0, 199) g;
CREATE UNIQUE INDEX ar_b ON ar USING gunique (b DESC);
CREATE UNIQUE INDEX ar_cb ON ar USING gunique (c, b);
CREATE TABLE ar3 (a int, b int, c text);
INSERT INTO ar3 SELECT g, g, 'y' || g FROM generate_series(200, 299) g;
INSERT INTO ar3 VALUES (250, 0, 'z');			-- the smallest old key
ALTER TABLE ar ATTACH PARTITION ar3 FOR VALUES FROM (200) TO (300);
UPDATE ar3 SET b = 199 WHERE b = 0;				-- the largest
ALTER TABLE ar ATTACH PARTITION ar3 FOR VALUES FROM (200) TO (300);
UPDATE ar3 SET b = 300, c = 'x5' WHERE b = 199;	-- (c, b) differs in b
ALTER TABLE ar ATTACH PARTITION ar3 FOR VALUES FROM (200) TO (300);
SELECT count(*) FROM ar;
ALTER TABLE ar DETACH PARTITION ar3;
DROP INDEX ar_b;
UPDATE ar3 SET b = 5 WHERE b = 300;				-- (c, b) = ('x5', 5) twice
ALTER TABLE ar ATTACH PARTITION ar3 FOR VALUES FROM (200) TO (300);
UPDATE ar3 SET c = NULL WHERE b = 5;			-- NULLs are distinct
ALTER TABLE ar ATTACH PARTITION ar3 FOR VALUES FROM (200) TO (300);
-- an attached table without rows, or with only NULL keys
CREATE TABLE ar4 (a int, b int, c text);
ALTER TABLE ar ATTACH PARTITION ar4 FOR VALUES FROM (300) TO (400);
CREATE TABLE ar5 (a int, b int, c text);
INSERT INTO ar5 VALUES (400, NULL, NULL), (401, NULL, NULL);
ALTER TABLE ar ATTACH PARTITION ar5 FOR VALUES FROM (400) TO (500);
SELECT * FROM gunique_verify('ar_cb');
-- with NULLS NOT DISTINCT every key is merged: the NULLs collide
UPDATE ar SET b = 301 WHERE a = 250 AND c IS NULL;
CREATE UNIQUE INDEX ar_nn ON ar USING gunique (b) NULLS NOT DISTINCT;
DELETE FROM ar5 WHERE a = 401;
CREATE UNIQUE INDEX ar_nn ON ar USING gunique (b) NULLS NOT DISTINCT;
CREATE TABLE ar6 (a int, b int, c text);
INSERT INTO ar6 VALUES (500, NULL, 'n');
ALTER TABLE ar ATTACH PARTITION ar6 FOR VALUES FROM (500) TO (600);

DROP SCHEMA gl CASCADE;

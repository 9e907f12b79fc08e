--
-- gunique on partitioned tables: uniqueness across all partitions
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gp;
SET search_path = gp, public;

-- Range partitioning, key not in the index.
CREATE TABLE t (a int, b int, c text) PARTITION BY RANGE (a);
CREATE TABLE t1 PARTITION OF t FOR VALUES FROM (0) TO (10);
CREATE TABLE t2 PARTITION OF t FOR VALUES FROM (10) TO (20);
INSERT INTO t VALUES (1, 1, 'a'), (11, 2, 'b');

-- PostgreSQL's btree refuses this; gunique does not.
CREATE UNIQUE INDEX t_b_btree ON t (b);
CREATE UNIQUE INDEX t_b_key ON t USING gunique (b);
\d t
\d t1
SELECT c.relname, i.indisunique, i.indisvalid
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname IN ('t_b_key', 't1_b_idx', 't2_b_idx') ORDER BY 1;
SELECT pg_get_indexdef('t_b_key'::regclass);

-- Single row, multi-row, INSERT ... SELECT
INSERT INTO t VALUES (15, 1, 'dup of t1');
INSERT INTO t VALUES (5, 2, 'dup of t2');
INSERT INTO t VALUES (5, 5, 'x'), (15, 5, 'y');
INSERT INTO t SELECT 12, 1, 'select';
INSERT INTO t SELECT g, g + 100, 'gen' FROM generate_series(0, 19) g;
INSERT INTO t SELECT 19 - g, g + 100, 'gen' FROM generate_series(0, 19) g;
SELECT count(*) FROM t;

-- COPY
COPY t FROM stdin;
3	300	copy
13	301	copy
\.
COPY t FROM stdin;
13	300	copy dup
\.
SELECT tableoid::regclass, * FROM t WHERE b >= 300 ORDER BY b;

-- UPDATE: key change within a partition, and a row moving partitions
UPDATE t SET b = 2 WHERE b = 1;
UPDATE t SET b = 3 WHERE b = 1;
UPDATE t SET a = 14 WHERE b = 3;
SELECT tableoid::regclass, * FROM t WHERE b <= 3 ORDER BY b;
UPDATE t SET a = a - 10, b = 302 WHERE b = 301;
UPDATE t SET a = a + 10, b = 300 WHERE b = 302;
SELECT tableoid::regclass, * FROM t WHERE b >= 300 ORDER BY b;

-- Deleted keys can be reused; rows of this transaction count.
DELETE FROM t WHERE b = 3;
INSERT INTO t VALUES (4, 3, 'reused');
BEGIN;
INSERT INTO t VALUES (6, 400, 'mine');
INSERT INTO t VALUES (16, 400, 'mine too');
ROLLBACK;
BEGIN;
DELETE FROM t WHERE b = 3;
INSERT INTO t VALUES (16, 3, 'moved within xact');
COMMIT;
SELECT tableoid::regclass, * FROM t WHERE b IN (3, 400) ORDER BY b;

-- Lookups by the key read only the partitions that can hold it (sql/lookup.sql).
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM t WHERE b = 5;
SELECT * FROM t WHERE b = 5;
EXPLAIN (COSTS OFF) SELECT b FROM t WHERE b BETWEEN 100 AND 102 ORDER BY b;
RESET enable_seqscan;

-- New partitions get the index; they are probed and probe the others.
CREATE TABLE t3 PARTITION OF t FOR VALUES FROM (20) TO (30);
\d t3
INSERT INTO t VALUES (25, 5, 'dup');
INSERT INTO t VALUES (5, 500, 'in t1'), (25, 501, 'in t3');
INSERT INTO t VALUES (7, 501, 'dup of t3');

-- A sub-partitioned new partition (its own partition key is not in the
-- index either).
CREATE TABLE t4 PARTITION OF t FOR VALUES FROM (30) TO (40) PARTITION BY LIST (c);
CREATE TABLE t4x PARTITION OF t4 FOR VALUES IN ('x');
CREATE TABLE t4y PARTITION OF t4 FOR VALUES IN ('y');
\d t4
INSERT INTO t VALUES (31, 5, 'x');
INSERT INTO t VALUES (31, 600, 'x');
INSERT INTO t VALUES (32, 600, 'y');
INSERT INTO t VALUES (2, 600, 'y');

-- The create-time check: duplicates across and within partitions.
CREATE TABLE d (a int, b int, c text) PARTITION BY LIST (a);
CREATE TABLE d1 PARTITION OF d FOR VALUES IN (1);
CREATE TABLE d2 PARTITION OF d FOR VALUES IN (2);
CREATE TABLE d3 PARTITION OF d FOR VALUES IN (3);
INSERT INTO d VALUES (1, 10), (2, 10), (1, 20), (3, 20), (3, 30), (3, 30);
CREATE UNIQUE INDEX d_b ON d USING gunique (b);
DELETE FROM d WHERE a = 2;
CREATE UNIQUE INDEX d_b ON d USING gunique (b);
DELETE FROM d WHERE a = 3 AND b = 20;
CREATE UNIQUE INDEX d_b ON d USING gunique (b);
-- dead rows do not count
DELETE FROM d WHERE a = 3;
INSERT INTO d VALUES (3, 30);
CREATE UNIQUE INDEX d_b ON d USING gunique (b);
\d d
DROP INDEX d_b;
-- rows of this transaction do count
BEGIN;
INSERT INTO d VALUES (2, 10);
CREATE UNIQUE INDEX d_b ON d USING gunique (b);
ROLLBACK;
-- failed CREATE leaves nothing behind
SELECT count(*) FROM pg_class WHERE relname LIKE 'd_\_b%' OR relname LIKE 'd_b%';

-- The form pg_dump emits: ON ONLY, then one ALTER INDEX ... ATTACH per leaf.
CREATE TABLE e (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE e1 PARTITION OF e FOR VALUES FROM (0) TO (10);
CREATE TABLE e2 PARTITION OF e FOR VALUES FROM (10) TO (20);
INSERT INTO e VALUES (1, 1), (11, 1), (12, 2);
CREATE UNIQUE INDEX e_b ON ONLY e USING gunique (b);
CREATE UNIQUE INDEX e1_b ON e1 USING gunique (b);
CREATE UNIQUE INDEX e2_b ON e2 USING gunique (b);
ALTER INDEX e_b ATTACH PARTITION e1_b;
SELECT indisvalid FROM pg_index WHERE indexrelid = 'e_b'::regclass;
ALTER INDEX e_b ATTACH PARTITION e2_b;
SELECT indisvalid FROM pg_index WHERE indexrelid = 'e_b'::regclass;
DELETE FROM e WHERE a = 11;
ALTER INDEX e_b ATTACH PARTITION e2_b;
SELECT indisvalid, indisunique FROM pg_index WHERE indexrelid = 'e_b'::regclass;
INSERT INTO e VALUES (13, 1);

-- An ATTACH that completes its parent makes PostgreSQL climb the tree and
-- lock the index and table above in AccessExclusiveLock; gunique takes those
-- locks first, top down (see specs/attach-lock-order.spec), and the tree
-- completed is checked.  Someone who does not own the index gets
-- PostgreSQL's refusal, and no lock.
CREATE TABLE h (a int, b int, c int) PARTITION BY RANGE (a);
CREATE TABLE h1 PARTITION OF h FOR VALUES FROM (0) TO (10)
	PARTITION BY RANGE (b);
CREATE TABLE h11 PARTITION OF h1 FOR VALUES FROM (0) TO (10);
CREATE TABLE h2 PARTITION OF h FOR VALUES FROM (10) TO (20);
INSERT INTO h VALUES (1, 1, 1), (11, 1, 1);
CREATE UNIQUE INDEX h_c ON ONLY h USING gunique (c);
CREATE UNIQUE INDEX h1_c ON ONLY h1 USING gunique (c);
CREATE UNIQUE INDEX h11_c ON h11 USING gunique (c);
CREATE UNIQUE INDEX h2_c ON h2 USING gunique (c);
ALTER INDEX h_c ATTACH PARTITION h1_c;
ALTER INDEX h_c ATTACH PARTITION h2_c;
CREATE ROLE gunique_attach_nobody;
GRANT USAGE ON SCHEMA gp TO gunique_attach_nobody;
SET ROLE gunique_attach_nobody;
BEGIN;
ALTER INDEX h1_c ATTACH PARTITION h11_c;
ROLLBACK;
RESET ROLE;
REVOKE USAGE ON SCHEMA gp FROM gunique_attach_nobody;
DROP ROLE gunique_attach_nobody;
ALTER INDEX h1_c ATTACH PARTITION h11_c;
SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname IN ('h_c', 'h1_c') ORDER BY 1;
BEGIN;
DELETE FROM h WHERE a = 11;
ALTER INDEX h1_c ATTACH PARTITION h11_c;
SELECT c.relname, l.mode FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
WHERE l.pid = pg_backend_pid() AND l.mode = 'AccessExclusiveLock'
  AND c.relname IN ('h', 'h_c', 'h1', 'h1_c', 'h11', 'h11_c') ORDER BY 1;
COMMIT;
SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname IN ('h_c', 'h1_c') ORDER BY 1;
INSERT INTO h VALUES (12, 0, 1);
DROP TABLE h;

-- ATTACH PARTITION: the new partition's keys are checked.
CREATE TABLE e3 (a int, b int);
INSERT INTO e3 VALUES (25, 1);
ALTER TABLE e ATTACH PARTITION e3 FOR VALUES FROM (20) TO (30);
UPDATE e3 SET b = 3;
ALTER TABLE e ATTACH PARTITION e3 FOR VALUES FROM (20) TO (30);
INSERT INTO e VALUES (5, 3);
-- attaching a sub-partitioned table adopts its gunique index tree
CREATE TABLE e4 (a int, b int) PARTITION BY RANGE (b);
CREATE TABLE e4a PARTITION OF e4 FOR VALUES FROM (0) TO (100);
INSERT INTO e4 VALUES (35, 50);
CREATE UNIQUE INDEX e4_b ON e4 USING gunique (b);
ALTER TABLE e ATTACH PARTITION e4 FOR VALUES FROM (30) TO (40);
SELECT c.relname FROM pg_inherits i JOIN pg_class c ON c.oid = i.inhrelid
WHERE i.inhparent = 'e_b'::regclass ORDER BY 1;
INSERT INTO e VALUES (5, 50);

-- NULLs are distinct by default ...
CREATE TABLE n (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE n1 PARTITION OF n FOR VALUES FROM (0) TO (10);
CREATE TABLE n2 PARTITION OF n FOR VALUES FROM (10) TO (20);
CREATE UNIQUE INDEX n_b ON n USING gunique (b);
INSERT INTO n VALUES (1, NULL), (11, NULL), (2, NULL);
-- ... unless NULLS NOT DISTINCT
CREATE UNIQUE INDEX n_b_nnd ON n USING gunique (b) NULLS NOT DISTINCT;
DELETE FROM n WHERE a <> 1;
CREATE UNIQUE INDEX n_b_nnd ON n USING gunique (b) NULLS NOT DISTINCT;
INSERT INTO n VALUES (11, NULL);
\d n

-- Multi-column keys, INCLUDE, partial and expression indexes
CREATE TABLE m (a int, email text, tenant int, flag bool, extra text)
	PARTITION BY HASH (a);
CREATE TABLE m0 PARTITION OF m FOR VALUES WITH (MODULUS 3, REMAINDER 0);
CREATE TABLE m1 PARTITION OF m FOR VALUES WITH (MODULUS 3, REMAINDER 1);
CREATE TABLE m2 PARTITION OF m FOR VALUES WITH (MODULUS 3, REMAINDER 2);
CREATE UNIQUE INDEX m_tenant_email ON m USING gunique (tenant, email) INCLUDE (extra);
CREATE UNIQUE INDEX m_lower_email ON m USING gunique (lower(email)) WHERE flag;
INSERT INTO m VALUES (1, 'Ann@x', 1, true, 'e1');
INSERT INTO m VALUES (2, 'Ann@x', 2, false, 'e2');
INSERT INTO m VALUES (3, 'Ann@x', 1, false, 'e3');
INSERT INTO m VALUES (4, 'ann@X', 3, true, 'e4');
INSERT INTO m VALUES (5, 'ann@X', 4, false, 'e5');
SELECT tableoid::regclass IS NOT NULL AS found, a, email, tenant FROM m ORDER BY a;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT extra FROM m WHERE tenant = 1 AND email = 'Ann@x';
EXPLAIN (COSTS OFF) SELECT a FROM m WHERE lower(email) = 'ann@x' AND flag;
RESET enable_seqscan;

-- When the partition key is determined by the index key, equal keys always
-- land in the same partition: no other partition is probed (or locked).
CREATE TABLE k (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE k1 PARTITION OF k FOR VALUES FROM (0) TO (10);
CREATE TABLE k2 PARTITION OF k FOR VALUES FROM (10) TO (20);
CREATE UNIQUE INDEX k_ab ON k USING gunique (b, a);
INSERT INTO k VALUES (1, 1), (11, 1);
INSERT INTO k VALUES (1, 1);
BEGIN;
INSERT INTO k1 VALUES (2, 2);
SELECT relation::regclass FROM pg_locks
WHERE pid = pg_backend_pid() AND locktype = 'relation'
  AND relation::regclass::text LIKE 'k2%' ORDER BY 1;
COMMIT;
-- ... whereas here every relation of the tree is locked for the probe.
CREATE UNIQUE INDEX k_b ON k USING gunique (b);
DELETE FROM k WHERE a = 11;
CREATE UNIQUE INDEX k_b ON k USING gunique (b);
BEGIN;
INSERT INTO k1 VALUES (3, 3);
SELECT relation::regclass FROM pg_locks
WHERE pid = pg_backend_pid() AND locktype = 'relation'
  AND relation::regclass::text LIKE 'k2%' ORDER BY 1;
COMMIT;

-- An expression partition key over the index key determines the partition
-- too when the key's equality is image equality (uuid): list partitioning
-- on the first hex digit probes no other partition.
CREATE TABLE x (id uuid, v int) PARTITION BY LIST (lower(left(id::text, 1)));
CREATE TABLE x0 PARTITION OF x FOR VALUES IN ('0', '1', '2', '3', '4', '5', '6', '7');
CREATE TABLE x8 PARTITION OF x FOR VALUES IN ('8', '9', 'a', 'b', 'c', 'd', 'e', 'f');
CREATE UNIQUE INDEX x_id ON x USING gunique (id);
BEGIN;
INSERT INTO x VALUES ('10000000-0000-0000-0000-000000000000', 1);
SELECT relation::regclass FROM pg_locks
WHERE pid = pg_backend_pid() AND locktype = 'relation'
  AND relation::regclass::text LIKE 'x8%' ORDER BY 1;
COMMIT;
INSERT INTO x VALUES ('10000000-0000-0000-0000-000000000000', 2);
-- Not when equal keys can differ in image: numeric 1.0 = 1.00, but their
-- text forms differ, so they land in different partitions and must be
-- probed across them.
CREATE TABLE y (n numeric) PARTITION BY LIST ((n::text));
CREATE TABLE y1 PARTITION OF y FOR VALUES IN ('1.0');
CREATE TABLE y2 PARTITION OF y FOR VALUES IN ('1.00');
CREATE UNIQUE INDEX y_n ON y USING gunique (n);
INSERT INTO y VALUES (1.0);
INSERT INTO y VALUES (1.00);
-- Nor when the expression reads a column outside the index key.
CREATE TABLE z (a int, b int) PARTITION BY LIST ((a + b));
CREATE TABLE z1 PARTITION OF z FOR VALUES IN (1);
CREATE TABLE z2 PARTITION OF z FOR VALUES IN (2);
CREATE UNIQUE INDEX z_a ON z USING gunique (a);
INSERT INTO z VALUES (1, 0);
INSERT INTO z VALUES (1, 1);

-- Foreign partitions cannot be covered.
CREATE TABLE f (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE f1 PARTITION OF f FOR VALUES FROM (0) TO (10);
CREATE FOREIGN DATA WRAPPER gunique_dummy_fdw;
CREATE SERVER gunique_dummy_srv FOREIGN DATA WRAPPER gunique_dummy_fdw;
CREATE FOREIGN TABLE f2 PARTITION OF f FOR VALUES FROM (10) TO (20)
	SERVER gunique_dummy_srv;
CREATE UNIQUE INDEX f_b ON f USING gunique (b);
-- Nor deeper down: the error names the table that holds the foreign one.
DROP FOREIGN TABLE f2;
CREATE TABLE f2 PARTITION OF f FOR VALUES FROM (10) TO (20)
	PARTITION BY RANGE (a);
CREATE FOREIGN TABLE f21 PARTITION OF f2 FOR VALUES FROM (10) TO (20)
	SERVER gunique_dummy_srv;
CREATE UNIQUE INDEX f_b ON f USING gunique (b);
DROP TABLE f2;
-- Nor by attaching a partitioned table that contains a foreign table, at
-- any depth (PostgreSQL itself refuses a foreign table attached or created
-- under a unique index).
CREATE UNIQUE INDEX f_b ON f USING gunique (b);
INSERT INTO f VALUES (1, 42);
CREATE TABLE g (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE g1 PARTITION OF g FOR VALUES FROM (10) TO (15);
CREATE FOREIGN TABLE g2 PARTITION OF g FOR VALUES FROM (15) TO (20)
	SERVER gunique_dummy_srv;
ALTER TABLE f ATTACH PARTITION g FOR VALUES FROM (10) TO (20);
DROP FOREIGN TABLE g2;
CREATE TABLE g2 PARTITION OF g FOR VALUES FROM (15) TO (20)
	PARTITION BY RANGE (a);
CREATE FOREIGN TABLE g21 PARTITION OF g2 FOR VALUES FROM (15) TO (20)
	SERVER gunique_dummy_srv;
ALTER TABLE f ATTACH PARTITION g FOR VALUES FROM (10) TO (20);
DROP FOREIGN TABLE g21;
CREATE FOREIGN TABLE f3 (a int, b int) SERVER gunique_dummy_srv;
ALTER TABLE f ATTACH PARTITION f3 FOR VALUES FROM (30) TO (40);
DROP FOREIGN TABLE f3;
ALTER TABLE f ATTACH PARTITION g FOR VALUES FROM (10) TO (20);
CREATE FOREIGN TABLE g21 PARTITION OF g2 FOR VALUES FROM (15) TO (20)
	SERVER gunique_dummy_srv;
INSERT INTO f VALUES (11, 42);
SELECT c.relname, i.indisunique, i.indisvalid
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE i.indrelid IN (SELECT relid FROM pg_partition_tree('f'))
ORDER BY 1;
DROP TABLE f;
DROP SERVER gunique_dummy_srv;
DROP FOREIGN DATA WRAPPER gunique_dummy_fdw;

-- TRUNCATE rebuilds the leaves empty and keeps the guarantee.
TRUNCATE e2;
INSERT INTO e VALUES (14, 1);
INSERT INTO e VALUES (14, 14);
TRUNCATE e;
INSERT INTO e VALUES (1, 1), (14, 2);
INSERT INTO e VALUES (14, 1);

-- Build phases in pg_stat_progress_create_index: nbtree's, and the check.
SELECT p, pg_indexam_progress_phasename(g.oid, p) AS gunique,
	pg_indexam_progress_phasename(b.oid, p) AS btree
FROM pg_am g, pg_am b, generate_series(1, 6) p
WHERE g.amname = 'gunique' AND b.amname = 'btree' ORDER BY p;

-- A non-unique gunique index is refused on partitioned tables too.
CREATE INDEX t_c ON t USING gunique (c);

DROP SCHEMA gp CASCADE;

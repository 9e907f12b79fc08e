--
-- plain: a gunique index on a non-partitioned table behaves exactly like a
-- unique btree index.
--
-- ON CONFLICT (onconflict.sql) and the build phase names reported in
-- pg_stat_progress_create_index (partitioned.sql) are covered elsewhere.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;

CREATE SCHEMA gu_plain;
SET search_path = gu_plain, public;

--
-- Local uniqueness, with btree's error text, DETAIL and SQLSTATE.
--
CREATE TABLE t (id int, email text, grp int, note text);
CREATE UNIQUE INDEX t_id ON t USING gunique (id);
INSERT INTO t SELECT g, 'user' || g || '@example.com', g % 10, 'note ' || g
FROM generate_series(1, 1000) g;
INSERT INTO t VALUES (42, 'x', 0, 'dup');
\echo :LAST_ERROR_SQLSTATE
-- a duplicate within one statement
INSERT INTO t VALUES (1001, 'a', 0, 'a'), (1001, 'b', 0, 'b');
-- a duplicate made by UPDATE
UPDATE t SET id = 43 WHERE id = 44;
-- UPDATE of every key at once is checked row by row, as btree does
UPDATE t SET id = id + 1;
-- COPY
COPY t (id, note) FROM stdin;
2000	ok
2000	dup
\.
SELECT count(*), min(id), max(id) FROM t;

-- The same statements against a btree index give the same errors.
CREATE TABLE t_bt (id int, email text, grp int, note text);
CREATE UNIQUE INDEX t_bt_id ON t_bt USING btree (id);
INSERT INTO t_bt SELECT * FROM t;
INSERT INTO t_bt VALUES (42, 'x', 0, 'dup');
UPDATE t_bt SET id = 43 WHERE id = 44;
UPDATE t_bt SET id = id + 1;

-- Deleted, rolled-back and subtransaction cases.
BEGIN;
DELETE FROM t WHERE id = 10;
INSERT INTO t VALUES (10, 'again', 0, 'reinserted in the same transaction');
COMMIT;
SELECT id, note FROM t WHERE id = 10;
BEGIN;
INSERT INTO t VALUES (1001, 'r', 0, 'rolled back');
ROLLBACK;
INSERT INTO t VALUES (1001, 'r', 0, 'after rollback');
BEGIN;
SAVEPOINT s;
INSERT INTO t VALUES (1001, 'dup', 0, 'dup');
ROLLBACK TO SAVEPOINT s;
INSERT INTO t VALUES (1002, 's', 0, 'after savepoint');
COMMIT;
SELECT id, note FROM t WHERE id > 1000 ORDER BY id;
-- Non-key updates of one row, many times: dead versions of the same key
-- pile up in the index (bottom-up deletion, deduplication); uniqueness holds.
CREATE INDEX t_grp ON t (grp);
DO $$
BEGIN
  FOR i IN 1..300 LOOP
    UPDATE t SET grp = grp + 1 WHERE id = 500;
  END LOOP;
END $$;
INSERT INTO t VALUES (500, 'x', 0, 'dup');
SELECT id, grp FROM t WHERE id = 500;
DROP INDEX t_grp;

--
-- Scans.
--
VACUUM ANALYZE t;
SET enable_seqscan = off;
SET enable_bitmapscan = off;
-- index scan
EXPLAIN (COSTS OFF) SELECT * FROM t WHERE id = 42;
SELECT * FROM t WHERE id = 42;
EXPLAIN (COSTS OFF) SELECT id, note FROM t WHERE id = ANY ('{3,1,2}') ORDER BY id;
SELECT id, note FROM t WHERE id = ANY ('{3,1,2}') ORDER BY id;
-- index-only scan
EXPLAIN (COSTS OFF) SELECT id FROM t WHERE id BETWEEN 10 AND 14;
SELECT id FROM t WHERE id BETWEEN 10 AND 14;
EXPLAIN (COSTS OFF) SELECT count(*) FROM t WHERE id > 900;
SELECT count(*) FROM t WHERE id > 900;
-- ordered scans, both directions
EXPLAIN (COSTS OFF) SELECT id, note FROM t ORDER BY id LIMIT 3;
SELECT id, note FROM t ORDER BY id LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id, note FROM t ORDER BY id DESC LIMIT 3;
SELECT id, note FROM t ORDER BY id DESC LIMIT 3;
EXPLAIN (COSTS OFF) SELECT id FROM t WHERE id < 100 ORDER BY id DESC LIMIT 2;
SELECT id FROM t WHERE id < 100 ORDER BY id DESC LIMIT 2;
SELECT min(id), max(id) FROM t;
-- bitmap scans
SET enable_bitmapscan = on;
SET enable_indexscan = off;
EXPLAIN (COSTS OFF) SELECT id, note FROM t WHERE id < 3 OR id > 998;
SELECT id, note FROM t WHERE id < 3 OR id > 998 ORDER BY id;
EXPLAIN (COSTS OFF) SELECT count(*) FROM t WHERE id < 20 AND note LIKE 'note 1%';
SELECT count(*) FROM t WHERE id < 20 AND note LIKE 'note 1%';
RESET enable_indexscan;
SET enable_bitmapscan = off;
-- IS NULL searches
INSERT INTO t VALUES (NULL, 'n1', 0, 'null 1'), (NULL, 'n2', 0, 'null 2');
EXPLAIN (COSTS OFF) SELECT email FROM t WHERE id IS NULL;
SELECT email FROM t WHERE id IS NULL ORDER BY email;

--
-- Multi-column keys.
--
CREATE TABLE mc (a int, b text, c int);
CREATE UNIQUE INDEX mc_ab ON mc USING gunique (a, b);
INSERT INTO mc SELECT g / 10, 'b' || (g % 10), g FROM generate_series(0, 199) g;
INSERT INTO mc VALUES (3, 'b4', -1);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO mc VALUES (3, 'b10', -1), (20, 'b4', -1);
EXPLAIN (COSTS OFF) SELECT * FROM mc WHERE a = 3 AND b = 'b4';
SELECT * FROM mc WHERE a = 3 AND b = 'b4';
EXPLAIN (COSTS OFF) SELECT a, b FROM mc WHERE a = 3 ORDER BY b DESC LIMIT 2;
SELECT a, b FROM mc WHERE a = 3 ORDER BY b DESC LIMIT 2;
EXPLAIN (COSTS OFF) SELECT * FROM mc ORDER BY a, b LIMIT 2;
SELECT * FROM mc ORDER BY a, b LIMIT 2;

--
-- INCLUDE columns: not part of the key, returned by index-only scans.
--
CREATE TABLE inc (id int, payload text, other text);
CREATE UNIQUE INDEX inc_id ON inc USING gunique (id) INCLUDE (payload);
INSERT INTO inc SELECT g, 'p' || g, 'o' || g FROM generate_series(1, 100) g;
INSERT INTO inc VALUES (5, 'p5', 'same payload, same key');
INSERT INTO inc VALUES (101, 'p5', 'same payload, new key');
VACUUM ANALYZE inc;
EXPLAIN (COSTS OFF) SELECT id, payload FROM inc WHERE id = 5;
SELECT id, payload FROM inc WHERE id = 5;
EXPLAIN (COSTS OFF) SELECT id, other FROM inc WHERE id = 5;

--
-- Partial index: uniqueness only where the predicate holds.
--
CREATE TABLE part (email text, active bool);
CREATE UNIQUE INDEX part_email_active ON part USING gunique (email) WHERE active;
INSERT INTO part VALUES ('a@x', true), ('a@x', false), ('a@x', false), ('b@x', false);
INSERT INTO part VALUES ('a@x', true);
\echo :LAST_ERROR_SQLSTATE
UPDATE part SET active = true WHERE email = 'b@x';
SELECT email, active, count(*) FROM part GROUP BY 1, 2 ORDER BY 1, 2;
EXPLAIN (COSTS OFF) SELECT * FROM part WHERE email = 'a@x' AND active;
SELECT * FROM part WHERE email = 'a@x' AND active;

--
-- Expression index.
--
CREATE TABLE expr (email text);
CREATE UNIQUE INDEX expr_lower ON expr USING gunique (lower(email));
INSERT INTO expr VALUES ('Alice@Example.com'), ('bob@example.com');
INSERT INTO expr VALUES ('alice@example.COM');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM expr WHERE lower(email) = 'alice@example.com';
SELECT * FROM expr WHERE lower(email) = 'alice@example.com';

--
-- NULLs: distinct by default; NULLS NOT DISTINCT rejects a second NULL.
--
CREATE TABLE nul (k int, v int);
CREATE UNIQUE INDEX nul_k ON nul USING gunique (k);
INSERT INTO nul VALUES (NULL, 1), (NULL, 2), (1, 3);
SELECT count(*) FROM nul WHERE k IS NULL;
CREATE UNIQUE INDEX nul_k_nnd ON nul USING gunique (k) NULLS NOT DISTINCT;
DELETE FROM nul WHERE v = 2;
CREATE UNIQUE INDEX nul_k_nnd ON nul USING gunique (k) NULLS NOT DISTINCT;
INSERT INTO nul VALUES (NULL, 4);
\echo :LAST_ERROR_SQLSTATE
SELECT pg_get_indexdef('nul_k_nnd'::regclass);
-- multi-column: a NULL in any column still collides with an equal row
CREATE TABLE nul2 (a int, b int);
CREATE UNIQUE INDEX nul2_ab ON nul2 USING gunique (a, b) NULLS NOT DISTINCT;
CREATE UNIQUE INDEX nul2_ab_distinct ON nul2 USING gunique (a, b);
INSERT INTO nul2 VALUES (1, NULL), (NULL, NULL), (1, 1);
INSERT INTO nul2 VALUES (1, NULL);
INSERT INTO nul2 VALUES (NULL, NULL);
DROP INDEX nul2_ab;
INSERT INTO nul2 VALUES (1, NULL), (NULL, NULL);
SELECT a, b, count(*) FROM nul2 GROUP BY a, b ORDER BY a, b;

--
-- DESC / NULLS FIRST.
--
CREATE TABLE ord (k int, v text);
CREATE UNIQUE INDEX ord_k ON ord USING gunique (k DESC NULLS LAST);
INSERT INTO ord SELECT g, 'v' || g FROM generate_series(1, 100) g;
INSERT INTO ord VALUES (NULL, 'null');
INSERT INTO ord VALUES (7, 'dup');
EXPLAIN (COSTS OFF) SELECT k FROM ord ORDER BY k DESC NULLS LAST LIMIT 3;
SELECT k FROM ord ORDER BY k DESC NULLS LAST LIMIT 3;
EXPLAIN (COSTS OFF) SELECT k FROM ord ORDER BY k NULLS FIRST LIMIT 3;
SELECT k FROM ord ORDER BY k NULLS FIRST LIMIT 3;
-- not the index's order: needs a sort
EXPLAIN (COSTS OFF) SELECT k FROM ord ORDER BY k DESC NULLS FIRST LIMIT 3;
CREATE UNIQUE INDEX ord_v ON ord USING gunique (v NULLS FIRST);
SELECT pg_get_indexdef('ord_k'::regclass), pg_get_indexdef('ord_v'::regclass);

--
-- Reloptions: nbtree's fillfactor and deduplicate_items.
--
CREATE UNIQUE INDEX ord_v_opts ON ord USING gunique (v) WITH (fillfactor = 70, deduplicate_items = off);
SELECT relname, reloptions FROM pg_class WHERE relname = 'ord_v_opts';
ALTER INDEX ord_v_opts SET (fillfactor = 90);
ALTER INDEX ord_v_opts RESET (deduplicate_items);
SELECT relname, reloptions FROM pg_class WHERE relname = 'ord_v_opts';
SELECT pg_get_indexdef('ord_v_opts'::regclass);
CREATE UNIQUE INDEX ord_bad ON ord USING gunique (v) WITH (fillfactor = 5);
CREATE UNIQUE INDEX ord_bad ON ord USING gunique (v) WITH (deduplicate_items = maybe);
CREATE UNIQUE INDEX ord_bad ON ord USING gunique (v) WITH (pages_per_range = 4);
ALTER INDEX ord_v_opts SET (fillfactor = 101);
-- btree says the same
CREATE UNIQUE INDEX ord_bad ON ord USING btree (v) WITH (fillfactor = 5);
CREATE UNIQUE INDEX ord_bad ON ord USING btree (v) WITH (deduplicate_items = maybe);
CREATE UNIQUE INDEX ord_bad ON ord USING btree (v) WITH (pages_per_range = 4);
ALTER INDEX ord_v_opts SET (fillfactor = 101);
INSERT INTO ord VALUES (1000, 'v1');
DROP INDEX ord_v_opts;

--
-- \d and pg_get_indexdef.
--
\d t
\d inc_id
SELECT pg_get_indexdef('t_id'::regclass);
SELECT pg_get_indexdef('inc_id'::regclass);
SELECT pg_get_indexdef('part_email_active'::regclass);
SELECT pg_get_indexdef('expr_lower'::regclass);
SELECT pg_get_indexdef('mc_ab'::regclass);

--
-- Access method and index properties are btree's.
--
SELECT p.name,
       pg_indexam_has_property((SELECT oid FROM pg_am WHERE amname = 'gunique'), p.name) AS gunique,
       pg_indexam_has_property((SELECT oid FROM pg_am WHERE amname = 'btree'), p.name) AS btree
FROM unnest(array['can_order', 'can_unique', 'can_multi_col', 'can_exclude', 'can_include']) AS p(name);
SELECT p.name,
       pg_index_has_property('t_id'::regclass, p.name) AS gunique,
       pg_index_has_property('t_bt_id'::regclass, p.name) AS btree
FROM unnest(array['clusterable', 'index_scan', 'bitmap_scan', 'backward_scan']) AS p(name);
SELECT p.name,
       pg_index_column_has_property('t_id'::regclass, 1, p.name) AS gunique,
       pg_index_column_has_property('t_bt_id'::regclass, 1, p.name) AS btree,
       pg_index_column_has_property('ord_k'::regclass, 1, p.name) AS gunique_desc
FROM unnest(array['asc', 'desc', 'nulls_first', 'nulls_last', 'orderable',
                  'distance_orderable', 'returnable', 'search_array',
                  'search_nulls']) AS p(name);
-- an INCLUDE column is returnable but not orderable
SELECT p.name, pg_index_column_has_property('inc_id'::regclass, 2, p.name)
FROM unnest(array['orderable', 'returnable', 'search_nulls']) AS p(name);

--
-- gunique indexes are unique or nothing.
--
CREATE INDEX t_email ON t USING gunique (email);
\echo :LAST_ERROR_SQLSTATE
-- Exclusion constraints build a non-unique index: refused at build time.
ALTER TABLE t ADD CONSTRAINT t_excl EXCLUDE USING gunique (id WITH =);
\echo :LAST_ERROR_SQLSTATE

--
-- A build over duplicate data fails like btree's, and leaves nothing behind.
--
CREATE TABLE dupdata (k int);
INSERT INTO dupdata SELECT g % 50 FROM generate_series(1, 100) g;
CREATE UNIQUE INDEX dupdata_k ON dupdata USING gunique (k);
\echo :LAST_ERROR_SQLSTATE
CREATE UNIQUE INDEX dupdata_k ON dupdata USING btree (k);
SELECT count(*) FROM pg_class WHERE relname = 'dupdata_k';
-- CONCURRENTLY leaves an invalid index, as btree does
CREATE UNIQUE INDEX CONCURRENTLY dupdata_k ON dupdata USING gunique (k);
SELECT indisvalid, indisready FROM pg_index WHERE indexrelid = 'dupdata_k'::regclass;
\d dupdata
DROP INDEX dupdata_k;
DELETE FROM dupdata WHERE k IN (SELECT k FROM dupdata GROUP BY k HAVING count(*) > 1) AND ctid NOT IN (SELECT min(ctid) FROM dupdata GROUP BY k);
CREATE UNIQUE INDEX dupdata_k ON dupdata USING gunique (k);
INSERT INTO dupdata VALUES (49);

--
-- CREATE UNIQUE INDEX CONCURRENTLY.
--
CREATE UNIQUE INDEX CONCURRENTLY t_email ON t USING gunique (email);
SELECT indisvalid, indisready, indisunique FROM pg_index WHERE indexrelid = 't_email'::regclass;
INSERT INTO t VALUES (5000, 'user5@example.com', 0, 'dup email');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT id FROM t WHERE email = 'user5@example.com';
SELECT id FROM t WHERE email = 'user5@example.com';

--
-- VACUUM, REINDEX, CLUSTER, TRUNCATE: the index keeps working.
--
DELETE FROM t WHERE id BETWEEN 100 AND 199;
VACUUM t;
VACUUM (INDEX_CLEANUP on) t;
VACUUM FULL t;
SELECT count(*) FROM t WHERE id BETWEEN 100 AND 199;
INSERT INTO t SELECT g, 'user' || g || '@example.com', 0, 'back' FROM generate_series(100, 199) g;
INSERT INTO t VALUES (150, 'again@example.com', 0, 'dup');
-- REINDEX INDEX
SELECT relfilenode AS old_relfilenode FROM pg_class WHERE relname = 't_id' \gset
REINDEX INDEX t_id;
SELECT relfilenode <> :old_relfilenode AS rebuilt, relam = (SELECT oid FROM pg_am WHERE amname = 'gunique') AS still_gunique
FROM pg_class WHERE relname = 't_id';
INSERT INTO t VALUES (150, 'fresh1@example.com', 0, 'dup');
SELECT id, note FROM t WHERE id = 150;
-- REINDEX TABLE
REINDEX TABLE t;
INSERT INTO t VALUES (151, 'fresh2@example.com', 0, 'dup');
SELECT id, note FROM t WHERE id = 151;
-- REINDEX INDEX CONCURRENTLY
SELECT relfilenode AS old_relfilenode FROM pg_class WHERE relname = 't_id' \gset
REINDEX INDEX CONCURRENTLY t_id;
SELECT c.relfilenode <> :old_relfilenode AS rebuilt, am.amname, i.indisvalid, i.indisunique
FROM pg_class c JOIN pg_am am ON am.oid = c.relam JOIN pg_index i ON i.indexrelid = c.oid
WHERE c.relname = 't_id';
INSERT INTO t VALUES (152, 'fresh3@example.com', 0, 'dup');
SELECT id, note FROM t WHERE id = 152;
REINDEX TABLE CONCURRENTLY t;
INSERT INTO t VALUES (153, 'fresh4@example.com', 0, 'dup');
-- CLUSTER
CLUSTER t USING t_id;
SELECT indisclustered FROM pg_index WHERE indexrelid = 't_id'::regclass;
SELECT id, note FROM t WHERE id = 154;
INSERT INTO t VALUES (154, 'fresh5@example.com', 0, 'dup');
UPDATE t SET id = -id WHERE id <= 3;
CLUSTER t;
SELECT id FROM t ORDER BY ctid LIMIT 5;
INSERT INTO t VALUES (-1, 'fresh6@example.com', 0, 'dup');
INSERT INTO t VALUES (5001, 'user5@example.com', 0, 'dup email');
-- a table rewrite by ALTER TABLE reindexes, checking uniqueness
ALTER TABLE t ADD COLUMN r float8 DEFAULT random();
INSERT INTO t VALUES (-2, 'fresh7@example.com', 0, 'dup');
SELECT count(*), count(DISTINCT id) FROM t;
-- TRUNCATE
CREATE TABLE trunc (k int);
CREATE UNIQUE INDEX trunc_k ON trunc USING gunique (k);
INSERT INTO trunc SELECT generate_series(1, 10);
TRUNCATE trunc;
INSERT INTO trunc SELECT generate_series(1, 10);
INSERT INTO trunc VALUES (10);
-- TRUNCATE in the transaction that created the table truncates in place
BEGIN;
CREATE TABLE trunc2 (k int);
CREATE UNIQUE INDEX trunc2_k ON trunc2 USING gunique (k);
INSERT INTO trunc2 SELECT generate_series(1, 10);
TRUNCATE trunc2;
INSERT INTO trunc2 SELECT generate_series(5, 15);
COMMIT;
INSERT INTO trunc2 VALUES (15);
SELECT count(*) FROM trunc2;
-- ALTER COLUMN TYPE rebuilds the index with the same access method
ALTER TABLE trunc ALTER COLUMN k TYPE bigint;
SELECT pg_get_indexdef('trunc_k'::regclass);
INSERT INTO trunc VALUES (10);
-- LIKE ... INCLUDING INDEXES copies it
CREATE TABLE trunc_copy (LIKE trunc INCLUDING INDEXES);
\d trunc_copy
INSERT INTO trunc_copy VALUES (1), (1);

--
-- Unlogged and temporary tables.
--
CREATE UNLOGGED TABLE unl (k int);
CREATE UNIQUE INDEX unl_k ON unl USING gunique (k);
INSERT INTO unl VALUES (1), (2);
INSERT INTO unl VALUES (2);
SELECT relpersistence FROM pg_class WHERE relname = 'unl_k';
CREATE TEMP TABLE tmp (k int);
CREATE UNIQUE INDEX tmp_k ON tmp USING gunique (k);
INSERT INTO tmp VALUES (1), (2);
INSERT INTO tmp VALUES (2);
DROP TABLE tmp;

--
-- Parallel build.  PostgreSQL 15 builds only btree indexes in parallel,
-- gunique disables parallel builds on 17, and 18 builds in parallel: the
-- result must be the same everywhere.
--
CREATE TABLE par (k int, v text);
INSERT INTO par SELECT g, md5(g::text) FROM generate_series(1, 20000) g;
ALTER TABLE par SET (parallel_workers = 2);
SET max_parallel_maintenance_workers = 2;
SET maintenance_work_mem = '128MB';
CREATE UNIQUE INDEX par_k ON par USING gunique (k);
CREATE UNIQUE INDEX par_v ON par USING gunique (v);
-- a duplicate found by a parallel build fails it (without the worker's
-- CONTEXT line, which only a build that ran in parallel has)
CREATE TABLE par_dup (k int);
INSERT INTO par_dup SELECT generate_series(1, 20000) UNION ALL SELECT 7777;
ALTER TABLE par_dup SET (parallel_workers = 2);
\set SHOW_CONTEXT never
CREATE UNIQUE INDEX par_dup_k ON par_dup USING gunique (k);
\set SHOW_CONTEXT errors
\echo :LAST_ERROR_SQLSTATE
DROP TABLE par_dup;
RESET max_parallel_maintenance_workers;
RESET maintenance_work_mem;
INSERT INTO par VALUES (12345, 'x');
INSERT INTO par VALUES (20001, md5('777'));
SELECT k, v FROM par WHERE k = 12345;
SELECT k FROM par WHERE v = md5('777');
EXPLAIN (COSTS OFF) SELECT k, v FROM par WHERE k = 12345;
SELECT count(*) FROM (SELECT k FROM par ORDER BY k) s;
-- the index holds every row, in order
SET enable_indexscan = off;
SELECT count(*), min(k), max(k), count(DISTINCT k) FROM par WHERE k > 0;
RESET enable_indexscan;
SELECT count(*) FROM par WHERE k BETWEEN 1 AND 20000;

RESET enable_seqscan;
RESET enable_bitmapscan;
SET client_min_messages = warning;
DROP SCHEMA gu_plain CASCADE;
RESET client_min_messages;

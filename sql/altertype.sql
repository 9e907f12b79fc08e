--
-- ALTER TABLE ... ALTER COLUMN ... TYPE (and COLLATE) of a column that a
-- gunique tree depends on: PostgreSQL drops the tree and makes it again
-- under the same name; gunique checks the new tree across partitions before
-- the statement returns, so a key that the new type makes equal to another
-- fails the statement, and the whole ALTER is rolled back.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gat;
SET search_path = gat, public;

-- Every member of a tree, top first: is it unique and valid?
CREATE FUNCTION tree(top regclass)
RETURNS TABLE (index regclass, level int, tbl regclass, isunique bool,
			   isvalid bool)
LANGUAGE sql AS $$
	SELECT p.relid, p.level, i.indrelid::regclass, i.indisunique, i.indisvalid
	  FROM pg_partition_tree(top) p
	  JOIN pg_index i ON i.indexrelid = p.relid
	 ORDER BY p.level, p.relid::regclass::text
$$;

CREATE TABLE t (a int, b numeric, c text, d int) PARTITION BY RANGE (a);
CREATE TABLE t1 PARTITION OF t FOR VALUES FROM (0) TO (10);
CREATE TABLE t2 PARTITION OF t FOR VALUES FROM (10) TO (20);
CREATE TABLE t3 PARTITION OF t FOR VALUES FROM (20) TO (30);
CREATE UNIQUE INDEX t_b ON t USING gunique (b);
INSERT INTO t VALUES (1, 1.2, 'one', 1), (11, 1.4, 'two', 2), (21, 3, 'three', 3);
SELECT 't_b'::regclass::oid AS old_t_b \gset

-- 1.2 and 1.4, in two partitions, are both 1 as int: refused, and nothing
-- changed
ALTER TABLE t ALTER COLUMN b TYPE int;
\echo :LAST_ERROR_SQLSTATE
SELECT format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = 't'::regclass AND attname = 'b';
SELECT 't_b'::regclass::oid = :old_t_b AS same_index;
SELECT * FROM tree('t_b');
SELECT * FROM gunique_verify('t_b');

-- without the duplicate it goes through: a new tree under the same name,
-- unique and valid throughout, which enforces the key across partitions
UPDATE t SET b = 2.4 WHERE a = 11;
ALTER TABLE t ALTER COLUMN b TYPE int;
SELECT format_type(atttypid, atttypmod) FROM pg_attribute
 WHERE attrelid = 't'::regclass AND attname = 'b';
SELECT 't_b'::regclass::oid = :old_t_b AS same_index;
SELECT * FROM tree('t_b');
SELECT * FROM gunique_verify('t_b');
SELECT * FROM t ORDER BY a;
INSERT INTO t VALUES (2, 3, 'dup of t3', 0);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO t VALUES (12, 1, 'dup of t1', 0);
\echo :LAST_ERROR_SQLSTATE
INSERT INTO t VALUES (22, 4, 'four', 4);

-- USING: a duplicate it makes is refused too
ALTER TABLE t ALTER COLUMN b TYPE bigint USING b / 3;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE t ALTER COLUMN b TYPE bigint USING b * 10;
SELECT * FROM t ORDER BY a;
SELECT * FROM gunique_verify('t_b');
INSERT INTO t VALUES (3, 40, 'dup of t3', 0);
\echo :LAST_ERROR_SQLSTATE

-- a column that no gunique index depends on: the tree stays as it is,
-- with a table rewrite (int to bigint) or without (text to varchar)
SELECT 't_b'::regclass::oid AS old_t_b \gset
ALTER TABLE t ALTER COLUMN d TYPE bigint;
ALTER TABLE t ALTER COLUMN c TYPE varchar(20);
SELECT 't_b'::regclass::oid = :old_t_b AS same_index;
SELECT * FROM tree('t_b');
SELECT * FROM gunique_verify('t_b');
INSERT INTO t VALUES (13, 20, 'dup of t1', 0);
\echo :LAST_ERROR_SQLSTATE

-- COLLATE (see keytypes-icu for a collation that makes keys equal)
CREATE UNIQUE INDEX t_c ON t USING gunique (c);
ALTER TABLE t ALTER COLUMN c TYPE text COLLATE "C";
SELECT * FROM tree('t_c');
SELECT * FROM gunique_verify('t_c');
INSERT INTO t VALUES (14, 50, 'one', 0);
\echo :LAST_ERROR_SQLSTATE

-- a key of two columns, altered one at a time and both at once
CREATE UNIQUE INDEX t_db ON t USING gunique (d, b);
INSERT INTO t VALUES (15, 50, 'five', 1);
ALTER TABLE t ALTER COLUMN b TYPE int USING b / 100;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE t ALTER COLUMN d TYPE numeric, ALTER COLUMN b TYPE numeric;
SELECT * FROM tree('t_db');
SELECT * FROM gunique_verify('t_db');
SELECT * FROM gunique_verify('t_b');
INSERT INTO t VALUES (25, 51, 'six', 1.0);
INSERT INTO t VALUES (16, 51, 'seven', 1);
\echo :LAST_ERROR_SQLSTATE
\d t

-- in a transaction: a failed ALTER rolled back to a savepoint leaves the
-- tree as it was, and a committed one stands
BEGIN;
SAVEPOINT s;
ALTER TABLE t ALTER COLUMN b TYPE int USING 7;
ROLLBACK TO s;
SELECT * FROM gunique_verify('t_b');
ALTER TABLE t ALTER COLUMN b TYPE bigint;
COMMIT;
SELECT * FROM tree('t_b');
INSERT INTO t VALUES (17, 10, 'dup of t1', 0);
\echo :LAST_ERROR_SQLSTATE
DROP TABLE t;

-- A sub-partitioned table: a tree over every level, a tree of its own on a
-- partitioned partition, and a gunique index on one leaf alone (rebuilt as
-- on a plain table); the whole tree is the table's replica identity, which
-- the new tree takes over.
CREATE TABLE s (a int, b int, k text NOT NULL) PARTITION BY RANGE (a);
CREATE TABLE s1 PARTITION OF s FOR VALUES FROM (0) TO (10)
	PARTITION BY LIST (b);
CREATE TABLE s1a PARTITION OF s1 FOR VALUES IN (1, 2, 3);
CREATE TABLE s1b PARTITION OF s1 DEFAULT;
CREATE TABLE s2 PARTITION OF s FOR VALUES FROM (10) TO (20);
CREATE UNIQUE INDEX s_k ON s USING gunique (k);
CREATE UNIQUE INDEX s1_lower_k ON s1 USING gunique (lower(k));
CREATE UNIQUE INDEX s2_k ON s2 USING gunique (k);
ALTER TABLE s REPLICA IDENTITY USING INDEX s_k;
INSERT INTO s VALUES (1, 1, 'a'), (2, 5, 'B'), (3, 9, 'c '), (11, 0, 'c');
SELECT 's_k'::regclass::oid AS old_s_k, 's1_lower_k'::regclass::oid AS old_s1_lower_k \gset
-- 'c ' (in s1b) and 'c' (in s2) are one key as char(4)
ALTER TABLE s ALTER COLUMN k TYPE char(4);
\echo :LAST_ERROR_SQLSTATE
SELECT 's_k'::regclass::oid = :old_s_k AS same_index;
SELECT * FROM tree('s_k');
ALTER TABLE s ALTER COLUMN k TYPE varchar(10);
SELECT 's_k'::regclass::oid = :old_s_k AS same_s_k,
	   's1_lower_k'::regclass::oid = :old_s1_lower_k AS same_s1_lower_k;
SELECT * FROM tree('s_k');
SELECT * FROM tree('s1_lower_k');
SELECT indisunique, indisvalid FROM pg_index WHERE indexrelid = 's2_k'::regclass;
SELECT indexrelid::regclass FROM pg_index
 WHERE indrelid = 's'::regclass AND indisreplident;
SELECT * FROM gunique_verify('s_k');
SELECT * FROM gunique_verify('s1_lower_k');
INSERT INTO s VALUES (4, 9, 'a');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO s VALUES (13, 9, 'a');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO s VALUES (5, 9, 'A');
\echo :LAST_ERROR_SQLSTATE
-- a duplicate of the lower level's tree alone is refused too
ALTER TABLE s ALTER COLUMN k TYPE text
	USING CASE WHEN a = 2 THEN 'A' ELSE k END;
\echo :LAST_ERROR_SQLSTATE
ALTER TABLE s ALTER COLUMN k TYPE text USING k || a % 10;
SELECT * FROM s ORDER BY a;
SELECT * FROM gunique_verify('s_k');
DROP TABLE s;

-- ALTER COLUMN ... SET EXPRESSION (PostgreSQL 17 on) rebuilds the same way
CREATE TABLE g (a int, b int, k int GENERATED ALWAYS AS (b * 2) STORED)
	PARTITION BY RANGE (a);
CREATE TABLE g1 PARTITION OF g FOR VALUES FROM (0) TO (10);
CREATE TABLE g2 PARTITION OF g FOR VALUES FROM (10) TO (20);
CREATE UNIQUE INDEX g_k ON g USING gunique (k);
INSERT INTO g (a, b) VALUES (1, 1), (11, 2);
DO $$
BEGIN
	IF current_setting('server_version_num')::int < 170000 THEN
		RETURN;
	END IF;
	BEGIN
		-- 1 / 3 = 2 / 3
		EXECUTE 'ALTER TABLE g ALTER COLUMN k SET EXPRESSION AS (b / 3)';
		RAISE EXCEPTION 'a duplicate key was not refused';
	EXCEPTION WHEN unique_violation THEN
		NULL;
	END;
	EXECUTE 'ALTER TABLE g ALTER COLUMN k SET EXPRESSION AS (b * 3)';
END $$;
SELECT a, k = b * CASE WHEN current_setting('server_version_num')::int < 170000
					   THEN 2 ELSE 3 END AS expected FROM g ORDER BY a;
SELECT * FROM tree('g_k');
SELECT * FROM gunique_verify('g_k');
\set VERBOSITY terse
INSERT INTO g (a, b) VALUES (2, 2);
\set VERBOSITY default
\echo :LAST_ERROR_SQLSTATE
DROP TABLE g;

DROP FUNCTION tree(regclass);
DROP SCHEMA gat;

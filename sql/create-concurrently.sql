--
-- CREATE UNIQUE INDEX CONCURRENTLY ... USING gunique on a partitioned table,
-- and REINDEX INDEX CONCURRENTLY finishing a gunique tree left invalid.
--
-- The build makes the top ON ONLY (invalid), builds each leaf by CREATE
-- INDEX CONCURRENTLY of its partition, checks the tree with writers running
-- and marks it valid.  What this pins, one session at a time: the catalog
-- state of every member after a build, the keys refused after it (INSERT,
-- an UPDATE that moves a row), what is refused (a transaction block, a
-- function, ON ONLY), IF NOT EXISTS, multi-column, expression and partial
-- keys, a duplicate across partitions (23505, the top left invalid with a
-- HINT, inserts still checked, REINDEX INDEX CONCURRENTLY finishing it once
-- the duplicate is gone), a duplicate inside one partition (its leaf's
-- CREATE INDEX CONCURRENTLY fails), a temporary table (built at once), a
-- table without partitions, partitions added afterwards, and DROP INDEX of
-- an invalid top.  The races with writers are in
-- specs/create-concurrently-vs-insert.spec.  One output for every version.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gcc;
SET search_path = gcc, public;

-- Every gunique index of the schema: its kind (I partitioned, i leaf), its
-- table, its flags, and the index it is a partition of.
CREATE VIEW members AS
SELECT c.relname AS index, c.relkind AS kind, t.relname AS "table",
	i.indisvalid AS valid, i.indisready AS ready, i.indisunique AS "unique",
	c.relispartition AS "partition",
	(SELECT p.relname FROM pg_inherits h JOIN pg_class p ON p.oid = h.inhparent
	 WHERE h.inhrelid = c.oid) AS parent
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_class t ON t.oid = i.indrelid
JOIN pg_am a ON a.oid = c.relam
WHERE c.relnamespace = 'gcc'::regnamespace AND a.amname = 'gunique';

-- A range-partitioned table with a hash-partitioned partition.
CREATE TABLE ev (day int, id int, email text, code int, active bool)
	PARTITION BY RANGE (day);
CREATE TABLE ev1 PARTITION OF ev FOR VALUES FROM (0) TO (100);
CREATE TABLE ev2 PARTITION OF ev FOR VALUES FROM (100) TO (200)
	PARTITION BY HASH (id);
CREATE TABLE ev2a PARTITION OF ev2 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE ev2b PARTITION OF ev2 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE ev3 PARTITION OF ev FOR VALUES FROM (200) TO (300);
-- ids 1..600 once each; codes in pairs (2k, 2k+1), the even one active.
INSERT INTO ev SELECT g % 300, g, 'user' || g || '@example.com', g / 2,
	g % 2 = 0
FROM generate_series(1, 600) g;

--
-- The build.
--
CREATE UNIQUE INDEX CONCURRENTLY ev_id ON ev USING gunique (id);
SELECT * FROM members ORDER BY index;
SELECT * FROM gunique_verify('ev_id');

-- Keys held by another partition are refused, by INSERT and by an UPDATE
-- that moves a row; a row moved with its own key is not.
SELECT tableoid::regclass, day, id FROM ev WHERE id IN (10, 150, 250) ORDER BY id;
INSERT INTO ev VALUES (150, 10, 'x');
INSERT INTO ev VALUES (250, 150, 'x');
INSERT INTO ev VALUES (5, 250, 'x');
UPDATE ev SET day = 250, id = 150 WHERE id = 10;
UPDATE ev SET id = 250 WHERE id = 10;
UPDATE ev SET day = 150 WHERE id = 10;
UPDATE ev SET day = 250 WHERE id = 10;
SELECT tableoid::regclass, day, id FROM ev WHERE id = 10;
INSERT INTO ev VALUES (10, 10, 'x');
INSERT INTO ev VALUES (10, 1000, 'a new key');
INSERT INTO ev VALUES (110, 1000, 'not twice');
SELECT * FROM gunique_verify('ev_id');

--
-- Refused: the build commits as it goes.
--
BEGIN;
CREATE UNIQUE INDEX CONCURRENTLY ev_email ON ev USING gunique (email);
ROLLBACK;
\echo :LAST_ERROR_SQLSTATE
DO $$ BEGIN
	EXECUTE 'CREATE UNIQUE INDEX CONCURRENTLY ev_email ON ev USING gunique (email)';
END $$;
\echo :LAST_ERROR_SQLSTATE
SELECT 1 \; CREATE UNIQUE INDEX CONCURRENTLY ev_email ON ev USING gunique (email);
\echo :LAST_ERROR_SQLSTATE
-- ON ONLY builds no leaf: nothing to do concurrently.
CREATE UNIQUE INDEX CONCURRENTLY ev_email ON ONLY ev USING gunique (email);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM members WHERE index LIKE '%email%' ORDER BY index;

-- IF NOT EXISTS on an existing index: a notice, nothing built.
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS ev_id ON ev USING gunique (id);
CREATE UNIQUE INDEX CONCURRENTLY IF NOT EXISTS ev_id ON ev USING gunique (email);
SELECT count(*) FROM members;

--
-- Multi-column, expression and partial keys, built concurrently, each
-- tried on its own.
--
SELECT tableoid::regclass, day, id, email, code, active FROM ev
WHERE code = 50 OR id = 7 ORDER BY id;
CREATE UNIQUE INDEX CONCURRENTLY ev_code_active ON ev USING gunique (code, active);
SELECT * FROM members WHERE index LIKE '%code%' ORDER BY index;
SELECT * FROM gunique_verify('ev_code_active');
INSERT INTO ev VALUES (5, 2001, 'a@x', 50, false);
INSERT INTO ev VALUES (5, 2001, 'a@x', 50, NULL);
INSERT INTO ev VALUES (150, 2002, 'b@x', 51, NULL);
DELETE FROM ev WHERE id IN (2001, 2002);
DROP INDEX ev_code_active;

CREATE UNIQUE INDEX CONCURRENTLY ev_lower_email ON ev USING gunique (lower(email));
SELECT * FROM members WHERE index LIKE '%lower%' ORDER BY index;
SELECT * FROM gunique_verify('ev_lower_email');
-- equal to ev1's user7@example.com
INSERT INTO ev VALUES (250, 2003, 'USER7@Example.COM', 3000, false);
INSERT INTO ev VALUES (250, 2003, 'user7@example.org', 3000, false);
DROP INDEX ev_lower_email;

CREATE UNIQUE INDEX CONCURRENTLY ev_code_partial ON ev USING gunique (code)
	WHERE active;
SELECT * FROM members WHERE index LIKE '%code%' ORDER BY index;
SELECT * FROM gunique_verify('ev_code_partial');
-- code 50 active is in ev2: another active 50 is refused in ev1, an
-- inactive one is not covered, until it becomes active
INSERT INTO ev VALUES (5, 2004, 'c@x', 50, true);
INSERT INTO ev VALUES (5, 2004, 'c@x', 50, false);
UPDATE ev SET active = true WHERE id = 2004;
SELECT * FROM gunique_verify('ev_code_partial');
DROP INDEX ev_code_partial;

--
-- A duplicate across partitions: the check fails with 23505 after the
-- leaves are built; the top is left invalid, with a HINT.
--
CREATE TABLE acc (region text, id int, note text) PARTITION BY LIST (region);
CREATE TABLE acc_eu PARTITION OF acc FOR VALUES IN ('eu');
CREATE TABLE acc_us PARTITION OF acc FOR VALUES IN ('us');
CREATE TABLE acc_ap PARTITION OF acc FOR VALUES IN ('ap') PARTITION BY RANGE (id);
CREATE TABLE acc_ap1 PARTITION OF acc_ap FOR VALUES FROM (0) TO (1000);
CREATE TABLE acc_ap2 PARTITION OF acc_ap FOR VALUES FROM (1000) TO (MAXVALUE);
INSERT INTO acc SELECT (ARRAY['eu', 'us', 'ap'])[g % 3 + 1], g, 'row ' || g
FROM generate_series(1, 1500) g;
INSERT INTO acc VALUES ('us', 3, 'a duplicate of eu''s 3');
CREATE UNIQUE INDEX CONCURRENTLY acc_id ON acc USING gunique (id);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM members WHERE "table" LIKE 'acc%' ORDER BY index;
SELECT * FROM gunique_verify('acc_id');
-- Every leaf is ready: inserts go on, and are checked as before.
INSERT INTO acc VALUES ('eu', 5000, 'a new key');
INSERT INTO acc VALUES ('ap', 5000, 'refused');
UPDATE acc SET region = 'eu' WHERE id = 1001;
SELECT tableoid::regclass, * FROM acc WHERE id IN (3, 1001, 5000) ORDER BY id, region;
-- Not yet: the duplicate is still there.
REINDEX INDEX CONCURRENTLY acc_id;
\echo :LAST_ERROR_SQLSTATE
SELECT index, valid FROM members WHERE index = 'acc_id';
-- The duplicate gone, REINDEX INDEX CONCURRENTLY finishes the tree.
DELETE FROM acc WHERE note LIKE 'a duplicate%';
REINDEX INDEX CONCURRENTLY acc_id;
SELECT * FROM members WHERE "table" LIKE 'acc%' ORDER BY index;
SELECT * FROM gunique_verify('acc_id');
INSERT INTO acc VALUES ('us', 3, 'refused');
REINDEX INDEX CONCURRENTLY acc_id;
SELECT index, valid FROM members WHERE index = 'acc_id';
DROP INDEX acc_id;

--
-- A duplicate inside one partition: that partition's CREATE INDEX
-- CONCURRENTLY fails (leaves are built in OID order: acc_eu, acc_us, then
-- acc_ap's), its leaf left invalid and not ready; later leaves are not made.
--
INSERT INTO acc VALUES ('us', 7000, 'first'), ('us', 7000, 'second');
CREATE UNIQUE INDEX CONCURRENTLY acc_id ON acc USING gunique (id);
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM members WHERE "table" LIKE 'acc%' ORDER BY index;
-- acc_us's leaf takes no insert and no probe searches it, so a key acc_us
-- holds goes into acc_eu; the index promises nothing while invalid.
INSERT INTO acc VALUES ('eu', 7000, 'third');
INSERT INTO acc VALUES ('eu', 3, 'refused by acc_eu''s own leaf');
-- REINDEX rebuilds acc_us's leaf first (PostgreSQL's REINDEX CONCURRENTLY
-- of it): still a duplicate there, which leaves PostgreSQL's _ccnew copy.
REINDEX INDEX CONCURRENTLY acc_id;
\echo :LAST_ERROR_SQLSTATE
SELECT * FROM members WHERE "table" = 'acc_us' ORDER BY index;
DROP INDEX acc_us_id_idx_ccnew;
DELETE FROM acc WHERE note = 'second';
-- acc_us is fine now, but the check across partitions finds acc_eu's.
REINDEX INDEX CONCURRENTLY acc_id;
\echo :LAST_ERROR_SQLSTATE
DELETE FROM acc WHERE note = 'third';
REINDEX INDEX CONCURRENTLY acc_id;
SELECT * FROM members WHERE "table" LIKE 'acc%' ORDER BY index;
SELECT * FROM gunique_verify('acc_id');
INSERT INTO acc VALUES ('ap', 7000, 'refused');
INSERT INTO acc VALUES ('us', 1, 'refused');

--
-- A top made ON ONLY, which REINDEX INDEX CONCURRENTLY completes: every
-- missing member is made.
--
CREATE UNIQUE INDEX acc_note ON ONLY acc USING gunique (note);
SELECT * FROM members WHERE index LIKE '%note%' ORDER BY index;
REINDEX INDEX CONCURRENTLY acc_note;
SELECT * FROM members WHERE index LIKE '%note%' ORDER BY index;
SELECT * FROM gunique_verify('acc_note');
INSERT INTO acc VALUES ('ap', 8000, 'row 1');

--
-- DROP INDEX of an invalid top drops its tree.
--
DROP INDEX acc_note;
INSERT INTO acc VALUES ('ap', 8000, 'row 8000'), ('eu', 8001, 'row 8000');
CREATE UNIQUE INDEX CONCURRENTLY acc_note ON acc USING gunique (note);
\echo :LAST_ERROR_SQLSTATE
SELECT index, valid FROM members WHERE index LIKE '%note%' ORDER BY index;
DROP INDEX CONCURRENTLY acc_note;
\echo :LAST_ERROR_SQLSTATE
DROP INDEX acc_note;
SELECT * FROM members WHERE index LIKE '%note%' ORDER BY index;
INSERT INTO acc VALUES ('us', 8002, 'row 8000');

--
-- A temporary partitioned table: built at once, as PostgreSQL builds a
-- temporary table's index concurrently.
--
CREATE TEMP TABLE tmp (a int, b int, c int) PARTITION BY RANGE (a);
CREATE TEMP TABLE tmp1 PARTITION OF tmp FOR VALUES FROM (0) TO (10);
CREATE TEMP TABLE tmp2 PARTITION OF tmp FOR VALUES FROM (10) TO (20);
INSERT INTO tmp VALUES (1, 1, 1), (11, 2, 1);
CREATE UNIQUE INDEX CONCURRENTLY tmp_b ON tmp USING gunique (b);
SELECT c.relname, i.indisvalid, i.indisready, i.indisunique
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
WHERE c.relname LIKE 'tmp%' ORDER BY 1;
SELECT * FROM gunique_verify('tmp_b');
INSERT INTO tmp VALUES (12, 1);
INSERT INTO tmp VALUES (2, 2);
INSERT INTO tmp VALUES (12, 3);
-- a duplicate: refused at once, nothing left behind
CREATE UNIQUE INDEX CONCURRENTLY tmp_c ON tmp USING gunique (c);
\echo :LAST_ERROR_SQLSTATE
SELECT c.relname FROM pg_class c
WHERE c.relname LIKE 'tmp%' AND c.relkind IN ('i', 'I') ORDER BY 1;
DROP TABLE tmp;

--
-- A partitioned table without partitions: the top is valid at once.
-- Partitions added later get their leaves, checked.
--
CREATE TABLE empty (a int, b int) PARTITION BY RANGE (a);
CREATE UNIQUE INDEX CONCURRENTLY empty_b ON empty USING gunique (b);
SELECT * FROM members WHERE "table" LIKE 'empty%' ORDER BY index;
CREATE TABLE empty1 PARTITION OF empty FOR VALUES FROM (0) TO (10);
CREATE TABLE empty2 PARTITION OF empty FOR VALUES FROM (10) TO (20)
	PARTITION BY RANGE (a);
CREATE TABLE empty21 PARTITION OF empty2 FOR VALUES FROM (10) TO (15);
SELECT * FROM members WHERE "table" LIKE 'empty%' ORDER BY index;
INSERT INTO empty VALUES (1, 1), (11, 2);
INSERT INTO empty VALUES (12, 1);
INSERT INTO empty VALUES (2, 2);
SELECT * FROM gunique_verify('empty_b');

-- Three levels, default partitions, a partitioned partition without
-- partitions: every partitioned table's index is made in the first step,
-- every leaf's after.
CREATE TABLE m (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE m1 PARTITION OF m FOR VALUES FROM (0) TO (100) PARTITION BY RANGE (a);
CREATE TABLE m11 PARTITION OF m1 FOR VALUES FROM (0) TO (50) PARTITION BY LIST (b);
CREATE TABLE m111 PARTITION OF m11 FOR VALUES IN (1, 2, 3);
CREATE TABLE m112 PARTITION OF m11 DEFAULT;
CREATE TABLE m12 PARTITION OF m1 FOR VALUES FROM (50) TO (100);
CREATE TABLE m2 PARTITION OF m FOR VALUES FROM (100) TO (200) PARTITION BY RANGE (a);
CREATE TABLE m3 PARTITION OF m DEFAULT;
INSERT INTO m VALUES (1, 1), (2, 10), (60, 20), (300, 30);
CREATE UNIQUE INDEX CONCURRENTLY m_b ON m USING gunique (b);
SELECT * FROM members WHERE "table" LIKE 'm%' ORDER BY index;
SELECT * FROM gunique_verify('m_b');
INSERT INTO m VALUES (70, 10);
INSERT INTO m VALUES (500, 20);
CREATE TABLE m21 PARTITION OF m2 FOR VALUES FROM (100) TO (200);
INSERT INTO m VALUES (150, 1);
INSERT INTO m VALUES (150, 40);
SELECT * FROM gunique_verify('m_b');

-- ev, built concurrently, gains a partition: its leaf is made and checked,
-- and an attached table with a key held elsewhere is refused.
CREATE TABLE ev4 PARTITION OF ev FOR VALUES FROM (300) TO (400);
SELECT * FROM members WHERE "table" = 'ev4' ORDER BY index;
INSERT INTO ev VALUES (350, 20, 'refused');
INSERT INTO ev VALUES (350, 3000, 'new');
INSERT INTO ev VALUES (50, 3000, 'refused');
CREATE TABLE ev5 (day int, id int, email text, code int, active bool);
INSERT INTO ev5 VALUES (450, 3000, 'held by ev4');
ALTER TABLE ev ATTACH PARTITION ev5 FOR VALUES FROM (400) TO (500);
\echo :LAST_ERROR_SQLSTATE
UPDATE ev5 SET id = 3001;
ALTER TABLE ev ATTACH PARTITION ev5 FOR VALUES FROM (400) TO (500);
SELECT * FROM members WHERE "table" IN ('ev4', 'ev5') ORDER BY index;
SELECT * FROM gunique_verify('ev_id');

-- A valid index of many leaves, with its group filter, is attached under a
-- top made ON ONLY; then a table is attached below it, with a key its
-- filter lacks.  REINDEX INDEX CONCURRENTLY finishes the top: the group
-- filters of its members are forgotten first, so a key held by the
-- attached table is found.
CREATE TABLE gf (id int, r int, ts int) PARTITION BY LIST (r);
CREATE TABLE gf1 PARTITION OF gf FOR VALUES IN (1) PARTITION BY RANGE (ts);
DO $$ BEGIN FOR i IN 0..19 LOOP EXECUTE format('CREATE TABLE gf1_%s PARTITION OF gf1 FOR VALUES FROM (%s) TO (%s)', i, i * 100, i * 100 + 100); END LOOP; END $$;
CREATE TABLE gf2 PARTITION OF gf FOR VALUES IN (2);
INSERT INTO gf SELECT g, 1, g % 2000 FROM generate_series(1, 40000) g;
CREATE UNIQUE INDEX gf1_g ON gf1 USING gunique (id, r);
SELECT gunique_build_filters('gf1_g', true) > 0 AS built;
CREATE UNIQUE INDEX gf_top ON ONLY gf USING gunique (id, r);
ALTER INDEX gf_top ATTACH PARTITION gf1_g;
CREATE TABLE gfx (id int, r int, ts int);
INSERT INTO gfx VALUES (100001, 1, 2050);
ALTER TABLE gf1 ATTACH PARTITION gfx FOR VALUES FROM (2000) TO (2100);
REINDEX INDEX CONCURRENTLY gf_top;
SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE c.relname IN ('gf_top', 'gf1_g') ORDER BY 1;
INSERT INTO gf VALUES (100001, 1, 5);
SELECT tableoid::regclass, * FROM gf WHERE id = 100001;

-- REINDEX of a valid tree, INDEX or TABLE, CONCURRENTLY: it stays valid,
-- and a key held by another partition is still refused.
REINDEX INDEX CONCURRENTLY gf_top;
REINDEX TABLE CONCURRENTLY gf;
SELECT c.relname, i.indisvalid FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
 WHERE c.relname IN ('gf_top', 'gf1_g') ORDER BY 1;
INSERT INTO gf VALUES (100001, 1, 7);
SELECT * FROM gunique_verify('gf_top');

DROP SCHEMA gcc CASCADE;

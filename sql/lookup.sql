--
-- Lookups by a gunique key (lookupplan.c, lookup.c): a query that binds
-- every key column by equality reads only the partitions whose summaries
-- can hold the key, without planning, locking or opening the others.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA glook;
SET search_path = glook, public;

-- The first line of a query's plan.
CREATE FUNCTION top_node(query text) RETURNS text LANGUAGE plpgsql AS $$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
		RETURN line;
	END LOOP;
END $$;

-- How many lookups a query's plan has.
CREATE FUNCTION lookups_in_plan(query text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	line text;
	n int := 0;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
		IF line ~ 'GuniqueLookup' THEN
			n := n + 1;
		END IF;
	END LOOP;
	RETURN n;
END $$;

-- What a lookup read, from EXPLAIN ANALYZE.
CREATE FUNCTION lookup_counts(query text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query LOOP
		IF line ~ 'Partitions' THEN
			RETURN NEXT btrim(line);
		END IF;
	END LOOP;
END $$;

-- 20 partitions: the group's filter rules out most of them at once.
CREATE TABLE ev (day int, id bigint, note text) PARTITION BY RANGE (day);
DO $$
BEGIN
	FOR i IN 0..19 LOOP
		EXECUTE format('CREATE TABLE ev_%s PARTITION OF ev FOR VALUES FROM (%s) TO (%s)',
					   i, i * 10, i * 10 + 10);
	END LOOP;
END $$;
INSERT INTO ev SELECT i % 200, i * 3, 'n' || i FROM generate_series(0, 19999) i;
CREATE UNIQUE INDEX ev_id ON ev USING gunique (id);
ANALYZE ev;

EXPLAIN (COSTS OFF) SELECT * FROM ev WHERE id = 300;
SELECT tableoid::regclass, * FROM ev WHERE id = 300;
SELECT ctid = (SELECT ctid FROM ev_10 WHERE id = 300) AS same_ctid
  FROM ev WHERE id = 300;
SELECT * FROM ev WHERE id = 301;
SELECT * FROM ev WHERE 59997 = id;
-- a key of another integer type is cast to the column's
EXPLAIN (COSTS OFF) SELECT note FROM ev WHERE id = 600::int;
SELECT note FROM ev WHERE id = 600::int;
-- what it read: one partition for a key that exists, none for one that
-- does not
SELECT lookup_counts('SELECT * FROM ev WHERE id = 300');
SELECT lookup_counts('SELECT * FROM ev WHERE id = 301');
-- MIN and MAX over the key (which PostgreSQL may plan from a copy of the
-- query, as an ordered scan): not through the path, and right
SELECT max(id), min(id) FROM ev WHERE id = 15;
SELECT max(note) FROM ev WHERE id = 15 AND note = 'n5';
-- other clauses filter the row found
SELECT * FROM ev WHERE id = 300 AND note = 'n100';
SELECT * FROM ev WHERE id = 300 AND note = 'other';
-- a null key matches nothing, as "=" does
SELECT * FROM ev WHERE id = NULL::bigint;

-- Arrays and IN lists: each distinct key once, nulls skipped.
EXPLAIN (COSTS OFF) SELECT * FROM ev WHERE id IN (3, 6, 7, 3);
SELECT * FROM ev WHERE id IN (3, 6, 7, 3) ORDER BY id;
SELECT * FROM ev WHERE id = ANY (ARRAY[9, NULL, 12]::bigint[]) ORDER BY id;
SELECT * FROM ev WHERE id = ANY (NULL::bigint[]);

-- Prepared statements: the generic plan reads only what the key needs.
SET plan_cache_mode = force_generic_plan;
PREPARE q(bigint) AS SELECT note FROM ev WHERE id = $1;
EXPLAIN (COSTS OFF) EXECUTE q(30);
EXECUTE q(30);
EXECUTE q(31);
EXECUTE q(NULL);
PREPARE qa(bigint[]) AS SELECT id FROM ev WHERE id = ANY ($1) ORDER BY id;
EXECUTE qa('{30, 33, 34}');
RESET plan_cache_mode;

-- Joins, and a lookup on each side.
CREATE TABLE wanted (id bigint);
INSERT INTO wanted VALUES (90), (91);
EXPLAIN (COSTS OFF) SELECT w.id, e.note FROM wanted w JOIN ev e ON e.id = w.id WHERE e.id = 90;
SELECT w.id, e.note FROM wanted w JOIN ev e ON e.id = w.id WHERE e.id = 90;
SELECT a.note, b.note FROM ev a, ev b WHERE a.id = 3 AND b.id = 6;

-- Scroll cursors go backward over the rows found.
BEGIN;
DECLARE c SCROLL CURSOR FOR SELECT id FROM ev WHERE id IN (15, 18, 21);
FETCH ALL FROM c;
FETCH BACKWARD ALL FROM c;
FETCH ABSOLUTE 2 FROM c;
COMMIT;

-- The transaction's own changes, and rows that move between partitions.
BEGIN;
INSERT INTO ev VALUES (5, 1000000, 'mine');
SELECT tableoid::regclass, * FROM ev WHERE id = 1000000;
UPDATE ev SET day = 155 WHERE id = 1000000;
SELECT tableoid::regclass, * FROM ev WHERE id = 1000000;
ROLLBACK;
SELECT * FROM ev WHERE id = 1000000;
UPDATE ev SET day = 195 WHERE id = 303;
SELECT tableoid::regclass, * FROM ev WHERE id = 303;
DELETE FROM ev WHERE id = 306;
SELECT * FROM ev WHERE id = 306;

-- Serializable transactions search every partition (predicate locks must
-- be where a btree scan of each would leave them).
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT lookup_counts('SELECT * FROM ev WHERE id = 300');
COMMIT;

-- Partitions attached, detached and of another column order.
CREATE TABLE ev_x (note text, junk int, id bigint, day int);
ALTER TABLE ev_x DROP COLUMN junk;
INSERT INTO ev_x VALUES ('attached', 2000000, 205);
ALTER TABLE ev ATTACH PARTITION ev_x FOR VALUES FROM (200) TO (210);
SELECT tableoid::regclass, * FROM ev WHERE id = 2000000;
SELECT day, note FROM ev WHERE id IN (2000000, 300) ORDER BY id;
ALTER TABLE ev DETACH PARTITION ev_x;
SELECT * FROM ev WHERE id = 2000000;
DROP TABLE ev_x;

-- Two levels of partitions.
CREATE TABLE ev_sub PARTITION OF ev FOR VALUES FROM (300) TO (400)
	PARTITION BY LIST (note);
CREATE TABLE ev_sub_a PARTITION OF ev_sub FOR VALUES IN ('a');
CREATE TABLE ev_sub_b PARTITION OF ev_sub FOR VALUES IN ('b');
INSERT INTO ev VALUES (310, 3000000, 'b');
SELECT tableoid::regclass, * FROM ev WHERE id = 3000000;
EXPLAIN (COSTS OFF) SELECT * FROM ev_sub WHERE id = 3000000;
SELECT tableoid::regclass, * FROM ev_sub WHERE id = 3000000;
-- reading the lower table must not narrow what inserts into it probe: the
-- key 300 is in ev_10
INSERT INTO ev_sub VALUES (350, 300, 'b');
SELECT count(*) FROM ev WHERE id = 300;

-- Keys of several columns, expressions, and partial indexes.
CREATE TABLE acc (region int, tenant int, email text, active bool)
	PARTITION BY LIST (region);
CREATE TABLE acc_1 PARTITION OF acc FOR VALUES IN (1);
CREATE TABLE acc_2 PARTITION OF acc FOR VALUES IN (2);
CREATE TABLE acc_3 PARTITION OF acc FOR VALUES IN (3);
CREATE UNIQUE INDEX acc_tenant_email ON acc USING gunique (tenant, email);
CREATE UNIQUE INDEX acc_lower ON acc USING gunique (lower(email)) WHERE active;
INSERT INTO acc VALUES (1, 1, 'Ann@x', true), (2, 2, 'Ann@x', false),
	(3, 1, 'Bob@x', false), (3, 7, 'bob@X', true);
EXPLAIN (COSTS OFF) SELECT region FROM acc WHERE tenant = 2 AND email = 'Ann@x';
SELECT region FROM acc WHERE tenant = 2 AND email = 'Ann@x';
EXPLAIN (COSTS OFF) SELECT tenant FROM acc WHERE lower(email) = 'bob@x' AND active;
SELECT tenant FROM acc WHERE lower(email) = 'bob@x' AND active;

-- A value cast to the key's type may lose (text to name truncates to 63
-- bytes): the clause itself is checked again on the row found.
CREATE TABLE nm (part int, n name) PARTITION BY LIST (part);
CREATE TABLE nm_1 PARTITION OF nm FOR VALUES IN (1);
CREATE TABLE nm_2 PARTITION OF nm FOR VALUES IN (2);
INSERT INTO nm VALUES (1, repeat('a', 63));
CREATE UNIQUE INDEX nm_n ON nm USING gunique (n);
EXPLAIN (COSTS OFF) SELECT * FROM nm WHERE n = repeat('a', 70)::text;
SELECT count(*) FROM nm WHERE n = repeat('a', 70)::text;
SELECT count(*) FROM nm WHERE n = repeat('a', 63)::text;

-- Views, subqueries in FROM and WITH queries that the planner pulls up
-- into the query: the table they read is looked up as if named there.
CREATE VIEW ev_v AS SELECT id, note, day FROM ev;
CREATE VIEW ev_w AS SELECT id AS key, upper(note) AS loud FROM ev WHERE day < 150;
CREATE VIEW ev_vv AS SELECT * FROM ev_v;
EXPLAIN (COSTS OFF) SELECT * FROM ev_v WHERE id = 300;
SELECT * FROM ev_v WHERE id = 300;
SELECT lookup_counts('SELECT * FROM ev_v WHERE id = 300');
EXPLAIN (COSTS OFF) SELECT * FROM ev_w WHERE key = 300;
SELECT * FROM ev_w WHERE key = 300;
SELECT * FROM ev_w WHERE key = 510;	-- day 170: the view's own WHERE
SELECT top_node('SELECT * FROM ev_vv WHERE id = 300');
SELECT top_node('SELECT * FROM (SELECT * FROM ev) s WHERE id = 300');
SELECT top_node('WITH c AS (SELECT * FROM ev) SELECT * FROM c WHERE id = 300');
SELECT * FROM ev_vv WHERE id = ANY ('{300,303,301}') ORDER BY id;
SELECT a.id, b.note FROM ev_v a JOIN ev_vv b USING (id) WHERE a.id = 303;
-- on the inner side of a LEFT JOIN, a key in the join's condition
SELECT a.id, b.id FROM ev_v a LEFT JOIN ev_v b ON b.id = 306 AND b.id = a.id + 3
 WHERE a.id = 303;
-- EXISTS, NOT EXISTS and IN (SELECT ...) that the planner makes joins
-- (an uncorrelated EXISTS is planned apart, as an InitPlan, and reads
-- every partition)
CREATE TABLE probe_ids (id bigint);
INSERT INTO probe_ids VALUES (300), (301), (303);
SELECT lookups_in_plan('SELECT id FROM probe_ids p
 WHERE EXISTS (SELECT 1 FROM ev WHERE ev.id = 300 AND ev.note = ''n'' || p.id - 200)');
SELECT id FROM probe_ids p
 WHERE EXISTS (SELECT 1 FROM ev WHERE ev.id = 300 AND ev.note = 'n' || p.id - 200);
SELECT id FROM probe_ids p
 WHERE NOT EXISTS (SELECT 1 FROM ev WHERE ev.id = 300 AND ev.note = 'n' || p.id - 200)
 ORDER BY id;
SELECT lookups_in_plan('SELECT id FROM probe_ids p
 WHERE NOT EXISTS (SELECT 1 FROM ev WHERE ev.id = 300 AND ev.note = ''n'' || p.id - 200)');
SELECT lookups_in_plan('SELECT * FROM probe_ids WHERE id IN (SELECT id FROM ev_v WHERE id = 303)');
SELECT lookups_in_plan('SELECT id FROM probe_ids WHERE EXISTS (SELECT 1 FROM ev WHERE id = 300)');
SELECT * FROM probe_ids WHERE id IN (SELECT id FROM ev_v WHERE id = 303);
PREPARE rv(bigint) AS SELECT key, loud FROM ev_w WHERE key = $1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE rv(300);
EXECUTE rv(300);
EXECUTE rv(303);
RESET plan_cache_mode;
DEALLOCATE rv;
-- a view the planner does not pull up, a security barrier, ONLY beside
-- the view, and an aggregate without GROUP BY: planned as PostgreSQL
-- plans them, with the same rows
CREATE VIEW ev_d AS SELECT DISTINCT id, note FROM ev;
CREATE VIEW ev_sb WITH (security_barrier) AS SELECT id, note FROM ev;
SELECT top_node('SELECT * FROM ev_d WHERE id = 300');
SELECT * FROM ev_d WHERE id = 300;
SELECT top_node('SELECT * FROM ev_sb WHERE id = 300');
SELECT * FROM ev_sb WHERE id = 300;
SELECT * FROM ev_v a JOIN ONLY ev b USING (id) WHERE a.id = 300;
SELECT top_node('SELECT count(*) FROM ev_v WHERE id = 300');
SELECT count(*) FROM ev_v WHERE id = 300;

-- Forms that must not use the path.
SET enable_seqscan = off;
-- a key column not bound
SELECT top_node('SELECT * FROM acc WHERE tenant = 2');
-- the partial index's predicate not implied
SELECT top_node('SELECT * FROM acc WHERE lower(email) = ''bob@x''');
-- not an equality, or not with a fixed value
SELECT top_node('SELECT * FROM ev WHERE id < 3');
SELECT top_node('SELECT * FROM ev WHERE id = 3 OR id = 6');
SELECT top_node('SELECT * FROM ev WHERE id = day');
SELECT top_node('SELECT * FROM ev WHERE id = (random() * 10)::bigint');
-- the partition key bound too: PostgreSQL prunes to one partition
SELECT top_node('SELECT * FROM ev WHERE id = 300 AND day = 100');
-- chosen on cost: PostgreSQL's plan where its pruning at planning keeps one
-- partition or none, the lookup where it keeps more
SELECT lookups_in_plan('SELECT * FROM ev WHERE id = 300 AND day >= 100 AND day < 105');
SELECT * FROM ev WHERE id = 300 AND day >= 100 AND day < 105;
SELECT lookups_in_plan('SELECT * FROM ev WHERE id = 300 AND day >= 95 AND day < 105');
SELECT * FROM ev WHERE id = 300 AND day >= 95 AND day < 105;
SELECT lookups_in_plan('SELECT * FROM ev WHERE id = 300 AND day IN (3, 100)');
SELECT lookups_in_plan('SELECT * FROM ev WHERE id = 300 AND day < 0');
SELECT lookups_in_plan('SELECT * FROM ev WHERE id = ANY (ARRAY[300, 303]) AND day BETWEEN 100 AND 101');
-- a generic plan's parameter of the partition key prunes only at
-- execution, after every partition was planned and locked: the lookup
PREPARE evday(int) AS SELECT * FROM ev WHERE id = 300 AND day = $1;
SET plan_cache_mode = force_generic_plan;
SELECT lookups_in_plan('EXECUTE evday(100)');
EXECUTE evday(100);
RESET plan_cache_mode;
DEALLOCATE evday;
-- rows to lock or change, ONLY, a system column of the partition
SELECT top_node('SELECT * FROM ev WHERE id = 300 FOR UPDATE');
SELECT top_node('UPDATE ev SET note = ''x'' WHERE id = 300');
SELECT top_node('DELETE FROM ev WHERE id = 300');
SELECT top_node('SELECT * FROM ONLY ev WHERE id = 300');
SELECT top_node('SELECT xmin FROM ev WHERE id = 300');
-- an index that is not valid
CREATE TABLE half (p int, k int) PARTITION BY RANGE (p);
CREATE TABLE half_1 PARTITION OF half FOR VALUES FROM (0) TO (10);
CREATE UNIQUE INDEX half_k ON ONLY half USING gunique (k);
SELECT top_node('SELECT * FROM half WHERE k = 1');
-- turned off
SET gunique.enable_lookup = off;
SELECT top_node('SELECT * FROM ev WHERE id = 300');
RESET gunique.enable_lookup;
RESET enable_seqscan;

-- Row-level security and privileges are those of a scan of the table.
CREATE ROLE glook_reader;
GRANT USAGE ON SCHEMA glook TO glook_reader;
GRANT SELECT ON ev TO glook_reader;
ALTER TABLE ev ENABLE ROW LEVEL SECURITY;
CREATE POLICY even_days ON ev FOR SELECT USING (day % 2 = 0);
CREATE VIEW ev_inv WITH (security_invoker) AS SELECT id, day FROM ev;
GRANT SELECT ON ev_v, ev_inv TO glook_reader;
SET ROLE glook_reader;
EXPLAIN (COSTS OFF) SELECT * FROM ev WHERE id = 300;
SELECT id, day FROM ev WHERE id = 300;
SELECT id, day FROM ev WHERE id = 3;
SELECT * FROM ev_0 WHERE id = 300;
SELECT * FROM acc WHERE tenant = 2 AND email = 'Ann@x';
-- through views: as the view's owner, or the reader's with
-- security_invoker
SELECT id, day FROM ev_v WHERE id = 3;
SELECT id, day FROM ev_inv WHERE id = 3;
SELECT id, day FROM ev_inv WHERE id = 300;
EXPLAIN (COSTS OFF) SELECT id, day FROM ev_inv WHERE id = 300;
RESET ROLE;
DROP POLICY even_days ON ev;
ALTER TABLE ev DISABLE ROW LEVEL SECURITY;

-- Dropping the index plans a prepared statement again.
PREPARE r AS SELECT region FROM acc WHERE tenant = 1 AND email = 'Bob@x';
EXECUTE r;
DROP INDEX acc_tenant_email;
EXPLAIN (COSTS OFF) EXECUTE r;
EXECUTE r;

DROP SCHEMA glook CASCADE;
DROP ROLE glook_reader;

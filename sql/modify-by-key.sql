--
-- UPDATE and DELETE by a gunique key (keyprune.c): planned for the
-- partition that holds the key, and checked at executor start that the
-- row the statement's snapshot sees is in a partition the plan modifies;
-- planned again, as PostgreSQL plans them, if not.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gmod;
SET search_path = gmod, public;
SET enable_seqscan = off;
SET enable_bitmapscan = off;

-- How many partitions the plan that ran modified (EXPLAIN ANALYZE runs it).
CREATE FUNCTION parts_modified(query text) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	line text;
	n int := 0;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) ' || query LOOP
		IF line ~ '^\s+(Update|Delete) on ' THEN
			n := n + 1;
		END IF;
	END LOOP;
	RETURN n;
END $$;

-- Does the plan carry the key check?
CREATE FUNCTION checked(query text) RETURNS bool LANGUAGE plpgsql AS $$
DECLARE
	line text;
BEGIN
	FOR line IN EXECUTE 'EXPLAIN (COSTS OFF) ' || query LOOP
		IF line ~ 'GuniqueKeyCheck' THEN
			RETURN true;
		END IF;
	END LOOP;
	RETURN false;
END $$;

CREATE TABLE t (id bigint, created date, v int) PARTITION BY RANGE (created);
CREATE TABLE t_jan PARTITION OF t FOR VALUES FROM ('2024-01-01') TO ('2024-02-01');
CREATE TABLE t_feb PARTITION OF t FOR VALUES FROM ('2024-02-01') TO ('2024-03-01');
CREATE TABLE t_mar PARTITION OF t FOR VALUES FROM ('2024-03-01') TO ('2024-04-01');
CREATE UNIQUE INDEX t_id ON t USING gunique (id);
INSERT INTO t SELECT i, date '2024-01-01' + (i % 90), 0 FROM generate_series(1, 900) i;
ANALYZE t;

-- The key's partition only, and its constraint, which pruned the others,
-- is not a filter.
EXPLAIN (COSTS OFF) UPDATE t SET v = v + 1 WHERE id = 5;
UPDATE t SET v = v + 1 WHERE id = 5 RETURNING tableoid::regclass, *;
EXPLAIN (COSTS OFF) DELETE FROM t WHERE id = 45 AND v = 0;
DELETE FROM t WHERE id = 45 AND v = 0 RETURNING tableoid::regclass, *;
-- a key no partition holds: none
EXPLAIN (COSTS OFF) UPDATE t SET v = 1 WHERE id = 100000;
UPDATE t SET v = 1 WHERE id = 100000;
UPDATE t SET v = 1 WHERE id = NULL;
-- other clauses stay, a join too
UPDATE t SET v = v + 1 WHERE id = 6 AND v = 1;
UPDATE t SET v = t.v + x.d FROM (VALUES (10)) x(d) WHERE t.id = 6
	RETURNING tableoid::regclass, t.*;
-- a value of another type, cast as the index compares
UPDATE t SET v = v + 1 WHERE id = 7::int RETURNING tableoid::regclass, *;

-- The statement's triggers are the table's, as before.
CREATE FUNCTION note() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	RAISE NOTICE '% % % on %', TG_WHEN, TG_LEVEL, TG_OP, TG_TABLE_NAME;
	RETURN NULL;
END $$;
CREATE TRIGGER t_stmt AFTER UPDATE OR DELETE ON t
	FOR EACH STATEMENT EXECUTE FUNCTION note();
CREATE TRIGGER t_row AFTER UPDATE ON t
	FOR EACH ROW EXECUTE FUNCTION note();
UPDATE t SET v = v + 1 WHERE id = 8;
DELETE FROM t WHERE id = 100000;
DROP TRIGGER t_stmt ON t;
DROP TRIGGER t_row ON t;

-- An UPDATE of the partition key moves the row, as before.
UPDATE t SET created = '2024-03-20' WHERE id = 9 RETURNING tableoid::regclass, *;
UPDATE t SET v = 9 WHERE id = 9 RETURNING tableoid::regclass, *;

-- A cached plan made for a constant, whose row has moved since: the check
-- finds the row outside the plan, which is made again for the execution,
-- for the partition the row is in now.
PREPARE mv AS UPDATE t SET v = v + 10 WHERE id = 11 RETURNING tableoid::regclass, *;
EXECUTE mv;
UPDATE t SET created = '2024-03-02' WHERE id = 11;
EXECUTE mv;
SELECT parts_modified('EXECUTE mv');
SELECT * FROM t WHERE id = 11;
-- deleted and inserted into another partition
PREPARE dl AS DELETE FROM t WHERE id = 12 RETURNING tableoid::regclass, *;
SELECT checked('EXECUTE dl');
DELETE FROM t WHERE id = 12;
INSERT INTO t VALUES (12, '2024-02-12', 0);
EXECUTE dl;
-- a key absent when planned, inserted since
PREPARE ins AS UPDATE t SET v = 1 WHERE id = 5000 RETURNING tableoid::regclass, *;
EXECUTE ins;
INSERT INTO t VALUES (5000, '2024-03-30', 0);
EXECUTE ins;
SELECT parts_modified('EXECUTE ins');
DEALLOCATE ALL;

-- Parameters: custom and generic plans alike are planned as a stub that
-- modifies no partition; as each execution starts, the key's row is found
-- and the stub replaced by the plan kept for the row's partition
-- (keyplan.c), which EXPLAIN shows.
PREPARE p(bigint) AS UPDATE t SET v = v + 1 WHERE id = $1 RETURNING tableoid::regclass, *;
SET plan_cache_mode = force_custom_plan;
EXPLAIN (COSTS OFF) EXECUTE p(20);
EXECUTE p(20);
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE p(21);
EXECUTE p(21);
SELECT parts_modified('EXECUTE p(46)');
-- a key no row has: the stub, which modifies nothing
EXPLAIN (COSTS OFF) EXECUTE p(1000000);
EXECUTE p(1000000);
-- only the key's partition is opened for writing
BEGIN;
EXECUTE p(22);
SELECT relation::regclass FROM pg_locks
WHERE pid = pg_backend_pid() AND locktype = 'relation' AND
	mode = 'RowExclusiveLock' ORDER BY 1;
COMMIT;
RESET plan_cache_mode;
EXECUTE p(22); EXECUTE p(23); EXECUTE p(24); EXECUTE p(25); EXECUTE p(26);
SELECT parts_modified('EXECUTE p(27)');
DEALLOCATE p;
-- in a function
CREATE FUNCTION bump(k bigint) RETURNS regclass LANGUAGE plpgsql AS $$
DECLARE
	r regclass;
BEGIN
	UPDATE t SET v = v + 1 WHERE id = k RETURNING tableoid::regclass INTO r;
	RETURN r;
END $$;
SELECT bump(i) FROM generate_series(30, 37) i;
-- a custom plan is replaced by the partition's generic plan, which
-- evaluates what folding $2 = 0 would have skipped, as PostgreSQL's own
-- generic plan does
SET plan_cache_mode = force_custom_plan;
PREPARE e(bigint, int) AS UPDATE t SET v = v WHERE id = $1 AND (v / $2 > 1 OR $2 = 0);
EXECUTE e(60, 0);
SET gunique.enable_modify_by_key = off;
PREPARE e2(bigint, int) AS UPDATE t SET v = v WHERE id = $1 AND (v / $2 > 1 OR $2 = 0);
EXECUTE e2(60, 0);
RESET gunique.enable_modify_by_key;
-- a custom plan is the stub, planned once without the values: what
-- folding them would fail on (1 / $2 with $2 = 0) fails only where
-- PostgreSQL's generic plan fails, as a row is updated
PREPARE z(bigint, int) AS UPDATE t SET v = v + 1 / $2 WHERE id = $1 RETURNING id;
EXECUTE z(1000000, 0);
EXECUTE z(60, 0);
EXECUTE z(60, 1);
-- what the stub and the partitions' plans were made from comes back when
-- the transaction that changed the table rolls back; so do they
BEGIN;
ALTER TABLE t DETACH PARTITION t_mar;
EXECUTE z(61, 1);
ROLLBACK;
EXECUTE z(61, 1);
-- a function folded at planning leaves no trace in the plans: replacing
-- it gives up the stub and the partitions' plans, whose query depends on it
CREATE FUNCTION pick() RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT true';
PREPARE w(bigint, bigint) AS UPDATE t SET v = v + 1
	WHERE id = CASE WHEN pick() THEN $1 ELSE $2 END RETURNING id;
EXECUTE w(70, 15);
CREATE OR REPLACE FUNCTION pick() RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT false';
EXECUTE w(70, 15);
EXECUTE w(15, 70);
SET plan_cache_mode = force_generic_plan;
EXECUTE w(70, 15);
CREATE OR REPLACE FUNCTION pick() RETURNS bool LANGUAGE sql IMMUTABLE AS 'SELECT true';
EXECUTE w(70, 15);
DEALLOCATE w;
DROP FUNCTION pick();
DEALLOCATE z;
RESET plan_cache_mode;
DEALLOCATE e;
DEALLOCATE e2;
-- many distinct statements in one transaction: the plans kept for them
-- are evicted (64 statements at most, each with its stub and here one
-- partition's plan) and freed once no executor runs them, not at the
-- transaction's end
DO $$
BEGIN
	FOR i IN 1 .. 300 LOOP
		EXECUTE format('UPDATE t SET v = v WHERE id = $1 AND v > %s', -i)
		USING (i % 90 + 1)::bigint;
	END LOOP;
END $$;
SELECT count(*) FILTER (WHERE name = 'gunique key plan family') BETWEEN 1 AND 64 AND
	count(*) FILTER (WHERE name = 'gunique key plan') BETWEEN 1 AND 128 AS bounded
FROM pg_backend_memory_contexts WHERE name LIKE 'gunique key plan%';

-- Not pruned: the setting off, the partition key bound as well (then
-- PostgreSQL prunes), a key in an array, a serializable transaction,
-- row-level security.
SET gunique.enable_modify_by_key = off;
SELECT checked('UPDATE t SET v = 0 WHERE id = 5');
RESET gunique.enable_modify_by_key;
EXPLAIN (COSTS OFF) UPDATE t SET v = 0 WHERE id = 5 AND created = '2024-01-06';
SELECT checked('UPDATE t SET v = 0 WHERE id = ANY (ARRAY[5, 6])');
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT checked('UPDATE t SET v = 0 WHERE id = 5');
UPDATE t SET v = v + 1 WHERE id = 5 RETURNING tableoid::regclass, *;
COMMIT;
-- a cached plan made outside a serializable transaction, run in one: made
-- again, as PostgreSQL plans it
PREPARE s AS UPDATE t SET v = v + 1 WHERE id = 5 RETURNING tableoid::regclass, *;
EXECUTE s;
BEGIN ISOLATION LEVEL SERIALIZABLE;
SELECT parts_modified('EXECUTE s');
COMMIT;
DEALLOCATE s;
CREATE ROLE gmod_user;
GRANT USAGE ON SCHEMA gmod TO gmod_user;
GRANT SELECT, UPDATE ON t TO gmod_user;
ALTER TABLE t ENABLE ROW LEVEL SECURITY;
CREATE POLICY t_low ON t USING (id < 100);
SET ROLE gmod_user;
SELECT checked('UPDATE t SET v = 0 WHERE id = 5');
UPDATE t SET v = v + 1 WHERE id = 5 RETURNING tableoid::regclass, *;
UPDATE t SET v = v + 1 WHERE id = 500 RETURNING tableoid::regclass, *;
RESET ROLE;
ALTER TABLE t DISABLE ROW LEVEL SECURITY;
DROP POLICY t_low ON t;
REVOKE ALL ON t FROM gmod_user;
REVOKE ALL ON SCHEMA gmod FROM gmod_user;
DROP ROLE gmod_user;

-- Partitioned by hash, or a row in a default partition: PostgreSQL's
-- pruning cannot use their constraints, so the plan is PostgreSQL's.
CREATE TABLE h (id int, k int) PARTITION BY HASH (k);
CREATE TABLE h_0 PARTITION OF h FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE h_1 PARTITION OF h FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE UNIQUE INDEX ON h USING gunique (id);
INSERT INTO h SELECT i, i FROM generate_series(1, 10) i;
SELECT checked('UPDATE h SET k = k WHERE id = 3');
UPDATE h SET k = k + 2 WHERE id = 3 RETURNING tableoid::regclass, *;
CREATE TABLE t_rest PARTITION OF t DEFAULT;
INSERT INTO t VALUES (6000, '2025-01-01', 0);
SELECT checked('UPDATE t SET v = 1 WHERE id = 6000');
UPDATE t SET v = 1 WHERE id = 6000 RETURNING tableoid::regclass, *;
-- a row in a range partition beside the default one
EXPLAIN (COSTS OFF) UPDATE t SET v = 1 WHERE id = 5;

-- Two levels, list over range: the sub-partitioned table keeps the
-- constraint to prune its own partitions, so its leaf shows it.
CREATE TABLE m (tenant text, id int, created date, v int) PARTITION BY LIST (tenant);
CREATE TABLE m_a PARTITION OF m FOR VALUES IN ('a') PARTITION BY RANGE (created);
CREATE TABLE m_a_1 PARTITION OF m_a FOR VALUES FROM ('2024-01-01') TO ('2024-07-01');
CREATE TABLE m_a_2 PARTITION OF m_a FOR VALUES FROM ('2024-07-01') TO ('2025-01-01');
CREATE TABLE m_b PARTITION OF m FOR VALUES IN ('b', 'c');
CREATE UNIQUE INDEX ON m USING gunique (id);
INSERT INTO m SELECT CASE WHEN i % 3 = 0 THEN 'b' ELSE 'a' END, i,
	date '2024-01-01' + i, 0 FROM generate_series(1, 300) i;
EXPLAIN (COSTS OFF) UPDATE m SET v = 1 WHERE id = 200;
UPDATE m SET v = 1 WHERE id = 200 RETURNING tableoid::regclass, *;
EXPLAIN (COSTS OFF) DELETE FROM m WHERE id = 3;
DELETE FROM m WHERE id = 3 RETURNING tableoid::regclass, *;
-- the sub-partitioned table itself, by the same key
UPDATE m_a SET v = 2 WHERE id = 200 RETURNING tableoid::regclass, *;

-- A key of two columns, one an expression: all bound, or not pruned.
CREATE TABLE e (tenant int, email text, created date) PARTITION BY RANGE (created);
CREATE TABLE e_1 PARTITION OF e FOR VALUES FROM ('2024-01-01') TO ('2024-07-01');
CREATE TABLE e_2 PARTITION OF e FOR VALUES FROM ('2024-07-01') TO ('2025-01-01');
CREATE UNIQUE INDEX ON e USING gunique (tenant, lower(email));
INSERT INTO e SELECT i % 5, 'U' || i || '@x', date '2024-01-01' + i FROM generate_series(1, 300) i;
SELECT checked($$DELETE FROM e WHERE tenant = 1 AND lower(email) = 'u201@x'$$);
DELETE FROM e WHERE tenant = 1 AND lower(email) = 'u201@x' RETURNING tableoid::regclass, *;
SELECT checked($$DELETE FROM e WHERE lower(email) = 'u202@x'$$);

-- A value whose cast may fail is not pruned by: the plan compares it with
-- the cross-type operator, which does not fail.
CREATE TABLE ts (at timestamp, d date) PARTITION BY RANGE (d);
CREATE TABLE ts_1 PARTITION OF ts FOR VALUES FROM ('2024-01-01') TO ('2025-01-01');
CREATE UNIQUE INDEX ON ts USING gunique (at);
INSERT INTO ts VALUES ('2024-01-05', '2024-01-05');
SELECT checked($$DELETE FROM ts WHERE at = '5000000-01-01'::date$$);
DELETE FROM ts WHERE at = '5000000-01-01'::date;
DELETE FROM ts WHERE at = '2024-01-05'::date RETURNING *;
-- one that cannot fail is
SELECT checked($$UPDATE t SET v = 0 WHERE id = 5::int2$$);

SELECT gunique_verify('t_id');
DROP SCHEMA gmod CASCADE;

--
-- An UPDATE that keeps its key (keepkey.c): a non-HOT UPDATE inserts the
-- row's new version with the key its old version had.  Own leaf proves
-- that no other partition needs a search, but only when the tuple being
-- inserted is the very new version of a row own leaf held with that key:
-- a BEFORE trigger that changes the key, a row moved in from another
-- partition, a subtransaction rolled back must all still be probed.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gkeep;
SET search_path = gkeep, public;

-- 20 partitions: a group with a group filter, probed light
CREATE TABLE t (p int, k bigint, v int, note text) PARTITION BY RANGE (p);
DO $$
BEGIN
	FOR i IN 0..19 LOOP
		EXECUTE format('CREATE TABLE t_%s PARTITION OF t FOR VALUES FROM (%s) TO (%s)',
					   i, i * 100, i * 100 + 100);
	END LOOP;
END $$;
CREATE UNIQUE INDEX t_k_key ON t USING gunique (k);
CREATE INDEX t_v_idx ON t (v);		-- an UPDATE of v is never HOT
INSERT INTO t SELECT g % 2000, (g * 7919) % 100003, g, 'row' FROM generate_series(0, 3999) g;

CREATE FUNCTION probes() RETURNS TABLE (inserts bigint, unprobed bigint,
										partitions_probed bigint)
LANGUAGE sql AS $$
	SELECT sum(inserts)::bigint, sum(inserts_unprobed)::bigint,
		   sum(partitions_probed)::bigint
	FROM gunique_stat_probes WHERE partition::text LIKE 't\_%'
$$;

-- Non-HOT UPDATEs that keep random keys: own partition searched (the proof), no other.
SELECT gunique_probe_stats_reset();
UPDATE t SET v = v + 10000;
SELECT * FROM probes();

-- SET k = k: the executor does not call the key unchanged; probed, and fine.
SELECT gunique_probe_stats_reset();
UPDATE t SET k = k, v = v + 1 WHERE p < 100;
SELECT inserts, unprobed FROM probes();

-- A key that changes is probed: another partition holds 7919.
UPDATE t SET k = 7919 WHERE k = (SELECT min(k) FROM t WHERE p = 1200);

-- A BEFORE trigger that changes the key behind the executor's back: the
-- executor says the key is unchanged, the proof does not agree.
CREATE FUNCTION steal_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.k := 7919;
	RETURN NEW;
END $$;
CREATE TRIGGER steal BEFORE UPDATE ON t_5 FOR EACH ROW
	WHEN (NEW.note = 'steal') EXECUTE FUNCTION steal_key();
UPDATE t SET v = v + 1, note = 'steal' WHERE p = 510;
-- The same, where own leaf holds the stolen key in a row this transaction
-- deleted (or moved away) after putting the key in another partition: the
-- deleted row's xmax is this transaction's, but it was not updated into
-- the row being inserted.
CREATE OR REPLACE FUNCTION steal_key() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	NEW.k := 424242;
	RETURN NEW;
END $$;
INSERT INTO t VALUES (520, 424242, 0, 'victim');
BEGIN;
DELETE FROM t WHERE k = 424242;
INSERT INTO t VALUES (1520, 424242, 0, 'elsewhere');
UPDATE t SET v = v + 1, note = 'steal'
	WHERE k = (SELECT min(k) FROM t WHERE p = 510);
ROLLBACK;
BEGIN;
UPDATE t SET p = 1520 WHERE k = 424242;
UPDATE t SET v = v + 1, note = 'steal'
	WHERE k = (SELECT min(k) FROM t WHERE p = 510);
ROLLBACK;
DELETE FROM t WHERE k = 424242;
DROP TRIGGER steal ON t_5;

-- A row moved to another partition, then updated there, and moved back:
-- its key stays unique, and the one left behind is not taken for it.
BEGIN;
SELECT min(k) AS moved FROM t WHERE p = 1 \gset
UPDATE t SET p = 1901 WHERE k = :moved;
UPDATE t SET v = v + 1 WHERE k = :moved;
INSERT INTO t VALUES (2, :moved, 0, 'dup');		-- refused
ROLLBACK;
BEGIN;
UPDATE t SET p = 1901 WHERE k = :moved;
UPDATE t SET p = 1 WHERE k = :moved;
UPDATE t SET v = v + 1 WHERE k = :moved;
SAVEPOINT a;
INSERT INTO t VALUES (1902, :moved, 0, 'dup');	-- refused
ROLLBACK TO a;
COMMIT;
SELECT p, k = :moved AS same FROM t WHERE k = :moved;

-- Savepoints: an UPDATE rolled back to a savepoint, then done again.
BEGIN;
SAVEPOINT a;
UPDATE t SET v = v + 1 WHERE k = :moved;
ROLLBACK TO a;
UPDATE t SET v = v + 1 WHERE k = :moved;
SAVEPOINT b;
UPDATE t SET v = v + 1 WHERE k = :moved;
RELEASE b;
UPDATE t SET v = v + 1 WHERE k = :moved;
SAVEPOINT c;
INSERT INTO t VALUES (1555, :moved, 0, 'dup');	-- refused
ROLLBACK TO c;
COMMIT;

-- A key deleted, then inserted elsewhere, then the survivor updated.
BEGIN;
DELETE FROM t WHERE k = :moved;
INSERT INTO t VALUES (1777, :moved, 0, 'new');
UPDATE t SET v = v + 1 WHERE k = :moved;
COMMIT;
SELECT p, note FROM t WHERE k = :moved;
INSERT INTO t VALUES (1, :moved, 0, 'dup');		-- refused

-- Nothing duplicated, and the audit agrees.
SELECT count(*) = count(DISTINCT k) AS unique_keys FROM t;
SELECT * FROM gunique_verify('t_k_key');

DROP SCHEMA gkeep CASCADE;

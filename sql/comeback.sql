--
-- Keys that come back: a key inserted and rolled back, or deleted, stays in
-- its group's filter, so the filter cannot rule it out.  In a group of 64
-- partitions or more the filter tags each key by its partition, and only
-- the partitions of the key's tags and subtags are looked at (src/README,
-- invariant 6): every duplicate must still be found, wherever it is.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gcome;
SET search_path = gcome, public;

CREATE TABLE t (p int, k bigint) PARTITION BY RANGE (p);
DO $$
BEGIN
	FOR i IN 0..79 LOOP
		EXECUTE format('CREATE TABLE t_%s PARTITION OF t FOR VALUES FROM (%s) TO (%s)',
					   i, i * 100, i * 100 + 100);
	END LOOP;
END $$;
-- random keys: every partition's range spans them all
INSERT INTO t SELECT g % 8000, (g::bigint * 7919) % 1000003
FROM generate_series(0, 15999) g WHERE g % 5 <> 0;
CREATE UNIQUE INDEX t_k_key ON t USING gunique (k);
CREATE TABLE comeback AS
SELECT g % 8000 AS p, (g::bigint * 7919) % 1000003 AS k
FROM generate_series(0, 15999) g WHERE g % 5 = 0;

CREATE FUNCTION probes() RETURNS TABLE (inserts bigint, probed bigint,
										filtered bigint)
LANGUAGE sql AS $$
	SELECT sum(inserts)::bigint, sum(partitions_probed)::bigint,
		   sum(partitions_filtered)::bigint
	FROM gunique_stat_probes WHERE partition::text LIKE 't\_%'
$$;

-- Inserted, rolled back, inserted again: each key is searched for in its
-- own partition (which holds the dead entry) by nbtree's own check only,
-- and rarely anywhere else.
BEGIN;
INSERT INTO t SELECT * FROM comeback;
ROLLBACK;

-- Such keys lock no other partition: the group's filter tells each key's
-- partition by its tag and its subtag (invariant 6).  Looking at every
-- partition of a key's tag (one of 64) would lock about 19 of the 40
-- partitions not inserted into.
BEGIN;
INSERT INTO t SELECT DISTINCT ON (p) p, k FROM comeback WHERE p % 200 = 0;
SELECT count(*) < 6 AS few_locked
FROM pg_locks l JOIN pg_inherits i ON i.inhrelid = l.relation
WHERE i.inhparent = 't'::regclass AND l.pid = pg_backend_pid() AND
	  l.mode = 'AccessShareLock' AND
	  NOT EXISTS (SELECT FROM pg_locks w
				  WHERE w.relation = l.relation AND w.pid = l.pid AND
						w.mode = 'RowExclusiveLock');
ROLLBACK;
SELECT gunique_probe_stats_reset();
INSERT INTO t SELECT * FROM comeback;
SELECT inserts, probed < inserts * 0.2 AS few_searched,
	   filtered > inserts * 70 AS most_ruled_out
FROM probes();

-- Every key, tried in another partition, is refused.
CREATE FUNCTION try_elsewhere(shift int) RETURNS bigint
LANGUAGE plpgsql AS $$
DECLARE
	r record;
	refused bigint := 0;
BEGIN
	FOR r IN SELECT p, k FROM comeback LOOP
		BEGIN
			INSERT INTO t VALUES ((r.p + shift) % 8000, r.k);
		EXCEPTION WHEN unique_violation THEN
			refused := refused + 1;
		END;
	END LOOP;
	RETURN refused;
END $$;
SELECT try_elsewhere(100) AS refused, count(*) AS keys FROM comeback;
SELECT try_elsewhere(4100) AS refused, count(*) AS keys FROM comeback;

-- Deleted, then taken by another partition, then refused everywhere else.
DELETE FROM t WHERE k IN (SELECT k FROM comeback);
INSERT INTO t SELECT (p + 200) % 8000, k FROM comeback;
SELECT try_elsewhere(0) AS refused, count(*) AS keys FROM comeback;
SELECT try_elsewhere(300) AS refused, count(*) AS keys FROM comeback;

SELECT count(*) = count(DISTINCT k) AS unique_keys FROM t;
SELECT * FROM gunique_verify('t_k_key');

DROP SCHEMA gcome CASCADE;

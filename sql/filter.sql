--
-- Key filters: with keys that do not follow the partitioning, a probe rules
-- a partition out by a bloom filter of its keys.  A filter must hold every
-- key of its leaf, whatever adds keys to the leaf or rebuilds it, or a
-- duplicate would slip through.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gfil;
SET search_path = gfil, public;
SHOW gunique.filter_memory;

-- Is every row of the sample (a VALUES row in column v) refused?
CREATE FUNCTION refused(tab regclass, sample text) RETURNS text
LANGUAGE plpgsql AS $$
DECLARE
	r record;
	tried int := 0;
	n int := 0;
BEGIN
	FOR r IN EXECUTE sample LOOP
		tried := tried + 1;
		BEGIN
			EXECUTE format('INSERT INTO %s VALUES %s', tab, r.v);
		EXCEPTION WHEN unique_violation THEN
			n := n + 1;
		END;
	END LOOP;
	RETURN format('%s of %s refused', n, tried);
END
$$;

-- Wait for the background worker to build what was asked for.
CREATE FUNCTION wait_for_builds() RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 1 .. 600 LOOP
		IF NOT EXISTS (SELECT FROM gunique_filter_builds() b
					   JOIN pg_database d ON d.oid = b.database
					   WHERE d.datname = current_database()) THEN
			RETURN true;
		END IF;
		PERFORM pg_sleep(0.05);
	END LOOP;
	RETURN false;
END
$$;

-- Random keys into four partitions, in random partition order, from an
-- empty index: the inserts ask for filters on the way, and for bigger ones
-- as the partitions outgrow them, and the background worker builds them
-- while the inserts go on.
CREATE TABLE t (a int, b bigint) PARTITION BY RANGE (a);
CREATE TABLE t1 PARTITION OF t FOR VALUES FROM (0) TO (10000);
CREATE TABLE t2 PARTITION OF t FOR VALUES FROM (10000) TO (20000);
CREATE TABLE t3 PARTITION OF t FOR VALUES FROM (20000) TO (30000);
CREATE TABLE t4 PARTITION OF t FOR VALUES FROM (30000) TO (40000);
CREATE UNIQUE INDEX t_b_key ON t USING gunique (b);
SELECT gunique_probe_stats_reset();
INSERT INTO t
SELECT g, (g::bigint * 7919) % 40009 FROM generate_series(0, 39999) g
ORDER BY (g::bigint * 48271) % 40009;
SELECT sum(conflicts) AS conflicts
  FROM gunique_stat_probes WHERE partition IN ('t1'::regclass, 't2', 't3', 't4');
-- every key is still refused from another partition
SELECT refused('t', 'SELECT format(''(%s, %s)'', (a + 10000) % 40000, b) AS v FROM t WHERE a % 53 = 0');
-- once the filters are built (what the worker has not built yet is built
-- here), new keys search almost no other partition
SELECT wait_for_builds();
SELECT gunique_build_filters('t_b_key') >= 0 AS built;
SELECT gunique_probe_stats_reset();
INSERT INTO t SELECT g, 1000000 + g FROM generate_series(0, 39999, 37) g;
SELECT sum(partitions_filtered + partitions_skipped) > 3000 AS ruled_out,
	   sum(partitions_probed) < 100 AS few_searched,
	   sum(conflicts) AS conflicts
  FROM gunique_stat_probes WHERE partition IN ('t1'::regclass, 't2', 't3', 't4');
SELECT count(*), count(DISTINCT b) FROM t;

-- CREATE INDEX fills the filters as its check reads every key: the first
-- inserts after it (odd keys among the even ones, inside every partition's
-- key range) search almost no btree.
CREATE TABLE u (a int, b bigint) PARTITION BY RANGE (a);
CREATE TABLE u1 PARTITION OF u FOR VALUES FROM (0) TO (10000);
CREATE TABLE u2 PARTITION OF u FOR VALUES FROM (10000) TO (20000);
CREATE TABLE u3 PARTITION OF u FOR VALUES FROM (20000) TO (30000);
INSERT INTO u SELECT g, 2 * ((g::bigint * 7919) % 30011) FROM generate_series(0, 29999) g;
CREATE UNIQUE INDEX u_b_key ON u USING gunique (b);
SELECT gunique_probe_stats_reset();
INSERT INTO u SELECT (g * 10) % 30000, 2 * g + 1 FROM generate_series(1, 3000) g;
SELECT sum(probes) AS probes, sum(partitions_filtered) > 5000 AS filtered,
	   sum(partitions_probed) < 100 AS few_searched
  FROM gunique_stat_probes WHERE partition IN ('u1'::regclass, 'u2', 'u3');
SELECT refused('u', 'SELECT format(''(%s, %s)'', (a + 10000) % 30000, b) AS v FROM u WHERE a % 29 = 0');

-- A TRUNCATE that rolls back brings the old btree back: the summary and
-- filter made from the truncated one must go with it, at the top level and
-- in a subtransaction.
BEGIN;
TRUNCATE u2;
INSERT INTO u VALUES (15000, 5000000);
ROLLBACK;
SELECT refused('u', 'SELECT format(''(%s, %s)'', a - 10000, b) AS v FROM u2 WHERE a % 31 = 0');
BEGIN;
SAVEPOINT sp;
TRUNCATE u3;
INSERT INTO u VALUES (25000, 5000000);
ROLLBACK TO SAVEPOINT sp;
SELECT refused('u', 'SELECT format(''(%s, %s)'', a - 20000, b) AS v FROM u3 WHERE a % 31 = 0');
COMMIT;
-- and one that commits leaves only the new keys
BEGIN;
TRUNCATE u3;
INSERT INTO u VALUES (25000, 5000000);
COMMIT;
INSERT INTO u VALUES (5, 5000000);
SELECT count(*) FROM u3;

-- REINDEX of a leaf, VACUUM FULL: the filter is made again from the new
-- btree, and keys inserted since still count.
REINDEX INDEX u1_b_idx;
INSERT INTO u VALUES (9999, 6000000);
SELECT refused('u', 'SELECT format(''(%s, %s)'', a + 10000, b) AS v FROM u1 WHERE a % 31 = 0');
VACUUM FULL u2;
SELECT refused('u', 'SELECT format(''(%s, %s)'', a - 10000, b) AS v FROM u2 WHERE a % 31 = 0');

-- Keys added while a partition is detached count when it comes back (its
-- inserts do not probe but set its filter's bits, and ATTACH's check makes
-- the filter anew).
ALTER TABLE u DETACH PARTITION u2;
INSERT INTO u2 SELECT 10000 + g, 7000000 + g FROM generate_series(0, 99) g;
ALTER TABLE u ATTACH PARTITION u2 FOR VALUES FROM (10000) TO (20000);
SELECT refused('u', 'SELECT format(''(%s, %s)'', 5, b) AS v FROM u2 WHERE b >= 7000000');

-- with gunique.key_filters off, probes rely on key ranges alone
SET gunique.key_filters = off;
SELECT gunique_probe_stats_reset();
INSERT INTO u VALUES (7, 5000001);
SELECT sum(partitions_filtered) AS filtered, sum(partitions_probed) AS searched
  FROM gunique_stat_probes WHERE partition IN ('u1'::regclass, 'u2', 'u3');
RESET gunique.key_filters;

-- A group of 16 leaves or more also has a filter of its own (kept by its
-- top index), which rules every partition out at once.
CREATE TABLE g (a int, b bigint) PARTITION BY RANGE (a);
SELECT format('CREATE TABLE g%s PARTITION OF g FOR VALUES FROM (%s) TO (%s)',
			  i, i * 1000, (i + 1) * 1000)
  FROM generate_series(0, 15) i \gexec
INSERT INTO g SELECT g, 2 * ((g::bigint * 7919) % 16001) FROM generate_series(0, 15999) g;
CREATE UNIQUE INDEX g_b_key ON g USING gunique (b);
SELECT gunique_probe_stats_reset();
INSERT INTO g SELECT (g * 37) % 16000, 2 * g + 1 FROM generate_series(1, 100) g;
SELECT sum(probes) AS probes, sum(partitions_filtered) AS filtered,
	   sum(partitions_probed) AS searched
  FROM gunique_stat_probes s JOIN pg_inherits i ON i.inhrelid = s.partition
 WHERE i.inhparent = 'g'::regclass;
SELECT refused('g', 'SELECT format(''(%s, %s)'', (a + 1000) % 16000, b) AS v FROM g WHERE a % 97 = 0');

-- A TRUNCATE that rolls back takes with it a group filter rebuilt in its
-- transaction, here because the group outgrew its filter.
BEGIN;
TRUNCATE g3;
INSERT INTO g SELECT g % 1000, 100000000 + g FROM generate_series(1, 60000) g;
ROLLBACK;
SELECT refused('g', 'SELECT format(''(%s, %s)'', 5, b) AS v FROM g3 WHERE a % 7 = 0');

-- A partitioned table with a gunique tree of its own, attached under
-- another: its leaves join the parent's group, and when it is detached
-- again its own group filter is made anew (it missed the keys inserted
-- meanwhile).
CREATE TABLE n (a int, b bigint) PARTITION BY RANGE (a);
CREATE TABLE n0 PARTITION OF n FOR VALUES FROM (0) TO (1000);
CREATE TABLE n2 (a int, b bigint) PARTITION BY RANGE (a);
SELECT format('CREATE TABLE n2_%s PARTITION OF n2 FOR VALUES FROM (%s) TO (%s)',
			  i, 1000 + i * 100, 1100 + i * 100)
  FROM generate_series(0, 15) i \gexec
INSERT INTO n0 SELECT g, 2 * g FROM generate_series(0, 999) g;
INSERT INTO n2 SELECT g, 2 * g FROM generate_series(1000, 2599) g;
CREATE UNIQUE INDEX n_b_key ON n USING gunique (b);
CREATE UNIQUE INDEX n2_b_key ON n2 USING gunique (b);
ALTER TABLE n ATTACH PARTITION n2 FOR VALUES FROM (1000) TO (2600);
INSERT INTO n SELECT 1000 + g % 1600, 100001 + 2 * g FROM generate_series(0, 999) g;
SELECT refused('n', 'SELECT format(''(%s, %s)'', 5, b) AS v FROM n2 WHERE a % 7 = 0');
SELECT refused('n', 'SELECT format(''(%s, %s)'', 1500, b) AS v FROM n0 WHERE a % 7 = 0');
ALTER TABLE n DETACH PARTITION n2;
SELECT refused('n2', 'SELECT format(''(%s, %s)'', 1000, b) AS v FROM n2 WHERE b > 100000');

-- An index created on empty partitions gives them no filter: keys that
-- follow the partitioning never need one.  Here e2 holds even keys only;
-- odd keys inside its range, inserted into e1, must search e2's btree until
-- those searches have made a filter worth building, and are ruled out by
-- it after that.
CREATE TABLE e (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE e1 PARTITION OF e FOR VALUES FROM (0) TO (100000);
CREATE TABLE e2 PARTITION OF e FOR VALUES FROM (100000) TO (200000);
CREATE UNIQUE INDEX e_b_key ON e USING gunique (b);
INSERT INTO e SELECT g, g FROM generate_series(0, 199999, 2) g;
SELECT gunique_probe_stats_reset();
INSERT INTO e VALUES (1, 100001), (3, 100003), (5, 100005);
SELECT sum(partitions_probed) AS searched, sum(partitions_filtered) AS filtered
  FROM gunique_stat_probes WHERE partition = 'e1'::regclass;
INSERT INTO e SELECT g - 100000, g FROM generate_series(100007, 150000, 2) g;
-- the build those searches asked for, not a race with the worker
SELECT wait_for_builds();
SELECT gunique_probe_stats_reset();
INSERT INTO e SELECT g - 100000, g FROM generate_series(150001, 160000, 2) g;
SELECT sum(partitions_probed) < 500 AS few_searched,
	   sum(partitions_filtered) > 4000 AS filtered
  FROM gunique_stat_probes WHERE partition = 'e1'::regclass;
SELECT refused('e', 'SELECT format(''(%s, %s)'', a - 100000, b) AS v FROM e2 WHERE a % 1001 = 0');

-- uuid keys: the filter hashes all sixteen bytes, the range only eight.
CREATE TABLE v (a int, u uuid) PARTITION BY LIST (a);
CREATE TABLE v1 PARTITION OF v FOR VALUES IN (1);
CREATE TABLE v2 PARTITION OF v FOR VALUES IN (2);
CREATE TABLE v3 PARTITION OF v FOR VALUES IN (3);
CREATE UNIQUE INDEX v_u_key ON v USING gunique (u);
INSERT INTO v SELECT 1 + g % 3, md5(g::text)::uuid FROM generate_series(1, 6000) g;
-- same first eight bytes as existing keys, different last eight
INSERT INTO v SELECT 1 + g % 3,
	   (left(md5(g::text), 16) || left(md5((g + 1)::text), 16))::uuid
  FROM generate_series(1, 6000, 7) g;
SELECT refused('v', 'SELECT format(''(%s, %L)'', 1 + a % 3, u) AS v FROM v WHERE get_byte(uuid_send(u), 15) < 8');
SELECT count(*), count(DISTINCT u) FROM v;

-- Past the group's filter (a key that exists, or was inserted and rolled
-- back), the leaves whose range may hold the key are found by a binary
-- search of the statement's copies of the ranges, sorted by their low
-- ends, and a walk back while a range reaching the key may come: sv_3 also
-- holds 1777, so its range reaches over sv_4 .. sv_17.  Within a
-- statement, a range that widens is sorted into place again: -7 makes
-- sv_20's range start first, 5001 makes sv_31's reach furthest.
CREATE TABLE sv (a int, b int) PARTITION BY RANGE (a);
DO $$
BEGIN
	FOR i IN 0 .. 31 LOOP
		EXECUTE format('CREATE TABLE sv_%s PARTITION OF sv FOR VALUES FROM (%s) TO (%s)',
					   i, i * 100, (i + 1) * 100);
	END LOOP;
END $$;
INSERT INTO sv SELECT g, g FROM generate_series(0, 3199, 2) g;
INSERT INTO sv VALUES (301, 1777);
CREATE UNIQUE INDEX sv_b_key ON sv USING gunique (b);
INSERT INTO sv VALUES (2001, 1777);
INSERT INTO sv VALUES (1701, 1700);
INSERT INTO sv VALUES (1702, 1779);
BEGIN;
INSERT INTO sv VALUES (3101, 3199);
ROLLBACK;
INSERT INTO sv VALUES (3105, 3199), (2001, -7), (5, -7);
INSERT INTO sv VALUES (3107, 3199), (3109, 5001), (7, 5001);
SELECT tableoid::regclass, a, b FROM sv WHERE b % 2 <> 0 OR b NOT BETWEEN 0 AND 3198 ORDER BY a;

-- Large filters are paged: a key's hash picks a 4 kB page of blocks first,
-- and integer keys close in order share a page (filter.c, keymap.c).
-- 800,000 even keys, alternating between two partitions, so that each
-- leaf's range covers the other's keys and only the filters (made by
-- CREATE INDEX, then again by the builder) can rule a partition out: every
-- key sampled is refused from the other partition, and 5,000 odd keys
-- between them meet few false positives (a few dozen btree searches).
CREATE TABLE pg2 (a int NOT NULL, k bigint) PARTITION BY LIST ((a % 2));
CREATE TABLE pg2_0 PARTITION OF pg2 FOR VALUES IN (0);
CREATE TABLE pg2_1 PARTITION OF pg2 FOR VALUES IN (1);
INSERT INTO pg2 SELECT g, 2 * g FROM generate_series(0, 799999) g;
CREATE UNIQUE INDEX pg2_k ON pg2 USING gunique (k);
SELECT refused('pg2', 'SELECT format(''(%s, %s)'', g + 1, 2 * g) AS v FROM generate_series(0, 799999, 1009) g');
SELECT gunique_build_filters('pg2_k', true) > 0 AS rebuilt;
SELECT refused('pg2', 'SELECT format(''(%s, %s)'', g + 1, 2 * g) AS v FROM generate_series(3, 799999, 1013) g');
SELECT gunique_probe_stats_reset();
INSERT INTO pg2 SELECT g, 2 * g + 1 FROM generate_series(0, 4999) g;
SELECT sum(inserts) AS inserts, sum(partitions_probed) < 50 AS few_searches
  FROM gunique_probe_stats() WHERE index::text LIKE 'pg2%';
SELECT count(*), count(DISTINCT k) FROM pg2;
DROP TABLE pg2;

-- Small filters (not paged) place a key by the low half of its hash, which
-- keys of one run do not share: by the high half, the 32 values of a run
-- would set bits in one block, and keys between existing ones would meet
-- false positives some twenty times as often (2.5% against 0.1%).  20,000
-- even keys in two partitions, then 5,000 odd keys between them: a few
-- btree searches, not hundreds.
CREATE TABLE sm2 (a int NOT NULL, k bigint) PARTITION BY LIST ((a % 2));
CREATE TABLE sm2_0 PARTITION OF sm2 FOR VALUES IN (0);
CREATE TABLE sm2_1 PARTITION OF sm2 FOR VALUES IN (1);
INSERT INTO sm2 SELECT g, 2 * g FROM generate_series(0, 19999) g;
CREATE UNIQUE INDEX sm2_k ON sm2 USING gunique (k);
SELECT gunique_probe_stats_reset();
INSERT INTO sm2 SELECT g, 2 * g + 1 FROM generate_series(0, 4999) g;
SELECT sum(inserts) AS inserts, sum(partitions_probed) < 50 AS few_searches
  FROM gunique_probe_stats() WHERE index::text LIKE 'sm2%';
DROP TABLE sm2;

-- The filters' memory: a limit by the machine's memory (at least 64 MB by
-- default), filters there are, and their bytes (at least 1 kB each).
SELECT limit_bytes >= 64 * 1024 * 1024 AS limit_ok, filters > 0 AS filters,
       used_bytes >= filters * 1024 AS bytes_ok, filters_refused >= 0 AS counted
  FROM gunique_filter_memory();

DROP SCHEMA gfil CASCADE;

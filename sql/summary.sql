--
-- Key-range summaries: a probe skips a partition whose [min, max] cannot
-- hold the key.  Whatever adds keys to a leaf, or rebuilds it, must keep
-- the summary covering every key, or a duplicate would slip through.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gsum;
SET search_path = gsum, public;
-- key ranges alone (filter.sql tests key filters)
SET gunique.key_filters = off;

CREATE TABLE t (a int, b bigint) PARTITION BY RANGE (a);
CREATE TABLE t1 PARTITION OF t FOR VALUES FROM (0) TO (100);
CREATE TABLE t2 PARTITION OF t FOR VALUES FROM (100) TO (200);
CREATE TABLE t3 PARTITION OF t FOR VALUES FROM (200) TO (300);
CREATE UNIQUE INDEX t_b_key ON t USING gunique (b);
INSERT INTO t SELECT g, g * 10 FROM generate_series(0, 299) g;

-- Keys far outside every range, and at the edges of each.
INSERT INTO t VALUES (1, -1000000), (101, 1000000);
INSERT INTO t VALUES (201, -1000000);
INSERT INTO t VALUES (202, 1000000);
INSERT INTO t VALUES (203, 0);
INSERT INTO t VALUES (204, 990);
INSERT INTO t VALUES (5, 2990);

-- A deleted key may come back anywhere; the summary only gets wider.
DELETE FROM t WHERE b = 1000000;
INSERT INTO t VALUES (205, 1000000);
INSERT INTO t VALUES (6, 1000000);

-- TRUNCATE rebuilds the leaf: keys inserted after it still count.
TRUNCATE t3;
INSERT INTO t VALUES (250, 123456789);
INSERT INTO t VALUES (50, 123456789);
INSERT INTO t VALUES (150, -123456789), (7, -123456789);

-- REINDEX of a leaf, and of the whole tree.
REINDEX INDEX t1_b_idx;
INSERT INTO t VALUES (150, 10);
REINDEX INDEX t_b_key;
INSERT INTO t VALUES (250, 20);
VACUUM FULL t2;
INSERT INTO t VALUES (8, 1010);

-- Rows added to a partition while it is detached are in its summary when
-- it comes back.
ALTER TABLE t DETACH PARTITION t2;
INSERT INTO t2 VALUES (160, 777777777);
INSERT INTO t VALUES (9, 777777777);	-- t2 is not a partition: accepted
DELETE FROM t1 WHERE b = 777777777;
ALTER TABLE t ATTACH PARTITION t2 FOR VALUES FROM (100) TO (200);
INSERT INTO t VALUES (10, 777777777);

-- UPDATE that moves a key, and one that moves a row.
UPDATE t SET b = 55555555 WHERE a = 11;
INSERT INTO t VALUES (260, 55555555);
UPDATE t SET a = 170 WHERE a = 12;
INSERT INTO t VALUES (261, 120);

-- NULL keys are never summarized and never conflict.
INSERT INTO t VALUES (13, NULL), (113, NULL), (213, NULL);

SELECT count(*), count(DISTINCT b), count(b) FROM t;

-- Other summarized types: uuid (by its first eight bytes), timestamptz,
-- date, int2, with a descending index.
CREATE TABLE ev (k int, u uuid, ts timestamptz, d date, s int2)
	PARTITION BY LIST (k);
CREATE TABLE ev1 PARTITION OF ev FOR VALUES IN (1);
CREATE TABLE ev2 PARTITION OF ev FOR VALUES IN (2);
INSERT INTO ev VALUES
	(1, '00000000-0000-0000-0000-000000000001', '2024-01-01', '2024-01-01', 1),
	(2, 'ffffffff-ffff-ffff-ffff-fffffffffff1', '2026-01-01', '2026-01-01', 1000);
CREATE UNIQUE INDEX ev_u_key ON ev USING gunique (u);
CREATE UNIQUE INDEX ev_ts_key ON ev USING gunique (ts DESC);
CREATE UNIQUE INDEX ev_d_key ON ev USING gunique (d);
CREATE UNIQUE INDEX ev_s_key ON ev USING gunique (s);
INSERT INTO ev VALUES (2, '00000000-0000-0000-0000-000000000001', now(), NULL, NULL);
INSERT INTO ev VALUES (2, '00000000-0000-0000-ffff-000000000001', '2024-01-01', NULL, NULL);
INSERT INTO ev VALUES (1, 'ffffffff-ffff-ffff-ffff-fffffffffff2', now(), '2026-01-01', NULL);
INSERT INTO ev VALUES (1, 'ffffffff-ffff-ffff-ffff-fffffffffff3', now() + '1 day', NULL, 1000);
INSERT INTO ev VALUES (1, 'ffffffff-ffff-ffff-ffff-fffffffffff1', NULL, NULL, NULL);
SELECT k, count(*) FROM ev GROUP BY k ORDER BY k;

-- What the probes did: with keys that follow the partitioning, every other
-- partition is ruled out by its key range, and so is the inserter's own
-- partition while each key extends its range: the 300 ascending keys search
-- no btree at all.  A duplicate in another partition is found by searching
-- the one partition whose range holds it; one in the inserter's own
-- partition by nbtree's check, after which gunique opens that partition's
-- btree, looks at the others again (a second probe) and finds it.
SELECT gunique_probe_stats_reset();
CREATE TABLE st (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE st1 PARTITION OF st FOR VALUES FROM (0) TO (100);
CREATE TABLE st2 PARTITION OF st FOR VALUES FROM (100) TO (200);
CREATE TABLE st3 PARTITION OF st FOR VALUES FROM (200) TO (300);
CREATE UNIQUE INDEX st_b_key ON st USING gunique (b);
INSERT INTO st SELECT g, g FROM generate_series(0, 299) g;
INSERT INTO st VALUES (5, 150);
INSERT INTO st VALUES (7, 7);
SELECT partition, inserts, inserts_unprobed, probes, partitions_probed,
	   partitions_skipped, waits, conflicts
FROM gunique_stat_probes WHERE partition IN ('st1'::regclass, 'st2', 'st3') ORDER BY 1;

DROP SCHEMA gsum CASCADE;

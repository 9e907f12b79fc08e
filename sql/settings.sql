--
-- One setting per feature that gunique's hooks add (hooks.c), each on and
-- off, alone: it turns its own feature off and no other.
--   gunique.enable_lookup          lookups by the key (SELECT)
--   gunique.enable_modify_by_key   UPDATE and DELETE by the key
--   gunique.enable_conflict_check  ON CONFLICT DO NOTHING's check of the
--                                  other partitions (18); off, such a
--                                  statement is refused
-- PostgreSQL 15 and 17 refuse every INSERT ... ON CONFLICT on a table with
-- a gunique index whatever the setting (settings_1.out).
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gset;
SET search_path = gset, public;
SET enable_seqscan = off;
SET enable_bitmapscan = off;

SELECT name, setting, context, vartype FROM pg_settings
 WHERE name IN ('gunique.enable_lookup', 'gunique.enable_modify_by_key',
				'gunique.enable_conflict_check')
 ORDER BY name;

CREATE TABLE s (id int, day int, v text) PARTITION BY RANGE (day);
CREATE TABLE s_1 PARTITION OF s FOR VALUES FROM (0) TO (10);
CREATE TABLE s_2 PARTITION OF s FOR VALUES FROM (10) TO (20);
CREATE TABLE s_3 PARTITION OF s FOR VALUES FROM (20) TO (30);
CREATE UNIQUE INDEX s_id ON s USING gunique (id);
INSERT INTO s SELECT i, i % 30, 'v' || i FROM generate_series(1, 300) i;
ANALYZE s;

-- All on, the defaults: a lookup, and an UPDATE and a DELETE planned for
-- the key's partition alone, with the key check.
EXPLAIN (COSTS OFF) SELECT * FROM s WHERE id = 7;
EXPLAIN (COSTS OFF) UPDATE s SET v = 'x' WHERE id = 7;
EXPLAIN (COSTS OFF) DELETE FROM s WHERE id = 7;

-- Lookups off: the SELECT is PostgreSQL's plan; the UPDATE and the DELETE
-- are still planned for the key's partition.
SET gunique.enable_lookup = off;
EXPLAIN (COSTS OFF) SELECT * FROM s WHERE id = 7;
SELECT tableoid::regclass, * FROM s WHERE id = 7;
EXPLAIN (COSTS OFF) UPDATE s SET v = 'x' WHERE id = 7;
UPDATE s SET v = 'lookup off' WHERE id = 7 RETURNING tableoid::regclass, *;
EXPLAIN (COSTS OFF) DELETE FROM s WHERE id = 8;
RESET gunique.enable_lookup;

-- Modify-by-key off: the UPDATE and the DELETE are PostgreSQL's plans,
-- every partition; the SELECT is still a lookup.
SET gunique.enable_modify_by_key = off;
EXPLAIN (COSTS OFF) UPDATE s SET v = 'x' WHERE id = 7;
UPDATE s SET v = 'modify off' WHERE id = 7 RETURNING tableoid::regclass, *;
EXPLAIN (COSTS OFF) DELETE FROM s WHERE id = 8;
DELETE FROM s WHERE id = 8 RETURNING tableoid::regclass, *;
EXPLAIN (COSTS OFF) SELECT * FROM s WHERE id = 7;
SELECT tableoid::regclass, * FROM s WHERE id = 7;
RESET gunique.enable_modify_by_key;

-- A plan already made keeps what it was made with, either way: both are
-- correct (a prepared statement without parameters keeps its plan).
PREPARE upd AS UPDATE s SET v = 'prepared' WHERE id = 9;
EXPLAIN (COSTS OFF) EXECUTE upd;
SET gunique.enable_modify_by_key = off;
EXPLAIN (COSTS OFF) EXECUTE upd;
EXECUTE upd;
EXPLAIN (COSTS OFF) UPDATE s SET v = 'prepared' WHERE id = 9;
RESET gunique.enable_modify_by_key;
DEALLOCATE upd;
SELECT tableoid::regclass, * FROM s WHERE id = 9;

-- The ON CONFLICT DO NOTHING check: on, a row whose key another partition
-- holds (7, in s_1) is skipped.
EXPLAIN (COSTS OFF) INSERT INTO s VALUES (7, 25, 'again') ON CONFLICT DO NOTHING;
INSERT INTO s VALUES (7, 25, 'again'), (301, 25, 'new') ON CONFLICT DO NOTHING
  RETURNING tableoid::regclass, *;
PREPARE ins(int) AS INSERT INTO s VALUES ($1, 25, 'prepared') ON CONFLICT DO NOTHING;
EXECUTE ins(7);

-- Off: refused as it starts, every execution, a plan made with the check
-- on too, whatever the key; nothing is inserted.
SET gunique.enable_conflict_check = off;
INSERT INTO s VALUES (7, 25, 'again') ON CONFLICT DO NOTHING;
EXPLAIN (COSTS OFF) INSERT INTO s VALUES (7, 25, 'again') ON CONFLICT DO NOTHING;
INSERT INTO s VALUES (302, 25, 'new') ON CONFLICT (id) DO NOTHING;
WITH w AS (INSERT INTO s VALUES (303, 5, 'with') ON CONFLICT DO NOTHING RETURNING *)
SELECT * FROM w;
INSERT INTO s_3 VALUES (304, 25, 'partition') ON CONFLICT DO NOTHING;
EXECUTE ins(305);
DO $$
BEGIN
	INSERT INTO s VALUES (306, 25, 'new') ON CONFLICT DO NOTHING;
EXCEPTION WHEN object_not_in_prerequisite_state THEN
	RAISE NOTICE 'refused with SQLSTATE %', SQLSTATE;
END $$;
SELECT count(*) FROM s WHERE id > 301;
-- Not refused: what has no check.  A plain INSERT, DO UPDATE (a key in
-- another partition is a unique violation either way), and a table that
-- is not partitioned, where PostgreSQL arbitrates alone.
INSERT INTO s VALUES (307, 25, 'plain') RETURNING tableoid::regclass, *;
INSERT INTO s VALUES (7, 5, 'same partition') ON CONFLICT (id) DO UPDATE SET v = excluded.v
  RETURNING tableoid::regclass, *;
CREATE TABLE flat (id int, v text);
CREATE UNIQUE INDEX flat_id ON flat USING gunique (id);
INSERT INTO flat VALUES (1, 'one');
INSERT INTO flat VALUES (1, 'uno') ON CONFLICT DO NOTHING;
SELECT * FROM flat;
RESET gunique.enable_conflict_check;
EXECUTE ins(305);
DEALLOCATE ins;
SELECT tableoid::regclass, * FROM s WHERE id > 300 ORDER BY id;

DROP SCHEMA gset CASCADE;

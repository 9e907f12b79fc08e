--
-- MERGE (PostgreSQL 15 and later) into tables with gunique indexes.
--
-- MERGE inserts, updates and deletes through the executor's ordinary paths,
-- so a gunique index on a partitioned table enforces its key as it does for
-- INSERT and UPDATE: a WHEN NOT MATCHED INSERT of a key that another
-- partition holds (one the ON condition did not match) is a unique
-- violation naming that partition; a WHEN MATCHED UPDATE that moves the row
-- to another partition keeps its key; a key deleted by the same transaction
-- may come back elsewhere.  The table is partitioned by a date, the key is
-- an id that does not contain it.  The concurrent cases are in
-- specs/merge-race.spec.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gmerge;
SET search_path = gmerge, public;

CREATE TABLE ev (day date, id int, note text) PARTITION BY RANGE (day);
CREATE TABLE ev_jan PARTITION OF ev FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
CREATE TABLE ev_feb PARTITION OF ev FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
CREATE TABLE ev_mar PARTITION OF ev FOR VALUES FROM ('2026-03-01') TO ('2026-04-01');
CREATE UNIQUE INDEX ev_id ON ev USING gunique (id);
INSERT INTO ev VALUES ('2026-01-10', 1, 'one'), ('2026-02-10', 2, 'two'),
	('2026-03-10', 3, 'three');

-- The source: each row a date, an id and what to do with it.
CREATE TABLE src (day date, id int, note text);

-- WHEN MATCHED UPDATE of a row in ev_jan by a source row whose date would
-- route to ev_mar: the row stays where it is.
INSERT INTO src VALUES ('2026-03-15', 1, 'one, updated');
MERGE INTO ev USING src ON ev.id = src.id
	WHEN MATCHED THEN UPDATE SET note = src.note
	WHEN NOT MATCHED THEN INSERT VALUES (src.day, src.id, src.note);
SELECT tableoid::regclass, * FROM ev ORDER BY id;

-- WHEN MATCHED UPDATE of the partition key: the row moves from ev_jan to
-- ev_mar with its key, which is no violation.
MERGE INTO ev USING src ON ev.id = src.id
	WHEN MATCHED THEN UPDATE SET day = src.day, note = 'one, moved'
	WHEN NOT MATCHED THEN INSERT VALUES (src.day, src.id, src.note);
SELECT tableoid::regclass, * FROM ev ORDER BY id;
-- and back, in a transaction that then moves it once more
BEGIN;
MERGE INTO ev USING src ON ev.id = src.id
	WHEN MATCHED THEN UPDATE SET day = '2026-01-20';
MERGE INTO ev USING src ON ev.id = src.id
	WHEN MATCHED THEN UPDATE SET day = '2026-02-20';
SELECT tableoid::regclass, * FROM ev ORDER BY id;
COMMIT;

-- WHEN NOT MATCHED INSERT of a new key, in each partition, beside a matched
-- row of the same statement.
TRUNCATE src;
INSERT INTO src VALUES ('2026-01-05', 4, 'four'), ('2026-02-05', 5, 'five'),
	('2026-03-05', 6, 'six'), ('2026-01-01', 3, 'three, updated');
MERGE INTO ev USING src ON ev.id = src.id
	WHEN MATCHED THEN UPDATE SET note = src.note
	WHEN NOT MATCHED THEN INSERT VALUES (src.day, src.id, src.note);
SELECT tableoid::regclass, * FROM ev ORDER BY id;

-- WHEN NOT MATCHED INSERT of a key that another partition holds, the ON
-- condition (which also asks for the date) not matching it: a unique
-- violation that names the partition holding the key, and nothing of the
-- statement stays.
TRUNCATE src;
INSERT INTO src VALUES ('2026-03-07', 7, 'seven'), ('2026-01-02', 2, 'two again');
MERGE INTO ev USING src ON ev.id = src.id AND ev.day = src.day
	WHEN MATCHED THEN UPDATE SET note = src.note
	WHEN NOT MATCHED THEN INSERT VALUES (src.day, src.id, src.note);
-- the same through a source that is a query, and with VALUES
MERGE INTO ev USING (SELECT date '2026-03-30' AS day, 4 AS id) s
	ON ev.id = s.id AND ev.day = s.day
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.id, 'four again');
MERGE INTO ev USING (VALUES (date '2026-01-31', 6)) s(day, id)
	ON false
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.id, 'six again');
-- the key in the partition the row goes to: the same violation, without a
-- partition in the DETAIL, as from nbtree
MERGE INTO ev USING (VALUES (date '2026-02-11', 2)) s(day, id)
	ON ev.id = s.id AND ev.day = s.day
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.id, 'two again');
SELECT tableoid::regclass, * FROM ev ORDER BY id;

-- WHEN MATCHED UPDATE of the key itself: to a key another partition holds,
-- a violation; to a new one, fine.
MERGE INTO ev USING (VALUES (5, 1)) s(id, newid) ON ev.id = s.id
	WHEN MATCHED THEN UPDATE SET id = s.newid;
MERGE INTO ev USING (VALUES (5, 1)) s(id, newid) ON ev.id = s.id
	WHEN MATCHED THEN UPDATE SET id = s.newid, day = '2026-03-31';
MERGE INTO ev USING (VALUES (5, 50)) s(id, newid) ON ev.id = s.id
	WHEN MATCHED THEN UPDATE SET id = s.newid;
SELECT tableoid::regclass, * FROM ev ORDER BY id;

-- DELETE and DO NOTHING, by condition.  The key deleted in ev_mar (6) may
-- then be inserted into ev_jan by the same transaction; the one left in
-- ev_jan (4) may not go to ev_feb.
BEGIN;
MERGE INTO ev USING (VALUES (6, 'delete'), (4, 'keep'), (8, 'new'),
		(9, 'skip')) s(id, op)
	ON ev.id = s.id
	WHEN MATCHED AND s.op = 'delete' THEN DELETE
	WHEN MATCHED THEN DO NOTHING
	WHEN NOT MATCHED AND s.op = 'skip' THEN DO NOTHING
	WHEN NOT MATCHED THEN INSERT VALUES ('2026-02-08', s.id, s.op);
SELECT tableoid::regclass, * FROM ev ORDER BY id;
MERGE INTO ev USING (VALUES (date '2026-01-06', 6)) s(day, id)
	ON ev.id = s.id
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.id, 'six, back');
COMMIT;
MERGE INTO ev USING (VALUES (date '2026-02-04', 4)) s(day, id)
	ON ev.id = s.id AND ev.day = s.day
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.id, 'four again');
SELECT tableoid::regclass, * FROM ev ORDER BY id;

-- A key deleted, then taken back elsewhere after a rollback to a savepoint
-- brought the deleted row back: a violation.
BEGIN;
SAVEPOINT a;
MERGE INTO ev USING (VALUES (8)) s(id) ON ev.id = s.id
	WHEN MATCHED THEN DELETE;
ROLLBACK TO SAVEPOINT a;
MERGE INTO ev USING (VALUES (date '2026-03-08', 8)) s(day, id)
	ON ev.id = s.id AND ev.day = s.day
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.id, 'eight again');
ROLLBACK;
-- and a key inserted by a MERGE rolled back to a savepoint may come again
-- in another partition
BEGIN;
SAVEPOINT a;
MERGE INTO ev USING (VALUES (date '2026-01-11', 11)) s(day, id)
	ON ev.id = s.id
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.id, 'rolled back');
ROLLBACK TO SAVEPOINT a;
MERGE INTO ev USING (VALUES (date '2026-03-11', 11)) s(day, id)
	ON ev.id = s.id
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.id, 'eleven');
COMMIT;
SELECT tableoid::regclass, * FROM ev ORDER BY id;

-- A source with the same key twice.  Both rows matching one target row:
-- PostgreSQL's own error.
MERGE INTO ev USING (VALUES (1, 'a'), (1, 'b')) s(id, note) ON ev.id = s.id
	WHEN MATCHED THEN UPDATE SET note = s.note;
-- Both new, for different partitions: the second insert finds the first
-- one's row (inserted by the same statement) and is a violation.
MERGE INTO ev USING (VALUES (date '2026-01-12', 12), (date '2026-03-12', 12)) s(day, id)
	ON ev.id = s.id
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.id, 'twelve');
-- Both new, for the same partition.
MERGE INTO ev USING (VALUES (date '2026-01-12', 12), (date '2026-01-13', 12)) s(day, id)
	ON ev.id = s.id
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.id, 'twelve');
SELECT tableoid::regclass, * FROM ev ORDER BY id;

-- MERGE into a partition directly: its rows are the only ones matched, yet
-- a key that another partition holds may not be inserted.
MERGE INTO ev_feb USING (VALUES (date '2026-02-03', 2, 'two, in feb'),
		(date '2026-02-13', 13, 'thirteen')) s(day, id, note)
	ON ev_feb.id = s.id
	WHEN MATCHED THEN UPDATE SET note = s.note
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.id, s.note);
MERGE INTO ev_feb USING (VALUES (date '2026-02-03', 4)) s(day, id)
	ON ev_feb.id = s.id
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.id, 'four, in feb');
MERGE INTO ev_feb USING (VALUES (13, 3)) s(id, newid) ON ev_feb.id = s.id
	WHEN MATCHED THEN UPDATE SET id = s.newid;
-- a row that does not belong to the partition: PostgreSQL's own error
MERGE INTO ev_feb USING (VALUES (date '2026-03-03', 14)) s(day, id)
	ON ev_feb.id = s.id
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.id, 'fourteen');
SELECT tableoid::regclass, * FROM ev ORDER BY id;

-- A key of two columns, neither of them the partition key.
CREATE TABLE ev2 (day date, a int, b text, note text) PARTITION BY RANGE (day);
CREATE TABLE ev2_jan PARTITION OF ev2 FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
CREATE TABLE ev2_feb PARTITION OF ev2 FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
CREATE UNIQUE INDEX ev2_ab ON ev2 USING gunique (a, b);
INSERT INTO ev2 VALUES ('2026-01-10', 1, 'x', 'one x'), ('2026-02-10', 1, 'y', 'one y');
-- matched and moved; a new pair that shares a with an old one
MERGE INTO ev2 USING (VALUES (date '2026-02-15', 1, 'x', 'moved'),
		(date '2026-01-15', 1, 'z', 'one z')) s(day, a, b, note)
	ON ev2.a = s.a AND ev2.b = s.b
	WHEN MATCHED THEN UPDATE SET day = s.day, note = s.note
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.a, s.b, s.note);
SELECT tableoid::regclass, * FROM ev2 ORDER BY a, b;
-- a pair another partition holds, not matched: a violation
MERGE INTO ev2 USING (VALUES (date '2026-01-20', 1, 'y')) s(day, a, b)
	ON ev2.a = s.a AND ev2.b = s.b AND ev2.day = s.day
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.a, s.b, 'one y again');
-- an update of one key column into a pair another partition holds
MERGE INTO ev2 USING (VALUES (1, 'z', 'x')) s(a, b, newb)
	ON ev2.a = s.a AND ev2.b = s.b
	WHEN MATCHED THEN UPDATE SET b = s.newb;
-- NULL in a key column: never a duplicate (NULLS DISTINCT)
MERGE INTO ev2 USING (VALUES (date '2026-01-21', 1), (date '2026-02-21', 1)) s(day, a)
	ON false
	WHEN NOT MATCHED THEN INSERT VALUES (s.day, s.a, NULL, 'null b');
SELECT tableoid::regclass, * FROM ev2 ORDER BY a, b, day;

-- A table that is not partitioned: the leaf alone, as a unique btree.
CREATE TABLE pl (id int, note text);
CREATE UNIQUE INDEX pl_id ON pl USING gunique (id);
INSERT INTO pl VALUES (1, 'one');
MERGE INTO pl USING (VALUES (1, 'uno'), (2, 'two')) s(id, note) ON pl.id = s.id
	WHEN MATCHED THEN UPDATE SET note = s.note
	WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.note);
MERGE INTO pl USING (VALUES (1, 'one again')) s(id, note) ON false
	WHEN NOT MATCHED THEN INSERT VALUES (s.id, s.note);
MERGE INTO pl USING (VALUES (2, 1)) s(id, newid) ON pl.id = s.id
	WHEN MATCHED THEN UPDATE SET id = s.newid;
SELECT * FROM pl ORDER BY id;

-- Every key still once.
SELECT id, count(*) FROM ev GROUP BY id HAVING count(*) > 1;
SELECT a, b, count(*) FROM ev2 WHERE a IS NOT NULL AND b IS NOT NULL
	GROUP BY a, b HAVING count(*) > 1;
SELECT * FROM gunique_verify('ev_id');
SELECT * FROM gunique_verify('ev2_ab');

DROP SCHEMA gmerge CASCADE;

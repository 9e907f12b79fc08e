--
-- Foreign keys referencing a gunique index.
--
-- PostgreSQL 18 enforces them (expected output foreignkey_1.out); 15 and 17
-- can only use btree indexes for foreign keys: they use a unique btree
-- index on the same columns if there is one, and otherwise get a clear
-- error (foreignkey.out).
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA gfk;
SET search_path = gfk, public;

CREATE TABLE plain (id int, v text);
CREATE UNIQUE INDEX plain_id ON plain USING gunique (id);
INSERT INTO plain VALUES (1, 'one');
CREATE TABLE ref1 (plain_id int REFERENCES plain (id));
CREATE TABLE ref2 (plain_id int);
ALTER TABLE ref2 ADD FOREIGN KEY (plain_id) REFERENCES plain (id);
INSERT INTO ref2 VALUES (1);
INSERT INTO ref2 VALUES (2);

CREATE TABLE events (created date, id bigint) PARTITION BY RANGE (created);
CREATE TABLE events_2026 PARTITION OF events
	FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');
CREATE TABLE events_2027 PARTITION OF events
	FOR VALUES FROM ('2027-01-01') TO ('2028-01-01');
CREATE UNIQUE INDEX events_id ON events USING gunique (id);
INSERT INTO events VALUES ('2026-05-01', 10), ('2027-05-01', 20);
CREATE TABLE ref3 (event_id bigint REFERENCES events (id));
INSERT INTO ref3 VALUES (10), (20);
INSERT INTO ref3 VALUES (30);
DELETE FROM events WHERE id = 20;

-- With a unique btree index on the same columns too, foreign keys use it
-- before PostgreSQL 18, however old it is: created after the gunique index
-- here, as pg_restore does when the gunique index's name sorts first.  (On
-- 18 they take the first, here the gunique index.)
CREATE UNIQUE INDEX plain_id_btree ON plain (id);
CREATE TABLE ref4 (plain_id int);
ALTER TABLE ref4 ADD FOREIGN KEY (plain_id) REFERENCES plain (id);
CREATE TABLE ref5 (plain_id int REFERENCES plain (id));
CREATE TABLE ref6 (x int);
ALTER TABLE ref6 ADD COLUMN plain_id int REFERENCES plain (id);
INSERT INTO ref4 VALUES (1);
INSERT INTO ref4 VALUES (2);
INSERT INTO ref5 VALUES (2);
INSERT INTO ref6 VALUES (0, 2);
-- a table that references itself, in a statement that only adds the key
ALTER TABLE plain ADD COLUMN parent int;
ALTER TABLE plain ADD FOREIGN KEY (parent) REFERENCES plain (id);
UPDATE plain SET parent = 2;
-- but not when the statement changes the referenced table in other ways,
-- which could rebuild its indexes
ALTER TABLE plain ADD COLUMN parent2 int,
	ADD FOREIGN KEY (parent2) REFERENCES plain (id);
-- a foreign key that fails leaves the gunique index as it was
CREATE TABLE ref7 (plain_id int);
INSERT INTO ref7 VALUES (3);
ALTER TABLE ref7 ADD FOREIGN KEY (plain_id) REFERENCES plain (id);
-- the gunique index is unique again and enforces uniqueness
SELECT indisunique FROM pg_index WHERE indexrelid = 'plain_id'::regclass;
INSERT INTO plain VALUES (1, 'again');

-- A partitioned table, with a unique constraint beside the gunique index.
CREATE TABLE byid (id int, v text) PARTITION BY RANGE (id);
CREATE TABLE byid_1 PARTITION OF byid FOR VALUES FROM (0) TO (100);
CREATE TABLE byid_2 PARTITION OF byid FOR VALUES FROM (100) TO (200);
CREATE UNIQUE INDEX byid_a ON byid USING gunique (id);
ALTER TABLE byid ADD CONSTRAINT byid_key UNIQUE (id);
INSERT INTO byid VALUES (1), (101);
CREATE TABLE ref8 (byid_id int REFERENCES byid (id));
INSERT INTO ref8 VALUES (1), (101);
INSERT INTO ref8 VALUES (2);
DO $$
BEGIN
	DELETE FROM byid WHERE id = 101;
EXCEPTION WHEN foreign_key_violation THEN
	RAISE NOTICE 'key 101 is still referenced';
END
$$;

-- A partition referenced directly: its leaf of the gunique index is hidden
-- while the statement runs, and a row the statement itself inserts into
-- the partition meanwhile is still checked against the other partitions.
CREATE TABLE ev (created int, id int) PARTITION BY RANGE (created);
CREATE TABLE ev_1 PARTITION OF ev FOR VALUES FROM (0) TO (10);
CREATE TABLE ev_2 PARTITION OF ev FOR VALUES FROM (10) TO (20);
CREATE UNIQUE INDEX ev_id ON ev USING gunique (id);
CREATE UNIQUE INDEX ev_1_id_btree ON ev_1 (id);
INSERT INTO ev VALUES (1, 1), (11, 2);
CREATE FUNCTION sneak() RETURNS int LANGUAGE sql
	AS $$ INSERT INTO ev VALUES (2, 2) RETURNING 1 $$;
CREATE TABLE ref9 (x int);
INSERT INTO ref9 VALUES (0);
\set SHOW_CONTEXT never
ALTER TABLE ref9 ADD COLUMN ev_id int DEFAULT sneak() REFERENCES ev_1 (id);
\set SHOW_CONTEXT errors
SELECT tableoid::regclass, * FROM ev WHERE id = 2;
ALTER TABLE ref9 ADD COLUMN ev_id int REFERENCES ev_1 (id);

-- ALTER COLUMN ... TYPE of a referenced gunique key makes the tree again
-- (altertype); PostgreSQL 18 makes the foreign key again on the new tree,
-- which still refuses orphans.
ALTER TABLE events ALTER COLUMN id TYPE numeric;
INSERT INTO ref3 VALUES (40);
INSERT INTO events VALUES ('2027-06-01', 10);

-- Which index each foreign key uses.
SELECT conrelid::regclass, conname, conindid::regclass
FROM pg_constraint
WHERE contype = 'f' AND conparentid = 0 AND connamespace = 'gfk'::regnamespace
ORDER BY 1::text, 2;

DROP SCHEMA gfk CASCADE;

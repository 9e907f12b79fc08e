--
-- Foreign keys referencing a gunique index.
--
-- PostgreSQL 18 enforces them (expected output foreignkey_1.out); 15 and 17
-- can only use btree indexes for foreign keys and get a clear error
-- (foreignkey.out).
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

-- with a btree index as well, PostgreSQL may pick either
CREATE UNIQUE INDEX plain_id_btree ON plain (id);
CREATE TABLE ref4 (plain_id int);
ALTER TABLE ref4 ADD FOREIGN KEY (plain_id) REFERENCES plain (id);

DROP SCHEMA gfk CASCADE;

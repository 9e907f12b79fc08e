--
-- The limitations of INSERT ... ON CONFLICT DO NOTHING that README.md
-- documents for PostgreSQL 18, each as it behaves today (limits.sql has
-- the others).  Expected output limits-upsert_1.out on 18, and on 15 and
-- 17 with the core change of contrib-patches/; limits-upsert.out on 15
-- and 17 without it, which refuse every statement here.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA glimu;
SET search_path = glimu, public;

-- The key is checked before the row is routed: a row whose key another
-- partition holds is skipped before its CHECK constraints are checked and
-- before it is found to fit no partition.  A new key is refused as
-- PostgreSQL refuses it.
CREATE TABLE rt (id int, p int, v text CHECK (v <> 'bad')) PARTITION BY LIST (p);
CREATE TABLE rt1 PARTITION OF rt FOR VALUES IN (1);
CREATE TABLE rt2 PARTITION OF rt FOR VALUES IN (2);
CREATE UNIQUE INDEX rt_id ON rt USING gunique (id);
INSERT INTO rt VALUES (1, 1, 'ok');
INSERT INTO rt VALUES (1, 2, 'bad') ON CONFLICT DO NOTHING;
INSERT INTO rt VALUES (1, 9, 'ok') ON CONFLICT DO NOTHING;
INSERT INTO rt VALUES (2, 2, 'bad') ON CONFLICT DO NOTHING;
INSERT INTO rt VALUES (2, 9, 'ok') ON CONFLICT DO NOTHING;
SELECT tableoid::regclass, * FROM rt ORDER BY id;

-- Keys with a null column are not checked: a NULLS NOT DISTINCT key with a
-- null that another partition holds is a unique violation.
CREATE TABLE nn (a int, b int, p int) PARTITION BY LIST (p);
CREATE TABLE nn1 PARTITION OF nn FOR VALUES IN (1);
CREATE TABLE nn2 PARTITION OF nn FOR VALUES IN (2);
CREATE UNIQUE INDEX nn_ab ON nn USING gunique (a, b) NULLS NOT DISTINCT;
INSERT INTO nn VALUES (1, NULL, 1), (2, 2, 1);
INSERT INTO nn VALUES (2, 2, 2) ON CONFLICT DO NOTHING;
INSERT INTO nn VALUES (1, NULL, 2) ON CONFLICT DO NOTHING;
INSERT INTO nn VALUES (1, NULL, 1) ON CONFLICT DO NOTHING;
SELECT tableoid::regclass, * FROM nn ORDER BY a;

-- The gunique indexes of the table the INSERT names are checked: one made
-- only on a partitioned partition below it arbitrates within a partition,
-- and a key another of its partitions holds is a unique violation, unless
-- the INSERT names that partitioned partition.
CREATE TABLE top (id int, a int, b int) PARTITION BY LIST (a);
CREATE TABLE mid PARTITION OF top FOR VALUES IN (1) PARTITION BY LIST (b);
CREATE TABLE mid1 PARTITION OF mid FOR VALUES IN (1);
CREATE TABLE mid2 PARTITION OF mid FOR VALUES IN (2);
CREATE TABLE other PARTITION OF top FOR VALUES IN (2);
CREATE UNIQUE INDEX mid_id ON mid USING gunique (id);
INSERT INTO top VALUES (1, 1, 1);
INSERT INTO top VALUES (1, 1, 1) ON CONFLICT DO NOTHING;
INSERT INTO top VALUES (1, 1, 2) ON CONFLICT DO NOTHING;
INSERT INTO mid VALUES (1, 1, 2) ON CONFLICT DO NOTHING;
INSERT INTO top VALUES (1, 2, 1) ON CONFLICT DO NOTHING;
SELECT tableoid::regclass, * FROM top ORDER BY id, a, b;

DROP SCHEMA glimu CASCADE;

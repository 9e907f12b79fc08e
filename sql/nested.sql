-- Statements nested in statements: a trigger's INSERT into a gunique tree
-- has its own probe state and leaves the outer statement's alone, and one
-- that fails inside an exception block takes only its own with it.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;

CREATE TABLE outer_t (id int, part int) PARTITION BY LIST (part);
CREATE TABLE outer_t0 PARTITION OF outer_t FOR VALUES IN (0);
CREATE TABLE outer_t1 PARTITION OF outer_t FOR VALUES IN (1);
CREATE TABLE outer_t2 PARTITION OF outer_t FOR VALUES IN (2);
CREATE UNIQUE INDEX outer_t_id ON outer_t USING gunique (id);

CREATE TABLE audit (id int, part int) PARTITION BY LIST (part);
CREATE TABLE audit0 PARTITION OF audit FOR VALUES IN (0);
CREATE TABLE audit1 PARTITION OF audit FOR VALUES IN (1);
CREATE UNIQUE INDEX audit_id ON audit USING gunique (id);

-- Each row of outer_t is audited (a nested INSERT into another tree), and
-- also tries to insert id + 1000 into outer_t itself, which fails for
-- ids that are already there; the failure is caught.
CREATE FUNCTION outer_t_audit() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
	INSERT INTO audit VALUES (NEW.id, NEW.id % 2);
	IF NEW.id < 1000 THEN
		BEGIN
			INSERT INTO outer_t VALUES (NEW.id + 1000, (NEW.id + 1) % 3);
		EXCEPTION WHEN unique_violation THEN
			RAISE NOTICE 'id % is taken', NEW.id + 1000;
		END;
	END IF;
	RETURN NEW;
END $$;
CREATE TRIGGER audit_rows AFTER INSERT ON outer_t
	FOR EACH ROW EXECUTE FUNCTION outer_t_audit();

INSERT INTO outer_t VALUES (1001, 0);
-- The nested INSERT of 1001 fails and is caught; the outer statement goes
-- on probing with its own state.
INSERT INTO outer_t SELECT i, i % 3 FROM generate_series(1, 10) i;
SELECT count(*) FROM outer_t;
SELECT count(*) FROM audit;

-- The outer statement still finds duplicates after nested ones ran: 7 is
-- in another partition than the one it goes to.
INSERT INTO outer_t VALUES (20, 2), (7, 0);
SELECT count(*) FROM outer_t;

-- A nested duplicate that is not caught fails the whole statement.
INSERT INTO audit VALUES (30, 0);
INSERT INTO outer_t VALUES (30, 1);
SELECT count(*) FROM outer_t WHERE id = 30;

-- Nothing stays open past a statement: its partitions can be detached
-- and dropped right after it, in the same transaction, after an INSERT
-- and after a COPY.
BEGIN;
INSERT INTO outer_t VALUES (40, 1);
ALTER TABLE outer_t DETACH PARTITION outer_t1;
DROP TABLE outer_t1;
COPY outer_t FROM stdin;
50	2
\.
ALTER TABLE outer_t DETACH PARTITION outer_t2;
DROP TABLE outer_t2;
COMMIT;
SELECT count(*) FROM outer_t;
SELECT * FROM gunique_verify('outer_t_id');

-- A savepoint rolled back after a nested failure leaves the outer
-- transaction's later statements able to probe.
BEGIN;
SAVEPOINT s;
INSERT INTO outer_t VALUES (59, 0), (59, 0);
ROLLBACK TO SAVEPOINT s;
INSERT INTO outer_t VALUES (62, 0);
INSERT INTO outer_t VALUES (1062, 0);
ROLLBACK;

DROP TABLE outer_t, audit;
DROP FUNCTION outer_t_audit();

-- A utility statement run by a trigger of the inserting statement may
-- truncate a partition that the statement's probes had open, as it may
-- with a unique btree.
CREATE TABLE trunc_t (id int, k int) PARTITION BY LIST (k);
CREATE TABLE trunc_t0 PARTITION OF trunc_t FOR VALUES IN (0);
CREATE TABLE trunc_t1 PARTITION OF trunc_t FOR VALUES IN (1);
CREATE UNIQUE INDEX ON trunc_t USING gunique (id);
INSERT INTO trunc_t VALUES (1, 1);
CREATE FUNCTION trunc_t1() RETURNS trigger LANGUAGE plpgsql AS
	$$BEGIN TRUNCATE trunc_t1; RETURN NULL; END$$;
CREATE TRIGGER trunc_after AFTER INSERT ON trunc_t
	FOR EACH STATEMENT EXECUTE FUNCTION trunc_t1();
INSERT INTO trunc_t VALUES (2, 0);
SELECT * FROM trunc_t ORDER BY id;
INSERT INTO trunc_t VALUES (1, 0), (3, 0);
SELECT * FROM trunc_t ORDER BY id;
DROP TABLE trunc_t;
DROP FUNCTION trunc_t1();

--
-- INSERT ... ON CONFLICT on tables with gunique indexes.
--
-- PostgreSQL 15 and 17 can only arbitrate ON CONFLICT with btree indexes;
-- gunique refuses the statement with a clear error there (expected output
-- onconflict.out).  PostgreSQL 18 asks the access method, and ON CONFLICT
-- works within a partition (onconflict_1.out).  There DO NOTHING also skips
-- a row whose key another partition holds, checked before the row is
-- routed; DO UPDATE of a row in another partition is a unique violation
-- with a hint, and so is DO NOTHING where a BEFORE INSERT row trigger or a
-- generated column may change the key.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA goc;
SET search_path = goc, public;
-- EXPLAIN ANALYZE with row counts as 15 and 17 print them (18 adds ".00"),
-- for a server of 15 or 17 with the core change of contrib-patches/
CREATE FUNCTION explain_analyze(q text) RETURNS SETOF text
LANGUAGE plpgsql AS $$
DECLARE
	l text;
BEGIN
	FOR l IN EXECUTE 'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF, BUFFERS OFF) ' || q
	LOOP
		RETURN NEXT regexp_replace(l, 'rows=(\d+)\.00 ', 'rows=\1 ', 'g');
	END LOOP;
END $$;

CREATE TABLE plain (a int, b text);
CREATE UNIQUE INDEX plain_a ON plain USING gunique (a);
INSERT INTO plain VALUES (1, 'one');
INSERT INTO plain VALUES (1, 'uno') ON CONFLICT DO NOTHING;
INSERT INTO plain VALUES (1, 'uno') ON CONFLICT (a) DO UPDATE SET b = excluded.b;
SELECT * FROM plain;

CREATE TABLE t (a int, b int, c text) PARTITION BY RANGE (a);
CREATE TABLE t1 PARTITION OF t FOR VALUES FROM (0) TO (10);
CREATE TABLE t2 PARTITION OF t FOR VALUES FROM (10) TO (20);
CREATE UNIQUE INDEX t_b ON t USING gunique (b);
INSERT INTO t VALUES (1, 1, 'first');
-- a conflict within the target partition
INSERT INTO t VALUES (2, 1, 'same partition') ON CONFLICT (b) DO UPDATE SET c = excluded.c;
INSERT INTO t VALUES (3, 1, 'ignored') ON CONFLICT DO NOTHING;
-- a conflict with another partition cannot be arbitrated
INSERT INTO t VALUES (11, 1, 'other partition') ON CONFLICT DO NOTHING;
INSERT INTO t VALUES (11, 1, 'other partition') ON CONFLICT (b) DO UPDATE SET c = excluded.c;
-- no conflict at all
INSERT INTO t VALUES (12, 2, 'new') ON CONFLICT DO NOTHING;
-- also when aimed at a partition directly
INSERT INTO t2 VALUES (13, 2, 'direct') ON CONFLICT (b) DO UPDATE SET c = excluded.c;
SELECT tableoid::regclass, * FROM t ORDER BY b;

-- The same through an auto-updatable view, which the rewriter turns into an
-- INSERT into the table, in a data-modifying WITH query, and in a rule's
-- action.
CREATE VIEW pv AS SELECT * FROM plain;
INSERT INTO pv VALUES (1, 'view') ON CONFLICT (a) DO UPDATE SET b = excluded.b;
CREATE VIEW tv AS SELECT * FROM t WHERE a < 10;
INSERT INTO tv VALUES (4, 1, 'view') ON CONFLICT DO NOTHING;
CREATE VIEW tvv AS SELECT * FROM tv;
INSERT INTO tvv VALUES (4, 1, 'view of a view') ON CONFLICT DO NOTHING;
WITH ins AS (
	INSERT INTO plain VALUES (1, 'with') ON CONFLICT (a) DO UPDATE SET b = excluded.b
	RETURNING *)
SELECT * FROM ins;
WITH ins AS (
	INSERT INTO t VALUES (5, 1, 'with') ON CONFLICT (b) DO UPDATE SET c = excluded.c
	RETURNING a, b, c)
SELECT * FROM ins;
WITH ins AS (
	INSERT INTO tv VALUES (5, 1, 'with, view') ON CONFLICT DO NOTHING
	RETURNING a, b, c)
SELECT count(*) FROM ins;
CREATE TABLE audit (a int);
CREATE RULE audit_plain AS ON INSERT TO audit
	DO ALSO INSERT INTO plain VALUES (NEW.a, 'rule') ON CONFLICT DO NOTHING;
INSERT INTO audit VALUES (1);
SELECT * FROM plain;
SELECT tableoid::regclass, * FROM t ORDER BY b;

-- A statement prepared before a gunique index was created on a partitioned
-- partition of its target: its plan is not invalidated.
CREATE TABLE pt (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE ps PARTITION OF pt FOR VALUES FROM (0) TO (10) PARTITION BY RANGE (b);
CREATE TABLE ps1 PARTITION OF ps FOR VALUES FROM (0) TO (10);
CREATE TABLE ps2 PARTITION OF ps FOR VALUES FROM (10) TO (20);
PREPARE ins_pt(int, int) AS INSERT INTO pt VALUES ($1, $2) ON CONFLICT DO NOTHING;
EXECUTE ins_pt(1, 1);
CREATE UNIQUE INDEX ps_a ON ps USING gunique (a);
EXECUTE ins_pt(2, 11);
DEALLOCATE ins_pt;
SELECT tableoid::regclass, * FROM pt ORDER BY a;

-- DO NOTHING across partitions: the row is skipped, not counted, not
-- returned; EXPLAIN shows the check and the rows it skipped.
CREATE TABLE ev (id int, ts date, v text) PARTITION BY RANGE (ts);
CREATE TABLE ev1 PARTITION OF ev FOR VALUES FROM ('2024-01-01') TO ('2024-02-01');
CREATE TABLE ev2 PARTITION OF ev FOR VALUES FROM ('2024-02-01') TO ('2024-03-01')
	PARTITION BY RANGE (id);
CREATE TABLE ev2a PARTITION OF ev2 FOR VALUES FROM (0) TO (100);
CREATE TABLE ev2b PARTITION OF ev2 FOR VALUES FROM (100) TO (1000);
CREATE UNIQUE INDEX ev_id ON ev USING gunique (id);
INSERT INTO ev VALUES (1, '2024-01-05', 'a'), (150, '2024-02-05', 'b');
EXPLAIN (COSTS OFF) INSERT INTO ev VALUES (1, '2024-02-05', 'x') ON CONFLICT DO NOTHING;
INSERT INTO ev VALUES (1, '2024-02-05', 'x') ON CONFLICT DO NOTHING;
INSERT INTO ev VALUES (1, '2024-02-05', 'x') ON CONFLICT (id) DO NOTHING RETURNING *;
INSERT INTO ev SELECT i, '2024-02-05', 'x' FROM generate_series(1, 4) i
	ON CONFLICT (id) DO NOTHING RETURNING *;
SELECT explain_analyze($$
INSERT INTO ev SELECT i, '2024-01-07', 'y' FROM generate_series(1, 6) i
	ON CONFLICT (id) DO NOTHING$$);
-- the same key twice in one statement, into different partitions
INSERT INTO ev VALUES (20, '2024-02-05', 'first'), (20, '2024-01-05', 'second')
	ON CONFLICT DO NOTHING RETURNING *;
-- into a partition, a partitioned one, and a key in another subtree
INSERT INTO ev1 VALUES (150, '2024-01-09', 'leaf') ON CONFLICT DO NOTHING;
INSERT INTO ev2 VALUES (5, '2024-02-09', 'middle') ON CONFLICT DO NOTHING;
INSERT INTO ev2a VALUES (150, '2024-02-09', 'leaf') ON CONFLICT DO NOTHING;
INSERT INTO ev2 VALUES (7, '2024-02-09', 'middle') ON CONFLICT DO NOTHING RETURNING *;
-- DO UPDATE of a row in another partition stays a violation
INSERT INTO ev VALUES (1, '2024-02-05', 'x') ON CONFLICT (id) DO UPDATE SET v = 'z';
-- a prepared statement, run past the generic plan
PREPARE up(int, date) AS INSERT INTO ev VALUES ($1, $2, 'p') ON CONFLICT DO NOTHING;
EXECUTE up(1, '2024-02-05'); EXECUTE up(2, '2024-01-05'); EXECUTE up(3, '2024-01-05');
EXECUTE up(4, '2024-01-05'); EXECUTE up(5, '2024-01-05'); EXECUTE up(30, '2024-01-05');
EXECUTE up(30, '2024-02-05');
DEALLOCATE up;
SELECT tableoid::regclass, * FROM ev ORDER BY id, ts;
SELECT id FROM ev GROUP BY id HAVING count(*) > 1;

-- An error after the check, under a savepoint: its upsert lock is gone
-- with the subtransaction, and the next upsert of the key waits for
-- nobody.
ALTER TABLE ev ADD CONSTRAINT v_not_bad CHECK (v <> 'bad');
BEGIN;
SAVEPOINT s;
INSERT INTO ev VALUES (40, '2024-02-05', 'bad') ON CONFLICT DO NOTHING;
ROLLBACK TO SAVEPOINT s;
INSERT INTO ev VALUES (40, '2024-02-05', 'good') ON CONFLICT DO NOTHING;
INSERT INTO ev VALUES (40, '2024-01-05', 'again') ON CONFLICT DO NOTHING;
COMMIT;
SELECT count(*) FROM pg_locks WHERE locktype = 'advisory';
SELECT tableoid::regclass, * FROM ev WHERE id = 40;

-- A row whose key any partition holds, its own too, is skipped before its
-- constraints are checked (one table checks them first), and a key's
-- expressions are evaluated before them.
INSERT INTO ev VALUES (40, '2024-02-05', 'bad') ON CONFLICT DO NOTHING;
CREATE TABLE evx (x int, p int, CHECK (x <> 0)) PARTITION BY LIST (p);
CREATE TABLE evx1 PARTITION OF evx FOR VALUES IN (1);
CREATE UNIQUE INDEX evx_key ON evx USING gunique ((100 / x));
INSERT INTO evx VALUES (0, 1) ON CONFLICT DO NOTHING;
INSERT INTO evx VALUES (0, 1);
DROP TABLE evx;

-- Two gunique indexes: without a target both arbitrate; with one named,
-- the other's conflict is a violation, as for any unique index.
CREATE TABLE two (a int, b int, p int) PARTITION BY LIST (p);
CREATE TABLE two1 PARTITION OF two FOR VALUES IN (1);
CREATE TABLE two2 PARTITION OF two FOR VALUES IN (2);
CREATE UNIQUE INDEX two_a ON two USING gunique (a);
CREATE UNIQUE INDEX two_b ON two USING gunique (b);
INSERT INTO two VALUES (1, 1, 1);
INSERT INTO two VALUES (1, 2, 2) ON CONFLICT DO NOTHING;
INSERT INTO two VALUES (2, 1, 2) ON CONFLICT DO NOTHING;
INSERT INTO two VALUES (2, 1, 2) ON CONFLICT (a) DO NOTHING;
INSERT INTO two VALUES (1, 3, 2) ON CONFLICT (a) DO NOTHING;
SELECT tableoid::regclass, * FROM two ORDER BY a;

-- An ordinary unique index as the arbiter: the gunique key is enforced.
CREATE TABLE mix (id int, code text, p int, PRIMARY KEY (code, p))
	PARTITION BY LIST (p);
CREATE TABLE mix1 PARTITION OF mix FOR VALUES IN (1);
CREATE TABLE mix2 PARTITION OF mix FOR VALUES IN (2);
CREATE UNIQUE INDEX mix_id ON mix USING gunique (id);
INSERT INTO mix VALUES (1, 'a', 1);
INSERT INTO mix VALUES (2, 'a', 1) ON CONFLICT (code, p) DO NOTHING;
INSERT INTO mix VALUES (1, 'b', 2) ON CONFLICT (code, p) DO NOTHING;
INSERT INTO mix VALUES (1, 'a', 1) ON CONFLICT (code, p) DO UPDATE SET id = 1;
SELECT tableoid::regclass, * FROM mix ORDER BY code;

-- Expression keys and partial indexes: a row outside the predicate is not
-- the index's to skip.
CREATE TABLE users (email text, active bool, p int) PARTITION BY LIST (p);
CREATE TABLE users1 PARTITION OF users FOR VALUES IN (1);
CREATE TABLE users2 PARTITION OF users FOR VALUES IN (2);
CREATE UNIQUE INDEX users_email ON users USING gunique (lower(email)) WHERE active;
INSERT INTO users VALUES ('Ann@example.com', true, 1);
INSERT INTO users VALUES ('ann@EXAMPLE.com', true, 2) ON CONFLICT DO NOTHING;
INSERT INTO users VALUES ('ann@EXAMPLE.com', false, 2) ON CONFLICT DO NOTHING;
SELECT tableoid::regclass, * FROM users ORDER BY p;

-- A BEFORE INSERT row trigger may change the key, and a generated column
-- is computed after routing: then DO NOTHING cannot check the key first.
CREATE TABLE trg (id int, p int) PARTITION BY LIST (p);
CREATE TABLE trg1 PARTITION OF trg FOR VALUES IN (1);
CREATE TABLE trg2 PARTITION OF trg FOR VALUES IN (2);
CREATE UNIQUE INDEX trg_id ON trg USING gunique (id);
INSERT INTO trg VALUES (1, 1);
INSERT INTO trg VALUES (2, 2) ON CONFLICT DO NOTHING;	-- checked, no trigger yet
CREATE FUNCTION rekey() RETURNS trigger LANGUAGE plpgsql AS
$$BEGIN NEW.id := NEW.id + 100; RETURN NEW; END$$;
CREATE TRIGGER rekey BEFORE INSERT ON trg2 FOR EACH ROW EXECUTE FUNCTION rekey();
INSERT INTO trg VALUES (1, 2) ON CONFLICT DO NOTHING RETURNING *;
INSERT INTO trg VALUES (101, 1) ON CONFLICT DO NOTHING;
INSERT INTO trg VALUES (1, 2) ON CONFLICT DO NOTHING;
SELECT tableoid::regclass, * FROM trg ORDER BY id;
CREATE TABLE gen (x int, id int GENERATED ALWAYS AS (x * 2) STORED, p int)
	PARTITION BY LIST (p);
CREATE TABLE gen1 PARTITION OF gen FOR VALUES IN (1);
CREATE TABLE gen2 PARTITION OF gen FOR VALUES IN (2);
CREATE UNIQUE INDEX gen_id ON gen USING gunique (id);
INSERT INTO gen (x, p) VALUES (1, 1);
INSERT INTO gen (x, p) VALUES (1, 2) ON CONFLICT DO NOTHING;

-- A gunique index made on a partition alone: nothing else to look in.
CREATE TABLE own (id int, p int) PARTITION BY LIST (p);
CREATE TABLE own1 PARTITION OF own FOR VALUES IN (1);
CREATE UNIQUE INDEX own1_id ON own1 USING gunique (id);
INSERT INTO own1 VALUES (1, 1) ON CONFLICT DO NOTHING;
INSERT INTO own1 VALUES (1, 1) ON CONFLICT DO NOTHING;
SELECT * FROM own;

-- 64 leaves or more: a speculative insertion probes light, from the
-- list of the group's leaves by tag that every leaf's probes share; a row
-- into many_0 makes the list first, and must not leave many_0 out of it
-- for the row into many_5 whose key many_0 holds.
-- partitions parent_0 .. parent_(n - 1) of a table listed by p
CREATE PROCEDURE list_parts(parent text, n int) LANGUAGE plpgsql AS $$
BEGIN
	FOR i IN 0 .. n - 1 LOOP
		EXECUTE format('CREATE TABLE %I PARTITION OF %I FOR VALUES IN (%s)',
					   parent || '_' || i, parent, i);
	END LOOP;
END $$;
CREATE TABLE many (id int, p int) PARTITION BY LIST (p);
CALL list_parts('many', 70);
CREATE UNIQUE INDEX many_id ON many USING gunique (id);
INSERT INTO many SELECT i, i % 70 FROM generate_series(1, 700) i;
SELECT count(*) FROM (SELECT gunique_build_filters('many_id')) f;
INSERT INTO many VALUES (1000, 0), (70, 5)
  ON CONFLICT (id) DO UPDATE SET p = excluded.p;
INSERT INTO many VALUES (1000, 0), (70, 5) ON CONFLICT DO NOTHING;
SELECT tableoid::regclass, * FROM many WHERE id IN (70, 1000) ORDER BY id;
SELECT count(*), count(DISTINCT id) FROM many;

-- A partition with two gunique indexes that take every insert (siblings,
-- as REINDEX CONCURRENTLY leaves for a while): the older one, made first,
-- has the row before the leaf's probe runs, which must pass over every
-- index of own partition, and other partitions' probes must search both.
CREATE TABLE twin (id int, p int) PARTITION BY LIST (p);
CALL list_parts('twin', 70);
CREATE UNIQUE INDEX twin_5_old ON twin_5 USING gunique (id);
CREATE UNIQUE INDEX twin_id ON twin USING gunique (id);
INSERT INTO twin SELECT i, i % 70 FROM generate_series(1, 700) i;
SELECT count(*) FROM (SELECT gunique_build_filters('twin_id')) f;
DELETE FROM twin WHERE id IN (75, 145);
INSERT INTO twin VALUES (1000, 0), (75, 5);			-- 75 comes back
INSERT INTO twin VALUES (1001, 0), (145, 5) ON CONFLICT DO NOTHING;
INSERT INTO twin VALUES (5, 7);						-- held by twin_5
INSERT INTO twin VALUES (5, 7) ON CONFLICT DO NOTHING RETURNING *;
SELECT count(*), count(DISTINCT id) FROM twin;

-- An index as PostgreSQL's insert_conflict test writes one (version 1.7's
-- pattern class): its columns name it, as for any index; an operator
-- class in the inference is looked up among btree's by the parser, so it
-- names no gunique index.
CREATE TABLE fruit (key int, fruit text, p int) PARTITION BY LIST (p);
CREATE TABLE fruit_0 PARTITION OF fruit FOR VALUES IN (0);
CREATE TABLE fruit_1 PARTITION OF fruit FOR VALUES IN (1);
CREATE UNIQUE INDEX fruit_key ON fruit USING gunique (key, fruit text_pattern_ops);
INSERT INTO fruit VALUES (1, 'Apple', 0);
INSERT INTO fruit VALUES (1, 'Apple', 1), (1, 'apple', 1)
  ON CONFLICT (key, fruit) DO NOTHING;
INSERT INTO fruit VALUES (1, 'Apple', 0) ON CONFLICT (key, fruit text_pattern_ops) DO NOTHING;
SELECT tableoid::regclass, * FROM fruit ORDER BY fruit COLLATE "C";

DROP SCHEMA goc CASCADE;

--
-- INSERT ... ON CONFLICT on tables with gunique indexes.
--
-- PostgreSQL 15 and 17 can only arbitrate ON CONFLICT with btree indexes;
-- gunique refuses the statement with a clear error there (expected output
-- onconflict.out).  PostgreSQL 18 asks the access method, and ON CONFLICT
-- works within a partition; a conflict with another partition is a unique
-- violation with a hint (onconflict_1.out).
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE SCHEMA goc;
SET search_path = goc, public;

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

DROP SCHEMA goc CASCADE;

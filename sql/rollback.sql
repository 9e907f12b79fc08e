-- Shared state built by a transaction that changed the tree, then rolled
-- back: the group's key filter must not lose the keys of a partition that
-- the rollback brings back (DETACH, DROP, TRUNCATE; ROLLBACK and ROLLBACK
-- TO SAVEPOINT).  Enough new keys to outgrow the group's filter, so that
-- an insert wants it rebuilt, inside the transaction.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE TABLE rb (p int NOT NULL, k int) PARTITION BY RANGE (p);
SELECT format('CREATE TABLE rb_%s PARTITION OF rb FOR VALUES FROM (%s) TO (%s)',
			  i, i * 1000, (i + 1) * 1000)
FROM generate_series(0, 19) i \gexec
INSERT INTO rb SELECT (i * 7) % 20000, i FROM generate_series(1, 2000) i;
CREATE UNIQUE INDEX rb_k ON rb USING gunique (k);
SELECT tableoid::regclass, p, k FROM rb WHERE k = 42;

-- one statement's worth of new keys into partitions 1 .. 19
CREATE FUNCTION rb_fill(base int) RETURNS void LANGUAGE sql AS $$
	INSERT INTO rb SELECT 1000 + (i % 19000), base + i
	FROM generate_series(1, 60000) i;
$$;

BEGIN;
ALTER TABLE rb DETACH PARTITION rb_0;
SELECT rb_fill(100000);
ROLLBACK;
INSERT INTO rb VALUES (5000, 42);

BEGIN;
DROP TABLE rb_0;
SELECT rb_fill(200000);
ROLLBACK;
INSERT INTO rb VALUES (5000, 42);

BEGIN;
TRUNCATE rb_0;
SELECT rb_fill(300000);
ROLLBACK;
INSERT INTO rb VALUES (5000, 42);

BEGIN;
SAVEPOINT s;
ALTER TABLE rb DETACH PARTITION rb_0;
SELECT rb_fill(400000);
ROLLBACK TO SAVEPOINT s;
SELECT rb_fill(500000);
COMMIT;
INSERT INTO rb VALUES (5000, 42);

-- a transaction that changed the tree and commits
BEGIN;
TRUNCATE rb_3;
SELECT rb_fill(600000);
COMMIT;
INSERT INTO rb VALUES (5000, 42);
INSERT INTO rb VALUES (3500, 600001);

SELECT * FROM gunique_verify('rb_k');
SELECT count(*) FROM (SELECT k FROM rb GROUP BY k HAVING count(*) > 1) d;

DROP TABLE rb;
DROP FUNCTION rb_fill(int);
DROP EXTENSION gunique;

--
-- gunique_check_leaves(): amcheck's nbtree checks on every leaf of a tree
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
DROP EXTENSION IF EXISTS amcheck;
RESET client_min_messages;
CREATE SCHEMA gc;
SET search_path = gc, public;

CREATE TABLE t (a int, b int) PARTITION BY RANGE (a);
CREATE TABLE t1 PARTITION OF t FOR VALUES FROM (0) TO (1000);
CREATE TABLE t2 PARTITION OF t FOR VALUES FROM (1000) TO (2000)
	PARTITION BY RANGE (a);
CREATE TABLE t2a PARTITION OF t2 FOR VALUES FROM (1000) TO (1500);
CREATE TABLE t2b PARTITION OF t2 FOR VALUES FROM (1500) TO (2000);
INSERT INTO t SELECT g, g FROM generate_series(0, 1999) g;
CREATE UNIQUE INDEX t_b ON t USING gunique (b);

-- amcheck does the checking, so it must be there
SELECT gunique_check_leaves('t_b');

CREATE EXTENSION amcheck;
-- amcheck by itself refuses a leaf (in words that vary by version)
CREATE FUNCTION amcheck_refuses(leaf regclass) RETURNS boolean
LANGUAGE plpgsql AS $$
BEGIN
	PERFORM bt_index_check(leaf);
	RETURN false;
EXCEPTION WHEN feature_not_supported THEN
	RETURN true;
END
$$;
SELECT amcheck_refuses('t1_b_idx');

-- every leaf under the index named: a whole tree from the top, part of it
-- from a member; with the heap's rows, and with the parent checks
SELECT gunique_check_leaves('t_b');
SELECT gunique_check_leaves('t2_b_idx', heapallindexed => true);
SELECT gunique_check_leaves('t_b', parent => true);
SELECT gunique_check_leaves('t_b', heapallindexed => true, parent => true);
SELECT gunique_check_leaves('t1_b_idx');

-- a gunique index on a table that is not partitioned is a tree of one leaf
CREATE TABLE p (b int);
INSERT INTO p SELECT generate_series(1, 100);
CREATE UNIQUE INDEX p_b ON p USING gunique (b);
SELECT gunique_check_leaves('p_b', true, true);

-- only gunique indexes
CREATE INDEX p_b_btree ON p (b);
SELECT gunique_check_leaves('p_b_btree');

-- break a leaf on purpose (superuser catalog surgery): a row inserted while
-- the leaf takes no inserts has no entry in it.  The structure is sound, so
-- only the heap check finds it.
UPDATE pg_index SET indisready = false WHERE indexrelid = 't2b_b_idx'::regclass;
INSERT INTO t VALUES (1999, 5000);
UPDATE pg_index SET indisready = true WHERE indexrelid = 't2b_b_idx'::regclass;
SELECT gunique_check_leaves('t_b');
SELECT gunique_check_leaves('t_b', heapallindexed => true);
-- the leaf is shown as btree to amcheck only during the call
SELECT amcheck_refuses('t2b_b_idx');
REINDEX INDEX t2b_b_idx;
SELECT gunique_check_leaves('t_b', heapallindexed => true);

-- every gunique tree, as the README shows it (of this schema only: other
-- tests leave trees behind)
SELECT c.oid::regclass, gunique_check_leaves(c.oid, heapallindexed => true)
  FROM pg_class c JOIN pg_am a ON a.oid = c.relam
 WHERE a.amname = 'gunique' AND NOT c.relispartition
   AND c.relnamespace = 'gc'::regnamespace
 ORDER BY c.relname;

-- amcheck's functions run only for those allowed to execute them
CREATE ROLE regress_gunique_checker;
GRANT USAGE ON SCHEMA gc TO regress_gunique_checker;
SET ROLE regress_gunique_checker;
SELECT gunique_check_leaves('t_b');
SELECT gunique_check_leaves('t_b', parent => true);
RESET ROLE;
GRANT EXECUTE ON FUNCTION bt_index_check(regclass, boolean)
	TO regress_gunique_checker;
SET ROLE regress_gunique_checker;
SELECT gunique_check_leaves('t_b');
SELECT gunique_check_leaves('t_b', parent => true);
RESET ROLE;

DROP EXTENSION amcheck;
RESET search_path;
DROP SCHEMA gc CASCADE;
DROP ROLE regress_gunique_checker;

--
-- The limitations README.md documents, each as it behaves today: a change
-- in any of them fails this test, and README.md must change with it.
-- PostgreSQL 15 and 17 (limits.out) differ from 18 (limits_1.out) in join
-- removal and REFRESH MATERIALIZED VIEW CONCURRENTLY.  ON CONFLICT DO
-- NOTHING's are in limits-upsert.sql, and what needs a server setting or
-- a client program in t/022_limits.pl; src/README ("Limitations and the
-- tests that pin them") lists where each limitation is pinned.
--
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
CREATE EXTENSION IF NOT EXISTS amcheck;
CREATE EXTENSION IF NOT EXISTS pageinspect;
RESET client_min_messages;
CREATE SCHEMA glim;
SET search_path = glim, public;

--
-- pageinspect refuses a leaf where it opens an index by name (not a btree
-- to it), as amcheck's functions do (checkleaves.sql); its reading of a
-- raw page works, and gunique_check_leaves runs amcheck on the leaves.
--
CREATE TABLE leafy (id int, p int) PARTITION BY LIST (p);
CREATE TABLE leafy1 PARTITION OF leafy FOR VALUES IN (1);
CREATE TABLE leafy2 PARTITION OF leafy FOR VALUES IN (2);
CREATE UNIQUE INDEX leafy_id ON leafy USING gunique (id);
INSERT INTO leafy SELECT i, 1 + i % 2 FROM generate_series(1, 2000) i;
SELECT * FROM bt_metap('leafy1_id_idx');
SELECT * FROM bt_page_stats('leafy1_id_idx', 1);
SELECT * FROM bt_page_items('leafy1_id_idx', 1);
SELECT itemoffset, itemlen, data
  FROM bt_page_items(get_raw_page('leafy1_id_idx', 1)) LIMIT 3;
SELECT gunique_check_leaves('leafy_id');

--
-- Proving uniqueness.  PostgreSQL 15 and 17 match a join's clauses to a
-- unique index by btree's operator families, so a gunique index does not
-- let the planner remove a LEFT JOIN to its table (on 15 a partitioned
-- table's unique btree does not either); 18 removes them (limits_1.out).
-- A unique btree is the control.  Nested loops only, for one plan shape
-- on 15 and 17.
--
CREATE TABLE ref (id int, code int);
CREATE UNIQUE INDEX ref_id ON ref USING gunique (id);
CREATE UNIQUE INDEX ref_code ON ref USING btree (code);
CREATE TABLE pref (id int, p int) PARTITION BY LIST (p);
CREATE TABLE pref1 PARTITION OF pref FOR VALUES IN (1);
CREATE UNIQUE INDEX pref_id ON pref USING gunique (id);
CREATE TABLE src (id int, r int);
SET enable_hashjoin = off;
SET enable_mergejoin = off;
EXPLAIN (COSTS OFF) SELECT src.* FROM src LEFT JOIN ref ON ref.id = src.r;
EXPLAIN (COSTS OFF) SELECT src.* FROM src LEFT JOIN pref ON pref.id = src.r;
EXPLAIN (COSTS OFF) SELECT src.* FROM src LEFT JOIN ref ON ref.code = src.r;
RESET enable_hashjoin;
RESET enable_mergejoin;

--
-- What needs btree, as for any other access method: a constraint made of
-- an index, so no constraint names a gunique index and ON CONFLICT ON
-- CONSTRAINT cannot name one (ON CONFLICT (id) names its columns:
-- onconflict.sql); REFRESH MATERIALIZED VIEW CONCURRENTLY before 18, which
-- takes a unique index of any access method that tells its equality
-- (limits_1.out).
--
ALTER TABLE ref ADD CONSTRAINT ref_id_key UNIQUE USING INDEX ref_id;
ALTER TABLE ref ADD CONSTRAINT ref_pkey PRIMARY KEY USING INDEX ref_id;
ALTER TABLE pref ADD CONSTRAINT pref_id_key UNIQUE USING INDEX pref_id;
INSERT INTO ref VALUES (1, 1) ON CONFLICT ON CONSTRAINT ref_id DO NOTHING;
CREATE MATERIALIZED VIEW mv AS SELECT g AS id FROM generate_series(1, 3) g;
CREATE UNIQUE INDEX mv_id ON mv USING gunique (id);
REFRESH MATERIALIZED VIEW CONCURRENTLY mv;
CREATE UNIQUE INDEX mv_id_btree ON mv USING btree (id);
REFRESH MATERIALIZED VIEW CONCURRENTLY mv;

--
-- Row comparisons: (a, b) > (x, y) is no index condition of a gunique
-- index (PostgreSQL matches row comparisons to btree indexes only), while
-- (a, b) = (x, y) is two equalities, an index condition and a lookup.
--
CREATE TABLE pair (a int, b int);
CREATE UNIQUE INDEX pair_ab ON pair USING gunique (a, b);
INSERT INTO pair SELECT i, i FROM generate_series(1, 1000) i;
ANALYZE pair;
SET enable_seqscan = off;
EXPLAIN (COSTS OFF) SELECT * FROM pair WHERE (a, b) > (998, 1);
EXPLAIN (COSTS OFF) SELECT * FROM pair WHERE (a, b) = (998, 998);
RESET enable_seqscan;
SELECT * FROM pair WHERE (a, b) > (998, 1);
CREATE TABLE ppair (a int, b int, p int) PARTITION BY LIST (p);
CREATE TABLE ppair1 PARTITION OF ppair FOR VALUES IN (1);
CREATE TABLE ppair2 PARTITION OF ppair FOR VALUES IN (2);
CREATE UNIQUE INDEX ppair_ab ON ppair USING gunique (a, b);
EXPLAIN (COSTS OFF) SELECT * FROM ppair WHERE (a, b) = (1, 2);
EXPLAIN (COSTS OFF) SELECT * FROM ppair WHERE (a, b) > (1, 2);

--
-- Lookups by the key do not serve a key that comes from another table:
-- on the inner side of a join every partition is searched.
--
SET enable_hashjoin = off;
SET enable_mergejoin = off;
EXPLAIN (COSTS OFF) SELECT src.r, leafy.p FROM src JOIN leafy ON leafy.id = src.r;
RESET enable_hashjoin;
RESET enable_mergejoin;

--
-- name keys are stored as name, where btree stores cstring.
--
CREATE TABLE nm (n name);
CREATE UNIQUE INDEX nm_gunique ON nm USING gunique (n);
CREATE UNIQUE INDEX nm_btree ON nm USING btree (n);
SELECT attrelid::regclass, atttypid::regtype
  FROM pg_attribute WHERE attrelid IN ('nm_gunique'::regclass, 'nm_btree'::regclass)
 ORDER BY 1::text;

--
-- A type without a gunique operator class is refused; an expression that
-- casts it to a supported type can be indexed.
--
CREATE TABLE doc (d jsonb);
CREATE UNIQUE INDEX doc_d ON doc USING gunique (d);
CREATE UNIQUE INDEX doc_d ON doc USING gunique ((d::text));

DROP SCHEMA glim CASCADE;
DROP EXTENSION amcheck;

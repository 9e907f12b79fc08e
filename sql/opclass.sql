--
-- opclass: every gunique operator class on a plain table.
--
-- For each type: a unique gunique index, a rejected duplicate (btree's
-- message, SQLSTATE 23505) and an equality lookup that uses the index.
-- Then cross-type lookups, the catalog comparison with btree's operator
-- families, amvalidate, and nbtree's deduplication safety flag.
--
CREATE EXTENSION IF NOT EXISTS gunique;

CREATE SCHEMA gu_opclass;
SET search_path = gu_opclass, public;
SET TimeZone = 'UTC';
SET DateStyle = 'ISO, YMD';
SET IntervalStyle = 'postgres';
SET extra_float_digits = 0;
-- Stable plans on tiny tables.
SET enable_seqscan = off;
SET enable_bitmapscan = off;

-- int2
CREATE TABLE t_int2 (k int2, v text);
CREATE UNIQUE INDEX t_int2_k ON t_int2 USING gunique (k);
INSERT INTO t_int2 VALUES (1, 'one'), (2, 'two'), (3, 'three');
INSERT INTO t_int2 VALUES (2, 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_int2 WHERE k = 2::int2;
SELECT * FROM t_int2 WHERE k = 2::int2;

-- int4
CREATE TABLE t_int4 (k int4, v text);
CREATE UNIQUE INDEX t_int4_k ON t_int4 USING gunique (k);
INSERT INTO t_int4 VALUES (-2147483648, 'min'), (0, 'zero'), (2147483647, 'max');
INSERT INTO t_int4 VALUES (0, 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_int4 WHERE k = 2147483647;
SELECT * FROM t_int4 WHERE k = 2147483647;

-- int8
CREATE TABLE t_int8 (k int8, v text);
CREATE UNIQUE INDEX t_int8_k ON t_int8 USING gunique (k);
INSERT INTO t_int8 VALUES (-9223372036854775808, 'min'), (0, 'zero'), (9223372036854775807, 'max');
INSERT INTO t_int8 VALUES (9223372036854775807, 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_int8 WHERE k = 9223372036854775807;
SELECT * FROM t_int8 WHERE k = 9223372036854775807;

-- numeric: equality ignores the display scale, so 2.5 duplicates 2.50
CREATE TABLE t_numeric (k numeric, v text);
CREATE UNIQUE INDEX t_numeric_k ON t_numeric USING gunique (k);
INSERT INTO t_numeric VALUES (1.5, 'a'), (2.50, 'b'), ('NaN', 'nan');
INSERT INTO t_numeric VALUES (2.5, 'dup');
\echo :LAST_ERROR_SQLSTATE
INSERT INTO t_numeric VALUES ('NaN', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_numeric WHERE k = 2.5;
SELECT * FROM t_numeric WHERE k = 2.5;

-- float4: -0 equals 0
CREATE TABLE t_float4 (k float4, v text);
CREATE UNIQUE INDEX t_float4_k ON t_float4 USING gunique (k);
INSERT INTO t_float4 VALUES (0, 'zero'), (1.5, 'x'), ('NaN', 'nan'), ('-Infinity', 'ninf');
INSERT INTO t_float4 VALUES ('-0', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_float4 WHERE k = 1.5::float4;
SELECT * FROM t_float4 WHERE k = 1.5::float4;

-- float8: NaN equals NaN for btree ordering
CREATE TABLE t_float8 (k float8, v text);
CREATE UNIQUE INDEX t_float8_k ON t_float8 USING gunique (k);
INSERT INTO t_float8 VALUES (0, 'zero'), (1.25, 'x'), ('NaN', 'nan'), ('Infinity', 'inf');
INSERT INTO t_float8 VALUES ('NaN', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_float8 WHERE k = 'NaN'::float8;
SELECT * FROM t_float8 WHERE k = 'NaN'::float8;

-- bool
CREATE TABLE t_bool (k bool, v text);
CREATE UNIQUE INDEX t_bool_k ON t_bool USING gunique (k);
INSERT INTO t_bool VALUES (true, 'yes'), (false, 'no'), (NULL, 'null 1'), (NULL, 'null 2');
INSERT INTO t_bool VALUES (true, 'dup');
\echo :LAST_ERROR_SQLSTATE
-- "k = true" with a constant is simplified to "k", which PostgreSQL 15
-- matches only to btree's and hash's own boolean families; a parameter keeps
-- the equality operator.
PREPARE bool_eq(bool) AS SELECT * FROM t_bool WHERE k = $1;
SET plan_cache_mode = force_generic_plan;
EXPLAIN (COSTS OFF) EXECUTE bool_eq(true);
EXECUTE bool_eq(true);
EXECUTE bool_eq(false);
RESET plan_cache_mode;
DEALLOCATE bool_eq;

-- "char"
CREATE TABLE t_char (k "char", v text);
CREATE UNIQUE INDEX t_char_k ON t_char USING gunique (k);
INSERT INTO t_char VALUES ('a', 'a'), ('b', 'b'), ('z', 'z');
INSERT INTO t_char VALUES ('b', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_char WHERE k = 'b';
SELECT * FROM t_char WHERE k = 'b';

-- name
CREATE TABLE t_name (k name, v text);
CREATE UNIQUE INDEX t_name_k ON t_name USING gunique (k);
INSERT INTO t_name VALUES ('alpha', 'a'), ('beta', 'b'), ('gamma', 'g');
INSERT INTO t_name VALUES ('beta', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_name WHERE k = 'beta'::name;
SELECT * FROM t_name WHERE k = 'beta'::name;

-- text
CREATE TABLE t_text (k text, v text);
CREATE UNIQUE INDEX t_text_k ON t_text USING gunique (k);
INSERT INTO t_text VALUES ('alpha', 'a'), ('Beta', 'b'), ('beta', 'b2'), (repeat('x', 3000), 'long');
INSERT INTO t_text VALUES ('Beta', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_text WHERE k = 'beta';
SELECT * FROM t_text WHERE k = 'beta';

-- varchar, through text_ops
CREATE TABLE t_varchar (k varchar(10), v text);
CREATE UNIQUE INDEX t_varchar_k ON t_varchar USING gunique (k);
INSERT INTO t_varchar VALUES ('alpha', 'a'), ('beta', 'b');
INSERT INTO t_varchar VALUES ('alpha', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_varchar WHERE k = 'alpha';
SELECT * FROM t_varchar WHERE k = 'alpha';

-- bpchar: trailing blanks are insignificant
CREATE TABLE t_bpchar (k char(5), v text);
CREATE UNIQUE INDEX t_bpchar_k ON t_bpchar USING gunique (k);
INSERT INTO t_bpchar VALUES ('ab', 'a'), ('cd', 'c');
INSERT INTO t_bpchar VALUES ('ab   ', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_bpchar WHERE k = 'ab';
SELECT * FROM t_bpchar WHERE k = 'ab';

-- bytea
CREATE TABLE t_bytea (k bytea, v text);
CREATE UNIQUE INDEX t_bytea_k ON t_bytea USING gunique (k);
INSERT INTO t_bytea VALUES ('\x00', 'a'), ('\x0102', 'b'), ('\xff', 'c'), ('', 'empty');
INSERT INTO t_bytea VALUES ('\x0102', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_bytea WHERE k = '\x0102'::bytea;
SELECT * FROM t_bytea WHERE k = '\x0102'::bytea;

-- uuid
CREATE TABLE t_uuid (k uuid, v text);
CREATE UNIQUE INDEX t_uuid_k ON t_uuid USING gunique (k);
INSERT INTO t_uuid VALUES ('00000000-0000-0000-0000-000000000000', 'nil'),
  ('a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11', 'a'), ('ffffffff-ffff-ffff-ffff-ffffffffffff', 'max');
INSERT INTO t_uuid VALUES ('A0EEBC99-9C0B-4EF8-BB6D-6BB9BD380A11', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_uuid WHERE k = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11';
SELECT * FROM t_uuid WHERE k = 'a0eebc99-9c0b-4ef8-bb6d-6bb9bd380a11';

-- oid
CREATE TABLE t_oid (k oid, v text);
CREATE UNIQUE INDEX t_oid_k ON t_oid USING gunique (k);
INSERT INTO t_oid VALUES (0, 'zero'), (42, 'x'), (4294967295, 'max');
INSERT INTO t_oid VALUES (4294967295, 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_oid WHERE k = 42::oid;
SELECT * FROM t_oid WHERE k = 42::oid;

-- date
CREATE TABLE t_date (k date, v text);
CREATE UNIQUE INDEX t_date_k ON t_date USING gunique (k);
INSERT INTO t_date VALUES ('2024-01-01', 'a'), ('2024-01-02', 'b'), ('infinity', 'inf');
INSERT INTO t_date VALUES ('2024-01-02', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_date WHERE k = '2024-01-02'::date;
SELECT * FROM t_date WHERE k = '2024-01-02'::date;

-- time
CREATE TABLE t_time (k time, v text);
CREATE UNIQUE INDEX t_time_k ON t_time USING gunique (k);
INSERT INTO t_time VALUES ('00:00', 'midnight'), ('12:30:15.5', 'b'), ('24:00', 'end');
INSERT INTO t_time VALUES ('12:30:15.500', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_time WHERE k = '12:30:15.5'::time;
SELECT * FROM t_time WHERE k = '12:30:15.5'::time;

-- timetz: the same instant in another zone is a different value
CREATE TABLE t_timetz (k timetz, v text);
CREATE UNIQUE INDEX t_timetz_k ON t_timetz USING gunique (k);
INSERT INTO t_timetz VALUES ('12:00+00', 'a'), ('13:00+01', 'b');
INSERT INTO t_timetz VALUES ('13:00+01', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_timetz WHERE k = '13:00+01'::timetz;
SELECT * FROM t_timetz WHERE k = '13:00+01'::timetz;

-- timestamp
CREATE TABLE t_timestamp (k timestamp, v text);
CREATE UNIQUE INDEX t_timestamp_k ON t_timestamp USING gunique (k);
INSERT INTO t_timestamp VALUES ('2024-01-01 00:00', 'a'), ('2024-01-02 00:00', 'b'),
  ('2024-01-02 10:00', 'c'), ('-infinity', 'ninf');
INSERT INTO t_timestamp VALUES ('2024-01-02 10:00:00.000', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_timestamp WHERE k = '2024-01-02 10:00'::timestamp;
SELECT * FROM t_timestamp WHERE k = '2024-01-02 10:00'::timestamp;

-- timestamptz: the same instant written in another zone is a duplicate
CREATE TABLE t_timestamptz (k timestamptz, v text);
CREATE UNIQUE INDEX t_timestamptz_k ON t_timestamptz USING gunique (k);
INSERT INTO t_timestamptz VALUES ('2024-01-01 12:00+00', 'a'), ('2024-01-02 00:00+00', 'b');
INSERT INTO t_timestamptz VALUES ('2024-01-01 13:00+01', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_timestamptz WHERE k = '2024-01-01 12:00+00'::timestamptz;
SELECT * FROM t_timestamptz WHERE k = '2024-01-01 12:00+00'::timestamptz;

-- interval: '1 day' and '24 hours' compare equal
CREATE TABLE t_interval (k interval, v text);
CREATE UNIQUE INDEX t_interval_k ON t_interval USING gunique (k);
INSERT INTO t_interval VALUES ('1 day', 'a'), ('1 mon', 'b'), ('00:00:01', 'c');
INSERT INTO t_interval VALUES ('24 hours', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_interval WHERE k = '30 days'::interval;
SELECT * FROM t_interval WHERE k = '30 days'::interval;

-- inet
CREATE TABLE t_inet (k inet, v text);
CREATE UNIQUE INDEX t_inet_k ON t_inet USING gunique (k);
INSERT INTO t_inet VALUES ('10.0.0.1', 'host'), ('10.0.0.0/8', 'net'), ('::1', 'v6');
INSERT INTO t_inet VALUES ('10.0.0.1/32', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_inet WHERE k = '10.0.0.0/8'::inet;
SELECT * FROM t_inet WHERE k = '10.0.0.0/8'::inet;

-- cidr, through inet_ops
CREATE TABLE t_cidr (k cidr, v text);
CREATE UNIQUE INDEX t_cidr_k ON t_cidr USING gunique (k);
INSERT INTO t_cidr VALUES ('10.0.0.0/8', 'a'), ('10.0.0.0/16', 'b'), ('192.168.1.0/24', 'c');
INSERT INTO t_cidr VALUES ('10.0/16', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_cidr WHERE k = '10.0.0.0/16'::cidr;
SELECT * FROM t_cidr WHERE k = '10.0.0.0/16'::cidr;

-- macaddr
CREATE TABLE t_macaddr (k macaddr, v text);
CREATE UNIQUE INDEX t_macaddr_k ON t_macaddr USING gunique (k);
INSERT INTO t_macaddr VALUES ('08:00:2b:01:02:03', 'a'), ('08:00:2b:01:02:04', 'b');
INSERT INTO t_macaddr VALUES ('08-00-2B-01-02-03', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_macaddr WHERE k = '08:00:2b:01:02:04'::macaddr;
SELECT * FROM t_macaddr WHERE k = '08:00:2b:01:02:04'::macaddr;

-- an enum, through anyenum's enum_ops; order is the enum's, not the label's
CREATE TYPE mood AS ENUM ('sad', 'ok', 'happy');
CREATE TABLE t_enum (k mood, v text);
CREATE UNIQUE INDEX t_enum_k ON t_enum USING gunique (k);
INSERT INTO t_enum VALUES ('happy', 'h'), ('sad', 's'), ('ok', 'o');
INSERT INTO t_enum VALUES ('ok', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_enum WHERE k = 'ok';
SELECT * FROM t_enum WHERE k = 'ok';
EXPLAIN (COSTS OFF) SELECT k FROM t_enum WHERE k > 'sad' ORDER BY k;
SELECT k FROM t_enum WHERE k > 'sad' ORDER BY k;

-- The pattern classes (version 1.7), as btree's: byte order whatever the
-- collation (~<~ and the like, and "ORDER BY ... USING ~<~"), with "=" as
-- the equality.
CREATE TABLE t_text_pattern (k text, v text);
CREATE UNIQUE INDEX t_text_pattern_k ON t_text_pattern USING gunique (k text_pattern_ops);
INSERT INTO t_text_pattern VALUES ('alpha', 'a'), ('Beta', 'b'), ('beta', 'b2'), ('Zeta', 'z');
INSERT INTO t_text_pattern VALUES ('Beta', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_text_pattern WHERE k = 'beta';
SELECT * FROM t_text_pattern WHERE k = 'beta';
EXPLAIN (COSTS OFF) SELECT k FROM t_text_pattern WHERE k ~>=~ 'B' AND k ~<~ 'b' ORDER BY k USING ~<~;
SELECT k FROM t_text_pattern WHERE k ~>=~ 'B' AND k ~<~ 'b' ORDER BY k USING ~<~;

-- varchar_pattern_ops, the same family's class for varchar columns
CREATE TABLE t_varchar_pattern (k varchar(10), v text);
CREATE UNIQUE INDEX t_varchar_pattern_k ON t_varchar_pattern USING gunique (k varchar_pattern_ops);
INSERT INTO t_varchar_pattern VALUES ('alpha', 'a'), ('Beta', 'b');
INSERT INTO t_varchar_pattern VALUES ('alpha', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_varchar_pattern WHERE k = 'alpha';
SELECT * FROM t_varchar_pattern WHERE k = 'alpha';

-- bpchar_pattern_ops: trailing blanks are insignificant, as for "="
CREATE TABLE t_bpchar_pattern (k char(5), v text);
CREATE UNIQUE INDEX t_bpchar_pattern_k ON t_bpchar_pattern USING gunique (k bpchar_pattern_ops);
INSERT INTO t_bpchar_pattern VALUES ('ab', 'a'), ('Cd', 'c');
INSERT INTO t_bpchar_pattern VALUES ('ab   ', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_bpchar_pattern WHERE k = 'ab';
SELECT * FROM t_bpchar_pattern WHERE k = 'ab';
EXPLAIN (COSTS OFF) SELECT k FROM t_bpchar_pattern WHERE k ~<~ 'ab' ORDER BY k USING ~<~;
SELECT k FROM t_bpchar_pattern WHERE k ~<~ 'ab' ORDER BY k USING ~<~;

-- varchar_ops, text_ops's class for varchar columns, named
CREATE TABLE t_varchar_ops (k varchar(10), v text);
CREATE UNIQUE INDEX t_varchar_ops_k ON t_varchar_ops USING gunique (k varchar_ops);
INSERT INTO t_varchar_ops VALUES ('alpha', 'a'), ('beta', 'b');
INSERT INTO t_varchar_ops VALUES ('beta', 'dup');
\echo :LAST_ERROR_SQLSTATE
EXPLAIN (COSTS OFF) SELECT * FROM t_varchar_ops WHERE k = 'beta';
SELECT * FROM t_varchar_ops WHERE k = 'beta';

-- The operator class of each index: its type's default, or the one named.
SELECT c.relname AS index, a.attname AS column, format_type(a.atttypid, a.atttypmod) AS type,
       opc.opcname, opf.opfname, am.amname
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
JOIN pg_opclass opc ON opc.oid = i.indclass[0]
JOIN pg_opfamily opf ON opf.oid = opc.opcfamily
JOIN pg_am am ON am.oid = opc.opcmethod
WHERE c.relnamespace = 'gu_opclass'::regnamespace
ORDER BY c.relname COLLATE "C";

--
-- Cross-type lookups: the constant keeps its own type, and the index
-- condition uses the cross-type operator of the family.
--
-- int2 column, int4 and int8 constants (an int4 constant shows undecorated)
EXPLAIN (COSTS OFF) SELECT * FROM t_int2 WHERE k = 3::int4;
SELECT * FROM t_int2 WHERE k = 3::int4;
EXPLAIN (COSTS OFF) SELECT * FROM t_int2 WHERE k = 3::int8;
SELECT * FROM t_int2 WHERE k = 3::int8;
EXPLAIN (COSTS OFF) SELECT * FROM t_int2 WHERE k >= 2::int8 AND k < 100000 ORDER BY k;
SELECT * FROM t_int2 WHERE k >= 2::int8 AND k < 100000 ORDER BY k;
-- an int8 constant out of int2's range finds nothing
SELECT * FROM t_int2 WHERE k = 4294967298::int8;
-- int8 column, int2 constant
EXPLAIN (COSTS OFF) SELECT * FROM t_int8 WHERE k = 0::int2;
SELECT * FROM t_int8 WHERE k = 0::int2;
-- date column, timestamp and timestamptz constants
EXPLAIN (COSTS OFF) SELECT * FROM t_date WHERE k = '2024-01-02 00:00'::timestamp;
SELECT * FROM t_date WHERE k = '2024-01-02 00:00'::timestamp;
SELECT * FROM t_date WHERE k = '2024-01-02 00:00:01'::timestamp;
EXPLAIN (COSTS OFF) SELECT * FROM t_date WHERE k = '2024-01-01 00:00+00'::timestamptz;
SELECT * FROM t_date WHERE k = '2024-01-01 00:00+00'::timestamptz;
-- timestamp column, date constant
EXPLAIN (COSTS OFF) SELECT * FROM t_timestamp WHERE k = '2024-01-02'::date;
SELECT * FROM t_timestamp WHERE k = '2024-01-02'::date;
EXPLAIN (COSTS OFF) SELECT * FROM t_timestamp WHERE k >= '2024-01-02'::date ORDER BY k;
SELECT * FROM t_timestamp WHERE k >= '2024-01-02'::date ORDER BY k;
-- timestamptz column, timestamp constant
EXPLAIN (COSTS OFF) SELECT * FROM t_timestamptz WHERE k = '2024-01-02 00:00'::timestamp;
SELECT * FROM t_timestamptz WHERE k = '2024-01-02 00:00'::timestamp;
-- float4 column, float8 constant
EXPLAIN (COSTS OFF) SELECT * FROM t_float4 WHERE k = 1.5::float8;
SELECT * FROM t_float4 WHERE k = 1.5::float8;
-- 0.1 is not exactly representable: float4's 0.1 is not float8's 0.1
INSERT INTO t_float4 VALUES (0.1, 'tenth');
SELECT * FROM t_float4 WHERE k = 0.1::float8;
SELECT * FROM t_float4 WHERE k = 0.1::float4;
-- float8 column, float4 constant
EXPLAIN (COSTS OFF) SELECT * FROM t_float8 WHERE k = 1.25::float4;
SELECT * FROM t_float8 WHERE k = 1.25::float4;
-- name column, text constant
EXPLAIN (COSTS OFF) SELECT * FROM t_name WHERE k = 'gamma'::text;
SELECT * FROM t_name WHERE k = 'gamma'::text;
-- text column, name constant.  name's collation is "C", so the comparison
-- must be given the index's collation to be indexable (as with btree).
EXPLAIN (COSTS OFF) SELECT * FROM t_text WHERE k = 'alpha'::name COLLATE "default";
SELECT * FROM t_text WHERE k = 'alpha'::name COLLATE "default";

--
-- The operator families mirror btree's: for every gunique family, its
-- operators equal those of btree's family of the same name restricted to
-- the types the gunique family covers, and so do support functions 1
-- (comparison), 2 (sort support) and 4 (equal image).  Zero rows.
--
WITH gu AS (
  SELECT f.oid, f.opfname FROM pg_opfamily f JOIN pg_am a ON a.oid = f.opfmethod
  WHERE a.amname = 'gunique'),
bt AS (
  SELECT f.oid, f.opfname FROM pg_opfamily f JOIN pg_am a ON a.oid = f.opfmethod
  WHERE a.amname = 'btree' AND f.opfnamespace = 'pg_catalog'::regnamespace),
pairs AS (
  SELECT gu.opfname, gu.oid AS guoid, bt.oid AS btoid FROM gu LEFT JOIN bt USING (opfname)),
gutypes AS (
  SELECT p.opfname, v.t FROM pairs p JOIN pg_amop o ON o.amopfamily = p.guoid,
    LATERAL (VALUES (o.amoplefttype), (o.amoprighttype)) v(t)
  UNION
  SELECT p.opfname, c.opcintype FROM pairs p JOIN pg_opclass c ON c.opcfamily = p.guoid),
guops AS (
  SELECT p.opfname, o.amoplefttype, o.amoprighttype, o.amopstrategy, o.amopopr, o.amoppurpose
  FROM pairs p JOIN pg_amop o ON o.amopfamily = p.guoid),
btops AS (
  SELECT p.opfname, o.amoplefttype, o.amoprighttype, o.amopstrategy, o.amopopr, o.amoppurpose
  FROM pairs p JOIN pg_amop o ON o.amopfamily = p.btoid
  WHERE (p.opfname, o.amoplefttype) IN (SELECT * FROM gutypes)
    AND (p.opfname, o.amoprighttype) IN (SELECT * FROM gutypes)),
guprocs AS (
  SELECT p.opfname, r.amproclefttype, r.amprocrighttype, r.amprocnum, r.amproc
  FROM pairs p JOIN pg_amproc r ON r.amprocfamily = p.guoid),
btprocs AS (
  SELECT p.opfname, r.amproclefttype, r.amprocrighttype, r.amprocnum, r.amproc
  FROM pairs p JOIN pg_amproc r ON r.amprocfamily = p.btoid
  WHERE r.amprocnum IN (1, 2, 4)
    AND (p.opfname, r.amproclefttype) IN (SELECT * FROM gutypes)
    AND (p.opfname, r.amprocrighttype) IN (SELECT * FROM gutypes))
SELECT 'no btree family' AS problem, opfname, NULL::regtype AS lefttype,
       NULL::regtype AS righttype, NULL::int2 AS num, NULL::text AS member
FROM pairs WHERE btoid IS NULL
UNION ALL
SELECT 'operator only in gunique', opfname, amoplefttype, amoprighttype, amopstrategy,
       amopopr::regoperator::text
FROM (SELECT * FROM guops EXCEPT SELECT * FROM btops) s
UNION ALL
SELECT 'operator only in btree', opfname, amoplefttype, amoprighttype, amopstrategy,
       amopopr::regoperator::text
FROM (SELECT * FROM btops EXCEPT SELECT * FROM guops) s
UNION ALL
SELECT 'support only in gunique', opfname, amproclefttype, amprocrighttype, amprocnum,
       amproc::regprocedure::text
FROM (SELECT * FROM guprocs EXCEPT SELECT * FROM btprocs) s
UNION ALL
SELECT 'support only in btree', opfname, amproclefttype, amprocrighttype, amprocnum,
       amproc::regprocedure::text
FROM (SELECT * FROM btprocs EXCEPT SELECT * FROM guprocs) s
ORDER BY 1, 2, 3, 4, 5;

-- What the families hold (stable across versions: btree-only support
-- functions 3 and 6 are not part of gunique's families).
SELECT f.opfname,
       (SELECT string_agg(DISTINCT format_type(c.opcintype, NULL), ', ')
          FROM pg_opclass c WHERE c.opcfamily = f.oid) AS types,
       (SELECT count(*) FROM pg_amop o WHERE o.amopfamily = f.oid) AS operators,
       (SELECT string_agg(r.amprocnum::text, ',' ORDER BY r.amprocnum)
          FROM (SELECT DISTINCT amprocnum FROM pg_amproc WHERE amprocfamily = f.oid) r) AS support
FROM pg_opfamily f
WHERE f.opfmethod = (SELECT oid FROM pg_am WHERE amname = 'gunique')
ORDER BY f.opfname;

-- Every operator class passes the access method's own validator (nbtree's).
SELECT opcname, opcdefault, amvalidate(oid)
FROM pg_opclass
WHERE opcmethod = (SELECT oid FROM pg_am WHERE amname = 'gunique')
ORDER BY opcname;

--
-- Deduplication stays on wherever btree would have it on.  pageinspect's
-- bt_metap() refuses relations whose access method is not btree, so read
-- the nbtree metapage of the gunique index raw: after the 24-byte page
-- header, btm_magic (0x053162) and btm_version (4), and btm_allequalimage
-- at byte 24 + 40 (layout of BTMetaPageData since PostgreSQL 13; the magic
-- and version are accepted in either byte order).  A btree twin of each
-- index, read with bt_metap(), is the reference.
--
CREATE EXTENSION IF NOT EXISTS pageinspect;

CREATE FUNCTION gu_allequalimage(idx regclass) RETURNS bool
LANGUAGE sql AS $$
  SELECT CASE WHEN substr(p, 25, 8) IN ('\x6231050004000000'::bytea,
                                        '\x0005316200000004'::bytea)
              THEN get_byte(p, 64) <> 0 END
  FROM get_raw_page(idx::text, 0) AS p
$$;

-- The raw reading agrees with bt_metap() on btree indexes of both kinds.
CREATE UNIQUE INDEX t_int4_k_btree ON t_int4 USING btree (k);
CREATE UNIQUE INDEX t_float8_k_btree ON t_float8 USING btree (k);
SELECT i, gu_allequalimage(i), (SELECT allequalimage FROM bt_metap(i::text))
FROM unnest('{t_int4_k_btree,t_float8_k_btree}'::regclass[]) AS i;
DROP INDEX t_int4_k_btree, t_float8_k_btree;

DO $$
DECLARE
  r record;
BEGIN
  FOR r IN SELECT c.relname, pg_get_indexdef(c.oid) AS def
           FROM pg_class c JOIN pg_am am ON am.oid = c.relam
           WHERE c.relnamespace = 'gu_opclass'::regnamespace AND am.amname = 'gunique'
  LOOP
    EXECUTE replace(replace(r.def, r.relname, r.relname || '_btree'),
                    'USING gunique', 'USING btree');
  END LOOP;
END $$;

-- btree's own answer for char(n) changed in PostgreSQL 16 (false before),
-- so only the agreement is shown for it.
SELECT c.relname AS index, format_type(a.atttypid, NULL) AS type,
       CASE WHEN a.atttypid <> 'bpchar'::regtype THEN gu_allequalimage(c.oid) END
         AS allequalimage,
       gu_allequalimage(c.oid) =
         (SELECT allequalimage FROM bt_metap(c.relname || '_btree')) AS same_as_btree
FROM pg_class c
JOIN pg_am am ON am.oid = c.relam
JOIN pg_index i ON i.indexrelid = c.oid
JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = i.indkey[0]
WHERE c.relnamespace = 'gu_opclass'::regnamespace AND am.amname = 'gunique'
ORDER BY c.relname COLLATE "C";

--
-- A comparison function must be written in C: gunique calls it under a key
-- lock, which holds off cancellation and which other inserters wait on
-- (src/README, invariant 4), where one that runs SQL could wait forever.
-- One in SQL is refused by CREATE INDEX, on a partitioned table, on its
-- top alone and on a table that is not partitioned.  An index whose
-- function is replaced by one in PL/pgSQL afterwards takes no insert that
-- must look in another partition; queries, which hold no key lock while
-- they compare, still serve.
--
CREATE FUNCTION sql_int4cmp(int, int) RETURNS int LANGUAGE sql IMMUTABLE STRICT
	AS $$ SELECT btint4cmp($1, $2) $$;
CREATE OPERATOR CLASS sql_int4_ops FOR TYPE int USING gunique AS
	OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >,
	FUNCTION 1 sql_int4cmp(int, int);
CREATE TABLE t_cmp (k int, p int) PARTITION BY LIST (p);
CREATE TABLE t_cmp_0 PARTITION OF t_cmp FOR VALUES IN (0);
CREATE TABLE t_cmp_1 PARTITION OF t_cmp FOR VALUES IN (1);
CREATE UNIQUE INDEX ON t_cmp USING gunique (k sql_int4_ops);
CREATE UNIQUE INDEX ON ONLY t_cmp USING gunique (k sql_int4_ops);
CREATE UNIQUE INDEX ON t_cmp_0 USING gunique (k sql_int4_ops);
CREATE FUNCTION c_int4cmp(int, int) RETURNS int LANGUAGE internal IMMUTABLE STRICT
	AS 'btint4cmp';
CREATE OPERATOR CLASS c_int4_ops FOR TYPE int USING gunique AS
	OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >,
	FUNCTION 1 c_int4cmp(int, int);
CREATE UNIQUE INDEX t_cmp_k ON t_cmp USING gunique (k c_int4_ops);
INSERT INTO t_cmp VALUES (1, 0), (2, 1);
CREATE OR REPLACE FUNCTION c_int4cmp(int, int) RETURNS int LANGUAGE plpgsql
	IMMUTABLE STRICT AS $$ BEGIN RETURN btint4cmp($1, $2); END $$;
INSERT INTO t_cmp VALUES (3, 0);
SELECT * FROM t_cmp WHERE k = 2;
DROP TABLE t_cmp;

RESET enable_seqscan;
RESET enable_bitmapscan;
SET client_min_messages = warning;
DROP SCHEMA gu_opclass CASCADE;
RESET client_min_messages;

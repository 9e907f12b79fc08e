# Copyright (c) gunique contributors
#
# gunique indexes on a streaming standby.  The primary runs with
# wal_consistency_checking = all: every WAL record carries a full-page image
# of the pages it touches, and the standby compares its replayed page with
# that image, failing with "inconsistent page found" on any difference.  The
# primary runs the whole life of a gunique tree after the standby is up:
# CREATE EXTENSION, CREATE INDEX before and after data, inserts, updates of
# the key, of other columns (index version churn: deduplication, bottom-up
# deletion) and of the partition key (moves), deletes, VACUUM, REINDEX of a
# leaf (plain and CONCURRENTLY), ATTACH PARTITION of tables with rows (with
# and without their own gunique index, one of them sub-partitioned), a
# refused ATTACH and a DETACH.  On the standby: replay went through without
# an inconsistent page or an assertion failure; queries use the gunique
# leaves and return the primary's rows, and lookups by the key search every
# partition and find each row; the catalogs mark the tree unique and valid.  After promotion, the tree still enforces uniqueness across
# partitions.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $primary = PostgreSQL::Test::Cluster->new('primary');
$primary->init(allows_streaming => 1);
$primary->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
wal_consistency_checking = all
autovacuum = off
max_wal_size = 1GB
wal_keep_size = 1GB
});
$primary->start;
# Every record carries full-page images: keep the WAL until the standby has
# it (and, with wal_keep_size, for pg_waldump below).
$primary->safe_psql('postgres', q{SELECT pg_create_physical_replication_slot('standby')});
$primary->backup('backup');

# The standby gets the primary's configuration with the backup.
my $standby = PostgreSQL::Test::Cluster->new('standby');
$standby->init_from_backup($primary, 'backup', has_streaming => 1);
$standby->append_conf('postgresql.conf', q{primary_slot_name = 'standby'});
$standby->start;
is($standby->safe_psql('postgres', 'SHOW shared_preload_libraries'),
	'gunique', 'the standby preloads gunique');
is($primary->safe_psql('postgres', 'SHOW wal_consistency_checking'),
	'all', 'the primary logs page images for consistency checking');
my $start_lsn = $primary->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');

$primary->safe_psql(
	'postgres', q{
CREATE EXTENSION gunique;
CREATE TABLE t (a int NOT NULL, b int, c text, d int) PARTITION BY RANGE (a);
CREATE TABLE t_0 PARTITION OF t FOR VALUES FROM (0) TO (1000);
CREATE TABLE t_1 PARTITION OF t FOR VALUES FROM (1000) TO (2000);
CREATE TABLE t_2 PARTITION OF t FOR VALUES FROM (2000) TO (3000)
	PARTITION BY HASH (b);
CREATE TABLE t_2_h0 PARTITION OF t_2 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE t_2_h1 PARTITION OF t_2 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
CREATE TABLE t_3 PARTITION OF t FOR VALUES FROM (3000) TO (4000);
CREATE UNIQUE INDEX t_b ON t USING gunique (b);

INSERT INTO t SELECT (g * 7) % 4000, g, 'c' || g, 0 FROM generate_series(1, 6000) g;
-- new keys, in place
UPDATE t SET b = b + 100000 WHERE b % 7 = 0;
-- moves to another partition
UPDATE t SET a = (a + 1000) % 4000 WHERE b % 11 = 0;
DELETE FROM t WHERE b % 13 = 0;
});

# A second index built over the data, then version churn: updates that are
# not HOT (d is indexed) add versions of the same keys to both leaves.
$primary->safe_psql(
	'postgres', q{
CREATE UNIQUE INDEX t_c ON t USING gunique (c);
CREATE INDEX t_d ON t (d);
});
for my $i (1 .. 6)
{
	$primary->safe_psql('postgres', "UPDATE t SET d = d + 1 WHERE b % 5 = $i % 5 AND b < 3000");
}
$primary->safe_psql(
	'postgres', q{
VACUUM t;
DELETE FROM t WHERE b BETWEEN 4000 AND 4500;
VACUUM (INDEX_CLEANUP on) t;
REINDEX INDEX t_1_b_idx;
REINDEX INDEX CONCURRENTLY t_3_c_idx;

-- a table with rows and no index, and a sub-partitioned one with its own
-- gunique index, attached with rows
CREATE TABLE t_4 (a int NOT NULL, b int, c text, d int);
INSERT INTO t_4 SELECT 4000 + g % 1000, 200000 + g, 'n' || g, 0 FROM generate_series(1, 1500) g;
ALTER TABLE t ATTACH PARTITION t_4 FOR VALUES FROM (4000) TO (5000);
CREATE TABLE t_5 (a int NOT NULL, b int, c text, d int) PARTITION BY LIST (d);
CREATE TABLE t_5_0 PARTITION OF t_5 FOR VALUES IN (0);
CREATE TABLE t_5_x PARTITION OF t_5 DEFAULT;
INSERT INTO t_5 SELECT 5000 + g % 1000, 300000 + g, 'm' || g, g % 3 FROM generate_series(1, 1500) g;
CREATE UNIQUE INDEX t_5_b ON t_5 USING gunique (b);
ALTER TABLE t ATTACH PARTITION t_5 FOR VALUES FROM (5000) TO (6000);
});

# A refused ATTACH leaves nothing behind.
$primary->safe_psql('postgres',
	q{CREATE TABLE t_bad (a int NOT NULL, b int, c text, d int);
	  INSERT INTO t_bad VALUES (6000, 1, 'bad', 0);});
my ($ret, $out, $err) = $primary->psql('postgres',
	'ALTER TABLE t ATTACH PARTITION t_bad FOR VALUES FROM (6000) TO (7000)');
like($err, qr/could not attach partition "t_bad": its keys would violate unique index "t_b"/,
	'primary: an ATTACH with a duplicate is refused');

# A detached partition keeps its index, now guarding itself only.
$primary->safe_psql('postgres', q{
CREATE TABLE t_6 PARTITION OF t FOR VALUES FROM (6000) TO (7000);
INSERT INTO t VALUES (6001, 400001, 'gone', 0);
ALTER TABLE t DETACH PARTITION t_6;
INSERT INTO t VALUES (1, 400001, 'kept', 0);
UPDATE t SET d = d + 1 WHERE b > 300000;
CHECKPOINT;
INSERT INTO t SELECT 3000 + g % 1000, 500000 + g, 'p' || g, 0 FROM generate_series(1, 500) g;

-- Each row's key looked up by the lookup path (one plan, a parameter per
-- row), found once and in the row's own partition.
CREATE FUNCTION lookups_found() RETURNS bigint LANGUAGE plpgsql AS $$
DECLARE
	n bigint := 0;
	r record;
	found_in regclass;
BEGIN
	FOR r IN SELECT b, tableoid FROM t LOOP
		SELECT tableoid INTO found_in FROM t WHERE b = r.b;
		IF found_in = r.tableoid THEN
			n := n + 1;
		END IF;
	END LOOP;
	RETURN n;
END $$;
});

$primary->wait_for_catchup($standby);

# What the standby replayed: every kind of nbtree record, on the gunique
# leaves themselves (those not rebuilt by REINDEX since).
my %leaf = map { $_ => 1 } split /\n/,
  $primary->safe_psql('postgres', q{
SELECT c.relfilenode FROM pg_class c JOIN pg_am a ON a.oid = c.relam
WHERE a.amname = 'gunique' AND c.relkind = 'i'});
my ($wout, $werr) = ('', '');
IPC::Run::run(
	[ 'pg_waldump', '-r', 'Btree', '-p', $primary->data_dir . '/pg_wal', '-s', $start_lsn,
	  '-e', $primary->safe_psql('postgres', 'SELECT pg_current_wal_flush_lsn()') ],
	'<', \undef, '>', \$wout, '2>', \$werr);
is($werr, '', 'pg_waldump reads the WAL the standby replayed');
my %btree;
while ($wout =~ m{desc: (\w+)[^\n]*?blkref #0: rel \d+/\d+/(\d+)}g)
{
	$btree{$1}++ if $leaf{$2};
}
note 'on gunique leaves: ' . join(', ', map { "Btree/$_ $btree{$_}" } sort keys %btree);
for my $rec (qw(INSERT_LEAF INSERT_UPPER SPLIT_R NEWROOT DEDUP DELETE VACUUM))
{
	cmp_ok($btree{$rec} // 0, '>', 0, "the standby replayed Btree/$rec records of gunique leaves");
}

my $standby_log = slurp_file($standby->logfile);
unlike($standby_log, qr/inconsistent page found/, 'standby: no inconsistent page on replay');
unlike($standby_log, qr/TRAP:|PANIC:|terminated by signal/,
	'standby: no assertion failure or crash during replay');

my $rows = q{SELECT tableoid::regclass, a, b, c, d FROM t ORDER BY b};
my $seq = q{
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = off;
};
my $idx = q{
SET enable_seqscan = off;
SET enable_bitmapscan = off;
};
my $primary_rows = $primary->safe_psql('postgres', "$seq $rows");
cmp_ok(scalar(split /\n/, $primary_rows), '>', 8000, 'primary: the table has its rows');
is($standby->safe_psql('postgres', "$seq $rows"), $primary_rows,
	'standby: the heap has the primary\'s rows');

like($standby->safe_psql('postgres', "$idx EXPLAIN $rows"),
	qr/Merge Append.*Index Scan using t_0_b_idx on t_0.*Index Scan using t_5_x_b_idx on t_5_x/s,
	'standby: an ordered scan of every gunique leaf');
is($standby->safe_psql('postgres', "$idx $rows"), $primary_rows,
	'standby: the ordered scan of the gunique leaves returns the primary\'s rows');

like($standby->safe_psql('postgres', "$idx SET gunique.enable_lookup = off; EXPLAIN SELECT b FROM t WHERE b = 42"),
	qr/Index Only Scan using t_\w+_b_idx on t_/, 'standby: a key lookup without the lookup path is an index-only scan');

# The lookup path (lookup.c) on the standby: WAL replay keeps no summary,
# so it searches every partition, and finds each row in its own.
my $nleaves = $primary->safe_psql('postgres', q{
SELECT count(*) FROM pg_partition_tree('t') WHERE isleaf});
like($standby->safe_psql('postgres', 'EXPLAIN SELECT b FROM t WHERE b = 42'),
	qr/Custom Scan \(GuniqueLookup\) on t/, 'standby: a key lookup takes the lookup path');
like($standby->safe_psql('postgres',
		'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT b FROM t WHERE b = 42'),
	qr/Partitions Searched: $nleaves\n.*Partitions Ruled Out: 0/,
	'standby: the lookup searches every partition');
($ret, $out, $err) = $standby->psql('postgres', q{SELECT gunique_build_filters('t_b', true)});
like($err, qr/cannot build gunique key filters during recovery/,
	'standby: filters are not built from leaves that WAL replay changes');
is($standby->safe_psql('postgres', 'SELECT lookups_found()'),
	$primary->safe_psql('postgres', 'SELECT count(*) FROM t'),
	'standby: the lookup path finds every row in its partition');
my $lookup = q{
SELECT count(*), count(*) FILTER (WHERE s.b IS NOT NULL),
	   count(*) FILTER (WHERE s.tableoid = k.tableoid)
FROM (SELECT tableoid, b, c FROM t) k
LEFT JOIN LATERAL (SELECT tableoid, b FROM t WHERE t.b = k.b) s ON true};
my $lookup_c = q{
SELECT count(*), count(*) FILTER (WHERE s.c IS NOT NULL)
FROM (SELECT c FROM t) k
LEFT JOIN LATERAL (SELECT c FROM t WHERE t.c = k.c) s ON true};
my $n = $primary->safe_psql('postgres', 'SELECT count(*) FROM t');
is($standby->safe_psql('postgres', "$idx SET enable_hashjoin = off; SET enable_mergejoin = off; $lookup"),
	"$n|$n|$n", 'standby: every key is found once, in its partition, through t_b');
is($standby->safe_psql('postgres', "$idx SET enable_hashjoin = off; SET enable_mergejoin = off; $lookup_c"),
	"$n|$n", 'standby: every key is found once through t_c');

# The catalogs: every member of both trees unique and valid on the standby.
my $members = q{
SELECT c.relname, i.indisunique, i.indisvalid, i.indisready
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am a ON a.oid = c.relam AND a.amname = 'gunique'
ORDER BY 1};
my $primary_members = $primary->safe_psql('postgres', $members);
is($standby->safe_psql('postgres', $members), $primary_members,
	'standby: the gunique indexes and their flags are the primary\'s');
unlike($primary_members, qr/\|f/, 'every gunique index is unique, valid and ready');
is($standby->safe_psql('postgres', q{SELECT * FROM gunique_verify('t_b')}),
	'', 'standby: gunique_verify of t_b is clean');
is($standby->safe_psql('postgres', q{SELECT * FROM gunique_verify('t_5_x_c_idx')}),
	'', 'standby: gunique_verify of t_c is clean');

# Promotion: the former standby enforces the tree.
$standby->promote;
is($standby->safe_psql('postgres', 'SELECT pg_is_in_recovery()'), 'f', 'standby promoted');

my $holder = $standby->safe_psql('postgres', 'SELECT tableoid::regclass FROM t WHERE b = 43');
($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nINSERT INTO t VALUES (5500, 43, 'dup', 7)");
like($err,
	qr/ERROR:  23505: duplicate key value violates unique constraint "t_5_x_b_idx"\nDETAIL:  Key \(b\)=\(43\) already exists in partition "$holder"\./,
	'promoted: a duplicate across partitions is refused with 23505');
($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nINSERT INTO t VALUES (10, 999999, 'n1', 0)");
like($err, qr/ERROR:  23505: duplicate key value violates unique constraint "t_0_c_idx"\nDETAIL:  Key \(c\)=\(n1\) already exists in partition "t_4"\./,
	'promoted: a duplicate of the second index, in an attached partition, is refused');
($ret, $out, $err) = $standby->psql('postgres',
	"\\set VERBOSITY verbose\nINSERT INTO t VALUES (2500, 400001, 'x', 0)");
like($err, qr/23505: .*\nDETAIL:  Key \(b\)=\(400001\) already exists in partition "t_0"\./,
	'promoted: the key taken after the detach is held');
$standby->safe_psql('postgres',
	q{INSERT INTO t VALUES (2500, 999999, 'fresh', 0), (5999, 999998, 'fresh2', 1)});
pass('promoted: fresh keys are accepted');
is($standby->safe_psql('postgres', 'SELECT lookups_found()'),
	$standby->safe_psql('postgres', 'SELECT count(*) FROM t'),
	'promoted: the lookup path, trusting summaries again, finds every row');
is($standby->safe_psql('postgres',
		q{SELECT string_agg(problem || ' ' || detail, E'\n') FROM (
			SELECT * FROM gunique_verify('t_b', true)
			UNION ALL SELECT * FROM gunique_verify('t_c', true)
			UNION ALL SELECT * FROM gunique_verify('t_6_b_idx', true)) v}),
	'', 'promoted: gunique_verify is clean');

$standby_log = slurp_file($standby->logfile);
unlike($standby_log, qr/inconsistent page found|TRAP:|PANIC:/,
	'standby: no inconsistent page or assertion failure up to the end');
unlike(slurp_file($primary->logfile), qr/TRAP:|PANIC:/, 'primary: no assertion failure');

$standby->stop;
$primary->stop;

done_testing();

# Copyright (c) gunique contributors
#
# Crash recovery of gunique indexes.  pgbench clients insert random keys
# into a partitioned table with a gunique index (single inserts and
# five-insert transactions, unique violations caught in a subtransaction so
# clients keep going); while they are inserting, the postmaster and every
# server process are killed with SIGKILL, as in a power cut that spares the
# OS page cache.  Crash recovery replays everything since the checkpoint
# taken before the workload (the leaf indexes' inserts and page splits are
# nbtree WAL records).  Then:
#
# - no committed row is lost, and every row the heap holds is found through
#   the gunique index, at its ctid, in its partition;
# - no key occurs twice, and gunique_verify finds nothing wrong;
# - the index entries left behind by transactions the crash aborted block
#   nobody: every key not in the table can be inserted, and a sample of the
#   keys in the table is refused in another partition (SQLSTATE 23505).

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueCrash;

my $nparts = 8;
my $keys = 20000;    # b is drawn from 1..$keys
my $amax = $nparts * 1000 - 1;
my $clients = 4;

my $node = PostgreSQL::Test::Cluster->new('crash');
$node->init;
# TAP nodes run with fsync = off; the kill spares the OS page cache, so what
# the server wrote survives as after a crash of the server alone.
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
checkpoint_timeout = 1h
max_wal_size = 1GB
autovacuum = off
});
$node->start;

my $setup = qq{
CREATE EXTENSION gunique;
CREATE TABLE t (a int NOT NULL, b int, c text) PARTITION BY RANGE (a);
};
for my $i (0 .. $nparts - 1)
{
	$setup .= sprintf("CREATE TABLE t_%d PARTITION OF t FOR VALUES FROM (%d) TO (%d);\n",
		$i, $i * 1000, ($i + 1) * 1000);
}
$setup .= qq{
-- keys that follow the partitioning, so that key-range summaries let probes
-- skip partitions: after the crash they are rebuilt from the btrees
CREATE TABLE s (a int NOT NULL, b bigint) PARTITION BY RANGE (a);
CREATE TABLE s_0 PARTITION OF s FOR VALUES FROM (0) TO (1000);
CREATE TABLE s_1 PARTITION OF s FOR VALUES FROM (1000) TO (2000);
CREATE TABLE s_2 PARTITION OF s FOR VALUES FROM (2000) TO (3000);
CREATE UNIQUE INDEX s_b ON s USING gunique (b);
INSERT INTO s SELECT g, g::bigint * 1000 FROM generate_series(0, 2999) g;
INSERT INTO s VALUES (10, -5), (2010, 9999999);

-- a quarter of the keys before the index, so its leaves have several levels
INSERT INTO t SELECT (g * 7919) % ($amax + 1), g, repeat(md5(g::text), 2)
FROM generate_series(1, $keys, 4) g;
CREATE UNIQUE INDEX t_b ON t USING gunique (b);

CREATE FUNCTION ins(pa int, pb int) RETURNS void LANGUAGE plpgsql AS \$\$
BEGIN
	INSERT INTO t VALUES (pa, pb, repeat(md5(pb::text), 2));
EXCEPTION WHEN unique_violation THEN
	NULL;
END
\$\$;

-- one insert in a subtransaction; its SQLSTATE, or 00000
CREATE FUNCTION attempt(pa int, pb int) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
	INSERT INTO t VALUES (pa, pb, 'recheck');
	RETURN '00000';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END
\$\$;
CREATE FUNCTION attempt_s(pa int, pb bigint) RETURNS text LANGUAGE plpgsql AS \$\$
BEGIN
	INSERT INTO s VALUES (pa, pb);
	RETURN '00000';
EXCEPTION WHEN OTHERS THEN
	RETURN SQLSTATE;
END
\$\$;
};
$node->safe_psql('postgres', $setup);
my $initial = $node->safe_psql('postgres', 'SELECT count(*) FROM t');

# Everything from here on is replayed by crash recovery.
$node->safe_psql('postgres', 'CHECKPOINT');
my $redo_lsn = $node->safe_psql('postgres', 'SELECT pg_current_wal_lsn()');

my $tmp = PostgreSQL::Test::Utils::tempdir;
my $vars = "\\set a1 random(0, $amax)\n\\set b1 random(1, $keys)\n";
append_to_file("$tmp/single.sql", $vars . "SELECT ins(:a1, :b1);\n");
append_to_file(
	"$tmp/multi.sql",
	"BEGIN;\n"
	  . join('',
		map { "\\set a$_ random(0, $amax)\n\\set b$_ random(1, $keys)\nSELECT ins(:a$_, :b$_);\n" }
		  1 .. 5)
	  . "COMMIT;\n");

my ($bench_out, $bench_err) = ('', '');
my $bench;
{
	local $ENV{PGAPPNAME} = 'gunique_bench';
	$bench = IPC::Run::start(
		[
			'pgbench', '--no-vacuum', '--client', $clients, '--jobs', 2,
			'--time', 120, '--file', "$tmp/single.sql\@1",
			'--file', "$tmp/multi.sql\@1", '-h', $node->host, '-p', $node->port,
			'postgres'
		],
		'<', \undef, '>', \$bench_out, '2>', \$bench_err);
}

# Let the clients insert for a while: at least 2 s and 3000 new rows.
my $start = time;
my $count;
while (1)
{
	usleep(200_000);
	$count = $node->safe_psql('postgres', 'SELECT count(*) FROM t');
	last if time - $start >= 2 && $count - $initial >= 3000;
	die "pgbench stopped early: $bench_err" unless $bench->pumpable;
	die "the workload makes no progress ($count rows)" if time - $start > 60;
}
ok($bench->pumpable, 'pgbench is running when the server is killed');
is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_stat_activity WHERE application_name = 'gunique_bench'}),
	$clients, 'every client is connected when the server is killed');

# Kill the postmaster and every process it started, at once (GuniqueCrash).
my $pm = $node->{_pid};
my $children = crash_node($node);
note sprintf('killed postmaster %d and %d children; %d rows committed, %d inserted since the checkpoint',
	$pm, $children, $count, $count - $initial);

$bench->finish;
isnt($?, 0, 'pgbench was cut off by the crash');
note "pgbench: $bench_err";

# What recovery is about to replay: the leaves' inserts and page splits.
my ($wret, $wout, $werr);
IPC::Run::run([ 'pg_waldump', '--stats=record', '-p', $node->data_dir . '/pg_wal', '-s', $redo_lsn ],
	'<', \undef, '>', \$wout, '2>', \$werr);
my %btree = $wout =~ m{^Btree/(\w+)\s+(\d+)}mg;
note join(', ', map { "Btree/$_ $btree{$_}" } sort keys %btree);
cmp_ok($btree{INSERT_LEAF} // 0, '>', 1000, 'the WAL to replay holds index leaf inserts');
cmp_ok(($btree{SPLIT_L} // 0) + ($btree{SPLIT_R} // 0), '>', 10, 'the WAL to replay holds index page splits');

my $log_offset = -s $node->logfile;
$node->start;
my $log = slurp_file($node->logfile, $log_offset);
like($log, qr/database system was interrupted/, 'the server went through crash recovery');
like($log, qr/redo starts at/, 'crash recovery replayed WAL');

my $recovered = $node->safe_psql('postgres', 'SELECT count(*) FROM t');
cmp_ok($recovered, '>=', $count, "no committed row lost ($recovered rows after recovery, $count before)");

# Every row in the heap, from a plan that cannot use an index.
$node->safe_psql(
	'postgres', q{
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = off;
CREATE TABLE heaprows AS SELECT tableoid AS part, ctid AS tid, b FROM t;
});
is($node->safe_psql('postgres', 'SELECT count(*) FROM heaprows'), $recovered,
	'the heap holds every row');

my $index_scan = q{
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SET enable_indexonlyscan = off;
SET enable_hashjoin = off;
SET enable_mergejoin = off;
SET enable_material = off;
};

my $lookup = q{
SELECT count(*) FROM heaprows h
WHERE EXISTS (SELECT FROM t WHERE t.b = h.b AND t.tableoid = h.part AND t.ctid = h.tid)};
like($node->safe_psql('postgres', "$index_scan EXPLAIN $lookup"),
	qr/Index Scan using t_\d_b_idx on t_\d/, 'the lookup of each row goes through the gunique leaves');
is($node->safe_psql('postgres', "$index_scan $lookup"),
	$recovered, 'every row is found through the index, at its ctid, in its partition');
is($node->safe_psql('postgres', "$index_scan SELECT count(*) FROM t WHERE b BETWEEN 1 AND $keys"),
	$recovered, 'an index range scan finds every row');

# VACUUM the recovered leaves (it also sets the visibility map, so the
# planner picks index-only scans).
$node->safe_psql('postgres', 'VACUUM t');
my $index_only = q{
SET enable_seqscan = off;
SET enable_bitmapscan = off;
};
like($node->safe_psql('postgres', "$index_only EXPLAIN SELECT count(b) FROM t WHERE b > 0"),
	qr/Index Only Scan using t_\d_b_idx on t_\d/, 'count through an index-only scan of the gunique leaves');
is($node->safe_psql('postgres', "$index_only SELECT count(b) FROM t WHERE b > 0"),
	$recovered, 'after VACUUM, an index-only scan counts every row');
is($node->safe_psql('postgres', "$index_scan $lookup"),
	$recovered, 'after VACUUM, every row is still found through the index');

is( $node->safe_psql(
		'postgres', q{
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = off;
SELECT b, count(*) FROM t GROUP BY b HAVING count(*) > 1}),
	'',
	'no key occurs twice');
is($node->safe_psql('postgres', q{SELECT * FROM gunique_verify('t_b')}),
	'', 'gunique_verify is clean');
is($node->safe_psql('postgres', q{SELECT * FROM gunique_verify('t_3_b_idx', lock => true)}),
	'', 'gunique_verify with lock is clean');

# Enforcement: a key held in one partition is refused in another; a free
# key is accepted.
my ($held, $holder) = split /\|/,
  $node->safe_psql('postgres',
	'SELECT b, tableoid::regclass FROM t WHERE a < 1000 ORDER BY b DESC LIMIT 1');
my ($ret, $out, $err) = $node->psql('postgres',
	"\\set VERBOSITY verbose\nINSERT INTO t VALUES ($amax, $held, 'dup')");
like($err,
	qr/ERROR:  23505: duplicate key value violates unique constraint "t_7_b_idx"\nDETAIL:  Key \(b\)=\($held\) already exists in partition "$holder"\./,
	'a duplicate across partitions is refused with 23505');
$node->safe_psql('postgres', sprintf('INSERT INTO t VALUES (%d, %d, %s)', $amax, $keys + 1, q{'new'}));
pass('a new key is accepted');

# A sample of the keys held (every 10th) is refused in another partition.
is( $node->safe_psql(
		'postgres', qq{
BEGIN;
SELECT count(*), count(*) FILTER (WHERE st = '23505')
FROM (SELECT b, a FROM heaprows h JOIN t USING (b) WHERE b % 10 = 0) k,
	 LATERAL attempt((k.a + 1000) % ($amax + 1), k.b) st;
ROLLBACK;
}),
	$node->safe_psql('postgres', 'SELECT count(*) || $$|$$ || count(*) FROM heaprows WHERE b % 10 = 0'),
	'every sampled key held is refused in another partition');

# Every key not in the table can be inserted, wherever it lands: the
# entries of the transactions the crash aborted hold nothing.
$node->safe_psql(
	'postgres', qq{
INSERT INTO t
SELECT (k * 31) % ($amax + 1), k, 'filled'
FROM generate_series(1, $keys) k
WHERE NOT EXISTS (SELECT FROM heaprows WHERE b = k);
});
is($node->safe_psql('postgres', "SELECT count(*), count(DISTINCT b) FROM t WHERE b <= $keys"),
	"$keys|$keys", 'every free key was inserted');
is($node->safe_psql('postgres', q{SELECT * FROM gunique_verify('t_b', true)}),
	'', 'gunique_verify is clean with every key present');

# Key filters are gone with shared memory too: the probes of the inserts
# above searched every partition until each filter was worth building again
# from its btree.  Every third key is refused in another partition, almost
# always with the other partitions ruled out by their filters.
$node->safe_psql('postgres', 'SELECT gunique_probe_stats_reset()');
is( $node->safe_psql(
		'postgres', qq{
BEGIN;
SELECT count(*), count(*) FILTER (WHERE st = '23505')
FROM (SELECT b, a FROM t WHERE b % 3 = 0 AND b <= $keys) k,
	 LATERAL attempt((k.a + 1000) % ($amax + 1), k.b) st;
ROLLBACK;
}),
	$node->safe_psql('postgres', "SELECT count(*) || '|' || count(*) FROM t WHERE b % 3 = 0 AND b <= $keys"),
	'after the crash, every third key is refused in another partition');
is( $node->safe_psql(
		'postgres', q{
SELECT sum(partitions_filtered) > 2 * sum(partitions_probed)
FROM gunique_stat_probes WHERE partition::text LIKE 't\_%'}),
	't', 'after the crash, key filters rule out most partitions again');

# Key-range summaries are gone with shared memory; the first probes rebuild
# them from the btrees.  Each partition's smallest and largest keys, and the
# outliers, are refused in every other partition.
is( $node->safe_psql(
		'postgres', q{
SELECT count(*), count(*) FILTER (WHERE st = '23505')
FROM (SELECT b, tableoid::regclass AS p FROM s
	  WHERE b IN (-5, 0, 999000, 1000000, 1999000, 2000000, 2999000, 9999999)) k,
	 generate_series(0, 2) part,
	 LATERAL attempt_s(part * 1000 + 500, k.b) st
WHERE format('s_%s', part) <> k.p::text}),
	'16|16', 'after the crash, summaries let no key through into another partition');
$node->safe_psql('postgres', 'INSERT INTO s VALUES (1500, -7)');
my ($sret, $sout, $serr) = $node->psql('postgres', 'INSERT INTO s VALUES (2500, -7)');
like($serr, qr/duplicate key value violates unique constraint "s_2_b_idx"/,
	'a key widening one partition\'s summary is refused in another');

$log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/TRAP:|PANIC:|server process .* was terminated|terminated by signal/,
	'no crash or assertion failure after recovery');
$node->stop;

done_testing();

# Copyright (c) gunique contributors
#
# A rolled-back TRUNCATE, seen by lookups at every moment of its rollback.
#
# A TRUNCATE rebuilds its leaf: the leaf's summary then holds only the keys
# inserted since, and a lookup trusts it to rule the leaf out.  The
# rollback brings the old rows back, and forgets the rebuilt summary in
# gunique's abort callbacks, which PostgreSQL calls after the transaction
# has stopped running for every other snapshot.  A lookup that takes its
# snapshot in between sees the TRUNCATE as rolled back, so the old rows as
# live, while the summary still says the leaf lacks their keys.  Once, a
# SELECT by the key answered nothing there for a row that was there all
# along, and INSERT ... ON CONFLICT DO NOTHING (PostgreSQL 18) failed with a
# unique violation instead of skipping its row.
#
# t/pause/gunique_test_pause holds the rolling-back session in that window
# (its callback runs before gunique's).  There a lookup by the key and an
# upsert of it must wait for the partition's lock, and then find the row.
# Also: a TRUNCATE prepared and rolled back (ROLLBACK PREPARED), a TRUNCATE
# rolled back to a savepoint, and a TRUNCATE in progress (DO NOTHING reads
# with a dirty snapshot, which sees no transaction as running).  Rebuilds
# are noted by leaf: one of another table, or in another database, leaves
# the lookup's summaries trusted (EXPLAIN ANALYZE's partitions searched);
# one that finds every note's slot taken makes every lookup search again.
# A REINDEX in progress loses no entry and is not noted.  A prepared
# TRUNCATE survives a restart, its note does not: a REPEATABLE READ
# transaction that saw it prepared must still get a serialization failure
# after it commits.

use strict;
use warnings;
use Cwd;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueOnConflict;
use GuniqueSessions;

my $module = Cwd::getcwd() . '/t/pause/gunique_test_pause.so';
die "$module not built" unless -f $module;
my $pause = PostgreSQL::Test::Utils::tempdir() . '/pause';

my $node = PostgreSQL::Test::Cluster->new('abortwin');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
max_prepared_transactions = 2
});
$node->start;
sessions_on($node);
my $upserts = on_conflict_supported($node);

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION gunique;
CREATE TABLE tt (p int, k int) PARTITION BY LIST (p);
CREATE TABLE tt0 PARTITION OF tt FOR VALUES IN (0);
CREATE TABLE tt3 PARTITION OF tt FOR VALUES IN (3);
CREATE UNIQUE INDEX tt_k ON tt USING gunique (k);
INSERT INTO tt VALUES (0, 23);
});
like(
	$node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) SELECT k FROM tt WHERE k = 23'),
	qr/GuniqueLookup/, 'the query by the key is a lookup');

sub readers
{
	my @r = (session('lookup', "SELECT k FROM tt WHERE k = 23;\n"));
	push @r, session('upsert',
		"INSERT INTO tt VALUES (3, 23) ON CONFLICT (k) DO NOTHING RETURNING k;\n")
	  if $upserts;
	return @r;
}

# After each case: both readers found the row (the lookup returned it, the
# upsert skipped its own without error), and the key is held once.
sub check_readers
{
	my ($case, @r) = @_;
	my ($out, $err) = finish($r[0]);
	is($out, '23', "$case: the lookup finds the row") or diag($err);
	if ($upserts)
	{
		($out, $err) = finish($r[1]);
		is($out . $err, '', "$case: the upsert skips its row, with no error");
	}
	is($node->safe_psql('postgres', 'SELECT tableoid::regclass, k FROM tt WHERE k = 23'),
		"tt0|23", "$case: the table holds the key once");
}

# A lookup of a key no partition holds: how many partitions it searched
# (none, if it trusted the summaries; all, if it searched again).
sub searched_for_missing_key
{
	my $plan = $node->safe_psql('postgres',
		'EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT k FROM tt WHERE k = 99');
	return $plan =~ /Partitions Searched: (\d+)/ ? $1 : "none in: $plan";
}
is(searched_for_missing_key(), 0, 'a key no partition holds is ruled out');

# 1. In the rollback's window.
sub rollback_window
{
	my ($case) = @_;
	open(my $f, '>', $pause) or die $!;
	close($f);
	my $offset = -s $node->logfile;
	my $a = session('truncate', qq{
LOAD '$module';
SET gunique_test_pause.file = '$pause';
BEGIN;
TRUNCATE tt0;
INSERT INTO tt VALUES (0, 25);
ROLLBACK;
});
	$node->wait_for_log(qr/gunique_test_pause: paused/, $offset);
	my @r = readers();
	ok(waits_for_lock($_), "$case: the $_->{name} waits for the partition")
	  for @r;
	unlink($pause) or die $!;
	my ($out, $err) = finish($a);
	is($err, '', "$case: the truncating session ends cleanly");
	check_readers($case, @r);
}
rollback_window('rollback window');

# 2. A TRUNCATE prepared, then rolled back.
{
	$node->safe_psql(
		'postgres', q{
BEGIN;
TRUNCATE tt0;
INSERT INTO tt VALUES (0, 26);
PREPARE TRANSACTION 'tw';
});
	my @r = readers();
	ok(waits_for_lock($_), "prepared: the $_->{name} waits for the partition")
	  for @r;
	$node->safe_psql('postgres', "ROLLBACK PREPARED 'tw'");
	check_readers('prepared', @r);
}

# 3. A TRUNCATE rolled back to a savepoint, its transaction still open.
{
	my $a = hold('savepoint', q{
BEGIN;
SAVEPOINT s;
TRUNCATE tt0;
INSERT INTO tt VALUES (0, 27);
ROLLBACK TO s;
});
	my @r = readers();
	check_readers('savepoint', @r);
	release($a);
}

# 4. A TRUNCATE in progress, then rolled back.
{
	my $a = hold('inprogress', q{
BEGIN;
TRUNCATE tt0;
INSERT INTO tt VALUES (0, 28);
});
	my @r = readers();
	ok(waits_for_lock($_), "in progress: the $_->{name} waits for the partition")
	  for @r;
	release($a);
	check_readers('in progress', @r);
}

# Inserts make the rolled-back leaf's range valid again: with no rebuild
# in progress, a key no partition holds is ruled out.
$node->safe_psql('postgres', 'INSERT INTO tt VALUES (0, 50), (3, 51)');
is(searched_for_missing_key(), 0,
	'after the rollbacks, a key no partition holds is ruled out again');

# 5. Rebuilds of other tables' leaves, in this database and in another, in
# progress: they do not make lookups here search every partition.  Then
# the rollback window again, with every note's slot (64) taken by the
# transactions truncating o in the other database and the 63 partitions of
# h: tt0's note finds no slot (it is "unplaced"), and the readers must
# still wait for it.
{
	$node->safe_psql('postgres', 'CREATE DATABASE other');
	$node->safe_psql(
		'other', q{
CREATE EXTENSION gunique;
CREATE TABLE o (p int, k int) PARTITION BY LIST (p);
CREATE TABLE o_0 PARTITION OF o FOR VALUES IN (0);
CREATE UNIQUE INDEX ON o USING gunique (k);
});
	my $sql = "CREATE TABLE h (p int, k int) PARTITION BY LIST (p);\n";
	$sql .= "CREATE TABLE h_$_ PARTITION OF h FOR VALUES IN ($_);\n" for 0 .. 62;
	$sql .= "CREATE UNIQUE INDEX ON h USING gunique (k);\n";
	$node->safe_psql('postgres', $sql);

	my $other = hold('other', q{
BEGIN;
TRUNCATE o;
}, 'other');
	is(searched_for_missing_key(), 0,
		'a TRUNCATE in progress in another database: the key is still ruled out');
	my $holder = hold('holder', q{
BEGIN;
TRUNCATE h;
});
	is(searched_for_missing_key(), 0,
		"another table's 63 partitions truncated in progress: the key is still ruled out");
	rollback_window('no slot left');
	release($holder, $other);
}

# 6. A REINDEX of one of h's leaves in progress loses no entry: a lookup of
# a key no partition holds, ruled out by h's group filter, neither
# searches nor waits for it.  (An upsert's insert would: its probe, a
# speculative one, locks every leaf.)
{
	$node->safe_psql('postgres',
		'INSERT INTO h SELECT i % 63, i FROM generate_series(1, 630) i');
	my $holder = hold('reindex', q{
BEGIN;
REINDEX INDEX h_5_k_idx;
});
	my $plan = $node->safe_psql('postgres', q{
SET statement_timeout = '20s';
EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF)
SELECT k FROM h WHERE k = 99999});
	like($plan, qr/Partitions Searched: 0/,
		'a REINDEX of a leaf in progress: a missing key is still ruled out');
	release($holder);
}

# 7. A TRUNCATE prepared before a restart, and committed after it, while a
# REPEATABLE READ transaction that saw it prepared waits: that transaction's
# lookup of a key the partition held must fail (40001), as without the
# restart, not answer that the row never was.  The notes did not survive
# the restart; every transaction before the first after it counts as
# evicted.
{
	$node->safe_psql('postgres', q{
INSERT INTO tt VALUES (0, 60);
BEGIN;
TRUNCATE tt0;
PREPARE TRANSACTION 'tr';
});
	$node->restart;
	my $gate = hold('gate', q{
SELECT pg_advisory_lock(77);
});
	my $rr = session('rr', q{
BEGIN ISOLATION LEVEL REPEATABLE READ;
SELECT count(*) FROM tt3;
SELECT pg_advisory_lock(77);
SELECT k FROM tt WHERE k = 60;
ROLLBACK;
});
	ok(waits_for_lock($rr), 'restart: the repeatable read transaction waits at its gate');
	$node->safe_psql('postgres', "COMMIT PREPARED 'tr'");
	# tt0's range made valid again, from its new btree
	$node->safe_psql('postgres', 'INSERT INTO tt VALUES (0, 61)');
	release($gate);
	my ($out, $err) = finish($rr);
	like($err, qr/could not serialize access due to a concurrent rewrite/,
		'restart: the lookup of a key the prepared TRUNCATE took away is a serialization failure');
}

# Every note has ended: summaries are trusted again (once inserts have
# made the rolled-back leaf's range valid again).
$node->safe_psql('postgres', 'INSERT INTO tt VALUES (0, 52), (3, 53)');
is(searched_for_missing_key(), 0,
	'at the end, a key no partition holds is ruled out again');

$node->stop;
done_testing();

# Copyright (c) gunique contributors
#
# An upsert that waits for a prepared transaction, and an insert of its key
# by the session that prepared it (PostgreSQL 18, or 15 and 17 with the
# core change; isolationtester cannot see a wait for a prepared
# transaction, which no session holds).
#
# A plain insert of a key into another partition does not wait for a
# pending ON CONFLICT DO NOTHING of the key that waits for the inserter
# (src/README, "ON CONFLICT DO NOTHING", point 4).  A prepared transaction
# waits for nothing; but its vxid names the backend that prepared it, which
# may be the inserter.  Taken for that backend, the upsert's probe, waiting
# for the prepared transaction, let its upsert locks go as if the
# prepared transaction waited for one of them; the inserter went in, and
# after ROLLBACK PREPARED the upsert failed with a unique violation.  The
# inserter must wait, and fail on the key once the upsert's row is in.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueOnConflict;
use GuniqueSessions;
use Time::HiRes qw(usleep);

my $node = PostgreSQL::Test::Cluster->new('upsertprep');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
max_prepared_transactions = 2
});
$node->start;
sessions_on($node);
plan skip_all => 'INSERT ... ON CONFLICT is refused on this server'
  unless on_conflict_supported($node);

# two gunique trees, b's made first, so that an insert probes b first;
# gate() holds s1's row between its check and its insert
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION gunique;
CREATE FUNCTION gate(v text) RETURNS bool LANGUAGE plpgsql AS $$
BEGIN
  IF v LIKE 's1%' THEN
    PERFORM pg_advisory_xact_lock_shared(4242);
  END IF;
  RETURN true;
END $$;
CREATE TABLE w (a int, b int, p int, v text, CHECK (gate(v)))
  PARTITION BY LIST (p);
CREATE TABLE w1 PARTITION OF w FOR VALUES IN (1);
CREATE TABLE w2 PARTITION OF w FOR VALUES IN (2);
CREATE UNIQUE INDEX w_b ON w USING gunique (b);
CREATE UNIQUE INDEX w_a ON w USING gunique (a);
});

# Does session $name wait for a lock of this kind (a pg_locks condition)?
sub waits_on
{
	my ($name, $cond) = @_;
	return $node->safe_psql(
		'postgres', qq{
SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE a.application_name = '$name' AND NOT l.granted AND $cond});
}

my $upsert_lock = "l.locktype = 'advisory' AND l.objsubid = 26485";

my $gate = hold('gate', "BEGIN; SELECT pg_advisory_xact_lock(4242);\n");
my $turn = hold('turn', "SELECT pg_advisory_lock(5001);\n");

# s2 prepares b = 7 in w2, then, once let, inserts a = 1 into w2
my $s2 = session('s2', q{
BEGIN;
INSERT INTO w VALUES (100, 7, 2, 's2 b');
PREPARE TRANSACTION 'collide';
SELECT pg_advisory_lock_shared(5001);
INSERT INTO w VALUES (1, 99, 2, 's2 a');
});
ok(waits_for_lock($s2), 's2 prepared, and waits for its turn');
is($node->safe_psql('postgres', 'SELECT gid FROM pg_prepared_xacts'),
	'collide', 'the transaction is prepared');

# s1's check of a = 1 passes (into w1); gate() holds the row
my $s1 = session('s1',
	"INSERT INTO w VALUES (1, 7, 1, 's1') ON CONFLICT (a) DO NOTHING RETURNING a, b;\n"
);
ok(waits_for_lock($s1), 's1 passed its check and waits at the gate');

# s2's insert of a = 1 into w2 waits for s1's upsert lock
release($turn);
$node->poll_query_until('postgres', "SELECT " . waits_on('s2', $upsert_lock) . " = 1")
  or die 's2 does not wait for the upsert lock';

# s1's probe of b waits for the prepared transaction's b = 7
release($gate);
$node->poll_query_until('postgres',
	"SELECT " . waits_on('s1', "l.locktype = 'transactionid'") . " = 1")
  or die 's1 does not wait for the prepared transaction';

# and keeps its lock on a: s2 still waits
usleep(300_000);
is(waits_on('s2', $upsert_lock), '1',
	's2 still waits for the upsert lock while s1 waits for the prepared transaction');

$node->safe_psql('postgres', "ROLLBACK PREPARED 'collide'");
my ($out1, $err1) = finish($s1);
is($out1, '1|7', 's1 inserted its row after the prepared transaction rolled back');
is($err1, '', 's1 had no error');
my (undef, $err2) = finish($s2);
like($err2, qr/duplicate key value violates unique constraint "w2_a_idx"/,
	's2 failed on a, after the upsert');
is($node->safe_psql('postgres', 'SELECT tableoid::regclass, a, b FROM w ORDER BY a'),
	'w1|1|7', 'one row: the upsert\'s');

$node->stop;
done_testing();

# Copyright (c) gunique contributors
#
# The key lock an ON CONFLICT DO NOTHING check waits out (PostgreSQL 18, or
# 15 and 17 with the core change of contrib-patches/).  Having counted
# itself as a pending upsert, the check waits until whoever holds its key's
# key lock lets it go, taking it in share mode (src/README, "ON CONFLICT
# DO NOTHING", point 5).  A key without a filter hash (a column whose type
# has no hash function: money[] here) once made it take every one of the
# 1,024 key locks in turn, exclusive, for every row: each such row waited
# for every inserter and probe of the whole server.  Its key lock is named
# like any other key's now (keymap.c: the hash of the columns that have
# one, or none), and the check takes that one, shared.
#
# The test module (t/pause) holds the first 100 key locks in share mode,
# as probes and lookups reading filters could: an upsert of a money[] key
# goes through while they are held, where it used to wait for the first
# of them.  The table has one partition, so that the row's own insert
# probes nowhere and takes no key lock.

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
use Time::HiRes qw(usleep);

my $module = Cwd::getcwd() . '/t/pause/gunique_test_pause.so';
die "$module not built" unless -f $module;
my $pause = PostgreSQL::Test::Utils::tempdir() . '/pause';

my $node = PostgreSQL::Test::Cluster->new('upsertkeylocks');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'gunique'\n");
$node->start;
sessions_on($node);
plan skip_all => 'INSERT ... ON CONFLICT is refused on this server'
  unless on_conflict_supported($node);

$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION gunique;
CREATE FUNCTION hold_keylocks(int) RETURNS void
	AS '$module', 'gunique_test_hold_keylocks' LANGUAGE C STRICT;
CREATE TABLE nh (p int, k money[]) PARTITION BY LIST (p);
CREATE TABLE nh0 PARTITION OF nh FOR VALUES IN (0);
CREATE UNIQUE INDEX nh_k ON nh USING gunique (k);
INSERT INTO nh VALUES (0, ARRAY[1::money]);
});

append_to_file($pause, '');
my $offset = -s $node->logfile;
my $holder = session('holder', qq{
SET gunique_test_pause.file = '$pause';
SELECT hold_keylocks(100);
});
$node->wait_for_log(qr/gunique_test_pause: holding 100 key locks/, $offset);

# A new key and one held: each row is checked, the first goes in and the
# second is skipped.
my $upsert = session('upsert', q{
INSERT INTO nh VALUES (0, ARRAY[2::money]), (0, ARRAY[1::money])
	ON CONFLICT DO NOTHING RETURNING k;
});

# Until the upsert ends, or waits on a key lock.
my $waited = 0;
my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
while (time < $deadline)
{
	$upsert->{h}->pump_nb if $upsert->{h}->pumpable;
	last unless $upsert->{h}->pumpable;
	if ($node->safe_psql(
			'postgres', q{
SELECT count(*) FROM pg_stat_activity
WHERE application_name = 'upsert' AND wait_event = 'gunique key locks'}) ne
		'0')
	{
		$waited = 1;
		last;
	}
	usleep(100_000);
}
ok(!$waited, 'the upsert of a key without a hash waits for no key lock held shared');
unlink $pause;
my ($out, $err) = finish($upsert);
is($out, '{$2.00}', 'its new key went in, and the held one was skipped');
is($err, '', 'without an error');
finish($holder);

is($node->safe_psql('postgres', 'SELECT count(*) FROM nh'), '2', 'two rows');

done_testing();

# Copyright (c) gunique contributors
#
# A saved filter file is loaded only into the data directory, and the run,
# that saved it (src/README, "Saved filters").  Each case here gives the
# server a file that describes other leaves than its own, and checks that
# the key the file does not know is still refused in another partition:
#   - two copies of one cleanly shut down cluster (cp -a) each insert one
#     row and shut down cleanly, at the same redo LSN; one copy's file is
#     put into the other;
#   - a file saved by an earlier run is put back after a later run;
#   - pg_resetwal after the save;
#   - a base backup started as a standby and promoted, given the
#     primary's file;
#   - a server killed while the background worker builds filters, and a
#     clean shutdown while it builds beside TRUNCATE, DETACH and REINDEX.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::RecursiveCopy;
use PostgreSQL::Test::Utils;
use Test::More;
use File::Copy;
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueFilterTable;
use Time::HiRes qw(usleep);

my $parts = 16;
my $all = $parts + 1;

# wal_level minimal: no standby snapshots are logged, so that two copies
# that do the same write the same WAL
my $node = PostgreSQL::Test::Cluster->new('copy_a');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
autovacuum = off
});
$node->start;
create_filter_table($node, $parts);
my $sample = refused_sample($parts);

sub file_of { return $_[0]->data_dir . '/gunique_filters.dat'; }

# Is key k refused in the partition of a?
sub refused
{
	my ($n, $a, $k) = @_;
	return $n->safe_psql('postgres', "SELECT refused($a, $k)");
}

sub not_loaded
{
	my ($n, $offset, $reason, $what) = @_;
	ok( $n->log_contains(
			qr/gunique did not load the key filters saved in "gunique_filters.dat"\n.*DETAIL:  \Q$reason\E/,
			$offset),
		"$what: the file is not loaded, and the log says why");
}

# Keys above every kf() value go to the rightmost leaf page of a partition:
# two copies inserting one each write WAL of the same length.
my $k1 = 2000000001;
my $k2 = 2000000002;

# 1. Two copies of the cluster.
{
	$node->stop;
	ok(-f file_of($node), 'copies: the file is saved');
	PostgreSQL::Test::RecursiveCopy::copypath($node->data_dir,
		$node->backup_dir . '/copy_b');
	my $twin = PostgreSQL::Test::Cluster->new('copy_b');
	$twin->init_from_backup($node, 'copy_b');

	$node->start;
	$node->safe_psql('postgres', "INSERT INTO t VALUES (20000, $k1)");
	$node->stop;
	$twin->start;
	$twin->safe_psql('postgres', "INSERT INTO t VALUES (20000, $k2)");
	$twin->stop;

	my $redo = sub {
		my $out = `pg_controldata $_[0]`;
		return ($out =~ /REDO location:\s+(\S+)/)[0];
	};
	is($redo->($node->data_dir), $redo->($twin->data_dir),
		'copies: both end at the same redo location');

	copy(file_of($node), file_of($twin)) or die "copy: $!";
	my $offset = -s $twin->logfile;
	$twin->start;
	not_loaded($twin, $offset,
		'The file was not saved by the last run of this data directory.',
		'copies');
	is(refused($twin, 30000, $k2), 't',
		'copies: the key only this copy holds is refused in another partition');
	is($twin->safe_psql('postgres', "SELECT count(*) FROM gunique_verify('t_k')"),
		'0', 'copies: gunique_verify finds nothing');
	$twin->stop;

	# its own file, saved by its own last run, is loaded
	$offset = -s $twin->logfile;
	$twin->start;
	ok( $twin->log_contains(
			qr/gunique loaded $parts key ranges and 0 filters saved at the last shutdown/,
			$offset),
		'copies: a copy loads the file its own last run saved');
	is(refused($twin, 30000, $k2), 't',
		'copies: with its own file, the key is refused');
	$twin->stop;
}

# 2. A file of an earlier run, put back.
{
	$node->start;
	$node->safe_psql('postgres', "SELECT gunique_build_filters('t_k')");
	$node->stop;
	my $old = $node->basedir . '/old_filters.dat';
	copy(file_of($node), $old) or die "copy: $!";
	$node->start;
	$node->safe_psql('postgres', "INSERT INTO t VALUES (40000, 2000000003)");
	$node->stop;
	copy($old, file_of($node)) or die "copy: $!";
	my $offset = -s $node->logfile;
	$node->start;
	not_loaded($node, $offset,
		'The file was not saved by the last run of this data directory.',
		'earlier run');
	is(refused($node, 50000, 2000000003), 't',
		'earlier run: the key inserted after that run is refused');
}

# 3. pg_resetwal after the save.
{
	$node->safe_psql('postgres', "SELECT gunique_build_filters('t_k')");
	$node->stop;
	ok(-f file_of($node), 'pg_resetwal: the file is saved');
	command_ok([ 'pg_resetwal', $node->data_dir ], 'pg_resetwal runs');
	my $offset = -s $node->logfile;
	$node->start;
	not_loaded($node, $offset, 'WAL was written after the file was saved.',
		'pg_resetwal');
	is($node->safe_psql('postgres', $sample), '0',
		'pg_resetwal: every key is refused in another partition');
	$node->stop;
}

# 4. A base backup, started as a standby and promoted.
{
	my $primary = PostgreSQL::Test::Cluster->new('primary');
	$primary->init(allows_streaming => 1);
	$primary->append_conf(
		'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
autovacuum = off
});
	$primary->start;
	create_filter_table($primary, $parts);
	$primary->backup('bb');
	my $standby = PostgreSQL::Test::Cluster->new('standby');
	$standby->init_from_backup($primary, 'bb', has_streaming => 1);
	$standby->start;
	$primary->safe_psql('postgres', "INSERT INTO t VALUES (20000, $k1)");
	$primary->wait_for_catchup($standby);
	$standby->promote;
	$standby->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die "the standby was not promoted";
	# the promotion's checkpoint, done before the shutdown: one that ends
	# after the save writes WAL after it, and the file would not be used
	$standby->safe_psql('postgres', 'CHECKPOINT');
	$standby->safe_psql('postgres', "INSERT INTO t VALUES (20000, $k2)");
	is(refused($standby, 30000, $k1), 't',
		'promoted: a key replayed from the primary is refused');
	$standby->stop;
	$primary->stop;
	ok(-f file_of($standby) && -f file_of($primary),
		'promoted: both save their files');

	my $offset = -s $standby->logfile;
	$standby->start;
	ok( $standby->log_contains(qr/gunique loaded \d+ key ranges/, $offset),
		'promoted: the standby loads the file it saved itself');
	is(refused($standby, 30000, $k2), 't',
		'promoted: with its own file, its own key is refused');
	$standby->stop;

	copy(file_of($primary), file_of($standby)) or die "copy: $!";
	$offset = -s $standby->logfile;
	$standby->start;
	not_loaded($standby, $offset,
		'The file was not saved by the last run of this data directory.',
		'promoted, given the primary\'s file');
	is(refused($standby, 30000, $k2), 't',
		'promoted, given the primary\'s file: the key only it holds is refused');
	is($standby->safe_psql('postgres', $sample), '0',
		'promoted: every key is refused in another partition');
	$standby->stop;
}

# 5. The background worker builds while the server is killed, or shut
# down cleanly beside DDL.
sub builder_running
{
	my ($n) = @_;
	return $n->safe_psql(
		'postgres', q{
DO $$
BEGIN
	FOR i IN 1 .. 1000 LOOP
		EXIT WHEN EXISTS (SELECT FROM pg_stat_activity
						  WHERE backend_type = 'gunique filter builder');
		PERFORM pg_sleep(0.005);
		PERFORM pg_stat_clear_snapshot();
	END LOOP;
END $$;
SELECT count(*) FROM pg_stat_activity WHERE backend_type = 'gunique filter builder';
});
}

{
	$node->start;
	$node->stop('immediate');
	$node->start;
	$node->safe_psql('postgres', 'INSERT INTO t VALUES (5, kf(5))');
	builder_running($node);
	$node->kill9;
	ok(!-f file_of($node), 'killed while building: nothing is saved');
	# the postmaster's children leave once they see it gone: until then
	# a start finds its shared memory in use
	my $started = 0;
	for (1 .. 100)
	{
		last if ($started = $node->start(fail_ok => 1));
		$node->{_pid} = undef;    # the pid a failed start read is stale
		usleep(100_000);
	}
	ok($started, 'killed while building: the server starts again');
	is($node->safe_psql('postgres', 'SELECT filters FROM gunique_filter_memory()'),
		'0', 'killed while building: no filter after the start');
	is($node->safe_psql('postgres', $sample), '0',
		'killed while building: every key is refused in another partition');

	# a clean shutdown while the worker builds beside DDL
	$node->stop('immediate');
	$node->start;
	$node->safe_psql('postgres', 'INSERT INTO t VALUES (7, kf(7))');
	builder_running($node);
	$node->safe_psql('postgres', 'BEGIN; TRUNCATE t_5; ROLLBACK;');
	$node->safe_psql('postgres', 'REINDEX TABLE t_6');
	$node->safe_psql('postgres', 'ALTER TABLE t DETACH PARTITION t_9');
	$node->safe_psql('postgres',
		"INSERT INTO t_9 VALUES (90000, 2000000005)");
	$node->safe_psql('postgres',
		'ALTER TABLE t ATTACH PARTITION t_9 FOR VALUES FROM (90000) TO (100000)');
	$node->safe_psql('postgres', 'INSERT INTO t VALUES (9, kf(9))');
	$node->stop;
	$node->start;
	is($node->safe_psql('postgres', $sample), '0',
		'shut down while building beside DDL: every key is refused in another partition');
	is(refused($node, 10000, 2000000005), 't',
		'shut down while building beside DDL: a key of the partition attached again is refused');
	is($node->safe_psql('postgres', "SELECT count(*) FROM gunique_verify('t_k')"),
		'0', 'gunique_verify finds nothing');
}

done_testing();

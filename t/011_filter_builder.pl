# Copyright (c) gunique contributors
#
# Key filters are built in the background.  After a restart no filter
# exists; an insert asks for its group's filters and goes on searching
# btrees, and the database's background worker builds them.  Checked here:
#   - without a worker (max_worker_processes = 0) inserts never build a
#     filter themselves: the request waits in gunique_filter_builds(), a
#     LOG says why, and gunique_build_filters() builds them on demand;
#   - with a worker, they come back by themselves, and then rule the
#     partitions out;
#   - TRUNCATE (rolled back), REINDEX and DETACH while the worker builds,
#     and a crash while it builds: afterwards every key of every partition
#     is still refused in another partition, and gunique_verify finds
#     nothing.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueFilterTable;
use Time::HiRes qw(usleep);

my $parts = 64;
my $node = PostgreSQL::Test::Cluster->new('builder');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
max_worker_processes = 0
autovacuum = off
restart_after_crash = on
});
$node->start;

create_filter_table($node, $parts);

# every partition's filter, and the table's
my $all = $parts + 1;
is($node->safe_psql('postgres', 'SELECT filters FROM gunique_filter_memory()'),
	$all, 'CREATE INDEX builds a filter per partition and one for the table');

# Keys of every partition, each tried in the next partition.
my $sample = refused_sample($parts);

sub wait_for_filters
{
	my ($what) = @_;
	for (1 .. 600)
	{
		return 1
		  if $node->safe_psql('postgres',
			"SELECT filters = $all FROM gunique_filter_memory()") eq 't'
		  && $node->safe_psql('postgres',
			'SELECT count(*) FROM gunique_filter_builds()') eq '0';
		usleep(100_000);
	}
	diag("$what: " . $node->safe_psql('postgres',
		'SELECT * FROM gunique_filter_memory(), LATERAL (SELECT count(*) FROM gunique_filter_builds()) b'));
	return 0;
}

# Restarts here are immediate: a clean one would load the filters saved at
# shutdown (t/012_saved_filters.pl).
sub restart
{
	$node->stop('immediate');
	$node->start;
}

# Without a worker: the filters stay missing, and the inserts search.
restart();
is($node->safe_psql('postgres', 'SELECT filters FROM gunique_filter_memory()'),
	'0', 'a restart leaves no filter');
$node->safe_psql('postgres',
	'INSERT INTO t SELECT i, kf(i) FROM generate_series(1, 20001, 200) i');
is($node->safe_psql('postgres', 'SELECT filters FROM gunique_filter_memory()'),
	'0', 'inserts do not build filters themselves');
is( $node->safe_psql(
		'postgres',
		q{SELECT count(*), min(state), min(group_index::regclass::text)
		    FROM gunique_filter_builds() WHERE database = (SELECT oid FROM pg_database WHERE datname = current_database())}
	),
	'1|queued|t_k',
	'the table\'s filters are asked for once, and wait in the queue');
ok($node->log_contains(qr/gunique could not start a background worker to build key filters/),
	'the worker that could not start is logged');
is($node->safe_psql('postgres', $sample), '0',
	'without filters, every key is refused in another partition');
is($node->safe_psql('postgres', "SELECT gunique_build_filters('t_k')"),
	$all, 'gunique_build_filters() builds every missing filter');
is($node->safe_psql('postgres', "SELECT gunique_build_filters('t_k')"),
	'0', 'and none again while they hold their keys');
is($node->safe_psql('postgres', 'SELECT filters FROM gunique_filter_memory()'),
	$all, 'the filters are there');
is($node->safe_psql('postgres', $sample), '0',
	'with the filters built on demand, every key is refused in another partition');

# With a worker: the filters come back by themselves.
$node->append_conf('postgresql.conf', 'max_worker_processes = 8');
restart();
$node->safe_psql('postgres', 'SELECT gunique_probe_stats_reset()');
$node->safe_psql('postgres', 'INSERT INTO t VALUES (3, kf(3))');
ok(wait_for_filters('after a restart'),
	'after a restart, an insert has the worker build the filters');
$node->safe_psql('postgres', 'SELECT gunique_probe_stats_reset()');
$node->safe_psql('postgres',
	'INSERT INTO t SELECT i, kf(i) FROM generate_series(5, 600005, 600) i');
my $searched = $node->safe_psql('postgres',
	'SELECT sum(partitions_probed) - sum(inserts) FROM gunique_stat_probes');
cmp_ok($searched, '<=', 20,
	'the rebuilt filters rule the other partitions out of new keys');
is($node->safe_psql('postgres', $sample), '0',
	'with the rebuilt filters, every key is refused in another partition');

sub wait_for_queue
{
	my ($what) = @_;
	for (1 .. 600)
	{
		return 1
		  if $node->safe_psql('postgres',
			'SELECT count(*) FROM gunique_filter_builds()') eq '0';
		usleep(100_000);
	}
	diag("$what: the queue did not empty");
	return 0;
}

# DDL while the worker builds.  REINDEX leaves the partition without a
# filter until a probe wants one; ATTACH gives the partition one.
restart();
$node->safe_psql('postgres', 'INSERT INTO t VALUES (7, kf(7))');
$node->safe_psql('postgres', 'BEGIN; TRUNCATE t_5; ROLLBACK;');
$node->safe_psql('postgres', 'REINDEX TABLE t_6');
$node->safe_psql('postgres', 'ALTER TABLE t DETACH PARTITION t_9');
$node->safe_psql('postgres',
	'ALTER TABLE t ATTACH PARTITION t_9 FOR VALUES FROM (90000) TO (100000)');
$node->safe_psql('postgres', 'INSERT INTO t VALUES (9, kf(9))');
ok(wait_for_queue('after DDL'), 'the worker builds what is asked beside DDL');
is($node->safe_psql('postgres', $sample), '0',
	'after TRUNCATE, REINDEX, DETACH and ATTACH beside the worker, every key is refused in another partition');
is($node->safe_psql('postgres', "SELECT count(*) FROM gunique_verify('t_k')"),
	'0', 'gunique_verify finds nothing');
$node->safe_psql('postgres', "SELECT gunique_build_filters('t_k')");
is($node->safe_psql('postgres', 'SELECT filters FROM gunique_filter_memory()'),
	$all, 'gunique_build_filters() builds what REINDEX took away');

# A crash while the worker builds.
restart();
# the insert that asks, then a wait for the worker, in one session: the
# worker leaves a second after it is done
my $pid = $node->safe_psql(
	'postgres', q{
INSERT INTO t VALUES (11, kf(11));
DO $$
BEGIN
	FOR i IN 1 .. 1000 LOOP
		EXIT WHEN EXISTS (SELECT FROM pg_stat_activity
						  WHERE backend_type = 'gunique filter builder');
		PERFORM pg_sleep(0.005);
		-- pg_stat_activity is read once a transaction otherwise
		PERFORM pg_stat_clear_snapshot();
	END LOOP;
END $$;
SELECT pid FROM pg_stat_activity WHERE backend_type = 'gunique filter builder';
});
isnt($pid, '', 'the worker runs');
# wait for the restart to end before connecting: a session that connects
# while the postmaster terminates everything dies under its harness
my $log_offset = -s $node->logfile;
kill 'KILL', $pid if $pid ne '';
$node->wait_for_log(
	qr/all server processes terminated; reinitializing.*database system is ready to accept connections/s,
	$log_offset);
$node->safe_psql('postgres', 'INSERT INTO t VALUES (13, kf(13))');
ok(wait_for_filters('after a crash'), 'after a crash, the filters are built again');
is($node->safe_psql('postgres', $sample), '0',
	'after a crash during a build, every key is refused in another partition');
is($node->safe_psql('postgres', "SELECT count(*) FROM gunique_verify('t_k')"),
	'0', 'gunique_verify finds nothing');

done_testing();

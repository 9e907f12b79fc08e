# Copyright (c) gunique contributors
#
# Repeated crash restarts.  When a server process dies of SIGKILL (the OOM
# killer's signal), the postmaster kills every other one, re-creates shared
# memory and runs the shared-memory startup hooks again, without restarting
# itself: whatever those hooks do must be safe to do many times.  Each crash
# once registered one more relcache callback in the postmaster, whose
# backends inherit them; PostgreSQL has ten slots, so after a few crashes
# every new connection failed with "out of relcache_callback_list slots".
#
# A backend is killed ten times; after each crash restart a new session
# inserts through the gunique index, and after the last one a duplicate in
# another partition is still refused.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(usleep);

my $crashes = 10;

my $node = PostgreSQL::Test::Cluster->new('restarts');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
restart_after_crash = on
});
$node->start;

$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION gunique;
CREATE TABLE t (a int NOT NULL, b int) PARTITION BY RANGE (a);
CREATE TABLE t_0 PARTITION OF t FOR VALUES FROM (0) TO (100);
CREATE TABLE t_1 PARTITION OF t FOR VALUES FROM (100) TO (200);
CREATE UNIQUE INDEX t_b ON t USING gunique (b);
INSERT INTO t VALUES (1, 1);
});

# The pid of the waiting session once it has started; or undef and the
# error of a session that could not look for it (a failed connection, say).
sub victim_pid
{
	for (1 .. 10 * $PostgreSQL::Test::Utils::timeout_default)
	{
		my ($ret, $stdout, $stderr) = $node->psql('postgres',
			"SELECT pid FROM pg_stat_activity WHERE application_name = 'gunique_victim'"
		);
		return (undef, $stderr) if $ret != 0;
		return ($stdout, '') if $stdout ne '';
		usleep(100_000);
	}
	die "the session to be killed did not start";
}

for my $i (1 .. $crashes)
{
	# A session that waits, to be killed.
	my ($out, $err) = ('', '');
	my $victim;
	{
		local $ENV{PGAPPNAME} = 'gunique_victim';
		$victim = IPC::Run::start(
			[
				'psql', '-X', '-h', $node->host, '-p', $node->port,
				'-d', 'postgres', '-c', 'SELECT pg_sleep(600)'
			],
			'<', \undef, '>', \$out, '2>', \$err);
	}
	my ($pid, $connect_err) = victim_pid();
	if (!defined $pid)
	{
		fail("a new session can look for the session to kill, crash $i");
		diag($connect_err);
		$victim->kill_kill;
		last;
	}

	my $log_offset = -s $node->logfile;
	kill 'KILL', $pid;
	$victim->finish;
	$node->wait_for_log(qr/all server processes terminated; reinitializing/,
		$log_offset);
	$node->wait_for_log(qr/database system is ready to accept connections/,
		$log_offset);

	# A new session after each crash restart, through the gunique index.
	my ($ret, $stdout, $stderr) = $node->psql('postgres',
		"INSERT INTO t VALUES (2 * $i, 1000 + $i) RETURNING b");
	is($ret, 0, "a new session inserts after crash restart $i")
	  or diag($stderr);
	last if $ret != 0;
}

my ($ret, $stdout, $stderr) = $node->psql('postgres',
	'INSERT INTO t VALUES (150, 1)');
like($stderr, qr/duplicate key value violates unique constraint/,
	'after the crash restarts a duplicate in another partition is refused');
is($node->safe_psql('postgres', 'SELECT count(*) FROM t'),
	$crashes + 1, 'every insert made between the crashes is there');

$node->stop;
done_testing();

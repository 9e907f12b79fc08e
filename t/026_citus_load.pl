# Copyright (c) gunique contributors
#
# A global key on a Citus distributed table (src/citus/README) under load,
# crashes and shard moves: a coordinator and two workers, then a third.
# ev is distributed by tenant; its key id lives in the key table
# gunique_keys."public.ev_id", distributed by id, so a row and its key are
# mostly on different shards, often on different workers, and every write
# is a distributed transaction that Citus commits in two phases.  After
# each part, with nothing in flight:
#
# - no id twice in ev;
# - invariant K: the key table holds exactly the (id, tenant) of ev's rows
#   with an id (a FULL JOIN of the two finds no row on one side only);
# - no prepared transaction left on any worker.
#
# (a) pgbench clients on the coordinator and on a worker insert (one row
#     or two in one transaction), delete and, on 18, update keys drawn
#     from 200, into 40 tenants: the same key goes into shards on both
#     workers at once.  Each statement runs in attempt(), which catches a
#     unique violation only; any other error reaches pgbench, which
#     retries a deadlock (Citus's distributed deadlock detection cancels
#     one transaction with 40P01) and aborts the client on anything else.
#     So no client aborted means every error was 23505 or 40P01; and some
#     23505 must have happened, or the clients never raced.  Then a
#     deadlock that only Citus sees, each worker holding one wait of it:
#     one transaction gets 40P01, the other both keys.
# (b) two-phase commit and crashes: a worker stopped before COMMIT (the
#     COMMIT fails, nothing of the transaction is left); a transaction
#     held by t/pause/ after the coordinator committed it and the workers
#     prepared it, before COMMIT PREPARED, when the worker holding its key
#     crashes (the key stays held by the prepared transaction, and
#     recover_prepared_transactions() commits it), or when the coordinator
#     crashes (recovery commits both halves); then a worker killed with
#     every process it has while pgbench clients write through both
#     workers (some of them held by t/pause/ with transactions prepared on
#     it, so that some are surely in doubt), its in-doubt transactions
#     resolved by Citus's maintenance daemons.
# (c) a third worker added and the shard rebalancer run in the
#     background while pgbench writes: shards of ev and of the key table
#     move to the new worker by logical replication, and the checks hold.
# (d) every shard of the key table moved twice, by logical replication,
#     while clients on worker1 insert and delete by the key (routed
#     statements, which read the key table before they write it).
#
# Skipped where Citus is not installed (PostgreSQL 15; t/025).

use strict;
use warnings;
use Cwd;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueCitus;
use GuniqueCrash;

plan skip_all => 'Citus is not installed for this PostgreSQL (tools/install-deps builds it into 17 and 18)'
  unless citus_available();

my $keys = 200;     # ids of the load are drawn from 1..$keys
my $tenants = 40;
my $module = Cwd::getcwd() . '/t/pause/gunique_test_pause.so';
my $tmp = PostgreSQL::Test::Utils::tempdir();
my $pause = "$tmp/pause";

# Eight shards a table (fewer shards, quicker moves); a prepared
# transaction per connection, and a multi-shard statement uses several
# connections per worker; deadlocks found in 100 ms, distributed ones in
# 200 ms; the maintenance daemon recovers no prepared transaction by
# itself until (b) asks it to, so that what the test sees in between is
# its own doing; no log of every statement under load.
my $conf = q{
citus.shard_count = 8
max_connections = 200
max_prepared_transactions = 200
deadlock_timeout = 100ms
citus.recover_2pc_interval = -1
log_statement = none
};
my ($coord, @workers) = citus_cluster(name => 'load', conf => $conf);
my $pg18 = $coord->safe_psql('postgres', 'SHOW server_version_num') >= 180000;

# REPLICA IDENTITY FULL lets (c) move ev's shards by logical replication,
# writes going on; the key table has its primary key.
$coord->safe_psql(
	'postgres', qq{
CREATE TABLE ev (tenant int NOT NULL, id bigint, payload text);
ALTER TABLE ev REPLICA IDENTITY FULL;
SELECT create_distributed_table('ev', 'tenant');
CREATE UNIQUE INDEX ev_id ON ev USING gunique (id);
INSERT INTO ev SELECT g % $tenants + 1, g, 'initial' FROM generate_series(2, $keys, 2) g;
});

# On each node that runs clients: where attempt() counts outcomes (a local
# table: each node's clients count there), and attempt() itself, which
# catches a unique violation and nothing else.
foreach my $node ($coord, @workers)
{
	$node->safe_psql(
		'postgres', q{
SET citus.enable_ddl_propagation = off;
CREATE TABLE outcomes (phase text, op text, state text);
CREATE FUNCTION attempt(phase text, op text, stmt text) RETURNS void
LANGUAGE plpgsql AS $f$
DECLARE
	n bigint;
	st text;
BEGIN
	BEGIN
		EXECUTE stmt;
		GET DIAGNOSTICS n = ROW_COUNT;
		st := CASE WHEN n = 0 THEN 'miss' ELSE '00000' END;
	EXCEPTION WHEN unique_violation THEN
		st := '23505';
	END;
	INSERT INTO outcomes VALUES (phase, op, st);
END
$f$;
});
}

# The pgbench scripts of phase $phase, written to files once (the
# pgbench's of a phase start together): a list of path@weight.
my %scripts;
sub scripts
{
	my ($phase) = @_;
	return @{ $scripts{$phase} } if $scripts{$phase};
	my $vars = "\\set t1 random(1, $tenants)\n\\set t2 random(1, $tenants)\n"
	  . "\\set k1 random(1, $keys)\n\\set k2 random(1, $keys)\n";
	my $insert = sub {
		my ($op, $t, $k) = @_;
		return "SELECT attempt('$phase', '$op', format('INSERT INTO ev VALUES (%s, %s, %L)', :$t, :$k, '$phase'));\n";
	};
	my %s = (
		insert => [ 4, $vars . $insert->('insert', 't1', 'k1') ],
		# two rows, two keys, often four shards on both workers
		pair => [
			3,
			$vars . "BEGIN;\n" . $insert->('pair1', 't1', 'k1') . $insert->('pair2', 't2', 'k2') . "COMMIT;\n"
		],
		delete => [ 3, $vars . "SELECT attempt('$phase', 'delete', format('DELETE FROM ev WHERE id = %s', :k1));\n" ],
	);
	# an UPDATE of the key needs RETURNING OLD (src/citus/README)
	$s{update} = [ 2, $vars . "SELECT attempt('$phase', 'update', format('UPDATE ev SET id = %s WHERE id = %s', :k2, :k1));\n" ]
	  if $pg18;
	my @files;
	foreach my $name (sort keys %s)
	{
		my $file = "$tmp/${phase}_$name.sql";
		append_to_file($file, $s{$name}[1]);
		push @files, "$file\@$s{$name}[0]";
	}
	$scripts{$phase} = \@files;
	return @files;
}

# pgbench from the PostgreSQL under test, in the background: $clients
# clients connected to $node for $seconds, running phase $phase's scripts;
# a deadlock is retried, up to ten tries.  $pgoptions: settings for its
# sessions.
sub start_bench
{
	my ($node, $phase, $clients, $seconds, $pgoptions) = @_;
	my %b = (node => $node, out => '', err => '');
	local $ENV{PGAPPNAME} = "bench_$phase";
	local $ENV{PGOPTIONS} = $pgoptions if defined $pgoptions;
	$b{h} = IPC::Run::start(
		[
			'pgbench', '--no-vacuum', '--client' => $clients, '--jobs' => 1,
			'--time' => $seconds, '--max-tries' => 10, '--failures-detailed',
			(map { ('--file' => $_) } scripts($phase)),
			'-h' => $node->host, '-p' => $node->port, 'postgres'
		],
		'<', \undef, '>', \$b{out}, '2>', \$b{err});
	return \%b;
}

# Wait for a pgbench; what was wrong with its run: its exit status not 0,
# a client aborted (which an error other than 23505, caught by attempt(),
# or 40P01, retried, would do), a serialization failure, no transaction
# committed.  '' if nothing.
sub finish_bench
{
	my ($b, $name) = @_;
	$b->{h}->finish;
	my $status = $?;
	my @wrong;
	push @wrong, "exit status $status" if $status != 0;
	push @wrong, "stderr: $b->{err}" if $b->{err} =~ /aborted|error/i;
	push @wrong, 'serialization failures' unless $b->{out} =~ /number of serialization failures: 0\b/;
	my ($xacts) = $b->{out} =~ /number of transactions actually processed: (\d+)/;
	my ($deadlocks) = $b->{out} =~ /number of deadlock failures: (\d+)/;
	my ($retried) = $b->{out} =~ /number of transactions retried: (\d+)/;
	push @wrong, 'no transaction' unless $xacts;
	note sprintf('%s: %s transactions on %s, %s retried, %s failed on a deadlock', $name,
		$xacts // '?', $b->{node}->name, $retried // 0, $deadlocks // '?');
	return join('; ', @wrong);
}

# The outcomes attempt() counted on $node in phase $phase: { state => n }.
sub outcomes
{
	my ($node, $phase) = @_;
	my %o = split /[|\n]/, $node->safe_psql('postgres',
		"SELECT state, count(*) FROM outcomes WHERE phase = '$phase' GROUP BY state");
	note "$phase on " . $node->name . ': ' . join(', ', map { "$_=$o{$_}" } sort keys %o);
	return \%o;
}

# The checks that hold in every committed state, asked of $node (the
# coordinator, or a worker, which has Citus's metadata too).
sub check_state
{
	my ($name, $node) = @_;
	$node //= $coord;
	is( $node->safe_psql(
			'postgres',
			'SELECT string_agg(id::text, \',\' ORDER BY id) FROM
			   (SELECT id FROM ev WHERE id IS NOT NULL GROUP BY id HAVING count(*) > 1) d'),
		'', "$name: no id twice in ev");
	# both sides read into intermediate results first: the two tables are
	# distributed by different columns
	is( $node->safe_psql(
			'postgres', q{
WITH k AS MATERIALIZED (SELECT id, tenant FROM gunique_keys."public.ev_id"),
     e AS MATERIALIZED (SELECT id, tenant FROM ev WHERE id IS NOT NULL)
SELECT string_agg(coalesce('key ' || k.id || ' of ' || k.tenant || ' without its row',
                           'row ' || e.id || ' of ' || e.tenant || ' without its key'), '; ')
  FROM k FULL JOIN e ON k.id = e.id AND k.tenant = e.tenant
 WHERE k.id IS NULL OR e.id IS NULL}),
		'', "$name: K, the key table holds exactly the (id, tenant) of ev's rows");
	is(join(',', map { $_->safe_psql('postgres', 'SELECT count(*) FROM pg_prepared_xacts') } @workers),
		join(',', map { 0 } @workers), "$name: no prepared transaction left on any worker");
}

# The node a shard of $table for distribution value $value is on.
sub placement
{
	my ($table, $value) = @_;
	return $coord->safe_psql('postgres',
		qq{SELECT nodeport FROM pg_dist_shard_placement
			WHERE shardid = get_shard_id_for_distribution_column('$table', $value)});
}

# A tenant on $node (any node without it) whose rows are on another shard
# than $tenant's: a key $tenant holds is refused to it by the key table, not
# by the shard's own gunique index.
sub other_tenant
{
	my ($tenant, $node) = @_;
	my $shard = q{SELECT get_shard_id_for_distribution_column('ev', %d)};
	my $mine = $coord->safe_psql('postgres', sprintf($shard, $tenant));
	for my $v (7000 .. 7200)
	{
		next if defined $node && placement('ev', $v) != $node->port;
		return $v if $coord->safe_psql('postgres', sprintf($shard, $v)) ne $mine;
	}
	die "no other tenant";
}

# A tenant from $from whose row is on $row_node, and a key from $from
# whose key table row is on $key_node.
sub tenant_and_key
{
	my ($row_node, $key_node, $from) = @_;
	my ($tenant, $key);
	for my $v ($from .. $from + 200)
	{
		$tenant //= $v if placement('ev', $v) == $row_node->port;
		$key //= $v if placement('gunique_keys."public.ev_id"', $v) == $key_node->port;
		last if defined $tenant && defined $key;
	}
	die "no tenant on " . $row_node->name . " or key on " . $key_node->name
	  unless defined $tenant && defined $key;
	return ($tenant, $key);
}

my ($w1, $w2) = @workers;

check_state('before the load');

###########################################################################
# (a) concurrency: 4 clients on the coordinator, 2 on worker1, 5 seconds.
{
	my $start = time;
	my @benches = (start_bench($coord, 'load', 4, 5), start_bench($workers[0], 'load', 2, 5));
	is(finish_bench($benches[0], 'load from the coordinator'), '',
		'load from the coordinator: pgbench ran, no client aborted, no serialization failure');
	is(finish_bench($benches[1], 'load from worker1'), '',
		'load from worker1: pgbench ran, no client aborted, no serialization failure');
	note sprintf('load: %.1f s', time - $start);
	my $oc = outcomes($coord, 'load');
	my $ow = outcomes($workers[0], 'load');
	cmp_ok($oc->{23505} // 0, '>', 0, 'load: the coordinator\'s clients met unique violations');
	cmp_ok($ow->{23505} // 0, '>', 0, 'load: worker1\'s clients met unique violations');
	cmp_ok($oc->{'00000'} // 0, '>', 0, 'load: and inserted, deleted or updated rows');
	check_state('after the load');
	# a worker sees the same: its metadata and the key table's
	check_state('after the load, seen from worker2', $workers[1]);
	cmp_ok($coord->safe_psql('postgres', 'SELECT count(*) FROM ev'), '>', $keys / 4,
		'load: ev holds rows');
}

# a2. A deadlock that only Citus sees: two transactions each hold a key
# and then insert the other's, one key on worker1's shard of the key table
# and the other on worker2's, so each worker sees one wait and no cycle.
# Citus's distributed deadlock detection cancels one (40P01, the error the
# load's clients may retry); the other gets both keys.
{
	my ($t1, $k1) = tenant_and_key($w1, $w1, 5000);
	my ($t2, $k2) = tenant_and_key($w2, $w2, 6000);
	my @s = map { $coord->background_psql('postgres', on_error_stop => 0) } 1 .. 2;
	$_->query_safe('\set VERBOSITY verbose') foreach @s;
	$s[0]->query_safe("BEGIN; INSERT INTO ev VALUES ($t1, $k1, 'a2')");
	$s[1]->query_safe("BEGIN; INSERT INTO ev VALUES ($t2, $k2, 'a2')");
	my $waits = sub {
		my ($node) = @_;
		$node->poll_query_until('postgres', 'SELECT count(*) > 0 FROM pg_locks WHERE NOT granted')
		  or die 'no wait on ' . $node->name;
	};
	# s0 waits for s1's key on worker2, then s1 for s0's on worker1
	$s[0]{stdin} .= "INSERT INTO ev VALUES ($t1, $k2, 'a2');\n";
	$s[0]{run}->pump_nb;
	$waits->($w2);
	$s[1]{stdin} .= "INSERT INTO ev VALUES ($t2, $k1, 'a2');\n";
	$s[1]{run}->pump_nb;
	my @err;
	foreach my $s (@s)
	{
		$s->query('COMMIT');
		push @err, $s->{stderr};
		$s->quit;
	}
	note "a2: $err[0] / $err[1]";
	my @victims = grep { $err[$_] =~ /ERROR/ } 0 .. 1;
	is(scalar @victims, 1, 'distributed deadlock: one transaction fails');
	like($err[ $victims[0] // 0 ], qr/40P01: canceling the transaction since it was involved in a distributed deadlock/,
		'distributed deadlock: Citus cancels it with 40P01');
	my $winner = $victims[0] ? $t1 : $t2;
	is($coord->safe_psql('postgres', "SELECT string_agg(DISTINCT tenant::text, ',') FROM ev WHERE id IN ($k1, $k2)"),
		$winner, 'distributed deadlock: the other has both keys');
	check_state('after a distributed deadlock');
}

###########################################################################
# (b) two-phase commit and crashes.  A row of a tenant on worker1 and its
# key on worker2: the COMMIT prepares on both.

# b1. worker2 stops before COMMIT: the key's insert is gone with it, the
# COMMIT fails and rolls the row back on worker1.
{
	my ($tenant, $key) = tenant_and_key($w1, $w2, 1000);
	my $s = $coord->background_psql('postgres', on_error_stop => 0);
	$s->query_safe("BEGIN; INSERT INTO ev VALUES ($tenant, $key, 'b1')");
	$w2->stop('immediate');
	my ($out, $failed) = $s->query('COMMIT');
	ok($failed, 'stopped before COMMIT: the COMMIT fails');
	note "COMMIT: $s->{stderr}";
	$s->quit;
	$w2->start;
	# "id + 0": every shard, not the lookup routed through the key table
	is($coord->safe_psql('postgres', "SELECT count(*) FROM ev WHERE id + 0 = $key"),
		'0', 'stopped before COMMIT: no row of the transaction is left');
	is($coord->safe_psql('postgres', qq{SELECT count(*) FROM gunique_keys."public.ev_id" WHERE id = $key}),
		'0', 'stopped before COMMIT: and no key');
	is($coord->safe_psql('postgres', 'SELECT recover_prepared_transactions()'),
		'0', 'stopped before COMMIT: nothing for recovery to do');
	check_state('stopped before COMMIT');
	my $other = other_tenant($tenant);
	$coord->safe_psql('postgres', "INSERT INTO ev VALUES ($other, $key, 'b1 again')");
	is($coord->safe_psql('postgres', qq{SELECT tenant FROM gunique_keys."public.ev_id" WHERE id = $key}),
		$other, 'stopped before COMMIT: the key is free for another tenant');
}

# A coordinator session holding its next transaction in its commit: after
# the local commit (which records the prepared transactions' outcome in
# pg_dist_transaction) and the workers' PREPARE TRANSACTION, before Citus
# sends COMMIT PREPARED (t/pause/'s callback, loaded last, runs first).
sub paused_insert
{
	my ($tenant, $key) = @_;
	my $s = $coord->background_psql('postgres', on_error_stop => 0);
	$s->query_safe(qq{LOAD '$module';
SET gunique_test_pause.file = '$pause';
SET gunique_test_pause.event = commit;
BEGIN;
INSERT INTO ev VALUES ($tenant, $key, 'paused')});
	open(my $f, '>', $pause) or die $!;
	close($f);
	my $offset = -s $coord->logfile;
	$s->{stdin} .= "COMMIT;\n";
	$s->{run}->pump_nb;
	$coord->wait_for_log(qr/gunique_test_pause: paused/, $offset);
	return $s;
}

my $prepared = q{SELECT count(*) FROM pg_prepared_xacts};

# b2. worker2, holding the key, crashes between PREPARE and COMMIT
# PREPARED: the transaction is committed (the coordinator says so), its row
# is on worker1, its key prepared on worker2.  Until recovery, the key is
# held by the prepared transaction: another tenant's insert of it waits.
{
	my ($tenant, $key) = tenant_and_key($w1, $w2, 2000);
	my $other = other_tenant($tenant);
	my $s = paused_insert($tenant, $key);
	is(join(',', map { $_->safe_psql('postgres', $prepared) } @workers),
		'1,1', 'crash before COMMIT PREPARED: both workers hold the transaction prepared');
	$w2->stop('immediate');
	unlink($pause) or die $!;
	my ($out, $failed) = $s->query('SELECT 1');
	note "COMMIT: $s->{stderr}";
	unlike($s->{stderr}, qr/ERROR/, 'crash before COMMIT PREPARED: the COMMIT succeeds');
	$s->quit;
	$w2->start;
	is($w2->safe_psql('postgres', $prepared), '1',
		'crash before COMMIT PREPARED: the prepared transaction survives the crash');
	is($coord->safe_psql('postgres', "SELECT tenant FROM ev WHERE id = $key AND tenant = $tenant"),
		$tenant, 'crash before COMMIT PREPARED: the row is committed on worker1');
	# a lookup by the key alone goes through the key table, where the key
	# is still prepared: it misses the row until recovery (README.md)
	is($coord->safe_psql('postgres', "SELECT count(*) FROM ev WHERE id = $key"),
		'0', 'crash before COMMIT PREPARED: a lookup by the key alone misses the row until recovery');
	my ($ret, $o, $err) = $coord->psql('postgres',
		"SET statement_timeout = '1s'; INSERT INTO ev VALUES ($other, $key, 'steal')");
	like($err, qr/statement timeout/,
		'crash before COMMIT PREPARED: an insert of the key waits for the prepared transaction');
	is($coord->safe_psql('postgres', 'SELECT recover_prepared_transactions()'),
		'1', 'crash before COMMIT PREPARED: recovery commits the prepared half');
	is($coord->safe_psql('postgres', qq{SELECT tenant FROM gunique_keys."public.ev_id" WHERE id = $key}),
		$tenant, 'crash before COMMIT PREPARED: the key is the row\'s');
	is($coord->safe_psql('postgres', "SELECT tenant FROM ev WHERE id = $key"),
		$tenant, 'crash before COMMIT PREPARED: and a lookup by the key finds the row');
	check_state('crash before COMMIT PREPARED');
	# (a timeout, not a hang, if the prepared transaction were left)
	($ret, $o, $err) = $coord->psql('postgres',
		"SET statement_timeout = '30s'; INSERT INTO ev VALUES ($other, $key, 'steal')");
	like($err, qr/duplicate key value violates unique constraint "ev_id"/,
		'crash before COMMIT PREPARED: the key is held');
}

# b3. The coordinator crashes at the same point: both halves are prepared,
# the outcome is in its pg_dist_transaction, and its recovery commits both.
{
	my ($tenant, $key) = tenant_and_key($w1, $w2, 3000);
	my $s = paused_insert($tenant, $key);
	$coord->stop('immediate');
	unlink($pause) or die $!;
	eval { $s->quit };
	$coord->start;
	is(join(',', map { $_->safe_psql('postgres', $prepared) } @workers),
		'1,1', 'coordinator crash before COMMIT PREPARED: both halves are prepared');
	is($coord->safe_psql('postgres', 'SELECT recover_prepared_transactions()'),
		'2', 'coordinator crash before COMMIT PREPARED: recovery commits both');
	is($coord->safe_psql('postgres', "SELECT tenant FROM ev WHERE id = $key"),
		$tenant, 'coordinator crash before COMMIT PREPARED: the row is committed');
	check_state('coordinator crash before COMMIT PREPARED');
}

# b4. A worker killed while clients on the coordinator and on worker1
# write: first worker2, then worker1, which runs clients itself and began
# their transactions (its own pg_dist_transaction says how they ended).
# Their transactions on the killed worker are cut off at any point.  Those
# between PREPARE and COMMIT PREPARED are left prepared, in doubt; as a
# kill rarely falls in that short window, in the first round the
# coordinator's clients (which load t/pause/ through PGOPTIONS) are held
# there when worker2 is killed, with some of their transactions prepared
# on it; worker1's clients are not held.  Then the maintenance
# daemons (each node's, for the transactions it began) resolve them all.
my $pause_load = "$tmp/pause_load";
my $held = "-c session_preload_libraries=$module -c gunique_test_pause.file=$pause_load"
  . ' -c gunique_test_pause.event=commit';
foreach my $round (1, 2)
{
	my $victim = $round == 1 ? $w2 : $w1;
	my $name = 'crash of ' . $victim->name . ' under load';
	my $rows = $coord->safe_psql('postgres', "SELECT count(*) FROM outcomes WHERE phase = 'crash$round'");
	my @benches = (
		start_bench($coord, "crash$round", 4, 60, $round == 1 ? $held : undef),
		start_bench($w1, "crash$round", 2, 60));
	my $start = time;
	while (time - $start < 2)
	{
		usleep(200_000);
		die "pgbench stopped early: $benches[0]{err}$benches[1]{err}"
		  unless $benches[0]{h}->pumpable && $benches[1]{h}->pumpable;
	}
	my $in_doubt = 0;
	if ($round == 1)
	{
		# hold the coordinator's four clients in their commits until
		# worker2 holds some of their transactions prepared
		for my $try (1 .. 10)
		{
			my $offset = -s $coord->logfile;
			open(my $f, '>', $pause_load) or die $!;
			close($f);
			my $t = time;
			# the first held client holds keys the others may wait for:
			# give them a moment to reach their commits too
			usleep(50_000)
			  while slurp_file($coord->logfile, $offset) !~ /gunique_test_pause: paused/
			  && time - $t < 30;
			usleep(300_000);
			$in_doubt = $w2->safe_psql('postgres', $prepared);
			last if $in_doubt > 0;
			unlink($pause_load) or die $!;
			usleep(200_000);
		}
		cmp_ok($in_doubt, '>', 0, "$name: worker2 holds transactions of held clients prepared");
	}
	note "$name: killed it and " . crash_node($victim) . ' processes of it';
	# the held clients go on: COMMIT PREPARED fails on worker2
	unlink($pause_load) if $round == 1;
	# every client meets the worker gone and aborts; the time limit is a
	# guard
	my $deadline = time + 30;
	foreach my $b (@benches)
	{
		while ($b->{h}->pumpable && time < $deadline)
		{
			$b->{h}->pump_nb;
			usleep(100_000);
		}
		$b->{h}->kill_kill if $b->{h}->pumpable;
		eval { $b->{h}->finish };
	}
	like($benches[0]{err}, qr/aborted/, "$name: the coordinator's pgbench clients are cut off");
	cmp_ok($coord->safe_psql('postgres', "SELECT count(*) FROM outcomes WHERE phase = 'crash$round'"),
		'>', $rows, "$name: the clients wrote before the crash");
	$victim->start;
	my @after = map { $_->safe_psql('postgres', $prepared) } @workers;
	note "$name: prepared transactions on the workers after the restart: " . join(',', @after);
	# $in_doubt may also count transactions of clients that were not held,
	# which can commit between that count and the crash: the held ones
	# must survive, so at least one is still prepared
	cmp_ok($after[1], '>', 0, "$name: the transactions prepared on worker2 survive its crash")
	  if $round == 1;
	foreach my $node ($coord, @workers)
	{
		$node->safe_psql('postgres',
			q{ALTER SYSTEM SET citus.recover_2pc_interval = '200ms'; SELECT pg_reload_conf()});
	}
	my $left;
	for (1 .. 300)
	{
		$left = join(',', map { $_->safe_psql('postgres', $prepared) } @workers);
		last if $left eq '0,0';
		usleep(100_000);
	}
	is($left, '0,0', "$name: the maintenance daemons resolve every prepared transaction");
	foreach my $node ($coord, @workers)
	{
		$node->safe_psql('postgres',
			q{ALTER SYSTEM RESET citus.recover_2pc_interval; SELECT pg_reload_conf()});
	}
	is(join(',', map { $_->safe_psql('postgres', 'SELECT recover_prepared_transactions()') } ($coord, @workers)),
		'0,0,0', "$name: recover_prepared_transactions() finds nothing left on any node");
	check_state($name);
	note sprintf('%s: %.1f s', $name, time - $start);
}

###########################################################################
# (c) a third worker, and the rebalancer moving shards to it while
# pgbench writes from the coordinator and worker1, in rounds of 2 seconds
# until the rebalance is done.
{
	my $w3 = citus_add_worker($coord, 'load_worker3', $conf);
	push @workers, $w3;
	my $on_w3 = sub {
		my ($table) = @_;
		return $coord->safe_psql('postgres',
			qq{SELECT count(*) FROM citus_shards WHERE table_name = '$table'::regclass AND nodeport = }
			  . $w3->port);
	};
	is($on_w3->('ev') . ',' . $on_w3->('gunique_keys."public.ev_id"'), '0,0',
		'rebalance: the new worker has no shard yet');
	my $job = $coord->safe_psql('postgres', 'SELECT citus_rebalance_start()');
	ok($job =~ /^\d+$/, "rebalance: a rebalance job started ($job)");
	my ($rounds, $running, @wrong) = (0, 0);
	my $start = time;
	while (1)
	{
		my $state = $coord->safe_psql('postgres', "SELECT state FROM pg_dist_background_job WHERE job_id = $job");
		last if $state =~ /finished|failed|cancelled/;
		$running++;
		die "the rebalance takes too long" if time - $start > 120;
		$rounds++;
		my @benches = (start_bench($coord, "move$rounds", 3, 2), start_bench($w1, "move$rounds", 1, 2));
		push @wrong, finish_bench($benches[0], "rebalance round $rounds, from the coordinator");
		push @wrong, finish_bench($benches[1], "rebalance round $rounds, from worker1");
	}
	is(join('', @wrong), '', 'rebalance: every round of pgbench ran, no client aborted, no serialization failure');
	note sprintf('rebalance: %d rounds of load, %.1f s', $rounds, time - $start);
	ok($running > 0, 'rebalance: the load ran while the rebalance was running');
	is($coord->safe_psql('postgres', "SELECT state FROM pg_dist_background_job WHERE job_id = $job"),
		'finished', 'rebalance: the rebalance job finished');
	note sprintf('rebalance: %d shards of ev and %d of the key table moved to the new worker',
		$on_w3->('ev'), $on_w3->('gunique_keys."public.ev_id"'));
	cmp_ok($on_w3->('ev'), '>', 0, 'rebalance: shards of ev moved to the new worker');
	cmp_ok($on_w3->('gunique_keys."public.ev_id"'), '>', 0, 'rebalance: shards of the key table moved to the new worker');
	# by logical replication, writes going on (Citus's default where the
	# table has a replica identity), not with writes blocked
	like(slurp_file($w3->logfile), qr/logical replication apply worker for subscription "citus_shard_move_subscription/,
		'rebalance: the shards moved by logical replication');
	my $u = 0;
	$u += outcomes($coord, "move$_")->{23505} // 0 for 1 .. $rounds;
	cmp_ok($u, '>', 0, 'rebalance: the clients met unique violations');
	# K held here once in about eight runs before routed statements took the
	# key table's shard metadata lock (src/citus/README, "Lookups"): a move
	# finished between a routed DELETE's read of the key and its delete,
	# which went to the old placement and was lost
	check_state('after the rebalance');
	check_state('after the rebalance, seen from the new worker', $w3);
	# the key is enforced through the moved shards
	my ($id, $holder) = split /\|/,
	  $coord->safe_psql('postgres', 'SELECT id, tenant FROM ev WHERE id IS NOT NULL ORDER BY id LIMIT 1');
	my $other = other_tenant($holder, $w3);
	my ($ret, $o, $err) = $w3->psql('postgres', "INSERT INTO ev VALUES ($other, $id, 'again')");
	like($err, qr/duplicate key value violates unique constraint "ev_id"/,
		'rebalance: a held key is refused from the new worker');
}

###########################################################################
# (d) every shard of the key table moved, twice, by logical replication,
# while clients on worker1 alone write, routed DELETEs among them.  A
# routed statement reads the key's key-table shard first: before it took
# that shard's metadata lock (src/citus/README, "Lookups"), a move could
# finish between the read and the DELETE's removal of the key, which
# Citus sent to the old placement: keys without their rows.
{
	my $ids = $coord->safe_psql('postgres',
		q{SELECT string_agg(shardid::text, ' ' ORDER BY shardid) FROM pg_dist_shard
		   WHERE logicalrelid = 'gunique_keys."public.ev_id"'::regclass});
	my @moves;
	foreach my $round (1, 2)
	{
		# each to a worker it is not on
		push @moves, map {
			qq{SELECT citus_move_shard_placement(s.shardid, s.nodename, s.nodeport, n.nodename, n.nodeport)
			     FROM citus_shards s,
			          LATERAL (SELECT nodename, nodeport FROM pg_dist_node
			                    WHERE groupid > 0 AND shouldhaveshards AND nodeport <> s.nodeport
			                    ORDER BY (nodeport + $_ + $round) % 7 LIMIT 1) n
			    WHERE s.shardid = $_}
		} split / /, $ids;
	}
	my ($mout, $merr) = ('', '');
	my $mover = IPC::Run::start(
		[
			'psql', '-XAtq', '-v', 'ON_ERROR_STOP=1', (map { ('-c' => $_) } @moves),
			'-h' => $coord->host, '-p' => $coord->port, 'postgres'
		],
		'<', \undef, '>', \$mout, '2>', \$merr);
	my ($rounds, @wrong) = (0);
	my $start = time;
	while ($mover->pumpable)
	{
		die "the moves take too long" if time - $start > 180;
		$rounds++;
		push @wrong, finish_bench(start_bench($w1, "keymove$rounds", 4, 2), "key table moves, round $rounds");
		$mover->pump_nb;
	}
	$mover->finish;
	is($? . $merr, '0', 'key table moves: every move finished');
	is(join('', @wrong), '', 'key table moves: every round of pgbench ran, no client aborted');
	note sprintf('key table moves: %d moves under %d rounds of load, %.1f s', scalar @moves, $rounds, time - $start);
	my $deleted = 0;
	$deleted += $w1->safe_psql('postgres',
		"SELECT count(*) FROM outcomes WHERE phase = 'keymove$_' AND op = 'delete' AND state = '00000'")
	  for 1 .. $rounds;
	cmp_ok($deleted, '>', 0, "key table moves: routed DELETEs removed rows ($deleted)");
	check_state('after the key table moves');
}

# No node crashed or failed an assertion (cassert builds), beyond the
# crashes the test made.
foreach my $node ($coord, @workers)
{
	my $log = slurp_file($node->logfile);
	unlike($log, qr/TRAP:|PANIC|terminated by signal/, 'no assertion failure or crash in ' . $node->name . '\'s log');
}

$_->stop foreach ($coord, @workers);

done_testing();

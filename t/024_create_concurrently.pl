# Copyright (c) gunique contributors
#
# CREATE UNIQUE INDEX CONCURRENTLY on a partitioned table (concurrent.c),
# and REINDEX INDEX CONCURRENTLY of the top finishing a tree left invalid.
# The table has 300,000 rows in 8 partitions, one of them sub-partitioned
# (9 leaves).
#
# The build is held at each of its phases by transactions it must wait for:
#
#   leaf       a leaf's CREATE INDEX CONCURRENTLY waits for a prepared
#              transaction that wrote to that partition (the leaf made, not
#              ready);
#   snapshots  the first leaf's CREATE INDEX CONCURRENTLY waits for a session
#              holding an old snapshot (the leaf ready, not valid);
#   step3      every leaf built, the wait for writers that may not have
#              probed every leaf ("waiting for writers before validation" on
#              the top) waits for a prepared transaction that wrote to a leaf
#              already built;
#   merge      the check across partitions waits for a prepared transaction
#              that deleted one of the two rows of a duplicated key.
#
# At each phase the building session is cancelled, twice: the top is left
# INVALID, the error's HINT says REINDEX INDEX CONCURRENTLY finishes it, the
# session keeps no lock and no progress report, the table takes inserts,
# and the build is finished by REINDEX INDEX CONCURRENTLY of the top (the
# first time; at the merge, first refused while the duplicate is there) or
# by DROP INDEX and a new CREATE UNIQUE INDEX CONCURRENTLY (the second).
# At each phase the server is also crashed (the building backend killed,
# or an immediate stop): after the restart the top is INVALID, the table
# takes inserts, and REINDEX INDEX CONCURRENTLY finishes the tree.  REINDEX
# INDEX CONCURRENTLY of a top made ON ONLY is cancelled at its own phases
# too.  A finished tree is valid in every member, holds no duplicate (a
# GROUP BY over the table and gunique_verify), and refuses one.
#
# The check across partitions, held at the duplicated key (which sorts
# first): it then meets a row moved to another partition and a key deleted
# and inserted elsewhere by transactions still in progress, waits for each,
# and judges the rows by how they end (no false duplicate); when the
# deleter of the duplicate rolls back, the build fails on it.  A
# transaction that wrote to a partition while the last leaf was being built
# then inserts a key that leaf holds: it is refused, or the build fails on
# it; never a valid tree with the key twice.
#
# pg_stat_progress_create_index is sampled from another session through a
# whole build: the partitioned table as relid, 9 partitions in all, the
# partitions done counting up, the leaves' own phases, the wait for writers
# on the top and the check across partitions.
#
# Then writers run throughout a build: inserts of new keys, updates of
# other columns, moves to other partitions, a key deleted and inserted again
# elsewhere in one transaction, keys changed, and inserts of keys that other
# partitions hold (or that other colliding writers insert).  With the
# colliding inserts held back until every leaf is valid (before, nothing
# would refuse them), the build is held at the wait for writers on the top
# and in the check while they all run, and must then succeed and hold no
# duplicate; a streaming standby sees the tree valid.  With colliding
# inserts from the start (each a key another partition holds), the build
# may fail with a unique violation (then the top is INVALID and a duplicate
# is really in the table) or succeed without one; the duplicates removed,
# REINDEX INDEX CONCURRENTLY finishes the tree with the writers still
# running.  In both, a writer fails only with a unique violation, and only
# when it inserts a key that another row holds.
#
# Holds are prepared transactions (max_prepared_transactions), which keep
# their locks and their rows' xid, hold no snapshot, and outlive a crash;
# the old snapshot is a session's, sleeping.  Every wait is polled, none
# slept.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueSessions;

my $nleaves = 9;
my $nrows = 300_000;
my $dup = -100000;    # the key duplicated in ct_0 and ct_1 for the merge
my $create = 'CREATE UNIQUE INDEX CONCURRENTLY ct_k ON ct USING gunique (k)';
my $reindex = 'REINDEX INDEX CONCURRENTLY ct_k';

my $node = PostgreSQL::Test::Cluster->new('cic');
$node->init(allows_streaming => 1);
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
max_connections = 30
max_prepared_transactions = 10
restart_after_crash = on
autovacuum = off
});
$node->start;
sessions_on($node);

# A partition of each top-level range holds p from 100 * i; ct_3 is split.
my %p_of = (
	ct_0 => 50,
	ct_1 => 150,
	ct_2 => 250,
	ct_3a => 310,
	ct_3b => 360,
	ct_4 => 450,
	ct_5 => 550,
	ct_6 => 650,
	ct_7 => 750);

$node->safe_psql(
	'postgres', qq{
CREATE EXTENSION gunique;
CREATE TABLE ct (p int NOT NULL, k int, v int NOT NULL DEFAULT 0)
	PARTITION BY RANGE (p);
CREATE TABLE ct_0 PARTITION OF ct FOR VALUES FROM (0) TO (100);
CREATE TABLE ct_1 PARTITION OF ct FOR VALUES FROM (100) TO (200);
CREATE TABLE ct_2 PARTITION OF ct FOR VALUES FROM (200) TO (300);
CREATE TABLE ct_3 PARTITION OF ct FOR VALUES FROM (300) TO (400)
	PARTITION BY RANGE (p);
CREATE TABLE ct_3a PARTITION OF ct_3 FOR VALUES FROM (300) TO (350);
CREATE TABLE ct_3b PARTITION OF ct_3 FOR VALUES FROM (350) TO (400);
CREATE TABLE ct_4 PARTITION OF ct FOR VALUES FROM (400) TO (500);
CREATE TABLE ct_5 PARTITION OF ct FOR VALUES FROM (500) TO (600);
CREATE TABLE ct_6 PARTITION OF ct FOR VALUES FROM (600) TO (700);
CREATE TABLE ct_7 PARTITION OF ct FOR VALUES FROM (700) TO (800);
INSERT INTO ct SELECT (g * 7) % 800, g FROM generate_series(1, $nrows) g;
VACUUM ANALYZE ct;
CREATE SEQUENCE kseq START 1000000;

-- The progress reports of the session 'builder', each change of phase,
-- index or partitions done, sampled until a row in sampler_stop says stop.
CREATE TABLE samples (n int, relid oid, index_relid oid, command text,
	phase text, total bigint, done bigint);
CREATE TABLE sampler_stop ();
CREATE PROCEDURE sample_progress() LANGUAGE plpgsql AS \$p\$
DECLARE
	i int := 0;
	r record;
	last text := '';
BEGIN
	LOOP
		PERFORM pg_stat_clear_snapshot();
		FOR r IN SELECT p.* FROM pg_stat_progress_create_index p
				 JOIN pg_stat_activity a USING (pid)
				 WHERE a.application_name = 'builder' LOOP
			IF format('%s %s %s %s', r.index_relid, r.phase, r.partitions_total,
					  r.partitions_done) <> last THEN
				i := i + 1;
				INSERT INTO samples VALUES (i, r.relid, r.index_relid, r.command,
					r.phase, r.partitions_total, r.partitions_done);
				last := format('%s %s %s %s', r.index_relid, r.phase,
							   r.partitions_total, r.partitions_done);
			END IF;
		END LOOP;
		COMMIT;
		EXIT WHEN EXISTS (SELECT FROM sampler_stop);
	END LOOP;
END
\$p\$;

-- The writers.  Keys 1 to $nrows: those = 1 (mod 3) are moved to other
-- partitions, those = 2 (mod 3) deleted and inserted again elsewhere or
-- changed to new keys, those = 0 (mod 3) only updated in other columns.
-- Colliding inserts take those, or keys -1 to -200 that only they insert,
-- in any partition once every leaf is valid (gated); or from the start
-- (not gated) each of those keys once, in another partition than its row's
-- (cseq): then every duplicate is across partitions, for the merge to find.
-- Every attempt runs in a subtransaction and leaves its SQLSTATE in
-- outcomes: '00000', 'miss' (no row found), 'gated' (a colliding insert
-- held back).
CREATE SEQUENCE cseq MAXVALUE @{[ $nrows / 3 ]};
CREATE TABLE outcomes (w text, op text, state text, msg text, x int);
CREATE TABLE writers_stop (w text);
-- Every leaf built: each ready, and valid but the one the build holds
-- invalid until the tree is (src/README, 4.11).
CREATE FUNCTION all_leaves_valid() RETURNS boolean LANGUAGE sql AS \$f\$
	SELECT count(DISTINCT t.relid) FILTER (WHERE i.indisready) = $nleaves
	   AND count(DISTINCT t.relid) FILTER (WHERE i.indisvalid) >= $nleaves - 1
	FROM pg_partition_tree('ct') t JOIN pg_index i ON i.indrelid = t.relid
	WHERE t.isleaf
\$f\$;
CREATE FUNCTION w_attempt(w text, op text, gated boolean) RETURNS void
LANGUAGE plpgsql AS \$f\$
DECLARE
	n bigint := 1;
	st text := '00000';
	m text;
	x int;
	p int := floor(random() * 800)::int;
BEGIN
	BEGIN
		IF op = 'insert' THEN
			INSERT INTO ct VALUES (p, nextval('kseq'));
		ELSIF op = 'touch' THEN
			x := 1 + floor(random() * $nrows)::int;
			UPDATE ct SET v = v + 1 WHERE k = x;
			GET DIAGNOSTICS n = ROW_COUNT;
		ELSIF op = 'move' THEN
			x := 1 + 3 * floor(random() * ($nrows / 3))::int;
			UPDATE ct SET p = (ct.p + 100 + floor(random() * 600)::int) % 800
			WHERE k = x;
			GET DIAGNOSTICS n = ROW_COUNT;
		ELSIF op = 'setkey' THEN
			x := 2 + 3 * floor(random() * ($nrows / 3))::int;
			UPDATE ct SET k = nextval('kseq') WHERE k = x;
			GET DIAGNOSTICS n = ROW_COUNT;
		ELSIF op = 'swap' THEN
			x := 2 + 3 * floor(random() * ($nrows / 3))::int;
			DELETE FROM ct WHERE k = x;
			GET DIAGNOSTICS n = ROW_COUNT;
			IF n > 0 THEN
				INSERT INTO ct VALUES (p, x);
			END IF;
		ELSIF op = 'collide' THEN
			IF NOT gated THEN
				x := 3 * nextval('cseq');
				INSERT INTO ct VALUES ((x * 7 + 100 * (1 + x % 7)) % 800, x);
			ELSIF NOT all_leaves_valid() THEN
				st := 'gated';
			ELSE
				x := CASE WHEN random() < 0.5
					THEN 3 * (1 + floor(random() * ($nrows / 3 - 1))::int)
					ELSE -1 - floor(random() * 200)::int END;
				INSERT INTO ct VALUES (p, x);
			END IF;
		END IF;
		IF n = 0 THEN
			st := 'miss';
		END IF;
	EXCEPTION WHEN OTHERS THEN
		st := SQLSTATE;
		m := SQLERRM;
	END;
	INSERT INTO outcomes VALUES (w, op, st, m, x);
END
\$f\$;
CREATE PROCEDURE writer(w text, ops text[], gated boolean)
LANGUAGE plpgsql AS \$p\$
BEGIN
	LOOP
		PERFORM w_attempt(w, ops[1 + floor(random() * array_length(ops, 1))::int],
						  gated);
		COMMIT;
		EXIT WHEN EXISTS (SELECT FROM writers_stop s WHERE s.w = writer.w);
		PERFORM pg_sleep(0.001);
	END LOOP;
END
\$p\$;
});

is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_partition_tree('ct') WHERE isleaf}),
	$nleaves, "the table has $nleaves leaves");

# A psql session in the background, named $name, that runs each statement
# of @sql in its own transaction (verbose errors: with their SQLSTATE),
# ended after the default timeout.
sub bg
{
	my ($name, @sql) = @_;
	my %s = (name => $name, out => '', err => '');
	local $ENV{PGAPPNAME} = $name;
	$s{h} = IPC::Run::start(
		[
			'psql', '-X', '-A', '-t', '-q', '-h', $node->host,
			'-p', $node->port, '-d', 'postgres',
			'-v', 'VERBOSITY=verbose', map { ('-c', $_) } @sql
		],
		'<', \undef, '>', \$s{out}, '2>', \$s{err},
		IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default));
	return \%s;
}

sub bg_finish
{
	my ($s) = @_;
	eval { $s->{h}->finish; };
	if ($@)
	{
		$s->{h}->kill_kill;
		return ('', "session $s->{name} timed out: $@");
	}
	return ($s->{out} =~ s/\s+$//r, $s->{err});
}

# The building session runs $stmt, then says whether it still holds a
# ShareUpdateExclusiveLock (session locks of the build) or a progress report.
my $builder;

sub builder_start
{
	my ($stmt) = @_;
	$builder = bg(
		'builder', $stmt,
		q{SELECT 'locks ' || count(*) FROM pg_locks
		  WHERE pid = pg_backend_pid() AND mode = 'ShareUpdateExclusiveLock'},
		q{SELECT 'progress ' || count(*) FROM pg_stat_progress_create_index
		  WHERE pid = pg_backend_pid()});
}

sub builder_finish
{
	return bg_finish($builder);
}

sub builder_pid
{
	return $node->safe_psql('postgres',
		q{SELECT pid FROM pg_stat_activity WHERE application_name = 'builder'});
}

sub cancel_builder
{
	$node->safe_psql('postgres',
		q{SELECT pg_cancel_backend(pid) FROM pg_stat_activity WHERE application_name = 'builder'});
}

my $progress_sql = q{
SELECT p.command, p.phase, p.index_relid::regclass, p.partitions_done,
	   a.wait_event_type, a.wait_event
FROM pg_stat_progress_create_index p JOIN pg_stat_activity a USING (pid)
WHERE a.application_name = 'builder'};

# Wait until the builder's progress report meets $cond (over p, the report,
# and a, its pg_stat_activity row); with $sampled, also until the sampler
# has seen that report ($scond over s, samples).
sub wait_build
{
	my ($label, $cond, $scond) = @_;
	my $ok = $node->poll_query_until(
		'postgres', qq{
SELECT count(*) > 0 FROM pg_stat_progress_create_index p
JOIN pg_stat_activity a USING (pid)
WHERE a.application_name = 'builder' AND $cond});
	ok($ok, $label)
	  or diag(
		"progress: "
		  . $node->safe_psql('postgres', $progress_sql)
		  . "\nbuilder: "
		  . $node->safe_psql('postgres',
			q{SELECT state, wait_event_type, wait_event, query FROM pg_stat_activity WHERE application_name = 'builder'}));
	if ($ok && defined $scond)
	{
		ok( $node->poll_query_until(
				'postgres', "SELECT count(*) > 0 FROM samples s WHERE $scond"),
			"$label, and the sampler saw it");
	}
	return $ok;
}

my $leaf_of_3b =
  q{(SELECT indexrelid FROM pg_index WHERE indrelid = 'ct_3b'::regclass)};
my %phase_cond = (
	leaf => [
		"p.phase = 'waiting for writers before build' AND p.index_relid IN $leaf_of_3b AND a.wait_event_type = 'Lock'",
		"s.phase = 'waiting for writers before build' AND s.index_relid IN $leaf_of_3b"
	],
	snapshots => [
		"p.phase = 'waiting for old snapshots' AND p.index_relid <> 'ct_k'::regclass AND a.wait_event_type = 'Lock'",
		"s.phase = 'waiting for old snapshots'"
	],
	step3 => [
		"p.phase = 'waiting for writers before validation' AND p.index_relid = 'ct_k'::regclass AND a.wait_event_type = 'Lock'",
		"s.phase = 'waiting for writers before validation' AND s.index_relid = 'ct_k'::regclass"
	],
	merge => [
		"p.phase LIKE 'building index: checking%' AND p.index_relid = 'ct_k'::regclass AND a.wait_event = 'transactionid'",
		"s.phase LIKE 'building index: checking%' AND s.index_relid = 'ct_k'::regclass"
	],);

# A transaction that ran $sql, prepared as $gid: it holds its locks, its
# rows' xid and no snapshot, and outlives a crash.
sub prepare_hold
{
	my ($gid, $sql) = @_;
	$node->safe_psql('postgres', "BEGIN; $sql; PREPARE TRANSACTION '$gid';");
}

sub end_prepared
{
	my ($gid, $how) = @_;
	$node->safe_psql('postgres', "$how PREPARED '$gid'");
}

# A leaf table whose leaf is valid by now.
sub a_valid_leaf
{
	for my $t (qw(ct_0 ct_1 ct_2 ct_4 ct_5 ct_6 ct_7 ct_3a))
	{
		return $t
		  if $node->safe_psql('postgres',
			"SELECT count(*) FROM pg_index WHERE indrelid = '$t'::regclass AND indisvalid"
		  ) eq '1';
	}
	return undef;
}

# Run $stmt in the session 'builder' and hold it at $phase; returns what
# holds it: { prepared => gid } or { session => GuniqueSessions session }.
# With $sampled, wait for the sampler to see each phase held; $at_step3 is
# called while the wait for writers on the top is held, before the check.
sub run_to
{
	my ($label, $phase, $stmt, $sampled, $at_step3) = @_;
	my $scond = sub { $sampled ? $phase_cond{ $_[0] }[1] : undef };

	if ($phase eq 'snapshots')
	{
		my $s = hold('old_snapshot', "SELECT 1;\n");
		builder_start($stmt);
		wait_build("$label: the first leaf's build waits for an old snapshot",
			$phase_cond{snapshots}[0], $scond->('snapshots'));
		return { session => $s };
	}
	prepare_hold('h_leaf',
		"INSERT INTO ct_3b VALUES ($p_of{ct_3b}, nextval('kseq'))");
	if ($sampled)
	{
		# the sampler sees the first leaf's build too
		my $s = hold('old_snapshot', "SELECT 1;\n");
		builder_start($stmt);
		wait_build("$label: the first leaf's build waits for an old snapshot",
			$phase_cond{snapshots}[0], $scond->('snapshots'));
		GuniqueSessions::release($s);
	}
	else
	{
		builder_start($stmt);
	}
	wait_build("$label: the build of ct_3b's leaf waits for its writer",
		$phase_cond{leaf}[0], $scond->('leaf'));
	return { prepared => 'h_leaf' } if $phase eq 'leaf';

	my $built = a_valid_leaf();
	ok(defined $built, "$label: a leaf is valid while ct_3b's is built");
	$built //= 'ct_0';
	prepare_hold('h_step3',
		"INSERT INTO $built VALUES ($p_of{$built}, nextval('kseq'))");
	end_prepared('h_leaf', 'COMMIT');
	wait_build("$label: the wait for writers on the top waits for a writer of $built",
		$phase_cond{step3}[0], $scond->('step3'));
	return { prepared => 'h_step3' } if $phase eq 'step3';

	prepare_hold('h_merge', "DELETE FROM ct_1 WHERE k = $dup");
	$at_step3->() if $at_step3;
	end_prepared('h_step3', 'COMMIT');
	wait_build("$label: the check across partitions waits for a deleter of a duplicated key",
		$phase_cond{merge}[0], $scond->('merge'));
	return { prepared => 'h_merge' };
}

# End what holds the build: a prepared transaction committed or rolled
# back ($how), a session's snapshot released.
sub release_hold
{
	my ($hold, $how) = @_;
	if ($hold->{session})
	{
		GuniqueSessions::release($hold->{session});
	}
	else
	{
		end_prepared($hold->{prepared}, $how);
	}
}

sub top_valid
{
	return $node->safe_psql('postgres',
		q{SELECT indisvalid FROM pg_index WHERE indexrelid = 'ct_k'::regclass});
}

sub ndups
{
	my ($n) = @_;
	return ($n // $node)->safe_psql('postgres',
		'SELECT count(*) FROM (SELECT k FROM ct GROUP BY k HAVING count(*) > 1) d'
	);
}

# The table takes an insert into every leaf.
sub check_writable
{
	my ($label) = @_;
	my ($ret, $out, $err) = $node->psql('postgres',
		'INSERT INTO ct SELECT p, nextval(\'kseq\') FROM unnest(ARRAY['
		  . join(', ', values %p_of) . ']) p');
	is($ret, 0, "$label: the table takes inserts") or diag($err);
}

# A finished tree: the top valid, one valid member on each of the 11
# tables, no duplicate, and a duplicate refused.
sub check_built
{
	my ($label, $n) = @_;
	$n //= $node;
	is(top_valid(), 't', "$label: the index is valid");
	is( $n->safe_psql(
			'postgres', q{
SELECT count(*) FILTER (WHERE i.indisvalid AND i.indisready AND i.indisunique),
	   count(*)
FROM pg_partition_tree('ct_k') m JOIN pg_index i ON i.indexrelid = m.relid
JOIN pg_partition_tree('ct') t ON t.relid = i.indrelid}),
		'11|11',
		"$label: every member of the tree is valid, ready and unique");
	is( $n->safe_psql(
			'postgres', q{
SELECT count(*) FROM pg_index i JOIN pg_partition_tree('ct') t ON t.relid = i.indrelid}),
		'11', "$label: each table has one index");
	is(ndups(), '0', "$label: no key is held twice");
	is($node->safe_psql('postgres', q{SELECT count(*) FROM gunique_verify('ct_k')}),
		'0', "$label: gunique_verify finds no duplicate");
	my $k = $node->safe_psql('postgres', 'SELECT k FROM ct_0 WHERE k > 0 LIMIT 1');
	my ($ret, $out, $err) =
	  $node->psql('postgres', "INSERT INTO ct VALUES ($p_of{ct_7}, $k)");
	like($err, qr/duplicate key value violates unique constraint/,
		"$label: a duplicate in another partition is refused");
}

# The cancelled or crashed build left the top invalid.
sub check_invalid
{
	my ($label) = @_;
	is(top_valid(), 'f', "$label: the index is left invalid");
}

sub reset_table
{
	my ($phase) = @_;
	$node->safe_psql('postgres', 'DROP INDEX IF EXISTS ct_k');
	$node->safe_psql('postgres', "DELETE FROM ct WHERE k = $dup");
	$node->safe_psql('postgres',
		"INSERT INTO ct VALUES ($p_of{ct_0}, $dup), ($p_of{ct_1}, $dup)")
	  if $phase eq 'merge';
}

my $hint = qr/HINT:\s+Index "ct_k" is left invalid: REINDEX INDEX CONCURRENTLY finishes it, DROP INDEX drops it\./;

###########################################################################
# Cancel at each phase.
###########################################################################

for my $phase (qw(leaf snapshots step3 merge))
{
	for my $retry (qw(reindex recreate))
	{
		my $label = "cancel at $phase, then $retry";
		reset_table($phase);
		my $hold = run_to($label, $phase, $create);
		cancel_builder();
		my ($out, $err) = builder_finish();
		like($err, qr/ERROR:\s+57014: canceling statement due to user request/,
			"$label: the build is cancelled");
		like($err, $hint, "$label: the HINT names REINDEX INDEX CONCURRENTLY");
		is($out, "locks 0\nprogress 0",
			"$label: the session keeps no lock and no progress report");
		# the duplicate of the merge stays
		release_hold($hold, 'ROLLBACK');
		check_invalid($label);
		check_writable($label);
		if ($phase eq 'merge' && $retry eq 'reindex')
		{
			my ($ret, $o, $e) = $node->psql('postgres', $reindex,
				extra_params => [ '-v', 'VERBOSITY=verbose' ]);
			like($e,
				qr/23505: could not create unique index "ct_k".*\n.*DETAIL:\s+Key \(k\)=\($dup\) is duplicated in partitions "ct_0" and "ct_1"/,
				"$label: REINDEX with the duplicate still there fails");
			like($e, $hint, "$label: and says so in its HINT");
			check_invalid("$label, REINDEX refused");
		}
		$node->safe_psql('postgres', "DELETE FROM ct_1 WHERE k = $dup");
		if ($retry eq 'reindex')
		{
			$node->safe_psql('postgres', $reindex);
		}
		else
		{
			$node->safe_psql('postgres', 'DROP INDEX ct_k');
			$node->safe_psql('postgres', $create);
		}
		check_built($label);
	}
}

###########################################################################
# Crash at each phase.
###########################################################################

for my $phase (qw(leaf snapshots step3 merge))
{
	my $how = $phase eq 'step3' ? 'immediate stop' : 'backend killed';
	my $label = "crash ($how) at $phase";
	reset_table($phase);
	my $hold = run_to($label, $phase, $create);
	if ($how eq 'immediate stop')
	{
		$node->stop('immediate');
		$node->start;
	}
	else
	{
		my $log_offset = -s $node->logfile;
		my $pid = builder_pid();
		if ($pid !~ /^[1-9][0-9]*$/)
		{
			fail("$label: the building session is there to kill");
			builder_finish();
			release_hold($hold, 'ROLLBACK');
			next;
		}
		kill 'KILL', $pid;
		$node->wait_for_log(qr/all server processes terminated; reinitializing/,
			$log_offset);
		$node->wait_for_log(qr/database system is ready to accept connections/,
			$log_offset);
	}
	builder_finish();
	GuniqueSessions::finish($hold->{session}) if $hold->{session};
	check_invalid($label);
	check_writable($label);
	# a prepared transaction outlives the crash; the merge's deleter commits
	end_prepared($hold->{prepared}, 'COMMIT') if $hold->{prepared};
	$node->safe_psql('postgres', $reindex);
	check_built($label);
}

###########################################################################
# REINDEX INDEX CONCURRENTLY of a top made ON ONLY, cancelled.
###########################################################################

for my $phase (qw(leaf step3 merge))
{
	my $label = "REINDEX cancelled at $phase";
	reset_table($phase);
	$node->safe_psql('postgres',
		'CREATE UNIQUE INDEX ct_k ON ONLY ct USING gunique (k)');
	my $hold = run_to($label, $phase, $reindex);
	is( $node->safe_psql(
			'postgres', q{
SELECT p.command FROM pg_stat_progress_create_index p
JOIN pg_stat_activity a USING (pid) WHERE a.application_name = 'builder'}),
		'REINDEX CONCURRENTLY',
		"$label: reported as REINDEX CONCURRENTLY");
	cancel_builder();
	my ($out, $err) = builder_finish();
	like($err, qr/ERROR:\s+57014: canceling statement due to user request/,
		"$label: the REINDEX is cancelled");
	like($err, $hint, "$label: the HINT names REINDEX INDEX CONCURRENTLY");
	is($out, "locks 0\nprogress 0",
		"$label: the session keeps no lock and no progress report");
	release_hold($hold, 'COMMIT');
	check_invalid($label);
	check_writable($label);
	$node->safe_psql('postgres', $reindex);
	check_built($label);
}

###########################################################################
# The check across partitions with writers: it waits for each transaction
# that is moving a row of a key it meets, and judges the row by its end.
###########################################################################

# Wait until the check waits for the prepared transaction $gid.
sub wait_check_on
{
	my ($label, $gid) = @_;
	ok( $node->poll_query_until(
			'postgres', qq{
SELECT count(*) > 0 FROM pg_locks l JOIN pg_stat_activity a USING (pid)
JOIN pg_stat_progress_create_index p USING (pid)
WHERE a.application_name = 'builder' AND NOT l.granted
  AND l.locktype = 'transactionid'
  AND l.transactionid = (SELECT transaction FROM pg_prepared_xacts WHERE gid = '$gid')
  AND p.phase LIKE 'building index: checking%'}),
		$label)
	  or diag("progress: " . $node->safe_psql('postgres', $progress_sql));
}

{
	my $label = 'check beside moves';
	reset_table('merge');
	# Keys 1 and 2 are in ct_0.  Moved after the wait for writers (which
	# does not wait for them) and before the check, which meets the old
	# and the new row of each, after the duplicate ($dup sorts first).
	my $hold = run_to(
		$label, 'merge', $create, 0,
		sub {
			prepare_hold('h_move', "UPDATE ct SET p = $p_of{ct_6} WHERE k = 1");
			prepare_hold('h_swap',
				"DELETE FROM ct WHERE k = 2; INSERT INTO ct VALUES ($p_of{ct_7}, 2)");
		});
	release_hold($hold, 'COMMIT');
	wait_check_on("$label: the check waits for the transaction moving key 1",
		'h_move');
	end_prepared('h_move', 'COMMIT');
	wait_check_on(
		"$label: the check waits for the transaction that deleted key 2 and inserted it elsewhere",
		'h_swap');
	end_prepared('h_swap', 'ROLLBACK');
	my ($out, $err) = builder_finish();
	is($err, '', "$label: the build succeeds");
	is( $node->safe_psql(
			'postgres', 'SELECT k, tableoid::regclass FROM ct WHERE k IN (1, 2) ORDER BY k'),
		"1|ct_6\n2|ct_0", "$label: key 1 moved, key 2 stayed");
	check_built($label);
}

{
	my $label = 'check, the deleter of a duplicate rolls back';
	reset_table('merge');
	my $hold = run_to($label, 'merge', $create);
	release_hold($hold, 'ROLLBACK');
	my ($out, $err) = builder_finish();
	like($err,
		qr/23505: could not create unique index "ct_k".*\n.*DETAIL:\s+Key \(k\)=\($dup\) is duplicated in partitions "ct_0" and "ct_1"/,
		"$label: the build fails on the duplicate");
	like($err, $hint, "$label: the HINT names REINDEX INDEX CONCURRENTLY");
	is($out, "locks 0\nprogress 0",
		"$label: the session keeps no lock and no progress report");
	check_invalid($label);
	check_writable($label);
	$node->safe_psql('postgres', "DELETE FROM ct_1 WHERE k = $dup");
	$node->safe_psql('postgres', $reindex);
	check_built($label);
}

###########################################################################
# The wait for writers on the top (step 3): a transaction that began
# writing to a partition before the last leaf was ready may insert a key
# that leaf holds without probing it.  The build must wait for it, and the
# check then finds the duplicate; or the insert is refused.  Never both go
# through with the tree valid.
###########################################################################

# An interactive psql session: query() sends a statement and waits for it.
sub isession
{
	my ($name) = @_;
	my %s = (name => $name, in => '', out => '', err => '');
	local $ENV{PGAPPNAME} = $name;
	$s{timer} = IPC::Run::timeout($PostgreSQL::Test::Utils::timeout_default);
	$s{h} = IPC::Run::start(
		[
			'psql', '-X', '-A', '-t', '-q', '-v', 'VERBOSITY=verbose',
			'-h', $node->host, '-p', $node->port, '-d', 'postgres'
		],
		'<', \$s{in}, '>', \$s{out}, '2>', \$s{err}, $s{timer});
	return \%s;
}

sub iquery
{
	my ($s, $sql) = @_;
	$s->{out} = '';
	$s->{err} = '';
	$s->{in} .= "$sql\n\\echo __done__\n\\warn __done__\n";
	$s->{timer}->start($PostgreSQL::Test::Utils::timeout_default);
	$s->{h}->pump
	  until $s->{out} =~ /__done__/ && $s->{err} =~ /__done__/;
	return ($s->{out} =~ s/__done__\s*//r =~ s/\s+$//r,
		$s->{err} =~ s/__done__\s*//r =~ s/\s+$//r);
}

sub iquit
{
	my ($s) = @_;
	$s->{in} .= "\\q\n";
	$s->{h}->finish;
}

{
	my $label = 'writer older than the last leaf';
	my $key = -200000;
	reset_table('none');
	prepare_hold('h_leaf',
		"INSERT INTO ct_3b VALUES ($p_of{ct_3b}, nextval('kseq'))");
	builder_start($create);
	wait_build("$label: the build of ct_3b's leaf waits for its writer",
		$phase_cond{leaf}[0]);
	# ct_0's leaf is valid, ct_3b's not ready: the writer does not probe it
	my $old = isession('old_writer');
	my ($o, $e) = iquery($old,
		"BEGIN; INSERT INTO ct_0 VALUES ($p_of{ct_0}, nextval('kseq'));");
	is($e, '', "$label: a writer of ct_0 begins while ct_3b's leaf is built");
	end_prepared('h_leaf', 'COMMIT');
	wait_build("$label: the wait for writers on the top waits for it",
		$phase_cond{step3}[0]);
	$node->safe_psql('postgres', "INSERT INTO ct_3b VALUES ($p_of{ct_3b}, $key)");
	($o, $e) = iquery($old, "INSERT INTO ct_0 VALUES ($p_of{ct_0}, $key);");
	note "$label: the old writer's insert of the key ct_3b holds: "
	  . ($e eq '' ? 'done' : $e);
	my $inserted = $e eq '';
	iquery($old, 'COMMIT;');
	iquit($old);
	my ($out, $err) = builder_finish();
	if ($inserted)
	{
		like($err,
			qr/23505: could not create unique index "ct_k".*\n.*DETAIL:\s+Key \(k\)=\($key\) is duplicated in partitions "ct_0" and "ct_3b"/,
			"$label: its insert went in, and the build fails on it");
		check_invalid($label);
	}
	else
	{
		like($e, qr/23505/, "$label: its insert is refused");
		is($err, '', "$label: the build succeeds");
	}
	is( $node->safe_psql('postgres',
			"SELECT count(*) FROM ct WHERE k = $key") > 1 ? top_valid() : 'f',
		'f', "$label: no valid tree with the key twice");
	$node->safe_psql('postgres', "DELETE FROM ct_0 WHERE k = $key");
	$node->safe_psql('postgres', $reindex) if top_valid() eq 'f';
	check_built($label);
}

###########################################################################
# The progress report, sampled through a whole build.
###########################################################################

{
	my $label = 'progress';
	reset_table('merge');
	my $sampler = bg('sampler', 'CALL sample_progress()');
	my $hold = run_to($label, 'merge', $create, 1);
	release_hold($hold, 'COMMIT');
	my ($out, $err) = builder_finish();
	is($err, '', "$label: the build succeeds once the deleter commits");
	is($out, "locks 0\nprogress 0",
		"$label: the session keeps no lock and no progress report");
	$node->safe_psql('postgres', 'INSERT INTO sampler_stop DEFAULT VALUES');
	my ($sout, $serr) = bg_finish($sampler);
	is($serr, '', "$label: the sampler ends");
	check_built($label);

	note $node->safe_psql('postgres',
		q{SELECT n, index_relid::regclass, phase, done FROM samples ORDER BY n});
	# A report restarted (the statement's own, then one for each leaf, as
	# DefineIndex ends its report after each) shows for an instant
	# 'initializing' and nothing else: those reports are left out.
	$node->safe_psql('postgres',
		q{DELETE FROM samples WHERE phase = 'initializing' AND index_relid = 0});
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) FILTER (WHERE relid = 'ct'::regclass),
	   count(*) FILTER (WHERE total = 9),
	   count(*) FILTER (WHERE command = 'CREATE INDEX CONCURRENTLY'),
	   count(*) > 10
FROM samples}),
		do {
			my $n = $node->safe_psql('postgres', q{SELECT count(*) FROM samples});
			"$n|$n|$n|t"
		},
		"$label: every report names the partitioned table, 9 partitions, CREATE INDEX CONCURRENTLY");
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) FROM (
	SELECT done, lag(done) OVER (ORDER BY n) AS prev FROM samples) s
WHERE done < prev}),
		'0', "$label: partitions done never go back");
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) FROM samples WHERE done NOT BETWEEN 0 AND 9}),
		'0', "$label: partitions done are between 0 and 9");
	# held: the first leaf (0 done), ct_3b's (8 done), the top (9 done)
	is( $node->safe_psql(
			'postgres', q{
SELECT string_agg(DISTINCT done::text, ',') FROM samples
WHERE done IN (0, 8, 9)}),
		'0,8,9', "$label: partitions done move from 0 to 8 to 9");
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) FROM samples
WHERE index_relid NOT IN (0, 'ct_k'::regclass)
  AND index_relid NOT IN (SELECT indexrelid FROM pg_index i
						  JOIN pg_partition_tree('ct') t ON t.relid = i.indrelid
						  WHERE t.isleaf)}),
		'0', "$label: the other reports are on the leaves' indexes");
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) FROM samples
WHERE done = 0 AND index_relid NOT IN (0, 'ct_k'::regclass)
  AND index_relid <> (SELECT indexrelid FROM pg_index
								   WHERE indrelid = 'ct_0'::regclass)}),
		'0', "$label: the first leaf built is ct_0's");
	my %seen = map { $_ => 1 } split /\n/,
	  $node->safe_psql('postgres', q{
SELECT DISTINCT CASE WHEN index_relid = 'ct_k'::regclass THEN 'top: ' ELSE 'leaf: ' END || phase
FROM samples WHERE index_relid <> 0});
	for my $phase ('leaf: waiting for writers before build',
		'leaf: waiting for old snapshots',
		'top: waiting for writers before validation',
		'top: building index: checking uniqueness across partitions')
	{
		ok($seen{$phase}, "$label: phase seen: $phase");
	}
	ok(scalar(grep { /^leaf: building index: / } keys %seen),
		"$label: a leaf's build phase seen");
	ok(scalar(grep { /^leaf: index validation: / } keys %seen),
		"$label: a leaf's validation phase seen");
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) FROM samples
WHERE index_relid = 'ct_k'::regclass AND phase <> 'waiting for writers before build'
  AND (done <> 9 OR phase NOT IN (
	'waiting for writers before validation',
	'building index: checking uniqueness across partitions'))}),
		'0', "$label: the top's own phases come with every leaf done");
}

###########################################################################
# Writers throughout a build; a standby.
###########################################################################

my $standby;
{
	$node->backup('backup');
	$standby = PostgreSQL::Test::Cluster->new('standby');
	$standby->init_from_backup($node, 'backup', has_streaming => 1);
	$standby->start;
}

# Start the writers; colliding inserts held back until every leaf is valid
# if $gated.
sub writers_start
{
	my ($gated) = @_;
	my $g = $gated ? 'true' : 'false';
	$node->safe_psql('postgres', 'TRUNCATE outcomes, writers_stop');
	return [
		bg('w_mixed', "CALL writer('mixed', '{insert,touch,move}', $g)"),
		bg('w_swap', "CALL writer('swap', '{swap,setkey,touch}', $g)"),
		bg('w_collide1', "CALL writer('collide1', '{collide}', $g)"),
		bg('w_collide2', "CALL writer('collide2', '{collide}', $g)"),
	];
}

sub noutcomes
{
	my ($where) = @_;
	return $node->safe_psql('postgres',
		'SELECT count(*) FROM outcomes' . ($where ? " WHERE $where" : ''));
}

# Wait until $n more attempts have been made (by the writers in $where).
sub wait_attempts
{
	my ($label, $n, $where) = @_;
	my $base = noutcomes($where);
	ok( $node->poll_query_until(
			'postgres',
			'SELECT count(*) >= ' . ($base + $n) . ' FROM outcomes'
			  . ($where ? " WHERE $where" : '')),
		$label);
}

sub writers_stop
{
	my ($label, $writers, @names) = @_;
	$node->safe_psql('postgres',
		'INSERT INTO writers_stop VALUES ' . join(', ', map { "('$_')" } @names));
	for my $s (@$writers)
	{
		my $w = $s->{name} =~ s/^w_//r;
		next unless grep { $_ eq $w } @names;
		my ($out, $err) = bg_finish($s);
		is($err, '', "$label: writer $w ends without an error");
	}
}

# Every attempt did its work, found no row, was held back, or (a colliding
# insert only) failed with a unique violation for a key another row held.
sub check_outcomes
{
	my ($label) = @_;
	note $node->safe_psql('postgres',
		q{SELECT w, op, state, count(*) FROM outcomes GROUP BY 1, 2, 3 ORDER BY 1, 2, 3});
	is( $node->safe_psql(
			'postgres', q{
SELECT op, state, msg, count(*) FROM outcomes
WHERE NOT (state IN ('00000', 'miss', 'gated')
		   OR (op = 'collide' AND state = '23505'))
GROUP BY 1, 2, 3}),
		'',
		"$label: writers fail with unique violations of colliding inserts only");
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) FROM outcomes o
WHERE state = '23505' AND NOT EXISTS (SELECT FROM ct WHERE k = o.x)}),
		'0', "$label: each refused key is held by a row");
	cmp_ok(noutcomes(q{op = 'collide' AND state = '23505'}), '>', 0,
		"$label: some colliding inserts are refused");
	cmp_ok(noutcomes(q{op = 'move' AND state = '00000'}), '>', 0,
		"$label: some rows move");
}

{
	# The build held while the writers run: at the wait for writers on the
	# top, then in the check at the duplicate ($dup sorts first), which then
	# reads on through pages the writers are changing.
	my $label = 'writers, colliding inserts once every leaf is valid';
	my $colliding = q{op = 'collide' AND state <> 'gated'};
	reset_table('merge');
	my $writers = writers_start(1);
	wait_attempts("$label: the writers run", 300);
	my $hold = run_to(
		$label, 'merge', $create, 0,
		sub {
			wait_attempts(
				"$label: colliding inserts run while the build waits for writers on the top",
				50, $colliding);
		});
	wait_check_on("$label: the check waits for the deleter of the duplicate",
		'h_merge');
	wait_attempts("$label: colliding inserts run while the check waits",
		50, $colliding);
	wait_attempts("$label: the other writers run while the check waits",
		100, q{op <> 'collide'});
	release_hold($hold, 'COMMIT');
	my ($out, $err) = builder_finish();
	is($err, '', "$label: the build succeeds");
	wait_attempts("$label: the writers run after the build", 300);
	wait_attempts("$label: colliding inserts run after the build",
		100, q{op = 'collide'});
	writers_stop($label, $writers, qw(mixed swap collide1 collide2));
	check_outcomes($label);
	check_built($label);

	$node->wait_for_catchup($standby, 'replay');
	is( $standby->safe_psql(
			'postgres', q{
SELECT count(*) FILTER (WHERE i.indisvalid AND i.indisready), count(*)
FROM pg_partition_tree('ct_k') m JOIN pg_index i ON i.indexrelid = m.relid}),
		'11|11', 'standby: every member of the tree is valid');
	is(ndups($standby), '0', 'standby: no key is held twice');
	is( $standby->safe_psql('postgres', 'SELECT count(*) FROM ct'),
		$node->safe_psql('postgres', 'SELECT count(*) FROM ct'),
		'standby: the rows of the primary');
	my $k = $standby->safe_psql('postgres', 'SELECT k FROM ct_1 WHERE k > 0 LIMIT 1');
	my ($ret, $o, $e) =
	  $node->psql('postgres', "INSERT INTO ct VALUES ($p_of{ct_5}, $k)");
	like($e, qr/duplicate key value violates unique constraint/,
		'a key the standby shows in ct_1 is refused in ct_5 on the primary');
}

{
	my $label = 'writers, colliding inserts throughout';
	reset_table('none');
	my $writers = writers_start(0);
	wait_attempts("$label: the writers run", 300);
	builder_start($create);
	my ($out, $err) = builder_finish();
	if ($err eq '')
	{
		note "$label: the build succeeded";
		is(ndups(), '0', "$label: built, so no key is held twice");
	}
	else
	{
		note "$label: the build failed: $err";
		like($err, qr/ERROR:\s+23505:/, "$label: the build fails with a unique violation");
		like($err, $hint, "$label: its HINT names REINDEX INDEX CONCURRENTLY");
		check_invalid($label);
		cmp_ok(ndups(), '>', 0, "$label: a key is held twice");
	}
	wait_attempts("$label: the writers run after the build", 300);
	writers_stop($label, $writers, qw(collide1 collide2));
	# The colliding writers stopped (moves, swaps and key changes go on):
	# remove the duplicates, and finish the tree.
	for (1 .. 10)
	{
		last if ndups() eq '0';
		$node->safe_psql(
			'postgres', q{
DELETE FROM ct WHERE (tableoid, ctid) IN (
	SELECT tableoid, ctid FROM (
		SELECT tableoid, ctid,
			   row_number() OVER (PARTITION BY k ORDER BY tableoid, ctid) AS r
		FROM ct WHERE k IN (SELECT k FROM ct GROUP BY k HAVING count(*) > 1)) d
	WHERE r > 1)});
	}
	is(ndups(), '0', "$label: duplicates removed");
	my ($ret, $o, $e) = $node->psql('postgres', $reindex);
	is($e, '', "$label: REINDEX INDEX CONCURRENTLY with writers running");
	wait_attempts("$label: the writers run after the REINDEX", 300);
	writers_stop($label, $writers, qw(mixed swap));
	check_outcomes($label);
	check_built($label);
}

my $log = slurp_file($node->logfile);
unlike($log, qr/TRAP:|PANIC:/, 'no assertion failure or panic');
unlike($log, qr/terminated by signal (?!9:)/, 'no backend crashed but those killed');

$standby->stop;
$node->stop;
done_testing();

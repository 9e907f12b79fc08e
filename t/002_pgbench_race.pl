# Copyright (c) gunique contributors
#
# Concurrent inserts, updates, partition moves and deletes of a few hot keys
# into many partitions, from several pgbench clients at once.  A gunique
# index must keep every key unique across all partitions; the only errors a
# writer may see are unique violations, deadlocks, and PostgreSQL's own
# serialization failure for an UPDATE or DELETE whose row a concurrent
# UPDATE moved to another partition.
#
# Every attempt goes through attempt(), which runs one statement in a
# subtransaction, catches any error and records its SQLSTATE in the outer
# transaction, so no client is ever aborted and every attempt leaves exactly
# one row in "outcomes".
#
# A negative control runs the same workload against a twin table that has a
# plain btree on b and checks uniqueness the naive way (NOT EXISTS before
# INSERT / UPDATE): it must end up with duplicates, which shows that the
# workload really makes writers of the same key overlap.  Its deletes leave
# duplicated keys alone, so every duplicate that got in is still there at
# the end.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);

my $clients = 6;
my $xacts = 1500;               # per client
my $nparts = 16;
my $keys = 200;                 # b is drawn from 1..$keys
my $amax = $nparts * 100 - 1;   # a is drawn from 0..$amax

my $node = PostgreSQL::Test::Cluster->new('race');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
max_connections = 30
deadlock_timeout = 50ms
log_lock_waits = off
});
$node->start;

my $setup = q{
CREATE EXTENSION gunique;
CREATE TABLE outcomes (tab text, op text, state text, msg text, xact bigint);

-- Run one statement in a subtransaction; record '00000' (done), 'miss' (no
-- row affected) or the SQLSTATE of the error it raised.
CREATE FUNCTION attempt(tab text, op text, stmt text) RETURNS text
LANGUAGE plpgsql AS $f$
DECLARE
	n bigint;
	st text;
	msg text;
BEGIN
	BEGIN
		EXECUTE stmt;
		GET DIAGNOSTICS n = ROW_COUNT;
		st := CASE WHEN n = 0 THEN 'miss' ELSE '00000' END;
	EXCEPTION WHEN OTHERS THEN
		st := SQLSTATE;
		msg := SQLERRM;
	END;
	INSERT INTO outcomes VALUES (tab, op, st, msg, txid_current());
	RETURN st;
END
$f$;
};
for my $tab ('t', 'c')
{
	$setup .= "CREATE TABLE $tab (a int NOT NULL, b int) PARTITION BY RANGE (a);\n";
	for my $i (0 .. $nparts - 1)
	{
		$setup .= sprintf(
			"CREATE TABLE %s_%d PARTITION OF %s FOR VALUES FROM (%d) TO (%d);\n",
			$tab, $i, $tab, $i * 100, ($i + 1) * 100);
	}
}
$setup .= "CREATE UNIQUE INDEX t_b ON t USING gunique (b);\n";
$setup .= "CREATE INDEX c_b ON c (b);\n";
$node->safe_psql('postgres', $setup);

# The statements of the workload, for the gunique table and for the naive
# control.  The placeholders are pgbench variables, substituted as text.
my %stmt = (
	t => {
		insert => q{format('INSERT INTO t VALUES (%s, %s)', :A, :B)},
		set_b => q{format('UPDATE t SET b = %s WHERE b = %s', :B2, :B)},
		move => q{format('UPDATE t SET a = %s WHERE b = %s', :A, :B)},
		delete => q{format('DELETE FROM t WHERE b = %s', :B)},
	},
	c => {
		insert =>
		  q{format('INSERT INTO c SELECT %s, %s WHERE NOT EXISTS (SELECT FROM c WHERE b = %2$s)', :A, :B)},
		set_b =>
		  q{format('UPDATE c SET b = %s WHERE b = %s AND NOT EXISTS (SELECT FROM c WHERE b = %1$s)', :B2, :B)},
		move => q{format('UPDATE c SET a = %s WHERE b = %s', :A, :B)},
		delete =>
		  q{format('DELETE FROM c WHERE b = %s AND (SELECT count(*) FROM c WHERE b = %1$s) = 1', :B)},
	},
);

# pgbench scripts (name@weight => text) for one table.  Multi-statement
# transactions hold uncommitted keys while they touch others, so writers
# wait for each other and sometimes deadlock.
sub scripts
{
	my ($tab) = @_;
	my $s = $stmt{$tab};
	my $call = sub {
		my ($op, $kind, %var) = @_;
		my $sql = $s->{$kind};
		$sql =~ s/:$_\b/:$var{$_}/g for keys %var;
		return "SELECT attempt('$tab', '$op', $sql);\n";
	};
	my $vars = "\\set a1 random(0, $amax)\n"
	  . "\\set a2 random(0, $amax)\n"
	  . "\\set b1 random(1, $keys)\n"
	  . "\\set b2 random(1, $keys)\n";
	return {
		"${tab}_insert.sql\@4" => $vars
		  . $call->('insert', 'insert', A => 'a1', B => 'b1'),
		"${tab}_pair.sql\@4" => $vars
		  . "BEGIN;\n"
		  . $call->('pair1', 'insert', A => 'a1', B => 'b1')
		  . $call->('pair2', 'insert', A => 'a2', B => 'b2')
		  . "COMMIT;\n",
		"${tab}_set_b.sql\@2" => $vars
		  . $call->('set_b', 'set_b', B => 'b1', B2 => 'b2'),
		"${tab}_move.sql\@3" => $vars
		  . "BEGIN;\n"
		  . $call->('move1', 'move', A => 'a1', B => 'b1')
		  . $call->('move2', 'move', A => 'a2', B => 'b2')
		  . "COMMIT;\n",
		"${tab}_delete.sql\@2" => $vars
		  . $call->('delete', 'delete', B => 'b1'),
		"${tab}_swap.sql\@3" => $vars
		  . "BEGIN;\n"
		  . $call->('swap1', 'delete', B => 'b1')
		  . $call->('swap2', 'insert', A => 'a1', B => 'b1')
		  . $call->('swap3', 'insert', A => 'a2', B => 'b2')
		  . "COMMIT;\n",
	};
}

# Ops that open a transaction, and the ops that must follow each of them.
my %followers = (
	pair1 => ['pair2'],
	move1 => ['move2'],
	swap1 => [ 'swap2', 'swap3' ],);
my @first_ops = qw(insert pair1 set_b move1 delete swap1);

my $total = $clients * $xacts;

# Run pgbench scripts from every client, $n transactions each.
sub run_pgbench
{
	my ($label, $n, $scripts) = @_;
	my $all = $clients * $n;
	$node->pgbench(
		"--no-vacuum --client=$clients --jobs=$clients --transactions=$n",
		0,
		[
			qr{number of transactions actually processed: $all/$all},
			qr{number of failed transactions: 0 }
		],
		[qr{^$}],
		"$label: pgbench completes all transactions with no client aborted",
		$scripts);
}

sub run_workload
{
	my ($tab) = @_;
	my $start = time;
	run_pgbench($tab, $xacts, scripts($tab));
	note sprintf("%s: workload took %.1f s", $tab, time - $start);
}

# Outcome counts for one table: { op => { state => count } }.
sub outcomes
{
	my ($tab) = @_;
	my %o;
	for my $line (
		split /\n/,
		$node->safe_psql(
			'postgres',
			"SELECT op, state, count(*) FROM outcomes WHERE tab = '$tab' GROUP BY 1, 2"))
	{
		my ($op, $state, $n) = split /\|/, $line;
		$o{$op}{$state} = $n;
	}
	return \%o;
}

sub sum_ops
{
	my ($o, $filter) = @_;
	my $n = 0;
	for my $op (keys %$o)
	{
		for my $st (keys %{ $o->{$op} })
		{
			$n += $o->{$op}{$st} if $filter->($op, $st);
		}
	}
	return $n;
}

sub check_accounting
{
	my ($tab, $o) = @_;
	my $n_first = 0;
	$n_first += sum_ops($o, sub { $_[0] eq $_ }) for @first_ops;
	is($n_first, $total,
		"$tab: one recorded outcome per transaction ($total transactions)");
	for my $first (sort keys %followers)
	{
		my $n = sum_ops($o, sub { $_[0] eq $first });
		for my $next (@{ $followers{$first} })
		{
			is(sum_ops($o, sub { $_[0] eq $next }),
				$n, "$tab: every $first attempt is followed by $next");
		}
	}
}

sub report
{
	my ($tab, $o) = @_;
	for my $op (sort keys %$o)
	{
		note "$tab $op: "
		  . join(', ',
			map { "$_=$o->{$op}{$_}" } sort keys %{ $o->{$op} });
	}
}

# Every attempt either did its work, found no row, or failed with one of
# the errors this workload may raise: a deadlock, $extra (a unique
# violation, for the gunique table), or, for an UPDATE or DELETE looking
# for its row, PostgreSQL's serialization failure for a row that a
# concurrent UPDATE moved to another partition.
sub check_states
{
	my ($tab, $extra) = @_;
	my $allowed = "'00000', 'miss', '40P01'" . ($extra ? ", $extra" : '');
	is( $node->safe_psql(
			'postgres', qq{
SELECT op, state, msg, count(*) FROM outcomes
WHERE tab = '$tab'
  AND state NOT IN ($allowed)
  AND NOT (state = '40001'
		   AND op IN ('set_b', 'move1', 'move2', 'delete', 'swap1')
		   AND msg LIKE '%moved to another partition due to concurrent update')
GROUP BY 1, 2, 3 ORDER BY 1, 2, 3}),
		'',
		"$tab: no attempt fails with an unexpected error");
}

my $log_offset = -s $node->logfile;

# The gunique table.
run_workload('t');

my $o = outcomes('t');
report('t', $o);
check_accounting('t', $o);

check_states('t', q{'23505'});
my $n_ok = sum_ops($o, sub { $_[1] eq '00000' });
my $n_uv = sum_ops($o, sub { $_[1] eq '23505' });
my $n_dl = sum_ops($o, sub { $_[1] eq '40P01' });
note "t: $n_ok done, $n_uv unique violations, $n_dl deadlocks";
cmp_ok($n_ok, '>', 0, 't: some attempts succeed');
cmp_ok($n_uv, '>', 0, 't: some inserts and updates hit a unique violation');
cmp_ok(sum_ops($o, sub { $_[0] =~ /^(insert|pair|swap[23])/ && $_[1] eq '23505' }),
	'>', 0, 't: some inserts hit a unique violation');
cmp_ok(sum_ops($o, sub { $_[0] eq 'set_b' && $_[1] eq '23505' }),
	'>', 0, 't: some updates of the key hit a unique violation');
is(sum_ops($o, sub { $_[0] =~ /^(move|delete|swap1)/ && $_[1] eq '23505' }),
	0, 't: moves and deletes never hit a unique violation');

# A transaction that deleted a key may always insert it again: no other
# transaction can take the key before it ends.
my $reinsert = q{
SELECT count(*) FROM outcomes d JOIN outcomes i USING (tab, xact)
WHERE tab = 't' AND d.op = 'swap1' AND d.state = '00000' AND i.op = 'swap2'
  AND i.state NOT IN };
is($node->safe_psql('postgres', "$reinsert ('00000', '40P01')"),
	'0', 't: re-inserting a key the transaction deleted never conflicts');

# Deadlocks that a unique btree on an unpartitioned table cannot have.  A
# first statement that only inserts or deletes holds nothing another writer
# waits for while it waits itself: like btree, gunique waits for a
# conflicting inserter before it adds its own entry, and re-inserting a key
# the transaction deleted waits for nobody.  (A first UPDATE holds the row
# it updates while it inserts the new version, so it can take part in a
# genuine deadlock, with btree too.)
is( sum_ops(
		$o,
		sub {
			$_[0] =~ /^(insert|pair1|delete|swap1)$/
			  && $_[1] eq '40P01';
		}),
	0,
	't: no deadlock in a first statement that only inserts or deletes');
is($node->safe_psql('postgres', "$reinsert ('00000')"),
	'0', 't: re-inserting a key the transaction deleted never deadlocks');

# No key twice: as the planner likes, and from the heap only.
is( $node->safe_psql(
		'postgres',
		'SELECT b, count(*) FROM t GROUP BY b HAVING count(*) > 1'),
	'',
	't: no key occurs twice');
my $heap_keys = $node->safe_psql(
	'postgres', q{
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = off;
SELECT string_agg(b::text, ',' ORDER BY b), count(*) = count(DISTINCT b)
FROM t;
});
like($heap_keys, qr/\|t$/, 't: no key occurs twice in the heap');

# The index finds exactly the keys the heap holds.
my $index_keys = $node->safe_psql(
	'postgres', qq{
SET enable_seqscan = off;
SET enable_bitmapscan = off;
SELECT string_agg(b::text, ',' ORDER BY b), count(*) = count(DISTINCT b)
FROM generate_series(1, $keys) k, LATERAL (SELECT b FROM t WHERE b = k) s;
});
is($index_keys, $heap_keys, 't: index scans find exactly the heap\'s keys');

# Every surviving key is enforced: inserting it again into the first
# partition (even keys) or the last one (odd keys) is a unique violation,
# and inserting a missing key succeeds.
my ($held) = split /\|/, $heap_keys;
my $recheck = $node->safe_psql(
	'postgres', qq{
BEGIN;
SELECT string_agg(k::text, ',' ORDER BY k) FILTER (WHERE st = '23505'),
	   count(*) FILTER (WHERE st = '00000'),
	   count(*) FILTER (WHERE st NOT IN ('23505', '00000'))
FROM generate_series(1, $keys) k,
	 LATERAL attempt('recheck', 'insert',
		format('INSERT INTO t VALUES (%s, %s)',
			   CASE WHEN k % 2 = 0 THEN 0 ELSE $amax END, k)) st;
ROLLBACK;
});
my @held = split /,/, $held;
my $nheld = scalar @held;
is($recheck, "$held|" . ($keys - $nheld) . "|0",
	't: afterwards, held keys are refused and free keys accepted');

# The negative control: the same workload with a naive check.
run_workload('c');
my $oc = outcomes('c');
report('c', $oc);
check_accounting('c', $oc);
check_states('c', '');
my $dups = $node->safe_psql('postgres',
	'SELECT count(*) FROM (SELECT b FROM c GROUP BY b HAVING count(*) > 1) d'
);
note "c: $dups keys occur more than once";
cmp_ok($dups, '>', 0,
	'c: the naive check lets duplicates in, so the workload really races');

# Key filters under concurrency: random keys from a large space into 16
# partitions, from an empty index, so that the group's filter and each
# partition's are built and then replaced by bigger ones several times
# while other clients insert and probe.  Keys collide often enough that some inserts are
# refused; in the end no key is held twice and every held key is refused
# from another partition.
my $fkeys = 100000;
my $fxacts = 5000;
$node->safe_psql(
	'postgres', q{
CREATE TABLE f (a int NOT NULL, b int) PARTITION BY RANGE (a);
SELECT format('CREATE TABLE f_%s PARTITION OF f FOR VALUES FROM (%s) TO (%s)',
			  i, i * 25, (i + 1) * 25)
  FROM generate_series(0, 15) i \gexec
CREATE UNIQUE INDEX f_b ON f USING gunique (b);
SELECT gunique_probe_stats_reset();
});
# One random insert into f, keys drawn from 1..$n.
sub f_script
{
	my ($n) = @_;
	return qq{\\set a random(0, 399)
\\set b random(1, $n)
SELECT attempt('f', 'insert', format('INSERT INTO f VALUES (%s, %s)', :a, :b));
};
}
run_pgbench('f', $fxacts, { 'f_insert.sql' => f_script($fkeys) });
my $fo = outcomes('f');
report('f', $fo);
is(sum_ops($fo, sub { $_[1] !~ /^(00000|23505)$/ }),
	0, 'f: every insert succeeds or is a unique violation');
cmp_ok(sum_ops($fo, sub { $_[1] eq '23505' }),
	'>', 0, 'f: some inserts hit a unique violation');
is( $node->safe_psql(
		'postgres', q{
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = off;
SELECT count(*) - count(DISTINCT b) FROM f;
}),
	'0',
	'f: no key occurs twice');
is( $node->safe_psql(
		'postgres', q{
SELECT sum(partitions_filtered) > 10 * sum(partitions_probed)
FROM gunique_stat_probes WHERE partition::text LIKE 'f\_%'
}),
	't',
	'f: the filters rule out most partitions');
is( $node->safe_psql(
		'postgres', q{
BEGIN;
SELECT count(*) FILTER (WHERE st <> '23505')
FROM f, LATERAL attempt('recheck', 'insert',
	format('INSERT INTO f VALUES (%s, %s)', (a + 100) % 400, b)) st;
ROLLBACK;
}),
	'0',
	'f: afterwards, every held key is refused from another partition');

# The same with almost no memory for filters (room for a few small ones:
# some partitions go without, the others keep filters that overflow), and
# with filters turned off.
for my $mem ('16kB', '0')
{
	$node->append_conf('postgresql.conf', "gunique.filter_memory = '$mem'");
	$node->restart;
	$node->safe_psql('postgres',
		'TRUNCATE f; DELETE FROM outcomes; SELECT gunique_probe_stats_reset()');
	run_pgbench("f, filter_memory $mem",
		2000, { "f_insert_$mem.sql" => f_script(20000) });
	is( $node->safe_psql(
			'postgres', q{
SELECT count(*) FILTER (WHERE state NOT IN ('00000', '23505')),
	   count(*) FILTER (WHERE state = '23505') > 0
FROM outcomes}),
		'0|t',
		"f, filter_memory $mem: inserts succeed or hit a unique violation");
	is( $node->safe_psql(
			'postgres', q{
BEGIN;
SELECT (SELECT count(*) - count(DISTINCT b) FROM f),
	   count(*) FILTER (WHERE st <> '23505')
FROM f, LATERAL attempt('recheck', 'insert',
	format('INSERT INTO f VALUES (%s, %s)', (a + 100) % 400, b)) st;
ROLLBACK;
}),
		'0|0',
		"f, filter_memory $mem: no key twice, every held key refused elsewhere");
}
is( $node->safe_psql(
		'postgres', q{
SELECT sum(partitions_filtered) FROM gunique_stat_probes
WHERE partition::text LIKE 'f\_%'}),
	'0',
	'with filter_memory 0, no partition is ruled out by a filter');

# UPDATE by the key, planned for the key's partition (keyprune.c), while
# other clients move the same rows between partitions (an UPDATE of the
# partition key, by the key too).  Prepared statements: a stub, replaced
# at each execution by the plan kept for the key's partition (keyplan.c).  An increment waiting for a row that another client moved fails
# with PostgreSQL's serialization failure, which pgbench retries; one that
# ran against a plan whose partition the row had left would change no row
# and still log itself.  Every key's value must equal its logged
# increments.
my $msetup = q{
CREATE TABLE m (a int NOT NULL, b int NOT NULL, v int NOT NULL) PARTITION BY RANGE (a);
CREATE TABLE m_log (b int NOT NULL);
};
for my $i (0 .. $nparts - 1)
{
	$msetup .= sprintf(
		"CREATE TABLE m_%d PARTITION OF m FOR VALUES FROM (%d) TO (%d);\n",
		$i, $i * 100, ($i + 1) * 100);
}
$msetup .= q{
CREATE UNIQUE INDEX m_b ON m USING gunique (b);
INSERT INTO m SELECT (g * 37) % 1600, g, 0 FROM generate_series(1, 40) g;
};
$node->safe_psql('postgres', $msetup);
$node->pgbench(
	"--no-vacuum --protocol=prepared --client=$clients --jobs=$clients --transactions=1500 --max-tries=10000",
	0,
	[qr{number of failed transactions: 0 }],
	[qr{^$}],
	'm: increments and moves by the key complete, serialization failures retried',
	{
		'm_inc.sql@1' => q{
\set k random(1, 40)
BEGIN;
UPDATE m SET v = v + 1 WHERE b = :k;
INSERT INTO m_log VALUES (:k);
COMMIT;
},
		'm_move.sql@1' => q{
\set k random(1, 40)
\set a random(0, 1599)
UPDATE m SET a = :a WHERE b = :k;
}
	});
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FILTER (WHERE m.v <> coalesce(l.n, 0)), sum(m.v) > 1000
FROM m LEFT JOIN (SELECT b, count(*) AS n FROM m_log GROUP BY b) l USING (b)
}),
	'0|t',
	'm: every key holds exactly its logged increments');
for my $mode ('custom', 'generic')
{
	my $plan = $node->safe_psql(
		'postgres', qq{
PREPARE mi(int) AS UPDATE m SET v = v WHERE b = \$1;
SET plan_cache_mode = force_${mode}_plan;
EXPLAIN (COSTS OFF) EXECUTE mi(1);
});
	my @parts = $plan =~ /^\s+Update on m_\d+/mg;
	is(scalar(@parts), 1,
		"m: the UPDATE by the key runs the plan of the key's partition ($mode plan)");
}

# No crash, no assertion failure.
my $log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/TRAP:|PANIC:|server process .* was terminated|terminated by signal/,
	'server log shows no crash or assertion failure');
ok($node->safe_psql('postgres', 'SELECT 1') eq '1', 'server still up');

$node->stop;

done_testing();

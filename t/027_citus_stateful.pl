# Copyright (c) gunique contributors
#
# A randomized stateful test of global keys on Citus (src/citus/README): a
# coordinator and two workers (t/lib/GuniqueCitus.pm), a hash-distributed
# table ev<round> (tenant int, id bigint, payload text) with a gunique
# unique index on id, which leaves out the distribution column and so has a
# key table, gunique_keys."public.ev<round>_id".  Each round makes a new
# table: 4 shards; partitioned by HASH (payload) into 3 partitions with 6
# shards (an UPDATE of the payload moves rows between partitions); 8
# shards; and so on in turn.
#
# A model in Perl holds the table's committed rows, and the rows each open
# transaction and savepoint sees.  Random steps, each from a session on the
# coordinator or on a worker (Citus lets workers write), run:
#   - INSERT of one row, of a few, and of 70-200 in one statement (one
#     key takes the key table's kept statement, more one planned with its
#     values), as VALUES or INSERT ...
#     SELECT FROM (VALUES ...), at times with RETURNING; keys from a small
#     range (so conflicts happen) or new ones with a held key or a key
#     twice slipped in; NULL keys at times; tenants on different shards;
#   - COPY FROM STDIN of a few rows or of 70-90;
#   - UPDATE of the payload by the key (routed) and by the tenant; DELETE
#     by the key (routed), by the tenant and by an IN list (not routed);
#   - UPDATE of the key by the key, also to NULL, of every key of one or
#     two tenants by an offset, and swapping two keys (a key handed from
#     one row to another across shards must go through: the key table's
#     deletes go first) (PostgreSQL 18; on 17 each is refused with
#     "requires PostgreSQL 18", checked, and changes nothing);
#   - lookups by the key (routed: SELECT ... WHERE id = k, also k::int and
#     count(*)), and prepared lookups, DELETEs and UPDATEs by the key
#     executed 6 to 10 times in a row (the generic plan from the sixth);
#   - TRUNCATE (rare, from the coordinator);
#   - transactions: BEGIN, 2 to 6 of the above, some under a SAVEPOINT
#     released or rolled back to, then COMMIT or ROLLBACK; the session's
#     own view checked at times inside (lookups, and invariant K read by
#     the session itself);
#   - a wait scene: a transaction inserts a key, deletes it or (18) moves
#     it to another, and a second session (on the coordinator or a worker)
#     inserts or copies that key in autocommit: it must wait (a lock wait
#     seen on some node) until the first ends, then fail (23505) or
#     succeed as the first's COMMIT or ROLLBACK decides;
#   - a deadlock scene: two transactions each insert a key, then each
#     inserts the other's: exactly one is a deadlock victim (40P01), the
#     other's insert then succeeds;
#   - a shard move, between steps (no transaction open): a shard of the
#     key table (with writes blocked or by logical replication) or of the
#     table (writes blocked) moved to the other worker, its old placement
#     dropped at once; the sessions' prepared and routed statements then
#     find the key and the row where they now are.
# The model predicts each statement's outcome: success with the rows it
# changed (psql's ROW_COUNT, and RETURNING's rows), or 23505 with nothing
# changed (a statement's error rolls it back whole); where a conflict is
# only across shards the error must name the index itself and its DETAIL a
# conflicting key and the tenant that holds it; where it is within one
# shard the shard's own index reports it.  Where the order of rows decides
# (an UPDATE that hands a key from one row to another within one shard:
# the shard's index checks row by row), both are allowed and the outcome
# is taken as it comes.
#
# After every step (every GUNIQUE_STATEFUL_CHECK_EVERY steps), from a
# control session on the coordinator:
#   - invariant K: the key table holds exactly the (id, tenant) of the
#     table's rows with non-NULL id (md5 of both sorted lists), and both
#     are the model's;
#   - no id appears twice in the table;
#   - the table's rows are the model's;
# every 20 checks and at the end of a round gunique_verify() reports
# nothing; at the end of a round DROP TABLE leaves no key table shard on
# any node; at the end, no node's server log holds an assertion failure, a
# PANIC or a backend killed by a signal.
#
# The run is reproducible from its seed, printed at the start and with any
# failure (with the steps before it, and the variables that reproduce it);
# only timing decides which of two deadlocked transactions is the victim.
# Every statement, with its outcome, is written to
# tmp_check/log/027_citus_stateful_statements.log.
#
#   GUNIQUE_STATEFUL_SEED=n         the seed (default: 1)
#   GUNIQUE_STATEFUL_STEPS=n        steps per table (default: 100, a CI run of
#                                   15 to 45 s)
#   GUNIQUE_STATEFUL_ROUNDS=n       tables made (default: 2)
#   GUNIQUE_STATEFUL_CHECK_EVERY=n  steps between checks (default: 1)
#   GUNIQUE_STATEFUL_WEIGHTS=       the weights of the operations, by the
#     name=n,...                    names in @ops (e.g. "deadlock=5,tx=20")
#
# A long run, e.g.
#   GUNIQUE_STATEFUL_SEED=7 GUNIQUE_STATEFUL_ROUNDS=6 GUNIQUE_STATEFUL_STEPS=600 \
#     make installcheck REGRESS= ISOLATION= PROVE_TESTS=t/027_citus_stateful.pl
#
# Skipped where Citus is not installed (PostgreSQL 15), as t/025 is.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use Digest::MD5 qw(md5_hex);
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueCitus;

plan skip_all => 'Citus is not installed for this PostgreSQL (tools/install-deps builds it into 17 and 18)'
  unless citus_available();

my $seed = $ENV{GUNIQUE_STATEFUL_SEED} // 1;
my $steps = $ENV{GUNIQUE_STATEFUL_STEPS} // 100;
my $rounds = $ENV{GUNIQUE_STATEFUL_ROUNDS} // 2;
my $check_every = $ENV{GUNIQUE_STATEFUL_CHECK_EVERY} // 1;
my $reproduce = "GUNIQUE_STATEFUL_SEED=$seed GUNIQUE_STATEFUL_STEPS=$steps "
  . "GUNIQUE_STATEFUL_ROUNDS=$rounds GUNIQUE_STATEFUL_CHECK_EVERY=$check_every"
  . (defined $ENV{GUNIQUE_STATEFUL_WEIGHTS} ? " GUNIQUE_STATEFUL_WEIGHTS=\"$ENV{GUNIQUE_STATEFUL_WEIGHTS}\"" : '');
note "seed $seed, $steps steps, $rounds rounds: reproduce with $reproduce";
srand($seed);

my $ntenants = 12;    # tenants 0 .. 11
my $nsmall = 60;      # keys 1 .. 60: conflicts happen
my $started = time;

my ($coord, @workers) = citus_cluster(
	name => 'cst',
	conf => qq{
deadlock_timeout = 100ms
log_line_prefix = '%m [%p] %e: '
});
my $pg18 = $coord->safe_psql('postgres', 'SHOW server_version_num') >= 180000;

#
# Sessions: psql processes fed one statement at a time, each followed by a
# marker that carries the statement's SQLSTATE and psql's ROW_COUNT.
#
my $stmt_log = "$PostgreSQL::Test::Utils::log_path/027_citus_stateful_statements.log";
open(my $stmt_fh, '>', $stmt_log) or die "$stmt_log: $!";
$stmt_fh->autoflush(1);

my (@trace, $round, $stepno, $failed, $table, $index, $keytable);
$stepno = 0;
$round = 0;

sub trace
{
	my ($line) = @_;
	print $stmt_fh "[$round.$stepno] $line\n";
	$line = substr($line, 0, 300) . ' ...' if length $line > 300;
	push @trace, "[$round.$stepno] $line";
	shift @trace if @trace > 50;
}

sub fail_now
{
	my ($what) = @_;
	die "FAILED\n" if $failed;
	$failed = 1;
	ok(0, "round $round, step $stepno: $what");
	diag "seed $seed, round $round, step $stepno: $what";
	diag "reproduce with $reproduce make installcheck REGRESS= ISOLATION= PROVE_TESTS=t/027_citus_stateful.pl";
	diag "recent steps (every statement: $stmt_log):\n" . join("\n", @trace);
	diag "server logs: " . check_logs();
	die "FAILED\n";
}

sub sess_new
{
	my ($node, $name, @init) = @_;
	my $s = { name => $name, node => $node, in => '', out => '', err => '', seq => 0 };
	$s->{h} = IPC::Run::start(
		[
			'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0',
			'-h', $node->host, '-p', $node->port, '-d', 'postgres'
		],
		'<', \$s->{in}, '>', \$s->{out}, '2>', \$s->{err});
	$s->{in} .= "\\set VERBOSITY verbose\n\\pset null N\n";
	for my $sql ('SELECT pg_backend_pid()', @init)
	{
		my $r = sess_run($s, $sql);
		die "session $name: $sql: $r->{st} $r->{err}" unless $r->{st} eq '00000';
	}
	return $s;
}

sub sess_send
{
	my ($s, $sql, $data) = @_;
	$s->{seq}++;
	$s->{copy} = defined $data;
	$s->{sql} = $sql;
	$s->{sent} = time;
	$s->{in} .= "$sql;\n" . ($data // '') . "\\echo \@\@END $s->{seq} :SQLSTATE :ROW_COUNT \@\@\n";
	$s->{h}->pump_nb;
}

# Has the last statement ended?  Then a hash: st (SQLSTATE), out, rows
# (ROW_COUNT), err.
sub sess_poll
{
	my ($s) = @_;
	$s->{h}->pump_nb if $s->{h}->pumpable;
	if ($s->{out} =~ s/^(.*?)\@\@END $s->{seq} (\S+) (\S+) \@\@\n//s)
	{
		my %r = (out => $1, st => $2, rows => $3, err => $s->{err});
		# psql sets no SQLSTATE after COPY FROM STDIN: take the error's
		if ($s->{copy})
		{
			$r{st} = $r{err} =~ /^(?:ERROR|FATAL):  ([0-9A-Z]{5}):/m ? $1 : '00000';
		}
		$s->{err} = '';
		chomp $r{out};
		return \%r;
	}
	return { st => 'dead', out => '', rows => 0, err => $s->{err} } unless $s->{h}->pumpable;
	return;
}

sub sess_wait
{
	my ($s, $timeout) = @_;
	my $deadline = time + ($timeout // 300);
	while (1)
	{
		my $r = sess_poll($s);
		return $r if $r;
		fail_now("session $s->{name}: no answer in " . ($timeout // 300) . " s to: $s->{sql}")
		  if time > $deadline;
		usleep(1000);
	}
}

sub sess_run
{
	my ($s, $sql, $data) = @_;
	sess_send($s, $sql, $data);
	return sess_wait($s);
}

sub sess_close
{
	my ($s) = @_;
	$s->{in} .= "\\q\n";
	eval { $s->{h}->finish; 1 } or $s->{h}->kill_kill;
}

# a statement that must succeed
sub must
{
	my ($s, $sql) = @_;
	my $r = sess_run($s, $sql);
	trace("$s->{name}: $sql => $r->{st}");
	fail_now("$s->{name}: $sql failed ($r->{st}): " . short_err($r->{err}))
	  unless $r->{st} eq '00000';
	return $r->{out};
}

sub short_err
{
	my ($e) = @_;
	return join(' ', grep { /^(ERROR|FATAL|DETAIL|PANIC)/ } split /\n/, $e // '');
}

# The server logs: an assertion failure, a PANIC or a process killed by a
# signal on any node.
sub check_logs
{
	my @bad;
	for my $node ($coord, @workers)
	{
		open(my $fh, '<', $node->logfile) or next;
		while (my $line = <$fh>)
		{
			push @bad, $node->name . ": $line"
			  if $line =~ /TRAP:|PANIC|terminated by signal|terminated by exception/;
		}
	}
	return @bad ? join('', @bad) : 'clean';
}

# the control sessions (one on each node: checks, and lock waits) and the
# sessions that run the steps
my @ctl = map { sess_new($_, 'ctl_' . $_->name) } ($coord, @workers);
my $A = sess_new($coord, 'coordA');
# every statement of this session with generic plans (the key table's
# writes must not need custom ones)
my $B = sess_new($coord, 'coordB', 'SET plan_cache_mode = force_generic_plan');
my $W1 = sess_new($workers[0], 'worker1');
# B17: gunique sets citus.function_opens_transaction_block on for its
# nested write whatever the session says
my $W2 = sess_new($workers[1], 'worker2', 'SET citus.function_opens_transaction_block = off');
my @wsess = ($A, $B, $W1, $W2);

# Any ungranted lock on any node: the second session of a scene waits.
sub lock_waits
{
	my $n = 0;
	for my $c (@ctl)
	{
		my $r = sess_run($c, 'SELECT count(*) FROM pg_locks WHERE NOT granted');
		$n += $r->{out} if $r->{st} eq '00000';
	}
	return $n;
}

#
# The model: byid{id} = [tenant, payload]; nulls = [[tenant, payload]...]
# (rows whose id is NULL).
#
my $M;           # the committed rows
my %shard;       # tenant => shard id
my %count;       # outcomes by operation, in a round
my %total;       # and in the run
my $payloadno = 0;
my $freshkey;

sub clone
{
	my ($v) = @_;
	return {
		byid => { map { $_ => [ @{ $v->{byid}{$_} } ] } keys %{ $v->{byid} } },
		nulls => [ map { [@$_] } @{ $v->{nulls} } ]
	};
}

sub fmt { defined $_[0] ? $_[0] : 'N' }

sub rows_text
{
	my ($v) = @_;
	my @r = map { "$v->{byid}{$_}[0]:$_:" . fmt($v->{byid}{$_}[1]) } keys %{ $v->{byid} };
	push @r, map { "$_->[0]:N:" . fmt($_->[1]) } @{ $v->{nulls} };
	return join(',', sort @r);
}

sub pairs_text
{
	my ($v) = @_;
	return join(',', map { "$_:$v->{byid}{$_}[0]" } sort { $a <=> $b } keys %{ $v->{byid} });
}

sub rand_int { my ($lo, $hi) = @_; return $lo + int(rand($hi - $lo + 1)); }
sub pick { return $_[ int(rand(@_)) ]; }
sub chance { return rand() < $_[0]; }

sub shuffled
{
	my @a = @_;
	for (my $i = $#a; $i > 0; $i--)
	{
		my $j = int(rand($i + 1));
		@a[ $i, $j ] = @a[ $j, $i ];
	}
	return @a;
}

sub new_payload { return chance(0.05) ? undef : 'p' . $payloadno++; }
sub small_key { return rand_int(1, $nsmall); }

# a key the view holds, or else a small one
sub held_key
{
	my ($v) = @_;
	my @k = sort { $a <=> $b } keys %{ $v->{byid} };
	return @k ? pick(@k) : small_key();
}

# a key for a lookup or a change: held, small, or one no row holds
sub some_key
{
	my ($v) = @_;
	my $r = rand();
	return held_key($v) if $r < 0.55;
	return small_key() if $r < 0.9;
	return $freshkey + 500000 + rand_int(0, 1000);
}

sub lit
{
	my ($x) = @_;
	return 'NULL' unless defined $x;
	return $x =~ /^-?\d+$/ ? $x : "'$x'";
}

sub values_sql
{
	my ($rows) = @_;
	return join(', ', map { '(' . join(', ', $_->[0], lit($_->[1]), lit($_->[2])) . ')' } @$rows);
}

#
# Predictions.  A write's prediction: ok (it must succeed), either (it may
# succeed or fail with 23505), view (the rows after it, if it succeeds),
# rows (ROW_COUNT), ret (RETURNING's rows, sorted), cand (the (key,
# tenant) pairs a 23505 across shards may name), same_shard (a conflict
# within one shard), refuse (an error the statement must fail with).
#

# INSERT or COPY of rows [tenant, id, payload] into view v
sub predict_insert
{
	my ($v, $rows) = @_;
	my (%seen, @cand);
	my $same = 0;
	for my $r (@$rows)
	{
		my ($t, $id) = @$r;
		next unless defined $id;
		if (my $h = $v->{byid}{$id})
		{
			push @cand, [ $id, $h->[0] ];
			$same ||= $shard{ $h->[0] } == $shard{$t};
		}
		for my $t2 (@{ $seen{$id} // [] })
		{
			push @cand, [ $id, $t2 ], [ $id, $t ];
			$same ||= $shard{$t2} == $shard{$t};
		}
		push @{ $seen{$id} }, $t;
	}
	return { ok => 0, cand => \@cand, same_shard => $same } if @cand;
	my $n = clone($v);
	for my $r (@$rows)
	{
		if (defined $r->[1]) { $n->{byid}{ $r->[1] } = [ $r->[0], $r->[2] ]; }
		else { push @{ $n->{nulls} }, [ $r->[0], $r->[2] ]; }
	}
	return { ok => 1, view => $n, rows => scalar @$rows };
}

# UPDATE ... SET id = new WHERE id = old
sub predict_move
{
	my ($v, $old, $new) = @_;
	my $r = $v->{byid}{$old};
	return { ok => 1, view => $v, rows => 0, ret => [] } unless $r;
	if (defined $new && $new != $old && (my $h = $v->{byid}{$new}))
	{
		return { ok => 0, cand => [ [ $new, $h->[0] ] ], same_shard => $shard{ $h->[0] } == $shard{ $r->[0] } };
	}
	my $n = clone($v);
	delete $n->{byid}{$old};
	if (defined $new) { $n->{byid}{$new} = $r; }
	else { push @{ $n->{nulls} }, $r; }
	return { ok => 1, view => $n, rows => 1, ret => [ $r->[0] ] };
}

# UPDATE ... SET id = id + d WHERE tenant IN (tenants)
sub predict_shift
{
	my ($v, $tenants, $d) = @_;
	my %in = map { $_ => 1 } @$tenants;
	my @mine = grep { $in{ $v->{byid}{$_}[0] } } keys %{ $v->{byid} };
	my $nulls = grep { $in{ $_->[0] } } @{ $v->{nulls} };
	return predict_remap($v, { map { $_ => $_ + $d } @mine }, $nulls);
}

# UPDATE ... SET id = CASE id WHEN a THEN b ELSE a END WHERE id IN (a, b)
sub predict_swap
{
	my ($v, $x, $y) = @_;
	my %map;
	$map{$x} = $y if $v->{byid}{$x};
	$map{$y} = $x if $v->{byid}{$y};
	return predict_remap($v, \%map, 0);
}

# An UPDATE that gives the rows of the keys of map the keys map gives them
# (and updates nulls rows whose id stays NULL)
sub predict_remap
{
	my ($v, $map, $nulls) = @_;
	my @mine = keys %$map;
	my %mine = map { $_ => 1 } @mine;
	my (@cand, $same, $handed);
	for my $k (@mine)
	{
		my $nk = $map->{$k};
		my $t = $v->{byid}{$k}[0];
		if (my $h = $v->{byid}{$nk})
		{
			if ($mine{$nk})
			{
				# a key handed from one updated row to another: across
				# shards the key table takes it (its deletes go first);
				# within a shard the shard's index checks row by row, so
				# the order of the rows decides
				$handed ||= $shard{ $h->[0] } == $shard{$t};
				next;
			}
			push @cand, [ $nk, $h->[0] ];
			$same ||= $shard{ $h->[0] } == $shard{$t};
		}
	}
	return { ok => 0, cand => \@cand, same_shard => $same || $handed } if @cand;
	my $n = clone($v);
	my %old = map { $_ => $n->{byid}{$_} } @mine;
	delete $n->{byid}{$_} for @mine;
	$n->{byid}{ $map->{$_} } = $old{$_} for @mine;
	return { ok => 1, either => $handed, view => $n, rows => @mine + $nulls };
}

# DELETE of the rows a filter keeps (a sub on (id, tenant))
sub predict_delete
{
	my ($v, $f) = @_;
	my $n = clone($v);
	my $rows = 0;
	my @ret;
	for my $k (keys %{ $n->{byid} })
	{
		next unless $f->($k, $n->{byid}{$k}[0]);
		push @ret, $n->{byid}{$k}[0];
		delete $n->{byid}{$k};
		$rows++;
	}
	my @keep = grep { !$f->(undef, $_->[0]) } @{ $n->{nulls} };
	$rows += @{ $n->{nulls} } - @keep;
	$n->{nulls} = \@keep;
	return { ok => 1, view => $n, rows => $rows, ret => \@ret };
}

# UPDATE of the payload of the rows a filter keeps
sub predict_payload
{
	my ($v, $f, $p) = @_;
	my $n = clone($v);
	my $rows = 0;
	my @ret;
	for my $k (keys %{ $n->{byid} })
	{
		next unless $f->($k, $n->{byid}{$k}[0]);
		$n->{byid}{$k}[1] = $p;
		push @ret, $n->{byid}{$k}[0];
		$rows++;
	}
	for my $r (@{ $n->{nulls} })
	{
		next unless $f->(undef, $r->[0]);
		$r->[1] = $p;
		$rows++;
	}
	return { ok => 1, view => $n, rows => $rows, ret => \@ret };
}

sub refused17
{
	return { refuse => qr/requires PostgreSQL 18/ };
}

# Judge a write's result against its prediction: the view after it, or
# undef if it failed (as it had to, or was allowed to).
sub judge_write
{
	my ($s, $sql, $r, $p, $what) = @_;
	my $e = short_err($r->{err});
	if ($p->{refuse})
	{
		fail_now("$s->{name}: $what: must be refused with $p->{refuse}, got $r->{st}: $e")
		  unless $r->{st} ne '00000' && $r->{err} =~ $p->{refuse};
		$count{"$what: refused"}++;
		return undef;
	}
	if ($r->{st} eq '00000')
	{
		fail_now("$s->{name}: $what: must fail with 23505 (conflicts: "
			  . join(' ', map { "$_->[0]/$_->[1]" } @{ $p->{cand} }) . '), it succeeded')
		  unless $p->{ok};
		fail_now("$s->{name}: $what: ROW_COUNT $r->{rows}, the model says $p->{rows}")
		  if defined $p->{rows} && !$s->{copy} && $r->{rows} != $p->{rows};
		if (defined $p->{ret} && $sql =~ /RETURNING/)
		{
			my $got = join(",", sort split /\n/, $r->{out});
			my $want = join(",", sort @{ $p->{ret} });
			fail_now("$s->{name}: $what: RETURNING gave [$got], the model says [$want]")
			  unless $got eq $want;
		}
		$count{"$what: ok"}++;
		return $p->{view};
	}
	if ($r->{st} eq '23505' && (!$p->{ok} || $p->{either}))
	{
		if ($p->{either})
		{
			$count{"$what: 23505 (order of rows)"}++;
			return undef;
		}
		my ($name) = $r->{err} =~ /duplicate key value violates unique constraint "([^"]+)"/;
		fail_now("$s->{name}: $what: 23505 without the index's name: $e") unless defined $name;
		if (!$p->{same_shard})
		{
			# only across shards: the key table finds it
			fail_now("$s->{name}: $what: a conflict across shards only, reported by \"$name\", not \"$index\": $e")
			  unless $name eq $index;
			my ($k, $t) = $r->{err} =~ /Key \(id\)=\((\d+)\) already exists in the row with \(tenant\)=\((\d+)\)/;
			fail_now("$s->{name}: $what: 23505 without the key and its row's tenant: $e") unless defined $t;
			fail_now("$s->{name}: $what: 23505 names key $k of tenant $t, not one of the conflicts "
				  . join(' ', map { "$_->[0]/$_->[1]" } @{ $p->{cand} }) . ": $e")
			  unless grep { $_->[0] == $k && $_->[1] == $t } @{ $p->{cand} };
			$count{"$what: 23505 key table"}++;
		}
		else
		{
			$count{"$what: 23505 in a shard"}++;
		}
		return undef;
	}
	fail_now("$s->{name}: $what: "
		  . ($p->{ok} ? 'must succeed' : 'must fail with 23505 (conflicts: '
			  . join(' ', map { "$_->[0]/$_->[1]" } @{ $p->{cand} }) . ')')
		  . ", got $r->{st}: $e");
}

# Judge a lookup's output: the rows "tenant|id|payload" of key k in view v.
sub expect_lookup
{
	my ($v, $k, $form) = @_;
	my $h = $v->{byid}{$k};
	return $h ? '1' : '0' if $form eq 'count';
	return $h ? "$h->[0]|$k|" . fmt($h->[1]) : '';
}

#
# Statements: each op makes a list of statements for session s against
# view v: { sql, data (COPY), what, judge => sub(result, view) -> view
# after it (undef: it failed) }.  The judge predicts from the view the
# statement meets (earlier statements of the op may have changed it).
#
sub write_stmt
{
	my ($what, $sql, $data, $predict) = @_;
	return {
		sql => $sql,
		data => $data,
		what => $what,
		judge => sub {
			my ($s, $r, $v) = @_;
			return judge_write($s, $sql, $r, $predict->($v), $what);
		}
	};
}

sub lookup_stmt
{
	my ($what, $sql, $k, $form) = @_;
	return {
		sql => $sql,
		what => $what,
		judge => sub {
			my ($s, $r, $v) = @_;
			fail_now("$s->{name}: $what failed ($r->{st}): " . short_err($r->{err}))
			  unless $r->{st} eq '00000';
			my $want = expect_lookup($v, $k, $form);
			fail_now("$s->{name}: $what of key $k: got [$r->{out}], the model says [$want]")
			  unless $r->{out} eq $want;
			$count{"lookup: " . ($want eq '' || $want eq '0' ? 'none' : 'found')}++;
			return $v;
		}
	};
}

# a statement that must succeed and changes no row
sub plain_stmt
{
	my ($sql) = @_;
	return {
		sql => $sql,
		what => $sql,
		judge => sub {
			my ($s, $r, $v) = @_;
			fail_now("$s->{name}: $sql failed ($r->{st}): " . short_err($r->{err})) unless $r->{st} eq '00000';
			return $v;
		}
	};
}

sub insert_rows_stmt
{
	my ($what, $rows, $form) = @_;
	my $ret = chance(0.3);
	my $sql = $form eq 'select'
	  ? "INSERT INTO $table SELECT column1, column2::bigint, column3 FROM (VALUES " . values_sql($rows) . ") v"
	  : "INSERT INTO $table VALUES " . values_sql($rows);
	$sql .= ' RETURNING id' if $ret;
	return write_stmt(
		$what, $sql, undef,
		sub {
			my ($v) = @_;
			my $p = predict_insert($v, $rows);
			# NULL ids come back as N
			$p->{ret} = [ map { fmt($_->[1]) } @$rows ];
			return $p;
		});
}

sub rand_tenant { return rand_int(0, $ntenants - 1); }

sub small_rows
{
	my ($n) = @_;
	return [ map { [ rand_tenant(), chance(0.05) ? undef : small_key(), new_payload() ] } 1 .. $n ];
}

# 70-200 rows: new keys, at times a held key, a key twice, NULLs
sub batch_rows
{
	my ($v, $lo, $hi) = @_;
	my $n = rand_int($lo, $hi);
	my @rows = map { [ rand_tenant(), $freshkey++, new_payload() ] } 1 .. $n;
	my $r = rand();
	if ($r < 0.25)
	{
		$rows[ int(rand(@rows)) ][1] = held_key($v);
	}
	elsif ($r < 0.45)
	{
		$rows[ int(rand(@rows)) ][1] = $rows[ int(rand(@rows)) ][1];
	}
	elsif ($r < 0.55)
	{
		$rows[ int(rand(@rows)) ][1] = small_key();
	}
	$rows[ int(rand(@rows)) ][1] = undef if chance(0.2);
	return \@rows;
}

sub copy_stmt
{
	my ($what, $rows) = @_;
	my $data = join('', map { join("\t", $_->[0], $_->[1] // '\N', $_->[2] // '\N') . "\n" } @$rows) . "\\.\n";
	return write_stmt($what, "COPY $table (tenant, id, payload) FROM STDIN", $data,
		sub { predict_insert($_[0], $rows) });
}

#
# The operations: name, weight, and a sub (session, view, in a
# transaction?) that makes the statements, or an empty list.
#
my %ops = (
	insert => sub {
		my ($s, $v) = @_;
		return insert_rows_stmt('INSERT of one row', small_rows(1), 'values');
	},
	insert_few => sub {
		my ($s, $v) = @_;
		return insert_rows_stmt('INSERT of a few rows', small_rows(rand_int(2, 8)), pick('values', 'values', 'select'));
	},
	insert_batch => sub {
		my ($s, $v) = @_;
		return insert_rows_stmt('INSERT of 70-200 rows', batch_rows($v, 70, 200), pick('values', 'select'));
	},
	copy => sub {
		my ($s, $v) = @_;
		return chance(0.25)
		  ? copy_stmt('COPY of 70-90 rows', batch_rows($v, 70, 90))
		  : copy_stmt('COPY of a few rows', small_rows(rand_int(1, 6)));
	},
	payload_by_key => sub {
		my ($s, $v) = @_;
		my $k = some_key($v);
		my $p = new_payload();
		my $ret = chance(0.3) ? ' RETURNING tenant' : '';
		return write_stmt('UPDATE of the payload by the key',
			"UPDATE $table SET payload = " . lit($p) . " WHERE id = $k$ret",
			undef, sub { predict_payload($_[0], sub { defined $_[0] && $_[0] == $k }, $p) });
	},
	payload_by_tenant => sub {
		my ($s, $v) = @_;
		my $t = rand_tenant();
		my $p = new_payload();
		return write_stmt('UPDATE of the payload by the tenant',
			"UPDATE $table SET payload = " . lit($p) . " WHERE tenant = $t",
			undef, sub { predict_payload($_[0], sub { $_[1] == $t }, $p) });
	},
	move_key => sub {
		my ($s, $v) = @_;
		my $old = some_key($v);
		my $new = chance(0.1) ? undef : chance(0.5) ? held_key($v) : small_key();
		my $ret = chance(0.3) ? ' RETURNING tenant' : '';
		my $sql = "UPDATE $table SET id = " . lit($new) . " WHERE id = $old$ret";
		return write_stmt('UPDATE of the key by the key', $sql, undef,
			sub { $pg18 ? predict_move($_[0], $old, $new) : refused17() });
	},
	shift_keys => sub {
		my ($s, $v) = @_;
		# one tenant, or two (at times on different shards: a key handed
		# across shards)
		my @t = (rand_tenant());
		push @t, rand_tenant() if chance(0.5);
		my $d = pick(1, 2, 3, -1, 7, 100, 1000000);
		my $where = @t == 1 ? "tenant = $t[0]" : "tenant IN ($t[0], $t[1])";
		return write_stmt('UPDATE of tenants\' keys by an offset',
			"UPDATE $table SET id = id + $d WHERE $where",
			undef, sub { $pg18 ? predict_shift($_[0], \@t, $d) : refused17() });
	},
	swap_keys => sub {
		my ($s, $v) = @_;
		my $x = held_key($v);
		my $y = chance(0.8) ? held_key($v) : small_key();
		return () if $x == $y;
		return write_stmt('UPDATE swapping two keys',
			"UPDATE $table SET id = CASE id WHEN $x THEN $y ELSE $x END WHERE id IN ($x, $y)",
			undef, sub { $pg18 ? predict_swap($_[0], $x, $y) : refused17() });
	},
	delete_by_key => sub {
		my ($s, $v) = @_;
		my $k = some_key($v);
		my $ret = chance(0.3) ? ' RETURNING tenant' : '';
		return write_stmt('DELETE by the key', "DELETE FROM $table WHERE id = $k$ret", undef,
			sub { predict_delete($_[0], sub { defined $_[0] && $_[0] == $k }) });
	},
	delete_by_tenant => sub {
		my ($s, $v) = @_;
		my $t = rand_tenant();
		return write_stmt('DELETE by the tenant', "DELETE FROM $table WHERE tenant = $t", undef,
			sub { predict_delete($_[0], sub { $_[1] == $t }) });
	},
	delete_in => sub {
		my ($s, $v) = @_;
		my @k = map { some_key($v) } 1 .. rand_int(2, 6);
		my %k = map { $_ => 1 } @k;
		return write_stmt('DELETE by an IN list', "DELETE FROM $table WHERE id IN (" . join(', ', @k) . ')',
			undef, sub { predict_delete($_[0], sub { defined $_[0] && $k{ $_[0] } }) });
	},
	lookup => sub {
		my ($s, $v) = @_;
		return map {
			my $k = some_key($v);
			my $form = pick('rows', 'rows', 'int', 'count');
			my $sql = $form eq 'count'
			  ? "SELECT count(*) FROM $table WHERE id = $k"
			  : "SELECT tenant, id, payload FROM $table WHERE id = $k" . ($form eq 'int' ? '::int' : '');
			lookup_stmt('lookup by the key', $sql, $k, $form)
		} 1 .. rand_int(1, 4);
	},
	prepared => sub {
		my ($s, $v) = @_;
		my $kind = pick('lookup', 'lookup', 'delete', 'payload', $pg18 ? ('move') : ());
		my $n = rand_int(6, 10);
		my @st;
		# at times every execution with the generic plan
		my $generic = chance(0.4);
		push @st, plain_stmt('SET plan_cache_mode = force_generic_plan') if $generic;
		for (1 .. $n)
		{
			my $k = some_key($v);
			if ($kind eq 'lookup')
			{
				push @st, lookup_stmt('prepared lookup', "EXECUTE lk$round($k)", $k, 'rows');
			}
			elsif ($kind eq 'delete')
			{
				push @st, write_stmt('prepared DELETE by the key', "EXECUTE dl$round($k)", undef,
					sub { predict_delete($_[0], sub { defined $_[0] && $_[0] == $k }) });
			}
			elsif ($kind eq 'payload')
			{
				my $p = 'q' . $payloadno++;
				push @st, write_stmt('prepared UPDATE of the payload by the key', "EXECUTE up$round($k, '$p')",
					undef, sub { predict_payload($_[0], sub { defined $_[0] && $_[0] == $k }, $p) });
			}
			else
			{
				my $new = chance(0.5) ? small_key() : $freshkey++;
				push @st, write_stmt('prepared UPDATE of the key by the key', "EXECUTE mv$round($k, $new)",
					undef, sub { predict_move($_[0], $k, $new) });
			}
		}
		push @st, plain_stmt('RESET plan_cache_mode') if $generic;
		return @st;
	},
	truncate => sub {
		my ($s, $v) = @_;
		return () unless $s->{node} == $coord;
		return write_stmt('TRUNCATE', "TRUNCATE $table", undef,
			sub { { ok => 1, view => { byid => {}, nulls => [] } } });
	},
);

# the operations of a transaction's statements
my @tx_ops = (
	[ insert => 8 ], [ insert_few => 4 ], [ insert_batch => 1 ], [ copy => 2 ],
	[ payload_by_key => 3 ], [ payload_by_tenant => 1 ], [ move_key => $pg18 ? 3 : 0.5 ],
	[ shift_keys => $pg18 ? 1 : 0.2 ], [ swap_keys => $pg18 ? 1 : 0.2 ],
	[ delete_by_key => 3 ], [ delete_by_tenant => 1 ], [ delete_in => 1 ], [ lookup => 4 ],
	[ prepared => 1 ], [ truncate => 1 ]);

# the steps: an operation in autocommit, a transaction, or a scene
my @ops = (
	[ insert => 10 ], [ insert_few => 6 ], [ insert_batch => 3 ], [ copy => 3 ],
	[ payload_by_key => 4 ], [ payload_by_tenant => 2 ], [ move_key => $pg18 ? 4 : 1 ],
	[ shift_keys => $pg18 ? 2 : 1 ], [ swap_keys => $pg18 ? 2 : 1 ], [ delete_by_key => 4 ],
	[ delete_by_tenant => 2 ],
	[ delete_in => 1 ], [ lookup => 6 ], [ prepared => 3 ], [ truncate => 1 ],
	[ tx => 10 ], [ wait => 3 ], [ deadlock => 1 ], [ move => 2 ]);
for my $w (split /,/, $ENV{GUNIQUE_STATEFUL_WEIGHTS} // '')
{
	my ($name, $weight) = $w =~ /^\s*(.*?)\s*=\s*(\d+)\s*$/ or die "GUNIQUE_STATEFUL_WEIGHTS: $w";
	my ($op) = grep { $_->[0] eq $name } @ops or die "GUNIQUE_STATEFUL_WEIGHTS: no operation \"$name\"";
	$op->[1] = $weight;
}

sub pick_weighted
{
	my @list = @_;
	my $total = 0;
	$total += $_->[1] for @list;
	my $r = rand($total);
	for my $o (@list)
	{
		return $o->[0] if ($r -= $o->[1]) < 0;
	}
	return $list[-1][0];
}

# the session of a step: the coordinator's first session most of the time
sub pick_session
{
	my $r = rand();
	return $A if $r < 0.45;
	return $B if $r < 0.6;
	return $W1 if $r < 0.8;
	return $W2;
}

# Run a statement in session s against view v: the view after it, or undef.
sub run_stmt
{
	my ($s, $st, $v) = @_;
	my $r = sess_run($s, $st->{sql}, $st->{data});
	trace("$s->{name}: $st->{sql}" . (defined $st->{data} ? ' <' . ($st->{data} =~ tr/\n//) . ' lines>' : '')
		  . " => $r->{st}" . ($r->{st} eq '00000' ? " ($r->{rows})" : ': ' . short_err($r->{err})));
	print $stmt_fh $st->{data} if defined $st->{data};
	return $st->{judge}->($s, $r, $v);
}

# K and the rows, as the session s sees them, against view v
my $q_rows;
my $q_pairs_keys;
my $q_pairs_table;
my $q_dups;

sub check_view
{
	my ($s, $v, $where) = @_;
	my $r = sess_run($s, "SELECT ($q_pairs_keys), ($q_pairs_table), ($q_rows), ($q_dups)");
	fail_now("$s->{name}: the check failed ($r->{st}): " . short_err($r->{err})) unless $r->{st} eq '00000';
	my ($keys, $tab, $rows, $dups) = split /\|/, $r->{out};
	my $want_pairs = md5_hex(pairs_text($v));
	my $want_rows = md5_hex(rows_text($v));
	my @bad;
	push @bad, 'invariant K: the key table is not the (id, tenant) of the table\'s rows' if $keys ne $tab;
	push @bad, 'the key table is not the model\'s' if $keys ne $want_pairs;
	push @bad, 'the table\'s (id, tenant) are not the model\'s' if $tab ne $want_pairs;
	push @bad, "$dups ids appear twice in the table" if $dups;
	push @bad, 'the table\'s rows are not the model\'s' if $rows ne $want_rows;
	return unless @bad;
	# show the differences
	my $kt = sess_run($s, "SELECT string_agg(id || ':' || tenant, ',' ORDER BY id) FROM $keytable")->{out};
	my $tt = sess_run($s, "SELECT string_agg(id || ':' || tenant, ',' ORDER BY id, tenant) FROM $table WHERE id IS NOT NULL")->{out};
	my $rt = sess_run($s, "SELECT string_agg(r, ',' ORDER BY r COLLATE \"C\") FROM (SELECT format('%s:%s:%s', tenant, coalesce(id::text, 'N'), coalesce(payload, 'N')) r FROM $table) s")->{out};
	fail_now("$where ($s->{name}): " . join('; ', @bad)
		  . "\n" . diff_lists('key table', $kt, 'model', pairs_text($v))
		  . "\n" . diff_lists('table (id:tenant)', $tt, 'model', pairs_text($v))
		  . "\n" . diff_lists('table rows', $rt, 'model', rows_text($v)));
}

sub diff_lists
{
	my ($an, $a, $bn, $b) = @_;
	my %a;
	$a{$_}++ for split /,/, ($a eq 'N' ? '' : $a);
	my %b;
	$b{$_}++ for split /,/, $b;
	my @only_a = grep { ($a{$_} // 0) > ($b{$_} // 0) } sort keys %a;
	my @only_b = grep { ($b{$_} // 0) > ($a{$_} // 0) } sort keys %b;
	return "  in $an, not $bn: @only_a\n  in $bn, not $an: @only_b";
}

sub verify
{
	my $r = sess_run($ctl[0], "SELECT count(*) FROM gunique_verify('$index')");
	fail_now("gunique_verify failed ($r->{st}): " . short_err($r->{err})) unless $r->{st} eq '00000';
	if ($r->{out} ne '0')
	{
		my $d = sess_run($ctl[0], "SELECT string_agg(problem || ': ' || detail, E'\\n') FROM gunique_verify('$index')");
		fail_now("gunique_verify reports $r->{out} problems:\n$d->{out}");
	}
	$count{'gunique_verify'}++;
}

#
# A step in autocommit: each statement commits (or fails) alone.
#
sub step_autocommit
{
	my ($s, $name) = @_;
	for my $st ($ops{$name}->($s, $M))
	{
		my $n = run_stmt($s, $st, $M);
		$M = $n if $n;
	}
}

#
# A transaction: BEGIN, statements (some under a savepoint), COMMIT or
# ROLLBACK; the model takes its view only at COMMIT.
#
sub step_tx
{
	my ($s) = @_;
	must($s, 'BEGIN');
	my $v = $M;
	my $aborted = 0;
	my $nsp = 0;
	my $n = rand_int(2, 6);
	for my $i (1 .. $n)
	{
		my $name = pick_weighted(@tx_ops);
		my @st = $ops{$name}->($s, $v);
		next unless @st;
		my $sp = chance(0.3) ? 'sp' . ++$nsp : undef;
		my $saved = $v;
		must($s, "SAVEPOINT $sp") if $sp;
		my $failed_here = 0;
		for my $st (@st)
		{
			my $nv = run_stmt($s, $st, $v);
			if (!$nv)
			{
				$failed_here = 1;
				last;
			}
			$v = $nv;
		}
		if ($sp && ($failed_here || chance(0.4)))
		{
			must($s, "ROLLBACK TO SAVEPOINT $sp");
			$count{'ROLLBACK TO SAVEPOINT'}++;
			$v = $saved;
			# at times, the view after ROLLBACK TO at once
			check_view($s, $v, 'after ROLLBACK TO SAVEPOINT') if chance(0.3);
			next;
		}
		must($s, "RELEASE SAVEPOINT $sp") if $sp;
		if ($failed_here)
		{
			$aborted = 1;
			last;
		}
		check_view($s, $v, 'inside a transaction') if chance(0.25);
	}
	if ($aborted)
	{
		# COMMIT of a failed transaction rolls it back
		my $end = pick('ROLLBACK', 'COMMIT');
		my $r = sess_run($s, $end);
		trace("$s->{name}: $end (aborted) => $r->{st}");
		fail_now("$s->{name}: $end of an aborted transaction: $r->{st}") unless $r->{st} eq '00000';
		$count{'transaction: aborted'}++;
		return;
	}
	if (chance(0.75))
	{
		must($s, 'COMMIT');
		$M = $v;
		$count{'transaction: committed'}++;
	}
	else
	{
		must($s, 'ROLLBACK');
		$count{'transaction: rolled back'}++;
	}
}

# a tenant, a key no row holds (in view v), a payload
sub free_row
{
	my ($v, %not) = @_;
	my $k;
	do { $k = chance(0.5) ? small_key() : $freshkey++ } while $v->{byid}{$k} || $not{$k};
	return [ rand_tenant(), $k, new_payload() ];
}

# Wait until session s waits for a lock (on any node): it must not end.
sub must_wait
{
	my ($s, $why) = @_;
	my $deadline = time + 60;
	while (time < $deadline)
	{
		if (my $r = sess_poll($s))
		{
			trace("$s->{name}: $s->{sql} => $r->{st}: " . short_err($r->{err}));
			fail_now("$s->{name}: $why: must wait, it ended ($r->{st}): " . short_err($r->{err}));
		}
		return if lock_waits();
		usleep(20_000);
	}
	fail_now("$s->{name}: $why: neither waits nor ends in 60 s");
}

#
# The wait scene: A's transaction inserts, deletes or moves a key, and a
# second session's write of that key waits for it, then is decided by its
# end.
#
sub step_wait
{
	my $s2 = pick($B, $W1, $W2);
	my $s1 = $A;
	my $kind = pick('insert', 'delete', $pg18 ? ('move old', 'move new') : ());
	my ($first, $key);
	if ($kind eq 'insert')
	{
		my $row = free_row($M);
		$key = $row->[1];
		$first = insert_rows_stmt('wait scene: INSERT', [$row], 'values');
	}
	else
	{
		my @k = sort { $a <=> $b } keys %{ $M->{byid} };
		return step_autocommit(pick_session(), 'insert') unless @k;
		my $old = pick(@k);
		if ($kind eq 'delete')
		{
			$key = $old;
			$first = write_stmt('wait scene: DELETE', "DELETE FROM $table WHERE id = $old", undef,
				sub { predict_delete($_[0], sub { defined $_[0] && $_[0] == $old }) });
		}
		else
		{
			my $new = free_row($M)->[1];
			$key = $kind eq 'move old' ? $old : $new;
			$first = write_stmt('wait scene: UPDATE of the key', "UPDATE $table SET id = $new WHERE id = $old",
				undef, sub { predict_move($_[0], $old, $new) });
		}
	}
	must($s1, 'BEGIN');
	my $v = run_stmt($s1, $first, $M) or fail_now("wait scene: the first statement failed");
	# a third session's lookups see the committed rows, not the open
	# transaction's
	my ($s3) = grep { $_ != $s1 && $_ != $s2 } shuffled($B, $W1, $W2);
	for my $k ($key, ($first->{sql} =~ /SET id = (\d+) WHERE id = (\d+)/))
	{
		run_stmt($s3, lookup_stmt('lookup beside an open transaction',
				"SELECT tenant, id, payload FROM $table WHERE id = $k", $k, 'rows'), $M) if chance(0.7);
	}
	# the second session's rows: the key, and at times others
	my @rows = ([ rand_tenant(), $key, new_payload() ]);
	push @rows, free_row($v, $key => 1) for 1 .. (chance(0.3) ? rand_int(1, 3) : 0);
	@rows = shuffled(@rows);
	my $second = chance(0.3)
	  ? copy_stmt('wait scene: the second session\'s COPY', \@rows)
	  : insert_rows_stmt('wait scene: the second session\'s INSERT', \@rows, 'values');
	sess_send($s2, $second->{sql}, $second->{data});
	must_wait($s2, "wait scene ($kind of key $key in an open transaction)");
	my $end = chance(0.5) ? 'COMMIT' : 'ROLLBACK';
	must($s1, $end);
	$M = $v if $end eq 'COMMIT';
	my $r = sess_wait($s2);
	trace("$s2->{name}: $second->{sql} => $r->{st}: " . short_err($r->{err}));
	my $n = $second->{judge}->($s2, $r, $M);
	$M = $n if $n;
	$count{"wait scene: $kind, $end, the second " . ($n ? 'succeeded' : 'failed')}++;
}

#
# The deadlock scene: A and another session each insert a key in a
# transaction, then each inserts the other's.
#
sub step_deadlock
{
	my $s2 = pick($B, $W1, $W2);
	my $s1 = $A;
	my $r1 = free_row($M);
	my $r2 = free_row($M, $r1->[1] => 1);
	my ($va, $vb) = ($M, $M);
	must($s1, 'BEGIN');
	must($s2, 'BEGIN');
	$va = run_stmt($s1, insert_rows_stmt('deadlock scene: INSERT', [$r1], 'values'), $va) or fail_now('deadlock scene: an insert failed');
	$vb = run_stmt($s2, insert_rows_stmt('deadlock scene: INSERT', [$r2], 'values'), $vb) or fail_now('deadlock scene: an insert failed');
	my $a2 = [ rand_tenant(), $r2->[1], new_payload() ];
	my $b2 = [ rand_tenant(), $r1->[1], new_payload() ];
	my $sa = "INSERT INTO $table VALUES " . values_sql([$a2]);
	my $sb = "INSERT INTO $table VALUES " . values_sql([$b2]);
	sess_send($s1, $sa);
	must_wait($s1, 'deadlock scene: the first crossed insert');
	sess_send($s2, $sb);
	my ($ra, $rb);
	my $deadline = time + 120;
	while (!($ra && $rb))
	{
		$ra //= sess_poll($s1);
		$rb //= sess_poll($s2);
		fail_now('deadlock scene: no end in 120 s') if time > $deadline;
		usleep(5000);
	}
	trace("$s1->{name}: $sa => $ra->{st}: " . short_err($ra->{err}));
	trace("$s2->{name}: $sb => $rb->{st}: " . short_err($rb->{err}));
	my @st = ($ra->{st}, $rb->{st});
	my $victims = grep { $_ eq '40P01' } @st;
	fail_now("deadlock scene: got $st[0] and $st[1], not one deadlock victim and an insert that succeeds")
	  unless $victims == 2 || ($victims == 1 && grep { $_ eq '00000' } @st);
	my %ends;
	for ([ $s1, $ra, $va, $a2 ], [ $s2, $rb, $vb, $b2 ])
	{
		my ($s, $r, $v, $row) = @$_;
		if ($r->{st} eq '40P01')
		{
			must($s, 'ROLLBACK');
			next;
		}
		# the winner's view: its first row and the second
		my $p = predict_insert($v, [$row]);
		fail_now("deadlock scene: the model refuses the winner's insert") unless $p->{ok};
		if (chance(0.6))
		{
			must($s, 'COMMIT');
			$M = clone($p->{view});
			$count{'deadlock scene: the winner committed'}++;
		}
		else
		{
			must($s, 'ROLLBACK');
			$count{'deadlock scene: the winner rolled back'}++;
		}
	}
	$count{"deadlock scene: $victims victims"}++;
}

#
# A shard move: a shard of the key table or of the table, picked by the
# seed, moved to the other worker from the coordinator's control session;
# then Citus's deferred drop of the old placement done at once (so that
# the end of the round finds no shard left behind).
#
sub step_move
{
	my $keys = chance(0.5);
	my $rel = $keys ? $keytable : $table;
	my $mode = $keys && chance(0.5) ? 'force_logical' : 'block_writes';
	my $r = rand_int(0, 999);
	my $what = $keys ? 'key table' : 'table';
	must($ctl[0], qq{WITH s AS (SELECT shardid, nodename, nodeport, row_number() OVER (ORDER BY shardid) AS rn,
	                                   count(*) OVER () AS cnt
	                              FROM citus_shards WHERE table_name = '$rel'::regclass)
	                 SELECT citus_move_shard_placement(s.shardid, s.nodename, s.nodeport, n.nodename, n.nodeport,
	                                                   shard_transfer_mode => '$mode')
	                   FROM s, LATERAL (SELECT nodename, nodeport FROM pg_dist_node
	                                     WHERE groupid > 0 AND shouldhaveshards AND nodeport <> s.nodeport
	                                     ORDER BY nodeport LIMIT 1) n
	                  WHERE s.rn = 1 + $r % s.cnt});
	must($ctl[0], 'CALL citus_cleanup_orphaned_resources()');
	$count{"shard move: $what, $mode"}++;
}

#
# The rounds
#
my @shapes = ([ 'plain', 4 ], [ 'partitioned', 6 ], [ 'plain', 8 ]);
for my $r (1 .. $rounds)
{
	$round = $r;
	my $rstart = time;
	my ($shape, $nshards) = @{ $shapes[ ($round - 1) % @shapes ] };
	$table = "ev$round";
	$index = "ev${round}_id";
	$keytable = qq{gunique_keys."public.$index"};
	$stepno = 0;
	$freshkey = 100000 * $round + 10000;
	%count = ();
	# the table, its rows, the index
	my $init = small_rows(rand_int(10, 40));
	my %seen;
	my @init = grep { !defined $_->[1] || !$seen{ $_->[1] }++ } @$init;
	my $ddl = $shape eq 'partitioned'
	  ? "CREATE TABLE $table (tenant int, id bigint, payload text) PARTITION BY HASH (payload);\n"
	  . join('', map { "CREATE TABLE ${table}_p$_ PARTITION OF $table FOR VALUES WITH (MODULUS 3, REMAINDER $_);\n" } 0 .. 2)
	  : "CREATE TABLE $table (tenant int, id bigint, payload text);\n";
	$ddl .= "SELECT create_distributed_table('$table', 'tenant', shard_count => $nshards, colocate_with => 'none');\n";
	$ddl .= "INSERT INTO $table VALUES " . values_sql(\@init) . ";\n";
	trace("ctl: $ddl");
	$coord->safe_psql('postgres', $ddl);
	my $ci = "CREATE UNIQUE INDEX $index ON $table USING gunique (id)";
	my ($ret, $out, $err) = $coord->psql('postgres', $ci);
	trace("ctl: $ci => $ret " . short_err($err));
	is($ret, 0, "round $round: $ci") or do { diag($err); $failed = 1; last; };
	$M = predict_insert({ byid => {}, nulls => [] }, \@init)->{view};
	%shard = split /[|\n]/, $coord->safe_psql('postgres',
		"SELECT t, get_shard_id_for_distribution_column('$table', t) FROM generate_series(0, $ntenants - 1) t");
	my $nodes = $coord->safe_psql('postgres',
		"SELECT count(DISTINCT nodeport) FROM citus_shards WHERE table_name = '$table'::regclass");
	is($nodes, '2', "round $round ($shape, $nshards shards): the shards are on both workers");

	$q_rows = "SELECT md5(coalesce(string_agg(r, ',' ORDER BY r COLLATE \"C\"), '')) FROM "
	  . "(SELECT format('%s:%s:%s', tenant, coalesce(id::text, 'N'), coalesce(payload, 'N')) r FROM $table) s";
	$q_pairs_keys = "SELECT md5(coalesce(string_agg(id || ':' || tenant, ',' ORDER BY id), '')) FROM $keytable";
	$q_pairs_table = "SELECT md5(coalesce(string_agg(id || ':' || tenant, ',' ORDER BY id, tenant), '')) FROM $table WHERE id IS NOT NULL";
	$q_dups = "SELECT count(*) FROM (SELECT id FROM $table WHERE id IS NOT NULL GROUP BY id HAVING count(*) > 1) d";

	# each session's prepared statements, by the key
	for my $s (@wsess)
	{
		must($s, "PREPARE lk$round(bigint) AS SELECT tenant, id, payload FROM $table WHERE id = \$1");
		must($s, "PREPARE dl$round(bigint) AS DELETE FROM $table WHERE id = \$1");
		must($s, "PREPARE up$round(bigint, text) AS UPDATE $table SET payload = \$2 WHERE id = \$1");
		must($s, "PREPARE mv$round(bigint, bigint) AS UPDATE $table SET id = \$2 WHERE id = \$1") if $pg18;
	}
	check_view($ctl[0], $M, 'after CREATE INDEX');
	verify();

	my $checks = 0;
	my $last_verify = 0;
	eval {
		for my $i (1 .. $steps)
		{
			$stepno = $i;
			my $name = pick_weighted(@ops);
			$count{"step $name"}++;
			if ($name eq 'tx') { step_tx(pick_session()); }
			elsif ($name eq 'wait') { step_wait(); }
			elsif ($name eq 'deadlock') { step_deadlock(); }
			elsif ($name eq 'move') { step_move(); }
			else { step_autocommit($name eq 'truncate' ? $A : pick_session(), $name); }
			if ($stepno % $check_every == 0 || $stepno == $steps)
			{
				check_view($ctl[0], $M, "after step $stepno");
				$checks++;
				verify() if $checks % 20 == 0;
			}
		}
		verify();
		1;
	} or do {
		die $@ unless $@ eq "FAILED\n";
		last;
	};
	my $nrows = keys(%{ $M->{byid} }) + @{ $M->{nulls} };
	ok(1, sprintf('round %d (%s, %d shards): %d steps, %d checks, %d rows at the end (%.0f s)',
			$round, $shape, $nshards, $steps, $checks, $nrows, time - $rstart));
	note(join("\n", map { "  $_: $count{$_}" } sort keys %count));
	$total{$_} += $count{$_} for keys %count;
	# DROP TABLE takes the key table on every node
	for my $s (@wsess)
	{
		sess_run($s, "DEALLOCATE ALL");
	}
	$coord->safe_psql('postgres', "DROP TABLE $table");
	my $left = join ',', map {
		$_->safe_psql('postgres', qq{SET citus.override_table_visibility TO off;
			SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
			WHERE n.nspname = 'gunique_keys' AND c.relname ~ '^public\\.$index(_pkey)?(_[0-9]+)?\$'})
	} ($coord, @workers);
	is($left, '0,0,0', "round $round: DROP TABLE leaves no key table on any node");
}

# the outcomes a run of the default length (or longer) reaches
if (!$failed && $steps * $rounds >= 150)
{
	my @miss;
	my $any = sub { my ($re) = @_; return grep { /$re/ && $total{$_} } keys %total; };
	push @miss, 'an INSERT that failed on a key held across shards' unless $any->(qr/^INSERT.*: 23505 key table/);
	push @miss, 'an INSERT that failed in a shard' unless $any->(qr/^INSERT.*: 23505 in a shard/);
	push @miss, 'a batched INSERT or COPY that succeeded' unless $any->(qr/^(INSERT of 70-200|COPY of 70-90) rows: ok/);
	push @miss, 'a batched INSERT or COPY that failed' unless $any->(qr/^(INSERT of 70-200|COPY of 70-90) rows: (23505|known)/);
	push @miss, 'a committed transaction' unless $total{'transaction: committed'};
	push @miss, 'a ROLLBACK TO SAVEPOINT' unless $total{'ROLLBACK TO SAVEPOINT'};
	push @miss, 'a wait scene' unless $total{'step wait'};
	push @miss, 'a found lookup' unless $total{'lookup: found'};
	push @miss, 'a shard move' unless $any->(qr/^shard move/);
	push @miss, $pg18 ? 'an UPDATE of the key' : 'an UPDATE of the key refused'
	  unless $any->($pg18 ? qr/^UPDATE of the key by the key: ok/ : qr/^UPDATE of the key by the key: refused/);
	ok(!@miss, 'the run reached the main outcomes') or diag('not reached: ' . join('; ', @miss));
}

is(check_logs(), 'clean', 'no assertion failure, PANIC or process killed by a signal on any node')
  unless $failed;
note sprintf('seed %d: %.0f s', $seed, time - $started);
sess_close($_) for (@wsess, @ctl);
$_->stop for ($coord, @workers);
done_testing();

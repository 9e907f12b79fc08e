# Copyright (c) gunique contributors
#
# The driver of t/006_stateful.pl: it runs statements in the sessions
# (GuniqueStatefulSessions), leaves one that waits pending and judges it
# when it ends, against the model (GuniqueStatefulModel), after those it
# waited for; makes the random operations (op_*: each an action for a
# session, or undef if it does not apply now); takes a step (step: one
# operation, by the weights t/006 gives); ends every transaction before
# the checks (quiesce); and runs the pgbench load.  t/006 holds the plan:
# the settings and the seed, the table of operations and their weights, the
# scenes, the checks and the rounds.
package GuniqueStatefulDriver;

use strict;
use warnings;
use Exporter 'import';
use IPC::Run;
use Storable qw(dclone);
use Time::HiRes qw(time usleep);
use List::Util qw(min max);
use PostgreSQL::Test::Utils;
use Test::More;
use GuniqueStatefulModel;
use GuniqueStatefulSessions;

our @EXPORT = qw(
  driver_on connect_all step quiesce
  run_action settle wait_any settle_all
  rows_done either_done ddl_done detach_finalize
  op_insert op_insert_into op_copy as_copy op_update_key op_update_keep
  op_move op_delete race_ok op_upsert upsert_action op_bulk op_bulk_delete
  ddl_ok op_detach op_attach attach_action op_drop op_truncate op_create
  op_reindex alter_probe op_alter_type op_begin op_end op_finish_prepared
  op_savepoint op_rollback_to op_release op_begin_rr race_keys op_lookup
  op_lookup_race sess_prepare load_start load_tick load_stop
  gidx_ddl_ok op_drop_index build_action op_insert_colliding op_dedup
  gidx_catalog
  $alter_ok $alter_why $last_op);

my ($node, $more, $lookups, $pg18, $nsess, $tmp);

# What the driver runs against: the cluster (node), whether it runs
# lookups and the operations of issue 39 (lookups, more), whether the
# server arbitrates ON CONFLICT with gunique (pg18), and how many driver
# sessions (sessions).  The pgbench load's scripts go to a directory of
# their own, made now: File::Temp draws its name from the PRNG, and t/006
# calls this where the test always made it, so that a seed makes the steps
# it made before.
sub driver_on
{
	my %o = @_;
	($node, $more, $lookups, $pg18, $nsess) = @o{qw(node more lookups pg18 sessions)};
	$tmp = PostgreSQL::Test::Utils::tempdir;
}

my $lookup_stmts = 0;	# lookups made, for one in three through the view

#
# Running statements.  An "action" is {sql, ops (row changes), kind, ...};
# run_action sends it, and if it waits, leaves it pending.
#
sub run_action
{
	my ($d, $a, $nosettle) = @_;
	my $t = $d->{tx};
	if ($a->{lookup})
	{
		# judged against every version from this one on
		$a->{lookup}{from} = ver_keep();
		$a->{lookup}{id} = ++$M{lookup_id};
		$M{watch}{ $a->{lookup}{id} } = $a->{lookup};
	}
	$a->{touch} = new_txn();
	$a->{ggen} = $M{ggen} // 0;
	$a->{touch}{ddl} = 1 if $a->{ddl};
	$a->{touch}{rebuild} = 1 if $a->{rebuild};
	$a->{touch}{attach} = 1 if $a->{sql} =~ /ATTACH PARTITION/;
	$a->{touch}{trunc}{ $a->{trunc_slot} } = 1 if defined $a->{trunc_slot};
	$a->{touch}{where}{ $_->[2] }{ $_->[1] } = 1 for @{ $a->{ops} // [] };
	$a->{touch}{upsert} = 1 if $a->{upsert};
	$M{greindex} = $a if $a->{greindex};
	# a concurrent build of t_k: the keys it may find twice from now on
	if ($a->{gbuild})
	{
		$M{ggen}++;
		$M{gbuild} = $a;
		$M{gwatch} = {};
		$M{gwatch}{$_} = 1 for dup_keys(undef), map { dup_keys($_) } others(undef);
	}
	# (a flap scene's partition is in or out)
	$a->{lookup}{flap} = $M{flap_slot} if $a->{lookup} && defined $M{flap_slot};
	race_mark($d, $a);
	# beside a DETACH CONCURRENTLY of another session that runs
	if (($a->{lookup} || $a->{row}) && grep { $_ != $d && $_->{pending} && $_->{pending}{dconc} } @sess)
	{
		$M{dc}{beside}{ $a->{lookup} ? 'lookups' : 'modifications' }++;
	}
	trace("$d->{s}{name}: " . ($a->{label} // $a->{sql}) . ($a->{data} ? ' ' . join(' ', map { "($_->[1]:$_->[2])" } @{ $a->{ops} }) : ''));
	sess_send($d->{s}, $a->{sql}, $a->{data});
	$d->{pending} = $a;
	settle($d, 1) unless $nosettle;
}

# Is the session's statement waiting for another session (or a prepared
# transaction)?  The processes it waits for are kept in its blockers.
sub is_blocked
{
	my ($d) = @_;
	my $pid = $d->{s}{pid};
	my ($blocked, @pids) = split / /, ctl_query(
		"SELECT CASE WHEN pg_isolation_test_session_is_blocked($pid, "
		  . "array(SELECT pid FROM pg_stat_activity WHERE pid NOT IN ($pid, pg_backend_pid())) || 0) "
		  . "THEN 't' ELSE 'f' END || ' ' || array_to_string(pg_blocking_pids($pid), ' ')");
	$M{last_blocked} = $blocked;
	for my $bp ($blocked eq 't' ? @pids : ())
	{
		$d->{pending}{blockers}{$bp} = 1;
		# the transaction of a session it waited for (finish_action)
		my ($o) = grep { $_->{s}{pid} == $bp } @sess;
		$d->{pending}{blocked_in}{$bp} = $o->{tx} if $o && $o->{tx};
	}
	return $blocked eq 't';
}

# Wait until the session's statement ends or waits ($may_wait) for another.
sub settle
{
	my ($d, $may_wait) = @_;
	my $deadline = time + 120;
	# its end was seen: finish_action judges it after those it blocked
	return if $d->{pending} && $d->{pending}{ending};
	while ($d->{pending})
	{
		my ($st, $out, $rows) = sess_poll($d->{s});
		if (defined $st)
		{
			finish_action($d, $st, $out, $rows);
			return;
		}
		if ($may_wait && is_blocked($d))
		{
			trace("$d->{s}{name}: waits") unless $d->{pending}{waited}++;
			return;
		}
		watch_server();
		fail_now("session $d->{s}{name} (pid $d->{s}{pid}) hangs in: $d->{pending}{sql}; "
			  . join(' ', map { "$_->{s}{name}:" . ($_->{tx} ? 'tx' : '-') . ($_->{pending} ? 'P' : '') } @sess)
			  . " may_wait $may_wait, last is_blocked: $M{last_blocked}\n"
			  . ctl_query("SELECT string_agg(format('%s %s %s %s:%s %s %s', pid, backend_type, state, wait_event_type, wait_event, pg_blocking_pids(pid), query), E'\\n') FROM pg_stat_activity"))
		  if time > $deadline;
		usleep(2000);
	}
}

# Wait until one of the waiting statements ends (nothing else is left
# that they could be waiting for but each other and the pgbench load).
sub wait_any
{
	my $deadline = time + 120;
	while (1)
	{
		for my $d (grep { $_->{pending} } @sess)
		{
			my ($st, $out, $rows) = sess_poll($d->{s});
			if (defined $st)
			{
				finish_action($d, $st, $out, $rows);
				return;
			}
		}
		watch_server();
		fail_now('sessions hang: '
			  . join(' ', map { "$_->{s}{name} in $_->{pending}{sql}" } grep { $_->{pending} } @sess)
			  . "\n"
			  . ctl_query("SELECT string_agg(format('%s %s %s %s:%s %s %s', pid, backend_type, state, wait_event_type, wait_event, pg_blocking_pids(pid), query), E'\\n') FROM pg_stat_activity"))
		  if time > $deadline;
		usleep(2000);
	}
}

# Let every waiting statement that can end, end.
sub settle_all
{
	my ($may_wait) = @_;
	# DDL first: a statement that waited for it ended after it
	for my $d (sort { ($b->{pending}{touch}{ddl} || $b->{pending}{touch}{rebuild} || 0)
			<=> ($a->{pending}{touch}{ddl} || $a->{pending}{touch}{rebuild} || 0) }
		grep { $_->{pending} } @sess)
	{
		settle($d, $may_wait) if $d->{pending};
	}
}

sub fail_on_internal
{
	my ($d, $a, $st) = @_;
	fail_now("$d->{s}{name}: $a->{sql}: $st: $d->{s}{lasterr}")
	  if $st =~ /^XX/ || $st eq 'dead';
}

sub finish_action
{
	my ($d, $st, $out, $rows) = @_;
	my $a = $d->{pending};
	# A statement it waited for (queued ahead of it for a lock, say: a
	# TRUNCATE waiting for the pgbench load) ended before it, though it
	# may not have been seen to: judge that one first.  This one stays
	# pending meanwhile, its end not yet recorded: a statement it blocked
	# may have ended because this one's transaction did (a deadlock
	# victim), and must be judged so.
	$a->{ending} = 1;
	for my $o (grep { $_->{pending} && $a->{blockers}{ $_->{s}{pid} } } @sess)
	{
		settle($o, 1) if $o->{pending};
	}
	# So too a DDL statement seen waiting that ended on the server before
	# this one, but whose output comes later: this one may have queued
	# behind it for a lock when nobody looked (it waited for something
	# else when it was seen waiting), e.g. an INSERT into a partition whose
	# TRUNCATE waited for a transaction whose end let both go.  Not one
	# seen waiting for this session's transaction: it ended after this
	# statement, even if it shows idle first (a statement that fails in a
	# transaction block releases the locks as it aborts, before its session
	# reports the end), e.g. a TRUNCATE queued behind this transaction's
	# lookup, let go by this COPY's unique violation.
	my @ddl = grep {
		$_ != $d && $_->{pending} && !$_->{pending}{ending} && $_->{pending}{waited}
		  && ($_->{pending}{touch}{ddl} || $_->{pending}{touch}{rebuild} || %{ $_->{pending}{touch}{trunc} })
		  && !($d->{tx} && defined $_->{pending}{blocked_in}{ $d->{s}{pid} }
			&& $_->{pending}{blocked_in}{ $d->{s}{pid} } == $d->{tx})
	} @sess;
	if (@ddl)
	{
		my %end = map { my ($pid, $state, $at) = split /\|/; $pid => [ $state, $at ] } split /\n/,
		  ctl_query('SELECT pid, state, extract(epoch FROM state_change) FROM pg_stat_activity WHERE pid IN ('
			  . join(',', map { $_->{s}{pid} } $d, @ddl) . ')');
		my $at = $end{ $d->{s}{pid} }[1];
		for my $o (@ddl)
		{
			my ($state, $oat) = @{ $end{ $o->{s}{pid} } // [] };
			settle($o, 0)
			  if $o->{pending} && defined $state && $state =~ /^idle/ && defined $at && $oat <= $at;
		}
	}
	delete $d->{pending};
	my $t = $d->{tx};
	trace("$d->{s}{name}: -> $st" . ($st ne '00000' ? ' ' . short_err($d->{s}{lasterr}) : ''));
	fail_on_internal($d, $a, $st);
	$a->{out} = $out;
	$a->{rowcount} = $rows;
	$a->{done}->($d, $st, $a) if $a->{done};
}

#
# The ends of statements that change rows, and of DDL: each judged against
# the model, then its effects recorded in it.
#
# The standard end of a statement that changes rows: check the outcome
# against the verdict taken when it ends (a waiting statement is judged
# with what the waits decided), then record its effects.
sub rows_done
{
	my ($d, $st, $a) = @_;
	my $t = $d->{tx} // new_txn();
	my $v = judge($t, $a->{ops}, $a->{ggen});
	my %legal = (
		ok => { '00000' => 1 },
		fail => { '23505' => 1 },
		failroute => { '23505' => 1, '23514' => 1 },
		noroute => { '23514' => 1 },
		dup => { '00000' => 1, '23505' => 1 },
		maybe => { '00000' => 1, '23505' => 1, '23514' => 1, '40P01' => 1, '40001' => 1 },
	);
	# inserts of a key another partition holds, by the state of t_k (the
	# concurrent builds')
	my $g = gidx_state();
	my %how = (ok => 'goes in', fail => 'refused', failroute => 'refused', dup => 'either', maybe => 'maybe', noroute => 'no partition');
	$M{gdup}{ ($g eq 'invalid' ? "invalid after a failed $M{gfail}" : $g eq 'valid' ? 'valid, being reindexed' : $g) . " ($how{$v}): $st" }++
	  if ($g ne 'valid' || $M{greindex}) && collides($t, $a->{ops});
	# an upsert that raced it was decided by it (upsert_done)
	fail_now("$d->{s}{name}: $a->{sql}: $st, but " . join('; ', @{ $a->{must_commit} })
		  . ': it must have committed' . ($st ne '00000' ? ": $d->{s}{lasterr}" : ''))
	  if $a->{must_commit} && $st ne '00000';
	$M{race}{must_commit}++ if $a->{must_commit};
	if ($a->{race})
	{
		$M{race}{plain}{$st}++;
		# a key of it held by a row when it ended (an upsert's that was
		# seen to end first, or its holder's): the model knew it would fail
		$M{race}{plain_known}++ if $st eq '23505' && $v =~ /fail/;
		# who won: an upsert judged before it inserted the key it failed
		# on; or tell the racing upserts still running what it did
		my ($dup) = $st eq '23505' ? $d->{s}{lasterr} =~ /Key \(k(?:, p)?\)=\((\d+)(?:, -?\d+)?\) already exists/ : ();
		race_won('upsert', $dup) if defined $dup && $a->{ups_took}{$dup};
		for my $u (map { $_->{pending} } grep { $_ != $d && $_->{pending} && $_->{pending}{upsert} && $_->{pending}{race} } @sess)
		{
			$u->{plain_failed}{$dup} = 1 if defined $dup && $u->{race}{$dup};
			$u->{plain_took}{ $_->[2] } = 1 for grep { $st eq '00000' && $_->[0] eq 'ins' && $u->{race}{ $_->[2] } } @{ $a->{ops} };
		}
	}
	return either_done($d, $st, $a) if $a->{either};
	# UPDATE and DELETE of one row: is it still there (a partition detached
	# or dropped while the statement waited takes it away)?
	if ($a->{row})
	{
		my ($slot, $k) = @{ $a->{row} };
		my $there = view_part($t, $slot)->{attached} && grep { $_ == $slot } key_slots($t, $k);
		my $n = scalar(split /\n/, $a->{out});
		# DDL of another session that has not been seen to end may have
		# taken the row away
		if (!$there || ($n == 0 && $st eq '00000' && other_ddl($d->{tx})))
		{
			fail_now("$d->{s}{name}: $a->{sql}: $st, $n rows where the row is gone")
			  unless ($st eq '00000' && $n == 0) || $st =~ /^(23514|40P01|40001)$/;
			stmt_failed($d) if $st ne '00000';
			return;
		}
		fail_now("$d->{s}{name}: $a->{sql}: $n rows where the model has one")
		  if $st eq '00000' && $n != 1;
	}
	my $ok = $legal{$v}{$st} || ($st eq '40P01' && $a->{waited});
	# COPY routes each row as it reads it, but may check its keys later
	$ok ||= $a->{data} && $v eq 'fail' && $st eq '23514'
	  && grep { $_->[0] eq 'ins' && !view_part($t, $_->[1])->{attached} } @{ $a->{ops} };
	fail_now("$d->{s}{name}: $a->{sql}: $st where the model says $v ("
		  . join(' ', map { "$_->[2] in " . join(',', key_slots($t, $_->[2])) } grep { $_->[0] eq 'ins' } @{ $a->{ops} }[0 .. min(9, $#{ $a->{ops} })])
		  . ')'

		  . ($st ne '00000' ? ": $d->{s}{lasterr}" : ''))
	  unless $ok;
	if ($st eq '00000')
	{
		apply_ops($t, $a->{ops});
		$a->{after}->($t) if $a->{after};
		# (a key its transaction holds twice, which a build may find; a
		# transaction that wrote beside a build)
		if ($M{gbuild})
		{
			$M{gwatch}{$_} = 1 for dup_keys($t);
			$t->{beside_build} = 1 if $d->{tx} && @{ $a->{ops} };
		}
		commit_txn($t) unless $d->{tx};
	}
	else
	{
		stmt_failed($d);
	}
}

# Does a statement's row changes insert a key that another row, which it
# leaves alone, holds in t's view?
sub collides
{
	my ($t, $ops) = @_;
	my %del = map { ("$_->[1] $_->[2]" => 1) } grep { $_->[0] eq 'del' } @$ops;
	return scalar grep {
		my $k = $_->[2];
		$_->[0] eq 'ins' && grep { !$del{"$_ $k"} } live_slots($t, $k)
	} @$ops;
}

# With gidx_guard, would the row changes leave a key twice in a partition
# (a row of it there, or two rows of the statement)?
sub slots_unguarded
{
	my ($t, $ops) = @_;
	return 0 unless gidx_guard();
	my %seen;
	return scalar grep { $_->[0] eq 'ins' && ($seen{"$_->[1] $_->[2]"}++ || slot_taken($t, $_->[2], $_->[1])) } @$ops;
}

# An UPDATE or DELETE by the key of a row whose partition a DETACH
# CONCURRENTLY's first transaction, or an ATTACH, took out or put in while
# it ran (a scene's race: see detach_scene): it saw the partition in (its
# row changed: a key it takes is free everywhere) or out (no row), as
# PostgreSQL's plan would, and nothing else.
sub either_done
{
	my ($d, $st, $a) = @_;
	my $t = $d->{tx} // new_txn();
	my ($slot, $k) = @{ $a->{row} };
	my $n = scalar(split /\n/, $a->{out});
	$M{dc}{either}{ $st eq '00000' ? ($n ? 'in' : 'out') : $st }++;
	fail_now("$d->{s}{name}: $a->{sql}: $st, $n rows, where the partition of its row ("
		  . join(',', key_slots($t, $k)) . ") is in or out: it must find its row or none"
		  . ($st ne '00000' ? ": $d->{s}{lasterr}" : ''))
	  unless ($st eq '00000' && ($n == 0 || ($n == 1 && grep { $_ == $slot } key_slots($t, $k))))
	  || ($st eq '40P01' && ($a->{waited} || $a->{raced}));
	if ($st ne '00000')
	{
		stmt_failed($d);
		return;
	}
	return unless $n;
	apply_ops($t, $a->{ops});
	commit_txn($t) unless $d->{tx};
}

# DDL: must succeed (or be a deadlock victim once it waited).
sub ddl_done
{
	my ($d, $st, $a) = @_;
	if ($st eq '00000')
	{
		my $t = $d->{tx} // new_txn();
		$a->{after}->($t) if $a->{after};
		commit_txn($t) unless $d->{tx};
		return;
	}
	fail_now("$d->{s}{name}: $a->{sql}: $st: $d->{s}{lasterr}")
	  unless $st eq '40P01' && ($a->{waited} || others($d->{tx}));
	stmt_failed($d);
	detach_pending($a) if $a->{dconc};
}

# A DETACH CONCURRENTLY that failed on a deadlock in its second
# transaction (an insert's light probe holds the partition's leaf index
# and waits for its table, which the DETACH holds while it waits for the
# index: README.md, "DDL beside inserts") leaves the partition detached,
# pending: detached in the model, finished as its HINT says at the next
# check, when no transaction can hold FINALIZE up; no DDL until then
# (ddl_ok).  One that failed in its first transaction left it attached
# (only outside a DETACH CONCURRENTLY scene, whose first transaction the
# model commits at once).
sub detach_pending
{
	my ($a) = @_;
	my ($slot) = $a->{sql} =~ /PARTITION t_(\d+) CONCURRENTLY/;
	my $state = ctl_query("SELECT coalesce((SELECT CASE WHEN inhdetachpending THEN 'pending' ELSE 'in' END FROM pg_inherits WHERE inhrelid = 't_$slot'::regclass), 'out')");
	return if $state eq 'in';
	$M{detach_pending}{$slot} = 1 if $state eq 'pending';
	my $t = new_txn();
	$a->{after}->($t);
	commit_txn($t);
}

# At a check, with every transaction ended (check): finish them.
sub detach_finalize
{
	for my $slot (sort { $a <=> $b } keys %{ $M{detach_pending} // {} })
	{
		ctl_retry("ALTER TABLE t DETACH PARTITION t_$slot FINALIZE");
		$M{detach_finalized}++;
	}
	delete $M{detach_pending};
}

#
# The operations.  Each returns an action for session d, or undef if it
# does not apply now.
#

sub op_insert
{
	my ($d, $n) = @_;
	my $t = $d->{tx};
	my @slots = attached_slots($t) or return;
	my (@rows, @ops);
	for (1 .. $n)
	{
		my $slot = pick(@slots);
		my $k = hot_key();
		push @rows, [ rand_p($slot), $k ];
		push @ops, [ 'ins', $slot, $k ];
	}
	# at times a key an upsert of another session is checking and
	# inserting, a race (never so before PostgreSQL 18): race_ok
	my @uk = upsert_race_keys($d);
	my $force = @uk && rand() < 0.3;
	($rows[-1][1], $ops[-1][2]) = (pick(@uk)) x 2 if $force;
	return if slots_unguarded($t, \@ops);
	return unless race_ok($d, \@ops, $force);
	return {
		sql => 'INSERT INTO t VALUES '
		  . join(', ', map { "($_->[0], $_->[1])" } @rows),
		ops => \@ops,
		done => \&rows_done
	};
}

# An insert of n hot keys into the partition of slot (a lookup scene's).
sub op_insert_into
{
	my ($d, $slot, $n) = @_;
	return unless view_part($d->{tx}, $slot)->{attached};
	my @free = grep { !key_slots($d->{tx}, $_) && !uncertain($d->{tx}, $_) } 1 .. $M{hot};
	my @ops = map { [ 'ins', $slot, pick(@free) // hot_key() ] } 1 .. $n;
	return if slots_unguarded($d->{tx}, \@ops);
	return unless race_ok($d, \@ops);
	return {
		sql => 'INSERT INTO t VALUES ' . join(', ', map { '(' . rand_p($slot) . ", $_->[2])" } @ops),
		ops => \@ops,
		done => \&rows_done
	};
}

sub op_copy
{
	my ($d) = @_;
	my $a = op_insert($d, 1 + int(rand(5))) or return;
	return as_copy($a);
}

# An INSERT action made a COPY of its rows.
sub as_copy
{
	my ($a) = @_;
	my @rows = $a->{sql} =~ /\((\d+), (\d+)\)/g;
	my $data = '';
	while (my ($p, $k) = splice(@rows, 0, 2))
	{
		$data .= "$p\t$k\n";
	}
	$a->{sql} = 'COPY t (p, k) FROM STDIN';
	$a->{data} = $data . "\\.\n";
	return $a;
}

# An UPDATE or DELETE by the key: its SQL with constants, or, where the
# session's prepared statements may be used (prep_ok), an EXECUTE of one
# of them (md_*) with a generic or a custom plan; each counted.
sub modify_sql
{
	my ($d, $sql, $name, @args) = @_;
	my $r = rand();
	my $how = !prep_ok($d) || $r < 0.5 ? 'literal' : $r < 0.75 ? 'generic' : 'custom';
	$M{md}{$how}++;
	return $sql if $how eq 'literal';
	return "SET plan_cache_mode = force_${how}_plan; EXECUTE $name(" . join(', ', @args) . ')';
}

sub op_update_key
{
	my ($d) = @_;
	my $t = $d->{tx};
	my $r = pick(live_keys_untouched($t)) or return;
	my ($k, $slot) = @$r;
	my $k2 = hot_key();
	return if $k2 == $k;
	return if gidx_guard() && slot_taken($t, $k2, $slot);
	return unless race_ok($d, [ [ 'ins', $slot, $k2 ] ]);
	return {
		sql => modify_sql($d, "UPDATE t SET k = $k2 WHERE k = $k RETURNING k", 'md_key', $k, $k2),
		row => [ $slot, $k ],
		ops => [ [ 'del', $slot, $k ], [ 'ins', $slot, $k2 ] ],
		done => \&rows_done
	};
}

# A non-HOT UPDATE that keeps the key (t_v makes every UPDATE of v
# non-HOT): gunique's shortcut for it, keepkey.c, searches no other
# partition.
sub op_update_keep
{
	my ($d) = @_;
	my $t = $d->{tx};
	my $r = pick(live_keys_untouched($t)) or return;
	my ($k, $slot) = @$r;
	return {
		sql => modify_sql($d, "UPDATE t SET v = v + 1 WHERE k = $k RETURNING k", 'md_keep', $k),
		row => [ $slot, $k ],
		ops => [ [ 'del', $slot, $k ], [ 'ins', $slot, $k ] ],
		done => \&rows_done
	};
}

sub op_move
{
	my ($d) = @_;
	my $t = $d->{tx};
	my $r = pick(live_keys_untouched($t)) or return;
	my ($k, $slot) = @$r;
	my $to = pick(grep { $_ != $slot } attached_slots($t));
	return unless defined $to;
	return if gidx_guard() && slot_taken($t, $k, $to);
	my $p = rand_p($to);
	return {
		sql => modify_sql($d, "UPDATE t SET p = $p WHERE k = $k RETURNING k", 'md_move', $k, $p),
		row => [ $slot, $k ],
		ops => [ [ 'del', $slot, $k ], [ 'ins', $to, $k ] ],
		done => \&rows_done
	};
}

sub op_delete
{
	my ($d) = @_;
	my $r = pick(live_keys_untouched($d->{tx})) or return;
	return {
		sql => modify_sql($d, "DELETE FROM t WHERE k = $r->[0] RETURNING k", 'md_del', $r->[0]),
		row => [ $r->[1], $r->[0] ],
		ops => [ [ 'del', $r->[1], $r->[0] ] ],
		done => \&rows_done
	};
}

#
# INSERT ... ON CONFLICT DO NOTHING (PostgreSQL 18 only).  A row is
# inserted iff its key is free for the statement's transaction: no
# committed live row and no row of its own transaction (an earlier row of
# the statement included) holds it in any attached partition.  A key
# another transaction is inserting or deleting makes the statement wait
# for it, and the statement is judged when it ends, with what that
# transaction did.  An upsert must never fail with a unique violation,
# but while a partition is being attached (see upsert_done).
#
# Races with plain statements (src/README, "ON CONFLICT DO NOTHING",
# point 5): a plain INSERT, COPY or UPDATE of a key that an upsert of
# another session is checking and inserting, or an upsert of a key that
# a plain statement of another session is writing.  Whichever of the two
# is first decides: a plain statement's row that is in makes the upsert
# wait for its transaction and then skip the row (committed) or insert
# it (rolled back); an upsert whose check passed first makes the plain
# statement wait for its row and then for its transaction, and fail with
# a unique violation (committed) or go in (rolled back).  The model
# cannot order them, so:
#   - an upsert that ends while such a plain statement in autocommit
#     runs (not seen to end) takes the row's fate from RETURNING
#     (upsert_verdict), and if it skipped a key the statement inserts (or
#     inserted one it deletes), that statement must have committed:
#     rows_done checks it when it ends;
#   - a plain statement that ends while such an upsert runs may succeed
#     or fail (judge: 'maybe', but 'fail' where the key is held by a row
#     that stays: the upsert can only skip it); its rows are in iff it
#     succeeded, and the upsert is then judged with them;
#   - a statement that ends after the other was seen to end is judged as
#     any other, with what the other did;
#   - a plain statement in a transaction block (its statement running)
#     cannot have decided an upsert's row that ended: had it written the
#     key first, the upsert would wait for its transaction; the upsert is
#     judged as if it had not run.
# A plain statement takes a key of a running upsert only if that upsert
# has RETURNING (it may have to learn its row: race_ok); an upsert that
# takes a running plain statement's key has it (the key is uncertain).
#

# Keys the running statements of sessions other than d write: those of
# upserts ($upsert) or of other statements, each with the actions that
# write it.
sub running_keys
{
	my ($d, $upsert) = @_;
	my %k;
	for my $o (@sess)
	{
		next if $o == $d || !$o->{pending} || !$o->{pending}{upsert} != !$upsert;
		push @{ $k{$_} }, $o->{pending} for sort { $a <=> $b } keys %{ $o->{pending}{touch}{where} };
	}
	return \%k;
}

# Hot keys that running upserts (with RETURNING) of sessions other than d
# write, for a plain statement of d to race them.
sub upsert_race_keys
{
	my ($d) = @_;
	my $up = running_keys($d, 1);
	return grep { $_ < $bulk_base && !grep { !$_->{returning} } @{ $up->{$_} } } sort { $a <=> $b } keys %$up;
}

# May a plain statement of session d make these row changes, where
# running upserts of other sessions write some of the keys it inserts?
# Only if those have RETURNING (one may end while this statement runs,
# and learn its row), and then half the time ($force: always).
sub race_ok
{
	my ($d, $ops, $force) = @_;
	my $up = running_keys($d, 1);
	my @u = map { @{ $up->{ $_->[2] } // [] } } grep { $_->[0] eq 'ins' } @$ops;
	return 1 unless @u;
	return 0 if grep { !$_->{returning} } @u;
	return $force || rand() < 0.5;
}

# Action a of session d starts: if it is an upsert and a plain statement
# of another session runs that writes one of its keys, or the other way
# round, both note the keys in {race} (counted when they end).
sub race_mark
{
	my ($d, $a) = @_;
	return unless @{ $a->{ops} // [] };
	for my $o (grep { $_ != $d && $_->{pending} && @{ $_->{pending}{ops} // [] } } @sess)
	{
		my $p = $o->{pending};
		next if !$p->{upsert} == !$a->{upsert};
		for my $k (grep { $p->{touch}{where}{$_} } keys %{ $a->{touch}{where} })
		{
			$a->{race}{$k} = $p->{race}{$k} = 1;
		}
	}
}

# A race of an upsert and a plain statement of key k was won by $who: its
# row was in first, and the other failed (23505) or skipped it.  The
# first of each in a round is noted, with the steps before it.
sub race_won
{
	my ($who, $k) = @_;
	return if $M{race}{won}{$who}++;
	note("step $stepno: the round's first race won by the $who (key $k):\n"
		  . join("\n", @trace[ max(0, $#trace - 12) .. $#trace ]));
}

# Upsert n rows, into t or into one of its partitions: keys new, held by
# committed rows, by the session's own transaction, by other transactions
# (the statement waits), by another session's running upsert, repeated in
# the statement, or committed bulk keys.  RETURNING whenever another
# transaction may decide a row, and at random otherwise.
sub op_upsert
{
	my ($d, $n) = @_;
	my $t = $d->{tx};
	# (ON CONFLICT needs a valid arbiter: the concurrent builds')
	return if gidx_state() ne 'valid';
	# not while DDL waits: a statement queued behind it may end before
	# the model sees the DDL end, and be judged (and applied) before it
	return if grep { $_->{pending} && ($_->{pending}{touch}{ddl} || $_->{pending}{touch}{rebuild}
			|| %{ $_->{pending}{touch}{trunc} }) } @sess;
	my @slots = attached_slots($t) or return;
	my $plain = running_keys($d, 0);
	# half the time, keys that running plain statements of other sessions
	# write are taken too (a race: see above)
	$plain = {} if %$plain && rand() < 0.5;
	my $alone = !others($t);
	# (never a key of the collide scenes, whose rows have u)
	my @committed = grep { !$plain->{$_} && !is_ukey($_) && live_slots(undef, $_) } sort { $a <=> $b } keys %{ $M{where} };
	my @own = $t ? grep { !$plain->{$_} && !is_ukey($_) } sort { $a <=> $b } keys %{ $t->{where} } : ();
	my %oth;
	for my $o (others($t))
	{
		$oth{$_} = 1 for grep { $_ < $bulk_base && !$plain->{$_} && !is_ukey($_) } keys %{ $o->{where} };
	}
	my @other = sort { $a <=> $b } keys %oth;
	my $direct = rand() < 0.3 ? pick(@slots) : undef;
	my @rows;    # [slot, p, k]
	for (1 .. $n)
	{
		my $r = rand();
		my $k;
		if ($r < 0.35) { $k = pick(@other); }
		elsif ($r < 0.55) { $k = pick(@committed); }
		elsif ($r < 0.65) { $k = pick(@own); }
		elsif ($r < 0.75) { $k = @rows ? $rows[ int(rand(@rows)) ][2] : undef; }
		elsif ($r < 0.8 && $alone) { $k = bulk_key($t); }
		$k //= hot_key();
		return if $plain->{$k};
		my $slot = $direct // pick(@slots);
		push @rows, [ $slot, rand_p($slot), $k ];
	}
	return upsert_action($d, \@rows, $direct);
}

# The upsert of rows ([slot, p, k]) by session d, into t or into the
# partition of slot direct.
sub upsert_action
{
	my ($d, $rows, $direct) = @_;
	my $t = $d->{tx};
	my @rows = @$rows;
	my $up = running_keys($d, 1);
	$M{ups_stacked}++ if grep { $up->{ $_->[2] } } @rows;
	my $unc = other_ddl($t) || grep { uncertain($t, $_->[2]) } @rows;
	my $ret = $unc || rand() < 0.5;
	my $target = rand() < 0.5 ? ' (k)' : '';
	$M{ups_direct}++ if defined $direct;
	return {
		sql => 'INSERT INTO ' . (defined $direct ? "t_$direct" : 't') . ' VALUES '
		  . join(', ', map { "($_->[1], $_->[2])" } @rows)
		  . " ON CONFLICT$target DO NOTHING" . ($ret ? ' RETURNING p, k' : ''),
		ops => [ map { [ 'ins', $_->[0], $_->[2] ] } @rows ],
		upsert => 1,
		rows => \@rows,
		returning => $ret,
		ddl_seen => other_ddl($t),
		attach_seen => attach_about($t),
		done => \&upsert_done
	};
}

# The end of an upsert.  Its outcome: success, or a deadlock victim once
# it waited; beside DDL of another transaction (when it began or now),
# also the errors listed below, and its rows are taken from RETURNING.
# Each row must then have its verdict, RETURNING give exactly the rows
# inserted, psql's ROW_COUNT their number, and the session hold no upsert
# lock.
sub upsert_done
{
	my ($d, $st, $a) = @_;
	my $t = $d->{tx};
	my $ddl = $a->{ddl_seen} || other_ddl($t);
	my $what = "$d->{s}{name}: $a->{sql}";
	$M{upserts}++;
	$M{ups_waited}++ if $a->{waited};
	$M{race}{ups}{$st}++ if $a->{race};
	my $locks = ctl_query(
		"SELECT count(*) FROM pg_locks WHERE pid = $d->{s}{pid} AND locktype = 'advisory' AND objsubid = 26485");
	fail_now("$what: $st, and the session still holds $locks upsert locks") if $locks ne '0';
	# Beside DDL: a deadlock, a row's partition detached (23514), a
	# serialization failure of the lookup after a TRUNCATE (40001); a
	# unique violation only where a partition that may hold the key is
	# being attached (it may join the tree between the check and the
	# insert, as a plain insert of the key may).
	my %legal = ('00000' => 1);
	$legal{'40P01'} = 1 if $a->{waited};
	%legal = map { $_ => 1 } qw(00000 23514 40P01 40001) if $ddl;
	$legal{'23505'} = 1 if $a->{attach_seen} || attach_about($t);
	fail_now("$what: $st where the model allows " . join('/', sort keys %legal)
		  . ' (' . join(' ', map { "$_->[2] in " . join(',', key_slots($t, $_->[2])) } @{ $a->{rows} }) . ")"
		  . ($st ne '00000' ? ": $d->{s}{lasterr}" : ''))
	  unless $legal{$st};
	if ($st ne '00000')
	{
		$M{ups_err}{$st}++;
		note("step $stepno: $what: $st beside DDL: " . short_err($d->{s}{lasterr})
			  . "\n" . join("\n", @trace[ max(0, $#trace - 15) .. $#trace ]))
		  if $st ne '40P01';
		stmt_failed($d);
		return;
	}
	my %ret;
	$ret{$_}++ for split /\n/, $a->{out};
	my $scratch = dclone(state_of($t // new_txn()));
	my (@ins, @verdicts);
	for my $r (@{ $a->{rows} })
	{
		my ($slot, $p, $k) = @$r;
		my ($v, $racer) = upsert_verdict($d, $scratch, $k, $ddl);
		push @verdicts, "$k:" . ($v =~ s/ /_/gr);
		fail_now("$what: ended where it must still wait (key $k, $v): "
			  . join(' ', @verdicts))
		  if $v =~ /^wait/;
		my $why = $v =~ /^learn \(.*?(\w+)\)/ && $1;
		if ($why)
		{
			$M{ups_learn_why}{$why}++;
			fail_now("$what: key $k was decided by work the model cannot order, "
				  . 'and there is no RETURNING (it waited where nothing should hold it up?)')
			  unless $a->{returning};
			$M{ups_learned}++;
			$v = $ret{"$p|$k"} ? 'in' : 'skip';
			$M{race}{ups_learned}{$v}++ if $why =~ /^(inserts|deletes|write)$/;
		}
		# the one plain statement that raced it decided the row: if the
		# row was skipped for its insert, or inserted for its delete, it
		# committed
		push @{ $racer->{pending}{must_commit} },
		  "$d->{s}{name}'s upsert (step $stepno) " . ($v eq 'in' ? 'inserted' : 'skipped') . " key $k, which it $why"
		  if $racer && ($v eq 'in') == ($why eq 'deletes');
		if ($a->{race}{$k})
		{
			$M{race}{ups_rows}{$v}++;
			if ($v eq 'in')
			{
				# a racing plain statement judged before failed on it, or
				# one still running is told
				race_won('upsert', $k) if $a->{plain_failed}{$k};
				$_->{pending}{ups_took}{$k} = 1
				  for grep { $_ != $d && $_->{pending} && !$_->{pending}{upsert} && ($_->{pending}{race} // {})->{$k} } @sess;
			}
			elsif ($a->{plain_took}{$k} || ($racer && $why eq 'inserts'))
			{
				race_won('plain statement', $k);
			}
		}
		if ($v eq 'in')
		{
			fail_now("$what: key $k ($p) not returned where it must be inserted: "
				  . join(' ', @verdicts) . "; returned: " . join(' ', split /\n/, $a->{out}))
			  if $a->{returning} && !$ret{"$p|$k"}--;
			txn_set_row($scratch, $slot, $k, 1);
			push @ins, [ 'ins', $slot, $k ];
			$M{ups_in}++;
		}
		else
		{
			fail_now("$what: key $k ($p) returned where it must be skipped: "
				  . join(' ', @verdicts) . "; returned: " . join(' ', split /\n/, $a->{out}))
			  if $ret{"$p|$k"};
			$M{ups_skip}++;
		}
	}
	my @extra = grep { $ret{$_} } sort keys %ret;
	fail_now("$what: returned rows it did not insert: @extra (" . join(' ', @verdicts) . ')')
	  if @extra;
	fail_now("$what: ROW_COUNT $a->{rowcount} where the model inserts " . scalar(@ins)
		  . ' (' . join(' ', @verdicts) . ')')
	  if $a->{rowcount} ne scalar(@ins);
	trace("$d->{s}{name}: upsert " . join(' ', @verdicts));
	my $tx = $t // new_txn();
	apply_ops($tx, \@ins);
	commit_txn($tx) unless $t;
}

# Many new keys at once, spread over the attached partitions: enough, in
# the large case, for the group's filter (or the leaves') to be outgrown
# and rebuilt.  A filter is made for twice the keys it has been given, so
# a large bulk gives it more keys than all bulks of the table so far.
# Bulk keys are never taken twice, nor changed one by one: the model keeps
# each bulk as one record {lo, hi, slots (key g goes to slots[g % n]),
# gone (slots whose share was truncated, dropped or deleted)}.
sub op_bulk
{
	my ($d, $large) = @_;
	my $t = $d->{tx};
	my @slots = attached_slots($t) or return;
	return if other_ddl($t);
	my $n = 200 + int(rand(300));
	$n = min(400_000, max($M{bulk}, 3 * $M{bulk_sent})) if $large;
	$M{large}++ if $large;
	$M{large_ddl}++ if $large && $t && ($t->{ddl} || %{ $t->{trunc} });
	$M{bulk_sent} += $n;
	my $lo = $M{next_bulk};
	my $hi = $lo + $n - 1;
	return if $hi >= $load_base;
	$M{next_bulk} = $hi + 1;
	my @ps = map { $_ * 10 } @slots;
	return {
		sql => 'INSERT INTO t SELECT (ARRAY[' . join(',', @ps) . '])[1 + g % '
		  . scalar(@ps) . "], g FROM generate_series($lo, $hi) g",
		ddl => 0,
		done => sub {
			my ($d, $st, $a) = @_;
			my $v = other_ddl($d->{tx}) ? 'maybe' : 'ok';
			fail_now("$d->{s}{name}: $a->{sql}: $st where the model says $v: $d->{s}{lasterr}")
			  unless $st eq '00000'
			  || ($v eq 'maybe' && $st =~ /^(23514|40P01)$/)
			  || ($st eq '40P01' && $a->{waited});
			if ($st ne '00000')
			{
				stmt_failed($d);
				return;
			}
			my $rec = { lo => $lo, hi => $hi, slots => \@slots, gone => {} };
			if ($d->{tx})
			{
				push @{ $d->{tx}{bulks} }, $rec;
			}
			else
			{
				push @{ $M{bulks} }, $rec;
				ver_commit(new_txn());
			}
		}
	};
}

# Delete every bulk key (only with no other transaction about).
sub op_bulk_delete
{
	my ($d) = @_;
	my $t = $d->{tx};
	return if others($t);
	return {
		sql => "DELETE FROM t WHERE k >= $bulk_base AND k < $load_base",
		bulkdel => 1,
		done => sub {
			my ($d, $st, $a) = @_;
			fail_now("$d->{s}{name}: $a->{sql}: $st: $d->{s}{lasterr}")
			  unless $st eq '00000';
			my $t = $d->{tx} // new_txn();
			# other sessions may commit bulks before this transaction
			# ends: the DELETE did not see them
			my %seen = map { $_->{lo} => 1 } @{ $M{bulks} };
			for my $slot (attached_slots($t))
			{
				$t->{bulkdel}{$slot} = { %{ $t->{bulkdel}{$slot} // {} }, %seen };
				$_->{gone}{$slot} = 1 for @{ $t->{bulks} };
			}
			commit_txn($t) unless $d->{tx};
		}
	};
}

# DDL is run only while no other session has DDL open or waiting, nor
# an upsert waiting (its outcome is judged with the DDL that was about
# when it began: see upsert_done).
sub ddl_ok
{
	my ($d) = @_;
	# (none beside an index t_k not valid: the concurrent builds')
	return 0 if gidx_state() ne 'valid';
	return 0 if %{ $M{detach_pending} // {} };
	return 0 if grep { $_->{pending} && $_->{pending}{upsert} } @sess;
	return !other_ddl($d->{tx}) && !($d->{tx} && $d->{tx}{ddl} > 3);
}

sub op_detach
{
	my ($d, $conc) = @_;
	my $t = $d->{tx};
	return if $conc && $t;
	return unless ddl_ok($d);
	my @slots = attached_slots($t);
	return if @slots < 3;
	my $slot = pick(@slots);
	return {
		sql => "ALTER TABLE t DETACH PARTITION t_$slot" . ($conc ? ' CONCURRENTLY' : ''),
		ddl => 1,
		dconc => $conc,
		done => \&ddl_done,
		after => sub { $_[0]{parts}{$slot} = { exists => 1, attached => 0 }; $_[0]{ddl}++; }
	};
}

sub op_attach
{
	my ($d) = @_;
	my $t = $d->{tx};
	return unless ddl_ok($d);
	# (a table detached before ALTER COLUMN TYPE keeps its key's type, and
	# cannot be attached until t's is that again)
	my $slot = pick(grep { !view_part($t, $_)->{attached} && slot_type($t, $_) eq t_type($t) } existing_slots($t));
	return unless defined $slot;
	return attach_action($slot);
}

sub attach_action
{
	my ($slot) = @_;
	my ($lo, $hi) = slot_bounds($slot);
	return {
		sql => "ALTER TABLE t ATTACH PARTITION t_$slot FOR VALUES FROM ($lo) TO ($hi)",
		ddl => 1,
		done => sub {
			my ($d, $st, $a) = @_;
			my $v = attach_verdict($d->{tx}, $slot);
			my %legal = (
				ok => { '00000' => 1 },
				fail => { '23505' => 1 },
				maybe => { '00000' => 1, '23505' => 1, '40P01' => 1 });
			fail_now("$d->{s}{name}: $a->{sql}: $st where the model says $v: $d->{s}{lasterr}")
			  unless $legal{$v}{$st} || ($st eq '40P01' && $a->{waited});
			if ($st eq '00000')
			{
				my $t = $d->{tx} // new_txn();
				$t->{parts}{$slot} = { exists => 1, attached => 1 };
				$t->{ddl}++;
				commit_txn($t) unless $d->{tx};
			}
			else
			{
				stmt_failed($d);
			}
		}
	};
}

sub op_drop
{
	my ($d) = @_;
	my $t = $d->{tx};
	return unless ddl_ok($d);
	my @slots = existing_slots($t);
	return if scalar(attached_slots($t)) < 3;
	my $slot = pick(@slots);
	return {
		sql => "DROP TABLE t_$slot",
		ddl => 1,
		done => \&ddl_done,
		after => sub {
			my ($t) = @_;
			$t->{parts}{$slot} = { exists => 0, attached => 0 };
			drop_rows($t, $slot);
			$t->{ddl}++;
		}
	};
}

sub op_truncate
{
	my ($d) = @_;
	my $t = $d->{tx};
	return unless ddl_ok($d);
	my $slot = pick(existing_slots($t));
	return unless defined $slot;
	return {
		sql => "TRUNCATE t_$slot",
		ddl => 0,
		trunc_slot => $slot,
		rebuild => 1,
		done => \&ddl_done,
		after => sub { drop_rows($_[0], $slot); $_[0]{rewrote}{$slot} = 1; }
	};
}

sub op_create
{
	my ($d) = @_;
	my $t = $d->{tx};
	return unless ddl_ok($d);
	my $slot = pick(grep { !view_part($t, $_)->{exists} } (0 .. $M{nslots} - 1));
	return unless defined $slot;
	my ($lo, $hi) = slot_bounds($slot);
	return {
		sql => "CREATE TABLE t_$slot PARTITION OF t FOR VALUES FROM ($lo) TO ($hi)",
		ddl => 1,
		done => \&ddl_done,
		after => sub {
			my ($t) = @_;
			$t->{parts}{$slot} = { exists => 1, attached => 1 };
			$t->{ktypes}{$slot} = t_type($t);
			drop_rows($t, $slot);
			$t->{ddl}++;
		}
	};
}

sub op_reindex
{
	my ($d, $how) = @_;
	my $t = $d->{tx};
	return if $how ne 'leaf' && $t;
	return unless ddl_ok($d);
	my $slot = pick(existing_slots($t));
	return unless defined $slot;
	my %sql = (
		leaf => "REINDEX INDEX t_${slot}_k_idx",
		leafconc => "REINDEX INDEX CONCURRENTLY t_${slot}_k_idx",
		table => 'REINDEX TABLE t',
		tableconc => 'REINDEX TABLE CONCURRENTLY t',
		# not TRUNCATE: truncating each partition's heap waits up to 5 s
		# for a lock another session's transaction holds, with nothing
		# pg_blocking_pids shows (seed 81, 1000 steps, round 8 of 10)
		vacuum => 'VACUUM (TRUNCATE false) t');
	return { sql => $sql{$how}, rebuild => 1, done => \&ddl_done };
}

#
# ALTER TABLE t ALTER COLUMN k TYPE: rewrites every attached partition and
# rebuilds its indexes under AccessExclusiveLock (DDL: it waits for every
# transaction that locked t, and every statement on t waits for it), in
# autocommit or in a transaction.  Between int and bigint or numeric,
# keeping every key (USING k), or changing key k1 to k2 (a CASE): if
# another row of an attached partition holds k2, a duplicate, which must
# fail with a unique violation and change nothing; else k1's row then has
# k2.  A table detached before keeps its type (op_attach).  Only where
# the server can (alter_probe: PostgreSQL refuses to rebuild a gunique
# index of a partitioned table without gunique's help).
#
our ($alter_ok, $alter_why) = (0, 'not tried');

sub alter_probe
{
	return unless $more;
	my ($out, $err) = ('', '');
	my $ret = $node->psql(
		'postgres', q{
CREATE TABLE gu_alter_probe (p int, k int) PARTITION BY RANGE (p);
CREATE TABLE gu_alter_probe_0 PARTITION OF gu_alter_probe FOR VALUES FROM (0) TO (10);
CREATE TABLE gu_alter_probe_1 PARTITION OF gu_alter_probe FOR VALUES FROM (10) TO (20);
CREATE UNIQUE INDEX gu_alter_probe_k ON gu_alter_probe USING gunique (k);
INSERT INTO gu_alter_probe VALUES (1, 1), (11, 2);
ALTER TABLE gu_alter_probe ALTER COLUMN k TYPE bigint;
},
		stdout => \$out,
		stderr => \$err);
	$node->safe_psql('postgres', 'DROP TABLE IF EXISTS gu_alter_probe');
	$alter_ok = $ret == 0;
	$alter_why = $alter_ok ? 'works' : join(' ', grep { /ERROR/ } split /\n/, $err);
	note('ALTER COLUMN TYPE of a gunique key: '
		  . ($alter_ok ? 'works, run' : "skipped in every round ($alter_why)"));
}

sub op_alter_type
{
	my ($d) = @_;
	my $t = $d->{tx};
	return unless $alter_ok && ddl_ok($d);
	# a rewrite of a table that bulk inserts made large takes long
	return if bulk_count() > 50_000;
	my $from = t_type($t);
	my $to = $from ne 'int' ? 'int' : rand() < 0.7 ? 'bigint' : 'numeric';
	my ($k1, $k2);
	my $using = "k::$to";
	# in turn: a duplicate (a key another row holds), every key kept, a
	# key changed to a free one
	my $kind = $M{alter_kind}++ % 3;
	if ($kind != 1 && (my $r = pick(live_keys_untouched($t))))
	{
		$k1 = $r->[0];
		$k2 = $kind == 0
		  ? pick(grep { $_ != $k1 && live_slots($t, $_) && !uncertain($t, $_) } 1 .. $M{hot})
		  : pick(grep { !key_slots($t, $_) && !uncertain($t, $_) } 1 .. $M{hot});
		$using = "(CASE WHEN k = $k1 THEN $k2 ELSE k END)::$to" if defined $k2;
	}
	# (the view of t depends on k: made again, in the same statement)
	return {
		sql => "DO \$\$BEGIN DROP VIEW tv; ALTER TABLE t ALTER COLUMN k TYPE $to USING $using; "
		  . "CREATE VIEW tv AS SELECT k, p FROM t; END\$\$",
		label => "ALTER TABLE t ALTER COLUMN k TYPE $to USING $using",
		ddl => 1,
		alter => 1,
		done => sub { alter_done(@_, $to, $k1, $k2) },
	};
}

# The end of an ALTER COLUMN TYPE: judged with the rows as they are when
# it ends (every transaction that could change them had to end first).
sub alter_done
{
	my ($d, $st, $a, $to, $k1, $k2) = @_;
	my $t = $d->{tx} // new_txn();
	my @s1 = defined $k2 ? live_slots($t, $k1) : ();
	my $v = @s1 && live_slots($t, $k2) ? 'fail' : 'ok';
	my $how = (defined $k2 ? ($v eq 'fail' ? 'duplicate' : 'key changed') : 'keys kept') . ($d->{tx} ? ', in a transaction' : '');
	$M{alter}{"$how: $st"}++;
	fail_now("$d->{s}{name}: $a->{sql}: $st where the model says $v (keys $k1 in "
		  . join(',', key_slots($t, $k1)) . ', ' . ($k2 // '-') . ' in ' . join(',', defined $k2 ? key_slots($t, $k2) : ()) . ')'
		  . ($st ne '00000' ? ": $d->{s}{lasterr}" : ''))
	  unless $st eq ($v eq 'ok' ? '00000' : '23505')
	  || ($st eq '40P01' && ($a->{waited} || others($d->{tx})));
	if ($st ne '00000')
	{
		stmt_failed($d);
		return;
	}
	if (@s1)
	{
		txn_set_row($t, $s1[0], $k1, 0);
		txn_set_row($t, $s1[0], $k2, 1);
	}
	$t->{ktype} = $to;
	$t->{ktypes}{$_} = $to for attached_slots($t);
	# new storage, as TRUNCATE's: a lookup whose snapshot is older (one
	# that took it, then waited for the lock) reads it empty, or fails to
	# serialize (lookup_judge)
	$t->{rewrote}{$_} = 1 for attached_slots($t);
	$t->{ddl}++;
	commit_txn($t) unless $d->{tx};
}

#
# Concurrent builds of t_k (t/006's header: "Concurrent builds"): DROP
# INDEX t_k, CREATE UNIQUE INDEX CONCURRENTLY t_k, REINDEX INDEX
# CONCURRENTLY t_k (of a valid tree, or of an invalid one, which finishes
# it), each in autocommit; the state of t_k is the model's (gidx_state).
# Beside them, inserts and UPDATEs of keys other partitions hold
# (op_insert_colliding), and deletes of the rows that hold a key twice
# (op_dedup).
#

# May session d, in autocommit, drop, build or reindex t_k: no other DDL
# about, nor an upsert waiting?
sub gidx_ddl_ok
{
	my ($d) = @_;
	return 0 if $d->{tx} || grep { $_->{pending} && $_->{pending}{upsert} } @sess;
	return !other_ddl(undef);
}

# t_k in the catalogs: 'none', 'valid' or 'invalid'.
sub gidx_catalog
{
	return ctl_query(q{SELECT coalesce((SELECT CASE WHEN indisvalid THEN 'valid' ELSE 'invalid' END FROM pg_index WHERE indexrelid = to_regclass('t_k')), 'none')});
}

sub op_drop_index
{
	my ($d) = @_;
	return unless gidx_ddl_ok($d);
	my $g = gidx_state();
	return unless $g eq 'valid' || $g eq 'invalid';
	return {
		sql => 'DROP INDEX t_k',
		ddl => 1,
		gdrop => 1,
		done => sub {
			my ($d, $st, $a) = @_;
			fail_now("$d->{s}{name}: $a->{sql}: $st: $d->{s}{lasterr}")
			  unless $st eq '00000' || ($st eq '40P01' && $a->{waited});
			$M{gb}{"DROP INDEX: $st"}++;
			return if $st ne '00000';
			$M{gidx} = 'none';
			$M{ggen}++;
			delete $M{gfail};
			my $c = gidx_catalog();
			fail_now("$d->{s}{name}: $a->{sql}: t_k is $c after it") if $c ne 'none';
		}
	};
}

# CREATE UNIQUE INDEX CONCURRENTLY t_k ($how 'create', with t_k dropped),
# or REINDEX INDEX CONCURRENTLY t_k ('reindex'): a build (gbuild) unless
# t_k is valid.  Writers go on beside it (rebuild: no other DDL starts).
sub build_action
{
	my ($how) = @_;
	my $from = gidx_state();
	return {
		sql => $how eq 'create' ? 'CREATE UNIQUE INDEX CONCURRENTLY t_k ON t USING gunique (k)' : 'REINDEX INDEX CONCURRENTLY t_k',
		rebuild => 1,
		gbuild => $from ne 'valid',
		greindex => $from eq 'valid',
		gfrom => $from,
		done => \&build_done
	};
}

# Keys that a build may have found twice: any that was live twice in the
# committed state, or in a transaction's view, since it began (gwatch), or
# is so now, and those that statements still running write.
sub build_dup_keys
{
	my %k = %{ $M{gwatch} // {} };
	$k{$_} = 1 for dup_keys(undef), map { dup_keys($_) } others(undef);
	for my $o (grep { $_->{pending} } @sess)
	{
		$k{$_} = 1 for keys %{ $o->{pending}{touch}{where} };
	}
	return \%k;
}

# The end of a build, or of a REINDEX of a valid t_k:
#   - success: t_k valid in the catalogs, no key twice in t (a GROUP BY
#     query), gunique_verify silent, and in the model no key twice in the
#     committed state, nor in an open or prepared transaction's view by a
#     row of its own (a build waits for every transaction that wrote before
#     its last leaf was ready; those after probe every leaf), but where a
#     statement still running may have changed it;
#   - a unique violation (only a build): of a key that was twice in t,
#     or in a transaction's view, since the build began; t_k then invalid
#     ($M{gfail} 'merge' if it failed in the merge: every leaf built and
#     ready, one of them held invalid);
#   - a deadlock, once it waited: t_k as the catalogs say.
sub build_done
{
	my ($d, $st, $a) = @_;
	my $what = "$d->{s}{name}: $a->{sql} (t_k $a->{gfrom})";
	my $dups = $a->{gbuild} ? build_dup_keys() : {};
	$M{ggen}++ if $a->{gbuild};
	delete $M{gbuild};
	delete $M{greindex};
	delete $M{gwatch};
	my $kind = $a->{gfrom} eq 'none' ? 'CREATE INDEX CONCURRENTLY'
	  : 'REINDEX INDEX CONCURRENTLY of ' . ($a->{gfrom} eq 'valid' ? 'a valid' : 'an invalid') . ' tree';
	$M{gb}{"$kind: $st"}++;
	my $c = gidx_catalog();
	my $err = $st ne '00000' ? ": $d->{s}{lasterr}" : '';
	if ($st eq '00000')
	{
		fail_now("$what: succeeded, and t_k is $c") if $c ne 'valid';
		my $q = ctl_query('SELECT string_agg(k::text, \' \') FROM (SELECT k FROM t GROUP BY k HAVING count(*) > 1) d');
		fail_now("$what: succeeded, and keys are held twice in t: $q") if $q ne '';
		$q = ctl_query(q{SELECT string_agg(problem || ' ' || coalesce(relation::text, '') || ' ' || detail, E'\n') FROM gunique_verify('t_k')});
		fail_now("$what: succeeded, and gunique_verify reports:\n$q") if $q ne '';
		my %running = map { %{ $_->{pending}{touch}{where} } } grep { $_->{pending} } @sess;
		my @twice = grep { !$running{$_} } dup_keys(undef);
		fail_now("$what: succeeded, where the model holds keys twice: @twice") if @twice;
		for my $o ((map { [ $_->{s}{name}, $_->{tx} ] } grep { $_->{tx} && !$_->{tx}{dead} && !$_->{pending} } @sess),
			map { [ "prepared $_", $prepared{$_} ] } sort keys %prepared)
		{
			my ($name, $t) = @$o;
			@twice = grep {
				my $k = $_;
				!$running{$k} && grep { $t->{rows}{$_} && $t->{rows}{$_}{$k} } live_slots($t, $k)
			} dup_keys($t);
			fail_now("$what: succeeded, while $name holds keys twice with rows of its own: @twice") if @twice;
		}
		if ($a->{gbuild})
		{
			$M{gidx} = 'valid';
			delete $M{gfail};
			trace("t_k: valid");
		}
		return;
	}
	fail_now("$what: $st where it must succeed (or be a deadlock victim once it waited)$err")
	  unless $a->{gbuild} ? ($st eq '23505' || ($st eq '40P01' && $a->{waited})) : ($st eq '40P01' && ($a->{waited} || others(undef)));
	if ($st eq '23505')
	{
		fail_now("$what: a unique violation, and t_k is $c") if $c ne 'invalid';
		my ($k) = $d->{s}{lasterr} =~ /Key \(k\)=\((\d+)\)/;
		fail_now("$what: a unique violation of a key not found$err") unless defined $k;
		fail_now("$what: a unique violation of key $k, which no two rows held since it began (in the model)$err")
		  unless $dups->{$k};
	}
	if (!$a->{gbuild})
	{
		fail_now("$what: $st, and t_k is $c") if $c ne 'valid';
		return;
	}
	fail_now("$what: $st, and t_k is $c") if $c eq 'valid' || ($a->{gfrom} ne 'none' && $c eq 'none');
	$M{gidx} = $c;
	$M{gfail} = 'other';
	if ($st eq '23505' && $d->{s}{lasterr} =~ /could not create unique index "t_k"/)
	{
		# failed in the merge: every leaf built and ready (concurrent.c
		# holds one invalid until the tree is valid)
		my ($n, $ok) = split /\|/, ctl_query(
			q{SELECT count(*), count(*) FILTER (WHERE i.indisready) FROM pg_partition_tree('t_k') pt JOIN pg_index i ON i.indexrelid = pt.relid WHERE pt.isleaf});
		my $want = scalar(attached_slots(undef));
		fail_now("$what: failed in the merge, where $ok of the $n leaves are ready ($want partitions)$err")
		  unless $n == $want && $ok == $n;
		$M{gfail} = 'merge';
	}
	trace("t_k: $M{gidx}" . ($c eq 'invalid' ? " (failed in the $M{gfail})" : ''));
}

# An INSERT of a key that another partition holds (in the session's
# view), into one that does not (often one its transaction wrote to); at
# times an UPDATE of a row's key to it.  Refused while t_k is valid.
sub op_insert_colliding
{
	my ($d) = @_;
	my $t = $d->{tx};
	return if $t && ($t->{aborted} || $t->{rr});
	my @slots = attached_slots($t) or return;
	my %c = map { $_ => 1 } keys %{ $M{where} }, ($t ? keys %{ $t->{where} } : ());
	my $k = pick(grep { $_ < $bulk_base && !is_ukey($_) && live_slots($t, $_) } sort { $a <=> $b } keys %c);
	return unless defined $k;
	my $a;
	my $u = rand() < 0.3 && pick(grep { $_->[0] != $k && !slot_taken($t, $k, $_->[1]) } live_keys_untouched($t));
	if ($u)
	{
		my ($k0, $s0) = @$u;
		$a = {
			sql => "UPDATE t SET k = $k WHERE k = $k0 RETURNING k",
			row => [ $s0, $k0 ],
			ops => [ [ 'del', $s0, $k0 ], [ 'ins', $s0, $k ] ]
		};
	}
	else
	{
		my @to = grep { !slot_taken($t, $k, $_) } @slots;
		my @held = $t ? grep { my $s = $_; %{ $t->{rows}{$s} // {} } } @to : ();
		my $slot = @held && rand() < 0.6 ? pick(@held) : pick(@to);
		return unless defined $slot;
		$a = { sql => 'INSERT INTO t VALUES (' . rand_p($slot) . ", $k)", ops => [ [ 'ins', $slot, $k ] ] };
	}
	return unless race_ok($d, $a->{ops});
	$a->{done} = \&rows_done;
	return $a;
}

# Delete, of each key held twice or more (in the session's view, and that
# no other transaction touches), every row but one, by the key and its
# partition's range of p.
sub op_dedup
{
	my ($d) = @_;
	my $t = $d->{tx};
	return if $t && ($t->{aborted} || $t->{rr});
	my @ops;
	for my $k (dup_keys($t))
	{
		next if uncertain($t, $k);
		my @l = live_slots($t, $k);
		my $keep = pick(@l);
		push @ops, map { [ 'del', $_, $k ] } grep { $_ != $keep } @l;
	}
	return unless @ops;
	return {
		sql => 'DELETE FROM t WHERE '
		  . join(' OR ', map { my ($lo, $hi) = slot_bounds($_->[1]); "(k = $_->[2] AND p >= $lo AND p < $hi)" } @ops)
		  . ' RETURNING k',
		ops => \@ops,
		done => sub {
			my ($d, $st, $a) = @_;
			my $n = scalar(split /\n/, $a->{out});
			fail_now("$d->{s}{name}: $a->{sql}: $n rows where the model has " . scalar(@ops))
			  if $st eq '00000' && $n != @ops;
			rows_done(@_);
		}
	};
}

#
# Transactions: BEGIN, their ends, PREPARE TRANSACTION, savepoints.
#
sub op_begin
{
	my ($d) = @_;
	return if $d->{tx};
	return {
		sql => 'BEGIN',
		done => sub { $_[0]{tx} = new_txn(); }
	};
}

sub op_end
{
	my ($d, $how) = @_;
	my $t = $d->{tx} or return;
	return if $how eq 'COMMIT' && $t->{aborted};
	if ($how eq 'PREPARE')
	{
		return if $t->{aborted} || $t->{ddl} || %{ $t->{trunc} } || keys(%prepared) >= 4;
		my $gid = 'g' . ++$M{gid};
		return {
			sql => "PREPARE TRANSACTION '$gid'",
			done => sub {
				my ($d, $st) = @_;
				fail_now("PREPARE TRANSACTION: $st") unless $st eq '00000';
				$prepared{$gid} = delete $d->{tx};
			}
		};
	}
	return {
		sql => $how,
		done => sub {
			my ($d, $st) = @_;
			fail_now("$how: $st: $d->{s}{lasterr}") unless $st eq '00000';
			my $t = delete $d->{tx};
			commit_txn($t) if $how eq 'COMMIT';
			ghosts(keys %{ $t->{where} }) if $how ne 'COMMIT';
		}
	};
}

sub op_finish_prepared
{
	my ($d, $commit) = @_;
	return if $d->{tx};
	my $gid = pick(sort keys %prepared) or return;
	return {
		sql => ($commit ? 'COMMIT' : 'ROLLBACK') . " PREPARED '$gid'",
		done => sub {
			my ($d, $st) = @_;
			fail_now("finishing $gid: $st: $d->{s}{lasterr}") unless $st eq '00000';
			my $t = delete $prepared{$gid};
			commit_txn($t) if $commit;
			ghosts(keys %{ $t->{where} }) unless $commit;
		}
	};
}

sub op_savepoint
{
	my ($d) = @_;
	my $t = $d->{tx} or return;
	return if $t->{aborted} || @{ $t->{saves} } >= 3;
	my $name = 's' . ++$t->{nsave};
	return {
		sql => "SAVEPOINT $name",
		done => sub { push @{ $t->{saves} }, [ $name, copy_state($t) ]; }
	};
}

sub op_rollback_to
{
	my ($d) = @_;
	my $t = $d->{tx} or return;
	return unless @{ $t->{saves} };
	my $i = int(rand(@{ $t->{saves} }));
	my $name = $t->{saves}[$i][0];
	return {
		sql => "ROLLBACK TO SAVEPOINT $name",
		done => sub {
			my ($d, $st) = @_;
			fail_now("ROLLBACK TO: $st") unless $st eq '00000';
			splice(@{ $t->{saves} }, $i + 1);
			set_state($t, dclone($t->{saves}[$i][1]));
			$t->{aborted} = 0;
		}
	};
}

sub op_release
{
	my ($d) = @_;
	my $t = $d->{tx} or return;
	return if $t->{aborted} || !@{ $t->{saves} };
	my $i = int(rand(@{ $t->{saves} }));
	return {
		sql => "RELEASE SAVEPOINT $t->{saves}[$i][0]",
		done => sub { splice(@{ $t->{saves} }, $i); }
	};
}

sub op_begin_rr
{
	my ($d) = @_;
	return if $d->{tx};
	return {
		sql => 'BEGIN ISOLATION LEVEL REPEATABLE READ',
		done => sub { $_[0]{tx} = new_txn(); $_[0]{tx}{rr} = 1; }
	};
}

#
# Lookups by the key: see the header for the model's rules.
#

# Could a statement running in autocommit commit what a lookup may see at a
# moment the model cannot place?  DDL (DETACH CONCURRENTLY commits its first
# transaction, then waits), TRUNCATE and the bulk delete can wait for the
# pgbench load's locks, and commit once the load lets them go.
sub lookup_unsafe
{
	my ($a) = @_;
	return $a->{ddl} || defined $a->{trunc_slot} || $a->{bulkdel};
}

# The keys that statements of other sessions running in autocommit write,
# or undef if one of them is unsafe for a lookup to run beside.
sub lookup_busy
{
	my ($d) = @_;
	my %busy;
	for my $o (grep { $_ != $d && $_->{pending} && !$_->{tx} } @sess)
	{
		return if lookup_unsafe($o->{pending});
		$busy{$_} = 1 for keys %{ $o->{pending}{touch}{where} };
	}
	return \%busy;
}

# Must session d's action (not a lookup) wait until the running lookups
# have ended?  In autocommit, if it is unsafe or writes one of their keys.
sub lookup_interferes
{
	my ($d, $a) = @_;
	return 0 if $d->{tx} || $a->{lookup};
	my @run = grep { $_ != $d && $_->{pending} && $_->{pending}{lookup} } @sess;
	return 0 unless @run;
	return 1 if lookup_unsafe($a);
	my %k = map { $_ => 1 } map { @{ $_->{pending}{lookup}{keys} } } @run;
	return scalar grep { $k{ $_->[2] } } @{ $a->{ops} // [] };
}


# Keys written by t (and one of its bulk keys).
sub own_keys
{
	my ($t) = @_;
	return () unless $t;
	my @k = sort { $a <=> $b } grep { $_ < $bulk_base } keys %{ $t->{where} };
	my $r = pick(@{ $t->{bulks} });
	push @k, $r->{lo} + int(rand($r->{hi} - $r->{lo} + 1)) if $r;
	return @k;
}

# Keys that transactions other than t hold: open, prepared, or written by
# running statements, and the committed keys of the partitions they
# truncated (and one of their bulk keys).
sub other_keys
{
	my ($t) = @_;
	my (%k, @b);
	for my $o (others($t))
	{
		$k{$_} = 1 for grep { $_ < $bulk_base } keys %{ $o->{where} };
		$k{$_} = 1 for map { keys %{ $M{rows}{$_} // {} } } keys %{ $o->{trunc} };
		push @b, @{ $o->{bulks} };
	}
	my @k = sort { $a <=> $b } keys %k;
	my $r = pick(sort { $a->{lo} <=> $b->{lo} } @b);
	push @k, $r->{lo} + int(rand($r->{hi} - $r->{lo} + 1)) if $r;
	return @k;
}

# Keys that the end of transaction o decides: those it wrote, and the
# committed ones of the partitions it truncated, took out or put in.
sub race_keys
{
	my ($o) = @_;
	my @k = grep { $_ < $bulk_base } keys %{ $o->{where} };
	my %slots = map { $_ => 1 } keys %{ $o->{trunc} }, keys %{ $o->{parts} };
	for my $slot (sort { $a <=> $b } keys %slots)
	{
		push @k, keys %{ $M{rows}{$slot} // {} };
		push @k, bulk_sample($slot, 2);
	}
	return sort { $a <=> $b } @k;
}

# Committed keys of the partitions that transactions other than t have
# truncated, taken out or put in (the lookup may wait for their locks).
sub ddl_keys
{
	my ($t) = @_;
	my %slots;
	for my $o (others($t))
	{
		$slots{$_} = 1 for keys %{ $o->{trunc} }, keys %{ $o->{parts} };
	}
	my @k;
	for my $slot (sort { $a <=> $b } keys %slots)
	{
		push @k, sort { $a <=> $b } keys %{ $M{rows}{$slot} // {} };
		push @k, bulk_sample($slot, 1);
	}
	return @k;
}

# A key to look up: one of the preferred (a race's, or of DDL), or live, a bulk key
# (live in the session's view, or any), held by other transactions or by
# the session's own, deleted or rolled back lately, any hot key, or new;
# never one that a statement running in autocommit writes.
sub lookup_key
{
	my ($d, $busy, $pref) = @_;
	my $t = $d->{tx};
	my $k;
	if ($pref && @$pref && rand() < 0.6)
	{
		$k = pick(@$pref);
	}
	else
	{
		my $r = rand();
		if ($r < 0.25) { $k = pick(grep { live_slots(undef, $_) } sort { $a <=> $b } keys %{ $M{where} }); }
		elsif ($r < 0.35) { $k = rand() < 0.6 ? bulk_key($t) : any_bulk_key(); }
		elsif ($r < 0.52) { $k = pick(other_keys($t)); }
		elsif ($r < 0.65) { $k = pick(own_keys($t)); }
		elsif ($r < 0.78) { $k = pick(@{ $M{ghosts} // [] }); }
		elsif ($r < 0.9) { $k = hot_key(); }
	}
	$k = $M{hot} + 1 + int(rand(50)) if !defined $k || $busy->{$k};
	return $k;
}

# One lookup statement: by one key or by several (an array, an IN list),
# also as a prepared statement (a generic plan), from t, from a view of
# it, or from a leaf.
sub lookup_sql
{
	my ($d, $keys, $leaf) = @_;
	my $from = defined $leaf ? "t_$leaf" : $lookup_stmts++ % 3 == 2 ? 'tv' : 't';
	my $prep = !defined $leaf && prep_ok($d) && rand() < 0.25;
	if (@$keys == 1 && rand() < 0.8)
	{
		return $prep ? "SET plan_cache_mode = force_generic_plan; EXECUTE lk1($keys->[0])" : "SELECT k, p FROM $from WHERE k = $keys->[0]";
	}
	my $arr = "'{" . join(',', @$keys) . "}'";
	return "SET plan_cache_mode = force_generic_plan; EXECUTE lkn($arr)" if $prep;
	return "SELECT k, p FROM $from WHERE k IN (" . join(', ', @$keys) . ')' if rand() < 0.3;
	return "SELECT k, p FROM $from WHERE k = ANY ($arr)";
}

# Look keys up: one statement, or a burst of them (a race's, $race: the
# keys its end decides); $pref: keys preferred, else those of DDL.
sub op_lookup
{
	my ($d, $race, $pref) = @_;
	my $t = $d->{tx};
	return if $t && $t->{aborted};
	my $busy = lookup_busy($d) or return;
	my $n = $race ? 1 + int(rand(4)) : 1;
	$pref = $race // $pref // [ ddl_keys($t) ];
	my (@stmts, %keys);
	for (1 .. $n)
	{
		my @k;
		my $nk = rand() < 0.6 ? 1 : 2 + int(rand(5));
		for my $i (1 .. $nk)
		{
			push @k, $i > 1 && rand() < 0.2 ? $k[ int(rand(@k)) ] : lookup_key($d, $busy, $pref);
		}
		my $leaf = rand() < 0.1 ? pick(existing_slots($t)) : undef;
		$keys{$_} = 1 for @k;
		push @stmts, { keys => \@k, leaf => $leaf, sql => lookup_sql($d, \@k, $leaf) };
	}
	return {
		# each statement but the last followed by its SQLSTATE
		sql => join(";\n\\echo \@\@LK :SQLSTATE \@\@\n", map { $_->{sql} } @stmts),
		label => join('; ', map { $_->{sql} } @stmts),
		lookup => {
			stmts => \@stmts,
			keys => [ sort { $a <=> $b } keys %keys ],
			t => $t,
			ddl => scalar(grep { %{ $_->{trunc} } || $_->{ddl} } others($t))
		},
		done => \&lookup_done
	};
}

# A race: a burst of lookups from session d, in autocommit, sent at once
# with another session's end of its transaction (or of a prepared one),
# the keys that end decides preferred.
sub op_lookup_race
{
	my ($d) = @_;
	return if $d->{tx};
	my ($e, $end, @pref);
	my @e = grep { $_ != $d && !$_->{pending} && $_->{tx} } @sess;
	if (@e)
	{
		$e = pick(@e);
		my $o = $e->{tx};
		my $r = rand();
		$end = ($r < 0.2 && op_rollback_to($e))
		  || op_end($e, $o->{aborted} || $r < 0.6 ? 'ROLLBACK' : 'COMMIT');
		@pref = race_keys($o);
	}
	elsif (%prepared)
	{
		$e = pick(grep { $_ != $d && !$_->{pending} && !$_->{tx} } @sess) or return;
		$end = op_finish_prepared($e, rand() < 0.5);
		@pref = map { race_keys($prepared{$_}) } sort keys %prepared;
	}
	return unless $end;
	my $act = op_lookup($d, \@pref) or return;
	$act->{race} = [ $e, $end ];
	$act->{raced} = 1;
	return $act;
}

# The end of a lookup action: each statement's answer judged.
sub lookup_done
{
	my ($d, $st, $act) = @_;
	my $l = $act->{lookup};
	$l->{to} = ver_keep();
	my @stmts = @{ $l->{stmts} };
	my @res;
	my $rest = $act->{out} eq '' ? '' : "$act->{out}\n";
	for my $n (0 .. $#stmts - 1)
	{
		$rest =~ s/^(.*?)\@\@LK (\S+) \@\@\n//s
		  or fail_now("$d->{s}{name}: the answers of $act->{label} cannot be read:\n$act->{out}");
		push @res, [ $2, $1 ];
	}
	push @res, [ $st, $rest ];
	my $failed = 0;
	for my $n (0 .. $#stmts)
	{
		lookup_judge($d, $act, $stmts[$n], @{ $res[$n] });
		$failed ||= $res[$n][0] ne '00000';
	}
	delete $M{watch}{ $l->{id} };
	my $t = $l->{t};
	$M{lk}{actions}++;
	$M{lk}{raced}++ if $act->{raced};
	$M{lk}{ddl}++ if $l->{ddl};
	$M{lk}{waited}++ if $act->{waited};
	$M{lk}{versions}++ if $l->{to} > $l->{from};
	$M{lk}{ $t->{rr} ? 'rr' : 'rc' }++ if $t;
	stmt_failed($d) if $failed && $t;
}

# Judge one lookup statement s of action a: SQLSTATE st, rows text.
sub lookup_judge
{
	my ($d, $act, $s, $st, $text) = @_;
	my $l = $act->{lookup};
	my $t = $l->{t};
	my $what = "$d->{s}{name}: $s->{sql}" . ($act->{raced} ? ' (raced)' : '');
	fail_now("$what: $st: $d->{s}{lasterr}") if $st =~ /^XX/ || $st eq 'dead';
	my %asked = map { $_ => 1 } @{ $s->{keys} };
	my (%got, @bad);
	for my $line (split /\n/, $text)
	{
		next if $line eq '';
		my ($k, $p) = split /\|/, $line;
		push @bad, "a row of key $k, which it did not ask for ($line)" unless $asked{$k};
		push @bad, "row $line twice" if $got{$k}{ int($p / 10) }++;
	}
	fail_now("$what: " . join('; ', @bad)) if @bad;
	my @keys = sort { $a <=> $b } keys %asked;
	my $to = $l->{to};
	# the snapshot's version: a REPEATABLE READ transaction's is one that
	# its lookups so far allow
	my @I = $t && $t->{rr_vers} ? @{ $t->{rr_vers} } : ($l->{from} .. $to);
	my (%ok_i, $exact, $may40001, $may42P01, @seen);
	for my $i (@I)
	{
		my $ci = $M{vers}{$i} or fail_now("model: version $i is gone ($what)");
		# partitions truncated after the snapshot: all of them, and those
		# whose TRUNCATE committed while the lookup ran (it may have waited
		# for their locks, and then read them empty)
		my (%rw, %rw_wait);
		for my $n ($i + 1 .. $to)
		{
			for my $slot (keys %{ $M{vers}{$n}{rewrote} })
			{
				$rw{$slot} = 1;
				$rw_wait{$slot} = 1 if $n > $l->{from} || defined $s->{leaf};
			}
		}
		$rw_wait{ $l->{flap} } = 1 if defined $l->{flap} && !defined $s->{leaf};
		for my $j (max($i, $l->{from}) .. $to)
		{
			my $cj = $M{vers}{$j};
			$may42P01 = 1 if defined $s->{leaf} && !lookup_part($cj, $t, $s->{leaf})->{exists};
			my ($ok, $miss) = (1, 0);
			my @want;
			for my $k (@keys)
			{
				my @e = sort { $a <=> $b } lookup_rows($ci, $cj, $t, $k, $s->{leaf});
				my %e = map { $_ => 1 } @e;
				my $g = $got{$k} // {};
				$ok = 0 if grep { !$e{$_} } keys %$g;
				$ok = 0 if grep { !$g->{$_} && !$rw_wait{$_} } @e;
				$miss = 1 if grep { !$g->{$_} } @e;
				# found nowhere, where a partition it reads was truncated
				# after the snapshot: a serialization failure
				$may40001 = 1
				  if !defined $s->{leaf} && !grep({ !$rw{$_} } @e)
				  && grep { lookup_part($cj, $t, $_)->{attached} } keys %rw;
				push @want, "$k:" . (@e ? join(',', map { $rw_wait{$_} ? "$_?" : $_ } @e) : '-');
			}
			$ok_i{$i} = 1 if $ok;
			$exact = 1 if $ok && !$miss;
			push @seen, "i=$i j=$j: " . join(' ', @want)
			  . (%rw ? ' (truncated since i: ' . join(',', sort { $a <=> $b } keys %rw) . ')' : '');
		}
	}
	my $found = join(' ', map { "$_:" . (%{ $got{$_} // {} } ? join(',', sort { $a <=> $b } keys %{ $got{$_} }) : '-') } @keys);
	my %legal = (
		'00000' => scalar(%ok_i),
		'40001' => $may40001,
		'40P01' => $act->{waited} || $act->{raced},
		'42P01' => $may42P01);
	splice(@seen, 6, @seen - 12, '...') if @seen > 12;
	fail_now("$what: " . ($st eq '00000' ? "found $found" : "$st")
		  . " (key:slots), where the model, with versions $l->{from} to $to, allows"
		  . ' (i: the snapshot\'s version, j: the partitions\', ? marks a row that may be missing):'
		  . "\n  " . join("\n  ", @seen)
		  . ($st ne '00000' ? "\n$d->{s}{lasterr}" : ''))
	  unless $legal{$st};
	$t->{rr_vers} = [ sort { $a <=> $b } keys %ok_i ] if $t && $t->{rr} && $st eq '00000';
	trace("$d->{s}{name}: found $found") if $st eq '00000';
	$M{lk}{stmts}++;
	$M{lk}{keys} += @keys;
	$M{lk}{rows} += scalar(map { keys %$_ } values %got);
	$M{lk}{ defined $l->{flap} ? 'flap_missing' : 'missing' }++ if $st eq '00000' && !$exact;
	$M{lk}{leaf}++ if defined $s->{leaf};
	$M{lk}{view}++ if $s->{sql} =~ /\bFROM tv\b/;
	$M{lk}{prep}++ if $s->{sql} =~ /EXECUTE lk/;
	$M{lk}{err}{$st}++ if $st ne '00000';
	note("step $stepno: $what: $st, allowed: " . short_err($d->{s}{lasterr})) if $st eq '40001';
}

# Prepared lookups (generic plans) in every driver session that has none,
# and prepared UPDATE and DELETE by the key (md_*, see modify_sql).
#
# After ALTER COLUMN TYPE they are prepared again, for the key's new type
# (idle sessions, at each step): a parameter of another type would not be
# a lookup's (an array of int4 against a bigint key is PostgreSQL's plan,
# whose rules differ: TRUNCATE), and until then they are not used
# (prep_ok).  A cached plan must not change its result type: with ALTER
# COLUMN TYPE about, the key is returned as numeric, whatever its type.
# Not in a REPEATABLE READ transaction that has not looked up yet: PREPARE
# would take its snapshot, which the model takes at its first lookup (a
# TRUNCATE committed in between then fails that lookup to serialize,
# 40001, where the model allows none: seed 4 on PostgreSQL 18).
sub sess_prepare
{
	return unless $lookups;
	my $k = $more ? 'k::numeric AS k' : 'k';
	for my $d (@sess)
	{
		my $ty = t_type($d->{tx});
		next if ($d->{prep} && $d->{prep_type} eq $ty) || $d->{pending} || ($d->{tx} && $d->{tx}{aborted});
		next if $d->{tx} && $d->{tx}{rr} && !$d->{tx}{rr_vers};
		sess_send($d->{s}, ($d->{prep} ? 'DEALLOCATE ALL; ' : 'SET plan_cache_mode = force_generic_plan; ')
			  . "PREPARE lk1($ty) AS SELECT $k, p FROM t WHERE k = \$1; "
			  . "PREPARE lkn($ty\[]) AS SELECT $k, p FROM t WHERE k = ANY (\$1); "
			  . "PREPARE md_key($ty, $ty) AS UPDATE t SET k = \$2 WHERE k = \$1 RETURNING $k; "
			  . "PREPARE md_keep($ty) AS UPDATE t SET v = v + 1 WHERE k = \$1 RETURNING $k; "
			  . "PREPARE md_move($ty, int) AS UPDATE t SET p = \$2 WHERE k = \$1 RETURNING $k; "
			  . "PREPARE md_del($ty) AS DELETE FROM t WHERE k = \$1 RETURNING $k");
		my ($st) = sess_wait($d->{s});
		fail_now("$d->{s}{name}: preparing lookups: $st $d->{s}{lasterr}") unless $st eq '00000';
		$d->{prep} = 1;
		$d->{prep_type} = $ty;
	}
}

# May session d's lookups use its prepared statements: of the key's type,
# which no other transaction is changing?
sub prep_ok
{
	my ($d) = @_;
	return $d->{prep} && $d->{prep_type} eq t_type($d->{tx})
	  && !grep({ $_->{ktype} } others($d->{tx}))
	  && !grep { $_ != $d && $_->{pending} && $_->{pending}{alter} } @sess;
}


#
# Steps.
#
our $last_op;    # the operation of the last step (for GUNIQUE_STATEFUL_TIMES)

# One step: a session that runs no statement is picked, and runs one of
# ops ([weight, name, operation]), picked by its weight and what
# boost($d) adds to it (a list of name => weight): the operation makes an
# action for the session, or undef if it does not apply now (then another
# is picked, up to 20 times); an action with play (a scene, say) is
# played by it.  In a transaction that is aborted, only ROLLBACK [TO] is
# possible.
sub step
{
	my ($ops, $boost) = @_;
	$last_op = 'none';
	sess_prepare() if $more;
	my @free = grep { !$_->{pending} } @sess;
	return unless @free;
	my $d = pick(@free);
	if ($d->{tx} && $d->{tx}{aborted})
	{
		my $a = (rand() < 0.5 && op_rollback_to($d)) || op_end($d, 'ROLLBACK');
		run_action($d, $a);
		return;
	}
	# A REPEATABLE READ transaction only looks up, and ends.
	if ($d->{tx} && $d->{tx}{rr})
	{
		my $a = (rand() < 0.7 && op_lookup($d)) || op_end($d, rand() < 0.6 ? 'COMMIT' : 'ROLLBACK');
		run_action($d, $a);
		return;
	}
	my %boost = $boost->($d);
	my $total = 0;
	$total += $_->[0] + ($boost{ $_->[1] } // 0) for @$ops;
	for my $try (1 .. 20)
	{
		my $r = rand($total);
		my $op;
		for (@$ops)
		{
			$op = $_;
			last if ($r -= $_->[0] + ($boost{ $_->[1] } // 0)) < 0;
		}
		$last_op = $op->[1];
		my $a = $op->[2]->($d) or next;
		next if lookup_interferes($d, $a);
		if ($a->{play})
		{
			$a->{play}->($d);
			return;
		}
		if ($a->{race})
		{
			# the lookups, and at once the other session's end
			my ($e, $end) = @{ $a->{race} };
			run_action($d, $a, 1);
			run_action($e, $end);
			settle($d, 1) if $d->{pending};
			return;
		}
		run_action($d, $a);
		return;
	}
}

# The sessions, connected (again, after a crash or a restart).
sub connect_all
{
	for my $d (@sess)
	{
		sess_close($d->{s}) if $d->{s};
	}
	sess_close($ctl) if $ctl;
	$ctl = sess_new('ctl');
	@sess = map { { s => sess_new("s$_") } } (1 .. $nsess);
}

#
# The pgbench load: keys from a sequence, never taken before, so any error
# but "no partition for the row" is wrong.
#

sub load_start
{
	my $maxp = $M{nslots} * 10 - 1;
	PostgreSQL::Test::Utils::append_to_file("$tmp/load$M{round}.sql",
		"\\set p random(0, $maxp)\nSELECT load_insert(:p);\n"
		  . ($more ? "\\set d random(0, 40)\nSELECT load_touch(:d);\n" : ''))
	  unless -e "$tmp/load$M{round}.sql";
	$M{touched_before} = ctl_query('SELECT last_value FROM load_touches') if $more;
	my ($out, $err) = ('', '');
	$M{load} = {
		out => \$out,
		err => \$err,
		steps => 5 + int(rand(20)),
		h => IPC::Run::start(
			[
				'pgbench', '--no-vacuum', '--client', 2, '--jobs', 2,
				'--time', 3600, '--file', "$tmp/load$M{round}.sql",
				'-h', $node->host, '-p', $node->port, 'postgres'
			],
			'<', \undef, '>', \$out, '2>', \$err)
	};
	trace("load: pgbench starts for $M{load}{steps} steps");
	$M{loads}++;
}

sub load_tick
{
	my $l = $M{load} or return;
	fail_now("pgbench stopped: ${ $l->{err} }") unless $l->{h}->pumpable;
	return if --$l->{steps} > 0;
	load_stop();
}

sub load_stop
{
	my $l = delete $M{load} or return;
	fail_now("pgbench stopped: ${ $l->{err} }") unless $l->{h}->pumpable;
	$l->{h}->signal('TERM');
	eval { $l->{h}->finish };
	fail_now("pgbench: ${ $l->{err} }") if ${ $l->{err} } =~ /abort|server closed/;
	# A deadlock is legal: an insert locks every leaf its probe may read,
	# so a session that holds one leaf's AccessExclusiveLock (TRUNCATE,
	# DROP) and then locks the parent (CREATE TABLE ... PARTITION OF) can
	# deadlock with an insert routed to another partition.
	# Its lookups and UPDATEs by the key (with GUNIQUE_STATEFUL_MORE) may
	# deadlock too, or fail to serialize (a partition truncated after the
	# snapshot, src/README "Lookups"); nothing else.
	my $bad = ctl_query(
		"SELECT string_agg(state || ' ' || msg, E'\\n') FROM load_out WHERE state NOT IN ('23514', '40P01', 'touch 40P01', 'touch 40001')");
	$M{touches} += ctl_query('SELECT last_value FROM load_touches') - $M{touched_before} if $more;
	$M{touch_err}{$_->[0]} += $_->[1] for map { [ split /\|/ ] } split /\n/,
	  ctl_query("SELECT state, count(*) FROM load_out WHERE state LIKE 'touch %' GROUP BY 1");
	fail_now("the pgbench load hit errors:\n$bad") if $bad ne '';
	my $dl = ctl_query("SELECT count(*) FROM load_out WHERE state = '40P01'");
	trace("load: $dl deadlocks") if $dl;
	ctl_query('TRUNCATE load_out');
	trace('load: pgbench stopped');
}

# Every session's transaction ended (for the checks), and every prepared
# one finished.
sub quiesce
{
	while (1)
	{
		settle_all(1);
		my @open = grep { $_->{tx} && !$_->{pending} } @sess;
		if (@open)
		{
			my $d = $open[0];
			my $how = $d->{tx}{aborted} || rand() < 0.5 ? 'ROLLBACK' : 'COMMIT';
			run_action($d, op_end($d, $how));
			next;
		}
		if (%prepared)
		{
			my $gid = (sort keys %prepared)[0];
			my $commit = rand() < 0.5;
			trace('ctl: ' . ($commit ? 'COMMIT' : 'ROLLBACK') . " PREPARED '$gid'");
			ctl_query(($commit ? 'COMMIT' : 'ROLLBACK') . " PREPARED '$gid'");
			my $t = delete $prepared{$gid};
			commit_txn($t) if $commit;
			ghosts(keys %{ $t->{where} }) unless $commit;
			next;
		}
		last unless grep { $_->{pending} } @sess;
		wait_any();
	}
}

1;

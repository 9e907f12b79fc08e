# Copyright (c) gunique contributors
#
# The model of t/006_stateful.pl: what table t must hold.  It knows the
# committed rows of every partition (in versions, for lookups), what each
# open or prepared transaction and each savepoint has done, and predicts
# what a statement may do: judge (row changes), attach_verdict,
# upsert_verdict, lookup_rows.  Its state is %M (one round's: partitions,
# rows, bulks, versions, counts), @sess (the driver's sessions, each with
# its transaction and its statement running) and %prepared; it reads and
# writes nothing else: the driver runs the statements, and judges each
# end with it.  t/006's header states the rules.
package GuniqueStatefulModel;

use strict;
use warnings;
use Exporter 'import';
use Storable qw(dclone);
use List::Util qw(min max);

our @EXPORT = qw(
  %M @sess %prepared $bulk_base $load_base
  new_txn state_of copy_state set_state view_part t_type slot_type
  key_slots live_slots txn_set_row others uncertain other_ddl judge
  apply_ops commit_txn stmt_failed
  ver_copy ver_keep ver_commit ghosts
  slot_bounds rand_p pick hot_key attached_slots existing_slots
  live_keys_untouched drop_rows attach_verdict attach_about is_ukey
  upsert_verdict
  bulk_key any_bulk_key bulk_totals bulk_count bulk_sample
  lookup_part lookup_rows
  gidx_state gidx_guard dup_keys slot_taken);

our $bulk_base = 100_000;       # keys of bulk inserts start here
our $load_base = 1_000_000_000;    # keys of the pgbench load start here

our %M;         # one round's state, reset by t/006's new_round()
our @sess;      # driver sessions: {s => psql session, tx => txn or undef,
			   #   pending => statement waiting or undef}
our %prepared;  # gid => txn

#
# Transactions: each sees the committed state (%M) with its own changes
# over it, and each savepoint keeps a copy of those.
#
sub new_txn
{
	return {
		parts => {},    # slot => {exists, attached}
		rows => {},     # slot => {k => 1 inserted, 0 deleted}
		where => {},    # k => {slot => 1}: slots in rows
		trunc => {},    # slot => 1: committed rows gone
		rewrote => {},  # slot => 1: truncated (its storage replaced)
		ddl => 0,       # membership DDL done
		bulks => [],    # bulk records inserted
		bulkdel => {},  # slot => {lo => 1}: the committed bulk records
						#   (by their first key) whose keys it deleted
		ktypes => {},   # slot => the type of its key column, as t changed it
		ktype => undef, # t's key column type, if t changed it
		saves => [],    # [name, copy of the state]
		aborted => 0,
		nsave => 0,
	};
}

sub state_of { my ($t) = @_; return { map { $_ => $t->{$_} } qw(parts rows where trunc rewrote ddl bulks bulkdel ktypes ktype) }; }

sub copy_state { my ($t) = @_; return dclone(state_of($t)); }

sub set_state
{
	my ($t, $c) = @_;
	$t->{$_} = $c->{$_} for keys %$c;
}

sub view_part
{
	my ($t, $slot) = @_;
	return $t->{parts}{$slot} if $t && exists $t->{parts}{$slot};
	return $M{parts}{$slot} // { exists => 0, attached => 0 };
}

# The type of the key column of t, and of the table of slot, in t's view
# (ALTER COLUMN TYPE changes those of t and of its attached partitions).
sub t_type { my ($t) = @_; return ($t && $t->{ktype}) // $M{ktype} // 'int'; }

sub slot_type
{
	my ($t, $slot) = @_;
	return $t->{ktypes}{$slot} if $t && exists $t->{ktypes}{$slot};
	return $M{ktypes}{$slot} // 'int';
}

# Slots whose table holds k, in t's view (t undef: committed).
sub key_slots
{
	my ($t, $k) = @_;
	my %c;
	$c{$_} = 1 for keys %{ $M{where}{$k} // {} };
	$c{$_} = 1 for ($t ? keys %{ $t->{where}{$k} // {} } : ());
	my @r;
	for my $slot (sort { $a <=> $b } keys %c)
	{
		my $present;
		if ($t && exists $t->{rows}{$slot} && exists $t->{rows}{$slot}{$k})
		{
			$present = $t->{rows}{$slot}{$k};
		}
		else
		{
			$present = $M{rows}{$slot}{$k} && !($t && $t->{trunc}{$slot});
		}
		push @r, $slot if $present;
	}
	return @r;
}

sub live_slots
{
	my ($t, $k) = @_;
	return grep { view_part($t, $_)->{attached} } key_slots($t, $k);
}

sub txn_set_row
{
	my ($t, $slot, $k, $v) = @_;
	$t->{rows}{$slot}{$k} = $v;
	$t->{where}{$k}{$slot} = 1;
}

# Transactions other than t whose work may decide what t's statements do:
# open ones (not aborted to the bottom), prepared ones, and waiting
# statements of other sessions.
sub others
{
	my ($t) = @_;
	my @o;
	for my $d (@sess)
	{
		next if $d->{tx} && $t && $d->{tx} == $t;
		push @o, $d->{tx} if $d->{tx} && !$d->{tx}{dead};
		push @o, $d->{pending}{touch} if $d->{pending};
	}
	push @o, values %prepared;
	return @o;
}

# May another transaction's work change whether k can go in?  With
# $noups, leaving out running upserts (they only add rows: whether a key
# that is in can be taken away).
sub uncertain
{
	my ($t, $k, $noups) = @_;
	for my $o (others($t))
	{
		next if $noups && $o->{upsert};
		return 1 if $o->{ddl} || $o->{where}{$k};
		for my $slot (keys %{ $o->{trunc} })
		{
			return 1 if $M{rows}{$slot}{$k};
		}
	}
	return 0;
}

sub other_ddl
{
	my ($t) = @_;
	return scalar grep { $_->{ddl} || %{ $_->{trunc} } || $_->{rebuild} } others($t);
}

# Judge a list of row changes ([ins|del, slot, k]) made by one statement in
# t (sent when t_k's state was generation $since): 'ok' (must succeed),
# 'fail' (must hit a unique violation), 'failroute' (the same, or a row's
# partition hidden by another session's DDL first), 'noroute' (a row has no
# partition), 'dup' (a row's key is held elsewhere and, t_k not being
# valid, it may go in or fail with a unique violation: dup_verdict) or
# 'maybe'.
sub judge
{
	my ($t, $ops, $since) = @_;
	my $scratch = dclone(state_of($t));
	my $verdict = 'ok';
	for my $op (@$ops)
	{
		my ($kind, $slot, $k) = @$op;
		if ($kind eq 'del')
		{
			txn_set_row($scratch, $slot, $k, 0);
			next;
		}
		my $unc = uncertain($t, $k);
		return $unc ? 'maybe' : 'noroute' unless view_part($scratch, $slot)->{attached};
		$verdict = 'maybe' if $unc;
		my @live = live_slots($scratch, $k);
		if (@live)
		{
			# in the statement's own transaction, or committed and left alone
			my $own = grep { exists $scratch->{where}{$k}{$_} } @live;
			# (an upsert of the key running in another session can
			# only skip it: the row stays)
			return 'maybe' unless $own || !uncertain($t, $k, 1);
			# without a valid gunique index, as the index is (dup_verdict)
			my $g = dup_verdict($since);
			# a DETACH CONCURRENTLY that waits has already hidden its
			# partition from routing: a row may fail to route first
			return other_ddl($t) ? 'failroute' : 'fail' if $g eq 'fail';
			$verdict = 'dup' if $g eq 'dup' && $verdict eq 'ok';
		}
		txn_set_row($scratch, $slot, $k, 1);
	}
	return $verdict;
}

#
# The gunique index t_k, dropped and made again by CREATE INDEX
# CONCURRENTLY, and finished by REINDEX INDEX CONCURRENTLY (t/006's
# concurrent builds): $M{gidx} is 'valid', 'none' (dropped) or 'invalid'
# (a build failed; $M{gfail} 'merge' if it failed in the merge, every leaf
# then built and ready); while a build runs ($M{gbuild}, its action),
# 'building'.  $M{ggen} counts the changes of state (a statement records
# the one it was sent in).
#
sub gidx_state { return $M{gbuild} ? 'building' : $M{gidx} // 'valid'; }

# May a statement leave a key twice in one partition (no gunique index
# checks the partition, now or once a pending DROP INDEX is through)?  The
# model keeps one row of a key per partition: such statements are not made.
sub gidx_guard
{
	return 1 if gidx_state() ne 'valid';
	return scalar grep { $_->{pending} && $_->{pending}{gdrop} } @sess;
}

# Is an insert of a key that another attached partition holds (live, and
# left alone), by a statement sent in generation $since, refused?  'fail'
# (must be: a unique violation), 'ok' (goes in) or 'dup' (either):
#   - valid: refused, as always;
#   - none: nothing checks it;
#   - building: the leaves become ready one by one, and an insert probes
#     the ready ones (src/README, 4.11): either;
#   - invalid after a failed merge: every leaf is ready and each
#     transaction's probe searches them all (a transaction that held a
#     partition before the last leaf was ready was waited for before the
#     merge): refused; after another failure, some leaves may be missing
#     or not ready, and a transaction older than the failure may not know
#     those that are: either;
#   - a statement sent in another state: either (its insert ran in that
#     state or in this one, or between: when the state changed, the model
#     cannot tell; the checks see what it left).
sub dup_verdict
{
	my ($since) = @_;
	return 'dup' if defined $since && $since != ($M{ggen} // 0);
	my $g = gidx_state();
	return 'fail' if $g eq 'valid';
	return 'ok' if $g eq 'none';
	return 'fail' if $g eq 'invalid' && ($M{gfail} // '') eq 'merge';
	return 'dup';
}

# Keys live in two attached partitions or more, in t's view (t undef:
# committed).
sub dup_keys
{
	my ($t) = @_;
	my %k = map { $_ => 1 } keys %{ $M{where} }, ($t ? keys %{ $t->{where} } : ());
	return grep { $_ < $bulk_base && live_slots($t, $_) > 1 } sort { $a <=> $b } keys %k;
}

# Does slot's partition hold k, or may it come to (a row of it committed,
# or one that t, another transaction or a running statement inserted or
# deleted there)?  (gidx_guard)
sub slot_taken
{
	my ($t, $k, $slot) = @_;
	return 1 if ($M{rows}{$slot} && $M{rows}{$slot}{$k}) || ($M{where}{$k} && $M{where}{$k}{$slot});
	for my $o (($t ? $t : ()), others($t))
	{
		return 1 if $o->{where}{$k} && $o->{where}{$k}{$slot};
	}
	return 0;
}

sub apply_ops
{
	my ($t, $ops) = @_;
	txn_set_row($t, $_->[1], $_->[2], $_->[0] eq 'ins' ? 1 : 0) for @$ops;
}

# Make a transaction's state the committed one.
sub commit_txn
{
	my ($t) = @_;
	my %gone;
	for my $slot (keys %{ $t->{trunc} })
	{
		$gone{$_} = 1 for keys %{ $M{rows}{$slot} // {} };
		delete $M{where}{$_}{$slot} for keys %{ $M{rows}{$slot} // {} };
		$M{rows}{$slot} = {};
	}
	for my $slot (keys %{ $t->{trunc} })
	{
		$_->{gone}{$slot} = 1 for @{ $M{bulks} };
	}
	# a DELETE leaves the bulks committed after its snapshot alone
	while (my ($slot, $seen) = each %{ $t->{bulkdel} })
	{
		$_->{gone}{$slot} = 1 for grep { $seen->{ $_->{lo} } } @{ $M{bulks} };
	}
	push @{ $M{bulks} }, @{ $t->{bulks} };
	$M{parts}{$_} = $t->{parts}{$_} for keys %{ $t->{parts} };
	$M{ktypes}{$_} = $t->{ktypes}{$_} for keys %{ $t->{ktypes} // {} };
	$M{ktype} = $t->{ktype} if $t->{ktype};
	for my $slot (keys %{ $t->{rows} })
	{
		while (my ($k, $v) = each %{ $t->{rows}{$slot} })
		{
			if ($v)
			{
				$M{rows}{$slot}{$k} = 1;
				$M{where}{$k}{$slot} = 1;
			}
			else
			{
				delete $M{rows}{$slot}{$k};
				delete $M{where}{$k}{$slot};
				delete $M{where}{$k} unless %{ $M{where}{$k} };
				$gone{$k} = 1;
			}
		}
	}
	ghosts(keys %gone);
	ver_commit($t);
	# while a build runs, the keys it may find twice
	if ($M{gbuild})
	{
		$M{gwatch}{$_} = 1 for dup_keys(undef);
	}
}

# A statement failed: the transaction (or its innermost savepoint) aborts.
sub stmt_failed
{
	my ($d) = @_;
	my $t = $d->{tx} or return;
	ghosts(keys %{ $t->{where} });
	if (@{ $t->{saves} })
	{
		set_state($t, dclone($t->{saves}[-1][1]));
	}
	else
	{
		set_state($t, state_of(new_txn()));
		$t->{dead} = 1;
	}
	$t->{aborted} = 1;
}

#
# Versions of the committed state, for lookups: every change of it (the
# commits above, and a bulk committed alone) makes one.  While a running
# lookup, or a REPEATABLE READ transaction's snapshot, may need them, each
# version keeps a copy of the state and the slots whose storage its commit
# replaced (TRUNCATE).
#
sub ver_needed
{
	my @n = map { $_->{from} } values %{ $M{watch} // {} };
	for my $d (@sess)
	{
		push @n, $d->{tx}{rr_vers}[0] if $d->{tx} && $d->{tx}{rr_vers};
	}
	return @n ? min(@n) : undef;
}

sub ver_copy
{
	my ($rewrote) = @_;
	my $c = dclone({ map { $_ => $M{$_} } qw(rows where parts bulks) });
	$c->{rewrote} = { %{ $rewrote // {} } };
	return $c;
}

# The current version, kept.
sub ver_keep
{
	$M{ver} //= 0;
	$M{vers}{ $M{ver} } //= ver_copy();
	return $M{ver};
}

sub ver_commit
{
	my ($t) = @_;
	$M{ver}++;
	my $need = ver_needed();
	if (!defined $need)
	{
		$M{vers} = {};
		return;
	}
	$M{vers}{ $M{ver} } = ver_copy($t->{rewrote});
	delete $M{vers}{$_} for grep { $_ < $need } keys %{ $M{vers} };
}

# Keys deleted or rolled back lately, for lookups (never for the
# steps when GUNIQUE_STATEFUL_LOOKUPS=0: no randomness here).
sub ghosts
{
	my $g = $M{ghosts} //= [];
	push @$g, sort { $a <=> $b } grep { $_ < $bulk_base } @_;
	splice(@$g, 0, @$g - 40) if @$g > 40;
}

#
# Slots and keys.  The table of slot n is t_n, for p from 10 * n to
# 10 * n + 9; hot keys (1 to $M{hot}) are written row by row, bulk keys
# (from $bulk_base) many at once, the load's from $load_base.
#
sub slot_bounds { my ($slot) = @_; return ($slot * 10, $slot * 10 + 10); }
sub rand_p { my ($slot) = @_; return $slot * 10 + int(rand(10)); }
sub pick { my @a = @_; return @a ? $a[ int(rand(@a)) ] : undef; }

sub attached_slots
{
	my ($t) = @_;
	return grep { view_part($t, $_)->{attached} } (0 .. $M{nslots} - 1);
}

sub existing_slots
{
	my ($t) = @_;
	return grep { view_part($t, $_)->{exists} } (0 .. $M{nslots} - 1);
}

sub hot_key { return 1 + int(rand($M{hot})); }

sub live_keys_untouched
{
	my ($t) = @_;
	my @k;
	for my $k (1 .. $M{hot})
	{
		next if uncertain($t, $k);
		my @l = live_slots($t, $k);
		push @k, [ $k, $l[0] ] if @l == 1;
	}
	return @k;
}

# The rows of slot's table gone from t's view (DROP, TRUNCATE, a new
# table).
sub drop_rows
{
	my ($t, $slot) = @_;
	for my $k (keys %{ $t->{rows}{$slot} // {} })
	{
		delete $t->{where}{$k}{$slot};
		delete $t->{where}{$k} unless %{ $t->{where}{$k} };
	}
	$t->{rows}{$slot} = {};
	$t->{trunc}{$slot} = 1;
	$_->{gone}{$slot} = 1 for @{ $t->{bulks} };
}

#
# What a statement may do (besides judge, above).
#
# Will ATTACH of the table of slot find one of its keys elsewhere?
sub attach_verdict
{
	my ($t, $slot) = @_;
	my %mine;
	$mine{$_} = 1 for keys %{ $M{rows}{$slot} // {} };
	$mine{$_} = 1 for ($t ? keys %{ $t->{rows}{$slot} // {} } : ());
	my $v = 'ok';
	for my $k (keys %mine)
	{
		next unless grep { $_ == $slot } key_slots($t, $k);
		my $unc = uncertain($t, $k);
		return 'fail' if !$unc && live_slots($t, $k);
		$v = 'maybe' if $unc;
	}
	return $v;
}

# Is another transaction attaching a partition that may hold rows (not
# one it made), or about to?
sub attach_about
{
	my ($t) = @_;
	for my $o (others($t))
	{
		return 1 if $o->{attach};
		for my $slot (keys %{ $o->{parts} })
		{
			return 1 if $o->{parts}{$slot}{attached} && !$o->{trunc}{$slot}
			  && !view_part(undef, $slot)->{attached};
		}
	}
	return 0;
}

# What must have become of an upsert's row of key k (the statement ended
# without error), in the scratch state of its transaction (its earlier
# rows applied): 'in', 'skip', 'learn' (work the model cannot order
# decided it: RETURNING tells), or 'wait' (another transaction holds the
# key: the statement cannot have ended).  With 'learn' because of one
# plain statement in autocommit, that statement's session too.
sub upsert_verdict
{
	my ($d, $scratch, $k, $ddl) = @_;
	my $t = $d->{tx};
	# only bulk keys live in the transaction's view are chosen, with no
	# other transaction about
	return 'skip' if $k >= $bulk_base;
	my @live = live_slots($scratch, $k);
	return 'skip' if grep { exists $scratch->{where}{$k}{$_} } @live;
	return 'learn (DDL)' if $ddl;
	my @holders = map { [ $_->{s}{name}, $_->{tx}, $_->{pending} ] }
	  grep { $_ != $d && $_->{tx} && !$_->{tx}{dead} } @sess;
	push @holders, map { [ "prepared $_", $prepared{$_}, undef ] } sort keys %prepared;
	for my $h (@holders)
	{
		my ($name, $o, $p) = @$h;
		# a row it inserted, or a committed row it deletes (not one it
		# inserted and deleted: a dirty snapshot need not wait for that)
		my $holds = grep { $o->{rows}{$_}{$k} || $M{rows}{$_}{$k} } keys %{ $o->{where}{$k} // {} };
		next unless $holds;
		# a statement of its that has not been seen to end may have
		# ended its transaction (an error, a deadlock victim)
		return "learn ($name runs)" if $p;
		return "wait for $name";
	}
	# Statements of other sessions running in autocommit that write k:
	# an upsert may have inserted it and committed, a plain statement
	# inserted or deleted it and committed (or failed).  One in a
	# transaction block cannot have decided the row: had it written the
	# key first, we would wait for its transaction (an upsert's, or a
	# plain statement's whose statement then failed, taking its change
	# back, or that cannot have ended yet); as if it had not run.
	my @race = grep { $_ != $d && $_->{pending} && !$_->{tx} && $_->{pending}{touch}{where}{$k} } @sess;
	my @plain = grep { !$_->{pending}{upsert} } @race;
	my %w;    # plain statement's session => {ins => 1, del => 1}: what it does to k
	for my $o (@plain)
	{
		$w{ $o->{s}{name} }{ $_->[0] } = 1 for grep { $_->[2] == $k } @{ $o->{pending}{ops} };
	}
	# a row found stays, unless a plain statement deletes it (an insert
	# or an upsert of the key beside it fails or skips)
	return 'skip' if @live && !grep { $_->{del} } values %w;
	return 'in' unless @race;
	if (@race == 1 && @plain == 1)
	{
		my $w = $w{ $plain[0]{s}{name} };
		# a move, or an UPDATE keeping the key: a row of k is there before
		# and after
		return 'skip' if $w->{del} && $w->{ins};
		return ("learn ($plain[0]{s}{name} " . ($w->{del} ? 'deletes' : 'inserts') . ')', $plain[0]);
	}
	return "learn ($race[0]{s}{name} upserts)" unless @plain;
	return 'learn (' . join(',', map { $_->{s}{name} } @race) . ' write)';
}

# Is k a key of the collide scenes' own range (t/006, collide_scene)?
sub is_ukey { my ($k) = @_; return $M{uidx} && $k >= $M{ulo} && $k <= $M{uhi}; }


#
# Bulks: each bulk insert one record (see the driver's op_bulk).
#
# A committed bulk key live in t's view (its partition attached, neither
# truncated, dropped nor its bulk deleted in t), or undef.
sub bulk_key
{
	my ($t) = @_;
	my $slot = pick(grep { !($t && $t->{trunc}{$_}) } attached_slots($t));
	return unless defined $slot;
	my $del = $t ? $t->{bulkdel}{$slot} // {} : {};
	my @r = grep { !$_->{gone}{$slot} && !$del->{ $_->{lo} } && grep { $_ == $slot } @{ $_->{slots} } } @{ $M{bulks} };
	my $r = pick(@r) or return;
	my $n = @{ $r->{slots} };
	my ($i) = grep { $r->{slots}[$_] == $slot } 0 .. $n - 1;
	my $first = $r->{lo} + (($i - $r->{lo} % $n) % $n);
	return if $first > $r->{hi};
	return $first + $n * int(rand(int(($r->{hi} - $first) / $n) + 1));
}

sub any_bulk_key
{
	my $r = pick(@{ $M{bulks} }) or return;
	return $r->{lo} + int(rand($r->{hi} - $r->{lo} + 1));
}

# Committed bulk keys per slot: {slot => [count, sum]}.
sub bulk_totals
{
	my %tot;
	for my $r (@{ $M{bulks} })
	{
		my $n = @{ $r->{slots} };
		for my $i (0 .. $n - 1)
		{
			my $slot = $r->{slots}[$i];
			next if $r->{gone}{$slot};
			# g in [lo, hi] with g % n == i
			my $first = $r->{lo} + (($i - $r->{lo} % $n) % $n);
			next if $first > $r->{hi};
			my $cnt = int(($r->{hi} - $first) / $n) + 1;
			$tot{$slot}[0] += $cnt;
			$tot{$slot}[1] += $cnt * $first + $n * $cnt * ($cnt - 1) / 2;
		}
	}
	return \%tot;
}

# Committed bulk keys, in all.
sub bulk_count
{
	return List::Util::sum(0, map { $_->[0] } values %{ bulk_totals() });
}

# A few committed bulk keys of the slot.
sub bulk_sample
{
	my ($slot, $want) = @_;
	my @r = grep { !$_->{gone}{$slot} && grep { $_ == $slot } @{ $_->{slots} } } @{ $M{bulks} };
	my @k;
	for (1 .. $want)
	{
		my $r = pick(@r) or last;
		my $n = @{ $r->{slots} };
		my ($i) = grep { $r->{slots}[$_] == $slot } 0 .. $n - 1;
		my $first = $r->{lo} + (($i - $r->{lo} % $n) % $n);
		next if $first > $r->{hi};
		push @k, $first + $n * int(rand(int(($r->{hi} - $first) / $n) + 1));
	}
	return @k;
}


#
# Lookups: the rows a snapshot sees.
#
# Slot's partition at version c, in t's view.
sub lookup_part
{
	my ($c, $t, $slot) = @_;
	return $t->{parts}{$slot} if $t && exists $t->{parts}{$slot};
	return $c->{parts}{$slot} // { exists => 0, attached => 0 };
}

# The slots whose rows of key k a snapshot of version ci sees, with the
# changes of transaction t, among the partitions attached at version cj
# in t's view (or being detached concurrently at cj and attached at ci),
# or in the leaf of slot leaf.
sub lookup_rows
{
	my ($ci, $cj, $t, $k, $leaf) = @_;
	my @s;
	if ($k < $bulk_base)
	{
		my %c = map { $_ => 1 } keys %{ $ci->{where}{$k} // {} };
		$c{$_} = 1 for ($t ? keys %{ $t->{where}{$k} // {} } : ());
		for my $slot (keys %c)
		{
			my $own = $t && $t->{rows}{$slot} && exists $t->{rows}{$slot}{$k};
			push @s, $slot
			  if $own ? $t->{rows}{$slot}{$k} : $ci->{rows}{$slot}{$k} && !($t && $t->{trunc}{$slot});
		}
	}
	else
	{
		for my $r (@{ $ci->{bulks} }, $t ? @{ $t->{bulks} } : ())
		{
			next if $k < $r->{lo} || $k > $r->{hi};
			my $slot = $r->{slots}[ $k % @{ $r->{slots} } ];
			my $mine = $t && grep { $_ == $r } @{ $t->{bulks} };
			push @s, $slot
			  if !$r->{gone}{$slot}
			  && ($mine || !$t || !($t->{trunc}{$slot} || ($t->{bulkdel}{$slot} // {})->{ $r->{lo} }));
		}
	}
	return grep { $_ == $leaf } @s if defined $leaf;
	# a partition being detached concurrently is read by a snapshot that
	# does not see the detach's first transaction (which saw it attached)
	return grep { lookup_part($cj, $t, $_)->{attached}
		  || (lookup_part($cj, $t, $_)->{detaching} && lookup_part($ci, $t, $_)->{attached}) } @s;
}

1;

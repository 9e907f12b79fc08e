#!/usr/bin/env perl
# Build the tables of "Current results" in bench/RESULTS.md from the rounds
# listed in bench/data/current/sources.tsv.
#
#   perl bench/current.pl [--sources FILE] [--update RESULTS.md]
#
# sources.tsv names, for each table (w1 to w8, or "others"), the out
# directories of bench/run that feed it, relative to bench/ (tab-separated;
# build and note optional, "-" for none):
#
#   tables  set     directory                                build  note
#   w7      main    data/current/pg18-w7-r*-after-03a8858    -      built with assertions
#
# "main" directories give the contenders' values and gunique's ratio to
# local (to single where a workload has no local); "single" directories
# only add gunique's ratio to single; "others" directories give the ratios
# of trigger, sidetable and single to local for the table "others".  The
# build column is optional: without it the build is read from meta.tsv
# (its "build" line, else a commit in the directory's name, else
# gunique_commit); the note follows the server's version.
#
# A round is one run of one directory (bench/run --runs N gives N rounds).
# Each value is the median over the rounds; each ratio is the median of
# the rounds' own ratios (both contenders of a round ran in the same
# cluster, one after the other), in brackets the lowest and highest.
#
# Without --update the tables are printed.  With --update, each table
# replaces the text between "<!-- current.pl TABLE -->" and
# "<!-- /current.pl TABLE -->" in the file; the prose around the tables is
# written by hand.  A directory may be a pattern (r* for every round).
# No modules beyond perl's core.
use strict;
use warnings;
use utf8;
use open qw(:std :encoding(UTF-8));
use FindBin;
use lib $FindBin::RealBin;
use BenchNumbers qw(median thousands);
use File::Basename qw(dirname basename);

my $bench = dirname(__FILE__);
my $sources = "$bench/data/current/sources.tsv";
my $update;
while (@ARGV) {
	my $a = shift @ARGV;
	if ($a eq '--sources') { $sources = shift @ARGV // die "--sources needs a file\n" }
	elsif ($a eq '--update') { $update = shift @ARGV // die "--update needs a file\n" }
	else { die "usage: current.pl [--sources FILE] [--update RESULTS.md]\n" }
}

# ---------------------------------------------------------------------------
# The tables: which raw workloads feed them, which rows they show and how
# rows are labelled.  Rows are [variant, step] of raw.tsv.
# ---------------------------------------------------------------------------
my @W1_STEPS = qw(insert delete create attach detach);
my %TABLE = (
	w1 => {
		raw => ['w1'], cols => ['keys', 'step'], unit => 'ms, lower is better',
		rows => sub { map { my $v = $_; map { ['w1', $v, $_] } @W1_STEPS } qw(correlated random) },
	},
	w2 => {
		raw => ['w2'], cols => ['keys', 'partitions'], unit => 'µs per row, lower is better',
		rows => sub {
			my $d = shift;
			# new keys, then keys that come back, then the other key types
			my %case = (new => 0, reinsert => 1, update => 2, uuid => 3, email => 4, pair => 5);
			my $k = sub { my ($o, $c) = split /-/, $_[0], 2; (($case{$c // 'new'} // 9), $o) };
			my @v = sort { my @x = $k->($a); my @y = $k->($b); $x[0] <=> $y[0] || $x[1] cmp $y[1] } keys %{ $d->{w2} };
			map { my $v = $_; map { ['w2', $v, $_] } sort { $a <=> $b } grep { /^\d+$/ } keys %{ $d->{w2}{$v} } } @v;
		},
		label => sub { my ($v, $s) = @_; my ($o, $k) = split /-/, $v, 2; ($k ? "$o, $k" : "$o, new", $s) },
		extra => ['btrees searched per row', sub { my ($d, $r) = @_; ('w2searches', $r->[1], $r->[2]) }],
	},
	w3 => {
		raw => ['w3a', 'w3b'], cols => ['test'], unit => 'tps, higher is better',
		rows => sub { (['w3a', '-', 'tps'], ['w3b', 'hash', 'tps'], ['w3b', 'list', 'tps']) },
		label => sub {
			my ($v) = @_;
			$v eq '-' ? ('3a: one-row inserts, 16 partitions, 8 clients')
			  : $v eq 'hash' ? ('3b: 1,000 uuids a transaction, 16 partitions, hash on the id, 10 clients')
			  : ("3b: the same, list on the uuid's first hex digit");
		},
	},
	w4 => {
		raw => ['w4'], cols => ['mode'], unit => 'tps, higher is better',
		rows => sub { (['w4', 'select-only', 'tps'], ['w4', 'select-update', 'tps']) },
		label => sub { ($_[0]) },
	},
	w5 => {
		raw => ['w5'], cols => ['keys, rows', 'step'], unit => 'lower is better',
		rows => sub {
			my $d = shift;
			my %order = (correlated => 0, random => 1, uuid => 2, text => 3);
			my @v = sort {
				my ($ka, $na) = split /-/, $a; my ($kb, $nb) = split /-/, $b;
				$na <=> $nb || ($order{$ka} // 9) <=> ($order{$kb} // 9)
			} keys %{ $d->{w5} };
			map { my $v = $_; map { ['w5', $v, $_] } qw(insert restart-ready restart-p99 crash-p99) } @v;
		},
		label => sub {
			my ($v, $s) = @_;
			my ($k, $n) = split /-/, $v;
			$n = thousands($n);
			my %u = (insert => 'insert, µs per row', 'restart-ready' => 'clean restart: ready, s',
					 'restart-p99' => 'after it: p99 of one-row inserts, ms', 'crash-p99' => 'after a crash: p99, ms');
			("$k, $n", $u{$s} // $s);
		},
	},
	w6 => {
		raw => ['w6'], cols => ['mode', 'partitions', 'tps of'], unit => 'tps, higher is better',
		rows => sub {
			my $d = shift;
			my @v = sort {
				my ($ma, $na) = $a =~ /^(.*)-(\d+)$/; my ($mb, $nb) = $b =~ /^(.*)-(\d+)$/;
				$ma cmp $mb || $na <=> $nb
			} grep { /-\d+$/ } keys %{ $d->{w6} };
			map { my $v = $_; map { ['w6', $v, $_] } qw(tps tps-warm) } @v;
		},
		label => sub {
			my ($v, $s) = @_;
			my ($m, $n) = $v =~ /^(.*)-(\d+)$/;
			$n = thousands($n);
			($m, $n, $s eq 'tps' ? 'the run' : 'its second half');
		},
	},
	w7 => {
		raw => ['w7'], cols => ['partitions', 'rows a statement'], unit => 'tps, higher is better',
		rows => sub {
			my $d = shift;
			map { ['w7', $_, 'tps'] }
			  sort { ($a =~ /x1$/) <=> ($b =~ /x1$/) || ($a =~ /^(\d+)/)[0] <=> ($b =~ /^(\d+)/)[0] }
			  grep { /^\d+(x1)?$/ } keys %{ $d->{w7} };
		},
		label => sub { my ($v) = @_; $v =~ /^(\d+)x1$/ ? ($1, '1') : ($v, '1,000') },
	},
	w8 => {
		raw => ['w8'], cols => ['partitions', 'per run of 30 s, 8 clients'],
		unit => 'counts (for transactions higher is better, for the rest lower)',
		rows => sub {
			my $d = shift;
			map { my $v = $_; map { ['w8', $v, $_] } qw(deadlocks transactions upsert-23505 duplicates) }
			  sort { $a <=> $b } keys %{ $d->{w8} };
		},
		label => sub {
			my %l = (deadlocks => 'deadlocks', transactions => 'transactions',
					 'upsert-23505' => 'upserts that failed with 23505', duplicates => 'duplicate keys after the run');
			($_[0], $l{ $_[1] } // $_[1]);
		},
	},
);

# The rows of the table "others": the alternatives to gunique, each
# against local in its own run.
my @OTHERS = (
	(map { my $v = $_; map { ['w1', $v, $_] } qw(insert create attach) } qw(correlated random)),
	(map { my $v = $_; map { ['w2', $v, $_] } qw(6 512) } qw(correlated random)),
	['w3a', '-', 'tps'], ['w3b', 'hash', 'tps'], ['w3b', 'list', 'tps'],
);
my %OTHERS_LABEL = (w1 => 'workload 1, ms', w2 => 'workload 2, µs per row', w3a => 'workload 3a, tps',
					w3b => 'workload 3b, tps');

# ---------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------
# r2 after r1, r10 after r9: numbers compared as numbers
sub by_round
{
	my @a = split /(\d+)/, $_[0];
	my @b = split /(\d+)/, $_[1];
	while (@a && @b) {
		my ($x, $y) = (shift @a, shift @b);
		my $c = $x =~ /^\d+$/ && $y =~ /^\d+$/ ? $x <=> $y : $x cmp $y;
		return $c if $c;
	}
	return @a <=> @b;
}

# $set{set}{table} = [directories]; $build_of{dir} = build label;
# $note_of{dir} = what to say after the server's version
my (%set, %build_of, %note_of, @order);
open my $sf, '<', $sources or die "current.pl: $sources: $!\n";
while (<$sf>) {
	chomp;
	s/\s+$//;
	next if /^\s*(#|$)/;
	my ($tables, $s, $dir, $build, $note) = split /\t+/;
	die "current.pl: $sources:$.: tables, set, directory [, build [, note]]\n" unless defined $dir;
	die "current.pl: $sources:$.: set must be main, single or others\n" unless $s =~ /^(main|single|others)$/;
	# a pattern such as data/current/pg15-w1-r*-after-03a8858 names every round
	my @dirs = map { substr($_, length($bench) + 1) } sort { by_round($a, $b) } grep { -d } glob("$bench/$dir");
	warn "current.pl: $sources:$.: no directory $bench/$dir\n" unless @dirs;
	for my $t (split /,/, $tables) {
		die "current.pl: $sources:$.: unknown table $t\n" unless $TABLE{$t} || $t eq 'others';
		push @{ $set{$s}{$t} }, @dirs;
		push @order, $t unless grep { $_ eq $t } @order;
	}
	if (defined $build && length $build && $build ne '-') { $build_of{$_} = $build for @dirs }
	if (defined $note && length $note) { $note_of{$_} = $note for @dirs }
}
close $sf;

my (%raw, %meta);    # $raw{dir}{w}{variant}{step}{contender}{run} = value
sub load
{
	my $dir = shift;
	return if $raw{$dir};
	local $_;    # callers loop over directories with $_
	my $path = "$bench/$dir";
	open my $rf, '<', "$path/raw.tsv" or die "current.pl: $path/raw.tsv: $!\n";
	while (<$rf>) {
		chomp;
		next if /^\s*$/ || /^#/;
		my ($w, $variant, $step, $c, $run, $v) = split /\t/;
		$raw{$dir}{$w}{$variant}{$step}{$c}{$run} = $v;
	}
	close $rf;
	$raw{$dir} //= {};
	open my $mf, '<', "$path/meta.tsv" or die "current.pl: $path/meta.tsv: $!\n";
	while (<$mf>) {
		chomp;
		my ($k, $v) = split /\t/, $_, 2;
		$meta{$dir}{$k} = $v if defined $v && $k ne 'setting';
	}
	close $mf;
}

# A contender's value in one run; workload 2's single has one value per key
# order (step "-"), the same at every partition count.
sub value
{
	my ($dir, $w, $variant, $step, $c, $run) = @_;
	my $v = $raw{$dir}{$w}{$variant} or return undef;
	return $v->{$step}{$c}{$run} if $v->{$step} && $v->{$step}{$c} && defined $v->{$step}{$c}{$run};
	return $v->{'-'}{$c}{$run} if $v->{'-'} && $v->{'-'}{$c};
	return undef;
}

# The rounds of some directories for one row: [dir, run] pairs in which the
# contender was measured.
sub rounds
{
	my ($dirs, $w, $variant, $step, $c) = @_;
	my @r;
	for my $dir (@$dirs) {
		my $v = $raw{$dir}{$w}{$variant} or next;
		my %runs = map { %{ $_->{$c} // {} } } grep { defined } ($v->{$step}, $v->{'-'});
		push @r, map { [$dir, $_] } sort { $a <=> $b } keys %runs;
	}
	return @r;
}

# Whether a directory measured a contender in any of some raw workloads.
sub has
{
	my ($dir, $ws, $c) = @_;
	for my $w (@$ws) {
		for my $v (values %{ $raw{$dir}{$w} // {} }) {
			return 1 if grep { $_->{$c} } values %$v;
		}
	}
	return 0;
}

# ---------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------

sub fmt
{
	my $v = shift;
	return 'n/a' unless defined $v;
	my $s = $v == int($v) && abs($v) < 1e6 ? sprintf('%d', $v)
	  : $v >= 100 ? sprintf('%.0f', $v) : $v >= 10 ? sprintf('%.1f', $v) : $v >= 1 ? sprintf('%.2f', $v)
	  : sprintf('%.3f', $v);
	return thousands($s);
}

sub fx
{
	my $r = shift;
	my $s = $r >= 100 ? sprintf('%.0f', $r) : $r >= 10 ? sprintf('%.1f', $r) : $r >= 0.1 ? sprintf('%.2f', $r)
	  : sprintf('%.2g', $r);
	return thousands($s);
}

# Median of a contender's values over the rounds of some directories.
sub med_value
{
	my ($dirs, $w, $variant, $step, $c) = @_;
	return median(map { value($_->[0], $w, $variant, $step, $c, $_->[1]) } rounds($dirs, $w, $variant, $step, $c));
}

# "×m [lo–hi]" of the per-round ratios c1 / c2, and the number of rounds.
sub ratio
{
	my ($dirs, $w, $variant, $step, $c1, $c2) = @_;
	my @per;
	for my $r (rounds($dirs, $w, $variant, $step, $c1)) {
		my $a = value($r->[0], $w, $variant, $step, $c1, $r->[1]);
		my $b = value($r->[0], $w, $variant, $step, $c2, $r->[1]);
		push @per, $a / $b if defined $a && defined $b && $b > 0;
	}
	return ('', 0) unless @per;
	@per = sort { $a <=> $b } @per;
	my $s = '×' . fx(median(@per));
	$s .= ' [' . fx($per[0]) . '–' . fx($per[-1]) . ']' if @per > 1;
	return ($s, scalar @per);
}

# ---------------------------------------------------------------------------
# Where the numbers come from
# ---------------------------------------------------------------------------
sub build
{
	my $dir = shift;
	return $build_of{$dir} if $build_of{$dir};
	my $m = $meta{$dir};
	return substr($1, 0, 7) if ($m->{build} // '') =~ /([0-9a-f]{7,40})/;
	return $1 if basename($dir) =~ /-([0-9a-f]{7,40})$/;
	return $m->{gunique_commit} // 'unknown';
}

sub uniq { my %s; grep { !$s{$_}++ } @_ }

# "data/x/pg15-w1-r1-a", "data/x/pg15-w1-r2-a" -> "data/x/pg15-w1-r*-a";
# "data/y/random", "data/y/uuid" -> "data/y/{random,uuid}"
sub dirs_pattern
{
	my @d = uniq(map { (my $d = $_) =~ s/(?<=[-_])r\d+(?=-|$)/r*/; $d } @_);
	my (%in, @parents);
	for (@d) {
		my $p = dirname($_);
		push @parents, $p unless $in{$p};
		push @{ $in{$p} }, basename($_);
	}
	return join(', ', map {
		my @b = @{ $in{$_} };
		@b > 1 ? "`$_/{" . join(',', @b) . "}`" : "`$_/$b[0]`"
	} @parents);
}

sub range
{
	my @v = sort { $a <=> $b } grep { defined } @_;
	return '?' unless @v;
	my ($lo, $hi) = (sprintf('%.1f', $v[0]), sprintf('%.1f', $v[-1]));
	return $lo eq $hi ? $lo : "$lo–$hi";
}

# One line: rounds, dates, builds, server, machine, load.
sub provenance
{
	my ($dirs, $lo, $hi) = @_;
	$hi //= $lo;
	my @m = map { $meta{$_} } @$dirs;
	my @dates = uniq(sort map { ($_->{date} // '?') =~ /^(\S+)/ ? $1 : '?' } @m);
	my $dates = @dates > 1 ? "$dates[0] to $dates[-1]" : $dates[0];
	my @pg = uniq(map {
		my $v = ($meta{$_}{postgres} // '?') =~ /^(PostgreSQL \S+(?: \(Debian [^)]*\))?)/ ? $1 : '?';
		$note_of{$_} ? "$v $note_of{$_}" : $v
	} @$dirs);
	my @cpu = uniq(map { ($_->{nproc} // '?') . ' cores, ' . ($_->{cpu} // '?') } @m);
	my @scale = uniq(map { $_->{scale} // '?' } @m);
	my $load = range(map { (split / /, $_->{loadavg_start} // '')[0] } @m);
	my $load_end = range(map { (split / /, $_->{loadavg_end} // '')[0] } @m);
	my $n = $lo == $hi ? $lo : "$lo to $hi";
	return "$n round" . ($hi == 1 ? '' : 's') . ", $dates, build " . join(', ', uniq(map { build($_) } @$dirs)) .
	  ', ' . join(', ', @pg) . ', scale ' . join(', ', @scale) . ', ' . join('; ', @cpu) .
	  ", load average (1 min) $load at the start, $load_end at the end; data: " . dirs_pattern(@$dirs);
}

# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------
sub table
{
	my $t = shift;
	my $spec = $TABLE{$t};
	my @main = @{ $set{main}{$t} // [] };
	my @single = @{ $set{single}{$t} // [] };
	die "current.pl: table $t has no main directory\n" unless @main;
	load($_) for @main, @single;

	# The rows' variants, from every main directory.
	my %d;
	for my $dir (@main) {
		for my $w (@{ $spec->{raw} }) {
			for my $v (keys %{ $raw{$dir}{$w} // {} }) {
				$d{$w}{$v}{$_} = 1 for keys %{ $raw{$dir}{$w}{$v} };
			}
		}
	}
	my @rows = $spec->{rows}->(\%d);
	my $base = (grep { has($_, $spec->{raw}, 'local') } @main) ? 'local' : 'single';
	my $with_single = $base eq 'local' && ((grep { has($_, $spec->{raw}, 'single') } @main) || @single);
	my @sdirs = ((grep { has($_, $spec->{raw}, 'single') } @main), @single);

	my $label = $spec->{label} // sub { @_ };
	my @cols = @{ $spec->{cols} };
	my @head = (@cols, $base, 'gunique', "gunique / $base");
	push @head, 'gunique / single' if $with_single;
	push @head, $spec->{extra}[0] if $spec->{extra};
	my $out = '| ' . join(' | ', @head) . " |\n|" . join('', map { '---|' } @cols) .
	  join('', map { '---:|' } @head[@cols .. $#head]) . "\n";
	my ($lo, $hi);
	for my $r (@rows) {
		my ($w, $v, $s) = @$r;
		my $g = med_value(\@main, $w, $v, $s, 'gunique');
		next unless defined $g;
		my ($rb, $nb) = ratio(\@main, $w, $v, $s, 'gunique', $base);
		$lo = $nb if $nb && (!defined $lo || $nb < $lo);
		$hi = $nb if $nb && (!defined $hi || $nb > $hi);
		my @l = $label->($v, $s);
		push @l, '' while @l < @cols;
		my @cells = (@l[0 .. $#cols], fmt(med_value(\@main, $w, $v, $s, $base)), fmt($g), $rb || 'n/a');
		push @cells, (ratio(\@sdirs, $w, $v, $s, 'gunique', 'single'))[0] || '' if $with_single;
		if ($spec->{extra}) {
			my @x = $spec->{extra}[1]->(\%d, $r);
			my $m = med_value(\@main, @x, 'gunique');
			push @cells, defined $m ? sprintf('%.3f', $m) : '';
		}
		$out .= '| ' . join(' | ', @cells) . " |\n";
	}
	$out .= "\n$spec->{unit}; " . provenance(\@main, $lo // 0, $hi) . ".";
	if ($with_single && @single) {
		my @s = grep { my $d = $_; !grep { $_ eq $d } @main } @sdirs;
		my ($slo, $shi);
		for my $r (@rows) {
			my $k = (ratio(\@s, @$r, 'gunique', 'single'))[1] or next;
			$slo = $k if !defined $slo || $k < $slo;
			$shi = $k if !defined $shi || $k > $shi;
		}
		$out .= " gunique / single: " . provenance(\@s, $slo // 0, $shi) . "." if @s;
	}
	return "$out\n";
}

sub others
{
	my @dirs = @{ $set{others}{others} // [] };
	die "current.pl: table others has no directory\n" unless @dirs;
	load($_) for @dirs;
	my @cc = grep { my $c = $_; grep { has($_, [ keys %{ $raw{$_} } ], $c) } @dirs } qw(trigger sidetable single);
	my $out = '| workload | keys or test | step | ' . join(' | ', map { "$_ / local" } @cc) . " |\n|---|---|---|" .
	  join('', map { '---:|' } @cc) . "\n";
	my $n = 0;
	for my $r (@OTHERS) {
		my ($w, $v, $s) = @$r;
		my @cells = map {
			my ($x, $k) = ratio(\@dirs, $w, $v, $s, $_, 'local');
			$n = $k if $k > $n;
			$x || 'n/a';
		} @cc;
		next unless grep { $_ ne 'n/a' } @cells;
		my $vl = $v eq '-' ? 'one-row inserts' : $w eq 'w3b' ? ($v eq 'hash' ? 'uuids, hash on the id' : 'uuids, list on the first hex digit') : $v;
		$out .= "| $OTHERS_LABEL{$w} | $vl | $s | " . join(' | ', @cells) . " |\n";
	}
	$out .= "\nEach contender's value over local's in the same run, lower is better for times and higher for tps; " .
	  provenance(\@dirs, $n) . ".";
	return "$out\n";
}

my %text;
for my $t (@order) {
	next if $t eq 'others' || !@{ $set{main}{$t} // [] };
	$text{$t} = table($t);
}
$text{others} = others() if $set{others}{others};

if (!$update) {
	for my $t (@order) {
		next unless $text{$t};
		print "<!-- current.pl $t -->\n$text{$t}<!-- /current.pl $t -->\n\n";
	}
	exit 0;
}

open my $in, '<', $update or die "current.pl: $update: $!\n";
my $doc = do { local $/; <$in> };
close $in;
for my $t (sort keys %text) {
	my $n = ($doc =~ s/(<!-- current\.pl \Q$t\E -->\n).*?(<!-- \/current\.pl \Q$t\E -->)/$1$text{$t}$2/s);
	warn "current.pl: $update has no block for $t (<!-- current.pl $t --> ... <!-- /current.pl $t -->)\n" unless $n;
}
open my $out, '>', $update or die "current.pl: $update: $!\n";
print $out $doc;
close $out;

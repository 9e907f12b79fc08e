#!/usr/bin/env perl
# Summarize A/B runs of bench/run: one out directory per build, workload
# and round, named pg<V>-w<W>-r<ROUND>-<BUILD>-<HASH> (each a --runs 1 run
# of one build, with its own local and single contenders).
#
#   perl ab-summary.pl BEFORE-NAME AFTER-NAME DIR...
#
# For every measurement that has both gunique and local (or single) in a
# run, the run's ratio gunique / local (gunique / single); per build, the
# median of the runs' ratios with [lowest-highest]; after/before is the
# after build's median ratio divided by the before build's.  "spread" says
# whether the after build's runs' ratios and the before build's overlap
# ("overlap"), or all lie on the worse side ("worse") or the better side
# ("better") of the other build's
# (left empty when a build has fewer than 2 runs).  "gunique,
# after / before" compares gunique's own medians across runs (absolute
# values drift with the machine's load; the ratios are within a run).
# Markdown on stdout.  No modules beyond perl's core.
use strict;
use warnings;
use utf8;
use open qw(:std :encoding(UTF-8));
use File::Basename qw(basename);

my $runlog;
if (@ARGV && $ARGV[0] eq '--log') { (undef, $runlog) = splice(@ARGV, 0, 2); }
my $loadlog;
if (@ARGV && $ARGV[0] eq '--load') { (undef, $loadlog) = splice(@ARGV, 0, 2); }
my ($A, $B, @dirs) = @ARGV;
die "usage: ab-summary.pl [--log PLAN.LOG] [--load LOADAVG.LOG] BEFORE AFTER DIR...\n" unless $A && $B && @dirs;
# Steps left out of the tables (raw.tsv has them): rows/s is tps x 1,000
# or x 1, latency is 1 / tps per client.
my %skip = map { $_ => 1 } qw(rows latency);

# The mean of the 1-minute load average sampled (every 30 s) while each run
# ran: start and end times from the plan's log, samples from the sampler's.
my (%span, @samples);
if ($runlog) {
	open my $pl, '<', $runlog or die "$runlog: $!\n";
	while (<$pl>) {
		$span{"$2 $3 $4"}[0] = $1 if /^(\d\d:\d\d:\d\d) start w(\d) round (\w+) (\S+)/;
		$span{"$2 $3 $4"}[1] = $1 if /^(\d\d:\d\d:\d\d) end +w(\d) round (\w+) (\S+):/;
	}
}
if ($loadlog) {
	open my $ll, '<', $loadlog or die "$loadlog: $!\n";
	while (<$ll>) { push @samples, [ $1, $2 ] if /^(\d\d:\d\d:\d\d) ([0-9.]+)/; }
}
sub mean_load
{
	my $k = shift;
	my $s = $span{$k} or return '?';
	return '?' unless $s->[0] && $s->[1];
	my @in = map { $_->[1] } grep { $_->[0] ge $s->[0] && $_->[0] le $s->[1] } @samples;
	return '?' unless @in;
	my $t = 0;
	$t += $_ for @in;
	return sprintf('%.1f', $t / @in);
}

sub median
{
	my @v = sort { $a <=> $b } @_;
	return undef unless @v;
	my $m = int(@v / 2);
	return @v % 2 ? $v[$m] : ($v[$m - 1] + $v[$m]) / 2;
}

# %r{w}{variant}{step}{base}{build} = [ratio per run]; %g{...}{build} = [gunique values]
my (%r, %g, %unit, %order, @runs);
my $n = 0;
for my $dir (sort @dirs) {
	my $name = basename($dir);
	my ($v, $w, $round, $build, $hash) = $name =~ /^pg(\d+)-w(\d+)-r(\w+)-(.+)-([0-9a-f]{7})$/
		or die "ab-summary.pl: unexpected directory name $name\n";
	next unless $build eq $A || $build eq $B;
	my (%val, %meta);
	open my $rf, '<', "$dir/raw.tsv" or die "$dir/raw.tsv: $!\n";
	# cpu.tsv (w2cpu.pl): the CPU time of workload 2's timed statements
	my @lines = <$rf>;
	if (open my $cf, '<', "$dir/cpu.tsv") { push @lines, <$cf>; close $cf; }
	for (@lines) {
		chomp;
		next if /^\s*$/;
		my ($ww, $variant, $step, $c, $run, $x, $u) = split /\t/;
		next if $skip{$step};
		push @{ $val{$ww}{$variant}{$step}{$c} }, $x;
		$unit{$ww}{$step} = $u;
		$order{$ww}{"$variant\t$step"} //= $n++;
	}
	close $rf;
	open my $mf, '<', "$dir/meta.tsv" or die "$dir/meta.tsv: $!\n";
	while (<$mf>) {
		chomp;
		my ($k, $x) = split /\t/, $_, 2;
		$meta{$k} = $x if defined $x;
	}
	close $mf;
	push @runs, [ $w, $round, $build, $hash, $meta{loadavg_start} // '?', $meta{loadavg_end} // '?',
		$meta{"elapsed_w$w"} // '?', $meta{gunique_so} // '?', $v, mean_load("$w $round $build") ];
	for my $ww (keys %val) {
		for my $variant (keys %{ $val{$ww} }) {
			for my $step (keys %{ $val{$ww}{$variant} }) {
				my $cell = $val{$ww}{$variant}{$step};
				next unless $cell->{gunique};
				my $gv = median(@{ $cell->{gunique} });
				push @{ $g{$ww}{$variant}{$step}{$build} }, $gv;
				for my $base (qw(local single)) {
					# workload 2's single is measured once, on the unpartitioned table (step "-")
					my $bl = $cell->{$base} // ($base eq 'single' ? $val{$ww}{$variant}{'-'}{single} : undef);
					next unless $bl;
					my $bv = median(@$bl);
					next unless $bv > 0;
					push @{ $r{$ww}{$variant}{$step}{$base}{$build} }, $gv / $bv;
				}
			}
		}
	}
}

sub fmt
{
	my $v = shift;
	return 'n/a' unless defined $v;
	my $s = $v >= 100 ? sprintf('%.0f', $v) : $v >= 10 ? sprintf('%.1f', $v) : $v >= 1 ? sprintf('%.2f', $v) : sprintf('%.3f', $v);
	1 while $s =~ s/^(\d+)(\d{3})/$1,$2/;
	return $s;
}

sub mr
{
	my $l = shift;
	return 'n/a' unless $l && @$l;
	my @s = sort { $a <=> $b } @$l;
	return sprintf('×%.2f [%.2f–%.2f]', median(@s), $s[0], $s[-1]);
}

# Higher is better for rates, lower for times.
sub higher_better { my $u = shift // ''; return $u =~ /tps|rows\/s|per s/; }

sub verdict
{
	my ($before, $after, $hb) = @_;
	return '' unless $before && @$before > 1 && $after && @$after > 1;
	my @b = sort { $a <=> $b } @$before;
	my @a = sort { $a <=> $b } @$after;
	# the ranges of the runs' ratios do not meet: beyond the spread
	my ($worse, $better) = $hb ? ($a[-1] < $b[0], $a[0] > $b[-1]) : ($a[0] > $b[-1], $a[-1] < $b[0]);
	return $worse ? 'worse' : $better ? 'better' : 'overlap';
}

my %title = (
	w1 => 'Workload 1: the talk\'s timing table, 6 partitions (ms; lower is better)',
	w2 => 'Workload 2: insert cost per row (µs/row; lower is better)',
	w4 => 'Workload 4: lookups by aid, 200 partitions (tps; higher is better)',
	w6 => 'Workload 6: the talk\'s lookups by the global key (tps; higher is better)',
	w2cpu => 'Workload 2, CPU time (user + system) of the same statements, from log_statement_stats (µs/row; lower is better)',
	w2searches => 'Workload 2: btrees gunique searched per row of the timed statement (gunique_stat_probes)',
	w7 => 'Workload 7: de-duplicating ingest, ON CONFLICT DO NOTHING (PostgreSQL 18 with assertions)',
);

for my $w (sort keys %order) {
	my @keys = sort { $order{$w}{$a} <=> $order{$w}{$b} } keys %{ $order{$w} };
	my $has_single = grep { my ($v, $s) = split /\t/; $r{$w}{$v}{$s}{single} } @keys;
	my $has_ratio = grep { my ($v, $s) = split /\t/; $r{$w}{$v}{$s}{single} || $r{$w}{$v}{$s}{local} } @keys;
	unless ($has_ratio) {
		# measured for gunique alone (w2searches: btrees searched per row)
		print "### ", ($title{$w} // $w), "\n\n";
		print "| variant | step | gunique, $A [lowest–highest] | gunique, $B [lowest–highest] |\n|---|---|---:|---:|\n";
		for my $k (@keys) {
			my ($variant, $step) = split /\t/, $k;
			my $gg = $g{$w}{$variant}{$step};
			my @c = map {
				my @s = sort { $a <=> $b } @{ $gg->{$_} // [] };
				@s ? sprintf('%s [%s–%s]', fmt(median(@s)), fmt($s[0]), fmt($s[-1])) : 'n/a'
			} ($A, $B);
			print "| $variant | $step ($unit{$w}{$step}) | $c[0] | $c[1] |\n";
		}
		print "\n";
		next;
	}
	print "### ", ($title{$w} // $w), "\n\n";
	my @h = ('variant', 'step', "gunique, $A", "gunique, $B", "gunique, $B / $A", "gunique / local, $A", "gunique / local, $B", "/ local, $B / $A", 'spread');
	push @h, "gunique / single, $A", "gunique / single, $B", "/ single, $B / $A", 'spread' if $has_single;
	print '| ', join(' | ', @h), " |\n";
	print '|---|---|', join('', map { '---:|' } 3 .. @h), "\n";
	for my $k (@keys) {
		my ($variant, $step) = split /\t/, $k;
		my $u = $unit{$w}{$step};
		my $hb = higher_better($u);
		my $rl = $r{$w}{$variant}{$step}{local} // {};
		my $rs = $r{$w}{$variant}{$step}{single} // {};
		next unless $rl->{$A} || $rl->{$B} || $rs->{$A} || $rs->{$B};
		my $gg = $g{$w}{$variant}{$step};
		my @c = ($variant, $step . ($u && $u ne $step ? " ($u)" : q{}),
			fmt(median(@{ $gg->{$A} // [] })), fmt(median(@{ $gg->{$B} // [] })),
			($gg->{$A} && $gg->{$B} && median(@{ $gg->{$A} }) > 0) ? sprintf('×%.2f', median(@{ $gg->{$B} }) / median(@{ $gg->{$A} })) : '',
			mr($rl->{$A}), mr($rl->{$B}),
			($rl->{$A} && $rl->{$B}) ? sprintf('×%.2f', median(@{ $rl->{$B} }) / median(@{ $rl->{$A} })) : '',
			verdict($rl->{$A}, $rl->{$B}, $hb));
		if ($has_single) {
			push @c, mr($rs->{$A}), mr($rs->{$B}),
				($rs->{$A} && $rs->{$B}) ? sprintf('×%.2f', median(@{ $rs->{$B} }) / median(@{ $rs->{$A} })) : '',
				verdict($rs->{$A}, $rs->{$B}, $hb);
		}
		print '| ', join(' | ', @c), " |\n";
	}
	print "\n";
}

print "### Runs\n\n";
print "| workload | round | build | commit | PostgreSQL | gunique.so | load at start (1, 5, 15 min) | load at end | mean 1-min load during the run | seconds |\n";
print "|---|---|---|---|---|---|---|---|---:|---:|\n";
for my $x (sort { $a->[0] <=> $b->[0] || $a->[1] cmp $b->[1] || ($a->[2] eq $A ? 0 : 1) <=> ($b->[2] eq $A ? 0 : 1) } @runs) {
	my ($w, $round, $build, $hash, $l0, $l1, $el, $so, $v, $ml) = @$x;
	print "| w$w | $round | $build | $hash | $v | $so | $l0 | $l1 | $ml | $el |\n";
}

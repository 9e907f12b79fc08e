#!/usr/bin/env perl
# The CPU time (user + system) of workload 2's timed statements, from the
# server log of a bench/run made with log_statement = 'all' and
# log_statement_stats = on.  Writes OUTDIR/cpu.tsv in raw.tsv's format
# (workload "w2cpu", µs of CPU per row).
#
#   perl w2cpu.pl OUTDIR RUNLOG
#
# RUNLOG is bench/run's output, whose lines "w2 VARIANT partitions N C run
# R: X µs/row (Y ms for ROWS rows)" say, in order, which point each timed
# statement was; statements are matched to lines
# in order, leaving out the first insert of "reinsert" (rolled back); the
# largest gap between the server's elapsed time and psql's \timing is
# printed as a check.
use strict;
use warnings;
use utf8;
use open qw(:std :encoding(UTF-8));

my ($dir, $runlog) = @ARGV;
die "usage: w2cpu.pl OUTDIR RUNLOG\n" unless $dir && $runlog;

my (%last, %want, %prev, @timed);
my $timed_re = qr/^(INSERT INTO w2 SELECT a, b, c, u, e FROM w2_new_|UPDATE w2 SET c = 'updated' WHERE)/;
open my $sl, '<', "$dir/logs/server.log" or die "$dir/logs/server.log: $!\n";
my $pid;
while (<$sl>) {
	if (/^\S+ \S+ \S+ \[(\d+)\] LOG:  statement: (.*)$/) {
		my ($p, $stmt) = ($1, $2);
		# the untimed first insert of "reinsert" is rolled back: not a point
		$timed[ $prev{$p} ][2] = 1 if $stmt =~ /^ROLLBACK/ && defined $prev{$p};
		delete $prev{$p};
		$last{$p} = $stmt;
		$pid = $p;
	} elsif (/^\S+ \S+ \S+ \[(\d+)\] LOG:  QUERY STATISTICS/) {
		$want{$1} = 1;
		$pid = $1;
	} elsif (/^\s+!\s+([0-9.]+) s user, ([0-9.]+) s system, ([0-9.]+) s elapsed/ && $pid && $want{$pid}) {
		my ($user, $sys, $elapsed) = ($1, $2, $3);
		delete $want{$pid};
		if (($last{$pid} // '') =~ $timed_re) {
			push @timed, [ $elapsed * 1000, ($user + $sys) * 1000, 0 ];
			$prev{$pid} = $#timed;
		}
	}
}
close $sl;
@timed = grep { !$_->[2] } @timed;

open my $rl, '<', $runlog or die "$runlog: $!\n";
open my $out, '>', "$dir/cpu.tsv" or die "$dir/cpu.tsv: $!\n";
my $i = 0;
my $worst = 0;
while (<$rl>) {
	next unless /w2 (\S+) partitions (\S+) (\S+) run (\d+): [0-9.]+ µs\/row \(([0-9.]+) ms for (\d+) rows\)/;
	my ($variant, $parts, $c, $run, $ms, $rows) = ($1, $2, $3, $4, $5, $6);
	# in order: the statements left are the timed ones, one per point
	my $best = $i;
	die "w2cpu.pl: no timed statement left for $variant $parts $c\n" if $best > $#timed;
	my $bd = abs($timed[$best][0] - $ms);
	$worst = $bd / $ms if $bd / $ms > $worst;
	print STDERR "gap $variant $parts $c: $timed[$best][0] vs $ms\n" if $ENV{W2CPU_DEBUG};
	printf $out "w2cpu\t%s\t%s\t%s\t%s\t%.3f\tus/row\n", $variant, $parts, $c, $run, $timed[$best][1] * 1000 / $rows;
	$i = $best + 1;
}
close $out;
printf "%s: largest gap between psql's and the server's elapsed time %.1f%%\n", $dir, $worst * 100;

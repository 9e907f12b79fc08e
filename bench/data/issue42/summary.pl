#!/usr/bin/env perl
# summary.pl PG15DIR PG18DIR [PG15-BEFORE PG18-BEFORE]: the table of
# bench/RESULTS.md's workload 9 section, from merge.sh's directories (and,
# for ATTACH before daa1651, the 7aae24f rounds).  Medians of the runs,
# in brackets the lowest and highest.
use strict;
use warnings;
use utf8;
use open qw(:std :encoding(UTF-8));
use FindBin;
use lib "$FindBin::RealBin/../..";
use BenchNumbers qw(median thousands);

sub fmt
{
	my $v = shift;
	my $s = $v >= 100 ? sprintf('%.0f', $v) : $v >= 10 ? sprintf('%.1f', $v) : $v >= 1 ? sprintf('%.2f', $v) : sprintf('%.3f', $v);
	return thousands($s);
}

sub load
{
	my ($dir, $only) = @_;
	my %v;
	open my $f, '<', "$dir/raw.tsv" or die "$dir/raw.tsv: $!\n";
	while (<$f>) {
		chomp;
		my ($w, $op, $step, $c, $run, $x) = split /\t/;
		next if $only && $op ne $only;
		$v{$op}{$step}{$c}{$run} = $x;
	}
	return \%v;
}

my ($d15, $d18, $b15, $b18) = @ARGV;
my @srv = ([ 'PostgreSQL 15', load($d15) ], [ 'PostgreSQL 18 (assertions)', load($d18) ]);
my @before = $b15 ? ([ 'PostgreSQL 15', load($b15) ], [ 'PostgreSQL 18 (assertions)', load($b18) ]) : ();

sub range
{
	my @s = sort { $a <=> $b } grep { defined } @_;
	return 'n/a' unless @s;
	my $m = fmt(median(@s));
	return @s > 1 ? "$m [" . fmt($s[0]) . '–' . fmt($s[-1]) . ']' : $m;
}

# tps over the same run's baseline
sub tps_ratio
{
	my ($v, $op, $c, $base) = @_;
	my $r = $v->{$op}{tps}{$c} or return 'n/a';
	my $bt = $base->{baseline}{tps}{$c};
	my @x = map { $r->{$_} / $bt->{$_} } grep { $bt->{$_} } keys %$r;
	my @s = sort { $a <=> $b } @x;
	my $m = sprintf('×%.2f', median(@s));
	return @s > 1 ? $m . sprintf(' [%.2f–%.2f]', $s[0], $s[-1]) : $m;
}

my %title = (baseline => 'writers alone (30 s)', create => 'CREATE UNIQUE INDEX',
			 'create-concurrently' => 'CREATE UNIQUE INDEX CONCURRENTLY',
			 'reindex-concurrently' => 'REINDEX INDEX CONCURRENTLY',
			 attach => 'ATTACH PARTITION of 2,000,000 rows');
print "| table, index | statement | server | runs | statement (s) | longest writer wait (ms) | writers' p99 (ms) | writers' tps / baseline |\n";
print "|---|---|---|---:|---:|---:|---:|---:|\n";
my @rows = (map { [ 'gunique', $_ ] } qw(baseline create create-concurrently reindex-concurrently attach));
push @rows, [ 'gunique', 'attach', 'before' ] if @before;
push @rows, map { [ 'single', $_ ] } qw(baseline create create-concurrently);
for my $row (@rows) {
	my ($c, $op, $before) = @$row;
	for my $i (0 .. 1) {
		my ($name, $v) = @{ ($before ? \@before : \@srv)->[$i] };
		my $base = $before ? $v : $srv[$i][1];
		my $r = $v->{$op}{seconds}{$c} or next;
		my @runs = sort keys %$r;
		printf "| %s | %s | %s | %d | %s | %s | %s | %s |\n",
		  ($c eq 'gunique' ? 'partitioned, gunique' : 'one table, btree'),
		  $title{$op} . ($before ? ' (before daa1651)' : ''), $name, scalar @runs,
		  ($op eq 'baseline' ? '–' : range(values %$r)), range(values %{ $v->{$op}{stall}{$c} }),
		  range(values %{ $v->{$op}{p99}{$c} }),
		  ($op eq 'baseline' ? fmt(median(values %{ $v->{$op}{tps}{$c} })) . ' tps' : tps_ratio($v, $op, $c, $base));
	}
}

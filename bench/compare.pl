#!/usr/bin/env perl
# Compare gunique's ratios to "local" between runs of bench/run.
#
#   perl bench/compare.pl [--title TITLE] DIR1 DIR2 [DIR3 ...]
#
# Prints a Markdown section: for every step of workload 1, every point of
# workload 2 and the tps of workloads 3 and 6 (per mode and partition count)
# measured in any of the runs, gunique's median divided by
# local's median in the same run, one column per run (named by the last
# component of its directory, oldest first).  Each run is judged against its
# own local contender, so the runs may come from different times (the
# machines drift); only the ratios are compared.  No modules beyond perl's
# core.
use strict;
use warnings;
use utf8;
use open qw(:std :encoding(UTF-8));
use FindBin;
use lib $FindBin::RealBin;
use BenchNumbers qw(median);
use File::Basename qw(basename);

my $title = 'Before and after';
if (@ARGV >= 2 && $ARGV[0] eq '--title') {
	(undef, $title) = splice(@ARGV, 0, 2);
}
my @dirs = @ARGV;
die "usage: compare.pl [--title TITLE] DIR1 DIR2 [DIR3 ...]\n" unless @dirs >= 2;

# ratios{workload}{variant}{step} = gunique median / local median
sub ratios
{
	my $dir = shift;
	my (%val, %r, %meta);
	open my $rf, '<', "$dir/raw.tsv" or die "compare.pl: $dir/raw.tsv: $!\n";
	while (<$rf>) {
		chomp;
		next if /^\s*$/ || /^#/;
		my ($w, $variant, $step, $c, $run, $v) = split /\t/;
		push @{ $val{$w}{$variant}{$step}{$c} }, $v;
	}
	close $rf;
	for my $w (keys %val) {
		for my $variant (keys %{ $val{$w} }) {
			for my $step (keys %{ $val{$w}{$variant} }) {
				my $cell = $val{$w}{$variant}{$step};
				next unless $cell->{local} && $cell->{gunique};
				my $l = median(@{ $cell->{local} });
				next unless $l > 0;
				$r{$w}{$variant}{$step} = median(@{ $cell->{gunique} }) / $l;
			}
		}
	}
	if (open my $mf, '<', "$dir/meta.tsv") {
		while (<$mf>) {
			chomp;
			my ($k, $v) = split /\t/, $_, 2;
			$meta{$k} = $v if defined $v;
		}
	}
	return (\%r, \%meta);
}

my (@r, @m);
for my $dir (@dirs) {
	my ($r, $m) = ratios($dir);
	push @r, $r;
	push @m, $m;
}
my @names = map { basename($_) } @dirs;

sub x { my $v = shift; defined $v ? sprintf('×%.2f', $v) : 'n/a' }

sub describe
{
	my $m = shift;
	my @d;
	push @d, "source $m->{gunique_commit}" if $m->{gunique_commit};
	push @d, "gunique.so $m->{gunique_so}" if $m->{gunique_so};
	push @d, "$m->{date}" if $m->{date};
	push @d, "scale $m->{scale}, $m->{runs} run(s)" if $m->{scale};
	return join(', ', @d);
}

# One table row per key that any run measured.
sub rows
{
	my ($w, $variant, $keys, $label) = @_;
	for my $k (@$keys) {
		my @v = map { $_->{$w}{$variant}{$k} } @r;
		next unless grep { defined } @v;
		print "| $variant | $k | ", join(' | ', map { x($_) } @v), " |\n";
	}
}

sub header
{
	my ($what) = @_;
	print "| keys | $what | ", join(' | ', @names), " |\n";
	print "|---|---|", join('', map { '---:|' } @names), "\n";
}

print "## $title\n\n";
print "gunique's median divided by local's median, each measured in its own run ",
	"(lower is better; ×1.00 is the cost of a unique btree that includes the ",
	"partition key).\n\n";
print "- $names[$_]: ", describe($m[$_]), "\n" for 0 .. $#dirs;
print "\n";

if (grep { $_->{w1} } @r) {
	print "### Workload 1 (6 partitions)\n\n";
	header('step');
	rows('w1', $_, [qw(insert delete create attach detach)]) for qw(correlated random);
	print "\n";
}

if (grep { $_->{w2} } @r) {
	print "### Workload 2 (insert cost per row)\n\n";
	header('partitions');
	# int keys first (correlated, random), then the other key types
	my %seen = map { %{ $_->{w2} // {} } } @r;
	for my $variant (sort { ($a =~ tr/-//) <=> ($b =~ tr/-//) || $a cmp $b } keys %seen) {
		my %parts = map { %{ $_->{w2}{$variant} // {} } } @r;
		rows('w2', $variant, [ sort { $a <=> $b } grep { /^\d+$/ } keys %parts ]);
	}
	print "\n";
}

# Workload 3: tps, where higher is better: gunique's over local's.
if (grep { $_->{w3a} || $_->{w3b} } @r) {
	print "### Workload 3 (tps, gunique's divided by local's: higher is better)\n\n";
	header('step');
	rows('w3a', '-', ['tps']);
	rows('w3b', $_, ['tps']) for qw(hash list);
	print "\n";
}

# Workload 6: tps by the global key, per mode and partition count (higher
# is better).
if (grep { $_->{w6} } @r) {
	print "### Workload 6 (tps, gunique's divided by local's: higher is better)\n\n";
	header('step');
	my %seen = map { %{ $_->{w6} // {} } } @r;
	for my $variant (sort {
			my ($ma, $na) = $a =~ /^(.*)-(\d+)$/;
			my ($mb, $nb) = $b =~ /^(.*)-(\d+)$/;
			($ma // $a) cmp ($mb // $b) || ($na // 0) <=> ($nb // 0)
		} keys %seen) {
		rows('w6', $variant, ['tps', 'tps-warm']);
	}
	print "\n";
}

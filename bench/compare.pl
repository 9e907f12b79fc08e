#!/usr/bin/env perl
# Compare gunique's ratios to "local" between two runs of bench/run.
#
#   perl bench/compare.pl BEFORE_DIR AFTER_DIR [TITLE]
#
# Prints a Markdown section: for every step of workload 1 and every point of
# workload 2 measured in both runs, gunique's median divided by local's
# median in the same run, before and after.  Each run is judged against its
# own local contender, so the two runs may come from different times (the
# machines drift); only the ratios are compared.  No modules beyond perl's
# core.
use strict;
use warnings;
use utf8;
use open qw(:std :encoding(UTF-8));

my ($before, $after, $title) = @ARGV;
die "usage: compare.pl BEFORE_DIR AFTER_DIR [TITLE]\n" unless $before && $after;
$title //= 'Before and after';

sub median
{
	my @v = sort { $a <=> $b } @_;
	return undef unless @v;
	my $m = int(@v / 2);
	return @v % 2 ? $v[$m] : ($v[$m - 1] + $v[$m]) / 2;
}

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

my ($rb, $mb) = ratios($before);
my ($ra, $ma) = ratios($after);

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

print "## $title\n\n";
print "gunique's median divided by local's median, each measured in its own run ",
	"(lower is better; ×1.00 is the cost of a unique btree that includes the ",
	"partition key).\n\n";
print "- before: ", describe($mb), "\n";
print "- after: ", describe($ma), "\n\n";

if ($rb->{w1} || $ra->{w1}) {
	print "### Workload 1 (6 partitions)\n\n";
	print "| keys | step | before | after |\n|---|---|---:|---:|\n";
	for my $variant (qw(correlated random)) {
		for my $step (qw(insert delete create attach detach)) {
			my ($b, $a) = ($rb->{w1}{$variant}{$step}, $ra->{w1}{$variant}{$step});
			next unless defined $b || defined $a;
			print "| $variant | $step | ", x($b), " | ", x($a), " |\n";
		}
	}
	print "\n";
}

if ($rb->{w2} || $ra->{w2}) {
	print "### Workload 2 (insert cost per row)\n\n";
	print "| keys | partitions | before | after |\n|---|---:|---:|---:|\n";
	for my $variant (qw(correlated random)) {
		my %parts = map { $_ => 1 } (keys %{ $rb->{w2}{$variant} // {} },
									 keys %{ $ra->{w2}{$variant} // {} });
		for my $p (sort { $a <=> $b } grep { /^\d+$/ } keys %parts) {
			print "| $variant | $p | ", x($rb->{w2}{$variant}{$p}), " | ",
				x($ra->{w2}{$variant}{$p}), " |\n";
		}
	}
	print "\n";
}

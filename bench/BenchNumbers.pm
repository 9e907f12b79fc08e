# BenchNumbers: the numbers every report of bench/ writes (report.pl,
# compare.pl, current.pl, plot.pl): medians, and digits grouped by threes.
package BenchNumbers;

use strict;
use warnings;
use Exporter qw(import);

our @EXPORT_OK = qw(median thousands);

# The median of a list of numbers; undef for none.
sub median
{
	my @v = sort { $a <=> $b } @_;
	return undef unless @v;
	my $m = int(@v / 2);
	return @v % 2 ? $v[$m] : ($v[$m - 1] + $v[$m]) / 2;
}

# A formatted number with commas between groups of three digits before
# the point: 1234567.5 -> 1,234,567.5.
sub thousands
{
	my $s = shift;
	1 while $s =~ s/^(\d+)(\d{3})/$1,$2/;
	return $s;
}

1;

#!/usr/bin/env perl
# Draw workload 2 (insert cost per row against the number of partitions) as
# an SVG: two panels (correlated keys, random keys), partitions on a log
# axis, µs/row on a log axis (shared by both panels, so they compare), one
# line per contender, each point the median of the runs.  "single" has no
# partitions and is drawn as a dashed horizontal line.
#
#   perl bench/plot.pl OUTDIR/raw.tsv OUTDIR/w2-scaling.svg
#
# Plain perl, no modules beyond the core; the SVG has no external references.
use strict;
use warnings;
use utf8;
use open qw(:std :encoding(UTF-8));
use FindBin;
use lib $FindBin::RealBin;
use BenchNumbers qw(median);
use File::Basename qw(dirname);
use POSIX qw(floor ceil);

my ($raw, $svg) = @ARGV;
die "usage: plot.pl RAW.tsv OUT.svg\n" unless $raw && $svg;

my @CONTENDERS = qw(local gunique trigger sidetable single);
my %COLOR = (local => '#1f77b4', gunique => '#d62728', trigger => '#2ca02c',
	sidetable => '#ff7f0e', single => '#7f7f7f');
my @PANELS = (['correlated', 'Correlated keys (b = a)'], ['random', 'Random keys (b = permutation of a)']);

# $v{variant}{partitions}{contender} = [µs/row of each run]; partitions "-"
# for single.
my %v;
open my $in, '<', $raw or die "plot.pl: $raw: $!\n";
while (<$in>) {
	chomp;
	my ($w, $variant, $parts, $c, $run, $value) = split /\t/;
	next unless defined $value && $w eq 'w2';
	push @{ $v{$variant}{$parts}{$c} }, $value;
}
close $in;
die "plot.pl: no workload 2 results in $raw\n" unless %v;

my %meta;
if (open my $mf, '<', dirname($raw) . '/meta.tsv') {
	while (<$mf>) { chomp; my ($k, $x) = split /\t/, $_, 2; $meta{$k} = $x if defined $x }
}


# Medians, the partition counts, the ranges of both axes.
my (%med, %partset, $ymin, $ymax);
for my $variant (keys %v) {
	for my $parts (keys %{ $v{$variant} }) {
		$partset{$parts} = 1 unless $parts eq '-';
		for my $c (keys %{ $v{$variant}{$parts} }) {
			my $m = median(@{ $v{$variant}{$parts}{$c} });
			next unless $m > 0;
			$med{$variant}{$parts}{$c} = $m;
			$ymin = $m if !defined $ymin || $m < $ymin;
			$ymax = $m if !defined $ymax || $m > $ymax;
		}
	}
}
my @parts = sort { $a <=> $b } keys %partset;
die "plot.pl: no partition counts\n" unless @parts;
my ($xlo, $xhi) = ($parts[0], $parts[-1]);
$xhi = $xlo * 2 if $xhi == $xlo;
my ($ylo, $yhi) = (10**floor(log($ymin) / log(10)), 10**ceil(log($ymax) / log(10)));
$yhi *= 10 if $yhi == $ylo;

# Geometry: two panels side by side, a legend below.
my ($pw, $ph) = (400, 300);                # plot area of one panel
my ($ml, $mr, $mt, $mb, $gap) = (70, 20, 70, 55, 90);
my $W = $ml + 2 * $pw + $gap + $mr;
my $H = $mt + $ph + $mb + 40;

sub xpos { my ($i, $x) = @_; return $ml + $i * ($pw + $gap) + $pw * (log($x / $xlo) / log($xhi / $xlo)) }
sub ypos { my $y = shift; return $mt + $ph - $ph * (log($y / $ylo) / log($yhi / $ylo)) }
sub num
{
	my $y = shift;
	return sprintf("%g", $y);
}
sub esc { my $s = shift; $s =~ s/&/&amp;/g; $s =~ s/</&lt;/g; $s =~ s/>/&gt;/g; return $s }

my $o = '';
$o .= qq{<?xml version="1.0" encoding="UTF-8"?>\n};
$o .= qq{<svg xmlns="http://www.w3.org/2000/svg" width="$W" height="$H" viewBox="0 0 $W $H" font-family="sans-serif" font-size="12">\n};
$o .= qq{<rect width="100%" height="100%" fill="white"/>\n};
my $title = 'Insert cost per row against the number of partitions';
my $sub = join(', ', grep { $_ } (
	$meta{scale} ? "scale $meta{scale}" : undef,
	$meta{runs} ? "median of $meta{runs} run" . ($meta{runs} eq '1' ? '' : 's') : undef,
	$meta{postgres} ? ($meta{postgres} =~ /^(PostgreSQL \S+)/)[0] : undef,
	$meta{nproc} ? "$meta{nproc} cores" : undef));
$o .= qq{<text x="} . ($W / 2) . qq{" y="22" text-anchor="middle" font-size="15" font-weight="bold">} . esc($title) . qq{</text>\n};
$o .= qq{<text x="} . ($W / 2) . qq{" y="40" text-anchor="middle" fill="#555">} . esc($sub) . qq{</text>\n} if $sub;

for my $i (0 .. $#PANELS) {
	my ($variant, $label) = @{ $PANELS[$i] };
	my $x0 = $ml + $i * ($pw + $gap);
	$o .= qq{<text x="} . ($x0 + $pw / 2) . qq{" y="} . ($mt - 10) . qq{" text-anchor="middle" font-weight="bold">} . esc($label) . qq{</text>\n};
	# grid and y labels: 1, 2, 5 per decade
	for (my $d = $ylo; $d < $yhi * 1.001; $d *= 10) {
		for my $m (1, 2, 5) {
			my $y = $d * $m;
			last if $y > $yhi * 1.001;
			my $py = ypos($y);
			my $major = $m == 1;
			$o .= sprintf(qq{<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s"/>\n},
				$x0, $py, $x0 + $pw, $py, $major ? '#ccc' : '#eee');
			$o .= sprintf(qq{<text x="%.1f" y="%.1f" text-anchor="end" fill="#333">%s</text>\n}, $x0 - 6, $py + 4, num($y));
		}
	}
	# x grid and labels at the measured partition counts
	for my $p (@parts) {
		my $px = xpos($i, $p);
		$o .= sprintf(qq{<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="#eee"/>\n}, $px, $mt, $px, $mt + $ph);
		$o .= sprintf(qq{<text x="%.1f" y="%d" text-anchor="middle" fill="#333">%s</text>\n}, $px, $mt + $ph + 16, $p);
	}
	$o .= qq{<rect x="$x0" y="$mt" width="$pw" height="$ph" fill="none" stroke="#333"/>\n};
	$o .= qq{<text x="} . ($x0 + $pw / 2) . qq{" y="} . ($mt + $ph + 36) . qq{" text-anchor="middle">partitions (log scale)</text>\n};
	$o .= qq{<text transform="translate(} . ($x0 - 48) . ',' . ($mt + $ph / 2) . qq{) rotate(-90)" text-anchor="middle">µs per inserted row (log scale)</text>\n};

	# the lines
	my $m = $med{$variant} or next;
	for my $c (@CONTENDERS) {
		if ($c eq 'single') {
			my $y = $m->{'-'}{single} or next;
			$o .= sprintf(qq{<line x1="%.1f" y1="%.1f" x2="%.1f" y2="%.1f" stroke="%s" stroke-width="2" stroke-dasharray="6,4"><title>single: %s µs/row</title></line>\n},
				$x0, ypos($y), $x0 + $pw, ypos($y), $COLOR{single}, num($y));
			next;
		}
		my @pts = map { [ $_, $m->{$_}{$c} ] } grep { $m->{$_}{$c} } @parts;
		next unless @pts;
		my $path = join(' ', map { sprintf('%.1f,%.1f', xpos($i, $_->[0]), ypos($_->[1])) } @pts);
		$o .= qq{<polyline points="$path" fill="none" stroke="$COLOR{$c}" stroke-width="2"/>\n};
		for my $pt (@pts) {
			$o .= sprintf(qq{<circle cx="%.1f" cy="%.1f" r="3.5" fill="%s"><title>%s, %d partitions: %s µs/row</title></circle>\n},
				xpos($i, $pt->[0]), ypos($pt->[1]), $COLOR{$c}, $c, $pt->[0], num($pt->[1]));
		}
	}
}

# legend, centred under the panels
my %drawn;
for my $variant (keys %med) { $drawn{$_} = 1 for map { keys %$_ } values %{ $med{$variant} } }
my @legend = grep { $drawn{$_} } @CONTENDERS;
my $lx = $W / 2 - @legend * 110 / 2;
my $ly = $H - 18;
for my $c (@legend) {
	my $dash = $c eq 'single' ? ' stroke-dasharray="6,4"' : '';
	$o .= sprintf(qq{<line x1="%.1f" y1="%d" x2="%.1f" y2="%d" stroke="%s" stroke-width="2"%s/>\n}, $lx, $ly - 4, $lx + 24, $ly - 4, $COLOR{$c}, $dash);
	$o .= sprintf(qq{<text x="%.1f" y="%d">%s</text>\n}, $lx + 30, $ly, $c);
	$lx += 110;
}
$o .= "</svg>\n";

open my $out, '>', $svg or die "plot.pl: $svg: $!\n";
print $out $o;
close $out;

# Copyright (c) gunique contributors
#
# README.md's SQL examples run as written.  Every ```sql block, in the
# order of the file, runs whole in one psql session against one new
# database, stopping at its first error.  A block that shows an error, as
# comment lines "-- ERROR:  ..." (with "-- DETAIL:  ..." or "-- HINT:  ..."
# lines) at its end, after the statement that fails, must fail with exactly
# those lines; any other block must succeed.
#
# A block for some PostgreSQL versions only starts with a marker line,
# "-- PostgreSQL N and later" or "-- before PostgreSQL N", and is skipped
# on the other versions.  A block that runs ON CONFLICT counts a server of
# 15 or 17 with the core change of contrib-patches/ as 18, which it
# matches there.  t/README.md documents the markers.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueOnConflict;

my $readme = "$FindBin::RealBin/../README.md";
open(my $fh, '<', $readme) or die "could not open $readme: $!";
my $text = do { local $/; <$fh> };
close($fh);

my @blocks = $text =~ /^```sql\n(.*?)^```$/gms;
cmp_ok(scalar(@blocks), '>=', 3, 'README.md has its SQL examples');

my $node = PostgreSQL::Test::Cluster->new('readme');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'gunique'");
$node->start;
$node->safe_psql('postgres', 'CREATE DATABASE readme');
my $patched = on_conflict_patched($node);

# Does the server count as PostgreSQL $major or later for this block?
sub at_least
{
	my ($major, $block) = @_;
	return 1 if $node->pg_version >= $major;
	return $major <= 18 && $patched && $block =~ /\bON CONFLICT\b/;
}

# Whether the block runs on this server, by its marker line; a line that
# looks like a marker but is none fails the test.
sub block_runs
{
	my ($first, $block, $name) = @_;
	return !at_least($1, $block)
	  if $first =~ /^-- before PostgreSQL (\d+)$/;
	return at_least($1, $block)
	  if $first =~ /^-- PostgreSQL (\d+) and later$/;
	unlike($first, qr/^--.*PostgreSQL \d/, "$name has no unknown marker");
	return 1;
}

my $n = 0;
foreach my $block (@blocks)
{
	$n++;
	my ($first) = $block =~ /^(.*)$/m;
	my $name = "example $n ($first)";
	if (!block_runs($first, $block, $name))
	{
	  SKIP:
		{
			skip "$name: not for PostgreSQL " . $node->pg_version, 1;
		}
		next;
	}
	my @want = $block =~ /^-- ((?:ERROR|DETAIL|HINT):  .*)$/mg;
	my ($ret, $stdout, $stderr) =
	  $node->psql('readme', $block, on_error_stop => 1);

	if (!@want)
	{
		is($ret, 0, "$name runs");
		unlike($stderr, qr/(ERROR|WARNING):/, "$name reports no error")
		  or diag($stderr);
		next;
	}
	like($block, qr/\n(?:-- (?:ERROR|DETAIL|HINT):  [^\n]*\n)+\z/,
		"$name shows its error at its end");
	isnt($ret, 0, "$name fails");
	foreach my $line (@want)
	{
		like($stderr, qr/\Q$line\E$/m, "$name says \"$line\"")
		  or diag($stderr);
	}
	# and no other error
	my @got = $stderr =~ /((?:ERROR|DETAIL|HINT):  .*)$/mg;
	is(scalar(@got), scalar(@want), "$name shows every line it reports")
	  or diag($stderr);
}

$node->stop;
done_testing();

# Copyright (c) gunique contributors
#
# A crash of a whole server, as a power cut would leave it: its postmaster
# and every process it started stopped at once, then killed, so that none
# of them writes, flushes or cleans up after another has gone.
package GuniqueCrash;

use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Time::HiRes qw(usleep);
use Exporter 'import';

our @EXPORT = qw(crash_node);

# Stop and kill $node's postmaster and its children (from /proc), and wait
# until they are gone, so that the next start finds its shared memory
# free.  Returns how many children there were.
sub crash_node
{
	my ($node) = @_;
	my $pm = $node->{_pid};
	my @children;
	opendir(my $proc, '/proc') or die "no /proc: $!";
	for my $pid (grep { /^\d+$/ } readdir $proc)
	{
		open(my $st, '<', "/proc/$pid/stat") or next;
		my $stat = <$st>;
		close $st;
		push @children, $pid
		  if defined $stat && $stat =~ /^\d+ \(.*\) \S (\d+) / && $1 == $pm;
	}
	closedir $proc;
	kill 'STOP', $pm, @children;
	kill 'KILL', @children;
	$node->kill9;
	for (1 .. 100)
	{
		last unless grep { kill 0, $_ } @children;
		usleep(100_000);
	}
	return scalar @children;
}

1;

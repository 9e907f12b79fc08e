# Copyright (c) gunique contributors
#
# psql sessions that a TAP test runs beside each other: each runs a script,
# in the background, under its own application_name, so that the test can
# see from pg_stat_activity where it waits.
package GuniqueSessions;

use strict;
use warnings;
use PostgreSQL::Test::Utils;
use Exporter 'import';
use IPC::Run;
use Time::HiRes qw(usleep);

our @EXPORT = qw(sessions_on session waits_for_lock finish hold release);

my $node;

# The cluster the sessions connect to.
sub sessions_on
{
	($node) = @_;
}

# A psql session running the script $sql in database $db (postgres),
# named $name.
sub session
{
	my ($name, $sql, $db) = @_;
	my %s = (name => $name, out => '', err => '');
	my $file = PostgreSQL::Test::Utils::tempdir() . "/$name.sql";
	local $ENV{PGAPPNAME} = $name;
	append_to_file($file, $sql);
	$s{h} = IPC::Run::start(
		[
			'psql', '-X', '-A', '-t', '-q', '-h', $node->host, '-p', $node->port,
			'-d', $db // 'postgres', '-f', $file
		],
		'<', \undef, '>', \$s{out}, '2>', \$s{err});
	return \%s;
}

# Wait until the session waits for a lock, or ends; true if it waits.
sub waits_for_lock
{
	my ($s) = @_;
	my $deadline = time + $PostgreSQL::Test::Utils::timeout_default;
	while (time < $deadline)
	{
		$s->{h}->pump_nb if $s->{h}->pumpable;
		return 0 unless $s->{h}->pumpable;
		return 1 if $node->safe_psql(
			'postgres', qq{
SELECT count(*) FROM pg_stat_activity
WHERE application_name = '$s->{name}' AND wait_event_type = 'Lock'}) == 1;
		usleep(100_000);
	}
	die "session $s->{name} neither waits nor ends";
}

sub finish
{
	my ($s) = @_;
	$s->{h}->finish;
	return ($s->{out} =~ s/\s+$//r, $s->{err});
}

# A session that runs $sql, then sleeps, holding what it took: returned
# once it sleeps.
sub hold
{
	my ($name, $sql, $db) = @_;
	my $s = session($name, $sql . "SELECT pg_sleep(600);\n", $db);
	$node->poll_query_until(
		'postgres', qq{
SELECT count(*) = 1 FROM pg_stat_activity
WHERE application_name = '$name' AND query LIKE 'SELECT pg_sleep%'});
	return $s;
}

# End the sleep of sessions made by hold: each then ends (psql reaches the
# end of its script), its transaction rolled back.
sub release
{
	my @s = @_;
	my $names = join(', ', map { "'$_->{name}'" } @s);
	$node->safe_psql('postgres', qq{
SELECT pg_cancel_backend(pid) FROM pg_stat_activity
WHERE application_name IN ($names)});
	finish($_) for @s;
}

1;

# Copyright (c) gunique contributors
#
# The sessions of t/006_stateful.pl: psql processes fed one statement at a
# time, each followed by a marker that carries the statement's SQLSTATE;
# the control session (checks and wait detection); the server log, watched
# for crashes and checked; the trace of the last steps, and fail_now, which
# reports a failure with the seed, the step, the trace and the rows of t.
package GuniqueStatefulSessions;

use strict;
use warnings;
use Exporter 'import';
use IPC::Run;
use Time::HiRes qw(time usleep);
use Test::More;
use GuniqueStatefulModel qw($bulk_base);

our @EXPORT = qw(
  sessions_on sess_new sess_send sess_poll sess_wait sess_close sess_kill
  watch_server ctl_query ctl_retry trace fail_now short_err check_log
  $ctl $failed @trace $stepno);

my ($node, $seed);

# The cluster the sessions connect to, and the run's seed (for a failure's
# report).
sub sessions_on
{
	($node, $seed) = @_;
}

sub sess_new
{
	my ($name) = @_;
	my $s = { name => $name, in => '', out => '', err => '', seq => 0 };
	$s->{h} = IPC::Run::start(
		[
			'psql', '-X', '-q', '-A', '-t', '-v', 'ON_ERROR_STOP=0',
			'-h', $node->host, '-p', $node->port, '-d', 'postgres'
		],
		'<', \$s->{in}, '>', \$s->{out}, '2>', \$s->{err});
	$s->{in} .= "\\set VERBOSITY verbose\n";
	sess_send($s, 'SELECT pg_backend_pid()');
	my ($st, $out) = sess_wait($s);
	die "session $name: $st $s->{lasterr}" unless $st eq '00000';
	$s->{pid} = $out + 0;
	return $s;
}

sub sess_send
{
	my ($s, $sql, $data) = @_;
	$s->{seq}++;
	$s->{copy} = defined $data;
	$s->{in} .= "$sql;\n" . ($data // '') . "\\echo \@\@END $s->{seq} :SQLSTATE :ROW_COUNT \@\@\n";
	$s->{h}->pump_nb;
}

# Has the last statement ended?  Then (sqlstate, stdout, psql's ROW_COUNT).
sub sess_poll
{
	my ($s) = @_;
	$s->{h}->pump_nb if $s->{h}->pumpable;
	if ($s->{out} =~ s/^(.*?)\@\@END $s->{seq} (\S+) (\S+) \@\@\n//s)
	{
		my ($out, $st, $rows) = ($1, $2, $3);
		# psql does not set SQLSTATE after COPY FROM STDIN: take it from
		# the error, if any
		if ($s->{copy})
		{
			$st = $s->{err} =~ /^(?:ERROR|FATAL):  ([0-9A-Z]{5}):/m ? $1 : '00000';
		}
		$s->{lasterr} = $s->{err};
		$s->{err} = '';
		chomp $out;
		return ($st, $out, $rows);
	}
	return ('dead', '') unless $s->{h}->pumpable;
	return;
}

sub sess_wait
{
	my ($s) = @_;
	my $deadline = time + 300;
	while (1)
	{
		my @r = sess_poll($s);
		return @r if @r;
		watch_server();
		die "session $s->{name}: no answer in 300 s" if time > $deadline;
		usleep(2000);
	}
}

# A server process that died of a signal the test did not send, or an
# assertion failure or PANIC, fails the test at once (a session whose
# backend is gone may otherwise wait for an answer that never comes).
my ($watch_pos, $watch_at, $killed_pid) = (0, 0, 0);

sub watch_server
{
	return if time - $watch_at < 0.2;
	$watch_at = time;
	return if -s $node->logfile <= $watch_pos;
	open(my $fh, '<', $node->logfile) or die;
	seek($fh, $watch_pos, 0);
	my @bad;
	while (my $line = <$fh>)
	{
		last unless $line =~ /\n$/;
		$watch_pos += length($line);
		next if $line =~ /\(PID $killed_pid\) was terminated by signal 9/;
		push @bad, $line
		  if $line =~ /TRAP:|PANIC|terminated by signal|terminated by exception/
		  || (@bad && $line =~ /Failed process was running/);
	}
	close $fh;
	fail_now("the server crashed:\n" . join('', @bad)) if @bad;
}

sub sess_close
{
	my ($s) = @_;
	$s->{h}->kill_kill;
	eval { $s->{h}->finish };
}

# Kill the backend of session s (SIGKILL): the server log's report of it
# is the test's own (watch_server).
sub sess_kill
{
	my ($s) = @_;
	$killed_pid = $s->{pid};
	kill 'KILL', $s->{pid};
}

our $ctl;    # the control session: checks and wait detection

sub ctl_query
{
	my ($sql) = @_;
	sess_send($ctl, $sql);
	my ($st, $out) = sess_wait($ctl);
	fail_now("control query failed ($st): $sql\n$ctl->{lasterr}")
	  unless $st eq '00000';
	return $out;
}

# Run sql on the control session, again after a deadlock.
sub ctl_retry
{
	my ($sql) = @_;
	for (1 .. 50)
	{
		sess_send($ctl, $sql);
		my ($st) = sess_wait($ctl);
		return if $st eq '00000';
		fail_now("control query failed ($st): $sql\n$ctl->{lasterr}") unless $st eq '40P01';
		usleep(50_000);
	}
	fail_now("control query deadlocked 50 times: $sql");
}

#
# The trace of the last steps, and failures.
#
our $failed = 0;
our @trace;
our $stepno = 0;

sub trace
{
	my ($line) = @_;
	push @trace, "[$stepno] $line";
	shift @trace if @trace > 60;
}

sub fail_now
{
	my ($what) = @_;
	die "FAILED\n" if $failed;    # already reported
	$failed = 1;
	diag "seed $seed, step $stepno: $what";
	check_log('at the failure', 1);
	diag "recent steps:\n" . join("\n", @trace);
	my ($out, $err) = ('', '');
	$node->psql('postgres',
		"SET lock_timeout = '5s'; SELECT tableoid::regclass, k FROM t WHERE k < $bulk_base ORDER BY k; SELECT * FROM gunique_verify('t_k')",
		stdout => \$out, stderr => \$err);
	diag "rows of t now:\n$out$err";
	$failed = 1;
	die "FAILED\n";
}

# An error's message and detail, without the verbose lines.
sub short_err
{
	my ($e) = @_;
	return join(' ', grep { /^(ERROR|FATAL|DETAIL|PANIC)/ } split /\n/, $e);
}

my $logpos = 0;

# The server log since the last look: no assertion failure, PANIC,
# internal error (XX000), nor a process ended by a signal but the test's
# SIGKILL; at a failure ($report_only), what there is is only shown.
sub check_log
{
	my ($what, $report_only) = @_;
	open(my $fh, '<', $node->logfile) or die;
	seek($fh, $logpos, 0);
	my @bad;
	while (my $line = <$fh>)
	{
		push @bad, $line
		  if $line =~ /TRAP:|PANIC|\] XX\d\d\d:|terminated by signal (?!9:)|terminated by exception/;
	}
	$logpos = tell($fh);
	close $fh;
	return diag("server log:\n" . join('', @bad)) if $report_only && @bad;
	fail_now("server log ($what):\n" . join('', @bad)) if @bad;
}

1;

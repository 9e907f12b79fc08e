# Copyright (c) gunique contributors
#
# REINDEX INDEX CONCURRENTLY of the leaves while rows go in.  For a while
# each partition has two indexes that take every insert (the copy being
# built and the leaf, then the leaf and the index it replaced), and
# inserters that saw the swap probe through one of them while those that
# did not probe through the other.  Inserts must neither fail (no internal
# error, no unique violation for keys that nobody else inserted) nor let a
# duplicate in; the server must not crash.
#
# Two pgbench clients insert keys drawn from a sequence (and the same keys
# as text, in other case, under a partial expression index), then keys that
# repeat across partitions (which must fail with unique violations only),
# while two more pgbench processes reindex the two leaves concurrently in a
# loop.  GUNIQUE_REINDEX_SECONDS sets how long each phase runs (default 8).
# A REINDEX CONCURRENTLY copy of an expression or partial index stores its
# expressions without their token locations: it must still be recognized
# as its leaf's sibling.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;

my $seconds = $ENV{GUNIQUE_REINDEX_SECONDS} // 8;

my $node = PostgreSQL::Test::Cluster->new('reindex');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
max_connections = 20
log_min_messages = warning
});
$node->start;

$node->safe_psql(
	'postgres', q{
CREATE EXTENSION gunique;
CREATE TABLE rc (p int NOT NULL, k bigint) PARTITION BY RANGE (p);
CREATE TABLE rc_0 PARTITION OF rc FOR VALUES FROM (0) TO (1);
CREATE TABLE rc_1 PARTITION OF rc FOR VALUES FROM (1) TO (2);
CREATE UNIQUE INDEX rc_k_idx ON rc USING gunique (k);
CREATE TABLE rx (p int NOT NULL, s text) PARTITION BY RANGE (p);
CREATE TABLE rx_0 PARTITION OF rx FOR VALUES FROM (0) TO (1);
CREATE TABLE rx_1 PARTITION OF rx FOR VALUES FROM (1) TO (2);
CREATE UNIQUE INDEX rx_s_idx ON rx USING gunique (lower(s)) WHERE p >= 0;
CREATE SEQUENCE rc_seq;
CREATE TABLE outcomes (state text, msg text);
CREATE FUNCTION attempt(p int, k bigint) RETURNS void
LANGUAGE plpgsql AS $f$
BEGIN
	INSERT INTO rc VALUES (p, k);
	INSERT INTO rx VALUES (1 - p, CASE WHEN k % 2 = 0 THEN 'Key' ELSE 'kEY' END || k);
EXCEPTION WHEN OTHERS THEN
	INSERT INTO outcomes VALUES (SQLSTATE, SQLERRM);
END
$f$;
});

my $leaf0 = $node->safe_psql('postgres',
	q{SELECT indexrelid::regclass FROM pg_index WHERE indrelid = 'rc_0'::regclass});
my $leaf1 = $node->safe_psql('postgres',
	q{SELECT indexrelid::regclass FROM pg_index WHERE indrelid = 'rc_1'::regclass});
my $xleaf0 = $node->safe_psql('postgres',
	q{SELECT indexrelid::regclass FROM pg_index WHERE indrelid = 'rx_0'::regclass});
my $xleaf1 = $node->safe_psql('postgres',
	q{SELECT indexrelid::regclass FROM pg_index WHERE indrelid = 'rx_1'::regclass});

my $dir = PostgreSQL::Test::Utils::tempdir;

sub script
{
	my ($name, $text) = @_;
	my $file = "$dir/$name.sql";
	open my $fh, '>', $file or die "cannot write $file: $!";
	print $fh $text;
	close $fh;
	return $file;
}

my $fresh = script('fresh',
	"\\set p random(0, 1)\nSELECT attempt(:p, nextval('rc_seq'));\n");
my $clash = script('clash',
	"\\set p random(0, 1)\n\\set k random(1, 200)\nSELECT attempt(:p, -:k);\n");
my $ri0 = script('ri0',
	"REINDEX INDEX CONCURRENTLY $leaf0;\nREINDEX INDEX CONCURRENTLY $xleaf0;\n");
my $ri1 = script('ri1',
	"REINDEX INDEX CONCURRENTLY $leaf1;\nREINDEX INDEX CONCURRENTLY $xleaf1;\n");

sub pgbench_start
{
	my ($clients, $file, $out, $err) = @_;
	return IPC::Run::start(
		[
			'pgbench', '-n', '-c', $clients, '-T', $seconds,
			'-f', $file, '-h', $node->host, '-p', $node->port, 'postgres'
		],
		'>', $out, '2>', $err);
}

for my $phase ([ 'sequence keys', $fresh ], [ 'repeated keys', $clash ])
{
	my ($label, $file) = @$phase;
	my (@out, @err, @runs);

	for my $i (0 .. 2)
	{
		$out[$i] = '';
		$err[$i] = '';
	}
	push @runs, pgbench_start(2, $file, \$out[0], \$err[0]);
	push @runs, pgbench_start(1, $ri0, \$out[1], \$err[1]);
	push @runs, pgbench_start(1, $ri1, \$out[2], \$err[2]);
	for my $i (0 .. 2)
	{
		ok($runs[$i]->finish,
			"$label: pgbench run $i ends with no client aborted")
		  or diag($err[$i]);
	}

	my $bad = $node->safe_psql('postgres',
		q{SELECT count(*) FROM outcomes WHERE state <> '23505'});
	is($bad, '0', "$label: inserts fail with unique violations only")
	  or diag($node->safe_psql('postgres',
		q{SELECT state, msg, count(*) FROM outcomes WHERE state <> '23505' GROUP BY 1, 2}));
	if ($label eq 'sequence keys')
	{
		is($node->safe_psql('postgres', 'SELECT count(*) FROM outcomes'),
			'0', "$label: no insert of a key nobody else holds fails");
	}
	is( $node->safe_psql(
			'postgres', 'SELECT count(*) FROM (SELECT k FROM rc GROUP BY k HAVING count(*) > 1) d'),
		'0',
		"$label: no key is held twice");
	is( $node->safe_psql(
			'postgres', 'SELECT count(*) FROM (SELECT lower(s) FROM rx GROUP BY 1 HAVING count(*) > 1) d'),
		'0',
		"$label: no expression key is held twice");
	is($node->safe_psql('postgres', q{SELECT count(*) FROM gunique_verify('rc_k_idx')}),
		'0', "$label: gunique_verify finds no duplicate");
	is($node->safe_psql('postgres', q{SELECT count(*) FROM gunique_verify('rx_s_idx')}),
		'0', "$label: gunique_verify finds no duplicate of an expression key");
	$node->safe_psql('postgres', 'TRUNCATE outcomes');
}

is($node->safe_psql('postgres',
		q{SELECT count(*) FROM pg_index WHERE indrelid IN ('rc_0'::regclass, 'rc_1'::regclass, 'rx_0'::regclass, 'rx_1'::regclass)}),
	'4', 'each partition is left with one index');

my $log = slurp_file($node->logfile);
unlike($log, qr/terminated by signal|TRAP:|PANIC:/,
	'no backend crashed');
unlike($log, qr/missing from its gunique index tree|is not part of its gunique index tree/,
	'no insert lost its place in the tree');

$node->stop;
done_testing();

# Copyright (c) gunique contributors
#
# Key ranges and filters saved at a clean shutdown, loaded at start.  A
# file that is current is loaded before any connection, and inserts use it
# at once; a file that is stale (WAL written after it was saved), truncated
# or corrupt, or left by a crash (none is saved then), is never trusted:
# the filters are built again, and every duplicate is still refused.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueFilterTable;

my $parts = 64;
my $all = $parts + 1;
my $node = PostgreSQL::Test::Cluster->new('saved');
$node->init(allows_streaming => 1);    # wal_level replica: a standby start
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
autovacuum = off
});
$node->start;
create_filter_table($node, $parts);
is($node->safe_psql('postgres', 'SELECT filters FROM gunique_filter_memory()'),
	$all, 'CREATE INDEX builds the filters');

my $file = $node->data_dir . '/gunique_filters.dat';
my $sample = refused_sample($parts);
my $next = 1;    # odd keys, new

# Inserts of 1,000 new keys: how many btrees of other partitions searched.
sub searched
{
	my $from = $next;
	$next += 2000;
	$node->safe_psql('postgres', 'SELECT gunique_probe_stats_reset()');
	$node->safe_psql('postgres',
		"INSERT INTO t SELECT i % 640000, kf(i) FROM generate_series($from, $from + 1998, 2) i");
	return $node->safe_psql('postgres',
		'SELECT sum(partitions_probed) - sum(inserts) FROM gunique_stat_probes');
}

# A clean restart: the file is loaded before any connection.
$node->stop;
ok(-f $file, 'a clean shutdown saves the filters');
$node->start;
ok($node->log_contains(qr/gunique loaded $all key ranges and $all filters saved at the last shutdown/),
	'the postmaster loads them at start');
ok(!-f $file, 'and removes the file');
is($node->safe_psql('postgres', 'SELECT filters FROM gunique_filter_memory()'),
	$all, 'the filters are there before the first insert');
cmp_ok(searched(), '<=', 10, 'new keys search no other partition from the first insert');
is($node->safe_psql('postgres', $sample), '0',
	'with the loaded filters, every key is refused in another partition');

# Restart, with damage done to the file while the server is down.
sub restart_with
{
	my ($what, $damage, $reason) = @_;
	my $log = -s $node->logfile;
	$node->stop;
	ok(-f $file, "$what: the file is saved");
	$damage->();
	$node->start;
	ok( $node->log_contains(
			qr/gunique did not load the key filters saved in "gunique_filters.dat"\n.*DETAIL:  \Q$reason\E/,
			$log),
		"$what: the file is not trusted, and the log says why");
	ok(!-f $file, "$what: the file is removed");
	# a file found corrupt after part of it was loaded leaves nothing
	is( $node->safe_psql(
			'postgres', 'SELECT filters, used_bytes FROM gunique_filter_memory()'),
		'0|0',
		"$what: no filter of it is kept");
	is($node->safe_psql('postgres', $sample), '0',
		"$what: every key is refused in another partition");
	is($node->safe_psql('postgres', "SELECT count(*) FROM gunique_verify('t_k')"),
		'0', "$what: gunique_verify finds nothing");
	$node->safe_psql('postgres', "SELECT gunique_build_filters('t_k')");
}

restart_with(
	'truncated',
	sub { truncate($file, (-s $file) / 2) or die "truncate: $!" },
	'The file is not as long as its header says.');

restart_with(
	'corrupt',
	sub {
		open(my $fh, '+<', $file) or die "open: $!";
		binmode $fh;
		seek($fh, int((-s $file) / 2), 0);
		read($fh, my $byte, 1);
		seek($fh, int((-s $file) / 2), 0);
		print $fh chr(ord($byte) ^ 0x5a);
		close $fh;
	},
	'The file is truncated or corrupt.');

# A header whose byte count of filters is absurd: the server starts (the
# room set aside for loaded filters is sized only by counts that fit in
# the file, and never beyond gunique.filter_memory), and the CRC, which
# covers the header, refuses the file.
restart_with(
	'absurd header',
	sub {
		open(my $fh, '+<', $file) or die "open: $!";
		binmode $fh;
		seek($fh, 40, 0);    # PersistHeader.filter_bytes
		print $fh pack('Q', 1 << 50);
		close $fh;
	},
	'The file is truncated or corrupt.');

# Written by another release (its format version, right after the magic
# number, changed): keys may hash otherwise there.
restart_with(
	'another release',
	sub {
		open(my $fh, '+<', $file) or die "open: $!";
		binmode $fh;
		seek($fh, 4, 0);
		print $fh pack('L', 999);
		close $fh;
	},
	'The file was not written by this release of gunique for this release of PostgreSQL.');

# Stale: the server ran without gunique after the save, and wrote WAL (a
# key in the table could not have been inserted then: the inserts are
# refused without the library).
restart_with(
	'stale',
	sub {
		$node->adjust_conf('postgresql.conf', 'shared_preload_libraries', "''");
		$node->start;
		$node->safe_psql('postgres', 'CREATE TABLE other (x int); INSERT INTO other VALUES (1)');
		$node->stop;
		$node->adjust_conf('postgresql.conf', 'shared_preload_libraries', "'gunique'");
	},
	'WAL was written after the file was saved.');

# Started as a standby (then promoted), the server replays WAL that no
# summary saw: the file is not loaded.
{
	my $log = -s $node->logfile;
	$node->stop;
	ok(-f $file, 'standby: the file is saved');
	$node->set_standby_mode;
	$node->start;
	ok( $node->log_contains(
			qr/gunique did not load the key filters saved in "gunique_filters.dat"\n.*DETAIL:  The server starts in recovery/,
			$log),
		'standby: the file is not loaded, and the log says why');
	ok(!-f $file, 'standby: the file is removed');
	$node->promote;
	$node->poll_query_until('postgres', 'SELECT NOT pg_is_in_recovery()')
	  or die "the node was not promoted";
	is($node->safe_psql('postgres', $sample), '0',
		'standby, promoted: every key is refused in another partition');
	$node->safe_psql('postgres', "SELECT gunique_build_filters('t_k')");
}

# With WAL archiving, a clean shutdown switches WAL segments before its
# checkpoint: the switch alone after the save still lets the file load.
{
	$node->append_conf('postgresql.conf', qq{
archive_mode = on
archive_command = 'true'
});
	$node->restart;
	$node->safe_psql('postgres', "SELECT gunique_build_filters('t_k')");
	$node->safe_psql('postgres', 'INSERT INTO other VALUES (2)');
	my $log = -s $node->logfile;
	$node->stop;
	ok(-f $file, 'archiving: the file is saved');
	$node->start;
	ok($node->log_contains(qr/gunique loaded $all key ranges and $all filters saved at the last shutdown/, $log),
		'archiving: the file is loaded after the shutdown\'s segment switch');
	is($node->safe_psql('postgres', $sample), '0',
		'archiving: every key is refused in another partition');
}

# A crash saves nothing; the filters are built again, in the background.
$node->stop('immediate');
ok(!-f $file, 'an immediate shutdown saves nothing');
$node->start;
is($node->safe_psql('postgres', 'SELECT filters FROM gunique_filter_memory()'),
	'0', 'after a crash, no filter is loaded');
is($node->safe_psql('postgres', $sample), '0',
	'after a crash, every key is refused in another partition');

# A dropped database takes its entries and filters with it: none is left
# to be saved, or found by a database that gets its OID again.
{
	# nothing left for the background worker to build meanwhile
	$node->safe_psql('postgres', "SELECT gunique_build_filters('t_k')");
	$node->poll_query_until('postgres',
		'SELECT count(*) = 0 FROM gunique_filter_builds()')
	  or die "filter builds still queued";
	my $before = $node->safe_psql('postgres',
		'SELECT filters FROM gunique_filter_memory()');
	$node->safe_psql('postgres', 'CREATE DATABASE other_db');
	$node->safe_psql(
		'other_db', qq{
CREATE EXTENSION gunique;
CREATE TABLE o (a int NOT NULL, k bigint) PARTITION BY RANGE (a);
SELECT format('CREATE TABLE o_%s PARTITION OF o FOR VALUES FROM (%s) TO (%s)',
			  p, p * 1000, (p + 1) * 1000) FROM generate_series(0, 3) p \\gexec
INSERT INTO o SELECT i, i FROM generate_series(0, 3999) i;
CREATE UNIQUE INDEX o_k ON o USING gunique (k);
});
	cmp_ok($node->safe_psql('postgres', 'SELECT filters FROM gunique_filter_memory()'),
		'>', $before, 'the other database\'s index has filters');
	$node->safe_psql('postgres', 'DROP DATABASE other_db');
	is($node->safe_psql('postgres', 'SELECT filters FROM gunique_filter_memory()'),
		$before, 'DROP DATABASE frees its filters');
}

done_testing();

# Copyright (c) gunique contributors
#
# Key filter memory that runs out.  With a small gunique.filter_memory,
# CREATE INDEX and ATTACH ask for more filters than there is room for: the
# leaves that get none must be left without one, and nothing may be written
# through the reference of a filter that was never allocated.  Once that
# wrote into the arena's first filter, whose header (its size class and
# free-list link) it could corrupt, so that two leaves shared memory and
# one's filter could lose keys.
#
# Several trees are built in turn in 64 kB of filter memory (256 kB: the
# area's first segment), with keys of
# two kinds (bigint, and text e-mail addresses); then keys are inserted,
# every duplicate across partitions must still be refused, and
# gunique_verify finds nothing.  Then, with room, filters take as many bytes
# per key for text keys as for bigint keys: they are sized by the keys an
# index holds, not by its pages.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('filtermem');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
gunique.filter_memory = 64
});
$node->start;
$node->safe_psql('postgres', 'CREATE EXTENSION gunique');

for my $round (1 .. 4)
{
	my ($type, $gen) =
	  $round % 2
	  ? ('bigint', 'i * 7')
	  : ('text', q{'user' || md5(i::text) || '@example.com'});

	$node->safe_psql(
		'postgres', qq{
CREATE TABLE t$round (a int NOT NULL, k $type) PARTITION BY RANGE (a);
SELECT format('CREATE TABLE t${round}_%s PARTITION OF t$round FOR VALUES FROM (%s) TO (%s)',
			  p, p * 1000, (p + 1) * 1000) FROM generate_series(0, 19) p \\gexec
INSERT INTO t$round SELECT i % 20000, $gen FROM generate_series(1, 40000) i;
CREATE UNIQUE INDEX t${round}_k ON t$round USING gunique (k);
CREATE TABLE t${round}_new (a int NOT NULL, k $type);
INSERT INTO t${round}_new SELECT 20000 + i % 1000, $gen FROM generate_series(40001, 45000) i;
ALTER TABLE t$round ATTACH PARTITION t${round}_new FOR VALUES FROM (20000) TO (21000);
INSERT INTO t$round SELECT i % 21000, $gen FROM generate_series(45001, 60000) i;
});

	my ($ret, $out, $err) = $node->psql('postgres',
		"INSERT INTO t$round SELECT (i + 500) % 21000, $gen FROM generate_series(1, 60000, 997) i");
	like($err, qr/duplicate key value violates unique constraint/,
		"round $round ($type): a key already in another partition is refused");

	my $refused = 0;
	for my $i (3, 4000, 40002, 59999)
	{
		my ($r, $o, $e) = $node->psql('postgres',
			"INSERT INTO t$round SELECT ($i + 1) % 21000, $gen FROM (SELECT $i AS i) s");
		$refused++ if $e =~ /duplicate key value violates unique constraint/;
	}
	is($refused, 4, "round $round ($type): single keys from every load refused elsewhere");

	is($node->safe_psql('postgres', "SELECT count(*) FROM gunique_verify('t${round}_k')"),
		'0', "round $round ($type): gunique_verify finds nothing");
}

ok($node->safe_psql('postgres', 'SELECT 1') eq '1', 'the server is still up');

# The refusals are counted and logged, with the limit (the area's first
# segment, 256 kB, whatever is set below it).
is( $node->safe_psql(
		'postgres',
		'SELECT limit_bytes = 256 * 1024, filters_refused > 0, used_bytes > 0 FROM gunique_filter_memory()'),
	't|t|t',
	'gunique_filter_memory() shows the limit, the bytes used and the filters refused');
ok( $node->log_contains(
		qr/LOG:  gunique could not make a key filter of \d+ bytes: key filters use \d+ bytes of the 262144 that gunique.filter_memory allows/
	),
	'a filter refused for want of room is logged');

# A bigger limit takes effect at a reload: a new table gets its filters.
my $before = $node->safe_psql('postgres',
	'SELECT filters FROM gunique_filter_memory()');
$node->safe_psql('postgres', "ALTER SYSTEM SET gunique.filter_memory = '64MB'");
$node->reload;
$node->safe_psql(
	'postgres', q{
CREATE TABLE big (a int NOT NULL, k bigint) PARTITION BY RANGE (a);
SELECT format('CREATE TABLE big_%s PARTITION OF big FOR VALUES FROM (%s) TO (%s)',
			  p, p * 10000, (p + 1) * 10000) FROM generate_series(0, 19) p \gexec
INSERT INTO big SELECT i, i * 7 FROM generate_series(0, 199999) i;
CREATE UNIQUE INDEX big_k ON big USING gunique (k);
});
is( $node->safe_psql(
		'postgres',
		"SELECT limit_bytes = 64 * 1024 * 1024, filters >= $before + 21 FROM gunique_filter_memory()"
	),
	't|t',
	'after a reload with a bigger limit, a new tree gets a filter per partition and one for the table');
my ($r, $o, $e) = $node->psql('postgres', 'INSERT INTO big VALUES (3, 700)');
like($e, qr/duplicate key value violates unique constraint/,
	'a key of another partition is refused');

# Filters are sized by the keys an index holds, not by its pages: a text
# key's take as many bytes as a bigint key's for as many keys.  A guess of
# keys per page made them nearly three times as large for these e-mail
# addresses.  80 partitions: the table's filter is tagged, the largest.
my %bytes;
for my $type ('bigint', 'text')
{
	my $gen = $type eq 'bigint' ? 'i * 7' : q{'user' || md5(i::text) || '@example.com'};
	$node->safe_psql(
		'postgres', qq{
CREATE TABLE w_$type (a int NOT NULL, k $type) PARTITION BY RANGE (a);
SELECT format('CREATE TABLE w_${type}_%s PARTITION OF w_$type FOR VALUES FROM (%s) TO (%s)',
			  p, p * 2000, (p + 1) * 2000) FROM generate_series(0, 79) p \\gexec
INSERT INTO w_$type SELECT i, $gen FROM generate_series(0, 159999) i;
});
	$node->poll_query_until('postgres',
		'SELECT count(*) = 0 FROM gunique_filter_builds()')
	  or die 'filter builds did not end';
	my $before = $node->safe_psql('postgres',
		'SELECT used_bytes FROM gunique_filter_memory()');
	$node->safe_psql('postgres',
		"CREATE UNIQUE INDEX w_${type}_k ON w_$type USING gunique (k)");
	$bytes{$type} = $node->safe_psql('postgres',
		'SELECT used_bytes FROM gunique_filter_memory()') - $before;
}
note "filters of 160,000 keys: bigint $bytes{bigint} bytes, text $bytes{text}";
cmp_ok($bytes{bigint}, '>', 160000 * 5, 'bigint keys get filters');
cmp_ok(abs($bytes{text} - $bytes{bigint}), '<=', $bytes{bigint} / 10,
	'text keys take as much filter memory as bigint keys, key for key');

done_testing();

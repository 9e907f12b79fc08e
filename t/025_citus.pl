# Copyright (c) gunique contributors
#
# Citus beside gunique: a coordinator and two workers that preload citus
# and then gunique (t/lib/GuniqueCitus.pm) run a distributed table, its
# shards spread over both workers, its rows counted through the coordinator
# and on each worker.  Skipped where Citus is not installed (PostgreSQL 15,
# which Citus 14 does not support, or a build without the vendored
# tarball: tools/install-deps).

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueCitus;

plan skip_all => 'Citus is not installed for this PostgreSQL (tools/install-deps builds it into 17 and 18)'
  unless citus_available();

my ($coord, @workers) = citus_cluster();

is( $coord->safe_psql(
		'postgres',
		q{SELECT string_agg(nodeport::text, ',' ORDER BY nodeport)
			FROM pg_dist_node WHERE noderole = 'primary' AND shouldhaveshards}),
	join(',', sort { $a <=> $b } map { $_->port } @workers),
	'the coordinator lists both workers as nodes for shards');
is( $coord->safe_psql(
		'postgres', q{SELECT extname FROM pg_extension WHERE extname IN ('citus', 'gunique')
			ORDER BY 1}),
	"citus\ngunique",
	'citus and gunique are created on the coordinator');

$coord->safe_psql(
	'postgres', q{
CREATE TABLE ev (tenant int, id bigint, payload text);
SELECT create_distributed_table('ev', 'tenant');
INSERT INTO ev SELECT i % 40, i, 'p' || i FROM generate_series(1, 2000) i;
});

is($coord->safe_psql('postgres', 'SELECT count(*), count(DISTINCT tenant) FROM ev'),
	'2000|40', 'the coordinator counts every row of every tenant');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM ev WHERE tenant = 7'),
	'50', 'a query by the distribution column finds its tenant');

# citus_shards: where each shard is; run_command_on_shards: the rows each
# shard holds, summed by the worker it is on
is( $coord->safe_psql(
		'postgres', q{
SELECT string_agg(nodeport::text, ',' ORDER BY nodeport)
  FROM (SELECT DISTINCT nodeport FROM citus_shards WHERE table_name = 'ev'::regclass) s}),
	join(',', sort { $a <=> $b } map { $_->port } @workers),
	'the shards of ev are spread over both workers');
my %rows = split /[|\n]/, $coord->safe_psql(
	'postgres', q{
SELECT s.nodeport, sum(r.result::bigint)
  FROM run_command_on_shards('ev', 'SELECT count(*) FROM %s') r
  JOIN citus_shards s USING (shardid)
 WHERE r.success
 GROUP BY s.nodeport});
my $sum = 0;
foreach my $worker (@workers)
{
	my $n = $rows{ $worker->port } // 0;
	$sum += $n;
	ok($n > 0, 'worker ' . $worker->name . ' holds rows of ev');
	# the workers have Citus's metadata too, and query the whole table
	is($worker->safe_psql('postgres', 'SELECT count(*) FROM ev'),
		'2000', 'worker ' . $worker->name . ' counts every row of ev');
}
is($sum, 2000, 'the rows on the workers add up to the rows of ev');

# A global gunique key on ev's id: one key table, distributed by id, that
# every INSERT, UPDATE and DELETE keeps in the transaction of the row.
my $pg18 = $coord->safe_psql('postgres', 'SHOW server_version_num') >= 180000;
$coord->safe_psql('postgres', 'CREATE UNIQUE INDEX ev_id ON ev USING gunique (id)');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM gunique_keys."public.ev_id"'),
	'2000', 'CREATE INDEX fills the key table with every key');

my ($ret, $out, $err) = $coord->psql('postgres',
	"INSERT INTO ev VALUES (3, 5, 'dup')", extra_params => [ '-v', 'VERBOSITY=verbose' ]);
like($err, qr/23505: duplicate key value violates unique constraint "ev_id"/,
	'a key held by another tenant\'s row is a unique violation');
like($err, qr/Key \(id\)=\(5\) already exists in the row with \(tenant\)=\(5\)/,
	'the detail says which row holds the key');
($ret, $out, $err) = $coord->psql('postgres',
	"INSERT INTO ev VALUES (1, 9001, 'a'), (2, 9001, 'b')");
like($err, qr/duplicate key value/, 'a key twice in one INSERT is a unique violation');
($ret, $out, $err) = $coord->psql('postgres',
	"BEGIN; INSERT INTO ev VALUES (1, 9002, 'a'); INSERT INTO ev VALUES (2, 9002, 'b'); COMMIT");
like($err, qr/duplicate key value/, 'a key twice in one transaction is a unique violation');
# a second global key, on payload: a row whose id is new but whose payload
# is held fails on the second key, and its first key goes with it
($ret, $out, $err) = $coord->psql('postgres',
	q{CREATE UNIQUE INDEX ev_id_bad ON ev USING gunique (payload);
	  INSERT INTO ev VALUES (1, 9003, 'p1')});
is($coord->safe_psql('postgres', 'SELECT count(*) FROM ev WHERE id >= 9000'),
	'0', 'no row of a refused INSERT is left on any worker');

is($coord->safe_psql('postgres', "INSERT INTO ev VALUES (1, 9004, 'n') RETURNING tenant, id"),
	'1|9004', 'INSERT ... RETURNING returns the user\'s columns only');
$coord->safe_psql('postgres', 'DELETE FROM ev WHERE id = 9004');
$coord->safe_psql('postgres', "INSERT INTO ev VALUES (2, 9004, 'again')");
is($coord->safe_psql('postgres', 'SELECT tenant FROM gunique_keys."public.ev_id" WHERE id = 9004'),
	'2', 'a deleted key can be inserted again, under another tenant');

if ($pg18)
{
	($ret, $out, $err) = $coord->psql('postgres', 'UPDATE ev SET id = 43 WHERE id = 44');
	like($err, qr/duplicate key value/, 'UPDATE to a key another shard holds is a unique violation');
	$coord->safe_psql('postgres', 'UPDATE ev SET id = id + 100000');
	is($coord->safe_psql('postgres',
		'SELECT count(*), min(id) FROM gunique_keys."public.ev_id"'),
		'2001|100001', 'an UPDATE of every key moves every key');
}
else
{
	($ret, $out, $err) = $coord->psql('postgres', 'UPDATE ev SET id = 43 WHERE id = 44');
	like($err, qr/requires PostgreSQL 18/, 'UPDATE of the key is refused before 18');
}

($ret, $out, $err) = $coord->psql('postgres', "INSERT INTO ev VALUES (1, 1, 'x') ON CONFLICT DO NOTHING");
like($err, qr/ON CONFLICT is not supported/, 'ON CONFLICT is refused with a reason');
($ret, $out, $err) = $coord->psql('postgres', 'ALTER INDEX ev_id RENAME TO ev_id2');
like($err, qr/cannot rename index "ev_id"/, 'renaming the index is refused');

# COPY goes through INSERT, TRUNCATE empties the key table too
$coord->safe_psql('postgres', "COPY ev (tenant, id, payload) FROM PROGRAM 'printf \"5\\t777777\\tc\\n\"'");
is($coord->safe_psql('postgres', 'SELECT tenant FROM gunique_keys."public.ev_id" WHERE id = 777777'),
	'5', 'COPY adds its keys');
($ret, $out, $err) = $coord->psql('postgres', "COPY ev (tenant, id) FROM PROGRAM 'printf \"6\\t777777\\n\"'");
like($err, qr/duplicate key value/, 'COPY of a held key is a unique violation');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM ev WHERE id = 777777'), '1',
	'and leaves no row');

my $key_rows = $coord->safe_psql('postgres', 'SELECT count(*) FROM gunique_keys."public.ev_id"');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM ev'), $key_rows,
	'the key table has one row per row of ev');
my $pairs = q{SELECT md5(string_agg(id || ':' || tenant, ',' ORDER BY id)) FROM };
is($coord->safe_psql('postgres', $pairs . 'gunique_keys."public.ev_id"'),
	$coord->safe_psql('postgres', $pairs . 'ev WHERE id IS NOT NULL'),
	'every key names its row\'s tenant');
$coord->safe_psql('postgres', 'TRUNCATE ev');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM gunique_keys."public.ev_id"'),
	'0', 'TRUNCATE empties the key table');
$coord->safe_psql('postgres', 'DROP INDEX ev_id');
is($coord->safe_psql('postgres', q{SELECT to_regclass('gunique_keys."public.ev_id"') IS NULL}),
	't', 'DROP INDEX drops the key table');

$_->stop foreach ($coord, @workers);

done_testing();

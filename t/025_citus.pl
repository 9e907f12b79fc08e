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
# the first global key makes the schema of the key tables: a user who may
# not create schemas is refused, with the reason
$coord->safe_psql('postgres', q{CREATE ROLE noschema LOGIN;
	CREATE TABLE evn (tenant int, id int);
	SELECT create_distributed_table('evn', 'tenant');
	ALTER TABLE evn OWNER TO noschema;});
my (undef, undef, $noschema_err) = $coord->psql('postgres',
	"SET ROLE noschema; CREATE UNIQUE INDEX evn_id ON evn USING gunique (id)");
like($noschema_err, qr/permission denied to create schema "gunique_keys".*HINT:  Make the first global key as a superuser/s,
	'a first global key by a user who may not create schemas is refused');
$coord->safe_psql('postgres', 'DROP TABLE evn');
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
# many keys go in INSERTs of 64, 32, ... rows, a thousand and more in one
# INSERT ... SELECT: a held key among them, or one twice, is found all the
# same
($ret, $out, $err) = $coord->psql('postgres',
	q{INSERT INTO ev SELECT g % 40, 100000 + g, 'm' FROM generate_series(1, 199) g
	  UNION ALL SELECT 3, 5, 'held'});
like($err, qr/Key \(id\)=\(5\) already exists in the row with \(tenant\)=\(5\)/,
	'a held key among many new ones is a unique violation that names it');
($ret, $out, $err) = $coord->psql('postgres',
	q{INSERT INTO ev SELECT g % 40, 100000 + g, 'm' FROM generate_series(1, 199) g
	  UNION ALL SELECT 5, 100001, 'twice'});
like($err, qr/Key \(id\)=\(100001\) already exists/, 'so is a key twice among many');
($ret, $out, $err) = $coord->psql('postgres',
	q{INSERT INTO ev SELECT g % 40, 100000 + g, 'm' FROM generate_series(1, 1199) g
	  UNION ALL SELECT 3, 5, 'held'});
like($err, qr/Key \(id\)=\(5\) already exists in the row with \(tenant\)=\(5\)/,
	'and among a thousand and more, which go in one INSERT ... SELECT');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM ev WHERE id > 100000'),
	'0', 'and neither leaves a row');
# a second global key, on payload: a row whose id is new but whose payload
# is held fails on the second key, and its first key goes with it
($ret, $out, $err) = $coord->psql('postgres',
	q{CREATE UNIQUE INDEX ev_id_bad ON ev USING gunique (payload);
	  INSERT INTO ev VALUES (1, 9003, 'p1')});
($ret, $out, $err) = $coord->psql('postgres',
	"SET citus.function_opens_transaction_block = off; INSERT INTO ev VALUES (7, 9005, 'p2')");
like($err, qr/duplicate key value/,
	'a held key is refused with citus.function_opens_transaction_block off too');
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
# The key table of an index on every node, its shards included (which
# Citus hides unless told): DROP INDEX must take the key table's shards
# and shells on the workers too, or the index cannot be made again.
sub key_tables_everywhere
{
	my ($index) = @_;
	my $sql = qq{SET citus.override_table_visibility TO off;
		SELECT count(*) FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
		WHERE n.nspname = 'gunique_keys' AND c.relname ~ '^$index(_pkey)?(_[0-9]+)?\$'};
	return join ',', map { $_->safe_psql('postgres', $sql) } ($coord, @workers);
}
is(key_tables_everywhere('public\\.ev_id'), '0,0,0', 'DROP INDEX drops the key table on every node');
$coord->safe_psql('postgres', 'CREATE UNIQUE INDEX ev_id ON ev USING gunique (id)');
ok(key_tables_everywhere('public\\.ev_id') ne '0,0,0', 'the index can be made again after DROP INDEX');

sub refused
{
	my ($sql, $pattern, $name) = @_;
	my ($r, $o, $e) = $coord->psql('postgres', $sql);
	like($e, $pattern, $name);
}

# what would part the index from its key table, or the key table from the
# table, is refused
refused('ALTER TABLE ev ALTER COLUMN id TYPE numeric',
	qr/cannot change the type of column "id" of table "ev"/,
	'a new type for a key column is refused');
refused('ALTER TABLE ev RENAME COLUMN tenant TO t2',
	qr/cannot rename column "tenant" of table "ev"/,
	'renaming the distribution column is refused');
refused('ALTER TABLE ev_id RENAME TO ev_id3',
	qr/cannot rename index "ev_id"/, 'renaming the index by ALTER TABLE is refused');
refused('DROP INDEX CONCURRENTLY ev_id',
	qr/cannot drop global gunique key "ev_id" concurrently/,
	'DROP INDEX CONCURRENTLY is refused');
refused('CREATE SCHEMA s2; ALTER TABLE ev SET SCHEMA s2',
	qr/cannot move table "ev" to another schema/, 'moving the table is refused');
refused('ALTER SCHEMA public RENAME TO p2',
	qr/cannot rename schema "public"/, 'renaming the index\'s schema is refused');
refused(q{MERGE INTO ev USING (SELECT 1 AS a) s ON false
		WHEN NOT MATCHED THEN INSERT VALUES (1, 424242, null)},
	qr/MERGE is not supported on distributed table "ev"/, 'MERGE is refused');
refused('CREATE UNIQUE INDEX ev_p ON ev USING gunique (payload) WHERE id > 0',
	qr/cannot be partial or NULLS NOT DISTINCT/, 'a partial global key is refused');
refused('CREATE UNIQUE INDEX ev_n ON ev USING gunique (payload) NULLS NOT DISTINCT',
	qr/cannot be partial or NULLS NOT DISTINCT/, 'NULLS NOT DISTINCT is refused');
refused('CREATE UNIQUE INDEX ev_e ON ev USING gunique ((id + 1))',
	qr/must be made of columns/, 'a key expression is refused');
refused('CREATE UNIQUE INDEX ev_o ON ev USING gunique (payload text_pattern_ops)',
	qr/must use the default operator class and collation/,
	'an operator class other than the default is refused');
refused('CREATE UNIQUE INDEX ev_t ON ev USING gunique (tenant, id)',
	qr/cannot include its distribution column "tenant"/,
	'a key with the distribution column is left to Citus');
refused('CREATE UNIQUE INDEX CONCURRENTLY ev_c ON ev USING gunique (payload)',
	qr/CREATE INDEX CONCURRENTLY of a global gunique key/, 'CONCURRENTLY is refused');
refused('CREATE UNIQUE INDEX ' . ('a' x 63) . ' ON ev USING gunique (payload)',
	qr/the key table name "public\.a+" is too long/, 'a name too long for the key table is refused');

# a statement that drops the index without dropping its key table first
$coord->safe_psql('postgres', q{
CREATE SCHEMA s3;
CREATE TABLE s3.ev (tenant int, id int);
SELECT create_distributed_table('s3.ev', 'tenant');
CREATE UNIQUE INDEX ev_id ON s3.ev USING gunique (id);
});
refused('DROP SCHEMA s3 CASCADE',
	qr/cannot drop global gunique key "ev_id" this way/, 'DROP SCHEMA ... CASCADE is refused');
$coord->safe_psql('postgres', 'DROP TABLE s3.ev; DROP SCHEMA s3');
is(key_tables_everywhere('s3\\.ev_id'), '0,0,0', 'DROP TABLE drops the table\'s key table on every node');

# a CREATE INDEX rolled back leaves no key table; a dropped key column
# takes its key table
$coord->safe_psql('postgres',
	'BEGIN; CREATE UNIQUE INDEX ev_pay ON ev USING gunique (payload); ROLLBACK');
is(key_tables_everywhere('public\\.ev_pay'), '0,0,0', 'a rolled-back CREATE INDEX leaves no key table');
$coord->safe_psql('postgres', q{ALTER TABLE ev ADD COLUMN code text;
	CREATE UNIQUE INDEX ev_code ON ev USING gunique (code);
	ALTER TABLE ev DROP COLUMN code});
is(key_tables_everywhere('public\\.ev_code'), '0,0,0', 'dropping a key column drops its key table on every node');

# statements sent to a worker, which has Citus's metadata, are checked too
$coord->safe_psql('postgres', "INSERT INTO ev VALUES (1, 31337, 'c')");
my ($wret, $wout, $werr) = $workers[0]->psql('postgres', "INSERT INTO ev VALUES (2, 31337, 'w')");
like($werr, qr/duplicate key value violates unique constraint "ev_id"/,
	'an INSERT sent to a worker is checked against the key table');
$workers[0]->safe_psql('postgres', "INSERT INTO ev VALUES (2, 31338, 'w')");
is($coord->safe_psql('postgres', 'SELECT tenant FROM gunique_keys."public.ev_id" WHERE id = 31338'),
	'2', 'and a worker\'s INSERT adds its key');

# Lookups by the whole key that leave out the distribution column go to
# one shard of the key table and then to the row's shard, not to every
# shard: counted as the statements Citus sends to shards.
sub remote_statements
{
	my ($node, $sql) = @_;
	my ($r, $o, $e) = $node->psql('postgres', "SET citus.log_remote_commands = on;\n$sql");
	# statements on a shard (named "<table>_<shard id>"), not Citus's own
	my $n = () = $e =~ /(?:issuing|executing the command locally:) (?:SELECT|UPDATE|DELETE)[^\n]*_[0-9]{4,}\b/g;
	return ($n, $o, $e);
}
$coord->safe_psql('postgres', 'DROP INDEX ev_id_bad');
my ($n, $rows);
($n, $rows) = remote_statements($coord, 'SELECT tenant, payload FROM ev WHERE id = 31337');
is("$n $rows", '2 1|c', 'a lookup by the key reads the key table\'s shard and the row\'s shard');
($n, $rows) = remote_statements($coord, 'SELECT count(*) FROM ev WHERE id = 31337::int');
is("$n $rows", '2 1', 'a key of another integer type is routed too');
($n, $rows) = remote_statements($coord, 'SELECT count(*) FROM ev WHERE id = 424242');
is("$n $rows", '1 0', 'a key no row holds reads only the key table\'s shard');
($n, $rows) = remote_statements($coord,
	'SELECT count(*) FROM ev WHERE id = 31337 OR id = 31338');
ok($n > 2 && $rows eq '2', 'a lookup by two keys reads every shard, and finds both rows');
($n, $rows) = remote_statements($coord, q{PREPARE byid(bigint) AS SELECT payload FROM ev WHERE id = $1;
	} . join('', map { "EXECUTE byid(" . (31337 + ($_ % 2)) . ");\n" } 1 .. 8));
is("$n " . join(',', split /\n/, $rows), '16 w,c,w,c,w,c,w,c',
	'a prepared lookup is routed by each execution\'s key, its generic plan too');
($n, $rows) = remote_statements($workers[1], 'SELECT tenant FROM ev WHERE id = 31338');
is("$n $rows", '2 2', 'a lookup sent to a worker is routed');
($n) = remote_statements($coord, "UPDATE ev SET payload = 'u' WHERE id = 31337");
is($n, 2, 'an UPDATE by the key goes to the row\'s shard only');
($n, $rows) = remote_statements($coord, "DELETE FROM ev WHERE id = 31338 RETURNING tenant");
is("$n $rows", '3 2', 'a DELETE by the key goes to the row\'s shard and the key\'s');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM gunique_keys."public.ev_id" WHERE id = 31338'),
	'0', 'and its key goes');

# a join is not routed: Citus must know a parameter's value when it plans
# one, and reads every shard
$coord->safe_psql('postgres', q{CREATE TABLE ref (tenant int, name text);
	SELECT create_reference_table('ref');
	INSERT INTO ref SELECT g, 't' || g FROM generate_series(0, 39) g});
($n, $rows) = remote_statements($coord,
	'SELECT r.name FROM ev e, ref r WHERE e.tenant = r.tenant AND e.id = 31337');
ok($n > 2 && $rows eq 't1', 'a join by the key reads every shard and finds the row');
refused("UPDATE ev SET tenant = 5 WHERE id = 31337",
	qr/modifying the partition value of rows is not allowed/,
	'an UPDATE of the distribution column by the key is Citus\'s to refuse (not routed)');

# the key table is written and read as its owner: a user who may write
# the table needs no privilege on it
$coord->safe_psql('postgres', q{CREATE ROLE app LOGIN;
	GRANT SELECT, INSERT, UPDATE, DELETE ON ev TO app});
my $app = "SET ROLE app;\n";
$coord->safe_psql('postgres', $app . "INSERT INTO ev VALUES (4, 31339, 'app')");
refused($app . "INSERT INTO ev VALUES (5, 31339, 'app')",
	qr/duplicate key value violates unique constraint "ev_id"/,
	'a user without privileges on the key table is checked against it');
is($coord->safe_psql('postgres', $app . 'SELECT tenant FROM ev WHERE id = 31339'),
	'4', 'and looks up by the key');
refused($app . 'SELECT * FROM gunique_keys."public.ev_id"',
	qr/permission denied for table "?public.ev_id/, 'but cannot read the key table itself');
# a user who may create tables makes a global key of its own (the schema
# of the key tables, made by the first global key, lets it), and owns its
# key table, but cannot drop another's
$coord->safe_psql('postgres', 'GRANT CREATE ON SCHEMA public TO app');
$coord->safe_psql('postgres', $app . q{CREATE TABLE eva (tenant int, id int);
	SELECT create_distributed_table('eva', 'tenant');
	INSERT INTO eva SELECT g % 10, g FROM generate_series(1, 50) g;
	CREATE UNIQUE INDEX eva_id ON eva USING gunique (id);});
is($coord->safe_psql('postgres', q{SELECT relowner::regrole || ' ' || count(*) OVER ()
	FROM pg_class WHERE oid = 'gunique_keys."public.eva_id"'::regclass}),
	'app 1', 'a user without privileges on the key tables makes a global key and owns its key table');
refused($app . 'INSERT INTO eva VALUES (3, 7)', qr/duplicate key value violates unique constraint "eva_id"/,
	'and its key is enforced');
refused($app . 'DROP TABLE gunique_keys."public.ev_id"', qr/must be owner of table/,
	'but it cannot drop another\'s key table');
# a distributed table another user made under the name of a plain table's
# index's key table is no key table: the plain table's writes and DROP
# INDEX leave it alone
$coord->safe_psql('postgres', q{CREATE ROLE squat LOGIN;
	CREATE TABLE plain_t (tenant int, id int);
	CREATE UNIQUE INDEX plain_t_id ON plain_t USING gunique (id);});
$coord->safe_psql('postgres', q{SET ROLE squat;
	CREATE TABLE gunique_keys."public.plain_t_id" (id int PRIMARY KEY, tenant int);
	SELECT create_distributed_table('gunique_keys."public.plain_t_id"', 'id');});
$coord->safe_psql('postgres', q{INSERT INTO plain_t VALUES (1, 1), (2, 2);
	DROP INDEX plain_t_id;});
is($coord->safe_psql('postgres', q{SELECT count(*) FROM gunique_keys."public.plain_t_id"}),
	'0', 'a table named as a plain table\'s key table by another user is left alone');
$coord->safe_psql('postgres', q{DROP TABLE gunique_keys."public.plain_t_id", plain_t});
# and may empty it with TRUNCATE, which empties the key table too
$coord->safe_psql('postgres', q{CREATE TABLE evt (tenant int, id int);
	SELECT create_distributed_table('evt', 'tenant');
	CREATE UNIQUE INDEX evt_id ON evt USING gunique (id);
	INSERT INTO evt SELECT g, g FROM generate_series(1, 50) g;
	GRANT SELECT, INSERT, TRUNCATE ON evt TO app});
$coord->safe_psql('postgres', $app . 'TRUNCATE evt');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM gunique_keys."public.evt_id"'),
	'0', 'a TRUNCATE by a user who may truncate the table empties the key table');
$coord->safe_psql('postgres', $app . 'INSERT INTO evt VALUES (1, 1)');
refused($app . 'INSERT INTO evt VALUES (2, 1)',
	qr/duplicate key value violates unique constraint "evt_id"/, 'and the key is enforced after it');
$coord->safe_psql('postgres', 'DROP TABLE evt');

# gunique_verify checks the key table against the rows on every node
is($coord->safe_psql('postgres', q{SELECT count(*) FROM gunique_verify('ev_id', true)}),
	'0', 'gunique_verify finds the key table exact');
$coord->safe_psql('postgres', q{
DELETE FROM gunique_keys."public.ev_id" WHERE id = 31337;
INSERT INTO gunique_keys."public.ev_id" VALUES (555555, 3);
});
is($coord->safe_psql('postgres', q{SELECT string_agg(problem || ': ' || detail, E'\n' ORDER BY detail)
	FROM gunique_verify('ev_id')}),
	qq{key table not exact: Key (id)=(31337) of the row with (tenant)=(1) is not in key table "public.ev_id".\n}
	  . qq{key table not exact: Key (id)=(555555) with (tenant)=(3) is in key table "public.ev_id" but in no row of the table.},
	'gunique_verify reports a key missing from the key table and a stray one');
$coord->safe_psql('postgres', q{
DELETE FROM gunique_keys."public.ev_id" WHERE id = 555555;
INSERT INTO gunique_keys."public.ev_id" VALUES (31337, 1);
});

# create_distributed_table of a table with a gunique index is Citus's to
# refuse; in one transaction, the index dropped and made again after it
# keeps the key enforced throughout (the table stays locked)
$coord->safe_psql('postgres', q{
CREATE TABLE loc (tenant int, id bigint);
INSERT INTO loc SELECT g % 7, g FROM generate_series(1, 300) g;
CREATE UNIQUE INDEX loc_id ON loc USING gunique (id);
});
refused(q{SELECT create_distributed_table('loc', 'tenant')},
	qr/cannot have UNIQUE, EXCLUDE, or PRIMARY KEY constraints that do not include the partition column/,
	'create_distributed_table of a table with a gunique index is refused by Citus');
$coord->safe_psql('postgres', q{
BEGIN;
SET LOCAL citus.multi_shard_modify_mode TO 'sequential';
DROP INDEX loc_id;
SELECT create_distributed_table('loc', 'tenant');
CREATE UNIQUE INDEX loc_id ON loc USING gunique (id);
COMMIT;
});
refused(q{INSERT INTO loc VALUES (2, 10)}, qr/duplicate key value violates unique constraint "loc_id/,
	'the README\'s way to distribute it keeps the key');

# A partitioned distributed table: the coordinator's index is a gunique
# tree over empty partitions, each shard's a tree over its partitions'
# shards, and the key table checks across them all.
$coord->safe_psql('postgres', q{
CREATE TABLE pev (tenant int, id bigint, ts date) PARTITION BY RANGE (ts);
CREATE TABLE pev_1 PARTITION OF pev FOR VALUES FROM ('2026-01-01') TO ('2026-02-01');
CREATE TABLE pev_2 PARTITION OF pev FOR VALUES FROM ('2026-02-01') TO ('2026-03-01');
SELECT create_distributed_table('pev', 'tenant', shard_count => 4);
INSERT INTO pev SELECT g % 10, g, date '2026-01-01' + g % 50 FROM generate_series(1, 500) g;
CREATE UNIQUE INDEX pev_id ON pev USING gunique (id);
CREATE TABLE pev_3 PARTITION OF pev FOR VALUES FROM ('2026-03-01') TO ('2026-04-01');
});
is($coord->safe_psql('postgres', 'SELECT count(*) FROM gunique_keys."public.pev_id"'),
	'500', 'CREATE INDEX on a partitioned distributed table fills its key table');
my $refusals = 0;
foreach my $t (0 .. 9)
{
	my ($r, $o, $e) = $coord->psql('postgres', "INSERT INTO pev VALUES ($t, 7, '2026-03-10')");
	$refusals++ if $e =~ /duplicate key value violates unique constraint/;
}
is($refusals, 10, 'a held key is refused in a new partition, from every tenant');
is($coord->safe_psql('postgres', 'SELECT count(*) FROM pev WHERE id = 7'), '1',
	'and no copy of it is left');
$coord->safe_psql('postgres', "INSERT INTO pev VALUES (4, 1001, '2026-03-10')");
($n, $rows) = remote_statements($coord, 'SELECT tenant, ts FROM pev WHERE id = 1001');
is("$n $rows", '2 4|2026-03-10', 'a lookup by the key on a partitioned table is routed');
# Citus builds the shards' indexes over more connections than the one it
# turned DDL propagation off on: each takes the statement as unique
$coord->safe_psql('postgres', q{
CREATE TABLE pev32 (tenant int, id bigint, payload text) PARTITION BY HASH (payload);
CREATE TABLE pev32_p0 PARTITION OF pev32 FOR VALUES WITH (MODULUS 2, REMAINDER 0);
CREATE TABLE pev32_p1 PARTITION OF pev32 FOR VALUES WITH (MODULUS 2, REMAINDER 1);
SELECT create_distributed_table('pev32', 'tenant', shard_count => 32);
INSERT INTO pev32 SELECT g % 50, g, 'p' || g FROM generate_series(1, 10000) g;
CREATE UNIQUE INDEX pev32_id ON pev32 USING gunique (id);
DROP INDEX pev32_id;
CREATE UNIQUE INDEX pev32_id ON pev32 USING gunique (id);
});
is($coord->safe_psql('postgres', 'SELECT count(*) FROM gunique_keys."public.pev32_id"'),
	'10000', 'CREATE INDEX again on a partitioned table of 32 shards with rows');
$coord->safe_psql('postgres', 'DROP TABLE pev32');
refused('ALTER TABLE pev DETACH PARTITION pev_3',
	qr/cannot attach or detach a partition of table "pev"/, 'DETACH PARTITION is refused');

# a worker reads key table shards of its own locally: a conflict found
# there names the right key and its holder (the key table read again in
# a new snapshot); many keys in a session that plans generically go in as
# in any other (Citus cannot plan that INSERT ... SELECT generically)
my $elsewhere = $coord->safe_psql('postgres', q{SELECT min(t) FROM generate_series(0, 39) t
	WHERE get_shard_id_for_distribution_column('ev', t) <> get_shard_id_for_distribution_column('ev', 4)});
foreach my $worker (@workers)
{
	my ($r, $o, $e) = $worker->psql('postgres',
		qq{INSERT INTO ev SELECT g % 40, 200000 + g, 'w' FROM generate_series(1, 99) g
		  UNION ALL SELECT $elsewhere, 31339, 'held'});
	like($e, qr/Key \(id\)=\(31339\) already exists in the row with \(tenant\)=\(4\)/,
		'a held key among many, sent to worker ' . $worker->name . ', is named with its holder');
}
$coord->safe_psql('postgres', q{SET plan_cache_mode = force_generic_plan;
	INSERT INTO ev SELECT g % 40, 300000 + g, 'g' FROM generate_series(1, 1100) g});
is($coord->safe_psql('postgres', 'SELECT count(*) FROM gunique_keys."public.ev_id" WHERE id > 300000'),
	'1100', 'a thousand keys go in with plan_cache_mode = force_generic_plan');
$coord->safe_psql('postgres', 'DELETE FROM ev WHERE id > 300000');

# Citus's functions that make the table again: the new table's index makes
# a new key table, the old table's DROP takes the old one
$coord->safe_psql('postgres', q{
CREATE TABLE ev2 (tenant int, id int);
SELECT create_distributed_table('ev2', 'tenant', colocate_with := 'none');
INSERT INTO ev2 SELECT g % 10, g FROM generate_series(1, 100) g;
CREATE UNIQUE INDEX ev2_id ON ev2 USING gunique (id);
SELECT alter_distributed_table('ev2', shard_count := 8);
});
is($coord->safe_psql('postgres', 'SELECT count(*) FROM gunique_keys."public.ev2_id"'),
	'100', 'alter_distributed_table makes and fills the key table again');
refused('INSERT INTO ev2 VALUES (3, 5)', qr/duplicate key value violates unique constraint "ev2_id"/,
	'and the key is enforced after it');
$coord->safe_psql('postgres', q{SELECT undistribute_table('ev2')});
is(key_tables_everywhere('public\\.ev2_id'), '0,0,0',
	'undistribute_table drops the key table on every node');
refused('INSERT INTO ev2 VALUES (3, 5)', qr/duplicate key value violates unique constraint "ev2_id"/,
	'and the local table\'s index enforces the key');

# a node removed and added again: Citus drops the shells it kept (the
# key tables' and the indexes' among them) and makes them again
my $w3 = citus_add_worker($coord, 'citus_worker3');
$coord->safe_psql('postgres',
	sprintf(q{SELECT citus_remove_node('%s', %d)}, $w3->host, $w3->port));
$coord->safe_psql('postgres',
	sprintf(q{SELECT citus_add_node('%s', %d)}, $w3->host, $w3->port));
my ($r3, $o3, $e3) = $w3->psql('postgres', "INSERT INTO ev VALUES (1, 31339, 'again')");
like($e3, qr/duplicate key value violates unique constraint "ev_id"/,
	'a node added again checks the key');

# pg_dump of the coordinator restores the key table as a plain table
# beside a local table and its gunique index: that table is then no key
# table (writes and lookups of the restored table leave it alone), and a
# global key made after create_distributed_table refuses it by name
my $dump = PostgreSQL::Test::Utils::tempdir() . '/coord.sql';
$coord->command_ok([ 'pg_dump', '-f', $dump, '-d', $coord->connstr('postgres') ],
	'pg_dump of the coordinator');
$coord->safe_psql('postgres', 'CREATE DATABASE restored');
$coord->command_ok(
	[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', $dump, '-d', $coord->connstr('restored') ],
	'the dump restores into another database');
my $kept = $coord->safe_psql('restored', 'SELECT count(*) FROM gunique_keys."public.ev_id"');
$coord->safe_psql('restored', q{
INSERT INTO ev VALUES (4, 777001, 'restored');
DELETE FROM ev WHERE id = 31337;});
is($coord->safe_psql('restored', q{SELECT count(*) FROM gunique_keys."public.ev_id"}),
	$kept, 'the restored table\'s writes leave the restored key table alone');
is($coord->safe_psql('restored', 'SELECT tenant FROM ev WHERE id = 777001'),
	'4', 'and it is read by the key as a local table');
my ($rr, $ro, $re) = $coord->psql('restored', "INSERT INTO ev VALUES (5, 777001, 'again')");
like($re, qr/duplicate key value violates unique constraint "ev_id"/,
	'and its local gunique index enforces the key');
$coord->safe_psql('postgres', q{
CREATE TABLE evr (tenant int, id int);
SELECT create_distributed_table('evr', 'tenant');
CREATE TABLE gunique_keys."public.evr_id" (id int, tenant int);});
refused('CREATE UNIQUE INDEX evr_id ON evr USING gunique (id)',
	qr/table "public.evr_id" already exists in schema "gunique_keys".*HINT:  Drop the table/s,
	'a global key refuses a plain table of its key table\'s name');
$coord->safe_psql('postgres', q{
DROP TABLE gunique_keys."public.evr_id";
CREATE UNIQUE INDEX evr_id ON evr USING gunique (id);
INSERT INTO evr VALUES (1, 1);});
refused('INSERT INTO evr VALUES (2, 1)', qr/duplicate key value violates unique constraint "evr_id"/,
	'and is made once it is dropped');

$_->stop foreach ($coord, @workers, $w3);

done_testing();

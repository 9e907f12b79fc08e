# Copyright (c) gunique contributors
#
# The library installs its utility hook only when preloaded.  Without the
# preload, gunique still works as a plain unique index, and every statement
# that needs the hook fails with an error that says how to fix it.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $setup = q{
	CREATE EXTENSION gunique;
	CREATE TABLE plain (a int, b text);
	CREATE TABLE parted (a int, b int) PARTITION BY RANGE (a);
	CREATE TABLE parted_1 PARTITION OF parted FOR VALUES FROM (0) TO (10);
	CREATE TABLE parted_2 PARTITION OF parted FOR VALUES FROM (10) TO (20);
};

# A server without the preload.
my $bare = PostgreSQL::Test::Cluster->new('bare');
$bare->init;
$bare->start;
$bare->safe_psql('postgres', $setup);

# Plain tables need no hook.
$bare->safe_psql('postgres',
	'CREATE UNIQUE INDEX plain_a ON plain USING gunique (a);
	 INSERT INTO plain VALUES (1, $$x$$);');
my ($ret, $stdout, $stderr) =
  $bare->psql('postgres', 'INSERT INTO plain VALUES (1, $$y$$)');
like($stderr, qr/duplicate key value violates unique constraint "plain_a"/,
	'without preload: plain table keeps local uniqueness');

# Partitioned tables need the hook: the statement fails with our error, not
# PostgreSQL's partition-key message.
($ret, $stdout, $stderr) = $bare->psql(
	'postgres',
	'\set VERBOSITY verbose
	 CREATE UNIQUE INDEX parted_b ON parted USING gunique (b)');
isnt($ret, 0, 'without preload: partitioned CREATE UNIQUE INDEX fails');
like($stderr, qr/55000/, 'without preload: SQLSTATE is object_not_in_prerequisite_state');
like($stderr,
	qr/gunique must be loaded via shared_preload_libraries to create a gunique index on a partitioned table/,
	'without preload: the error names the missing preload');
like($stderr,
	qr/HINT:\s+Add "gunique" to shared_preload_libraries in postgresql.conf and restart the server/,
	'without preload: the hint says how to fix it');
unlike($stderr, qr/partition key|partitioning columns/,
	'without preload: no partition-key message from PostgreSQL');

# The same from inside a function: the guard is an event trigger, so it also
# fires for statements that do not come from the client.
($ret, $stdout, $stderr) = $bare->psql(
	'postgres',
	'DO $$BEGIN CREATE UNIQUE INDEX parted_b2 ON parted USING gunique (b); END$$');
like($stderr, qr/gunique must be loaded via shared_preload_libraries/,
	'without preload: guard also fires inside a DO block');

# A non-unique gunique index is refused either way.
($ret, $stdout, $stderr) =
  $bare->psql('postgres', 'CREATE INDEX plain_b ON plain USING gunique (b)');
like($stderr, qr/access method "gunique" supports only unique indexes/,
	'without preload: non-unique gunique index refused');
$bare->stop;

# A server with the preload: the hook handles the statement.
my $loaded = PostgreSQL::Test::Cluster->new('loaded');
$loaded->init;
$loaded->append_conf('postgresql.conf', "shared_preload_libraries = 'gunique'");
$loaded->start;
$loaded->safe_psql('postgres', $setup);
($ret, $stdout, $stderr) = $loaded->psql('postgres',
	'CREATE UNIQUE INDEX parted_b ON parted USING gunique (b)');
unlike($stderr, qr/shared_preload_libraries/,
	'with preload: no complaint about the preload');
unlike($stderr, qr/partition key|partitioning columns/,
	'with preload: no partition-key message from PostgreSQL');

is($ret, 0, 'with preload: partitioned CREATE UNIQUE INDEX succeeds');

($ret, $stdout, $stderr) =
  $loaded->psql('postgres', 'CREATE INDEX plain_b ON plain USING gunique (b)');
like($stderr, qr/access method "gunique" supports only unique indexes/,
	'with preload: non-unique gunique index refused');
$loaded->safe_psql('postgres', 'INSERT INTO parted VALUES (1, 1)');
($ret, $stdout, $stderr) =
  $loaded->psql('postgres', 'INSERT INTO parted VALUES (11, 1)');
like($stderr, qr/Key \(b\)=\(1\) already exists in partition "parted_1"/,
	'with preload: duplicate across partitions rejected');

# PostgreSQL 18 shows a module's version: the extension's, from
# gunique.control, the one place it is written.
SKIP:
{
	skip 'pg_get_loaded_modules() is new in PostgreSQL 18', 1
	  if $loaded->safe_psql('postgres', 'SHOW server_version_num') < 180000;
	is( $loaded->safe_psql(
			'postgres',
			q{SELECT m.version = e.extversion
				FROM pg_get_loaded_modules() m, pg_extension e
			   WHERE m.module_name = 'gunique' AND e.extname = 'gunique'}),
		't',
		'the module reports the extension\'s version');
}

# The same cluster restarted without the preload: every statement that would
# need the hook is refused, never silently unchecked.
$loaded->adjust_conf('postgresql.conf', 'shared_preload_libraries', "''");
$loaded->restart;
my %refused = (
	'INSERT INTO parted VALUES (12, 2)' => 'insert into a partition of a gunique index',
	'INSERT INTO parted_2 VALUES (12, 2)' => 'insert into a partition of a gunique index',
	'CREATE TABLE parted_3 PARTITION OF parted FOR VALUES FROM (20) TO (30) PARTITION BY RANGE (b)'
	  => 'create a partition of a table with a gunique index',
	'CREATE TABLE parted_4 PARTITION OF parted FOR VALUES FROM (30) TO (40)'
	  => 'create a partition of a table with a gunique index',
	'CREATE TABLE parted_5 (a int, b int); ALTER TABLE parted ATTACH PARTITION parted_5 FOR VALUES FROM (50) TO (60)'
	  => 'attach a partition to a gunique index',
	'REINDEX INDEX parted_b' => 'build a partition of a gunique index',
	'ALTER TABLE parted ALTER COLUMN b TYPE bigint'
	  => 'alter a column that a gunique index on a partitioned table depends on',);
foreach my $sql (sort keys %refused)
{
	($ret, $stdout, $stderr) = $loaded->psql('postgres', $sql);
	like(
		$stderr,
		qr/gunique must be loaded via shared_preload_libraries to \Q$refused{$sql}\E/,
		"without preload: refused: $sql");
}
is($loaded->safe_psql('postgres', 'SELECT count(*) FROM parted'),
	'1', 'without preload: nothing slipped in');
$loaded->stop;

done_testing();

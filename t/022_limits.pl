# Copyright (c) gunique contributors
#
# The limitations README.md documents that need a server setting, a second
# server or a client program, each as it behaves today (sql/limits.sql and
# sql/limits-upsert.sql have the others; src/README, "Limitations and the
# tests that pin them"):
#   - pg_amcheck passes over gunique's leaves without a word and exits 0,
#     even over a leaf that misses a row (it reports a btree that does);
#     asked for a leaf by name, it finds no btree index to check;
#     gunique_check_leaves finds the missing row;
#   - pgstattuple refuses a leaf (where the module is installed);
#   - parallel index builds on PostgreSQL 18 only;
#   - gunique.max_summaries is no hard limit: a server set to 4 keeps the
#     key ranges and filters of more leaves, in spare shared memory;
#   - without shared_preload_libraries, INSERT ... ON CONFLICT on a table
#     that is not partitioned hits PostgreSQL's internal error before 18;
#   - pg_upgrade (to a cluster of the same release here): the new cluster
#     needs the preload, which --check does not check, and the upgrade
#     fails with PostgreSQL's message without it (t/017 upgrades with it).

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueOnConflict;

my $node = PostgreSQL::Test::Cluster->new('limits');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
gunique.max_summaries = 4
autovacuum = off
});
$node->start;
$node->safe_psql(
	'postgres', q{
	CREATE EXTENSION gunique;
	CREATE EXTENSION amcheck;
	CREATE TABLE t (id int, p int) PARTITION BY LIST (p);
	CREATE TABLE t1 PARTITION OF t FOR VALUES IN (1);
	CREATE TABLE t2 PARTITION OF t FOR VALUES IN (2);
	CREATE UNIQUE INDEX t_id ON t USING gunique (id);
	INSERT INTO t SELECT i, 1 + i % 2 FROM generate_series(1, 1000) i;
	CREATE TABLE b (id int);
	CREATE UNIQUE INDEX b_id ON b USING btree (id);
	INSERT INTO b SELECT generate_series(1, 1000);
});

# A row inserted while the index takes no inserts has no entry in it
# (superuser catalog surgery, as in checkleaves.sql): the index is sound,
# and only a check of the heap against it finds the row missing.
sub insert_unindexed
{
	my ($index, $insert) = @_;
	$node->safe_psql(
		'postgres', qq{
		UPDATE pg_index SET indisready = false WHERE indexrelid = '$index'::regclass;
		$insert;
		UPDATE pg_index SET indisready = true WHERE indexrelid = '$index'::regclass;
	});
}

#
# pg_amcheck
#
insert_unindexed('t2_id_idx', 'INSERT INTO t VALUES (5000, 2)');
my @amcheck = (
	'pg_amcheck', '-h', $node->host, '-p', $node->port,
	'-d', 'postgres', '--heapallindexed');
$node->command_checks_all(\@amcheck, 0, [qr/^$/], [qr/^$/],
	'pg_amcheck passes over a leaf that misses a row, without a word');
my ($out, $err);
IPC::Run::run([ @amcheck, '--verbose' ], '>', \$out, '2>', \$err);
like($err, qr/checking btree index "postgres\.public\.b_id"/,
	'pg_amcheck --verbose names the btree');
unlike($err, qr/public\.t\d?_id/, 'and no gunique index');
$node->command_checks_all(
	[ @amcheck, '-i', 't2_id_idx' ],
	1, [qr/^$/],
	[qr/no btree indexes to check matching "t2_id_idx"/],
	'pg_amcheck asked for a leaf finds no btree index');
my $ret;
($ret, $out, $err) = $node->psql('postgres',
	"SELECT gunique_check_leaves('t_id', heapallindexed => true)");
like($err,
	qr/heap tuple \(\d+,\d+\) from table "t2" lacks matching index tuple within index "t2_id_idx"/,
	'gunique_check_leaves finds the missing row');
# the control: the same breakage in a btree, which pg_amcheck reports
insert_unindexed('b_id', 'INSERT INTO b VALUES (5000)');
$node->command_checks_all(
	\@amcheck, 2,
	[qr/lacks matching index tuple within index "b_id"/],
	[qr/^$/],
	'pg_amcheck reports a btree that misses a row');
$node->safe_psql('postgres', 'REINDEX TABLE t; REINDEX TABLE b');
is($node->safe_psql('postgres',
		"SELECT gunique_check_leaves('t_id', heapallindexed => true)"),
	'2', 'the leaves are whole again');

#
# pgstattuple, where it is installed (tools/install-deps does not build it
# for 17 and 18)
#
SKIP:
{
	skip 'pgstattuple is not installed', 2
	  unless $node->safe_psql('postgres',
		"SELECT count(*) FROM pg_available_extensions WHERE name = 'pgstattuple'") eq
	  '1';
	$node->safe_psql('postgres', 'CREATE EXTENSION pgstattuple');
	($ret, $out, $err) =
	  $node->psql('postgres', "SELECT * FROM pgstatindex('t1_id_idx')");
	like($err, qr/relation "t1_id_idx" is not a btree index/,
		'pgstattuple: pgstatindex refuses a leaf');
	($ret, $out, $err) =
	  $node->psql('postgres', "SELECT * FROM pgstattuple('t1_id_idx')");
	like($err, qr/index "t1_id_idx" \(.*\) is not supported/,
		'pgstattuple: pgstattuple refuses a leaf');
}

#
# Parallel index builds: PostgreSQL 15 plans workers only for btree, on 17
# gunique does not let them build, and 18 builds in parallel.
#
($ret, $out, $err) = $node->psql(
	'postgres', q{
	CREATE TABLE par (k int) WITH (parallel_workers = 2);
	SET max_parallel_maintenance_workers = 2;
	SET maintenance_work_mem = '128MB';
	SET client_min_messages = debug1;
	CREATE UNIQUE INDEX par_k ON par USING gunique (k);
	CREATE UNIQUE INDEX par_k_btree ON par USING btree (k);
});
like($err,
	qr/building index "par_k_btree" on table "par" with request for 2 parallel workers/,
	'parallel builds: a btree asks for workers');
like($err,
	$node->pg_version >= 18
	? qr/building index "par_k" on table "par" with request for 2 parallel workers/
	: qr/building index "par_k" on table "par" serially/,
	'parallel builds: a gunique index asks for workers on 18 only');

#
# gunique.max_summaries: entries past it take the shared memory PostgreSQL
# keeps spare, so eight leaves set to four still have their key ranges and
# filters, and new keys search no other partition.
#
is($node->safe_psql('postgres', 'SHOW gunique.max_summaries'),
	'4', 'max_summaries: set to 4');
my $filters = $node->safe_psql('postgres',
	'SELECT filters FROM gunique_filter_memory()');
$node->safe_psql(
	'postgres', q{
	CREATE TABLE ms (id bigint, p int) PARTITION BY LIST (p);
	SELECT format('CREATE TABLE ms_%s PARTITION OF ms FOR VALUES IN (%s)', i, i)
	  FROM generate_series(0, 7) i \gexec
	INSERT INTO ms SELECT i, i % 8 FROM generate_series(1, 8000) i;
	CREATE UNIQUE INDEX ms_id ON ms USING gunique (id);
	SELECT gunique_probe_stats_reset();
	INSERT INTO ms SELECT i, i % 8 FROM generate_series(100001, 101000) i;
});
is( $node->safe_psql(
		'postgres', "SELECT filters - $filters FROM gunique_filter_memory()"),
	'8',
	'max_summaries: eight leaves past a setting of four have filters');
is( $node->safe_psql(
		'postgres',
		"SELECT sum(partitions_probed) FROM gunique_stat_probes WHERE index::text LIKE 'ms%'"
	),
	'0',
	'max_summaries: new keys search no other partition');
($ret, $out, $err) =
  $node->psql('postgres', 'INSERT INTO ms VALUES (5, 1)');
like($err, qr/Key \(id\)=\(5\) already exists in partition "ms_5"/,
	'max_summaries: a key another partition holds is refused');

#
# Without the preload, INSERT ... ON CONFLICT on a table that is not
# partitioned: PostgreSQL's internal error before 18 (gunique's refusal
# needs the preload), arbitrated by PostgreSQL from 18.
#
my $bare = PostgreSQL::Test::Cluster->new('bare');
$bare->init;
$bare->start;
$bare->safe_psql(
	'postgres', q{
	CREATE EXTENSION gunique;
	CREATE TABLE plain (a int);
	CREATE UNIQUE INDEX plain_a ON plain USING gunique (a);
	INSERT INTO plain VALUES (1);
});
($ret, $out, $err) = $bare->psql('postgres',
	'INSERT INTO plain VALUES (1) ON CONFLICT DO NOTHING');
if (on_conflict_supported($bare))
{
	is($ret, 0, 'without the preload: ON CONFLICT works from 18');
}
else
{
	like($err, qr/unexpected non-btree speculative unique index/,
		'without the preload: ON CONFLICT hits the internal error before 18');
}
$bare->stop;

#
# pg_upgrade, to a new cluster of the same release without the preload.
#
my $bindir = $node->config_data('--bindir');
$node->stop;
chdir ${PostgreSQL::Test::Utils::tmp_check};

sub upgrade_command
{
	my ($new, @options) = @_;
	return [
		'pg_upgrade', '--no-sync',
		'-d', $node->data_dir,
		'-D', $new->data_dir,
		'-b', $bindir,
		'-B', $bindir,
		'-s', $new->host,
		'-p', $node->port,
		'-P', $new->port,
		@options
	];
}

my $unloaded = PostgreSQL::Test::Cluster->new('unloaded');
$unloaded->init;
command_ok(upgrade_command($unloaded, '--check'),
	'pg_upgrade --check passes a new cluster without the preload');
command_fails(upgrade_command($unloaded),
	'pg_upgrade to a new cluster without the preload fails');
# PostgreSQL's refusal of the partitioned gunique index: 18 knows its
# equality, and then finds a partition key column missing
my $refusal =
  $node->pg_version >= 18
  ? 'unique constraint on partitioned table must include all partitioning columns'
  : 'cannot match partition key to an index using access method "gunique"';
my @logs =
  glob($unloaded->data_dir . '/pg_upgrade_output.d/*/log/pg_upgrade_dump_*.log');
ok((grep { slurp_file($_) =~ /ERROR:  \Q$refusal\E/ } @logs),
	"in restoring the schema, with PostgreSQL's \"$refusal\"");

done_testing();

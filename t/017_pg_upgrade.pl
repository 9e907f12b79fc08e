# Copyright (c) gunique contributors
#
# pg_upgrade of a cluster with a gunique index, to a new cluster of the
# same release (the test has one installation).  The run of the new
# cluster that restores the schema summarizes leaves that pg_upgrade then
# replaces with the old cluster's files, without WAL: it saves nothing
# for the next start to load.  After the upgrade the background worker
# builds the key filters on its own, as after a crash, and every key is
# refused in another partition.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueFilterTable;
use Time::HiRes qw(usleep);

my $parts = 16;
my $all = $parts + 1;
my $conf = qq{
shared_preload_libraries = 'gunique'
autovacuum = off
};

my $old = PostgreSQL::Test::Cluster->new('old');
$old->init;
$old->append_conf('postgresql.conf', $conf);
$old->start;
create_filter_table($old, $parts);
my $sample = refused_sample($parts);
is($old->safe_psql('postgres', $sample), '0',
	'before the upgrade, every key is refused in another partition');
$old->stop;

my $new = PostgreSQL::Test::Cluster->new('new');
$new->init;
$new->append_conf('postgresql.conf', $conf);

my $bindir = $new->config_data('--bindir');
my $sockdir = PostgreSQL::Test::Utils::tempdir_short();
my $workdir = PostgreSQL::Test::Utils::tempdir();
chdir $workdir or die "chdir: $!";
command_ok(
	[
		'pg_upgrade', '--no-sync',
		'-d', $old->data_dir, '-D', $new->data_dir,
		'-b', $bindir, '-B', $bindir,
		'-s', $sockdir,
		'-p', $old->port, '-P', $new->port
	],
	'pg_upgrade runs');

ok(!-f $new->data_dir . '/gunique_filters.dat',
	'the run that restored the schema saved no filters');
$new->start;
ok(!$new->log_contains(qr/gunique loaded/),
	'the new cluster loads no saved filters');
is($new->safe_psql('postgres', 'SELECT filters FROM gunique_filter_memory()'),
	'0', 'no filter after the upgrade');

# The first insert asks for the filters; the worker builds them.
$new->safe_psql('postgres', 'INSERT INTO t VALUES (1, kf(1))');
my $built = 0;
for (1 .. 600)
{
	last
	  if $built = $new->safe_psql('postgres',
		"SELECT filters = $all FROM gunique_filter_memory()") eq 't';
	usleep(100_000);
}
ok($built, 'the background worker builds the filters after the upgrade');
is($new->safe_psql('postgres', $sample), '0',
	'after the upgrade, every key is refused in another partition');
is($new->safe_psql('postgres', "SELECT count(*) FROM gunique_verify('t_k')"),
	'0', 'gunique_verify finds nothing');

done_testing();

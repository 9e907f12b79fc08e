# Copyright (c) gunique contributors
#
# A logical replication subscriber whose partitioned table has a gunique
# index applies a remote transaction that inserts rows and then truncates
# a partition (and then the whole table).  The apply worker makes an
# executor state per change and never ends a statement, so gunique must
# not keep the partitions it probed open past the change: TRUNCATE would
# refuse them as "being used by active queries in this session", and the
# subscription would stall for good.  A btree applies it; so must gunique,
# and the index must still refuse duplicates afterwards.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $pub = PostgreSQL::Test::Cluster->new('publisher');
$pub->init(allows_streaming => 'logical');
$pub->start;

my $sub = PostgreSQL::Test::Cluster->new('subscriber');
$sub->init;
$sub->append_conf('postgresql.conf', "shared_preload_libraries = 'gunique'\n");
$sub->start;

my $ddl = q{
CREATE TABLE t (p int NOT NULL, k int) PARTITION BY RANGE (p);
CREATE TABLE t_0 PARTITION OF t FOR VALUES FROM (0) TO (100);
CREATE TABLE t_1 PARTITION OF t FOR VALUES FROM (100) TO (200);
CREATE TABLE t_2 PARTITION OF t FOR VALUES FROM (200) TO (300);
};
$pub->safe_psql('postgres', $ddl);
$sub->safe_psql('postgres', "CREATE EXTENSION gunique;\n$ddl"
	  . "CREATE UNIQUE INDEX t_k ON t USING gunique (k);\n");

$pub->safe_psql('postgres', 'CREATE PUBLICATION pub FOR TABLE t');
my $connstr = $pub->connstr . ' dbname=postgres';
$sub->safe_psql('postgres',
	"CREATE SUBSCRIPTION sub CONNECTION '$connstr' PUBLICATION pub");
$sub->poll_query_until('postgres',
	q{SELECT count(*) = 0 FROM pg_subscription_rel WHERE srsubstate NOT IN ('r', 's')})
  or die 'the subscription did not synchronize';
$pub->wait_for_catchup('sub');

$pub->safe_psql(
	'postgres', q{
BEGIN;
INSERT INTO t SELECT i % 300, i FROM generate_series(1, 300) i;
TRUNCATE t_1;
INSERT INTO t VALUES (150, 1000);
COMMIT;
});
$pub->wait_for_catchup('sub');
is( $sub->safe_psql(
		'postgres', 'SELECT count(*), count(*) FILTER (WHERE p BETWEEN 100 AND 199) FROM t'),
	'201|1',
	'inserts, then TRUNCATE of a partition, in one remote transaction apply');

$pub->safe_psql(
	'postgres', q{
BEGIN;
INSERT INTO t VALUES (10, 2000), (250, 2001);
TRUNCATE t;
INSERT INTO t VALUES (20, 3000);
COMMIT;
});
$pub->wait_for_catchup('sub');
is($sub->safe_psql('postgres', 'SELECT p, k FROM t'),
	'20|3000', 'inserts, then TRUNCATE of the table, in one remote transaction apply');

my ($ret, $out, $err) = $sub->psql('postgres', 'INSERT INTO t VALUES (150, 3000)');
like($err, qr/duplicate key value violates unique constraint/,
	'the gunique index still refuses a key held by another partition');

unlike(slurp_file($sub->logfile), qr/being used by active queries/,
	'the apply worker never found a partition in use');

$sub->stop;
$pub->stop;
done_testing();

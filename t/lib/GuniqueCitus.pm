# Copyright (c) gunique contributors
#
# A Citus cluster on this machine for the Citus TAP tests: a coordinator and
# workers, each a PostgreSQL::Test::Cluster node that preloads citus and then
# gunique, with both extensions created.  The nodes reach each other by the
# host and port their own tests connect to: the socket directory they
# share (libpq takes a directory as a host), or 127.0.0.1 where the tests
# use TCP.  Citus 14 supports PostgreSQL 16 to 18; tools/install-deps
# builds it into the project's 17 and 18, never into Debian's 15, so a test
# asks citus_available first and skips without it.
package GuniqueCitus;

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Exporter 'import';
use IPC::Run;

our @EXPORT = qw(citus_available citus_cluster citus_add_worker citus_node);

# Is Citus installed for a PostgreSQL: a node's, the one of a pg_config
# path, or, with neither, that of the pg_config the PATH finds (make
# installcheck puts the bindir of the PostgreSQL under test first).
sub citus_available
{
	my ($what) = @_;
	my %dir;
	foreach my $opt ('--pkglibdir', '--sharedir')
	{
		if (ref $what)
		{
			$dir{$opt} = $what->config_data($opt);
		}
		else
		{
			my ($out, $err) = ('', '');
			eval { IPC::Run::run([ $what // 'pg_config', $opt ], '>', \$out, '2>', \$err) }
			  or return 0;
			chomp($dir{$opt} = $out);
		}
	}
	return -f "$dir{'--pkglibdir'}/citus.so"
	  && -f "$dir{'--sharedir'}/extension/citus.control";
}

# A node named $name that preloads citus and then gunique, with $conf
# appended to its postgresql.conf, started, citus and gunique created.
sub citus_node
{
	my ($name, $conf) = @_;
	my $node = PostgreSQL::Test::Cluster->new($name);
	$node->init;
	# citus must come first; prepared transactions are its two-phase
	# commits, logical decoding and WAL senders its shard moves; it must
	# not report to Citus Data from a test; and a node reaches itself (the
	# background tasks of the shard rebalancer do) where the others reach
	# it, not at localhost, where a test's node may not listen
	$node->append_conf(
		'postgresql.conf', qq{
shared_preload_libraries = 'citus,gunique'
max_prepared_transactions = 20
wal_level = logical
max_wal_senders = 10
max_replication_slots = 10
fsync = off
citus.enable_statistics_collection = off
citus.local_hostname = '${\ $node->host }'
} . ($conf // ''));
	$node->start;
	$node->safe_psql('postgres', 'CREATE EXTENSION citus; CREATE EXTENSION gunique;');
	return $node;
}

# Start a coordinator and $params{workers} workers (2), named
# "$params{name}_coordinator", "$params{name}_worker1", ... ($params{name}
# "citus"), with $params{conf} appended to each node's postgresql.conf;
# create citus and gunique on each, and make the workers the
# coordinator's.  Returns the coordinator and then the workers, started.
sub citus_cluster
{
	my (%params) = @_;
	my $name = $params{name} // 'citus';
	my $workers = $params{workers} // 2;

	my $coordinator = citus_node("${name}_coordinator", $params{conf});
	$coordinator->safe_psql('postgres',
		sprintf(q{SELECT citus_set_coordinator_host('%s', %d)},
			$coordinator->host, $coordinator->port));
	my @workers = map { citus_add_worker($coordinator, "${name}_worker$_", $params{conf}) } 1 .. $workers;
	return ($coordinator, @workers);
}

# A new worker named $name, made as citus_cluster's are (with $conf), and
# added to $coordinator's cluster (citus_add_node), which gives it Citus's
# metadata and the shells of the distributed tables, but no shard yet:
# citus_add_node puts none there, the shard rebalancer moves some.
sub citus_add_worker
{
	my ($coordinator, $name, $conf) = @_;
	my $worker = citus_node($name, $conf);
	$coordinator->safe_psql('postgres',
		sprintf(q{SELECT citus_add_node('%s', %d)}, $worker->host, $worker->port));
	return $worker;
}

1;

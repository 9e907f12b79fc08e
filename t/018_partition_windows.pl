# Copyright (c) gunique contributors
#
# Lookups by the key while a partition is attached or detached, in the
# moment between the commit of the DDL and its invalidation messages.
#
# A lookup maps the partitions of the table, from its partition descriptor,
# to their leaves of the gunique tree, from the scope (scope.c).  Both read
# pg_inherits, through different caches, flushed by the same invalidation:
# the commit of ALTER TABLE ... ATTACH PARTITION, or of the second
# transaction of DETACH PARTITION ... CONCURRENTLY, is visible to fresh
# catalog reads before its invalidations are sent, and one of them may be
# read before the commit, the other after.  Once, that was the error
# "partition ... has no leaf of gunique index ...", from UPDATE and SELECT
# by the key, under a loop of DETACH CONCURRENTLY and ATTACH.  Now a
# partition that the descriptor holds and the scope lacks is read all the
# same, as PostgreSQL's plan made with that descriptor would read it,
# through its index, after its lock (held by the DDL until after its
# invalidations).
#
# t/pause/gunique_test_pause holds the DDL's transaction in its commit, in
# that moment; a third session's ANALYZE flushes the scope of the session
# that reads, a new session has none yet.

use strict;
use warnings;
use Cwd;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueSessions;

my $module = Cwd::getcwd() . '/t/pause/gunique_test_pause.so';
die "$module not built" unless -f $module;
my $pause = PostgreSQL::Test::Utils::tempdir() . '/pause';

my $node = PostgreSQL::Test::Cluster->new('partwin');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'gunique'\n");
$node->start;
sessions_on($node);

# Key 1 in r_1, key 2 in r_7; 20 partitions, so that the group's filter
# rules out the partitions a key is not in.
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION gunique;
CREATE TABLE r (p int, k int, v int) PARTITION BY RANGE (p);
SELECT format('CREATE TABLE r_%s PARTITION OF r FOR VALUES FROM (%s) TO (%s)',
              i, i * 100, (i + 1) * 100)
FROM generate_series(0, 19) i \gexec
INSERT INTO r SELECT g, 10000 + g, 0 FROM generate_series(0, 1999) g;
INSERT INTO r VALUES (105, 1, 0), (705, 2, 0);
CREATE UNIQUE INDEX r_k ON r USING gunique (k);
ANALYZE r;
});
like(
	$node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) SELECT k FROM r WHERE k = 1'),
	qr/GuniqueLookup/, 'the query by the key is a lookup');

# A session that runs $sql with the pause module loaded, pausing at its
# commits while the pause file exists; in a transaction block if $block,
# so that the pause file may exist from the start.
sub paused_ddl
{
	my ($name, $sql, $block) = @_;
	my $settings = qq{
SET gunique_test_pause.file = '$pause';
SET gunique_test_pause.event = commit;
};
	return session($name, $block
		? "LOAD '$module';\nBEGIN;\n$settings$sql\nCOMMIT;\n"
		: "LOAD '$module';\n$settings$sql\n");
}

# A session's output without the empty lines of its gates.
sub output
{
	my ($out, $err) = finish(@_);
	return ($out =~ s/^\n+//r =~ s/\n\n+/\n/gr, $err);
}

# Is the session waiting for a lock on relation $rel?
sub waits_for_relation
{
	my ($s, $rel) = @_;
	return 0 unless waits_for_lock($s);
	return $node->safe_psql(
		'postgres', qq{
SELECT count(*) FROM pg_locks l JOIN pg_stat_activity a USING (pid)
WHERE a.application_name = '$s->{name}' AND NOT l.granted
  AND l.relation = '$rel'::regclass}) == 1;
}

# Make the pause file; remove it.
sub pause_on
{
	open(my $f, '>', $pause) or die $!;
	close($f);
}
sub pause_off { unlink($pause) or die $!; }

# 1. The second transaction of DETACH PARTITION r_1 CONCURRENTLY, held in
# its commit.  The reader's descriptor (the one an UPDATE's planning reads,
# with the partitions being detached) was made while r_1 was being
# detached, before the commit; its scope is made again after the commit,
# without r_1's leaf.  The UPDATE by key 1 waits for r_1, then finds r_1
# detached: no row of the table has the key, as for PostgreSQL's plan.
{
	my $holder = hold('holder', "BEGIN;\nSELECT count(*) FROM r WHERE k = 2;\n");
	my $detach = paused_ddl('detach',
		'ALTER TABLE r DETACH PARTITION r_1 CONCURRENTLY;');
	ok(waits_for_lock($detach), 'detach: the detach waits for the holder');
	my $gate = hold('gate', "BEGIN;\nSELECT pg_advisory_xact_lock(1);\n");
	my $upd = session('upd', q{
UPDATE r SET v = v + 1 WHERE k = 2 RETURNING tableoid::regclass, k, v;
SELECT pg_advisory_xact_lock(1);
UPDATE r SET v = v + 1 WHERE k = 1 RETURNING tableoid::regclass, k, v;
SELECT tableoid::regclass, k, v FROM r WHERE k IN (1, 2);
});
	ok(waits_for_lock($upd), 'detach: the reader waits at its gate');
	pause_on();
	my $offset = -s $node->logfile;
	release($holder);
	$node->wait_for_log(qr/gunique_test_pause: paused/, $offset);
	$node->safe_psql('postgres', 'ANALYZE r_7');
	release($gate);
	ok(waits_for_relation($upd, 'r_1'),
		'detach: the update by the key waits for the partition being detached');
	pause_off();
	my ($out, $err) = output($upd);
	is($err, '', 'detach: no error');
	is($out, "r_7|2|1\nr_7|2|1", 'detach: key 1 is no longer in the table');
	($out, $err) = finish($detach);
	is($err, '', 'detach: the detach completes');
	is($node->safe_psql('postgres', 'SELECT v FROM r_1 WHERE k = 1'),
		'0', 'detach: the detached row is unchanged');
}

# 2. ALTER TABLE r ATTACH PARTITION r_1, held in its commit.  The readers,
# new sessions, made their scopes by an insert into r_7, before the
# attach; their descriptors are made after its commit, with r_1.  A SELECT
# and an UPDATE by key 1 wait for r_1, then read it, as PostgreSQL's plan
# would.
{
	my $gate = hold('gate2', "BEGIN;\nSELECT pg_advisory_xact_lock(2);\n");
	my $sel = session('sel', q{
INSERT INTO r_7 VALUES (710, 3, 0);
SELECT pg_advisory_xact_lock(2);
SELECT tableoid::regclass, p, k FROM r WHERE k = 1;
});
	my $upd = session('upd2', q{
INSERT INTO r_7 VALUES (711, 4, 0);
SELECT pg_advisory_xact_lock(2);
UPDATE r SET v = v + 10 WHERE k = 1 RETURNING tableoid::regclass, k, v;
});
	ok(waits_for_lock($_), "attach: the $_->{name} waits at its gate")
	  for ($sel, $upd);
	pause_on();
	my $offset = -s $node->logfile;
	my $attach = paused_ddl('attach',
		'ALTER TABLE r ATTACH PARTITION r_1 FOR VALUES FROM (100) TO (200);', 1);
	$node->wait_for_log(qr/gunique_test_pause: paused/, $offset);
	release($gate);
	ok(waits_for_relation($_, 'r_1'),
		"attach: the $_->{name} by the key waits for the partition being attached")
	  for ($sel, $upd);
	pause_off();
	my ($out, $err) = output($sel);
	is($out . $err, 'r_1|105|1', 'attach: the select finds the row');
	($out, $err) = output($upd);
	is($out . $err, 'r_1|1|10', 'attach: the update changes the row');
	($out, $err) = finish($attach);
	is($err, '', 'attach: the attach completes');
}

# The tree is whole.
is($node->safe_psql('postgres', q{SELECT count(*) FROM gunique_verify('r_k')}),
	'0', 'the index verifies');

$node->stop;
done_testing();

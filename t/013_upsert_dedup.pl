# Copyright (c) gunique contributors
#
# The de-duplication workload of an event ingester: INSERT ... SELECT ...
# ON CONFLICT DO NOTHING of batches of 1,000 ids into a table
# range-partitioned by day, with a gunique index on id, from 10 pgbench
# clients at once.  Each row's day routes it to a partition that is not the
# one of the row already holding its id, if any, so every conflict the
# statement must skip can be in another partition.
#
#   events (id bigint, day date, payload text), 8 partitions of 10 days
#
# Preloaded: every id that is a multiple of 5 in [0, $preload_end), each in
# partition id % 8 with payload 'pre'.
#
# Client c's k-th transaction (k counts from 1 for each client, a pgbench
# variable set with -D and incremented by the script) inserts the ids
# [lo, lo + 1000) with lo = k * $step + (c % 5) * $offset, each routed to
# partition (id + 1 + (c + k) % 7) % 8, which is never id % 8: the 200
# multiples of 5 in every batch (20%) are preloaded in another partition
# than the one the new row's day routes to.  Clients c and c + 5 insert
# the same ids at the same k into different partitions ((c + k) % 7
# differs), and each batch overlaps those of the clients with neighbouring
# offsets and of the neighbouring k, so ids that no one holds yet are
# upserted by several clients into different partitions concurrently.
#
# The expected contents are a function of the parameters alone: the
# preloaded ids and every id of every (client, k) batch, each once.  The
# test computes that set by enumerating the batches (in SQL, and its size
# independently in Perl) and checks that the table holds exactly it: no id
# twice (a duplicate across partitions let through), none missing (a row
# skipped for a conflict that did not exist), no client aborted (a unique
# violation the conflict check should have prevented), no unique violation
# in the server log, and the preloaded rows untouched.  The first half of
# the transactions runs in the simple query protocol, the second with
# prepared statements (generic plans).
#
# A negative control runs the first batches of each client against a twin
# table with a plain btree on id and a naive check (WHERE NOT EXISTS): it
# ends with duplicates, some in different partitions, which shows that the
# workload really makes clients insert the same new id into different
# partitions at the same time.
#
# Then upserts race plain inserts of the same new ids into other partitions
# ("race" below): neither kind of statement may get in the other's way but
# as PostgreSQL's would (an upsert never fails, a plain insert fails only
# on an id that is held), and every id tried ends up held exactly once.
#
# Before PostgreSQL 18 (without the core change of contrib-patches/), any
# INSERT ... ON CONFLICT on a table with a gunique index is refused, and
# the test checks that the workload's statement is refused with gunique's
# error and changes nothing.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use Time::HiRes qw(time);
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueOnConflict;

my $clients = 10;
my $xacts = 40;          # per client, half simple, half prepared
my $naive_xacts = 10;    # per client, for the negative control
my $nparts = 8;
my $batch = 1000;
my $step = 1600;         # how far a client's batch moves from one k to the next
my $offset = 320;        # between the batches of clients c % 5 = 0, 1, ..., 4
my $preload_end = ($xacts + 2) * $step + 4 * $offset + $batch;

my $node = PostgreSQL::Test::Cluster->new('upsert_dedup');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
max_connections = 30
deadlock_timeout = 5ms
log_lock_waits = on
});
$node->start;

# Can this server arbitrate ON CONFLICT with a gunique index?
my $patched = on_conflict_patched($node);
my $supported = on_conflict_supported($node);
note 'PostgreSQL ' . $node->pg_version
  . ($patched ? ' with the core change of contrib-patches/' : '')
  . ': ON CONFLICT ' . ($supported ? 'supported' : 'refused');

# A table of events in $nparts partitions of 10 days, partition p holding
# the days from 2026-01-01 + 10p.
sub events_sql
{
	my ($tab) = @_;
	return qq{
CREATE TABLE $tab (id bigint NOT NULL, day date NOT NULL, payload text)
  PARTITION BY RANGE (day);
SELECT format('CREATE TABLE ${tab}_%s PARTITION OF $tab FOR VALUES FROM (%L) TO (%L)',
			  p, date '2026-01-01' + p * 10, date '2026-01-01' + (p + 1) * 10)
  FROM generate_series(0, $nparts - 1) p \\gexec
INSERT INTO $tab
SELECT i, date '2026-01-01' + (i % $nparts)::int * 10 + (i / $nparts % 10)::int, 'pre'
  FROM generate_series(0, $preload_end - 1, 5) i;
};
}

$node->safe_psql(
	'postgres', 'CREATE EXTENSION gunique;'
	  . events_sql('events')
	  . 'CREATE UNIQUE INDEX events_id ON events USING gunique (id);'
	  . events_sql('naive')
	  . 'CREATE INDEX naive_id ON naive (id);'
	  . 'VACUUM ANALYZE events, naive;');

my $npre = $node->safe_psql('postgres', 'SELECT count(*) FROM events');
is($npre, int(($preload_end + 4) / 5), "$npre ids preloaded");

# The workload's script for table $tab: the batch of this client's k-th
# transaction, ON CONFLICT DO NOTHING (gunique) or with a naive check.
sub script
{
	my ($tab) = @_;
	my $rows = qq{SELECT i, date '2026-01-01' + ((i + 1 + :s) % $nparts) * 10 + (i / $nparts) % 10,
       'c' || :client_id || ' k' || :k
  FROM generate_series(:lo::int, :lo::int + $batch - 1) i};
	my $sql =
	  $tab eq 'events'
	  ? "INSERT INTO events (id, day, payload)\n$rows\nON CONFLICT DO NOTHING;\n"
	  : "INSERT INTO naive (id, day, payload)\n$rows\n"
	  . " WHERE NOT EXISTS (SELECT 1 FROM naive n WHERE n.id = i);\n";
	return "\\set k :k + 1\n"
	  . "\\set lo :k * $step + (:client_id % 5) * $offset\n"
	  . "\\set s (:client_id + :k) % " . ($nparts - 1) . "\n"
	  . $sql;
}

# Run $n transactions of every client, k continuing from $k0.
sub run_pgbench
{
	my ($label, $tab, $n, $k0, $mode) = @_;
	my $all = $clients * $n;
	my $start = time;
	$node->pgbench(
		"--no-vacuum --client=$clients --jobs=2 --transactions=$n"
		  . " --protocol=$mode --define=k=$k0",
		0,
		[
			qr{number of transactions actually processed: $all/$all},
			qr{number of failed transactions: 0 }
		],
		[qr{^$}],
		"$label: pgbench completes all transactions with no client aborted",
		{ "${tab}_$mode.sql" => script($tab) });
	note sprintf('%s: %d transactions took %.1f s', $label, $all, time - $start);
}

if (!$supported)
{
	# The workload's statement is refused, from pgbench as from psql, and
	# leaves the table as it was.
	$node->pgbench(
		'--no-vacuum --client=1 --transactions=1 --define=k=0',
		2,
		[qr{number of transactions actually processed: 0/1}],
		[
			qr{INSERT \.\.\. ON CONFLICT is not supported on a table with a gunique index before PostgreSQL 18}
		],
		'before PostgreSQL 18: the workload\'s ON CONFLICT DO NOTHING is refused',
		{ 'events_refused.sql' => script('events') });
	my ($ret, $out, $err) = $node->psql('postgres',
		"INSERT INTO events SELECT i, date '2026-01-10', 'new' FROM generate_series(-10, -1) i ON CONFLICT DO NOTHING"
	);
	isnt($ret, 0, 'before PostgreSQL 18: ON CONFLICT DO NOTHING of new ids only is refused too');
	like($err,
		qr{ERROR:  INSERT \.\.\. ON CONFLICT is not supported on a table with a gunique index before PostgreSQL 18\nDETAIL:  Table "events" has gunique index "events_id"},
		'before PostgreSQL 18: with gunique\'s error');
	is($node->safe_psql('postgres', 'SELECT count(*), count(*) FILTER (WHERE payload = \'pre\') FROM events'),
		"$npre|$npre", 'before PostgreSQL 18: the table is unchanged');
	$node->stop;
	done_testing();
	exit 0;
}

# The expected ids, computed from the parameters by enumerating every
# batch: in Perl (their number) and in SQL (the set).
my %expected;
for (my $i = 0; $i < $preload_end; $i += 5) { $expected{$i} = 1; }
for my $c (0 .. $clients - 1)
{
	for my $k (1 .. $xacts)
	{
		my $lo = $k * $step + ($c % 5) * $offset;
		$expected{$_} = 1 for $lo .. $lo + $batch - 1;
	}
}
my $nexpected = scalar keys %expected;
$node->safe_psql(
	'postgres', qq{
CREATE TABLE expected AS
SELECT i::bigint AS id FROM generate_series(0, $preload_end - 1, 5) i
UNION
SELECT k * $step + (c % 5) * $offset + j
  FROM generate_series(0, $clients - 1) c, generate_series(1, $xacts) k,
	   generate_series(0, $batch - 1) j;
});
is($node->safe_psql('postgres', 'SELECT count(*) FROM expected'),
	$nexpected, "the expected set has $nexpected ids (SQL and Perl agree)");
my $attempts = $clients * $xacts * $batch;
note sprintf('%d ids attempted, %d of them new: %.1f%% of the attempts are to be skipped',
	$attempts, $nexpected - $npre, 100 * (1 - ($nexpected - $npre) / $attempts));

my $log_offset = -s $node->logfile;

# The gunique table: half the transactions in the simple query protocol,
# half with prepared statements.
my $half = $xacts / 2;
run_pgbench('events, simple', 'events', $half, 0, 'simple');
run_pgbench('events, prepared', 'events', $half, $half, 'prepared');

my $log = slurp_file($node->logfile, $log_offset);
unlike($log, qr/duplicate key value violates unique constraint/,
	'events: no unique violation in the server log');
unlike($log, qr/TRAP:|PANIC:|server process .* was terminated|terminated by signal/,
	'events: no crash or assertion failure in the server log');
my $xact_waits = () = $log =~ /still waiting for ShareLock on transaction/g;
my $upsert_waits = () = $log =~ /still waiting for ExclusiveLock on advisory lock \[\d+,\d+,\d+,26485\]/g;
note "events: waits over 5 ms logged: $xact_waits for a transaction, $upsert_waits for an upsert lock";
cmp_ok($xact_waits, '>', 0,
	'events: upserts waited for other transactions inserting the same id');

# Exactly the expected ids, each once, as the heap holds them.
is( $node->safe_psql(
		'postgres', q{
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = off;
SELECT count(*), count(DISTINCT id) FROM events}),
	"$nexpected|$nexpected",
	"events: count(*) = count(DISTINCT id) = $nexpected, the expected count");
is( $node->safe_psql(
		'postgres', q{
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = off;
SELECT (SELECT count(*) FROM (SELECT id FROM events EXCEPT SELECT id FROM expected) x),
	   (SELECT count(*) FROM (SELECT id FROM expected EXCEPT SELECT id FROM events) y)}),
	'0|0',
	'events: the ids are exactly the preloaded ones and every one a client tried');

# The preloaded rows are all there, in their partition, and every other row
# is one its payload's client and transaction tried, in the partition that
# client's row was routed to.
is( $node->safe_psql(
		'postgres', qq{
SELECT count(*) FILTER (WHERE payload = 'pre'),
	   count(*) FILTER (WHERE payload = 'pre' AND (tableoid::regclass::text <> 'events_' || id % $nparts OR id % 5 <> 0)),
	   count(*) FILTER (WHERE payload <> 'pre' AND NOT (
		   id - (k * $step + (c % 5) * $offset) BETWEEN 0 AND $batch - 1
		   AND tableoid::regclass::text = 'events_' || (id + 1 + (c + k) % ($nparts - 1)) % $nparts))
FROM events,
	 LATERAL (SELECT substring(payload FROM '^c(\\d+) ')::int AS c,
					 substring(payload FROM ' k(\\d+)\$')::int AS k) p}),
	"$npre|0|0",
	'events: preloaded rows untouched, every other row one that its client tried');
note 'events: rows per partition: '
  . join(', ', split /\n/, $node->safe_psql('postgres',
	'SELECT tableoid::regclass, count(*) FROM events GROUP BY 1 ORDER BY 1'));

is($node->safe_psql('postgres', q{
SELECT format('%s: %s %s %s', c.relname, v.problem, v.relation, v.detail)
FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid JOIN pg_am a ON a.oid = c.relam,
	 LATERAL gunique_verify(i.indexrelid, true) v
WHERE a.amname = 'gunique' ORDER BY 1}),
	'', 'events: gunique_verify is clean');

# Every id held is found from any other partition: the whole expected set
# upserted again, each id into the partition after its own, is all skipped,
# and a plain INSERT of any of a sample of them there is a unique violation.
# (psql, not safe_psql: an error fails the check, not the whole test.)
is( scalar $node->psql(
		'postgres', qq{
WITH ins AS (
	INSERT INTO events
	SELECT e.id, date '2026-01-01' + ((substring(tableoid::regclass::text FROM '\\d+\$')::int + 1) % $nparts) * 10, 'again'
	  FROM events e
	ON CONFLICT DO NOTHING RETURNING 1)
SELECT count(*) FROM ins}),
	'0', 'afterwards, every id upserted again into another partition is skipped');
is( scalar $node->psql(
		'postgres', qq{
CREATE FUNCTION refused(id bigint, day date) RETURNS boolean LANGUAGE plpgsql AS \$f\$
BEGIN
	BEGIN
		INSERT INTO events VALUES (id, day, 'dup');
		RAISE EXCEPTION USING ERRCODE = 'P0009';
	EXCEPTION
		WHEN unique_violation THEN RETURN true;
		WHEN SQLSTATE 'P0009' THEN RETURN false;
	END;
END
\$f\$;
SELECT count(*) FILTER (WHERE NOT refused(e.id,
		date '2026-01-01' + ((substring(tableoid::regclass::text FROM '\\d+\$')::int + 3) % $nparts) * 10))
  FROM events e WHERE e.id % 97 = 0}),
	'0', 'afterwards, a plain INSERT of a held id into another partition is a unique violation');
is($node->safe_psql('postgres', 'SELECT count(*) FROM events'),
	$nexpected, 'afterwards, the table still holds the expected rows');

# Upserts racing plain inserts.  Each client's k-th transaction is, at
# random, an upsert of 5 ids from [5k, 5k + 15) or a plain insert of one id
# from [5k, 5k + 15) (in a function that catches the unique violation),
# each row into a partition picked by client and id, so that clients,
# which advance at about the same pace, try the same new ids at the same
# time.  A CHECK constraint sleeps 2 ms for each upsert row, between the
# upsert's check of the row and its insert: a plain insert of the id into
# another partition then must wait for the upsert's row (an upsert lock in
# ShareLock, logged after deadlock_timeout) and fail, where it used to get
# in first and make the upsert fail.  The table has a primary key made
# before the gunique index, which the executor inserts into first; a plain
# insert into the upsert's own partition must not wait (the upsert may be
# waiting for it in that key: a deadlock), and at 5105456 none waited then,
# so that an upsert into another partition failed.  Every id tried is logged; at the end each is held exactly
# once, and no upsert failed (pgbench counts no failed transaction).
$node->safe_psql(
	'postgres', qq{
CREATE FUNCTION widen(payload text) RETURNS boolean LANGUAGE plpgsql AS \$f\$
BEGIN
	IF payload = 'u' THEN PERFORM pg_sleep(0.002); END IF;
	RETURN true;
END
\$f\$;
CREATE TABLE race (id bigint NOT NULL, day date NOT NULL, payload text,
				   CHECK (widen(payload)), PRIMARY KEY (id, day))
  PARTITION BY RANGE (day);
SELECT format('CREATE TABLE race_%s PARTITION OF race FOR VALUES FROM (%L) TO (%L)',
			  p, date '2026-01-01' + p * 10, date '2026-01-01' + (p + 1) * 10)
  FROM generate_series(0, $nparts - 1) p \\gexec
CREATE UNIQUE INDEX race_id ON race USING gunique (id);
CREATE TABLE tried (id bigint, how text);
CREATE FUNCTION plain_race(id bigint, day date) RETURNS boolean LANGUAGE plpgsql AS \$f\$
BEGIN
	INSERT INTO tried VALUES (id, 'plain');
	BEGIN
		INSERT INTO race VALUES (id, day, 'p');
		RETURN true;
	EXCEPTION WHEN unique_violation THEN
		INSERT INTO tried VALUES (id, 'refused');
		RETURN false;
	END;
END
\$f\$;
ALTER SYSTEM SET deadlock_timeout = '1ms';
SELECT pg_reload_conf();
});
my $race_day = "date '2026-01-01' + ((i + :client_id) % $nparts)::int * 10";
my $race_offset = -s $node->logfile;
$node->pgbench(
	"--no-vacuum --client=$clients --jobs=2 --transactions=150 --define=k=0",
	0,
	[
		qr{number of transactions actually processed: 1500/1500},
		qr{number of failed transactions: 0 }
	],
	[qr{^$}],
	'race: pgbench completes all transactions with no client aborted',
	{
		'race_upsert.sql@1' => "\\set k :k + 1\n"
		  . "\\set lo 5 * :k + random(0, 10)\n"
		  . "INSERT INTO tried SELECT i, 'upsert' FROM generate_series(:lo::bigint, :lo::bigint + 4) i;\n"
		  . "INSERT INTO race SELECT i, $race_day, 'u' FROM generate_series(:lo::bigint, :lo::bigint + 4) i ON CONFLICT DO NOTHING;\n",
		'race_plain.sql@1' => "\\set k :k + 1\n"
		  . "\\set i 5 * :k + random(0, 14)\n"
		  . "SELECT plain_race(:i, " . ($race_day =~ s/\bi\b/:i/r) . ");\n"
	});
$log = slurp_file($node->logfile, $race_offset);
my $share_waits = () = $log =~ /still waiting for ShareLock on advisory lock \[\d+,\d+,\d+,26485\]/g;
my ($tried, $held, $distinct, $refused, $plain) = split /\|/, $node->safe_psql(
	'postgres', q{
SET enable_indexscan = off;
SET enable_indexonlyscan = off;
SET enable_bitmapscan = off;
SELECT (SELECT count(DISTINCT id) FROM tried WHERE how <> 'refused'),
	   (SELECT count(*) FROM race), (SELECT count(DISTINCT id) FROM race),
	   (SELECT count(*) FROM tried WHERE how = 'refused'),
	   (SELECT count(*) FROM tried WHERE how = 'plain')});
note "race: $tried ids tried, $plain plain inserts ($refused refused), "
  . "$share_waits waits of a plain insert for an upsert logged";
is("$held|$distinct", "$tried|$tried", 'race: every id tried is held exactly once');
is( $node->safe_psql(
		'postgres', q{
SELECT count(*) FROM (SELECT id FROM tried WHERE how <> 'refused' EXCEPT SELECT id FROM race) x}),
	'0', 'race: no id tried is missing');
cmp_ok($share_waits, '>', 0,
	'race: plain inserts waited for pending upserts of their ids');
unlike($log, qr/TRAP:|PANIC:|server process .* was terminated|terminated by signal/,
	'race: no crash or assertion failure in the server log');
is($node->safe_psql('postgres', q{
SELECT format('%s %s %s', v.problem, v.relation, v.detail)
FROM gunique_verify('race_id'::regclass, true) v}),
	'', 'race: gunique_verify is clean');
$node->safe_psql('postgres', 'ALTER SYSTEM RESET deadlock_timeout; SELECT pg_reload_conf();');

# The negative control: the same batches (the first $naive_xacts of each
# client) with a naive check let duplicates in, among them the same id in
# different partitions.
run_pgbench('naive', 'naive', $naive_xacts, 0, 'simple');
my ($ndup, $nsplit) = split /\|/, $node->safe_psql(
	'postgres', q{
SELECT count(*), count(*) FILTER (WHERE parts > 1)
FROM (SELECT id, count(DISTINCT tableoid) AS parts FROM naive GROUP BY id HAVING count(*) > 1) d});
note "naive: $ndup ids held more than once, $nsplit of them in more than one partition";
cmp_ok($nsplit, '>', 0,
	'naive: the same new id was inserted into different partitions concurrently');
is($node->safe_psql('postgres',
		'SELECT count(*) FROM (SELECT id FROM naive EXCEPT SELECT id FROM expected) x'),
	'0', 'naive: every id is one of the expected ones');

ok($node->safe_psql('postgres', 'SELECT 1') eq '1', 'server still up');
$node->stop;

done_testing();

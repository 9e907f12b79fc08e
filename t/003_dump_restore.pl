# Copyright (c) gunique contributors
#
# gunique indexes survive pg_dump and restore, in every format, and a dump
# whose rows break uniqueness cannot be restored quietly.
#
# The source database holds gunique indexes of every shape on a three-level
# partition tree (range at the top; below it a list-partitioned partition
# with a range-partitioned sub-partition, a hash-partitioned one and a plain
# leaf) and on a plain table, and foreign keys that reference columns with a
# unique btree index and a gunique index whose name sorts first, of a plain
# and of a partitioned table.  pg_dump emits each partitioned index as
# CREATE UNIQUE INDEX ... ON ONLY, an index per partition and ALTER INDEX
# ... ATTACH PARTITION per partition; the tree is checked and becomes valid
# when its last partition is attached.  After each restore (psql from a
# plain dump, pg_restore from a custom dump, pg_restore -j 4 from a custom
# and a directory dump) every index has its source definition and place in
# its tree and is valid, gunique_verify finds nothing, cross-partition
# duplicates are refused with SQLSTATE 23505, and the foreign keys are
# there (before PostgreSQL 18, on the btree indexes) and refuse orphans.
#
# A dump made with --inserts --on-conflict-do-nothing restores too, and its
# rows loaded again into the restored tables are all skipped (PostgreSQL 18,
# or 15 and 17 with the core change of contrib-patches/; refused with a
# clear error otherwise).
#
# Then dumps whose data hold a duplicate key in two partitions: restoring
# them fails with the key and both partitions named, and leaves that index
# invalid (never a valid index over duplicates).

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueOnConflict;

my $node = PostgreSQL::Test::Cluster->new('dump');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'gunique'");
$node->start;

my $tmp = PostgreSQL::Test::Utils::tempdir;

# Run a client program; return its exit status, stdout and stderr.
sub run_cmd
{
	my @cmd = @_;
	my ($out, $err) = ('', '');
	IPC::Run::run(\@cmd, '<', \undef, '>', \$out, '2>', \$err);
	return ($? >> 8, $out, $err);
}

$node->safe_psql('postgres', 'CREATE DATABASE src');
$node->safe_psql(
	'src', q{
CREATE EXTENSION gunique;

CREATE TABLE orders (
	id int NOT NULL,
	created date NOT NULL,
	region text NOT NULL,
	email text,
	code text,
	active bool NOT NULL DEFAULT true,
	x int,
	y int,
	tag text,
	note text
) PARTITION BY RANGE (created);
CREATE TABLE orders_2024 PARTITION OF orders
	FOR VALUES FROM ('2024-01-01') TO ('2025-01-01') PARTITION BY LIST (region);
CREATE TABLE orders_2024_eu PARTITION OF orders_2024 FOR VALUES IN ('eu');
CREATE TABLE orders_2024_us PARTITION OF orders_2024 FOR VALUES IN ('us')
	PARTITION BY RANGE (id);
CREATE TABLE orders_2024_us_lo PARTITION OF orders_2024_us
	FOR VALUES FROM (MINVALUE) TO (1500);
CREATE TABLE orders_2024_us_hi PARTITION OF orders_2024_us
	FOR VALUES FROM (1500) TO (MAXVALUE);
CREATE TABLE orders_2024_other PARTITION OF orders_2024 DEFAULT;
CREATE TABLE orders_2025 PARTITION OF orders
	FOR VALUES FROM ('2025-01-01') TO ('2026-01-01') PARTITION BY HASH (id);
CREATE TABLE orders_2025_h0 PARTITION OF orders_2025 FOR VALUES WITH (MODULUS 3, REMAINDER 0);
CREATE TABLE orders_2025_h1 PARTITION OF orders_2025 FOR VALUES WITH (MODULUS 3, REMAINDER 1);
CREATE TABLE orders_2025_h2 PARTITION OF orders_2025 FOR VALUES WITH (MODULUS 3, REMAINDER 2);
CREATE TABLE orders_2026 PARTITION OF orders
	FOR VALUES FROM ('2026-01-01') TO ('2027-01-01');

-- two indexes exist before the data, the others are built over it
CREATE UNIQUE INDEX orders_id_key ON orders USING gunique (id);
CREATE UNIQUE INDEX orders_tag_key ON orders USING gunique (tag) NULLS NOT DISTINCT;

-- g % 3 picks the year, (g / 3) % 3 the region; ids 1..3000
INSERT INTO orders
SELECT g,
	   (ARRAY['2024-03-01', '2025-03-01', '2026-03-01'])[g % 3 + 1]::date + g % 200,
	   (ARRAY['eu', 'us', 'apac'])[(g / 3) % 3 + 1],
	   CASE WHEN g % 50 = 0 THEN NULL
			WHEN g % 5 = 0 THEN 'USER' || g || '@EXAMPLE.COM'
			ELSE 'user' || g || '@example.com' END,
	   'c' || g % 1000,
	   g <= 1000,
	   g % 100,
	   g / 100,
	   CASE WHEN g = 7 THEN NULL ELSE 't' || g END,
	   'note ' || g
FROM generate_series(1, 3000) g;

CREATE UNIQUE INDEX orders_email_key ON orders USING gunique (lower(email));
CREATE UNIQUE INDEX orders_code_active_key ON orders USING gunique (code) WHERE active;
-- a tree that ALTER COLUMN ... TYPE made again dumps as any other
ALTER TABLE orders ALTER COLUMN code TYPE varchar(40);
CREATE UNIQUE INDEX orders_xy_key ON orders USING gunique (x, y DESC NULLS LAST) INCLUDE (note);
CREATE UNIQUE INDEX orders_created_id_key ON orders USING gunique (created, id);
CREATE INDEX orders_region_idx ON orders (region);

CREATE TABLE accounts (id int, name text);
INSERT INTO accounts SELECT g, 'acct' || g FROM generate_series(1, 500) g;
CREATE UNIQUE INDEX accounts_name_key ON accounts USING gunique (name);
CREATE UNIQUE INDEX accounts_id_key ON accounts USING gunique (id) WITH (fillfactor = 70);

-- Foreign keys served by a unique btree index beside a gunique index on the
-- same columns.  Here the btree index comes first; a restore creates the
-- indexes in name order, the gunique index first.
CREATE TABLE members (id int, name text);
INSERT INTO members SELECT g, 'member' || g FROM generate_series(1, 100) g;
CREATE UNIQUE INDEX members_id_btree ON members (id);
CREATE TABLE member_refs (member_id int REFERENCES members (id));
INSERT INTO member_refs SELECT g FROM generate_series(1, 100, 7) g;
CREATE UNIQUE INDEX members_id_a_gunique ON members USING gunique (id);
CREATE TABLE tickets (id int, note text) PARTITION BY RANGE (id);
CREATE TABLE tickets_lo PARTITION OF tickets FOR VALUES FROM (0) TO (50);
CREATE TABLE tickets_hi PARTITION OF tickets FOR VALUES FROM (50) TO (100);
INSERT INTO tickets SELECT g, 'ticket' || g FROM generate_series(0, 99) g;
CREATE UNIQUE INDEX tickets_id_btree ON tickets (id);
CREATE TABLE ticket_refs (ticket_id int REFERENCES tickets (id));
INSERT INTO ticket_refs SELECT g FROM generate_series(0, 99, 9) g;
CREATE UNIQUE INDEX tickets_id_a_gunique ON tickets USING gunique (id);
ANALYZE;
});

# Every index of the schema: its definition, flags and parent in its tree.
my $indexes_sql = q{
SELECT c.relname, pg_get_indexdef(i.indexrelid), i.indisunique, i.indisvalid,
	   i.indisready, i.indislive, coalesce(p.relname, '-')
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_namespace n ON n.oid = c.relnamespace
LEFT JOIN pg_inherits h ON h.inhrelid = i.indexrelid
LEFT JOIN pg_class p ON p.oid = h.inhparent
WHERE n.nspname = 'public'
ORDER BY 1};

# Every row and the partition that holds it.
my $rows_sql = q{
SELECT (SELECT count(*) FROM orders), md5(string_agg(format('%s %s', tableoid::regclass, o), ',' ORDER BY id)) FROM orders o
UNION ALL
SELECT (SELECT count(*) FROM accounts), md5(string_agg(a::text, ',' ORDER BY id)) FROM accounts a};

# gunique_verify from every member of every gunique tree: one line per problem.
my $verify_sql = q{
SELECT format('%s: %s %s %s', c.relname, v.problem, v.relation, v.detail)
FROM pg_index i
JOIN pg_class c ON c.oid = i.indexrelid
JOIN pg_am a ON a.oid = c.relam,
LATERAL gunique_verify(i.indexrelid, true) v
WHERE a.amname = 'gunique'
ORDER BY 1};

my $src_indexes = $node->safe_psql('src', $indexes_sql);
my $src_rows = $node->safe_psql('src', $rows_sql);
like($src_indexes, qr/orders_tag_key\|CREATE UNIQUE INDEX orders_tag_key ON ONLY public\.orders USING gunique \(tag\) NULLS NOT DISTINCT\|/,
	'source: NULLS NOT DISTINCT');
like($src_indexes, qr/orders_2024_us_lo_lower_idx\|CREATE UNIQUE INDEX orders_2024_us_lo_lower_idx ON public\.orders_2024_us_lo USING gunique \(lower\(email\)\)\|t\|t\|t\|t\|orders_2024_us_lower_idx/,
	'source: an expression index, three levels down');
like($src_indexes, qr/USING gunique \(code\) WHERE active\|/, 'source: a partial index');
like($src_indexes, qr/USING gunique \(x, y DESC NULLS LAST\) INCLUDE \(note\)\|/,
	'source: a multi-column index with INCLUDE');
is($node->safe_psql('src',
		q{SELECT count(*) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		  JOIN pg_am a ON a.oid = c.relam WHERE a.amname = 'gunique' AND i.indisvalid}),
	'78', 'source: 78 valid gunique indexes (6 trees of 12, one of 3, 3 plain)');
is($node->safe_psql('src', $verify_sql), '', 'source: gunique_verify is clean');

# Insert one statement in a psql of its own; return (exit status, stderr).
sub try_sql
{
	my ($db, $sql) = @_;
	my ($ret, $out, $err) = $node->psql($db,
		"\\set VERBOSITY verbose\nBEGIN;\n$sql;\nROLLBACK;");
	return ($ret, $err);
}

# A fresh row in every column, apart from what $set overrides.
sub row_sql
{
	my ($n, %set) = @_;
	my %col = (
		id => 900000 + $n,
		created => q{'2026-06-01'},
		region => q{'eu'},
		email => "'fresh$n\@example.com'",
		code => "'fresh$n'",
		active => 'true',
		x => -$n,
		y => -$n,
		tag => "'fresh$n'",
		note => "'fresh'",
		%set);
	my @cols = qw(id created region email code active x y tag note);
	return sprintf('INSERT INTO %s (%s) VALUES (%s)',
		delete $col{table} // 'orders',
		join(', ', @cols), join(', ', map { $col{$_} } @cols));
}

# The checks run on every restored database.
sub check_restored
{
	my ($db, $how) = @_;

	is($node->safe_psql($db, $indexes_sql),
		$src_indexes, "$how: every index has its definition, flags and parent");
	is($node->safe_psql($db,
			q{SELECT count(*) FROM pg_index WHERE NOT (indisvalid AND indisready AND indislive)}),
		'0', "$how: every index is valid");
	is($node->safe_psql($db, $rows_sql), $src_rows, "$how: same rows in the same partitions");
	is($node->safe_psql($db, $verify_sql), '', "$how: gunique_verify is clean");

	# id 9 lives in orders_2024_eu, id 2 in orders_2026, id 10 in a hash
	# partition of orders_2025 (email USER10@EXAMPLE.COM), as do the active
	# code c4 (id 4) and tag NULL (id 7); (x, y) = (42, 3) is id 342, in
	# orders_2024_eu.  The new rows go to orders_2026 unless told.
	my @dups = (
		[ 'id into another top-level partition',
		  row_sql(1, id => 9), 'orders_2026_id_idx', 'orders_2024_eu', 'id', '9' ],
		[ 'id into a third-level sub-partition',
		  row_sql(2, id => 2, created => q{'2024-05-05'}, region => q{'us'}),
		  'orders_2024_us_lo_id_idx', 'orders_2026', 'id', '2' ],
		[ 'id straight into the third-level leaf',
		  row_sql(3, id => 2, created => q{'2024-05-05'}, region => q{'us'},
			  table => 'orders_2024_us_lo'),
		  'orders_2024_us_lo_id_idx', 'orders_2026', 'id', '2' ],
		[ 'lower(email)',
		  row_sql(4, email => q{'user10@example.com'}),
		  'orders_2026_lower_idx', 'orders_2025_h\d', 'lower\(email\)', 'user10\@example.com' ],
		[ 'partial index, active code',
		  row_sql(5, code => q{'c4'}), 'orders_2026_code_idx', 'orders_2025_h\d', 'code', 'c4' ],
		[ 'multi-column with INCLUDE',
		  row_sql(6, x => 42, y => 3), 'orders_2026_x_y_note_idx', 'orders_2024_eu', 'x, y', '42, 3' ],
		[ 'NULLS NOT DISTINCT',
		  row_sql(7, tag => 'NULL'), 'orders_2026_tag_idx', 'orders_2025_h\d', 'tag', 'null' ],);
	for my $d (@dups)
	{
		my ($what, $sql, $index, $holder, $cols, $key) = @$d;
		my ($ret, $err) = try_sql($db, $sql);
		isnt($ret, 0, "$how: duplicate $what refused");
		like($err,
			qr/ERROR:  23505: duplicate key value violates unique constraint "$index"\nDETAIL:  Key \($cols\)=\($key\) already exists in partition "$holder"\./,
			"$how: duplicate $what: 23505 naming the key and its partition");
	}
	my ($ret, $err) = try_sql($db,
		"INSERT INTO accounts VALUES (9999, 'acct17')");
	like($err, qr/ERROR:  23505: duplicate key value violates unique constraint "accounts_name_key"/,
		"$how: duplicate in the plain table refused");

	# Fresh keys, and keys only the partial index's predicate excludes.
	($ret, $err) = try_sql($db,
		join(";\n", row_sql(8), row_sql(9, code => q{'c4'}, active => 'false'),
			row_sql(10, created => q{'2024-07-07'}, region => q{'us'}, id => -10),
			row_sql(11, created => q{'2025-07-07'}),
			"INSERT INTO accounts VALUES (9999, 'fresh')"));
	is($ret, 0, "$how: fresh keys accepted in every partition") or diag $err;

	# The foreign keys beside gunique indexes are there, and enforced.
	# Before PostgreSQL 18 they can only use the btree indexes.
	my $fkeys = $node->safe_psql($db, q{
		SELECT string_agg(format('%s %s', conrelid::regclass, conindid::regclass), ', '
						  ORDER BY 1)
		FROM pg_constraint
		WHERE contype = 'f' AND conparentid = 0});
	if ($node->pg_version < 18)
	{
		is($fkeys, 'member_refs members_id_btree, ticket_refs tickets_id_btree',
			"$how: the foreign keys are restored, on the btree indexes");
	}
	else
	{
		like($fkeys, qr/^member_refs members_id_\w+, ticket_refs tickets_id_\w+$/,
			"$how: the foreign keys are restored");
	}
	for my $orphan ('INSERT INTO member_refs VALUES (1000)',
		'INSERT INTO ticket_refs VALUES (1000)')
	{
		($ret, $err) = try_sql($db, $orphan);
		like($err, qr/ERROR:  23503: insert or update on table "\w+" violates foreign key constraint/,
			"$how: $orphan refused");
	}
	($ret, $err) = try_sql($db, 'INSERT INTO tickets VALUES (51, \'again\')');
	like($err, qr/ERROR:  23505: duplicate key value violates unique constraint/,
		"$how: duplicate ticket refused");
}

my $plain = "$tmp/src.sql";
my $custom = "$tmp/src.dump";
my $dir = "$tmp/src.dir";
my ($ret, $out, $err);

($ret, $out, $err) = run_cmd('pg_dump', '-Fp', '-f', $plain, '-d', $node->connstr('src'));
is($ret, 0, 'pg_dump plain') or diag $err;
($ret, $out, $err) = run_cmd('pg_dump', '-Fc', '-f', $custom, '-d', $node->connstr('src'));
is($ret, 0, 'pg_dump custom') or diag $err;
($ret, $out, $err) = run_cmd('pg_dump', '-Fd', '-j', '2', '-f', $dir, '-d', $node->connstr('src'));
is($ret, 0, 'pg_dump directory') or diag $err;

# What pg_dump emits for a partitioned gunique index.
my $script = slurp_file($plain);
like($script, qr/CREATE UNIQUE INDEX orders_id_key ON ONLY public\.orders USING gunique \(id\);/,
	'plain dump: the top index is created ON ONLY');
like($script, qr/ALTER INDEX public\.orders_2024_us_id_idx ATTACH PARTITION public\.orders_2024_us_lo_id_idx;/,
	'plain dump: leaves are attached to their parent index');

my @restores = (
	[ 'psql from plain', 'r_plain',
	  [ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-f', $plain ] ],
	[ 'pg_restore from custom', 'r_custom', [ 'pg_restore', $custom ] ],
	[ 'pg_restore -j 4 from custom', 'r_custom_j', [ 'pg_restore', '-j', '4', $custom ] ],
	[ 'pg_restore -j 4 from directory', 'r_dir_j', [ 'pg_restore', '-j', '4', $dir ] ],);
for my $r (@restores)
{
	my ($how, $db, $cmd) = @$r;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	($ret, $out, $err) = run_cmd(@$cmd, '-d', $node->connstr($db));
	is($ret, 0, "$how: restore succeeds");
	is($err, '', "$how: restore prints no error or warning");
	check_restored($db, $how);
}

# pg_dump --inserts --on-conflict-do-nothing: the whole dump loads on every
# version (it creates the indexes after the rows); its data loaded again
# into the restored tables is skipped row by row on PostgreSQL 18, and
# refused with gunique's error before 18 (PostgreSQL 15 and 17 arbitrate
# ON CONFLICT only with btree).
my $inserts = "$tmp/inserts.sql";
my $inserts_data = "$tmp/inserts-data.sql";
($ret, $out, $err) = run_cmd('pg_dump', '--inserts', '--on-conflict-do-nothing',
	'-f', $inserts, '-d', $node->connstr('src'));
is($ret, 0, 'pg_dump --inserts --on-conflict-do-nothing') or diag $err;
($ret, $out, $err) = run_cmd('pg_dump', '--data-only', '--inserts',
	'--on-conflict-do-nothing', '--rows-per-insert=7',
	'-f', $inserts_data, '-d', $node->connstr('src'));
is($ret, 0, 'pg_dump --data-only --inserts --on-conflict-do-nothing') or diag $err;
$node->safe_psql('postgres', 'CREATE DATABASE r_inserts');
($ret, $out, $err) = run_cmd('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1',
	'-f', $inserts, '-d', $node->connstr('r_inserts'));
is($ret, 0, 'psql from --inserts --on-conflict-do-nothing: restore succeeds') or diag $err;
check_restored('r_inserts', 'psql from --inserts --on-conflict-do-nothing');
($ret, $out, $err) = run_cmd('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1',
	'-f', $inserts_data, '-d', $node->connstr('r_inserts'));
if (on_conflict_supported($node))
{
	is($ret, 0, 'the same rows loaded again with ON CONFLICT DO NOTHING')
	  or diag $err;
	is($node->safe_psql('r_inserts', $rows_sql), $src_rows,
		'the same rows loaded again: every row skipped');
	is($node->safe_psql('r_inserts', $verify_sql), '',
		'the same rows loaded again: gunique_verify is clean');
}
else
{
	isnt($ret, 0, 'the same rows loaded again: refused before PostgreSQL 18');
	like($err,
		qr/INSERT \.\.\. ON CONFLICT is not supported on a table with a gunique index before PostgreSQL 18/,
		'the same rows loaded again: with gunique\'s error');
}

# A plain dump with a duplicate id added to the COPY data of another
# top-level partition: psql stops on the ALTER INDEX that completes the
# tree, with a 23505 that names the key and both partitions.
my $dup_row = join("\t", 9, '2026-05-05', 'eu', 'injected@example.com', 'inj', 't', -1, -1, 'inj', 'injected');
(my $dup_script = $script) =~
  s/^(COPY public\.orders_2026 \([^\n]*\) FROM stdin;\n)/$1$dup_row\n/m
  or die "no COPY block for orders_2026 in the plain dump";
my $dup_plain = "$tmp/dup.sql";
append_to_file($dup_plain, $dup_script);

my $dup_detail =
  qr/DETAIL:  Key \(id\)=\(9\) is duplicated in partitions "(orders_2024_eu" and "orders_2026|orders_2026" and "orders_2024_eu)"\./;
$node->safe_psql('postgres', 'CREATE DATABASE r_dup_plain');
($ret, $out, $err) = run_cmd('psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-v', 'VERBOSITY=verbose',
	'-f', $dup_plain, '-d', $node->connstr('r_dup_plain'));
isnt($ret, 0, 'plain dump with a duplicate: psql with ON_ERROR_STOP fails');
note "psql: $err";
like($err, qr/ERROR:  23505: could not create unique index "orders_id_key"/,
	'plain dump with a duplicate: 23505 could not create unique index');
like($err, $dup_detail, 'plain dump with a duplicate: the key and both partitions are named');
is($node->safe_psql('r_dup_plain',
		q{SELECT indisvalid FROM pg_index WHERE indexrelid = 'orders_id_key'::regclass}),
	'f', 'plain dump with a duplicate: the index is left invalid');

# The same script without ON_ERROR_STOP: everything else is restored, and
# only the index over the duplicate is invalid.
$node->safe_psql('postgres', 'CREATE DATABASE r_dup_plain2');
($ret, $out, $err) = run_cmd('psql', '-X', '-q', '-v', 'VERBOSITY=verbose',
	'-f', $dup_plain, '-d', $node->connstr('r_dup_plain2'));
my @errors = $err =~ /ERROR:/g;
is(scalar @errors, 1, 'plain dump with a duplicate, no ON_ERROR_STOP: exactly one error')
  or diag $err;
like($err, $dup_detail, 'plain dump with a duplicate, no ON_ERROR_STOP: the error names the duplicate');
is($node->safe_psql('r_dup_plain2',
		q{SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_index i
		  JOIN pg_class c ON c.oid = i.indexrelid WHERE NOT i.indisvalid}),
	'orders_id_key', 'plain dump with a duplicate, no ON_ERROR_STOP: only orders_id_key is invalid');
my $problems = $node->safe_psql('r_dup_plain2',
	q{SELECT string_agg(problem || ': ' || detail, E'\n' ORDER BY problem) FROM gunique_verify('orders_id_key')});
# The failed ALTER INDEX rolled back: the leaf holding the duplicate is
# outside the tree, and the audit says so.
like($problems, qr/^index not valid: Index "orders_id_key" is not valid/m,
	'gunique_verify reports the invalid index');
like($problems, qr/^partition not covered: Partition "orders_2026" has no index in the tree\./m,
	'gunique_verify reports the partition left out of the tree');
($ret, $err) = try_sql('r_dup_plain2', row_sql(12, id => 9, created => q{'2025-01-09'}));
like($err, qr/23505: duplicate key value violates unique constraint/,
	'plain dump with a duplicate: the invalid tree still refuses a third copy of the key');

# Custom format: the schema and data of a database without the indexes, with
# a duplicate lower(email) in a third-level sub-partition, then the
# post-data section of the source dump (its indexes).
$node->safe_psql('postgres', 'CREATE DATABASE dupsrc');
($ret, $out, $err) = run_cmd('pg_restore', '--section=pre-data', '--section=data',
	'-d', $node->connstr('dupsrc'), $custom);
is($ret, 0, 'custom dump, pre-data and data only: restored') or diag $err;
$node->safe_psql('dupsrc', row_sql(13, email => q{'user10@example.com'},
		created => q{'2024-05-05'}, region => q{'us'}, id => -13));
my $dup_custom = "$tmp/dup.dump";
($ret, $out, $err) = run_cmd('pg_dump', '-Fc', '-f', $dup_custom, '-d', $node->connstr('dupsrc'));
is($ret, 0, 'pg_dump of the database with a duplicate') or diag $err;

my $email_detail =
  qr/Key \(lower\(email\)\)=\(user10\@example.com\) is duplicated in partitions "(orders_2024_us_lo" and "orders_2025_h\d|orders_2025_h\d" and "orders_2024_us_lo)"\./;
for my $r ([ 'pg_restore -j 4', 'r_dup_j', [ '-j', '4' ] ],
	[ 'pg_restore --exit-on-error', 'r_dup_e', ['--exit-on-error'] ])
{
	my ($how, $db, $opts) = @$r;
	$node->safe_psql('postgres', "CREATE DATABASE $db");
	($ret, $out, $err) = run_cmd('pg_restore', '-d', $node->connstr($db), $dup_custom);
	is($ret, 0, "$how: tables and rows with a duplicate restored") or diag $err;
	($ret, $out, $err) = run_cmd('pg_restore', '--section=post-data', @$opts,
		'-d', $node->connstr($db), $custom);
	isnt($ret, 0, "$how: restoring the indexes over a duplicate fails");
	note "$how: $err";
	like($err, qr/ERROR:  could not create unique index "orders_email_key"/,
		"$how: could not create unique index");
	like($err, $email_detail, "$how: the key and both partitions are named");
	is($node->safe_psql($db,
			q{SELECT indisvalid FROM pg_index WHERE indexrelid = 'orders_email_key'::regclass}),
		'f', "$how: the index is left invalid");
}
like($err, qr/Command was: ALTER INDEX public\.\w+ ATTACH PARTITION public\.\w+;/,
	'the failing command is the ALTER INDEX that completes the tree');
like(
	slurp_file($node->logfile),
	qr/ERROR:  could not create unique index "orders_email_key"/,
	'the server log has the error too');
# Without --exit-on-error, every other index is restored and valid.  The
# statement that failed may have been the last attach at a lower level, whose
# validation went up to the top: that level stays invalid too.
my $invalid = $node->safe_psql('r_dup_j',
	q{SELECT string_agg(c.relname, ',' ORDER BY c.relname) FROM pg_index i
	  JOIN pg_class c ON c.oid = i.indexrelid WHERE NOT i.indisvalid});
like($invalid, qr/^(orders_\w+_lower_idx,)*orders_email_key$/,
	'pg_restore -j 4: only orders_email_key and members of its tree are invalid');
is($node->safe_psql('r_dup_j', q{
	SELECT string_agg(format('%s: %s', c.relname, v.problem), ', ' ORDER BY 1)
	FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
	JOIN pg_am a ON a.oid = c.relam AND a.amname = 'gunique',
	LATERAL gunique_verify(i.indexrelid) v
	WHERE NOT EXISTS (SELECT FROM pg_inherits WHERE inhrelid = i.indexrelid)
	  AND c.relname <> 'orders_email_key'}),
	'', 'pg_restore -j 4: gunique_verify of every other tree is clean');

unlike(slurp_file($node->logfile), qr/TRAP:|PANIC:|server process .* was terminated|terminated by signal/,
	'server log shows no crash or assertion failure');
$node->stop;

done_testing();

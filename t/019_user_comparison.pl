# Copyright (c) gunique contributors
#
# An operator class whose comparison function runs SQL.  gunique calls the
# comparison function of a key while it holds the key's lock, an LWLock,
# which holds off cancellation and which every inserter of an equal key
# waits on (src/README, invariant 4).  A comparison function that looked
# the key up in its own table hung the first insert after CREATE INDEX
# for good: the lookup reads the group's key filter under the same lock,
# taken in share mode, while the insert's probe held it exclusive; neither
# statement_timeout nor pg_cancel_backend could end it, and it held up
# every later inserter of the key.
#
# CREATE INDEX now refuses an operator class whose comparison function is
# not written in C; and an index whose function is replaced since by one
# that runs SQL takes no insert that must look in another partition: the
# same insert fails at once.  (sql/opclass.sql shows both messages with a
# harmless function.)

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;

my $node = PostgreSQL::Test::Cluster->new('usercmp');
$node->init;
$node->append_conf('postgresql.conf', "shared_preload_libraries = 'gunique'\n");
$node->start;

# 20 partitions, so that a query by the key is a lookup through the
# group's filter; the function looks the key it is given up once (not from
# the comparisons of that lookup itself).
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION gunique;
CREATE TABLE uc (p int, k int) PARTITION BY LIST (p);
SELECT format('CREATE TABLE uc_%s PARTITION OF uc FOR VALUES IN (%s)', i, i)
  FROM generate_series(0, 19) i \gexec
INSERT INTO uc SELECT i % 20, i FROM generate_series(1, 20000) i;
CREATE FUNCTION looking_cmp(a int, b int) RETURNS int LANGUAGE plpgsql AS $$
DECLARE
	r record;
BEGIN
	IF current_setting('uc.looking', true) IS DISTINCT FROM 'on' THEN
		PERFORM set_config('uc.looking', 'on', true);
		SELECT * INTO r FROM uc WHERE k = a;
		PERFORM set_config('uc.looking', 'off', true);
	END IF;
	RETURN btint4cmp(a, b);
END $$;
CREATE OPERATOR CLASS looking_ops FOR TYPE int USING gunique AS
	OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >,
	FUNCTION 1 looking_cmp(int, int);
CREATE FUNCTION c_cmp(int, int) RETURNS int LANGUAGE internal IMMUTABLE STRICT
	AS 'btint4cmp';
CREATE OPERATOR CLASS c_ops FOR TYPE int USING gunique AS
	OPERATOR 1 <, OPERATOR 2 <=, OPERATOR 3 =, OPERATOR 4 >=, OPERATOR 5 >,
	FUNCTION 1 c_cmp(int, int);
});

my ($ret, $out, $err) = $node->psql('postgres',
	'CREATE UNIQUE INDEX uc_looking ON uc USING gunique (k looking_ops)');
isnt($ret, 0, 'CREATE INDEX refuses a comparison function in PL/pgSQL');
like(
	$err,
	qr/operator class "looking_ops" cannot be used by access method "gunique"/,
	'and says which operator class');

# An index made with a function in C, which is then replaced.
$node->safe_psql(
	'postgres', q{
DROP INDEX IF EXISTS uc_looking;
CREATE UNIQUE INDEX uc_k ON uc USING gunique (k c_ops);
ANALYZE uc;
});
like(
	$node->safe_psql('postgres', 'EXPLAIN (COSTS OFF) SELECT * FROM uc WHERE k = 7'),
	qr/GuniqueLookup/, 'a query by the key is a lookup');
$node->safe_psql(
	'postgres', q{
CREATE OR REPLACE FUNCTION c_cmp(a int, b int) RETURNS int LANGUAGE plpgsql
	IMMUTABLE STRICT AS $$
DECLARE
	r record;
BEGIN
	IF current_setting('uc.looking', true) IS DISTINCT FROM 'on' THEN
		PERFORM set_config('uc.looking', 'on', true);
		SELECT * INTO r FROM uc WHERE k = a;
		PERFORM set_config('uc.looking', 'off', true);
	END IF;
	RETURN btint4cmp(a, b);
END $$;
});

# Key 7 is in uc_7: the insert into uc_1 looks for it there.  Before, it
# hung past its statement_timeout; psql's own timeout then ends the test,
# and the cluster's immediate shutdown the backend.
my $timed_out = 0;
($ret, $out, $err) = $node->psql(
	'postgres',
	"SET statement_timeout = '2s'; INSERT INTO uc VALUES (1, 7);",
	timeout => 60,
	timed_out => \$timed_out);
ok(!$timed_out, 'the insert does not hang');
like(
	$err,
	qr/cannot insert into index "uc_1_k_idx".*comparison function public.c_cmp\(integer,integer\) of its key is not written in C/s,
	'it is refused, naming the comparison function');
# (A hung insert would hold the key's lock, and a lookup of the key would
# wait for it.)
is($node->safe_psql('postgres', 'SELECT count(*) FROM uc WHERE k = 7'),
	'1', 'the key is held once')
  unless $timed_out;

done_testing();

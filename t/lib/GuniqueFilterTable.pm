# Copyright (c) gunique contributors
#
# The table the key filter tests (t/011, t/012) share: t(a, k), range
# partitioned on a into $parts partitions of 10,000 values each, with the
# even values of a loaded, k = kf(a) (distinct keys in random order), a
# gunique index t_k on k, and refused(a, k): would k be refused in the
# partition of a?  (The insert is rolled back either way.)

package GuniqueFilterTable;

use strict;
use warnings;
use Exporter 'import';

our @EXPORT = qw(create_filter_table refused_sample);

sub create_filter_table
{
	my ($node, $parts) = @_;

	$node->safe_psql(
		'postgres', qq{
CREATE EXTENSION gunique;
CREATE FUNCTION kf(i bigint) RETURNS bigint IMMUTABLE LANGUAGE sql
  AS 'SELECT (i * 2654435761) % 1000000007';
CREATE TABLE t (a int NOT NULL, k bigint) PARTITION BY RANGE (a);
SELECT format('CREATE TABLE t_%s PARTITION OF t FOR VALUES FROM (%s) TO (%s)',
			  p, p * 10000, (p + 1) * 10000) FROM generate_series(0, $parts - 1) p \\gexec
INSERT INTO t SELECT i, kf(i) FROM generate_series(0, $parts * 10000 - 1, 2) i;
CREATE UNIQUE INDEX t_k ON t USING gunique (k);
CREATE FUNCTION refused(a int, k bigint) RETURNS boolean LANGUAGE plpgsql AS \$f\$
BEGIN
	BEGIN
		INSERT INTO t VALUES (a, k);
		RAISE EXCEPTION USING ERRCODE = 'P0009';
	EXCEPTION
		WHEN unique_violation THEN RETURN true;
		WHEN SQLSTATE 'P0009' THEN RETURN false;
	END;
END
\$f\$;
});
	return;
}

# A query counting sampled keys of every partition that the next
# partition does not refuse: 0 when the filters miss nothing.
sub refused_sample
{
	my ($parts) = @_;
	my $rows = $parts * 10000;

	return qq{
SELECT count(*) FILTER (WHERE NOT refused((a + 10000) % $rows, k))
  FROM (SELECT a, k FROM t WHERE a % 997 = 0) s};
}

1;

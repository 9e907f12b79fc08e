# Workload 1: the timing table of the talk "Global Unique Index" (seed 000),
# for every contender, with keys in partition-key order ("correlated",
# b = a) and in a pseudo-random order ("random", b = a permutation of a).
#
#   test(a int, b int, c text) range-partitioned on a into 6 partitions of
#   N/6 rows; unique key b.  Each step is timed on its own:
#
#   insert  INSERT INTO test SELECT ... of N rows from a staging table
#   delete  DELETE FROM test
#           (untimed: drop the enforcement, truncate, re-insert, VACUUM)
#   create  create the enforcement over the N rows
#           (untimed: test7 of N/6 rows, VACUUM)
#   attach  ALTER TABLE test ATTACH PARTITION test7, plus what the
#           contender needs to keep the guarantee
#   detach  ALTER TABLE test DETACH PARTITION test7 (sidetable: and forget
#           its keys)
#
# The contender "single" is one unpartitioned table with a unique btree:
# insert, delete and create only.
#
# Sourced by bench/run; defines workload_1.
set -euo pipefail

workload_1()
{
	local run order c
	w1_stage
	for ((run = 1; run <= RUNS; run++)); do
		for order in correlated random; do
			for c in $(rotated $((run - 1))); do
				w1_contender "$order" "$c" "$run"
			done
		done
	done
	{
		drop_all_sql test test7
		echo "DROP TABLE w1_stage_correlated, w1_stage_correlated7, w1_stage_random, w1_stage_random7;"
	} | sql >/dev/null
}

# The staging tables, built once: N rows for test and N/6 for test7, in both
# key orders.  Reading them is part of the timed INSERT (a sequential scan
# of a frozen table); generating the keys is not.
w1_stage()
{
	local n=$W1_N p=$((W1_N / 6))
	log "w1: staging tables, N = $n"
	sql >/dev/null <<-SQL
		$(drop_all_sql test test7)
		DROP TABLE IF EXISTS w1_stage_correlated, w1_stage_correlated7, w1_stage_random, w1_stage_random7;
		CREATE TABLE w1_stage_correlated AS
			SELECT a, a AS b, 'test'::text AS c FROM generate_series(0, $n - 1) a;
		CREATE TABLE w1_stage_correlated7 AS
			SELECT a, a AS b, 'test'::text AS c FROM generate_series($n, $n + $p - 1) a;
		CREATE TABLE w1_stage_random AS
			SELECT a, $(perm a) AS b, 'test'::text AS c FROM generate_series(0, $n - 1) a;
		CREATE TABLE w1_stage_random7 AS
			SELECT a, $(perm a) AS b, 'test'::text AS c FROM generate_series($n, $n + $p - 1) a;
		VACUUM (FREEZE, ANALYZE) w1_stage_correlated, w1_stage_correlated7, w1_stage_random, w1_stage_random7;
		-- the permutation is a bijection, but say so once
		DO \$\$
		BEGIN
			IF (SELECT count(DISTINCT b) FROM (SELECT b FROM w1_stage_random UNION ALL SELECT b FROM w1_stage_random7) s)
				<> $n + $p THEN
				RAISE EXCEPTION 'random keys are not unique';
			END IF;
		END \$\$;
	SQL
}

# The staging table of test7 for a key order.
w1_stage7() { echo "w1_stage_${1}7"; }

# One contender, one key order, one run: every step.  Each step is one psql
# session: its untimed preparation, then the timed statements.  A CHECKPOINT
# starts the contender's sequence; the pages the steps touch are written
# after it, so no timed step writes full-page images for pages of an earlier
# step (a checkpoint before each step would charge the delete step with one
# per heap page).  max_wal_size is large enough for no other checkpoint to
# start during the sequence.
w1_contender()
{
	local order=$1 c=$2 run=$3 n=$W1_N p=$((W1_N / 6)) ms prelude
	local tag="w1 $order $c run $run"

	# insert: into an empty table with the enforcement in place.  The table
	# has statistics from an earlier fill (ANALYZE, then TRUNCATE), as a table
	# in use would: without them the trigger's lookup is planned with bitmap
	# scans and the trigger contender is about twice as slow.
	prelude=$(
		drop_all_sql test test7
		if [ "$c" = single ]; then
			echo "CREATE TABLE test (a int, b int, c text);"
		else
			echo "CREATE TABLE test (a int, b int, c text) PARTITION BY RANGE (a);"
			range_partitions_sql test 6 0 "$n"
		fi
		echo "INSERT INTO test SELECT a, b, c FROM w1_stage_$order;"
		echo "ANALYZE test;"
		echo "TRUNCATE test;"
		enforce_sql "$c" test b int "b, a"
		echo "CHECKPOINT;"
	)
	ms=$(echo "INSERT INTO test SELECT a, b, c FROM w1_stage_$order;" | timed_sql "$prelude")
	record w1 "$order" insert "$c" "$run" "$ms" ms
	log "$tag: insert $ms ms"

	# delete: all of them
	ms=$(echo "DELETE FROM test;" | timed_sql)
	record w1 "$order" delete "$c" "$run" "$ms" ms
	log "$tag: delete $ms ms"

	# create: the enforcement over the same rows, inserted again without it
	prelude=$(
		drop_enforce_sql "$c" test
		echo "TRUNCATE test;"
		echo "INSERT INTO test SELECT a, b, c FROM w1_stage_$order;"
		echo "VACUUM (ANALYZE) test;"
	)
	ms=$(enforce_sql "$c" test b int "b, a" | timed_sql "$prelude")
	record w1 "$order" create "$c" "$run" "$ms" ms
	log "$tag: create $ms ms"

	# Untimed, first run only: does the contender enforce what it claims?
	if [ "$run" = 1 ]; then w1_sanity "$order" "$c"; fi

	[ "$c" = single ] && return 0

	# attach: the 7th table, filled (untimed), as the talk does
	prelude=$(
		echo "CREATE TABLE test7 (a int, b int, c text);"
		echo "INSERT INTO test7 SELECT a, b, c FROM $(w1_stage7 "$order");"
		echo "VACUUM (ANALYZE) test7;"
		vacuum_sql "$c" test
		prewarm_sql test
	)
	ms=$(attach_sql "$c" test test7 "FOR VALUES FROM ($n) TO ($((n + p)))" b | timed_sql "$prelude")
	record w1 "$order" attach "$c" "$run" "$ms" ms
	log "$tag: attach $ms ms"

	if [ "$run" = 1 ]; then
		printf '%s\t%s\t%s\n' "$([ "$c" = local ] && echo accepted || echo refused)" \
			"$order: a duplicate of a key of the attached partition" \
			"INSERT INTO test VALUES (0, (SELECT b FROM test7 WHERE a = $n), 'dup')" |
			checks w1 "$c"
	fi

	# detach
	ms=$(detach_sql "$c" test test7 b | timed_sql)
	record w1 "$order" detach "$c" "$run" "$ms" ms
	log "$tag: detach $ms ms"
}

# The untimed checks, on the N rows after "create" (each rolled back).  Only
# local accepts a key that another partition holds: it is unique per
# partition only.  The side table must follow a row that moves to another
# partition.
w1_sanity()
{
	local order=$1 c=$2 n=$W1_N dup=refused consistent=""
	if [ "$c" = local ]; then dup=accepted; fi
	if [ "$c" = sidetable ]; then
		consistent="; IF (SELECT count(*) FROM test_side) <> (SELECT count(*) FROM test) THEN RAISE EXCEPTION 'side table out of step'; END IF"
	fi
	checks w1 "$c" <<-EOF
		$dup	$order: a duplicate of a key in another partition	INSERT INTO test VALUES ($n - 1, (SELECT b FROM test WHERE a = 0), 'dup')
		$dup	$order: an UPDATE to a key another partition holds	UPDATE test SET b = (SELECT b FROM test WHERE a = 0) WHERE a = $n - 1
		accepted	$order: an UPDATE that keeps the key	UPDATE test SET b = b, c = 'kept' WHERE a = 0
		accepted	$order: a row moved to another partition with its key	UPDATE test SET a = $n - 1 WHERE a = 0$consistent
	EOF
}

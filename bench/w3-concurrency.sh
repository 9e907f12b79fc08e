# Workload 3: concurrent inserters, with pgbench.
#
# 3a  W3A_CLIENTS clients insert one row per transaction for W3A_SECS
#     seconds into w3a(a int, k bigint, c text), range-partitioned on a into
#     W3A_PARTITIONS partitions; a is random, the unique key k is a
#     permutation of nextval() of a sequence, so keys look random and never
#     collide (no client aborts).  The table holds W3A_BASE rows first.
#     Prepared statements (-M prepared).
#
# 3b  The de-duplication workload of seed 002 ("Postgres partitioning
#     performance: Hash vs. List"): w3b(id uuid) in 16 partitions, either
#     list-partitioned on lower(left(id::text, 1)) or hash-partitioned on id;
#     10 clients, each transaction inserts 1,000 gen_random_uuid() rows,
#     W3B_TX transactions per client, simple query mode as in the article.
#     Unlike the article, the table holds W3B_BASE rows first, with
#     statistics (VACUUM ANALYZE): the trigger contender's lookup, planned
#     on empty partitions, would use bitmap heap scans and be an order of
#     magnitude slower than with the index-only scans it gets on a table
#     in use.
#     local is a primary key on the parent (hash: the partition key is the
#     key, so it is unique across partitions) or on each partition (list on
#     an expression: PostgreSQL refuses the parent's primary key; since the
#     partition is a function of the id, it is unique across partitions
#     too).  Each run starts from a fresh table.
#
# Reported: pgbench's tps (without initial connection time) and average
# latency.
#
# Sourced by bench/run; defines workload_3.
set -euo pipefail

workload_3()
{
	local run c variant
	for ((run = 1; run <= RUNS; run++)); do
		for c in $(rotated $((run - 1))); do
			w3a_contender "$c" "$run"
		done
	done
	for ((run = 1; run <= RUNS; run++)); do
		for variant in hash list; do
			for c in $(rotated $((run - 1))); do
				w3b_contender "$variant" "$c" "$run"
			done
		done
	done
	drop_all_sql w3a w3b | sql >/dev/null
}

# 3a: one contender, one run.
w3a_contender()
{
	local c=$1 run=$2 width=100000 parts=$W3A_PARTITIONS
	local range=$((width * parts)) script="$WORK/w3a.sql" res
	{
		drop_all_sql w3a
		echo "DROP SEQUENCE IF EXISTS w3a_seq;"
		if [ "$c" = single ]; then
			echo "CREATE TABLE w3a (a int, k bigint, c text);"
		else
			echo "CREATE TABLE w3a (a int, k bigint, c text) PARTITION BY RANGE (a);"
			range_partitions_sql w3a "$parts" 0 "$range"
		fi
		# the rows already there: keys perm(0 .. BASE-1), then the sequence
		# continues from BASE
		echo "INSERT INTO w3a SELECT (i::bigint * 7919 % $range)::int, $(perm i), 'x' FROM generate_series(0, $W3A_BASE - 1) i;"
		echo "CREATE SEQUENCE w3a_seq START $W3A_BASE;"
		enforce_sql "$c" w3a k bigint "k, a"
		vacuum_sql "$c" w3a
		prewarm_sql w3a
		echo "CHECKPOINT;"
	} | sql >/dev/null
	cat >"$script" <<-SQL
		\\set a random(0, $((range - 1)))
		INSERT INTO w3a (a, k, c) VALUES (:a, (nextval('w3a_seq') + 1) * $PERM_G % $PERM_P, 'x');
	SQL
	res=$(run_pgbench "w3a-$c-$run" -M prepared -c "$W3A_CLIENTS" -j "$(jobs_for "$W3A_CLIENTS")" \
		-T "$W3A_SECS" -f "$script")
	record w3a - tps "$c" "$run" "${res% *}" tps
	record w3a - latency "$c" "$run" "${res#* }" ms
	log "w3a $c run $run: ${res% *} tps, ${res#* } ms"
}

# 3b: one partitioning, one contender, one run.
w3b_contender()
{
	local variant=$1 c=$2 run=$3 script="$WORK/w3b.sql" res local_spec=pk i
	{
		drop_all_sql w3b
		if [ "$c" = single ]; then
			echo "CREATE TABLE w3b (id uuid NOT NULL);"
		elif [ "$variant" = hash ]; then
			echo "CREATE TABLE w3b (id uuid NOT NULL) PARTITION BY HASH (id);"
			for ((i = 0; i < 16; i++)); do
				printf 'CREATE TABLE w3b_%02d PARTITION OF w3b FOR VALUES WITH (MODULUS 16, REMAINDER %d);\n' $i $i
			done
		else
			echo "CREATE TABLE w3b (id uuid NOT NULL) PARTITION BY LIST (lower(left(id::text, 1)));"
			for ((i = 0; i < 16; i++)); do
				printf "CREATE TABLE w3b_%02d PARTITION OF w3b FOR VALUES IN ('%x');\n" $i $i
			done
			local_spec=each-pk
		fi
		echo "INSERT INTO w3b SELECT gen_random_uuid() FROM generate_series(1, $W3B_BASE);"
		enforce_sql "$c" w3b id uuid "$local_spec"
		vacuum_sql "$c" w3b
		prewarm_sql w3b
		echo "CHECKPOINT;"
	} | sql >/dev/null
	cat >"$script" <<-SQL
		INSERT INTO w3b SELECT gen_random_uuid() FROM generate_series(1, 1000);
	SQL
	res=$(run_pgbench "w3b-$variant-$c-$run" -c "$W3B_CLIENTS" -j "$(jobs_for "$W3B_CLIENTS")" \
		-t "$W3B_TX" -f "$script")
	record w3b "$variant" tps "$c" "$run" "${res% *}" tps
	record w3b "$variant" latency "$c" "$run" "${res#* }" ms
	log "w3b $variant $c run $run: ${res% *} tps, ${res#* } ms"
	if [ "$run" = 1 ]; then
		# every contender, local included, refuses an id that is already there
		printf '%s\t%s\t%s\n' refused "$variant: an id inserted again" \
			"INSERT INTO w3b SELECT id FROM w3b LIMIT 1" | checks w3b "$c"
	fi
}

# Workload 7: de-duplicating ingest, with pgbench.
#
# An event ingester that receives events at least once: each transaction
# inserts a batch of 1,000 events with INSERT ... SELECT ... ON CONFLICT
# (id) DO NOTHING, and 200 of the 1,000 ids (20%) are already in the table.
# w7(id bigint, day date, payload text), W7_CLIENTS (10) clients, W7_TX
# transactions per client, simple query mode (as 3b), for each partition
# count in W7_PARTITIONS (8 and 64; BENCH_W7_PARTITIONS).  And the same
# with one event per statement, as an application that upserts each event
# it receives: INSERT ... VALUES (...) ON CONFLICT (id) DO NOTHING, prepared,
# 100 * W7_TX transactions per client, every fifth id held (variant
# "<partitions>x1"; BENCH_W7_ROWS="1000 1" chooses).  Contenders:
#
#   single   the rows in one unpartitioned table, a unique btree on id
#   local    the table hash-partitioned on id into the same number of
#            partitions, a primary key on id: the partitioning that allows
#            a key on id alone (a duplicate id lands in the partition that
#            holds the id)
#   gunique  the table range-partitioned on day, one day per partition,
#            CREATE UNIQUE INDEX ... USING gunique (id): a duplicate id's
#            new row is routed by its day to another partition than the
#            one that holds the id
#
# trigger and sidetable are not run: PostgreSQL cannot arbitrate ON
# CONFLICT with a trigger or a side table's key.
#
# The ids.  Client c's k-th transaction (k from 1; a pgbench variable
# defined with -D and counted by the script) inserts the ids [lo, lo +
# rows) with lo = ((k - 1) * W7_CLIENTS + c) * rows: no two batches share
# an id, so clients do not wait for each other.  Before the run the table
# holds every multiple of 5 below W7_CLIENTS * transactions * rows (the
# 200 held ids of every batch of 1,000; every fifth single id) and W7_BASE
# older ids above that range.  With N
# partitions, a held id's row is on day id % N and a batch's row on day
# (id + 1 + (c + k) % (N - 1)) % N, never the same: with gunique every
# held id of a batch is in another partition than the new row's.  The rows
# are the same for every contender; only the partitioning differs.
#
# Each run starts from a fresh table: load, the contender's key (enforce_sql),
# VACUUM (ANALYZE), prewarm, CHECKPOINT.  After each run, untimed: the
# table must hold exactly the old ids and every id of every batch, each once
# (count(*) = count(DISTINCT id) = W7_BASE + W7_CLIENTS * W7_TX * 1,000),
# else the run stops; the outcome goes to sanity.tsv.  In the first run,
# rolled back: the workload's statement for the batch [0, 1,000), all of
# whose ids are held by then (with gunique, each in another partition than
# its new row's), inserts nothing, and a plain INSERT of a held id on
# another day (another partition with gunique) is refused.
#
# Before PostgreSQL 18 (without the core change of contrib-patches/), a
# server refuses any INSERT ... ON CONFLICT on a table with a gunique
# index.  The gunique contender tries the workload's statement for no rows
# before each of its runs: refused with gunique's error, it is recorded as
# refused (raw.tsv step "refused", sanity.tsv) instead of measured, and
# the report says so in its cells; any other error stops the run.
#
# Reported, as variant "<partitions>" (batches) or "<partitions>x1" (single
# rows): pgbench's tps (without initial connection time), rows per second
# (tps x rows tried; 80% of them inserted) and average latency.
#
# Sourced by bench/run; defines workload_7.
set -euo pipefail

W7_CONTENDERS="single local gunique"
W7_REFUSAL="INSERT ... ON CONFLICT is not supported on a table with a gunique index before PostgreSQL 18"

workload_7()
{
	local parts rows run c
	for rows in $W7_ROWS; do
		for parts in $W7_PARTITIONS; do
			for ((run = 1; run <= RUNS; run++)); do
				for c in $(rotated $((run - 1))); do
					case " $W7_CONTENDERS " in *" $c "*) w7_contender "$c" "$run" "$parts" "$rows" ;; esac
				done
			done
		done
	done
	drop_all_sql w7 | sql >/dev/null
}

# Transactions per client for ROWS rows per statement.
w7_tx() { if [ "$1" = 1 ]; then echo $((W7_TX * 100)); else echo "$W7_TX"; fi; }

# The ids of all batches of ROWS rows: [0, w7_range ROWS).
w7_range() { echo $((W7_CLIENTS * $(w7_tx "$1") * $1)); }

# The variant: PARTS, or PARTSx1 for single rows.
w7_variant() { if [ "$2" = 1 ]; then echo "${1}x1"; else echo "$1"; fi; }

# The day of a batch's row: SQL of id i, client s-offset s, PARTS days.
w7_day_sql() { echo "date '2026-01-01' + (($1 + 1 + $2) % $3)::int"; }

# w7_table CONTENDER PARTS ROWS: the fresh table, loaded, with the
# contender's key.
w7_table()
{
	local c=$1 parts=$2 range
	range=$(w7_range "$3")
	drop_all_sql w7
	case "$c" in
	single)
		echo "CREATE TABLE w7 (id bigint NOT NULL, day date NOT NULL, payload text);"
		;;
	local)
		echo "CREATE TABLE w7 (id bigint NOT NULL, day date NOT NULL, payload text) PARTITION BY HASH (id);"
		cat <<-SQL
			DO \$\$
			BEGIN
				FOR i IN 0 .. $parts - 1 LOOP
					EXECUTE format('CREATE TABLE w7_p%s PARTITION OF w7 FOR VALUES WITH (MODULUS $parts, REMAINDER %s)', i, i);
				END LOOP;
			END \$\$;
		SQL
		;;
	gunique)
		echo "CREATE TABLE w7 (id bigint NOT NULL, day date NOT NULL, payload text) PARTITION BY RANGE (day);"
		cat <<-SQL
			DO \$\$
			BEGIN
				FOR i IN 0 .. $parts - 1 LOOP
					EXECUTE format('CREATE TABLE w7_p%s PARTITION OF w7 FOR VALUES FROM (%L) TO (%L)',
						i, date '2026-01-01' + i, date '2026-01-01' + i + 1);
				END LOOP;
			END \$\$;
		SQL
		;;
	esac
	# the held ids of every batch, then the older ids above them
	cat <<-SQL
		INSERT INTO w7
		SELECT i, date '2026-01-01' + (i % $parts)::int, md5(i::text)
		  FROM generate_series(0, $range - 1, 5) i;
		INSERT INTO w7
		SELECT i, date '2026-01-01' + (i % $parts)::int, md5(i::text)
		  FROM generate_series($range, $range + $W7_BASE - 1) i;
	SQL
	case "$c" in
	local) enforce_sql local w7 id bigint pk ;;
	*) enforce_sql "$c" w7 id bigint - ;;
	esac
}

# w7_insert_sql FROM TO S PARTS: the workload's statement for the ids FROM
# to TO (SQL expressions) with day offset S, in a table of PARTS partitions.
w7_insert_sql()
{
	cat <<-SQL
		INSERT INTO w7 (id, day, payload)
		SELECT i, $(w7_day_sql i "$3" "$4"), md5(i::text)
		  FROM generate_series(($1)::bigint, ($2)::bigint) i
		ON CONFLICT (id) DO NOTHING
	SQL
}

# w7_insert_one_sql ID S PARTS: the single-row statement.
w7_insert_one_sql()
{
	cat <<-SQL
		INSERT INTO w7 (id, day, payload)
		VALUES ($1, $(w7_day_sql "$1" "$2" "$3"), md5(($1)::text))
		ON CONFLICT (id) DO NOTHING
	SQL
}

# Does the server refuse the workload's statement on a table with a gunique
# index?  (Before PostgreSQL 18, without contrib-patches/.)  Tried once, for
# no rows (the refusal comes as the executor starts, before any row; on a
# server that accepts it, nothing is inserted).  Any error other than
# gunique's refusal stops the run.
w7_refused()
{
	local out rc=0
	out=$(printf '%s;\n' "$(w7_insert_sql 0 -1 0 "$1")" | bench_psql 2>&1) || rc=$?
	printf -- '-- %s w7: is ON CONFLICT refused?\n%s\n' "$(date +%T)" "$out" >>"$OUT/logs/sql.log"
	if [ $rc = 0 ]; then
		return 1
	fi
	if printf '%s\n' "$out" | grep -qF "$W7_REFUSAL"; then
		return 0
	fi
	printf '%s\n' "$out" | tail -n 5 >&2
	die "w7: the workload's statement failed on gunique's table (see $OUT/logs/sql.log)"
}

# w7_sanity CONTENDER DESCRIPTION EXPECTED OUTCOME: one line of sanity.tsv;
# stops the run if OUTCOME is not EXPECTED.
w7_sanity() { sanity_line w7 "$@"; }

w7_contender()
{
	local c=$1 run=$2 parts=$3 rows=$4 script="$WORK/w7.sql" res total got v tx stmt mode
	total=$((W7_BASE + $(w7_range "$rows")))
	v=$(w7_variant "$parts" "$rows")
	tx=$(w7_tx "$rows")
	w7_table "$c" "$parts" "$rows" | sql >/dev/null

	if [ "$c" = gunique ] && w7_refused "$parts"; then
		record w7 "$v" refused "$c" "$run" 1 flag
		log "w7 $v $c run $run: refused by the server ($W7_REFUSAL)"
		w7_sanity "$c" "$v: the workload's INSERT ... ON CONFLICT DO NOTHING" \
			"refused before PostgreSQL 18" "refused before PostgreSQL 18"
		if [ "$run" = 1 ]; then w7_refuses_held "$c" "$parts"; fi
		return
	fi
	{
		vacuum_sql "$c" w7
		prewarm_sql w7
		echo "CHECKPOINT;"
	} | sql >/dev/null

	if [ "$rows" = 1 ]; then
		stmt=$(w7_insert_one_sql "(:lo::bigint)" "(:s::int)" "$parts") mode=prepared
	else
		stmt=$(w7_insert_sql :lo ":lo + $((rows - 1))" :s "$parts") mode=simple
	fi
	cat >"$script" <<-SQL
		\\set k :k + 1
		\\set lo ((:k - 1) * $W7_CLIENTS + :client_id) * $rows
		\\set s (:client_id + :k) % $((parts - 1))
		$stmt;
	SQL
	res=$(run_pgbench "w7-$v-$c-$run" -c "$W7_CLIENTS" -j "$(jobs_for "$W7_CLIENTS")" \
		-t "$tx" -M "$mode" -D k=0 -f "$script")
	record w7 "$v" tps "$c" "$run" "${res% *}" tps
	record w7 "$v" rows "$c" "$run" "$(awk -v t="${res% *}" -v r="$rows" 'BEGIN { printf "%.1f", t * r }')" rows/s
	record w7 "$v" latency "$c" "$run" "${res#* }" ms
	log "w7 $v $c run $run: ${res% *} tps, ${res#* } ms"

	# Every id exactly once, the old ones and every batch's: the ids are
	# then exactly [0, total).
	got=$(sql_value "SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || count(*) FILTER (WHERE id NOT BETWEEN 0 AND $total - 1) FROM w7")
	[ "$got" = "$total $total 0" ] && got=exact || got="rows, distinct ids, ids outside: $got"
	w7_sanity "$c" "$v: after each run, every id held or tried exactly once ($total rows)" exact "$got"

	if [ "$run" = 1 ]; then
		# The workload's statement for a batch that is all held now (with
		# gunique, each id in another partition than its new row's): all
		# skipped.
		got=$(printf 'BEGIN;\nWITH ins AS (%s RETURNING 1) SELECT count(*) FROM ins;\nROLLBACK;\n' \
			"$(w7_insert_sql 0 999 3 "$parts")" | bench_psql -At 2>>"$OUT/logs/sql.log") ||
			die "w7: the skip check of $c failed (see $OUT/logs/sql.log)"
		w7_sanity "$c" "$parts partitions: the workload's INSERT ... ON CONFLICT DO NOTHING of 1,000 held ids" \
			"0 inserted" "$got inserted"
		w7_refuses_held "$c" "$parts"
	fi
}

# Every contender refuses a plain INSERT of a held id on another day (with
# gunique, into another partition), also where ON CONFLICT is refused.
w7_refuses_held()
{
	printf '%s\t%s\t%s\n' refused "$2 partitions: a plain INSERT of a held id on another day" \
		"INSERT INTO w7 VALUES (5, date '2026-01-01' + (6 % $2), 'dup')" | checks w7 "$1"
}

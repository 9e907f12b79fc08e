# Workload 2: insert cost per row against the number of partitions.
#
# For each partition count in W2_PARTITIONS (1, 6, 32, 128, 512), each key
# order (correlated: b = a; random: b = a permutation of a) and each
# contender: w2(a int, b int, c text), range-partitioned on a into that many
# equal partitions over [0, W2_TOTAL), holds W2_TOTAL - W2_ROWS rows with
# the enforcement built over them; then the W2_ROWS missing rows (every
# (W2_TOTAL / W2_ROWS)-th a, so every partition gets its share and keys land
# between existing keys) are inserted with one INSERT ... SELECT.  Reported:
# that statement's time / W2_ROWS, in µs per row.  "single" (one
# unpartitioned table) is measured the same way and drawn as a flat line.
#
# The table is loaded once per partition count and key order with all
# W2_TOTAL rows; each contender starts (untimed) with a CHECKPOINT, deletes
# the W2_ROWS rows, VACUUMs and builds its enforcement, so every contender
# inserts into the same table (with the same free space), and the pages it
# touches have been written since the checkpoint (no full-page images in
# the timed statement).  W2_TOTAL is chosen so that partitions are large enough for
# PostgreSQL to plan index scans (not sequential scans) for the trigger
# contender's lookup even at 512 partitions.
#
# Before the timed insert, the session warms its caches (relcache, gunique's
# per-backend cache of the tree, and the trigger contender's plans:
# PostgreSQL compiles its trigger function for each partition's cloned
# trigger and plans the lookup 5 times before settling on a generic plan,
# per partition and per session) by trying to insert 6 rows of every
# partition that are already there: every contender refuses each one with a
# unique violation, in a subtransaction of its own, so the warm-up leaves no
# key behind anywhere and the timed rows are new keys for every contender
# (see w2_warm_sql).  A cold session with hundreds of partitions and few
# rows in each would pay mostly for that planning.
#
# Key types (W2_KEYS, BENCH_W2_KEYS): every row also carries a uuid u and a
# text e-mail address e made from b (so each is unique exactly when b is),
# and the unique key is b (int: the variants "correlated" and "random",
# as in earlier rounds), u (uuid, "random-uuid"), e (text, "random-email")
# or the pair (b, e) ("correlated-pair", "random-pair").  Keys other than
# int are measured for local, gunique and single only (the trigger and
# side-table contenders are written for one integer key).
#
# Keys that come back (W2_CASES, BENCH_W2_CASES), int keys only, for
# local, gunique and single:
#   - "reinsert" (variants correlated-reinsert, random-reinsert): before the
#     timed INSERT, untimed, the same rows are inserted and rolled back, as
#     an application retries a transaction that failed; every timed key is
#     then in its own partition's btree (a dead entry) and in gunique's key
#     filters;
#   - "update" (correlated-update, random-update): the timed rows are not
#     deleted, a plain btree index on c is added (untimed, every
#     contender), and the timed statement is a non-HOT UPDATE of c that
#     keeps the key, of W2_ROWS rows with consecutive a in the middle of
#     the table (so partition pruning finds them in a few partitions, and
#     their keys, random or not, are those of the table).  Reported per row
#     updated.
#
# For gunique, the btree searches of partitions per row of the timed
# statement (gunique_stat_probes, reset just before it) are recorded too
# (workload "w2searches").
#
# BENCH_W2_WARM=reinsert restores the warm-up of earlier rounds (6 of the
# timed rows per partition inserted and rolled back, so that at 512
# partitions 3,072 of the 5,000 timed keys had been inserted before): it
# measures keys that come back after a rollback, and reproduces the
# results published before it changed.
#
# Sourced by bench/run; defines workload_2.
set -euo pipefail

# The uuid and the e-mail address of a row, from its b.
W2_U="md5(b::text)::uuid"
W2_E="'user' || md5(b::text) || '@example.com'"

# w2_orders KEYS: the key orders measured for a key type.
w2_orders()
{
	case "$1" in
	int | pair) echo correlated random ;;
	uuid | email) echo random ;;
	*) die "BENCH_W2_KEYS: unknown key type '$1' (int, uuid, email, pair)" ;;
	esac
}

# w2_variant ORDER KEYS CASE: the name results are recorded under.
w2_variant()
{
	if [ "$3" != new ]; then
		echo "$1-$3"
	elif [ "$2" = int ]; then
		echo "$1"
	else
		echo "$1-$2"
	fi
}

# w2_key KEYS: the key columns, their type (for the trigger contender's
# hash) and local's index columns.
w2_key()
{
	case "$1" in
	int) echo "b|int|b, a" ;;
	uuid) echo "u|uuid|u, a" ;;
	email) echo "e|text|e, a" ;;
	pair) echo "b, e|pair|b, e, a" ;;
	esac
}

workload_2()
{
	local run parts order c list keys
	w2_stage
	list=$W2_PARTITIONS
	if wanted single; then list="$list -"; fi
	for ((run = 1; run <= RUNS; run++)); do
		for parts in $list; do
			# "-": the unpartitioned table of the contender single
			{
				drop_all_sql w2
				if [ "$parts" = - ]; then
					echo "CREATE TABLE w2 (a int, b int, c text, u uuid, e text);"
				else
					echo "CREATE TABLE w2 (a int, b int, c text, u uuid, e text) PARTITION BY RANGE (a);"
					range_partitions_sql w2 "$parts" 0 "$W2_TOTAL"
				fi
			} | sql >/dev/null
			for order in correlated random; do
				w2_load "$order"
				for keys in $W2_KEYS; do
					case " $(w2_orders "$keys") " in *" $order "*) ;; *) continue ;; esac
					for case_ in $W2_CASES; do
						[ "$case_" = new ] || [ "$keys" = int ] || continue
						for c in $(rotated $((run - 1))); do
							# single only on the unpartitioned table, the others only on the partitioned one
							case "$case_:$keys:$parts:$c" in
							*:*:-:single | *:*:[0-9]*:local | *:*:[0-9]*:gunique | new:int:[0-9]*:trigger | new:int:[0-9]*:sidetable)
								w2_point "$order" "$c" "$run" "$parts" "$keys" "$case_"
								;;
							esac
						done
					done
				done
			done
		done
	done
	{
		drop_all_sql w2
		echo "DROP TABLE w2_base_correlated, w2_new_correlated, w2_base_random, w2_new_random;"
	} | sql >/dev/null
}

# The staging tables: the rows already there (base) and the timed rows (new).
w2_stage()
{
	local total=$W2_TOTAL every=$((W2_TOTAL / W2_ROWS))
	log "w2: staging tables, $W2_ROWS timed rows into $total, partitions $W2_PARTITIONS"
	sql >/dev/null <<-SQL
		$(drop_all_sql w2)
		DROP TABLE IF EXISTS w2_base_correlated, w2_new_correlated, w2_base_random, w2_new_random;
		CREATE TABLE w2_base_correlated AS
			SELECT a, b, c, $W2_U AS u, $W2_E AS e FROM (SELECT a, a AS b, 'test'::text AS c FROM generate_series(0, $total - 1) a WHERE a % $every <> 0) s;
		CREATE TABLE w2_new_correlated AS
			SELECT a, b, c, $W2_U AS u, $W2_E AS e FROM (SELECT a, a AS b, 'test'::text AS c FROM generate_series(0, $total - 1) a WHERE a % $every = 0) s;
		CREATE TABLE w2_base_random AS
			SELECT a, b, c, $W2_U AS u, $W2_E AS e FROM (SELECT a, $(perm a) AS b, 'test'::text AS c FROM generate_series(0, $total - 1) a WHERE a % $every <> 0) s;
		CREATE TABLE w2_new_random AS
			SELECT a, b, c, $W2_U AS u, $W2_E AS e FROM (SELECT a, $(perm a) AS b, 'test'::text AS c FROM generate_series(0, $total - 1) a WHERE a % $every = 0) s;
		VACUUM (FREEZE, ANALYZE) w2_base_correlated, w2_new_correlated, w2_base_random, w2_new_random;
	SQL
}

# The SQL that removes the timed rows and their dead tuples.
w2_reset_sql()
{
	echo "DELETE FROM w2 WHERE a % $((W2_TOTAL / W2_ROWS)) = 0;"
	echo "VACUUM (ANALYZE) w2;"
}

# Load w2 (created empty) with every row of a key order, in order of a.
# Each contender then starts by deleting the timed rows (w2_point).
w2_load()
{
	sql >/dev/null <<-SQL
		TRUNCATE w2;
		INSERT INTO w2 SELECT a, b, c, u, e FROM (SELECT * FROM w2_base_$1 UNION ALL SELECT * FROM w2_new_$1) s ORDER BY a;
	SQL
}

# The timed rows of the case "update": W2_ROWS consecutive a in the middle.
w2_update_range() { echo "a >= $((W2_TOTAL / 2)) AND a < $((W2_TOTAL / 2 + W2_ROWS))"; }

# w2_point ORDER CONTENDER RUN PARTITIONS KEYS CASE: one point of the plot.
w2_point()
{
	local order=$1 c=$2 run=$3 parts=$4 keys=$5 case_=$6 ms us prelude k type local_spec variant timed
	IFS='|' read -r k type local_spec <<<"$(w2_key "$keys")"
	variant=$(w2_variant "$order" "$keys" "$case_")
	timed="INSERT INTO w2 SELECT a, b, c, u, e FROM w2_new_$order;"
	if [ "$case_" = update ]; then
		timed="UPDATE w2 SET c = 'updated' WHERE $(w2_update_range);"
	fi
	# The CHECKPOINT comes first: the untimed DELETE and VACUUM then write
	# the full-page images of the heap pages the timed insert will touch,
	# and the enforcement is built after it, so the timed insert measures
	# inserting, not the first write of each page after a checkpoint.
	prelude=$(
		echo "CHECKPOINT;"
		if [ "$case_" = update ]; then
			# the rows as loaded, whatever the contender before did
			echo "UPDATE w2 SET c = 'test' WHERE $(w2_update_range);"
			echo "VACUUM (ANALYZE) w2;"
		else
			w2_reset_sql
		fi
		enforce_sql "$c" w2 "$k" "$type" "$local_spec"
		if [ "$c" = sidetable ]; then echo "VACUUM (ANALYZE) w2_side;"; fi
		if [ "$case_" = update ]; then echo "CREATE INDEX w2_c_idx ON w2 (c);"; fi
		prewarm_sql w2
		w2_warm_sql "$order" "$parts"
		if [ "$case_" = reinsert ]; then
			echo "BEGIN;"
			echo "$timed"
			echo "ROLLBACK;"
		fi
		if [ "$c" = gunique ]; then echo "SELECT gunique_probe_stats_reset();"; fi
	)
	ms=$(echo "$timed" | timed_sql "$prelude")
	us=$(perl -e 'printf "%.3f", $ARGV[0] * 1000 / $ARGV[1]' "$ms" "$W2_ROWS")
	record w2 "$variant" "$parts" "$c" "$run" "$us" "us/row"
	if [ "$c" = gunique ]; then
		# btree searches of partitions per row of the timed statement
		record w2searches "$variant" "$parts" gunique "$run" "$(sql_value \
			"SELECT round(coalesce(sum(partitions_probed), 0)::numeric / $W2_ROWS, 4) FROM gunique_stat_probes")" "searches/row"
	fi
	log "w2 $variant partitions $parts $c run $run: $us µs/row ($ms ms for $W2_ROWS rows)"
	{
		drop_enforce_sql "$c" w2
		if [ "$case_" = update ]; then echo "DROP INDEX w2_c_idx;"; fi
	} | sql >/dev/null
}

# w2_warm_sql ORDER PARTITIONS: warm the session up on each partition.
# It comes after every VACUUM and ANALYZE, whose statistics updates would
# invalidate the plans.  The rows tried are rows of the table (6 per
# partition, in the partition's key range), each refused, so that nothing
# widens gunique's key-range summaries or key filters, nor leaves an entry
# in any contender's index; a row accepted stops the run.  With
# BENCH_W2_WARM=reinsert: 6 of the timed rows per partition, inserted and
# rolled back (their dead entries are met again by the timed insert, by
# every contender alike, and they stay in gunique's key filters).
w2_warm_sql()
{
	local order=$1 p=$2 rows
	[ "$p" = - ] && p=1
	rows="SELECT a, b FROM (
			SELECT a, b, row_number() OVER (PARTITION BY (a::bigint * $p / $W2_TOTAL) ORDER BY a) AS rn
			FROM w2_%s_$order) s
		WHERE rn <= 6"
	if [ "$W2_WARM" = reinsert ]; then
		cat <<-SQL
			BEGIN;
			INSERT INTO w2 SELECT a, b, 'warm', $W2_U, $W2_E FROM ($(printf "$rows" new)) w;
			ROLLBACK;
		SQL
		return
	fi
	cat <<-SQL
		DO \$\$
		DECLARE
			r record;
		BEGIN
			FOR r IN $(printf "$rows" base) LOOP
				BEGIN
					INSERT INTO w2 SELECT r.a, r.b, 'warm', $(echo "$W2_U" | sed 's/\bb\b/r.b/g'), $(echo "$W2_E" | sed 's/\bb\b/r.b/g');
					RAISE EXCEPTION 'w2 warm-up: key % was accepted twice', r.b;
				EXCEPTION WHEN unique_violation THEN
					NULL;
				END;
			END LOOP;
		END \$\$;
	SQL
}

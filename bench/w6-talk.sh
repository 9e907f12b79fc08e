# Workload 6: the talk's select-only experiment, lookups by the global key
# with pgbench, and the same against the number of partitions.
#
# For each partition count in W6_PARTITIONS (16, 200, 1000), the talk's
# table: `pgbench -i --partitions=N -s W6_SCALE` (pgbench_accounts
# range-partitioned on aid, W6_SCALE x 100,000 accounts, its primary key on
# aid), then `UPDATE pgbench_accounts SET bid = aid`, so that bid is unique
# and is not the partition key.  VACUUM FULL then compacts the table the
# UPDATE doubled, and w6_single gets the same rows (the same columns, the
# same primary key on aid) unpartitioned.  Both tables are loaded afresh
# for each partition count; the runs of one partition count share them.
# Contenders:
#
#   local    CREATE INDEX ... ON pgbench_accounts (bid): a plain btree on
#            bid, one per partition; not unique (PostgreSQL refuses a
#            unique index on the parent that leaves out the partition key,
#            and a unique (bid, aid) would add nothing here)
#   gunique  CREATE UNIQUE INDEX ... ON pgbench_accounts USING gunique (bid)
#   single   CREATE UNIQUE INDEX ... ON w6_single (bid)
#
# trigger and sidetable are not run: their lookups are local's.
#
# Modes (W6_MODES, BENCH_W6_MODES; -M prepared, W6_CLIENTS clients,
# W6_SECS seconds each, :bid random over 1 .. W6_SCALE x 100,000):
#   select-only    SELECT abalance FROM pgbench_accounts WHERE bid = :bid
#   select-update  BEGIN; UPDATE pgbench_accounts SET abalance = abalance + 1
#                  WHERE bid = :bid; SELECT abalance ... WHERE bid = :bid; END
#   update-only    that UPDATE alone, its own transaction (run only when
#                  BENCH_W6_MODES names it)
#   update-generic, update-custom
#                  update-only with plan_cache_mode force_generic_plan or
#                  force_custom_plan (PGOPTIONS), as poolers, ORMs and
#                  prepared statements reach either (BENCH_W6_MODES)
#   delete-insert  BEGIN; DELETE ... WHERE bid = :bid; INSERT the row
#                  back; END; each client its own keys (BENCH_W6_MODES)
#
# With local, a lookup by bid alone searches every partition's btree, and
# with the generic plan that prepared statements settle on, locks every
# partition and its indexes: one statement at 1,000 partitions takes some
# 3,000 locks, 8 clients some 24,000, which the lock table holds at every
# scale (max_locks_per_transaction is at least 1,024, times some 70
# backends).  So did gunique before its lookup path (f9416bd), which plans
# a plain SELECT by the key as one scan that plans, locks and opens only
# the partitions that can hold it (gunique.enable_lookup).  The UPDATE of
# select-update is planned for the key's partition in each execution's
# custom plan, which stays cheaper than the generic plan
# (src/read/keyprune.c); local's goes through every partition.
# update-only measures that UPDATE alone.
#
# Each contender starts from VACUUM (ANALYZE), its indexes and the table
# loaded into shared buffers (pg_prewarm, when installed) and a
# CHECKPOINT.  In the first run, untimed and rolled back: an UPDATE of the
# last account's bid to 1, the first account's (another partition's):
# local accepts it, gunique and single refuse it.  Reported, as variant
# "<mode>-<partitions>": pgbench's tps (without initial connection time)
# and average latency, and the tps of the second half of the run
# (tps-warm, see w6_warm_tps).
#
# Sourced by bench/run; defines workload_6.
set -euo pipefail

W6_CONTENDERS="single local gunique"

workload_6()
{
	local parts run c
	for parts in $W6_PARTITIONS; do
		w6_load "$parts"
		for ((run = 1; run <= RUNS; run++)); do
			for c in $(rotated $((run - 1))); do
				case " $W6_CONTENDERS " in *" $c "*) w6_contender "$c" "$run" "$parts" ;; esac
			done
		done
	done
	{
		drop_all_sql pgbench_accounts w6_single
		echo "DROP TABLE IF EXISTS pgbench_branches, pgbench_tellers, pgbench_history;"
	} | sql >/dev/null
}

# The talk's table at PARTS partitions, and the same rows unpartitioned.
w6_load()
{
	local parts=$1 logf="$OUT/logs/pgbench-w6-init-$1.log"
	log "w6: pgbench -i --partitions=$parts -s $W6_SCALE, then bid = aid"
	drop_all_sql pgbench_accounts w6_single | sql >/dev/null
	if ! as_user "$BINDIR/pgbench" -h "$WORK" -p "$PGPORT_BENCH" -U postgres -i -q \
		--partitions="$parts" -s "$W6_SCALE" postgres >"$logf" 2>&1; then
		tail -n 20 "$logf" >&2
		die "pgbench -i failed, see $logf"
	fi
	sql >/dev/null <<-SQL
		UPDATE pgbench_accounts SET bid = aid;
		VACUUM FULL pgbench_accounts;
		CREATE TABLE w6_single (aid int NOT NULL, bid int, abalance int, filler char(84))
			WITH (fillfactor = 100);
		INSERT INTO w6_single SELECT aid, bid, abalance, filler FROM pgbench_accounts ORDER BY aid;
		ALTER TABLE w6_single ADD PRIMARY KEY (aid);
		VACUUM (FREEZE, ANALYZE) pgbench_accounts, w6_single;
	SQL
}

# w6_prewarm_heap_sql TABLE: load TABLE (its partitions) into shared
# buffers.  VACUUM FULL writes around them and a bulk INSERT through a small
# ring of buffers, so the first contender would read the table from the OS
# cache.
w6_prewarm_heap_sql()
{
	[ -n "${HAVE_PREWARM:-}" ] || return 0
	cat <<-SQL
		SELECT count(pg_prewarm(oid)) FROM pg_class
		WHERE relkind = 'r' AND (oid = '$1'::regclass OR oid IN (SELECT relid FROM pg_partition_tree('$1')));
	SQL
}

# w6_warm_tps LOG: the tps of the second half of a run, from pgbench's
# progress lines (-P 1).  A new session pays first for its relation cache
# and for the five custom plans a prepared statement gets before its
# generic plan, each of them opening and planning every partition: at
# 1,000 partitions here, 8 clients complete no transaction in the first 2
# seconds, while at 16 the start does not show.  pgbench's tps counts that
# start; this leaves it out.
w6_warm_tps()
{
	perl -ne '
		$n++, $s += $2 if /^progress: ([0-9.]+) s, ([0-9.]+) tps/ && $1 > '"$W6_SECS"' / 2;
		END { die "no progress lines in the second half\n" unless $n; printf "%.3f\n", $s / $n }' "$1" ||
		die "pgbench: no progress in $1"
}

w6_contender()
{
	local c=$1 run=$2 parts=$3 t=pgbench_accounts mode res warm
	[ "$c" = single ] && t=w6_single
	{
		drop_any_enforce_sql "$t"
		case "$c" in
		local) echo "CREATE INDEX ${t}_enf ON $t (bid);" ;;
		*) enforce_sql "$c" "$t" bid int - ;;
		esac
		echo "VACUUM (ANALYZE) $t;"
		w6_prewarm_heap_sql "$t"
		prewarm_sql "$t"
		echo "CHECKPOINT;"
	} | sql >/dev/null

	cat >"$WORK/w6-select-only.sql" <<-SQL
		\\set bid random(1, $((W6_SCALE * 100000)))
		SELECT abalance FROM $t WHERE bid = :bid;
	SQL
	cat >"$WORK/w6-select-update.sql" <<-SQL
		\\set bid random(1, $((W6_SCALE * 100000)))
		BEGIN;
		UPDATE $t SET abalance = abalance + 1 WHERE bid = :bid;
		SELECT abalance FROM $t WHERE bid = :bid;
		END;
	SQL
	cat >"$WORK/w6-update-only.sql" <<-SQL
		\\set bid random(1, $((W6_SCALE * 100000)))
		UPDATE $t SET abalance = abalance + 1 WHERE bid = :bid;
	SQL
	cp "$WORK/w6-update-only.sql" "$WORK/w6-update-generic.sql"
	cp "$WORK/w6-update-only.sql" "$WORK/w6-update-custom.sql"
	# each client its own keys: two that deleted one key would both insert it
	cat >"$WORK/w6-delete-insert.sql" <<-SQL
		\\set bid 1 + :client_id + $W6_CLIENTS * random(0, $((W6_SCALE * 100000 / W6_CLIENTS - 1)))
		BEGIN;
		DELETE FROM $t WHERE bid = :bid;
		INSERT INTO $t (aid, bid, abalance, filler) VALUES (:bid, :bid, 0, '');
		END;
	SQL
	for mode in $W6_MODES; do
		local opts=
		case "$mode" in
		*-generic) opts="-c plan_cache_mode=force_generic_plan" ;;
		*-custom) opts="-c plan_cache_mode=force_custom_plan" ;;
		esac
		res=$(PGOPTIONS="$opts" run_pgbench "w6-$mode-$parts-$c-$run" -M prepared -c "$W6_CLIENTS" -j "$(jobs_for "$W6_CLIENTS")" \
			-T "$W6_SECS" -P 1 -f "$WORK/w6-$mode.sql")
		warm=$(w6_warm_tps "$OUT/logs/pgbench-w6-$mode-$parts-$c-$run.log")
		record w6 "$mode-$parts" tps "$c" "$run" "${res% *}" tps
		record w6 "$mode-$parts" tps-warm "$c" "$run" "$warm" tps
		record w6 "$mode-$parts" latency "$c" "$run" "${res#* }" ms
		log "w6 $mode $parts partitions $c run $run: ${res% *} tps (second half: $warm), ${res#* } ms"
	done

	if [ "$run" = 1 ]; then
		local expected=refused
		[ "$c" = local ] && expected=accepted
		printf '%s\t%s\t%s\n' "$expected" "$parts partitions: UPDATE the last account's bid to the first's (another partition)" \
			"UPDATE $t SET bid = 1 WHERE aid = $((W6_SCALE * 100000))" | checks w6 "$c"
	fi
	drop_enforce_sql "$c" "$t" | sql >/dev/null
}

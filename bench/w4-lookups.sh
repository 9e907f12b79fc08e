# Workload 4: lookups by a unique key that is not the partition key, with
# pgbench (the talk's "SELECT only" and "SELECT + UPDATE" tables).
#
# w4(aid int, bid int, abalance int, filler char(84)), like pgbench_accounts,
# holds W4_ROWS rows in W4_PARTITIONS partitions, range-partitioned on bid
# (one bid per partition, aid ranges per bid as pgbench lays them out).
# The unique key is aid.  Contenders:
#
#   single   the same rows in one unpartitioned table, unique btree on aid
#   local    unique btree on (aid, bid) (what PostgreSQL allows)
#   gunique  CREATE UNIQUE INDEX ... USING gunique (aid)
#
# trigger and sidetable are not run: their lookups are local's (a btree
# per partition) or a side-table probe plus local's.
#
# local keeps one btree per partition, so a lookup by aid alone visits every
# partition's btree (200 index probes, and the locks of 200 partitions and
# 200 indexes per statement with a generic plan).  gunique's SELECT takes
# its lookup path (src/read/lookup.c): the partitions its filters cannot rule
# out, one btree probe for a key that exists.  Its UPDATE is planned for
# the key's partition (src/read/keyprune.c): a custom plan per execution, two
# lookups of the key and the UPDATE's own probe; local's goes through
# every partition.  "single" does one probe.
#
# Modes (-M prepared, W4_CLIENTS clients, W4_SECS seconds each):
#   select-only    SELECT abalance FROM w4 WHERE aid = :aid
#   select-update  BEGIN; UPDATE w4 SET abalance = abalance + :delta WHERE
#                  aid = :aid; SELECT abalance ... WHERE aid = :aid; END
#
# Sourced by bench/run; defines workload_4.
set -euo pipefail

W4_CONTENDERS="single local gunique"

workload_4()
{
	local run c
	w4_load
	for ((run = 1; run <= RUNS; run++)); do
		for c in $(rotated $((run - 1))); do
			case " $W4_CONTENDERS " in *" $c "*) w4_contender "$c" "$run" ;; esac
		done
	done
	drop_all_sql w4 w4_single | sql >/dev/null
}

# The rows, loaded once into the partitioned table and the single one.
w4_load()
{
	local rows=$W4_ROWS parts=$W4_PARTITIONS per=$((W4_ROWS / W4_PARTITIONS))
	log "w4: loading $rows accounts into $parts partitions and into one table"
	sql >/dev/null <<-SQL
		$(drop_all_sql w4 w4_single)
		CREATE TABLE w4 (aid int NOT NULL, bid int NOT NULL, abalance int NOT NULL, filler char(84))
			PARTITION BY RANGE (bid);
		$(range_partitions_sql w4 "$parts" 1 $((parts + 1)))
		INSERT INTO w4 SELECT aid, (aid - 1) / $per + 1, 0, '' FROM generate_series(1, $rows) aid;
		CREATE TABLE w4_single (aid int NOT NULL, bid int NOT NULL, abalance int NOT NULL, filler char(84));
		INSERT INTO w4_single SELECT * FROM w4;
		VACUUM (FREEZE, ANALYZE) w4, w4_single;
	SQL
}

w4_contender()
{
	local c=$1 run=$2 t=w4 spec mode res
	[ "$c" = single ] && t=w4_single
	{
		drop_any_enforce_sql "$t"
		enforce_sql "$c" "$t" aid int "aid, bid"
		echo "VACUUM (ANALYZE) $t;"
		prewarm_sql "$t"
		echo "CHECKPOINT;"
	} | sql >/dev/null

	cat >"$WORK/w4-select-only.sql" <<-SQL
		\\set aid random(1, $W4_ROWS)
		SELECT abalance FROM $t WHERE aid = :aid;
	SQL
	cat >"$WORK/w4-select-update.sql" <<-SQL
		\\set aid random(1, $W4_ROWS)
		\\set delta random(-5000, 5000)
		BEGIN;
		UPDATE $t SET abalance = abalance + :delta WHERE aid = :aid;
		SELECT abalance FROM $t WHERE aid = :aid;
		END;
	SQL
	for mode in select-only select-update; do
		res=$(run_pgbench "w4-$mode-$c-$run" -M prepared -c "$W4_CLIENTS" -j "$(jobs_for "$W4_CLIENTS")" \
			-T "$W4_SECS" -f "$WORK/w4-$mode.sql")
		record w4 "$mode" tps "$c" "$run" "${res% *}" tps
		record w4 "$mode" latency "$c" "$run" "${res#* }" ms
		log "w4 $mode $c run $run: ${res% *} tps, ${res#* } ms"
	done
	drop_enforce_sql "$c" "$t" | sql >/dev/null
}

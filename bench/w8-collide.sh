# Workload 8: upserts against transactions that collided first, with
# pgbench: errors (deadlocks, unique violations, duplicates) more than speed.
#
# The workload of bench/JOURNAL.md "Issue 18, deadlocks" (2026-11-28),
# written down again: w8(id bigint, p int, k bigint) in W8_PARTITIONS (4)
# list partitions by p, a primary key (id, p) made with the table, and the
# contender's unique key on k.  W8_CLIENTS (8) clients, -j as many as the
# cores, W8_SECS seconds, --max-tries=1 --failures-detailed (a deadlock
# fails its transaction, which pgbench counts and does not retry), each
# transaction one of two scripts at random, half and half:
#
#   w8_two_rows()  in one transaction, INSERT (id, p1, a key of its own),
#                  sleep 1 ms, INSERT (id + 1, p2, k2); each INSERT in its
#                  own block that catches unique_violation
#   w8_upsert()    INSERT (id', p', k') ON CONFLICT DO NOTHING, in a block
#                  that catches unique_violation and counts it
#
# id, k2, id' and k' are each nextval('w8_seq') / 8: eight draws in a row
# share a value, so concurrent transactions draw the same few values; p1,
# p2 and p' are random among the partitions; a key of its own is negative,
# from another sequence.  So an upsert's row often meets a two_rows
# transaction's first row on the primary key (and waits for it, holding
# its key's upsert lock with gunique) while that transaction's second row
# brings k' into another partition: the cycle that gunique's wait-for check
# breaks (src/README 4.9, "Why it is right", point 4).  Every
# transaction's first-row and second-row collisions are caught and go on.
# deadlock_timeout is 5 ms (ALTER DATABASE, reset at the end).
#
# Contenders: single (the table unpartitioned, a unique btree on k: what
# PostgreSQL alone does) and gunique (CREATE UNIQUE INDEX ... USING gunique
# (k)).  local has no global key to collide on; trigger and sidetable
# cannot arbitrate ON CONFLICT.  Each run starts from an empty table.
#
# Before PostgreSQL 18 (without the core change of contrib-patches/) the
# server refuses INSERT ... ON CONFLICT on a table with a gunique index:
# gunique is recorded as refused (raw.tsv step "refused", sanity.tsv), as
# in workload 7.
#
# Reported, variant "<partitions>": deadlocks (pgbench's deadlock failures,
# and "deadlock detected" errors in the server log over the run), other
# failed transactions, transactions processed and tps, upserts that failed
# with unique_violation, the collisions two_rows caught, upserts that
# skipped their row, and duplicate keys after the run (count(*) -
# count(DISTINCT k)), which must be 0: the run stops otherwise (sanity.tsv).
#
# Sourced by bench/run; defines workload_8.
set -euo pipefail

W8_CONTENDERS="single gunique"
W8_REFUSAL="INSERT ... ON CONFLICT is not supported on a table with a gunique index before PostgreSQL 18"
W8_COUNTERS="w8_upsert_23505 w8_two_23505 w8_skipped"

workload_8()
{
	local run c
	echo "ALTER DATABASE postgres SET deadlock_timeout = '5ms';" | sql >/dev/null
	for ((run = 1; run <= RUNS; run++)); do
		for c in $(rotated $((run - 1))); do
			case " $W8_CONTENDERS " in *" $c "*) w8_contender "$c" "$run" ;; esac
		done
	done
	{
		drop_all_sql w8
		echo "DROP SEQUENCE IF EXISTS w8_seq, w8_own, ${W8_COUNTERS// /, };"
		echo "ALTER DATABASE postgres RESET deadlock_timeout;"
	} | sql >/dev/null
}

# w8_table CONTENDER: the empty table, its key, the sequences and the two
# functions.
w8_table()
{
	local c=$1 s
	drop_all_sql w8
	echo "DROP SEQUENCE IF EXISTS w8_seq, w8_own, ${W8_COUNTERS// /, };"
	echo "CREATE SEQUENCE w8_seq; CREATE SEQUENCE w8_own;"
	for s in $W8_COUNTERS; do echo "CREATE SEQUENCE $s;"; done
	if [ "$c" = single ]; then
		echo "CREATE TABLE w8 (id bigint NOT NULL, p int NOT NULL, k bigint NOT NULL, PRIMARY KEY (id, p));"
	else
		echo "CREATE TABLE w8 (id bigint NOT NULL, p int NOT NULL, k bigint NOT NULL, PRIMARY KEY (id, p)) PARTITION BY LIST (p);"
		cat <<-SQL
			DO \$\$
			BEGIN
				FOR i IN 0 .. $W8_PARTITIONS - 1 LOOP
					EXECUTE format('CREATE TABLE w8_p%s PARTITION OF w8 FOR VALUES IN (%s)', i, i);
				END LOOP;
			END \$\$;
		SQL
	fi
	enforce_sql "$c" w8 k bigint -
	cat <<-SQL
		CREATE OR REPLACE FUNCTION w8_two_rows() RETURNS void LANGUAGE plpgsql AS \$f\$
		DECLARE
			i bigint := nextval('w8_seq') / 8;
			k2 bigint := nextval('w8_seq') / 8;
		BEGIN
			BEGIN
				INSERT INTO w8 VALUES (i, floor(random() * $W8_PARTITIONS)::int, -nextval('w8_own'));
			EXCEPTION WHEN unique_violation THEN
				PERFORM nextval('w8_two_23505');
			END;
			PERFORM pg_sleep(0.001);
			BEGIN
				INSERT INTO w8 VALUES (i + 1, floor(random() * $W8_PARTITIONS)::int, k2);
			EXCEPTION WHEN unique_violation THEN
				PERFORM nextval('w8_two_23505');
			END;
		END
		\$f\$;
		CREATE OR REPLACE FUNCTION w8_upsert() RETURNS void LANGUAGE plpgsql AS \$f\$
		DECLARE
			n bigint;
		BEGIN
			INSERT INTO w8 VALUES (nextval('w8_seq') / 8, floor(random() * $W8_PARTITIONS)::int, nextval('w8_seq') / 8)
				ON CONFLICT DO NOTHING;
			GET DIAGNOSTICS n = ROW_COUNT;
			IF n = 0 THEN
				PERFORM nextval('w8_skipped');
			END IF;
		EXCEPTION WHEN unique_violation THEN
			PERFORM nextval('w8_upsert_23505');
		END
		\$f\$;
	SQL
}

# Does the server refuse ON CONFLICT on gunique's table?  (Before
# PostgreSQL 18, without contrib-patches/.)  Tried for no rows.
w8_refused()
{
	local out rc=0
	out=$(echo "INSERT INTO w8 SELECT 1, 0, 1 WHERE false ON CONFLICT DO NOTHING;" | bench_psql 2>&1) || rc=$?
	printf -- '-- %s w8: is ON CONFLICT refused?\n%s\n' "$(date +%T)" "$out" >>"$OUT/logs/sql.log"
	[ $rc != 0 ] || return 1
	printf '%s\n' "$out" | grep -qF "$W8_REFUSAL" && return 0
	printf '%s\n' "$out" | tail -n 5 >&2
	die "w8: ON CONFLICT failed on gunique's table (see $OUT/logs/sql.log)"
}

# w8_sanity CONTENDER DESCRIPTION EXPECTED OUTCOME (as w7_sanity).
w8_sanity() { sanity_line w8 "$@"; }

# w8_pgbench LABEL ARGS...: pgbench_logged; a transaction that fails (a
# deadlock) does not stop the run, a client that aborts does.  Prints
# "TPS TRANSACTIONS FAILED DEADLOCKS".
w8_pgbench()
{
	local logf
	logf=$(pgbench_logged "$@") || exit 1
	perl -ne '
		$tps = $1 if /^tps = ([0-9.]+)/;
		$tx = $1 if /^number of transactions actually processed: (\d+)/;
		$failed = $1 if /^number of failed transactions: (\d+)/;
		$dead = $1 if /^number of deadlock failures: (\d+)/;
		$bad = 1 if /aborted/;
		END {
			die "pgbench output without tps, transactions or failures\n"
				unless defined $tps && defined $tx && defined $failed && defined $dead;
			die "pgbench: a client aborted\n" if $bad;
			print "$tps $tx $failed $dead\n";
		}' "$logf" || die "pgbench $1: see $logf"
}

# The value of a counting sequence: how many times nextval ran.
w8_count() { sql_value "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM $1"; }

w8_contender()
{
	local c=$1 run=$2 v=$W8_PARTITIONS res from logged got tps tx failed dead
	w8_table "$c" | sql >/dev/null
	if [ "$c" = gunique ] && w8_refused; then
		record w8 "$v" refused "$c" "$run" 1 flag
		log "w8 $v $c run $run: refused by the server ($W8_REFUSAL)"
		w8_sanity "$c" "$v partitions: INSERT ... ON CONFLICT DO NOTHING" \
			"refused before PostgreSQL 18" "refused before PostgreSQL 18"
		return
	fi
	echo "VACUUM (ANALYZE) w8; CHECKPOINT;" | sql >/dev/null
	echo 'SELECT w8_two_rows();' >"$WORK/w8-two-rows.sql"
	echo 'SELECT w8_upsert();' >"$WORK/w8-upsert.sql"

	from=$(stat -c %s "$WORK/server.log")
	res=$(w8_pgbench "w8-$v-$c-$run" -M prepared -c "$W8_CLIENTS" -j "$(jobs_for "$W8_CLIENTS")" \
		-T "$W8_SECS" --max-tries=1 --failures-detailed \
		-f "$WORK/w8-two-rows.sql@1" -f "$WORK/w8-upsert.sql@1")
	logged=$(tail -c +$((from + 1)) "$WORK/server.log" | grep -c 'ERROR:  deadlock detected' || true)
	read -r tps tx failed dead <<<"$res"
	record w8 "$v" tps "$c" "$run" "$tps" tps
	record w8 "$v" transactions "$c" "$run" "$tx" count
	record w8 "$v" deadlocks "$c" "$run" "$dead" count
	record w8 "$v" deadlocks-log "$c" "$run" "$logged" count
	record w8 "$v" other-failures "$c" "$run" "$((failed - dead))" count
	record w8 "$v" upsert-23505 "$c" "$run" "$(w8_count w8_upsert_23505)" count
	record w8 "$v" collisions "$c" "$run" "$(w8_count w8_two_23505)" count
	record w8 "$v" skipped "$c" "$run" "$(w8_count w8_skipped)" count
	got=$(sql_value "SELECT count(*) - count(DISTINCT k) FROM w8")
	record w8 "$v" duplicates "$c" "$run" "$got" count
	log "w8 $v $c run $run: $tx transactions ($tps tps), $dead deadlocks ($logged in the server log), $((failed - dead)) other failures, $(w8_count w8_upsert_23505) upserts failed 23505, $got duplicate keys"
	w8_sanity "$c" "$v partitions: after each run, duplicate keys" 0 "$got"
}

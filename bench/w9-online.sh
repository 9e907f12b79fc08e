# Workload 9: adding a unique key to a live table (issue 42), with pgbench
# writers running through every measured statement.
#
# The table: w9(a bigint, k bigint, v int) range-partitioned on a into
# W9_PARTITIONS partitions, a primary key on a (the partition key), loaded
# with W9_ROWS rows of even a (0, 2, 4, ...) and k a permutation of a
# (a * 2654435761 mod 1000000007: distinct, in random order); the key to
# add is k, not the partition key.  w9s: the same rows in one
# unpartitioned table with a primary key on a.
#
# The writers: W9_CLIENTS (4) pgbench clients (-M prepared, -j as many
# as the cores), at W9_RATE transactions a second in all (-R; 0: as fast
# as they can), every transaction's latency logged (-l; with -R pgbench
# measures it from the transaction's scheduled start, so a writer held
# up by a lock also delays the ones scheduled after it, and they show it).
# Three scripts: half the transactions insert a new row (odd a from a
# sequence, so new rows go to the first partitions, k its permutation),
# a quarter update v of a random existing row, a quarter change the key
# k of a random existing row to a new one (above every loaded key).
# Existing rows are found by a (its primary key): before the build there
# is no index on k to find them by.  The writers never make a duplicate;
# each measured statement must keep the key unique while they write.
#
# The operations, each timed while the writers run on its table (they
# start W9_WARM seconds before it, and stop W9_TAIL seconds after it):
#
#   baseline              pg_sleep(W9_BASE_SECS): the writers alone
#   create                CREATE UNIQUE INDEX w9_k ON w9 USING gunique (k)
#                         (single: a unique btree on w9s, for reference)
#   create-concurrently   CREATE UNIQUE INDEX CONCURRENTLY w9_k ON w9
#                         USING gunique (k) (single: the same, btree, on w9s)
#   reindex-concurrently  REINDEX INDEX CONCURRENTLY w9_k (gunique only)
#   attach                ALTER TABLE w9 ATTACH PARTITION w9_new of
#                         W9_ATTACH rows with a gunique index on k (and the
#                         primary key) already built, a CHECK constraint of
#                         its bound (no scan for the bound); the writers
#                         write the other partitions (gunique only)
#
# Contenders (of --contenders, at least one of the two): "gunique" is the
# partitioned table w9, "single" the unpartitioned w9s with PostgreSQL's
# btree: for each, the writers run on that table.  Order within a run: baseline; then odd runs create first
# (then the index dropped), even runs create-concurrently, reindex and
# attach first and create last; odd runs measure w9 before w9s, even runs
# w9s first.  Between operations (writers stopped, untimed): VACUUM and a
# CHECKPOINT; after each run the rows the writers inserted are deleted.
#
# Measured for each operation: the statement's duration (s, the server's
# clock around it), and over the writers' transactions that overlap it
# (began before it ended, ended after it began): the longest latency (the
# stall, ms), p99 and p50, the count of those that took more than 1 s,
# and the writers' tps (transactions that ended within it, per second);
# and the longest latency of the transactions that began in the W9_TAIL
# seconds after it (stall-after).
# A per-second timeline of each operation (transactions ended, their
# longest latency) goes to OUT/w9/.
#
# After each build, untimed: no key held twice (GROUP BY k HAVING
# count(*) > 1, over the table's rows, no index scan), gunique_verify() returns no row, every member of the
# tree valid, and a duplicate of a key of another partition is refused
# (sanity.tsv); the run stops otherwise.
#
# The writers are stopped by ending their server sessions
# (pg_terminate_backend on their application_name): pgbench then ends its
# clients, writes its logs and exits; any other client abort (an error in
# a writer's transaction) stops the run.
#
# Sourced by bench/run; defines workload_9.  Runs only when named.
set -euo pipefail

W9_APPNAME=w9-writer
W9_P=1000000007                 # keys of loaded and inserted rows are below it, changed keys above

workload_9()
{
	local run c
	wanted gunique || wanted single || die "workload 9 runs the contenders gunique and single: name one of them"
	w9_load
	mkdir -p "$OUT/w9"
	for ((run = 1; run <= RUNS; run++)); do
		# odd runs measure the partitioned table first, even runs the other
		for c in $([ $((run % 2)) = 1 ] && echo gunique single || echo single gunique); do
			wanted "$c" || continue
			case "$c" in
			gunique) w9_partitioned "$run" ;;
			single) w9_single "$run" ;;
			esac
		done
		w9_reset
	done
	echo "DROP TABLE IF EXISTS w9, w9s, w9_new; DROP SEQUENCE IF EXISTS w9_next, w9_newkey;" | sql >/dev/null
}

# The key of a row, as SQL over its a.
w9_key() { echo "(($1) * 2654435761 % $W9_P)"; }

w9_load()
{
	log "w9: loading $W9_ROWS rows into w9 ($W9_PARTITIONS partitions) and into w9s (one table)"
	sql >/dev/null <<-SQL
		DROP TABLE IF EXISTS w9, w9s, w9_new;
		DROP SEQUENCE IF EXISTS w9_next, w9_newkey;
		CREATE SEQUENCE w9_next;
		CREATE SEQUENCE w9_newkey;
		CREATE TABLE w9 (a bigint NOT NULL, k bigint NOT NULL, v int NOT NULL DEFAULT 0) PARTITION BY RANGE (a);
		$(range_partitions_sql w9 "$W9_PARTITIONS" 0 $((2 * W9_ROWS)))
		INSERT INTO w9 SELECT a, $(w9_key a), 0 FROM generate_series(0, $((2 * W9_ROWS - 2)), 2) a;
		ALTER TABLE w9 ADD PRIMARY KEY (a);
		CREATE TABLE w9s (a bigint NOT NULL, k bigint NOT NULL, v int NOT NULL DEFAULT 0);
		INSERT INTO w9s SELECT a, $(w9_key a), 0 FROM generate_series(0, $((2 * W9_ROWS - 2)), 2) a;
		ALTER TABLE w9s ADD PRIMARY KEY (a);
		VACUUM (FREEZE, ANALYZE) w9;
		VACUUM (FREEZE, ANALYZE) w9s;
	SQL
}

# Take back the rows the writers inserted (odd a, the first partitions):
# each run starts from the rows as loaded, and the sequence of new rows
# starts again.  Changed keys stay changed.
w9_reset()
{
	local last
	last=$(sql_value "SELECT CASE WHEN is_called THEN last_value ELSE 0 END FROM w9_next")
	sql >/dev/null <<-SQL
		DELETE FROM w9 WHERE a % 2 = 1 AND a <= $((2 * last + 1));
		DELETE FROM w9s WHERE a % 2 = 1 AND a <= $((2 * last + 1));
		VACUUM (ANALYZE) w9;
		VACUUM (ANALYZE) w9s;
		ALTER SEQUENCE w9_next RESTART;
	SQL
}

# w9_scripts TABLE: the writers' three scripts, in $WORK/w9-TABLE/.
w9_scripts()
{
	local t=$1 dir=$WORK/w9-$1
	mkdir -p "$dir"
	cat >"$dir/insert.sql" <<-SQL
		INSERT INTO $t (a, k, v) SELECT a, $(w9_key a), 0 FROM (SELECT nextval('w9_next') * 2 + 1 AS a) s;
	SQL
	cat >"$dir/update-v.sql" <<-SQL
		\set a 2 * random(0, $((W9_ROWS - 1)))
		UPDATE $t SET v = v + 1 WHERE a = :a;
	SQL
	cat >"$dir/update-k.sql" <<-SQL
		\set a 2 * random(0, $((W9_ROWS - 1)))
		UPDATE $t SET k = $W9_P + nextval('w9_newkey') WHERE a = :a;
	SQL
	chmod -R a+rX "$dir"
	[ -z "$RUN_AS" ] || chown -R "$RUN_AS" "$dir"
}

# w9_writers_start TABLE LABEL: the writers, in the background, until
# w9_writers_stop.  Their per-transaction logs go to $WORK/w9lat/.
w9_writers_start()
{
	local t=$1 label=$2 rate=()
	rm -rf "$WORK/w9lat"
	mkdir -p "$WORK/w9lat"
	[ -z "$RUN_AS" ] || chown "$RUN_AS" "$WORK/w9lat"
	[ "$W9_RATE" = 0 ] || rate=(-R "$W9_RATE")
	W9_PGBENCH_LOG=$OUT/logs/pgbench-w9-$label.log
	as_user env PGAPPNAME=$W9_APPNAME "$BINDIR/pgbench" -h "$WORK" -p "$PGPORT_BENCH" -U postgres -n \
		-M prepared -c "$W9_CLIENTS" -j "$(jobs_for "$W9_CLIENTS")" -T 86400 "${rate[@]}" \
		-l --log-prefix="$WORK/w9lat/lat" \
		-f "$WORK/w9-$t/insert.sql@2" -f "$WORK/w9-$t/update-v.sql@1" -f "$WORK/w9-$t/update-k.sql@1" \
		postgres >"$W9_PGBENCH_LOG" 2>&1 &
	W9_PGBENCH=$!
	# all clients connected
	local i
	for ((i = 0; i < 200; i++)); do
		[ "$(sql_value "SELECT count(*) FROM pg_stat_activity WHERE application_name = '$W9_APPNAME'")" -ge "$W9_CLIENTS" ] && return 0
		kill -0 "$W9_PGBENCH" 2>/dev/null || break
		sleep 0.1
	done
	tail -n 20 "$W9_PGBENCH_LOG" >&2
	die "w9: the writers did not start, see $W9_PGBENCH_LOG"
}

# End the writers' sessions; pgbench then writes its logs and exits.  Any
# client that aborted for another reason stops the run.
w9_writers_stop()
{
	local rc=0 bad
	sql_value "SELECT count(pg_terminate_backend(pid)) FROM pg_stat_activity WHERE application_name = '$W9_APPNAME'" >/dev/null
	wait "$W9_PGBENCH" || rc=$?
	# 0, or 2 when clients aborted (PostgreSQL 15 and later)
	case "$rc" in 0 | 2) ;; *) tail -n 20 "$W9_PGBENCH_LOG" >&2; die "w9: pgbench exited with $rc, see $W9_PGBENCH_LOG" ;; esac
	bad=$(grep 'aborted in command' "$W9_PGBENCH_LOG" | grep -v -c -e 'terminating connection due to administrator command' \
		-e 'server closed the connection' -e 'connection to server was lost' \
		-e 'perhaps the backend died while processing' || true)
	if [ "$bad" != 0 ]; then
		grep 'aborted in command' "$W9_PGBENCH_LOG" | head -n 5 >&2
		die "w9: a writer failed before it was stopped, see $W9_PGBENCH_LOG"
	fi
}

# w9_timed SQL: run SQL in one session between two readings of the
# server's clock; prints "T0 T1" (epoch seconds).
w9_timed()
{
	{
		echo '\pset tuples_only on'
		echo '\pset format unaligned'
		echo 'SELECT extract(epoch FROM clock_timestamp());'
		printf '%s\n' "$1"
		echo 'SELECT extract(epoch FROM clock_timestamp());'
	} | sql | perl -ne 'push @t, $1 if /^([0-9]+\.[0-9]+)$/; END { die "w9: no clock readings\n" unless @t >= 2; print "$t[0] $t[-1]\n" }'
}

# w9_stats T0 T1 TIMELINE: the writers' transactions against the window
# [T0, T1] from their logs: prints "N STALL_MS P99_MS P50_MS SLOW TPS
# AFTER_MS" (N, the latencies and SLOW, those over 1 s, of the
# transactions that overlap the window; TPS of those that ended in it;
# AFTER_MS the longest latency of those that began after it, in the
# tail: what the statement left behind, as caches or filters built
# again; -1 if none began there, the writers still catching up on those
# scheduled during a statement that held them) and writes the
# per-second timeline (seconds from T0, transactions ended, their longest
# latency in ms) to TIMELINE.  Dies if a client wrote nothing after T1:
# it was not running through the whole window.
w9_stats()
{
	cat "$WORK"/w9lat/lat* | perl -ane '
		BEGIN { ($t0, $t1, $tl) = splice @ARGV, 0, 3 }
		next if @F < 6;
		my $lat = $F[2] / 1000;                    # ms
		my $end = $F[4] + $F[5] / 1e6;
		my $begin = $end - $lat / 1000;
		$last{$F[0]} = $end if !defined $last{$F[0]} || $end > $last{$F[0]};
		my $s = int($end - $t0 + 1000) - 1000;     # the second of the timeline
		$n{$s}++;
		$m{$s} = $lat if !defined $m{$s} || $lat > $m{$s};
		$ended++ if $end >= $t0 && $end <= $t1;
		$after = $lat if $begin >= $t1 && (!defined $after || $lat > $after);
		next unless $begin < $t1 && $end > $t0;
		push @l, $lat;
		$slow++ if $lat > 1000;
		END {
			die "w9: no transaction overlaps the window\n" unless @l;
			for my $c (keys %last) { die "w9: client $c ended before the window did\n" if $last{$c} < $t1 }
			open my $f, ">", $tl or die "$tl: $!\n";
			print $f "second\ttransactions\tmax_ms\n";
			printf $f "%d\t%d\t%.3f\n", $_, $n{$_}, $m{$_} for sort { $a <=> $b } keys %n;
			close $f;
			@l = sort { $a <=> $b } @l;
			# none: the writers were still catching up on the ones
			# scheduled during it (after a blocking build)
			$after //= -1;
			printf "%d %.3f %.3f %.3f %d %.1f %.3f\n", scalar @l, $l[-1], $l[int(0.99 * $#l)], $l[int(0.5 * $#l)],
			  $slow // 0, ($ended // 0) / ($t1 - $t0), $after;
		}' "$@"
}

# w9_op CONTENDER RUN OP TABLE SQL: the writers on TABLE, W9_WARM seconds,
# SQL timed, W9_TAIL seconds, the writers stopped; records the
# statement's seconds and the writers' latencies and rate over it.
w9_op()
{
	local c=$1 run=$2 op=$3 t=$4 stmt=$5 t0 t1 secs n stall p99 p50 slow tps after
	echo "VACUUM $t; CHECKPOINT;" | sql >/dev/null
	w9_writers_start "$t" "$op-$c-$run"
	sleep "$W9_WARM"
	read -r t0 t1 <<<"$(w9_timed "$stmt")" || die "w9: $op on $t failed (see $OUT/logs/sql.log)"
	sleep "$W9_TAIL"
	w9_writers_stop
	read -r n stall p99 p50 slow tps after <<<"$(w9_stats "$t0" "$t1" "$OUT/w9/timeline-$op-$c-$run.tsv")"
	[ -n "$after" ] || die "w9: no statistics of the writers over $op"
	secs=$(perl -e 'printf "%.3f", $ARGV[1] - $ARGV[0]' "$t0" "$t1")
	record w9 "$op" seconds "$c" "$run" "$secs" s
	record w9 "$op" stall "$c" "$run" "$stall" ms
	[ "$after" = -1.000 ] || record w9 "$op" stall-after "$c" "$run" "$after" ms
	record w9 "$op" p99 "$c" "$run" "$p99" ms
	record w9 "$op" p50 "$c" "$run" "$p50" ms
	record w9 "$op" over-1s "$c" "$run" "$slow" count
	record w9 "$op" tps "$c" "$run" "$tps" tps
	record w9 "$op" transactions "$c" "$run" "$n" count
	record w9 "$op" load "$c" "$run" "$(cut -d' ' -f1 /proc/loadavg)" load
	log "  w9 $op $c run $run: ${secs}s; writers: $n transactions, longest ${stall} ms, p99 ${p99} ms, p50 ${p50} ms, $slow over 1 s, $tps tps; longest of those begun in the ${W9_TAIL}s after it: $([ "$after" = -1.000 ] && echo "none began (still catching up)" || echo "$after ms")"
}

# w9_verify CONTENDER OP TABLE INDEX: no key twice, the index sound, and a
# duplicate of a key of another partition refused.
w9_verify()
{
	local c=$1 op=$2 t=$3 idx=$4 got
	# from the table's rows, not the index being checked
	got=$(sql <<-SQL | tail -n 1
		SET work_mem = '2GB';
		SET enable_indexscan = off;
		SET enable_indexonlyscan = off;
		SET enable_bitmapscan = off;
		\pset tuples_only on
		\pset format unaligned
		SELECT count(*) FROM (SELECT k FROM $t GROUP BY k HAVING count(*) > 1) d;
	SQL
	)
	sanity_line w9 "$c" "$op: keys held twice after it (GROUP BY k HAVING count(*) > 1)" 0 "$got"
	got=$(sql_value "SELECT count(*) FILTER (WHERE NOT (i.indisvalid AND i.indisready)) FROM pg_partition_tree('$idx') p JOIN pg_index i ON i.indexrelid = p.relid")
	sanity_line w9 "$c" "$op: members of the index not valid or not ready" 0 "$got"
	if [ "$c" = gunique ]; then
		got=$(sql_value "SELECT count(*) FROM gunique_verify('$idx')")
		sanity_line w9 "$c" "$op: rows of gunique_verify()" 0 "$got"
	fi
	# a key of the first partition's (a = 0) again, in the last partition
	printf 'refused\t%s: a key held by another partition, inserted again\tINSERT INTO %s VALUES (%s, (SELECT k FROM %s WHERE a = 0), 0)\n' \
		"$op" "$t" $((2 * W9_ROWS - 1)) "$t" | checks w9 "$c"
}

# The partitioned table: baseline, the builds, REINDEX, ATTACH.
w9_partitioned()
{
	local run=$1 c=gunique
	w9_scripts w9
	log "w9: run $run, the partitioned table w9"
	w9_op "$c" "$run" baseline w9 "SELECT pg_sleep($W9_BASE_SECS);"
	[ $((run % 2)) = 1 ] && w9_create "$run"
	w9_op "$c" "$run" create-concurrently w9 "CREATE UNIQUE INDEX CONCURRENTLY w9_k ON w9 USING gunique (k);"
	w9_verify "$c" create-concurrently w9 w9_k
	w9_op "$c" "$run" reindex-concurrently w9 "REINDEX INDEX CONCURRENTLY w9_k;"
	w9_verify "$c" reindex-concurrently w9 w9_k
	w9_attach "$run"
	echo "DROP INDEX w9_k;" | sql >/dev/null
	[ $((run % 2)) = 0 ] && w9_create "$run"
	return 0
}

w9_create()
{
	w9_op gunique "$1" create w9 "CREATE UNIQUE INDEX w9_k ON w9 USING gunique (k);"
	w9_verify gunique create w9 w9_k
	echo "DROP INDEX w9_k;" | sql >/dev/null
}

# ATTACH of W9_ATTACH rows above the table's range, with its indexes built
# and a CHECK constraint of its bound; DETACH and DROP after, untimed.
w9_attach()
{
	local run=$1 lo=$((2 * W9_ROWS)) hi=$((2 * W9_ROWS + 2 * W9_ATTACH))
	sql >/dev/null <<-SQL
		DROP TABLE IF EXISTS w9_new;
		CREATE TABLE w9_new (a bigint NOT NULL, k bigint NOT NULL, v int NOT NULL DEFAULT 0,
			CONSTRAINT w9_new_bound CHECK (a >= $lo AND a < $hi));
		INSERT INTO w9_new SELECT a, $(w9_key a), 0 FROM generate_series($lo, $((hi - 2)), 2) a;
		ALTER TABLE w9_new ADD PRIMARY KEY (a);
		CREATE UNIQUE INDEX w9_new_k ON w9_new USING gunique (k);
		VACUUM (FREEZE, ANALYZE) w9_new;
	SQL
	w9_op gunique "$run" attach w9 "ALTER TABLE w9 ATTACH PARTITION w9_new FOR VALUES FROM ($lo) TO ($hi);"
	# the attached table's index was taken in, not built again
	sanity_line w9 gunique "attach: the attached table's gunique index is a member of the tree" t \
		"$(sql_value "SELECT EXISTS (SELECT FROM pg_partition_tree('w9_k') WHERE relid = 'w9_new_k'::regclass)")"
	w9_verify gunique attach w9 w9_k
	echo "ALTER TABLE w9 DETACH PARTITION w9_new; DROP TABLE w9_new;" | sql >/dev/null
}

# The unpartitioned table: baseline and PostgreSQL's btree, built plainly
# and concurrently.
w9_single()
{
	local run=$1 c=single op
	w9_scripts w9s
	log "w9: run $run, the unpartitioned table w9s"
	w9_op "$c" "$run" baseline w9s "SELECT pg_sleep($W9_BASE_SECS);"
	for op in $([ $((run % 2)) = 1 ] && echo create create-concurrently || echo create-concurrently create); do
		if [ "$op" = create ]; then
			w9_op "$c" "$run" "$op" w9s "CREATE UNIQUE INDEX w9s_k ON w9s (k);"
		else
			w9_op "$c" "$run" "$op" w9s "CREATE UNIQUE INDEX CONCURRENTLY w9s_k ON w9s (k);"
		fi
		w9_verify "$c" "$op" w9s w9s_k
		echo "DROP INDEX w9s_k;" | sql >/dev/null
	done
}

# Workload 5: large tables, and the first minute after a restart.
#
# For each size in W5_SIZES ("rows:partitions", e.g. 100000000:128) and
# each key kind in W5_KEYS, a table w5(a bigint, k) range-partitioned on a
# is loaded once with even a (0, 2, 4, ...), the key:
#   random      k = a * 2654435761 mod 1000000007 (bigint, distinct, random order)
#   correlated  k = a (bigint, follows the partitioning)
#   uuid        k = md5(a::text)::uuid
#   text        k = an e-mail address of the random permutation's number
#               ('user123456789@example.com', 21 to 26 bytes, random order);
#               not in the default W5_KEYS
# Then, for local (unique btree on (k, a)) and gunique (gunique on k):
#   insert      one INSERT of W5_NEW new keys (odd a), timed, µs per row,
#               in a new session;
#   insert-warm the same in a session that has just inserted W5_NEW new
#               keys (untimed): a new session's first touch of each page
#               of shared memory (key filters, shared buffers) is a page
#               fault, and on virtual machines with shadow page tables
#               much more;
#   memory      gunique's filters' bytes per key (gunique_filter_memory())
#               and shared_memory_size (MB);
#   restart     a clean restart (pg_ctl stop -m fast, then start): seconds
#               the stop took (gunique saves its filters then), the bytes
#               of gunique_filters.dat, seconds until the server accepts
#               connections and, for gunique, until every filter is back
#               and none is being built ("ready", polled from one session
#               beside the inserts);
#   then W5_SECS seconds of single-row inserts of new keys by one pgbench
#   client, each transaction's latency logged: p50, p99 and max (ms), and
#   max-later, the slowest but for the session's first (a new session
#   loads its catalog caches); inserts per second over the first 1, 5 and
#   10 seconds and the whole run; the 1-minute load average at its start;
#   nosave      with BENCH_W5_NOSAVE=1, the same clean restart with
#               gunique_filters.dat removed while the server is stopped:
#               the background worker alone builds the filters again, as
#               the inserts ask for them.  Odd runs restart with the file
#               first, even runs without it first;
#   crash       the same after an immediate shutdown (the filters are then
#               built again in the background, as the inserts ask for
#               them); for gunique, then, seconds from the start until
#               every filter is back ("crash-ready").
# Every contender gets the same table and the same restarts: after each
# contender's run the new rows are deleted, the partitions they went to
# rewritten, and the sequence of new keys starts again.
#
# Sourced by bench/run; defines workload_5.  Not in CI: at --scale large it
# loads 20 million and then 100 million rows; see bench/README.md.
set -euo pipefail

workload_5()
{
	local size rows parts keys run c
	for size in $W5_SIZES; do
		rows=${size%%:*}
		parts=${size##*:}
		for keys in $W5_KEYS; do
			w5_load "$rows" "$parts" "$keys"
			for ((run = 1; run <= RUNS; run++)); do
				for c in $(rotated $((run - 1))); do
					case "$c" in local | gunique) w5_contender "$c" "$run" "$keys-$rows" "$rows" "$parts" "$keys" ;; esac
				done
			done
			echo "DROP TABLE IF EXISTS w5; DROP SEQUENCE IF EXISTS w5_next; DROP FUNCTION IF EXISTS w5_filters_back(bigint);" | sql >/dev/null
		done
	done
}

# The key of a row, as SQL over its a.
w5_key()
{
	case "$1" in
	random) echo "(($2) * 2654435761 % 1000000007)" ;;
	correlated) echo "($2)" ;;
	uuid) echo "md5(($2)::text)::uuid" ;;
	text) echo "('user' || ($2) * 2654435761 % 1000000007 || '@example.com')" ;;
	*) die "BENCH_W5_KEYS: unknown key kind '$1' (random, correlated, uuid, text)" ;;
	esac
}

w5_load()
{
	local rows=$1 parts=$2 keys=$3 type=bigint
	case "$keys" in uuid | text) type=$keys ;; esac
	log "w5: loading $rows rows ($keys keys) into $parts partitions"
	sql >/dev/null <<-SQL
		DROP TABLE IF EXISTS w5;
		DROP SEQUENCE IF EXISTS w5_next;
		CREATE TABLE w5 (a bigint NOT NULL, k $type NOT NULL) PARTITION BY RANGE (a);
		$(range_partitions_sql w5 "$parts" 0 $((2 * rows)))
		INSERT INTO w5 SELECT a, $(w5_key "$keys" a) FROM generate_series(0, $((2 * rows - 2)), 2) a;
		VACUUM (FREEZE, ANALYZE) w5;
		-- the new keys of the timed steps: odd a, from the start of the range
		CREATE SEQUENCE w5_next MINVALUE 0 START 0;
		-- the time (epoch) at which gunique has at least n filters and
		-- builds none (a filter being built is counted as it is made)
		CREATE OR REPLACE FUNCTION w5_filters_back(n bigint) RETURNS float8
		LANGUAGE plpgsql AS \$\$
		BEGIN
			WHILE (SELECT filters FROM gunique_filter_memory()) < n OR
				EXISTS (SELECT FROM gunique_filter_builds() b JOIN pg_database d ON d.oid = b.database
						WHERE d.datname = current_database()) LOOP
				IF clock_timestamp() > statement_timestamp() + interval '30 min' THEN
					RAISE EXCEPTION 'w5: the filters were not back after 30 minutes';
				END IF;
				PERFORM pg_sleep(0.05);
			END LOOP;
			RETURN extract(epoch FROM clock_timestamp());
		END \$\$;
	SQL
}

# Take back the new rows of a contender's run (odd a, the first partitions):
# each contender's run starts from the table as loaded, and the keys of
# the timed steps stay within the table's range however many runs there
# are.  Rewriting the partitions that held new rows gives them back their
# size.
w5_reset()
{
	local rows=$1 parts=$2 last maxa
	last=$(sql_value "SELECT last_value FROM w5_next")
	maxa=$((2 * last + 1))
	sql >/dev/null <<-SQL
		DELETE FROM w5 WHERE a % 2 = 1 AND a <= $maxa;
		SELECT format('VACUUM (FULL, FREEZE, ANALYZE) %I', 'w5_p' || i)
		FROM generate_series(0, least($parts - 1, $maxa / ($((2 * rows)) / $parts))) i \gexec
		ALTER SEQUENCE w5_next RESTART;
	SQL
}

# Latency percentiles (ms) of a pgbench per-transaction log directory: p50,
# p99, max, the count, the max of all but the session's first transaction
# (which loads the catalog caches of a new session), and the inserts per
# second over the first 1, 5 and 10 seconds from the first insert's start
# and over the whole run of $2 seconds.
w5_latencies()
{
	cat "$1"/w5lat* | perl -ane '
		BEGIN { $secs = shift @ARGV }
		my $ms = $F[2] / 1000;
		my $begin = $F[4] + $F[5] / 1e6 - $F[2] / 1e6;
		push @l, $ms;
		push @b, $begin;
		$later = $ms if $F[1] > 0 && $ms > $later;
		END {
			die "no transactions\n" unless @l;
			my ($t0) = sort { $a <=> $b } @b;
			my %in;
			for my $b (@b) {
				for my $w (1, 5, 10) { $in{$w}++ if $b - $t0 < $w }
			}
			@l = sort { $a <=> $b } @l;
			printf "%.3f %.3f %.3f %d %.3f %.0f %.0f %.0f %.0f\n", $l[int(0.5 * $#l)], $l[int(0.99 * $#l)], $l[-1],
			  scalar @l, $later, $in{1}, $in{5} / 5, $in{10} / 10, @l / $secs;
		}' "$2"
}

# W5_SECS seconds of single-row inserts of new keys; records their latency
# and rate, and the load average at their start.
w5_first_minute()
{
	local c=$1 run=$2 variant=$3 keys=$4 when=$5 dir script p50 p99 max n later r1 r5 r10 rall
	dir=$WORK/w5lat-$c-$when
	rm -rf "$dir"
	mkdir -p "$dir"
	[ -n "$RUN_AS" ] && chown "$RUN_AS" "$dir"
	script=$dir/insert.sql
	echo "INSERT INTO w5 SELECT a, $(w5_key "$keys" a) FROM (SELECT nextval('w5_next') * 2 + 1 AS a) s;" >"$script"
	chmod a+r "$script"
	record w5 "$variant" "$when-load" "$c" "$run" "$(cut -d' ' -f1 /proc/loadavg)" load
	(cd "$dir" && run_pgbench "w5-$variant-$c-$when-$run" -c 1 -j 1 -T "$W5_SECS" -l --log-prefix="$dir/w5lat" -f "$script" >/dev/null)
	read -r p50 p99 max n later r1 r5 r10 rall <<<"$(w5_latencies "$dir" "$W5_SECS")"
	record w5 "$variant" "$when-p50" "$c" "$run" "$p50" ms
	record w5 "$variant" "$when-p99" "$c" "$run" "$p99" ms
	record w5 "$variant" "$when-max" "$c" "$run" "$max" ms
	record w5 "$variant" "$when-max-later" "$c" "$run" "$later" ms
	record w5 "$variant" "$when-rate-1s" "$c" "$run" "$r1" rows/s
	[ "$W5_SECS" -lt 5 ] || record w5 "$variant" "$when-rate-5s" "$c" "$run" "$r5" rows/s
	[ "$W5_SECS" -lt 10 ] || record w5 "$variant" "$when-rate-10s" "$c" "$run" "$r10" rows/s
	record w5 "$variant" "$when-rate" "$c" "$run" "$rall" rows/s
	log "  w5 $variant $c $when: $n inserts, p50 $p50 ms, p99 $p99 ms, max $max ms ($later ms after the first); per second: $r1 in the first, $r5 over 5 s, $r10 over 10 s"
	rm -rf "$dir"
}

# Seconds between two epochs.
w5_secs() { perl -e 'printf "%.2f", $ARGV[1] - $ARGV[0]' "$1" "$2"; }

# Stop the server (mode fast or immediate) and start it again, without
# gunique's save file if $2 is "nosave".  Prints the seconds the stop
# took, the bytes of the save file (0 if there is none), the seconds from
# the start until the server accepts connections, and the start's epoch.
w5_restart()
{
	local mode=$1 keep=$2 t0 start up bytes=0 file=$WORK/data/gunique_filters.dat
	t0=$(date +%s.%N)
	as_user "$BINDIR/pg_ctl" -D "$WORK/data" -m "$mode" -w stop >/dev/null
	start=$(date +%s.%N)
	[ -f "$file" ] && bytes=$(stat -c %s "$file")
	[ "$keep" = nosave ] && rm -f "$file"
	as_user "$BINDIR/pg_ctl" -D "$WORK/data" -p "$POSTGRES" -l "$WORK/server.log" -w -t 600 start >/dev/null ||
		die "the server did not start again, see $WORK/server.log"
	up=$(w5_secs "$start" "$(date +%s.%N)")
	echo "$(w5_secs "$t0" "$start") $bytes $up $start"
}

# Start polling, in the background, for every filter of the table's parts
# + 1 leaves and group, with no build queued or under way; w5_ready then
# waits for it and sets W5_READY to the seconds from "start" until they
# were all there (not in a subshell: only this shell can wait for it).
w5_poll_start()
{
	rm -f "$WORK/w5-ready"
	sql_value "SELECT w5_filters_back($(($1 + 1)))" >"$WORK/w5-ready" &
	W5_POLLER=$!
}

w5_ready()
{
	wait "$W5_POLLER" || die "w5: polling for the filters failed, see $OUT/logs/sql.log"
	W5_READY=$(w5_secs "$1" "$(cat "$WORK/w5-ready")")
}

# A restart of mode fast (keep "save" or "nosave") or immediate ("crash"),
# then the inserts; records what w5_restart measured and, for gunique, the
# seconds until every filter was back.
w5_restart_and_insert()
{
	local c=$1 run=$2 variant=$3 parts=$4 keys=$5 when=$6 mode=fast keep=save down bytes up start ready
	case "$when" in
	nosave) keep=nosave ;;
	crash) mode=immediate ;;
	esac
	read -r down bytes up start <<<"$(w5_restart "$mode" "$keep")"
	if [ "$mode" = fast ]; then
		record w5 "$variant" "$when-down" "$c" "$run" "$down" s
		[ "$c" = gunique ] && record w5 "$variant" "$when-file" "$c" "$run" "$bytes" bytes
	fi
	record w5 "$variant" "$when-up" "$c" "$run" "$up" s
	[ "$c" = gunique ] && w5_poll_start "$parts"
	w5_first_minute "$c" "$run" "$variant" "$keys" "$when"
	ready=$up
	if [ "$c" = gunique ]; then
		w5_ready "$start"
		ready=$W5_READY
	fi
	record w5 "$variant" "$when-ready" "$c" "$run" "$ready" s
	log "  w5 $variant $c $when: stop ${down}s (file $bytes bytes), up ${up}s, filters back ${ready}s"
}

w5_contender()
{
	local c=$1 run=$2 variant=$3 rows=$4 parts=$5 keys=$6 us bytes ins when clean=restart
	log "w5: $variant, $c, run $run"
	{
		drop_any_enforce_sql w5
		enforce_sql "$c" w5 k "" "k, a"
		echo "VACUUM (ANALYZE) w5;"
		echo "CHECKPOINT;"
	} | sql >/dev/null
	ins="INSERT INTO w5 SELECT a, $(w5_key "$keys" a) FROM (SELECT nextval('w5_next') * 2 + 1 AS a FROM generate_series(1, $W5_NEW)) s;"
	us=$(echo "$ins" | timed_sql "" | perl -ne "printf '%.3f', \$_ * 1000 / $W5_NEW")
	record w5 "$variant" insert "$c" "$run" "$us" us/row
	# the same in a session that has just inserted as many (untimed)
	us=$(echo "$ins" | timed_sql "$ins" | perl -ne "printf '%.3f', \$_ * 1000 / $W5_NEW")
	record w5 "$variant" insert-warm "$c" "$run" "$us" us/row
	if [ "$c" = gunique ]; then
		bytes=$(sql_value "SELECT round(used_bytes::numeric / (SELECT count(*) FROM w5), 2) FROM gunique_filter_memory()")
		record w5 "$variant" filter-bytes-per-key "$c" "$run" "$bytes" bytes
	fi
	record w5 "$variant" shared-memory "$c" "$run" "$(sql_value "SELECT setting FROM pg_settings WHERE name = 'shared_memory_size'")" MB
	# with BENCH_W5_NOSAVE, the restart without the save file alternates
	# with the one with it: first in even runs, second in odd ones
	if [ -n "$W5_NOSAVE" ]; then
		clean="restart nosave"
		[ $((run % 2)) = 0 ] && clean="nosave restart"
	fi
	for when in $clean crash; do
		w5_restart_and_insert "$c" "$run" "$variant" "$parts" "$keys" "$when"
	done
	drop_any_enforce_sql w5 | sql >/dev/null
	w5_reset "$rows" "$parts"
}

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
#   restart     a clean restart (pg_ctl restart -m fast): seconds until the
#               server accepts connections and, for gunique, until every
#               filter is back ("ready");
#   then W5_SECS seconds of single-row inserts of new keys by one pgbench
#   client, each transaction's latency logged: p50, p99 and max (ms), and
#   max-later, the slowest but for the session's first (a new session
#   loads its catalog caches);
#   crash       the same after an immediate shutdown (the filters are then
#               built again in the background, as the inserts ask for
#               them); for gunique, then, seconds from the start until
#               every filter is back ("crash-ready").
# Every contender gets the same table and the same restarts.
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
			echo "DROP TABLE IF EXISTS w5; DROP SEQUENCE IF EXISTS w5_next;" | sql >/dev/null
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
	SQL
}

# Latency percentiles (ms) of a pgbench per-transaction log directory: p50,
# p99, max, the count, and the max of all but the session's first
# transaction (which loads the catalog caches of a new session).
w5_latencies()
{
	cat "$1"/w5lat* | perl -ane '
		my $ms = $F[2] / 1000;
		push @l, $ms;
		$later = $ms if $F[1] > 0 && $ms > $later;
		END {
			@l = sort { $a <=> $b } @l;
			die "no transactions\n" unless @l;
			printf "%.3f %.3f %.3f %d %.3f\n", $l[int(0.5 * $#l)], $l[int(0.99 * $#l)], $l[-1], scalar @l, $later;
		}'
}

# W5_SECS seconds of single-row inserts of new keys; records p50, p99, max.
w5_first_minute()
{
	local c=$1 run=$2 variant=$3 keys=$4 when=$5 dir script p50 p99 max n
	dir=$WORK/w5lat-$c-$when
	rm -rf "$dir"
	mkdir -p "$dir"
	[ -n "$RUN_AS" ] && chown "$RUN_AS" "$dir"
	script=$dir/insert.sql
	echo "INSERT INTO w5 SELECT a, $(w5_key "$keys" a) FROM (SELECT nextval('w5_next') * 2 + 1 AS a) s;" >"$script"
	chmod a+r "$script"
	(cd "$dir" && run_pgbench "w5-$variant-$c-$when-$run" -c 1 -j 1 -T "$W5_SECS" -l --log-prefix="$dir/w5lat" -f "$script" >/dev/null)
	read -r p50 p99 max n later <<<"$(w5_latencies "$dir")"
	record w5 "$variant" "$when-p50" "$c" "$run" "$p50" ms
	record w5 "$variant" "$when-p99" "$c" "$run" "$p99" ms
	record w5 "$variant" "$when-max" "$c" "$run" "$max" ms
	record w5 "$variant" "$when-max-later" "$c" "$run" "$later" ms
	log "  w5 $variant $c $when: $n inserts, p50 $p50 ms, p99 $p99 ms, max $max ms ($later ms after the first)"
	rm -rf "$dir"
}

# Restart the server (mode fast or immediate); seconds until it accepts
# connections, and until gunique's filters are all back (0 for local).
w5_restart()
{
	local mode=$1 c=$2 parts=$3 start up ready
	as_user "$BINDIR/pg_ctl" -D "$WORK/data" -m "$mode" -w stop >/dev/null
	start=$(date +%s.%N)
	as_user "$BINDIR/pg_ctl" -D "$WORK/data" -p "$POSTGRES" -l "$WORK/server.log" -w -t 600 start >/dev/null ||
		die "the server did not start again, see $WORK/server.log"
	up=$(perl -e 'printf "%.2f", $ARGV[1] - $ARGV[0]' "$start" "$(date +%s.%N)")
	ready=$up
	if [ "$c" = gunique ] && [ "$mode" = fast ]; then
		ready=$(w5_filters_back "$parts" "$start")
	fi
	echo "$up $ready $start"
}

# Seconds from "start" until every filter of the table's parts + 1 leaves
# and group is there (polled every 0.1 s; gives up after 30 minutes).
w5_filters_back()
{
	local parts=$1 start=$2 deadline=$((SECONDS + 1800))
	while [ "$(sql_value 'SELECT filters FROM gunique_filter_memory()')" -lt $((parts + 1)) ]; do
		[ $SECONDS -lt $deadline ] || die "w5: the filters were not back after 30 minutes"
		sleep 0.1
	done
	perl -e 'printf "%.2f", $ARGV[1] - $ARGV[0]' "$start" "$(date +%s.%N)"
}

w5_contender()
{
	local c=$1 run=$2 variant=$3 rows=$4 parts=$5 keys=$6 us up ready start bytes ins
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
	read -r up ready start <<<"$(w5_restart fast "$c" "$parts")"
	record w5 "$variant" restart-up "$c" "$run" "$up" s
	record w5 "$variant" restart-ready "$c" "$run" "$ready" s
	w5_first_minute "$c" "$run" "$variant" "$keys" restart
	read -r up ready start <<<"$(w5_restart immediate "$c" "$parts")"
	record w5 "$variant" crash-up "$c" "$run" "$up" s
	w5_first_minute "$c" "$run" "$variant" "$keys" crash
	if [ "$c" = gunique ]; then
		# the background builds that the minute's inserts asked for
		record w5 "$variant" crash-ready "$c" "$run" "$(w5_filters_back "$parts" "$start")" s
	fi
	drop_any_enforce_sql w5 | sql >/dev/null
}

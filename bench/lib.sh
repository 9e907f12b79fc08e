# Shared code of the gunique benchmark suite, sourced by bench/run and by
# every bench/w*.sh.  Nothing here runs on its own.
#
# What it provides:
#   - the scale parameters (scale_params);
#   - the throwaway cluster: start_cluster / stop_cluster, run as the
#     unprivileged BENCH_USER when invoked as root;
#   - psql and pgbench wrappers that log everything and return numbers:
#     sql, sql_value, timed_sql, pgbench_logged, run_pgbench;
#   - the contenders' DDL: enforce_sql / drop_enforce_sql write the SQL that
#     makes a table's key unique the way each contender does it;
#   - the sanity probe (try_sql), its lines (sanity_line) and the raw result
#     writer (record).
#
# Globals set by bench/run before any of this is used:
#   BENCH_DIR  the bench/ directory       OUT      the results directory
#   SCALE      tiny|small|seed            RUNS     runs per measurement
#   BINDIR     PostgreSQL's bindir        CONTENDERS  the contenders to run

# The contenders, in the order they are reported.
ALL_CONTENDERS="local gunique trigger sidetable single"

# The multiplicative permutation used for "random" keys: for distinct
# x in [1, p-1], (x * g) mod p is distinct (p is prime, so g is invertible).
# g is about p / golden ratio, so consecutive x land far apart across the
# whole int4 range.  Everything stays below 2^31: keys fit in int4.
PERM_P=2147483647
PERM_G=1327217885
# SQL expression of the permuted key of a (0-based) integer expression.
perm() { echo "((($1)::bigint + 1) * $PERM_G % $PERM_P)::int"; }

# ---------------------------------------------------------------------------
# Scale parameters.  One place, so README.md and the report can quote them.
# ---------------------------------------------------------------------------
scale_params()
{
	case "$1" in
	tiny)
		W1_N=30000                    # workload 1: rows (6 partitions of N/6)
		W2_PARTITIONS="1 6 32 128"    # workload 2: partition counts (512 left out: its set-up alone takes minutes)
		W2_TOTAL=200000 W2_ROWS=2000 #   rows in the table after the timed insert, timed rows
		W3A_BASE=20000 W3A_SECS=2     # workload 3a: rows before the run, seconds per contender
		W3B_BASE=10000 W3B_TX=2       # workload 3b: rows before the run, transactions of 1,000 rows per client
		W4_ROWS=200000 W4_SECS=2      # workload 4: accounts, seconds per contender and mode
		W6_SCALE=2 W6_SECS=4          # workload 6: pgbench -s (100,000 accounts each), seconds per contender and mode
		W7_BASE=20000 W7_TX=3         # workload 7: older rows before the run, transactions of 1,000 rows per client
		W8_SECS=5                     # workload 8: seconds per contender
		;;
	small)                            # about 10 minutes on 2 cores, one run
		W1_N=600000
		W2_PARTITIONS="1 6 32 128 512"
		W2_TOTAL=1000000 W2_ROWS=5000
		W3A_BASE=200000 W3A_SECS=5
		W3B_BASE=100000 W3B_TX=10
		W4_ROWS=2000000 W4_SECS=5
		W6_SCALE=20 W6_SECS=20
		W7_BASE=500000 W7_TX=40
		W8_SECS=30
		;;
	seed | large)                     # large: workload 5 only, see bench/README.md
		W1_N=6000000
		W2_PARTITIONS="1 6 32 128 512"
		W2_TOTAL=6000000 W2_ROWS=60000
		W3A_BASE=2000000 W3A_SECS=60
		W3B_BASE=1000000 W3B_TX=900
		W4_ROWS=20000000 W4_SECS=60
		W6_SCALE=20 W6_SECS=60        # the talk's -s 20
		W7_BASE=5000000 W7_TX=200
		W8_SECS=60
		;;
	*)
		die "unknown scale '$1' (tiny, small, seed or large)"
		;;
	esac
	# Workload 5: rows:partitions of each table, timed new keys, seconds of
	# single-row inserts after each restart.  Every insert of every
	# contender takes a new odd key within the table's range, which holds
	# as many as the table has rows: at some 10,000 inserts a second, tiny's
	# 200,000 last for two contenders' 2 * 2 seconds, not 2 * 5.
	case "$1" in
	tiny) W5_SIZES="200000:16" W5_NEW=10000 W5_SECS=2 ;;
	small) W5_SIZES="2000000:64" W5_NEW=100000 W5_SECS=20 ;;
	seed) W5_SIZES="20000000:64" W5_NEW=100000 W5_SECS=60 ;;
	large) W5_SIZES="20000000:64 100000000:128" W5_NEW=100000 W5_SECS=60 ;;
	esac
	W5_SIZES=${BENCH_W5_SIZES:-$W5_SIZES}
	# Workload 9: rows, partitions, rows of the attached partition, seconds
	# of the writers alone (the baseline).
	case "$1" in
	tiny) W9_ROWS=200000 W9_PARTITIONS=16 W9_ATTACH=20000 W9_BASE_SECS=3 ;;
	small) W9_ROWS=2000000 W9_PARTITIONS=64 W9_ATTACH=200000 W9_BASE_SECS=10 ;;
	seed | large) W9_ROWS=20000000 W9_PARTITIONS=64 W9_ATTACH=2000000 W9_BASE_SECS=30 ;;
	esac
	W9_CLIENTS=4
	W9_RATE=${BENCH_W9_RATE:-1000}    # the writers' transactions per second, in all; 0: unthrottled
	[[ "$W9_RATE" =~ ^[0-9]+$ ]] || die "BENCH_W9_RATE: '$W9_RATE' is not a rate (transactions per second, 0 for unthrottled)"
	W9_WARM=2 W9_TAIL=3               # seconds of writers before and after each timed statement
	# Workload 10 (Citus, a coordinator and two workers of its own): rows
	# loaded into each table before it is measured, seconds of each pgbench
	# step, rows of each COPY; shard counts of the lookups; the shard count
	# of the insert tables.
	case "$1" in
	tiny) W10_ROWS=10000 W10_SECS=3 W10_COPY=5000 ;;
	small) W10_ROWS=100000 W10_SECS=10 W10_COPY=20000 ;;
	seed | large) W10_ROWS=500000 W10_SECS=30 W10_COPY=100000 ;;
	esac
	W10_SHARDS=${BENCH_W10_SHARDS:-4 32 128}
	for p in $W10_SHARDS; do
		[[ "$p" =~ ^[0-9]+$ ]] && [ "$p" -ge 1 ] || die "BENCH_W10_SHARDS: '$p' is not a shard count"
	done
	W10_INSERT_SHARDS=32              # Citus's default citus.shard_count
	W10_CLIENTS=${BENCH_CLIENTS:-8}
	W10_BATCH=100                     # rows of each multi-row INSERT
	W10_TENANTS=1000                  # distinct values of the distribution column
	W10_PROBES=20                     # lookups whose shards are counted, per contender and shard count
	W5_KEYS=${BENCH_W5_KEYS:-random correlated uuid}
	# BENCH_W5_NOSAVE=1: a second clean restart, without gunique's save file
	W5_NOSAVE=
	[ "${BENCH_W5_NOSAVE:-0}" = 0 ] || W5_NOSAVE=1
	# The lock table must hold 512 partitions and their indexes in one
	# transaction, and the trigger contender's advisory lock on every key
	# that workload 1 inserts in one statement (N of them).
	case "$1" in
	tiny) SETTINGS+=("max_locks_per_transaction = 1024") ;;
	small) SETTINGS+=("max_locks_per_transaction = 16384") ;;
	seed | large) SETTINGS+=("max_locks_per_transaction = 131072") ;;
	esac
	W2_PARTITIONS=${BENCH_W2_PARTITIONS:-$W2_PARTITIONS}
	W2_KEYS=${BENCH_W2_KEYS:-int uuid email pair}    # key types of workload 2: see w2-scaling.sh
	W2_CASES=${BENCH_W2_CASES:-new reinsert update}    # new keys, keys that come back: see w2-scaling.sh
	for c in $W2_CASES; do
		case "$c" in
		new | reinsert | update) ;;
		*) die "BENCH_W2_CASES: unknown case '$c' (new, reinsert, update)" ;;
		esac
	done
	W2_WARM=${BENCH_W2_WARM:-refused}    # or reinsert: see w2-scaling.sh
	case "$W2_WARM" in
	refused | reinsert) ;;
	*) die "BENCH_W2_WARM must be refused or reinsert, not '$W2_WARM'" ;;
	esac
	W3A_PARTITIONS=16
	W3A_CLIENTS=${BENCH_CLIENTS:-8}
	W3B_CLIENTS=10                # as in the de-duplication article
	W4_PARTITIONS=200
	W4_CLIENTS=${BENCH_CLIENTS:-8}
	W6_PARTITIONS=${BENCH_W6_PARTITIONS:-16 200 1000}    # the talk's 200, and either side of it
	W6_MODES=${BENCH_W6_MODES:-select-only select-update}
	for m in $W6_MODES; do
		case "$m" in
		select-only | select-update | update-only | update-generic | update-custom | delete-insert) ;;
		*) die "BENCH_W6_MODES: unknown mode '$m' (select-only, select-update, update-only, update-generic, update-custom, delete-insert)" ;;
		esac
	done
	W6_CLIENTS=${BENCH_CLIENTS:-8}
	W7_PARTITIONS=${BENCH_W7_PARTITIONS:-8 64}
	for p in $W7_PARTITIONS; do
		[[ "$p" =~ ^[0-9]+$ ]] && [ "$p" -ge 2 ] || die "BENCH_W7_PARTITIONS: '$p' is not a partition count of 2 or more"
	done
	W7_CLIENTS=10                 # as 3b
	W7_ROWS=${BENCH_W7_ROWS:-1000 1}
	for r in $W7_ROWS; do
		case "$r" in
		1000 | 1) ;;
		*) die "BENCH_W7_ROWS: '$r' is not 1000 or 1 (rows per statement)" ;;
		esac
	done
	W8_PARTITIONS=4
	W8_CLIENTS=8
}

# ---------------------------------------------------------------------------
# Messages
# ---------------------------------------------------------------------------
log() { printf '%s %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die()
{
	printf 'bench: %s\n' "$*" >&2
	# a server stopped from outside (a broad pkill, a reboot) explains most failures
	if [ -n "${CLUSTER_UP:-}" ] && ! kill -0 "$(head -n 1 "$WORK/data/postmaster.pid" 2>/dev/null)" 2>/dev/null; then
		printf 'bench: the server is no longer running (stopped or killed from outside?), see %s\n' "$OUT/logs/server.log" >&2
	fi
	exit 1
}

# Is contender $1 among those selected with --contenders?
wanted() { case " $CONTENDERS " in *" $1 "*) return 0 ;; *) return 1 ;; esac; }

# The selected contenders, rotated left by $1 places: each run starts with a
# different contender, so that no contender always runs first (cold caches)
# or last (a fuller WAL, a warmer machine).
rotated()
{
	local -a list=($CONTENDERS)
	local n=${#list[@]} i out=""
	for ((i = 0; i < n; i++)); do
		out="$out ${list[$(((i + $1) % n))]}"
	done
	echo $out
}

# ---------------------------------------------------------------------------
# Running things as the cluster's owner
# ---------------------------------------------------------------------------

# Run a command as BENCH_USER when we are root, else as ourselves.  The
# working directory is the private temp dir, which that user can enter.
as_user()
{
	if [ -n "${RUN_AS:-}" ]; then
		(cd "$WORK" && runuser -u "$RUN_AS" -- "$@")
	else
		(cd "$WORK" && "$@")
	fi
}

# A free TCP port >= 5600 (ports below are used by the test clusters), or
# within BENCH_PORTS ("LO-HI", both included) when it is set.  The
# server listens on a unix socket in its own directory only, but the port
# still names the socket and must not collide with a server on the machine,
# nor with another of this run's servers (workload 10 starts three, their
# sockets in $WORK beside the main one's).
free_port()
{
	local port lo=5600 hi=5999 n i
	if [ -n "${BENCH_PORTS:-}" ]; then
		[[ "$BENCH_PORTS" =~ ^([0-9]+)-([0-9]+)$ ]] && [ "${BASH_REMATCH[1]}" -le "${BASH_REMATCH[2]}" ] ||
			die "BENCH_PORTS must be a range LO-HI, such as 60200-60299"
		lo=${BASH_REMATCH[1]} hi=${BASH_REMATCH[2]}
	fi
	n=$((hi - lo + 1))
	# from a random place in the range, once around it
	for ((i = 0, port = lo + RANDOM % n; i < n; i++, port = lo + (port - lo + 1) % n)); do
		if ! (exec 3<>"/dev/tcp/127.0.0.1/$port") 2>/dev/null &&
			[ ! -e "/tmp/.s.PGSQL.$port" ] && [ ! -e "/var/run/postgresql/.s.PGSQL.$port" ] &&
			[ ! -e "${WORK:-/nonexistent}/.s.PGSQL.$port" ] && [ ! -e "${WORK:-/nonexistent}/.s.PGSQL.$port.lock" ]; then
			echo "$port"
			return 0
		fi
	done
	die "no free port between $lo and $hi"
}

# The server settings, identical for every contender.  Reported verbatim.
SETTINGS=(
	"shared_buffers = 1GB"
	"max_wal_size = 8GB"
	"checkpoint_timeout = 30min"
	"synchronous_commit = off"
	"autovacuum = off"                  # VACUUM runs explicitly, untimed, between steps
	"maintenance_work_mem = 512MB"
	"jit = off"                         # no compilation noise in the timings
	"max_connections = 50"
)

# The server runs from a private copy of its binary and of gunique.so, in a
# mirror of the installation's paths under $WORK/pg: PostgreSQL finds $libdir
# and its share directory relative to its own binary, so the copy loads the
# mirror's libraries (gunique.so copied, every other file linked).  A server
# maps gunique.so for its whole life, and a `make install` during a run would
# overwrite the file under it and crash it; with the copy, a long run
# measures one build from start to end.  BENCH_GUNIQUE_SO names another
# build of gunique.so to copy instead of the installed one (for A/B runs of
# two builds without installing either).  Sets POSTGRES and GUNIQUE_SO.
private_install()
{
	local pkglib share root=$WORK/pg f
	pkglib=$("$PG_CONFIG" --pkglibdir)
	share=$("$PG_CONFIG" --sharedir)
	mkdir -p "$root$BINDIR" "$root$pkglib" "$(dirname "$root$share")"
	cp "$BINDIR/postgres" "$root$BINDIR/postgres"
	for f in "$pkglib"/*; do
		[ "$(basename "$f")" = gunique.so ] || ln -s "$f" "$root$pkglib/"
	done
	cp "${BENCH_GUNIQUE_SO:-$pkglib/gunique.so}" "$root$pkglib/gunique.so"
	ln -s "$share" "$root$share"
	chmod -R a+rX "$root"
	POSTGRES=$root$BINDIR/postgres
	GUNIQUE_SO=$root$pkglib/gunique.so
}

# Start the throwaway cluster: initdb in $WORK/data, the socket in $WORK,
# no TCP.  Sets PGPORT_BENCH.  stop_cluster (installed as an EXIT trap by
# bench/run) stops it and removes $WORK.
start_cluster()
{
	PGPORT_BENCH=$(free_port)
	log "initdb in $WORK/data, port $PGPORT_BENCH"
	as_user "$BINDIR/initdb" -D "$WORK/data" -A trust -U postgres -E UTF8 --locale=C >"$OUT/logs/initdb.log" 2>&1 ||
		die "initdb failed, see $OUT/logs/initdb.log"
	{
		echo "# added by bench/run"
		echo "port = $PGPORT_BENCH"
		echo "listen_addresses = ''"
		echo "unix_socket_directories = '$WORK'"
		echo "shared_preload_libraries = 'gunique'"
		local s
		for s in "${SETTINGS[@]}"; do echo "$s"; done
		if [ -n "${BENCH_EXTRA_SETTINGS:-}" ]; then printf "%s\n" "$BENCH_EXTRA_SETTINGS" | tr ";" "\n"; fi
	} >>"$WORK/data/postgresql.conf"
	private_install
	as_user "$BINDIR/pg_ctl" -D "$WORK/data" -p "$POSTGRES" -l "$WORK/server.log" -w -t 120 start >/dev/null ||
		{ cp "$WORK/server.log" "$OUT/logs/" 2>/dev/null; die "the server did not start, see $OUT/logs/server.log"; }
	CLUSTER_UP=1
	# the server must have loaded the private copy
	if ! grep -qF "$GUNIQUE_SO" "/proc/$(head -n 1 "$WORK/data/postmaster.pid")/maps" 2>/dev/null; then
		log "warning: could not verify that the server loaded $GUNIQUE_SO"
	fi
	sql <<-'SQL' >/dev/null || die "CREATE EXTENSION gunique failed (see $OUT/logs/sql.log): is it installed for this PostgreSQL?"
		CREATE EXTENSION gunique;
	SQL
	# pg_prewarm (PostgreSQL's contrib, in Debian's server package) if it is there
	HAVE_PREWARM=
	if echo "CREATE EXTENSION pg_prewarm;" | sql >/dev/null 2>&1; then HAVE_PREWARM=1; fi
}

stop_cluster()
{
	# workload 10's Citus nodes, if it left any running (it failed)
	if declare -F w10_stop_nodes >/dev/null; then w10_stop_nodes; fi
	if [ -n "${CLUSTER_UP:-}" ]; then
		as_user "$BINDIR/pg_ctl" -D "$WORK/data" -m fast -w stop >/dev/null 2>&1 ||
			as_user "$BINDIR/pg_ctl" -D "$WORK/data" -m immediate -w stop >/dev/null 2>&1 || true
		CLUSTER_UP=
	fi
	if [ -n "${WORK:-}" ] && [ -d "$WORK" ]; then
		[ -d "${OUT:-}/logs" ] && cp "$WORK/server.log" "$OUT/logs/server.log" 2>/dev/null || true
		if [ -n "${BENCH_KEEP:-}" ]; then
			log "BENCH_KEEP is set: leaving $WORK"
		else
			rm -rf "$WORK"
		fi
	fi
}

# ---------------------------------------------------------------------------
# psql and pgbench
# ---------------------------------------------------------------------------

# psql against the benchmark cluster, stopping at the first error.
bench_psql()
{
	as_user "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$PGPORT_BENCH" -U postgres -d postgres "$@"
}

# Run SQL from stdin; its output goes to stdout, everything is also logged.
sql()
{
	local input rc=0 output
	input=$(cat)
	printf -- '-- %s\n%s\n' "$(date +%T)" "$input" >>"$OUT/logs/sql.log"
	output=$(printf '%s\n' "$input" | bench_psql 2>&1) || rc=$?
	printf '%s\n' "$output" >>"$OUT/logs/sql.log"
	if [ $rc != 0 ]; then
		printf '%s\n' "$output" | tail -n 20 >&2
		return $rc
	fi
	printf '%s\n' "$output"
}

# One value from a query given as the argument.
sql_value() { printf '%s\n' "$1" | bench_psql -At 2>>"$OUT/logs/sql.log"; }

# timed_sql [PRELUDE]: run the untimed SQL PRELUDE (set-up, VACUUM,
# CHECKPOINT), then the SQL from stdin with \timing on, in one session;
# print the sum of the timed statements' "Time: X ms" lines (a step made of
# several statements, e.g. BEGIN; check; ALTER TABLE; COMMIT, is timed as a
# whole; psql's start-up is not timed).
timed_sql()
{
	local out
	out=$({
		printf '%s\n' "${1:-}"
		echo '\timing on'
		cat
	} | sql) || return 1
	printf '%s\n' "$out" | perl -ne '$t += $1 if /^Time: ([0-9.]+) ms/; END { die "no timing\n" unless defined $t; printf "%.3f\n", $t }'
}

# CHECKPOINT before a timed step, so that no step pays for the previous
# one's dirty buffers.
checkpoint() { echo 'CHECKPOINT;' | sql >/dev/null; }

# checks WORKLOAD CONTENDER: the untimed sanity probes.  Reads lines
# "EXPECTED<tab>DESCRIPTION<tab>SQL" from stdin; runs each SQL in its own
# transaction, rolled back, in one session; its outcome is "refused" if it
# raised unique_violation (SQLSTATE 23505), "accepted" if it succeeded (any
# other error fails).  Dies if an outcome is not EXPECTED: a contender that
# does not enforce what it claims would make its timings meaningless.
checks()
{
	local w=$1 c=$2 expected desc stmt got i=0
	local -a exp descs
	local script=""
	while IFS=$'\t' read -r expected desc stmt; do
		exp+=("$expected")
		descs+=("$desc")
		script+="BEGIN;
CREATE FUNCTION pg_temp.bench_try() RETURNS text LANGUAGE plpgsql AS \$try\$
BEGIN
	$stmt;
	RETURN 'accepted';
EXCEPTION WHEN unique_violation THEN
	RETURN 'refused';
END
\$try\$;
SELECT pg_temp.bench_try();
ROLLBACK;
"
	done
	got=$(printf '\\pset tuples_only on\n\\pset format unaligned\n%s' "$script" | sql) ||
		die "the sanity checks of $c failed to run (see $OUT/logs/sql.log)"
	while read -r outcome; do
		sanity_line "$w" "$c" "${descs[$i]}" "${exp[$i]}" "$outcome"
		i=$((i + 1))
	done <<<"$got"
	[ "$i" = "${#exp[@]}" ] || die "sanity checks of $c: expected ${#exp[@]} outcomes, got $i"
}

# sanity_line WORKLOAD CONTENDER DESCRIPTION EXPECTED OUTCOME: one line of
# sanity.tsv; stops the run if OUTCOME is not EXPECTED.
sanity_line()
{
	printf '%s\t%s\t%s\t%s\t%s\n' "$1" "$2" "$3" "$4" "$5" >>"$OUT/sanity.tsv"
	log "  sanity $2: $3: $5"
	[ "$4" = "$5" ] || die "sanity check failed: $2: $3: expected $4, got $5"
}

# pgbench_logged LABEL PGBENCH-ARGS...: run pgbench as the cluster owner,
# its output in logs/pgbench-LABEL.log (printed: the file); stops the run
# if pgbench fails.
pgbench_logged()
{
	local label=$1 logf
	shift
	logf="$OUT/logs/pgbench-$label.log"
	if ! as_user "$BINDIR/pgbench" -h "$WORK" -p "$PGPORT_BENCH" -U postgres -n "$@" postgres >"$logf" 2>&1; then
		tail -n 20 "$logf" >&2
		die "pgbench $label failed, see $logf"
	fi
	echo "$logf"
}

# run_pgbench LABEL PGBENCH-ARGS...: pgbench_logged, then fail if a client
# aborted or a transaction failed; print "TPS LATENCY_MS".
run_pgbench()
{
	local logf
	logf=$(pgbench_logged "$@") || exit 1
	perl -ne '
		$tps = $1 if /^tps = ([0-9.]+)/;
		$lat = $1 if /^latency average = ([0-9.]+) ms/;
		$bad = 1 if /aborted|^number of failed transactions: [1-9]/;
		$bad = 1 if m{^number of transactions actually processed: (\d+)/(\d+)} && $1 != $2;
		END {
			die "pgbench output without tps or latency\n" unless defined $tps && defined $lat;
			die "pgbench: failed or aborted transactions\n" if $bad;
			print "$tps $lat\n";
		}' "$logf" || die "pgbench $1: see $logf"
}

# pgbench's thread count: one per core, at most one per client.
jobs_for() { local n; n=$(nproc); [ "$1" -lt "$n" ] && n=$1; echo "$n"; }

# record WORKLOAD VARIANT STEP CONTENDER RUN VALUE UNIT: one raw result.
record()
{
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$@" >>"$OUT/raw.tsv"
}

# meta KEY VALUE: a line of the run's description (read by report.pl).
meta() { printf '%s\t%s\n' "$1" "$2" >>"$OUT/meta.tsv"; }

# ---------------------------------------------------------------------------
# The contenders' DDL
# ---------------------------------------------------------------------------

# The function that hashes a key of the given type to a bigint, for the
# trigger contender's advisory lock.
hash_fn()
{
	case "$1" in
	int | int4 | integer) echo hashint4extended ;;
	bigint | int8) echo hashint8extended ;;
	uuid) echo uuid_hash_extended ;;
	text) echo hashtextextended ;;
	*) die "no hash function for key type $1" ;;
	esac
}

# enforce_sql CONTENDER TABLE KEY KEYTYPE LOCAL
#
# Print the SQL that makes TABLE.KEY unique the way CONTENDER does, on a
# table that may already hold rows (the step "create" of workload 1 times
# exactly this).  Every object it creates is named after TABLE, so that
# drop_enforce_sql can remove it.  LOCAL says what the local contender
# builds: a column list for a unique index on the parent ("b, a"), "pk" for
# a primary key on the parent, or "each-pk" for a primary key on every
# partition (for a partition key that is an expression).
enforce_sql()
{
	local c=$1 t=$2 k=$3 type=$4 local_spec=$5
	case "$c" in
	local)
		case "$local_spec" in
		pk) echo "ALTER TABLE $t ADD CONSTRAINT ${t}_enf PRIMARY KEY ($k);" ;;
		each-pk)
			cat <<-SQL
				DO \$\$
				DECLARE part regclass;
				BEGIN
					FOR part IN SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = '$t'::regclass LOOP
						EXECUTE format('ALTER TABLE %s ADD CONSTRAINT %I PRIMARY KEY ($k)', part, part::text || '_enf');
					END LOOP;
				END \$\$;
			SQL
			;;
		*) echo "CREATE UNIQUE INDEX ${t}_enf ON $t ($local_spec);" ;;
		esac
		;;
	single)
		echo "CREATE UNIQUE INDEX ${t}_enf ON $t ($k);"
		;;
	gunique)
		echo "CREATE UNIQUE INDEX ${t}_enf ON $t USING gunique ($k);"
		;;
	trigger)
		# A plain btree on the key in every partition, a check that the rows
		# already there are unique, and a BEFORE row trigger that serializes
		# inserters of one key on an advisory lock (held to the end of the
		# transaction) and looks the key up through the parent: one lock per
		# key, so a bulk INSERT holds one per row (the lock table is sized
		# for it, see scale_params).  Locking hash buckets instead would make
		# concurrent multi-row inserters deadlock.  An UPDATE that keeps the
		# key skips the check (the row would find itself).
		cat <<-SQL
			BEGIN;
			LOCK TABLE $t IN SHARE MODE;
			CREATE INDEX ${t}_enf ON $t ($k);
			DO \$\$
			BEGIN
				IF EXISTS (SELECT 1 FROM $t WHERE $k IS NOT NULL GROUP BY $k HAVING count(*) > 1) THEN
					RAISE unique_violation USING MESSAGE = 'duplicate keys in $t';
				END IF;
			END \$\$;
			CREATE FUNCTION ${t}_uniq() RETURNS trigger LANGUAGE plpgsql AS \$f\$
			BEGIN
				IF NEW.$k IS NULL OR (TG_OP = 'UPDATE' AND NEW.$k = OLD.$k) THEN
					RETURN NEW;
				END IF;
				PERFORM pg_advisory_xact_lock($(hash_fn "$type")(NEW.$k, $(printf %s "$t" | cksum | cut -d" " -f1)));
				IF EXISTS (SELECT 1 FROM $t WHERE $k = NEW.$k) THEN
					RAISE unique_violation USING
						MESSAGE = format('duplicate key value violates uniqueness of $t.$k: %s', NEW.$k);
				END IF;
				RETURN NEW;
			END
			\$f\$;
			CREATE TRIGGER ${t}_uniq BEFORE INSERT OR UPDATE OF $k ON $t
				FOR EACH ROW EXECUTE FUNCTION ${t}_uniq();
			COMMIT;
		SQL
		;;
	sidetable)
		# A table of the keys with a primary key, filled from the rows already
		# there (the primary key is built after the fill), and AFTER row
		# triggers that keep it in step.  A row that moves to another partition
		# fires the delete and insert triggers, not the update trigger.
		cat <<-SQL
			BEGIN;
			LOCK TABLE $t IN SHARE MODE;
			CREATE TABLE ${t}_side ($k $type NOT NULL);
			INSERT INTO ${t}_side SELECT $k FROM $t WHERE $k IS NOT NULL;
			ALTER TABLE ${t}_side ADD CONSTRAINT ${t}_side_pkey PRIMARY KEY ($k);
			CREATE FUNCTION ${t}_side_ins() RETURNS trigger LANGUAGE plpgsql AS \$f\$
			BEGIN
				IF NEW.$k IS NOT NULL THEN
					INSERT INTO ${t}_side VALUES (NEW.$k);
				END IF;
				RETURN NULL;
			END
			\$f\$;
			CREATE FUNCTION ${t}_side_upd() RETURNS trigger LANGUAGE plpgsql AS \$f\$
			BEGIN
				IF NEW.$k IS DISTINCT FROM OLD.$k THEN
					DELETE FROM ${t}_side WHERE $k = OLD.$k;
					IF NEW.$k IS NOT NULL THEN
						INSERT INTO ${t}_side VALUES (NEW.$k);
					END IF;
				END IF;
				RETURN NULL;
			END
			\$f\$;
			CREATE FUNCTION ${t}_side_del() RETURNS trigger LANGUAGE plpgsql AS \$f\$
			BEGIN
				DELETE FROM ${t}_side WHERE $k = OLD.$k;
				RETURN NULL;
			END
			\$f\$;
			CREATE TRIGGER ${t}_side_ins AFTER INSERT ON $t FOR EACH ROW EXECUTE FUNCTION ${t}_side_ins();
			CREATE TRIGGER ${t}_side_upd AFTER UPDATE OF $k ON $t FOR EACH ROW EXECUTE FUNCTION ${t}_side_upd();
			CREATE TRIGGER ${t}_side_del AFTER DELETE ON $t FOR EACH ROW EXECUTE FUNCTION ${t}_side_del();
			COMMIT;
		SQL
		;;
	*) die "unknown contender $c" ;;
	esac
}

# drop_enforce_sql CONTENDER TABLE: undo enforce_sql.
drop_enforce_sql()
{
	local c=$1 t=$2
	case "$c" in
	local)
		cat <<-SQL
			DO \$\$
			DECLARE r record;
			BEGIN
				-- a primary key on the parent or on each partition, or a unique index
				FOR r IN SELECT conrelid::regclass AS rel, conname FROM pg_constraint
						WHERE conname LIKE '%\\_enf' AND conrelid IN
							(SELECT relid FROM pg_partition_tree('$t') WHERE parentrelid IS NULL OR isleaf)
						ORDER BY conrelid = '$t'::regclass DESC LOOP
					-- the parent's constraint takes the partitions' with it
					IF EXISTS (SELECT 1 FROM pg_constraint WHERE conrelid = r.rel AND conname = r.conname) THEN
						EXECUTE format('ALTER TABLE %s DROP CONSTRAINT %I', r.rel, r.conname);
					END IF;
				END LOOP;
			END \$\$;
			DROP INDEX IF EXISTS ${t}_enf;
		SQL
		;;
	single | gunique)
		echo "DROP INDEX IF EXISTS ${t}_enf;"
		;;
	trigger)
		cat <<-SQL
			DROP TRIGGER IF EXISTS ${t}_uniq ON $t;
			DROP FUNCTION IF EXISTS ${t}_uniq();
			DROP INDEX IF EXISTS ${t}_enf;
		SQL
		;;
	sidetable)
		cat <<-SQL
			DROP TRIGGER IF EXISTS ${t}_side_ins ON $t;
			DROP TRIGGER IF EXISTS ${t}_side_upd ON $t;
			DROP TRIGGER IF EXISTS ${t}_side_del ON $t;
			DROP FUNCTION IF EXISTS ${t}_side_ins(), ${t}_side_upd(), ${t}_side_del();
			DROP TABLE IF EXISTS ${t}_side;
		SQL
		;;
	esac
}

# attach_sql CONTENDER TABLE NEW BOUND KEY: attach table NEW (already filled)
# as a partition of TABLE, with what the contender needs to keep the key
# unique.  local and gunique: ATTACH alone (it builds NEW's index; gunique
# also checks NEW's keys against the other partitions).  trigger: the
# triggers and the index are cloned by ATTACH; the rows already in NEW are
# checked first, among themselves and against the table, with writers held
# off.  sidetable: NEW's keys go into the side table (its primary key
# refuses duplicates), then ATTACH clones the triggers.
attach_sql()
{
	local c=$1 t=$2 new=$3 bound=$4 k=$5
	case "$c" in
	local | gunique)
		echo "ALTER TABLE $t ATTACH PARTITION $new $bound;"
		;;
	trigger)
		cat <<-SQL
			BEGIN;
			LOCK TABLE $t IN SHARE MODE;
			LOCK TABLE $new IN ACCESS EXCLUSIVE MODE;
			DO \$\$
			BEGIN
				IF EXISTS (SELECT 1 FROM $new WHERE $k IS NOT NULL GROUP BY $k HAVING count(*) > 1)
					OR EXISTS (SELECT 1 FROM $new n JOIN $t o ON o.$k = n.$k) THEN
					RAISE unique_violation USING MESSAGE = 'duplicate keys in $new';
				END IF;
			END \$\$;
			ALTER TABLE $t ATTACH PARTITION $new $bound;
			COMMIT;
		SQL
		;;
	sidetable)
		cat <<-SQL
			BEGIN;
			LOCK TABLE $new IN ACCESS EXCLUSIVE MODE;
			INSERT INTO ${t}_side SELECT $k FROM $new WHERE $k IS NOT NULL;
			ALTER TABLE $t ATTACH PARTITION $new $bound;
			COMMIT;
		SQL
		;;
	esac
}

# detach_sql CONTENDER TABLE OLD KEY: detach OLD; the side table forgets its
# keys (DETACH drops the cloned triggers, so nothing else would).
detach_sql()
{
	local c=$1 t=$2 old=$3 k=$4
	case "$c" in
	sidetable)
		cat <<-SQL
			BEGIN;
			ALTER TABLE $t DETACH PARTITION $old;
			DELETE FROM ${t}_side s USING $old o WHERE s.$k = o.$k;
			COMMIT;
		SQL
		;;
	*)
		echo "ALTER TABLE $t DETACH PARTITION $old;"
		;;
	esac
}

# ---------------------------------------------------------------------------
# Tables
# ---------------------------------------------------------------------------

# range_partitions_sql PARENT N LO HI: N range partitions PARENT_p0 ..
# PARENT_p(N-1) splitting [LO, HI) evenly.
range_partitions_sql()
{
	cat <<-SQL
		DO \$\$
		BEGIN
			FOR i IN 0 .. $2 - 1 LOOP
				EXECUTE format('CREATE TABLE %I PARTITION OF $1 FOR VALUES FROM (%s) TO (%s)',
					'$1_p' || i, $3 + i::bigint * ($4 - $3) / $2, $3 + (i + 1)::bigint * ($4 - $3) / $2);
			END LOOP;
		END \$\$;
	SQL
}

# drop_all_sql TABLE...: drop the tables and whatever any contender left
# around them (side tables, trigger functions).
drop_all_sql()
{
	local t
	for t in "$@"; do
		cat <<-SQL
			DROP TABLE IF EXISTS $t, ${t}_side CASCADE;
			DROP FUNCTION IF EXISTS ${t}_uniq(), ${t}_side_ins(), ${t}_side_upd(), ${t}_side_del();
		SQL
	done
}

# vacuum_sql CONTENDER TABLE: VACUUM (ANALYZE) the table and the contender's
# side table, so that every timed step starts from set hint bits, a visibility
# map and statistics.
vacuum_sql()
{
	echo "VACUUM (ANALYZE) $2;"
	if [ "$1" = sidetable ]; then echo "VACUUM (ANALYZE) $2_side;"; fi
}

# drop_any_enforce_sql TABLE: undo whichever contender's enforcement is there.
drop_any_enforce_sql()
{
	local c
	for c in $ALL_CONTENDERS; do drop_enforce_sql "$c" "$1"; done
}

# prewarm_sql TABLE: load every index of TABLE's partition tree and of its
# side table into shared buffers (pg_prewarm).  CREATE INDEX writes its pages
# around shared buffers, so without this the first statements after a build
# read the index from the OS cache, and a contender whose build happens to
# read its own index (gunique's check does) would start warm.  A no-op when
# pg_prewarm is not installed (see HAVE_PREWARM in bench/run's meta).
prewarm_sql()
{
	[ -n "${HAVE_PREWARM:-}" ] || return 0
	cat <<-SQL
		SELECT count(pg_prewarm(i.indexrelid)) FROM pg_index i JOIN pg_class c ON c.oid = i.indexrelid
		WHERE c.relkind = 'i'
			AND (i.indrelid = '$1'::regclass OR i.indrelid = to_regclass('$1_side')
				OR i.indrelid IN (SELECT relid FROM pg_partition_tree('$1')));
	SQL
}

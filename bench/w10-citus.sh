# Workload 10: global keys on Citus distributed tables (issue 44), a
# coordinator and two workers on this machine.
#
# The tables, each distributed by tenant (hash, create_distributed_table,
# citus.shard_count shards), the same columns and rows:
#
#   ev(tenant int, id bigint, v int, payload text), all NOT NULL
#
# Contenders (the suite's names, so that the ratios read as everywhere
# else: gunique / local):
#
#   gunique  ev_g: CREATE UNIQUE INDEX ev_g_key ON ev_g USING gunique (id),
#            the global key: a key table gunique_keys."public.ev_g_key"
#            distributed by id, written in the row's distributed
#            transaction (src/citus/README)
#   local    ev_u: ALTER TABLE ev_u ADD CONSTRAINT ev_u_key UNIQUE (id,
#            tenant), the best Citus allows today: a unique key that
#            includes the distribution column, enforced in each shard
#            alone.  The same constraint as UNIQUE (tenant, id); id comes
#            first so that a lookup by id alone can use it in every shard
#            (with (tenant, id) each shard would scan its whole index)
#   none     ev_n: no unique index (inserts only): what the key costs
#            at all
#   sidetable ev_s and ev_s_ids(id bigint PRIMARY KEY, tenant int)
#            distributed by id in a co-location group of its own: the
#            design of the global key written by hand, the application
#            writing each row and its id in one transaction (inserts
#            only).  What Citus itself charges for a transaction that
#            writes two shards, the row's and its key's, with no gunique
#            code: gunique / sidetable is what gunique adds to that floor
#
# Loaded rows: id 1 .. W10_ROWS, tenant (id * 7919) % W10_TENANTS.
#
# Inserts, at W10_INSERT_SHARDS shards (32, Citus's default), W10_CLIENTS
# clients (-M prepared, -T W10_SECS), each contender's table loaded with
# W10_ROWS rows and its key built (timed: variant build-<shards>):
#   insert-1    INSERT INTO t (tenant, id, payload) VALUES (:tenant,
#               nextval('w10_seq'), md5(:tenant::text)): a random tenant, a
#               fresh id (one sequence, on the coordinator, for every
#               table and client, so that no two rows share an id)
#   insert-100  one INSERT ... VALUES of W10_BATCH (100) such rows, tenants
#               (:t + i) % W10_TENANTS from a random :t
#   copy        COPY t FROM a file of W10_COPY new rows (server-side, one
#               session, timed by psql's \timing; ids of their own per run,
#               the same rows for every contender)
# sidetable's transactions are BEGIN, the INSERT into ev_s, an INSERT of
# the same ids and tenants into ev_s_ids, COMMIT, sent in one pgbench
# pipeline (one round trip from the client, as gunique's one statement);
# its ids are random in a range of their own (W10_BATCH apart, from 1e12:
# a collision, which would abort a client, is a chance of about 1e-5 in a
# run).  Its COPY is BEGIN, the COPY into ev_s, INSERT INTO ev_s_ids
# SELECT of the new rows, COMMIT.  Its 100-row INSERT's payload is the md5
# of a constant (pgbench allows 255 parameters a statement: the other
# contenders' two a row, and the id, would be 300).
# Within a run, each step runs every contender before the next step;
# the contenders' order turns with each run.  A CHECKPOINT on every node
# precedes each contender's timed step.
#
# Lookups by the key, for each shard count in W10_SHARDS (4 32 128):
# ev_g and ev_u made again with that shard count, loaded with W10_ROWS
# rows, the key built (timed); then each run, for each contender in turn:
#   lookup      SELECT tenant, v, payload FROM t WHERE id = :k (no tenant),
#               :k random over the loaded ids, -M prepared, W10_CLIENTS
#               clients, -T W10_SECS: tps and latency
#   shards      how many shards one lookup touches: in one session with
#               citus.log_remote_commands and citus.log_local_commands on,
#               W10_PROBES (20) executions of the same lookup as a prepared
#               statement (custom plans, then the generic one from the
#               sixth), each preceded by a marker NOTICE; every command
#               Citus sends to a node (or runs locally) between two
#               markers is read for the shard names it contains (the
#               relation names of pg_dist_shard, "<table>_<shardid>", of
#               any distributed table: the table's shards and the key
#               table's), and the distinct shards of each lookup are
#               counted.  Reported: the mean and the largest count over
#               the probes.  Whatever path a lookup takes through Citus
#               (a fan-out, a router query, a key-table lookup first), the
#               shards it reads are named in the commands Citus sends;
#               only a path that reads a shard without Citus's executor
#               would escape it.
#   tasks       the sum of the "Task Count" lines of EXPLAIN (ANALYZE) of
#               the prepared lookup (its generic plan): Citus's own count
#               of the shard queries of the plan, for reference
# The probe also checks that each lookup returned the row (its tenant).
#
# Sanity (sanity.tsv; the run stops otherwise): in the first run, in a
# rolled-back transaction, a loaded id inserted again under another
# tenant: gunique refuses it, local and none accept it (local enforces
# (id, tenant) only); the same (tenant, id) again: gunique and local
# refuse it.  After every run of inserts, ev_g holds every id once and
# its key table exactly one row per row (invariant K: count(*) =
# count(DISTINCT id) = the key table's count(*), and the same sum of
# (id, tenant) pairs on both sides).  Each probe of lookups returned
# every row it looked up.
#
# The nodes: three servers of their own (initdb in $WORK/w10/, sockets in
# $WORK beside the main cluster's, ports from free_port), run from the
# same private copy of postgres and of the libraries as the main cluster,
# with the suite's SETTINGS but shared_buffers = 256MB,
# max_connections = 200 and max_locks_per_transaction = 1024 on each, and
# what Citus needs (t/lib/GuniqueCitus.pm): shared_preload_libraries =
# 'citus,gunique', max_prepared_transactions, wal_level = logical,
# citus.enable_statistics_collection = off.  The coordinator holds no
# shards; the workers are added by their socket directory and port.  The
# main cluster stays idle meanwhile.
#
# Without Citus in the PostgreSQL of --pg-config (citus.so and
# citus.control), the workload says so and is skipped (meta w10_skipped).
#
# Sourced by bench/run; defines workload_10.  Runs only when named.
set -euo pipefail

W10_NODE_NAMES="coordinator worker1 worker2"
W10_DIRS=()

workload_10()
{
	wanted gunique && wanted local ||
		die "workload 10 compares gunique with local (a unique key with the distribution column): keep both in --contenders"
	local pkglib share
	pkglib=$("$PG_CONFIG" --pkglibdir)
	share=$("$PG_CONFIG" --sharedir)
	if [ ! -f "$pkglib/citus.so" ] || [ ! -f "$share/extension/citus.control" ]; then
		log "w10: SKIPPED: Citus is not installed in the PostgreSQL of $PG_CONFIG ($pkglib/citus.so or $share/extension/citus.control is missing); workload 10 needs Citus built for this PostgreSQL (tools/install-deps builds it into 17 and 18)"
		meta w10_skipped "Citus is not installed in the PostgreSQL of $PG_CONFIG"
		return 0
	fi
	local main_port=$PGPORT_BENCH shards
	w10_start_nodes
	# sql, sql_value, run_pgbench and checks speak to the coordinator now
	PGPORT_BENCH=$W10_COORDINATOR_PORT
	meta w10_citus "$(sql_value "SELECT extversion FROM pg_extension WHERE extname = 'citus'")"
	meta w10_nodes "a coordinator (no shards) and 2 workers on this machine; each: $(w10_settings | grep -v '^#' | paste -sd ';' | sed 's/;/; /g')"
	w10_inserts
	for shards in $W10_SHARDS; do
		w10_lookups "$shards"
	done
	PGPORT_BENCH=$main_port
	w10_stop_nodes
}

# The settings of each node: the suite's, with what three servers on one
# machine and Citus need instead.
w10_settings()
{
	local s
	echo "# added by bench/run, workload 10"
	for s in "${SETTINGS[@]}"; do
		case "$s" in
		shared_buffers* | max_connections* | max_locks_per_transaction*) ;;
		*) echo "$s" ;;
		esac
	done
	cat <<-EOF
		shared_buffers = 256MB
		max_connections = 200
		max_locks_per_transaction = 1024
		shared_preload_libraries = 'citus,gunique'
		max_prepared_transactions = 100
		wal_level = logical
		max_wal_senders = 10
		max_replication_slots = 10
		citus.enable_statistics_collection = off
	EOF
	if [ -n "${BENCH_EXTRA_SETTINGS:-}" ]; then printf "%s\n" "$BENCH_EXTRA_SETTINGS" | tr ";" "\n"; fi
}

# psql on one node (by port), stopping at the first error.
w10_psql_port()
{
	local port=$1
	shift
	as_user "$BINDIR/psql" -X -q -v ON_ERROR_STOP=1 -h "$WORK" -p "$port" -U postgres -d postgres "$@"
}

w10_start_nodes()
{
	local name dir port
	local -a ports=()
	mkdir -p "$WORK/w10"
	[ -z "$RUN_AS" ] || chown "$RUN_AS" "$WORK/w10"
	for name in $W10_NODE_NAMES; do
		dir=$WORK/w10/$name
		as_user "$BINDIR/initdb" -D "$dir" -A trust -U postgres -E UTF8 --locale=C >"$OUT/logs/w10-initdb-$name.log" 2>&1 ||
			die "w10: initdb of the $name failed, see $OUT/logs/w10-initdb-$name.log"
		# one at a time: free_port sees the sockets of the nodes started
		port=$(free_port)
		{
			echo "port = $port"
			echo "listen_addresses = ''"
			echo "unix_socket_directories = '$WORK'"
			w10_settings
		} >>"$dir/postgresql.conf"
		W10_DIRS+=("$dir")
		as_user "$BINDIR/pg_ctl" -D "$dir" -p "$POSTGRES" -l "$WORK/w10-$name.log" -w -t 120 start >/dev/null ||
			{ cp "$WORK/w10-$name.log" "$OUT/logs/" 2>/dev/null; die "w10: the $name did not start, see $OUT/logs/w10-$name.log"; }
		echo "CREATE EXTENSION citus; CREATE EXTENSION gunique;" | w10_psql_port "$port" >>"$OUT/logs/sql.log" 2>&1 ||
			die "w10: CREATE EXTENSION citus, gunique on the $name failed (see $OUT/logs/sql.log)"
		ports+=("$port")
	done
	W10_COORDINATOR_PORT=${ports[0]}
	w10_psql_port "$W10_COORDINATOR_PORT" >>"$OUT/logs/sql.log" 2>&1 <<-SQL || die "w10: adding the workers failed (see $OUT/logs/sql.log)"
		SELECT citus_set_coordinator_host('$WORK', ${ports[0]});
		SELECT citus_add_node('$WORK', ${ports[1]});
		SELECT citus_add_node('$WORK', ${ports[2]});
	SQL
	log "w10: Citus coordinator on port ${ports[0]}, workers on ${ports[1]} and ${ports[2]} (sockets in $WORK)"
}

# Stop the nodes (also from stop_cluster, when a run fails) and keep their
# logs.
w10_stop_nodes()
{
	local dir
	for dir in "${W10_DIRS[@]}"; do
		if [ -f "$dir/postmaster.pid" ]; then
			as_user "$BINDIR/pg_ctl" -D "$dir" -m fast -w stop >/dev/null 2>&1 ||
				as_user "$BINDIR/pg_ctl" -D "$dir" -m immediate -w stop >/dev/null 2>&1 || true
		fi
		[ -d "${OUT:-}/logs" ] && cp "$WORK/w10-$(basename "$dir").log" "$OUT/logs/" 2>/dev/null || true
	done
	W10_DIRS=()
}

# The table of a contender.
w10_table()
{
	case "$1" in
	gunique) echo ev_g ;;
	local) echo ev_u ;;
	none) echo ev_n ;;
	sidetable) echo ev_s ;;
	esac
}

# w10_rotated N CONTENDER...: the contenders rotated left by N places.
w10_rotated()
{
	local n=$1
	shift
	local -a list=("$@")
	local i out=""
	for ((i = 0; i < ${#list[@]}; i++)); do
		out="$out ${list[$(((i + n) % ${#list[@]}))]}"
	done
	echo $out
}

w10_checkpoint() { echo "SELECT count(*) FROM run_command_on_all_nodes('CHECKPOINT');" | sql >/dev/null; }

# w10_make SHARDS CONTENDER...: each contender's table made again with
# SHARDS shards and loaded with W10_ROWS rows; then its key built, timed
# (variant build-SHARDS, step seconds; RUN is 1: built once per shard
# count).
w10_make()
{
	local shards=$1 c t secs
	shift
	{
		echo "SET citus.shard_count = $shards;"
		for c in "$@"; do
			t=$(w10_table "$c")
			cat <<-SQL
				DROP TABLE IF EXISTS $t;
				CREATE TABLE $t (tenant int NOT NULL, id bigint NOT NULL, v int NOT NULL DEFAULT 0, payload text NOT NULL);
				SELECT create_distributed_table('$t', 'tenant');
				INSERT INTO $t SELECT (i * 7919) % $W10_TENANTS, i, 0, md5(i::text) FROM generate_series(1, $W10_ROWS) i;
			SQL
			[ "$c" = sidetable ] || continue
			cat <<-SQL
				DROP TABLE IF EXISTS ev_s_ids;
				CREATE TABLE ev_s_ids (id bigint PRIMARY KEY, tenant int NOT NULL);
				SELECT create_distributed_table('ev_s_ids', 'id', colocate_with => 'none');
				INSERT INTO ev_s_ids SELECT id, tenant FROM ev_s;
			SQL
		done
	} | sql >/dev/null || die "w10: making the tables failed (see $OUT/logs/sql.log)"
	for c in "$@"; do
		t=$(w10_table "$c")
		case "$c" in
		gunique) secs=$(echo "CREATE UNIQUE INDEX ev_g_key ON ev_g USING gunique (id);" | timed_sql) ||
			die "w10: building the key of $t failed (see $OUT/logs/sql.log)" ;;
		local) secs=$(echo "ALTER TABLE ev_u ADD CONSTRAINT ev_u_key UNIQUE (id, tenant);" | timed_sql) ||
			die "w10: building the key of $t failed (see $OUT/logs/sql.log)" ;;
		none | sidetable) continue ;;
		esac
		secs=$(perl -e 'printf "%.3f", $ARGV[0] / 1000' "$secs")
		record w10 "build-$shards" seconds "$c" 1 "$secs" s
		log "w10: $shards shards, $W10_ROWS rows: key of $t ($c) built in $secs s"
	done
	for c in "$@"; do
		echo "VACUUM (ANALYZE) $(w10_table "$c");"
		[ "$c" != sidetable ] || echo "VACUUM (ANALYZE) ev_s_ids;"
	done | sql >/dev/null
}

# The sanity probes of the key, in the first run.  Row 5 is loaded
# with tenant (5 * 7919) % W10_TENANTS.
w10_checks()
{
	local c=$1 t other same
	t=$(w10_table "$c")
	same=$((5 * 7919 % W10_TENANTS))
	other=$(((same + 1) % W10_TENANTS))
	{
		printf '%s\t%s\t%s\n' "$([ "$c" = gunique ] && echo refused || echo accepted)" \
			"a loaded id inserted again under another tenant (another shard's)" \
			"INSERT INTO $t (tenant, id, payload) VALUES ($other, 5, 'again')"
		printf '%s\t%s\t%s\n' "$([ "$c" = none ] && echo accepted || echo refused)" \
			"a loaded (tenant, id) inserted again" \
			"INSERT INTO $t (tenant, id, payload) VALUES ($same, 5, 'again')"
	} | PGOPTIONS="-c client_min_messages=error" checks w10 "$c"
}

# After every run of inserts: every id of ev_g once, and its key table
# one row per row (invariant K): the same count, and the same sum of
# (id, tenant) pairs (id * W10_TENANTS + tenant, one number per pair).
w10_verify()
{
	local run=$1 got n d k s1 s2
	got=$(sql_value "SELECT (SELECT count(*) || ' ' || count(DISTINCT id) || ' ' || sum(id::numeric * $W10_TENANTS + tenant) FROM ev_g) || ' ' || (SELECT count(*) || ' ' || sum(id::numeric * $W10_TENANTS + tenant) FROM gunique_keys.\"public.ev_g_key\")")
	read -r n d s1 k s2 <<<"$got"
	[ -n "${s2:-}" ] || die "w10: counting ev_g and its key table failed (see $OUT/logs/sql.log)"
	sanity_line w10 gunique "after run $run of inserts: the table's rows, its distinct ids and its key table's rows the same, the same (id, tenant) pairs" \
		exact "$([ "$n" = "$d" ] && [ "$n" = "$k" ] && [ "$s1" = "$s2" ] && echo exact || echo "rows $n, ids $d, keys $k, pair sums $s1 and $s2")"
}

# After every run of inserts: ev_s and ev_s_ids the same (id, tenant)
# pairs, as for ev_g.
w10_verify_sidetable()
{
	local run=$1 got n k s1 s2
	got=$(sql_value "SELECT (SELECT count(*) || ' ' || sum(id::numeric * $W10_TENANTS + tenant) FROM ev_s) || ' ' || (SELECT count(*) || ' ' || sum(id::numeric * $W10_TENANTS + tenant) FROM ev_s_ids)")
	read -r n s1 k s2 <<<"$got"
	[ -n "${s2:-}" ] || die "w10: counting ev_s and ev_s_ids failed (see $OUT/logs/sql.log)"
	sanity_line w10 sidetable "after run $run of inserts: ev_s's rows and ev_s_ids's the same, the same (id, tenant) pairs" \
		exact "$([ "$n" = "$k" ] && [ "$s1" = "$s2" ] && echo exact || echo "rows $n, ids $k, pair sums $s1 and $s2")"
}

# w10_values ROW: W10_BATCH rows for a VALUES list, "ROW, ROW, ...;", each
# @ in ROW the row's number (0 to W10_BATCH - 1).
w10_values()
{
	local i
	for ((i = 0; i < W10_BATCH; i++)); do
		[ "$i" = 0 ] || printf ', '
		printf '%s' "${1//@/$i}"
	done
	echo ";"
}

# The pgbench scripts of sidetable: the row and its id in one
# transaction, one pipeline.
w10_sidetable_scripts()
{
	cat >"$WORK/w10-insert-1-ev_s.sql" <<-SQL
		\\set tenant random(0, $((W10_TENANTS - 1)))
		\\set id 1000000000000 + random(0, 1000000000000) * $W10_BATCH
		\\startpipeline
		BEGIN;
		INSERT INTO ev_s (tenant, id, payload) VALUES (:tenant, :id, md5(:tenant::text));
		INSERT INTO ev_s_ids (id, tenant) VALUES (:id, :tenant);
		COMMIT;
		\\endpipeline
	SQL
	{
		echo "\\set t random(0, $((W10_TENANTS - 1)))"
		echo "\\set id 1000000000000 + random(0, 1000000000000) * $W10_BATCH"
		echo "\\startpipeline"
		echo "BEGIN;"
		printf 'INSERT INTO ev_s (tenant, id, payload) VALUES '
		w10_values "((:t + @) % $W10_TENANTS, :id::bigint + @, md5('w10'))"
		printf 'INSERT INTO ev_s_ids (id, tenant) VALUES '
		w10_values "(:id::bigint + @, (:t + @) % $W10_TENANTS)"
		echo "COMMIT;"
		echo "\\endpipeline"
	} >"$WORK/w10-insert-$W10_BATCH-ev_s.sql"
}

# The statement that copies the file F into contender C's table.
w10_copy_sql()
{
	local c=$1 f=$2 base=$3 t
	t=$(w10_table "$c")
	if [ "$c" = sidetable ]; then
		echo "BEGIN; COPY ev_s (tenant, id, v, payload) FROM '$f'; INSERT INTO ev_s_ids SELECT id, tenant FROM ev_s WHERE id > $base AND id <= $((base + W10_COPY)); COMMIT;"
	else
		echo "COPY $t (tenant, id, v, payload) FROM '$f';"
	fi
}

w10_inserts()
{
	local s=$W10_INSERT_SHARDS run c t res copyf secs base
	local contenders="local gunique none"
	wanted sidetable && contenders="$contenders sidetable"
	log "w10: inserts, $s shards, $W10_ROWS rows before, $W10_CLIENTS clients, ${W10_SECS}s per contender and step"
	w10_make "$s" $contenders
	echo "DROP SEQUENCE IF EXISTS w10_seq; CREATE SEQUENCE w10_seq START 1000000000;" | sql >/dev/null
	for c in $contenders; do
		t=$(w10_table "$c")
		[ "$c" != sidetable ] || { w10_sidetable_scripts; continue; }
		cat >"$WORK/w10-insert-1-$t.sql" <<-SQL
			\\set tenant random(0, $((W10_TENANTS - 1)))
			INSERT INTO $t (tenant, id, payload) VALUES (:tenant, nextval('w10_seq'), md5(:tenant::text));
		SQL
		{
			echo "\\set t random(0, $((W10_TENANTS - 1)))"
			printf 'INSERT INTO %s (tenant, id, payload) VALUES ' "$t"
			w10_values "((:t + @) % $W10_TENANTS, nextval('w10_seq'), md5(:t::text))"
		} >"$WORK/w10-insert-$W10_BATCH-$t.sql"
	done
	chmod a+r "$WORK"/w10-insert-*.sql
	for ((run = 1; run <= RUNS; run++)); do
		if [ "$run" = 1 ]; then
			for c in $contenders; do
				[ "$c" != sidetable ] || continue
				w10_checks "$c"
				w10_probe_inserts "$c" "$run"
			done
		fi
		for c in $(w10_rotated $((run - 1)) $contenders); do
			t=$(w10_table "$c")
			w10_checkpoint
			res=$(run_pgbench "w10-insert-1-$c-$run" -M prepared -c "$W10_CLIENTS" -j "$(jobs_for "$W10_CLIENTS")" \
				-T "$W10_SECS" -f "$WORK/w10-insert-1-$t.sql")
			record w10 insert-1 tps "$c" "$run" "${res% *}" tps
			record w10 insert-1 rows "$c" "$run" "${res% *}" rows/s
			record w10 insert-1 latency "$c" "$run" "${res#* }" ms
			log "w10 insert-1 $c run $run: ${res% *} tps, ${res#* } ms"
		done
		for c in $(w10_rotated $((run - 1)) $contenders); do
			t=$(w10_table "$c")
			w10_checkpoint
			res=$(run_pgbench "w10-insert-$W10_BATCH-$c-$run" -M prepared -c "$W10_CLIENTS" -j "$(jobs_for "$W10_CLIENTS")" \
				-T "$W10_SECS" -f "$WORK/w10-insert-$W10_BATCH-$t.sql")
			record w10 "insert-$W10_BATCH" tps "$c" "$run" "${res% *}" tps
			record w10 "insert-$W10_BATCH" rows "$c" "$run" "$(perl -e 'printf "%.1f", $ARGV[0] * $ARGV[1]' "${res% *}" "$W10_BATCH")" rows/s
			record w10 "insert-$W10_BATCH" latency "$c" "$run" "${res#* }" ms
			log "w10 insert-$W10_BATCH $c run $run: ${res% *} tps ($W10_BATCH rows each), ${res#* } ms"
		done
		# the same new rows for every contender; ids of their own per run
		copyf=$WORK/w10-copy-$run.tsv
		base=$((2000000000 + (run - 1) * W10_COPY))
		perl -e 'my ($base, $n, $tenants) = @ARGV; for my $j (1 .. $n) { my $id = $base + $j; printf "%d\t%d\t0\t%s\n", ($id * 7919) % $tenants, $id, "copy$id" }' \
			"$base" "$W10_COPY" "$W10_TENANTS" >"$copyf"
		chmod a+r "$copyf"
		for c in $(w10_rotated $((run - 1)) $contenders); do
			t=$(w10_table "$c")
			w10_checkpoint
			secs=$(w10_copy_sql "$c" "$copyf" "$base" | timed_sql) ||
				die "w10: COPY into $t failed (see $OUT/logs/sql.log)"
			secs=$(perl -e 'printf "%.3f", $ARGV[0] / 1000' "$secs")
			record w10 copy seconds "$c" "$run" "$secs" s
			record w10 copy rows "$c" "$run" "$(perl -e 'printf "%.1f", $ARGV[1] / $ARGV[0]' "$secs" "$W10_COPY")" rows/s
			log "w10 copy $c run $run: $W10_COPY rows in $secs s"
		done
		rm -f "$copyf"
		w10_verify "$run"
		! wanted sidetable || w10_verify_sidetable "$run"
	done
	echo "DROP TABLE IF EXISTS ev_g, ev_u, ev_n, ev_s, ev_s_ids; DROP SEQUENCE w10_seq;" | sql >/dev/null
}

# w10_probe_run LABEL SETUP TAIL STATEMENT...: run each STATEMENT once in
# one session (SETUP first, TAIL last, neither counted) with
# citus.log_remote_commands and citus.log_local_commands on, each after a
# marker NOTICE; its output to
# logs/w10-probe-LABEL.out, the NOTICEs to logs/w10-probe-LABEL.log.
# Then, for each statement, the distinct shards named in the commands
# Citus sent to a node or ran locally, and whether they included a
# PREPARE TRANSACTION (a two-phase commit): prints "MEAN MAX TWO_PHASE"
# (TWO_PHASE: how many of the statements committed in two phases).  A
# shard is named "<relation>_<shardid>" with a shardid and relation name
# of pg_dist_shard (the table's shards and the key table's: any
# distributed table), quoted or not, schema-qualified or not; names in
# string literals (such as the transaction names of PREPARE
# TRANSACTION) are not identifiers and are not read.
w10_probe_run()
{
	local label=$1 setup=$2 tail=$3 out err map stmt j=0
	shift 3
	out=$OUT/logs/w10-probe-$label.out
	err=$OUT/logs/w10-probe-$label.log
	# shard id -> the relation name its shards carry ("ev_g", "public.ev_g_key")
	map=$(sql_value "SELECT string_agg(s.shardid || '=' || c.relname, ' ') FROM pg_dist_shard s JOIN pg_class c ON c.oid = s.logicalrelid")
	{
		printf '%s\n' "$setup"
		echo "SET citus.log_remote_commands = on;"
		echo "SET citus.log_local_commands = on;"
		echo "SET client_min_messages = notice;"
		for stmt in "$@"; do
			j=$((j + 1))
			echo "DO \$\$BEGIN RAISE NOTICE 'w10-probe $j'; END\$\$;"
			printf '%s\n' "$stmt"
		done
		echo "DO \$\$BEGIN RAISE NOTICE 'w10-probe end'; END\$\$;"
		echo "RESET citus.log_remote_commands;"
		echo "RESET citus.log_local_commands;"
		printf '%s\n' "$tail"
	} | bench_psql -At >"$out" 2>"$err" || { tail -n 20 "$err" >&2; die "w10: the probe $label failed, see $err"; }
	perl -e '
		my ($map, $errf, $n) = @ARGV;
		my %rel = map { split /=/, $_, 2 } split / /, $map;
		my (%seen, @counts, $cur, $two, $twos);
		open my $e, "<", $errf or die "$errf: $!\n";
		while (<$e>) {
			if (/NOTICE:\s+w10-probe (\d+|end)\b/) {
				if (defined $cur) { push @counts, scalar keys %seen; $twos++ if $two }
				%seen = ();
				$two = 0;
				$cur = $1;
				next;
			}
			next unless defined $cur && /NOTICE:\s+(?:issuing|executing the command locally:) (.*)/;
			my $cmd = $1;
			$two = 1 if $cmd =~ /^PREPARE TRANSACTION\b/i;
			# identifiers: "quoted" or bare; string literals skipped whole
			while ($cmd =~ /\x27(?:[^\x27]|\x27\x27)*\x27|"((?:[^"]|"")*)"|([A-Za-z_][A-Za-z0-9_\$]*)/g) {
				my $id = defined $1 ? $1 : $2;
				next unless defined $id;
				$id =~ s/""/"/g;
				next unless $id =~ /^(.*)_(\d+)$/;
				$seen{$2} = 1 if defined $rel{$2} && $rel{$2} eq $1;
			}
		}
		die "expected $n probes, saw " . scalar(@counts) . "\n" unless @counts == $n;
		my ($sum, $max) = (0, 0);
		for (@counts) { $sum += $_; $max = $_ if $_ > $max }
		printf "%.2f %d %d\n", $sum / @counts, $max, $twos // 0;
	' "$map" "$err" "$#" || die "w10: reading the probe $label failed, see $err"
}

# w10_probe_lookups CONTENDER SHARDS RUN: the shards one lookup by the
# key touches: W10_PROBES executions of the lookup as a prepared
# statement (custom plans, then the generic one), then EXPLAIN (ANALYZE)
# of it; records shards (mean), shards-max and tasks (the sum of the
# plan's "Task Count" lines), and checks the rows the lookups returned.
w10_probe_lookups()
{
	local c=$1 shards=$2 run=$3 t j k got mean max two tasks right
	local -a stmts=() keys=()
	t=$(w10_table "$c")
	for ((j = 1; j <= W10_PROBES; j++)); do
		k=$((1 + (j * 104729) % W10_ROWS))
		keys+=("$k")
		stmts+=("EXECUTE w10_q($k);")
	done
	got=$(w10_probe_run "lookup-$shards-$c-$run" "PREPARE w10_q(bigint) AS SELECT tenant FROM $t WHERE id = \$1;" \
		"EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) EXECUTE w10_q($k);" "${stmts[@]}") || exit 1
	read -r mean max two <<<"$got"
	# the rows and the plan
	read -r tasks right <<<"$(perl -e '
		my ($outf, $tenants, @keys) = @ARGV;
		open my $o, "<", $outf or die "$outf: $!\n";
		my (@tenant, $tasks);
		while (<$o>) {
			chomp;
			if (/Task Count: (\d+)/) { $tasks += $1 }
			elsif (/^\s*(\d+)$/) { push @tenant, $1 }
		}
		my $right = grep { defined $tenant[$_] && $tenant[$_] == ($keys[$_] * 7919) % $tenants } 0 .. $#keys;
		printf "%d %d\n", $tasks // -1, $right;
	' "$OUT/logs/w10-probe-lookup-$shards-$c-$run.out" "$W10_TENANTS" "${keys[@]}")"
	record w10 "lookup-$shards" shards "$c" "$run" "$mean" count
	record w10 "lookup-$shards" shards-max "$c" "$run" "$max" count
	[ "$tasks" = -1 ] || record w10 "lookup-$shards" tasks "$c" "$run" "$tasks" count
	log "w10 lookup-$shards $c run $run: shards touched per lookup: mean $mean, at most $max; EXPLAIN's Task Count: $([ "$tasks" = -1 ] && echo none || echo "$tasks")"
	sanity_line w10 "$c" "$shards shards: lookups by id alone that returned their row (of $W10_PROBES)" "$W10_PROBES" "$right"
}

# w10_probe_inserts CONTENDER RUN: the shards one single-row INSERT of
# insert-1 touches, and how many of W10_PROBES such inserts (each its
# own transaction) committed in two phases (PREPARE TRANSACTION on the
# workers: a row and its key on two workers).
w10_probe_inserts()
{
	local c=$1 run=$2 t j got mean max two
	local -a stmts=()
	t=$(w10_table "$c")
	for ((j = 1; j <= W10_PROBES; j++)); do
		stmts+=("EXECUTE w10_i($(((j * 37) % W10_TENANTS)));")
	done
	got=$(w10_probe_run "insert-1-$c-$run" \
		"PREPARE w10_i(int) AS INSERT INTO $t (tenant, id, payload) VALUES (\$1, nextval('w10_seq'), md5(\$1::text));" "" \
		"${stmts[@]}") || exit 1
	read -r mean max two <<<"$got"
	record w10 insert-1 shards "$c" "$run" "$mean" count
	record w10 insert-1 shards-max "$c" "$run" "$max" count
	record w10 insert-1 two-phase "$c" "$run" "$two" count
	log "w10 insert-1 $c run $run: shards touched per insert: mean $mean, at most $max; committed in two phases: $two of $W10_PROBES"
}

w10_lookups()
{
	local s=$1 run c t res
	local contenders="local gunique"
	log "w10: lookups by id alone, $s shards, $W10_ROWS rows, $W10_CLIENTS clients, ${W10_SECS}s per contender"
	w10_make "$s" $contenders
	for c in $contenders; do
		t=$(w10_table "$c")
		cat >"$WORK/w10-lookup-$t.sql" <<-SQL
			\\set k random(1, $W10_ROWS)
			SELECT tenant, v, payload FROM $t WHERE id = :k;
		SQL
	done
	chmod a+r "$WORK"/w10-lookup-*.sql
	for ((run = 1; run <= RUNS; run++)); do
		for c in $(w10_rotated $((run - 1)) $contenders); do
			t=$(w10_table "$c")
			w10_checkpoint
			res=$(run_pgbench "w10-lookup-$s-$c-$run" -M prepared -c "$W10_CLIENTS" -j "$(jobs_for "$W10_CLIENTS")" \
				-T "$W10_SECS" -f "$WORK/w10-lookup-$t.sql")
			record w10 "lookup-$s" tps "$c" "$run" "${res% *}" tps
			record w10 "lookup-$s" latency "$c" "$run" "${res#* }" ms
			log "w10 lookup-$s $c run $run: ${res% *} tps, ${res#* } ms"
			w10_probe_lookups "$c" "$s" "$run"
		done
	done
	echo "DROP TABLE ev_g, ev_u;" | sql >/dev/null
}

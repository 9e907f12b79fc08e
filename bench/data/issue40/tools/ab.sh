#!/usr/bin/env bash
# A/B plan for issue 40: before (d5e412c) against after ($AFTER), builds
# alternating, one bench/run per build, workload and round (--runs 1 each).
#
#   ab.sh build BUILDNAME COMMIT        build gunique.so of COMMIT for 15 and 18
#   ab.sh one BUILDNAME W ROUND         one bench/run of workload W with that build
#   ab.sh rounds "ROUNDS" "WORKLOADS" [after-name]   the whole plan:
#        for each round, for each workload: before, then after
#
# Workloads 1, 2, 4, 6 run on PostgreSQL 15 (Debian, no assertions, private
# copy in pg15/), workload 7 on PostgreSQL 18 (pg18/, --enable-cassert).
# The SQL scripts are the installed ones (d5e412c's, version 1.7: identical
# in both commits); BENCH_GUNIQUE_SO selects the build's library.
set -euo pipefail
B=/work/scratch/b1
P15=$B/pg15/usr/lib/postgresql/15/bin/pg_config
P18=$B/pg18/bin/pg_config
BENCH=$B/wt/bench/run        # bench/ is the same in both commits
RES=$B/results
CONTENDERS=${CONTENDERS:-local,gunique,single}
mkdir -p "$RES"

pgc() { if [ "$1" = 7 ]; then echo "$P18"; else echo "$P15"; fi; }
ver() { if [ "$1" = 7 ]; then echo 18; else echo 15; fi; }

build()
{
	local name=$1 commit=$2 v dir pc
	for v in 15 18; do
		dir=$B/build/$name-$v
		pc=$P15; [ $v = 18 ] && pc=$P18
		rm -rf "$dir"; mkdir -p "$dir"
		git -C /work/main archive "$commit" | tar xf - -C "$dir"
		grep -q "default_version = '1.7'" "$dir/gunique.control" || { echo "$name: not 1.7" >&2; exit 1; }
		(cd "$dir" && make -s -j2 PG_CONFIG="$pc" >"$B/build/$name-$v.log" 2>&1) || { tail "$B/build/$name-$v.log"; exit 1; }
		echo "$commit" >"$dir/COMMIT"
		md5sum "$dir/gunique.so"
	done
}

one()
{
	local name=$1 w=$2 round=$3 v out so commit
	v=$(ver "$w")
	so=$B/build/$name-$v/gunique.so
	commit=$(cat "$B/build/$name-$v/COMMIT")
	out=$RES/pg$v-w$w-r$round-$name-${commit:0:7}
	[ -e "$out/raw.tsv" ] && { echo "exists: $out"; return 0; }
	rm -rf "$out"
	local t0=$SECONDS la0
	la0=$(cut -d' ' -f1-3 /proc/loadavg)
	echo "$(date -u +%T) start w$w round $round $name ($commit) load $la0"
	# from round 2 on, workload 2's server logs each statement's CPU time
	# (log_statement_stats), which load on the machine disturbs less than
	# the wall-clock time: a second measure of the same statements
	local extra=
	if [ "$w" = 2 ] && [ -e "$B/W2STATS" ]; then extra="log_statement = 'all'; log_statement_stats = on"; fi
	BENCH_EXTRA_SETTINGS=$extra BENCH_GUNIQUE_SO=$so "$BENCH" --scale small --runs 1 --workload "$w" \
		--contenders "$CONTENDERS" --pg-config "$(pgc "$w")" --out "$out" \
		>"$out.log" 2>&1 || { echo "FAILED: $out (see $out.log)"; tail -5 "$out.log"; return 1; }
	printf 'build\t%s %s\n' "$name" "$commit" >>"$out/meta.tsv"
	echo "$(date -u +%T) end   w$w round $round $name: $((SECONDS - t0)) s, load $la0 -> $(cut -d' ' -f1-3 /proc/loadavg)"
}

case "${1:-}" in
build) build "$2" "$3" ;;
one) one "$2" "$3" "$4" ;;
rounds)
	after=${4:-after}
	for r in $2; do
		for w in $3; do
			one before "$w" "$r"
			one "$after" "$w" "$r"
		done
	done
	;;
*) sed -n '2,12p' "$0"; exit 1 ;;
esac

#!/usr/bin/env bash
# Issue 40 done-means A/B on a quiet machine: before (d5e412c) and after
# (03a8858, whose C is main's but for comments), one bench/run per build,
# workload and round, builds alternating (odd rounds before first, even
# rounds after first).  Contenders local and gunique.
#   q1.sh "ROUNDS" "WORKLOADS" DEADLINE(UTC HH:MM)
set -uo pipefail
Q=/work/scratch/q1; B=/work/scratch/b1
P15=$B/pg15/usr/lib/postgresql/15/bin/pg_config
P18=$B/pg18/bin/pg_config
RES=$Q/results
declare -A EST=([1]=3 [2]=12 [4]=4 [6]=24 [7]=7)
export BENCH_W2_KEYS=${BENCH_W2_KEYS:-int}
secs() { date -u -d "$1" +%s; }
one() { # one NAME W ROUND
	local name=$1 w=$2 r=$3 v=15 pc=$P15
	[ "$w" = 7 ] && { v=18; pc=$P18; }
	local so=$B/build/$name-$v/gunique.so commit
	commit=$(cat $B/build/$name-$v/COMMIT)
	local out=$RES/pg$v-w$w-r$r-$name-${commit:0:7}
	[ -e "$out/raw.tsv" ] && return 0
	rm -rf "$out"
	local t0=$SECONDS la0; la0=$(cut -d' ' -f1-3 /proc/loadavg)
	echo "$(date -u +%T) start w$w round $r $name load $la0"
	BENCH_GUNIQUE_SO=$so $Q/bench/run --scale small --runs 1 --workload $w \
		--contenders local,gunique --pg-config $pc --out $out > $out.log 2>&1 ||
		{ echo "FAILED $out"; tail -3 $out.log; return 1; }
	printf 'build\t%s %s\n' $name $commit >> $out/meta.tsv
	echo "$(date -u +%T) end   w$w round $r $name: $((SECONDS - t0)) s, load $la0 -> $(cut -d' ' -f1-3 /proc/loadavg)"
}
for r in $1; do
	for w in $2; do
		if [ $(( $(date -u +%s) + ${EST[$w]} * 60 )) -gt $(secs "$3") ]; then
			echo "$(date -u +%T) skip w$w round $r: would end after $3"; continue
		fi
		if ((r % 2)); then one before $w $r; one after $w $r; else one after $w $r; one before $w $r; fi
	done
done

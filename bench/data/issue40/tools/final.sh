#!/usr/bin/env bash
# Collect b1's A/B results into the worktree: bench/data/issue40/.
set -euo pipefail
B=/work/scratch/b1
D=$B/wt/bench/data/issue40
cd "$B"
cat timing.log plan.log plan2.log plan3.log plan4.log >runs.log 2>/dev/null || true
for d in results/pg15-w2-r*-*/; do
	d=${d%/}
	case "$d" in *-rt-*) continue ;; esac
	grep -q "log_statement_stats" "$d/meta.tsv" && perl w2cpu.pl "$d" "$d.log"
done
dirs=$(ls -d results/pg1?-w?-r[0-9]*-*/ | sed 's:/$::')
perl ab-summary.pl --log runs.log --load loadavg.log before after $dirs >summary.md
rm -rf "$D"
mkdir -p "$D/tools" "$D/logs"
for d in $dirs results/pg1?-w?-rt-*/; do
	d=${d%/}
	n=$(basename "$d")
	mkdir -p "$D/$n"
	for f in meta.tsv raw.tsv sanity.tsv cpu.tsv; do
		[ -f "$d/$f" ] && cp "$d/$f" "$D/$n/"
	done
done
cp ab.sh plan.sh ab-summary.pl w2cpu.pl final.sh "$D/tools/"
cp runs.log loadavg.log "$D/logs/"
cp summary.md "$D/summary.md"
du -sh "$D"

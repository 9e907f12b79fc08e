#!/usr/bin/env bash
# merge.sh OUT DIR1 DIR2 ...: one report over the runs of several bench/run
# invocations of workload 9 (the same server and scale; a DIR written
# DIR:noattach gives all but its ATTACH, for a build whose ATTACH has
# changed since, but nothing else that workload 9 measures): raw.tsv
# and sanity.tsv concatenated with the runs numbered on (DIR2's run 1
# becomes run 3 after DIR1's two), meta.tsv DIR1's with the run count,
# dates, load averages, builds and wall-clock times of all; w9/ timelines renamed
# likewise; then bench/report.pl writes OUT/RESULTS.md.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
out=$1
shift
mkdir -p "$out/w9"
: >"$out/raw.tsv"
: >"$out/sanity.tsv"
base=0 dates= loads= elapsed=0 commits= sos=
for arg in "$@"; do
	d=${arg%:noattach}
	skip='^$'
	[ "$d" = "$arg" ] || skip='^attach$'
	n=$(awk -F'\t' '$1 == "runs" { print $2 }' "$d/meta.tsv")
	awk -F'\t' -v OFS='\t' -v b="$base" -v skip="$skip" '$2 !~ skip { $5 += b; print }' "$d/raw.tsv" >>"$out/raw.tsv"
	if [ "$skip" = '^$' ]; then cat "$d/sanity.tsv"; else grep -v $'\tattach: ' "$d/sanity.tsv" || true; fi >>"$out/sanity.tsv"
	for f in "$d"/w9/timeline-*.tsv; do
		[ "$skip" = '^$' ] || case "$f" in */timeline-attach-*) continue ;; esac
		r=${f##*-}
		r=${r%.tsv}
		cp "$f" "$out/w9/$(basename "${f%-*}")-$((r + base)).tsv"
	done
	dates="$dates${dates:+; }$(awk -F'\t' '$1 == "date" { print $2 }' "$d/meta.tsv") ($n run$([ "$n" = 1 ] || echo s))"
	loads="$loads${loads:+; }$(awk -F'\t' '$1 == "loadavg_start" { s = $2 } $1 == "loadavg_end" { e = $2 } END { print s " to " e }' "$d/meta.tsv")"
	runs="run$([ "$n" = 1 ] && echo " $((base + 1))" || echo "s $((base + 1))-$((base + n))")"
	commits="$commits${commits:+, }$(awk -F'\t' '$1 == "gunique_commit" { print $2 }' "$d/meta.tsv") ($runs)"
	sos="$sos${sos:+, }$(awk -F'\t' '$1 == "gunique_so" { print $2 }' "$d/meta.tsv") ($runs)"
	elapsed=$((elapsed + $(awk -F'\t' '$1 == "elapsed_w9" { print $2 }' "$d/meta.tsv")))
	base=$((base + n))
done
awk -F'\t' -v OFS='\t' -v runs="$base" -v dates="$dates" -v loads="$loads" -v el="$elapsed" -v commits="$commits" -v sos="$sos" '
	$1 == "gunique_commit" { $2 = commits }
	$1 == "gunique_so" { $2 = sos }
	$1 == "runs" { $2 = runs }
	$1 == "date" { $2 = dates }
	$1 == "loadavg_start" { $2 = loads }
	$1 == "loadavg_end" { $2 = "(per invocation above)" }
	$1 == "elapsed_w9" { $2 = el }
	{ print }' "${1%:noattach}/meta.tsv" >"$out/meta.tsv"
sort -u -o "$out/sanity.tsv" "$out/sanity.tsv"
perl "$here/../../report.pl" "$out"

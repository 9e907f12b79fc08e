#!/bin/bash
# wait for BENCH_GO, then seed runs of workload 9: $1 = 15 or 18, $2 = runs
V=$1; R=${2:-3}
cd /work/scratch/c3/wt
while [ ! -e /work/scratch/BENCH_GO ]; do sleep 30; done
if [ "$V" = 15 ]; then PGC=/work/scratch/c3/pg15/usr/lib/postgresql/15/bin/pg_config; else PGC=/work/scratch/c3/pg$V/bin/pg_config; fi
OUT=/work/scratch/c3/res/pg$V-w9-seed-$(git rev-parse --short HEAD)-$(date +%H%M)
echo "$(date -u +%T) start pg$V runs $R load $(cut -d' ' -f1-3 /proc/loadavg) out $OUT" >> /work/scratch/c3/res/runs.log
bench/run --scale seed --workload 9 --runs $R --pg-config $PGC --out $OUT > $OUT.log 2>&1
rc=$?
echo "$(date -u +%T) end pg$V rc $rc load $(cut -d' ' -f1-3 /proc/loadavg) out $OUT" >> /work/scratch/c3/res/runs.log
exit $rc

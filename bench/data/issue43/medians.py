# medians.py RAW.TSV: workload 6 tps, gunique against single, per mode:
# the medians of the runs, their ratio, and in brackets the lowest and
# highest ratio of one run's values (python3 medians.py pg15-after/raw.tsv).
import sys,statistics,collections
d=collections.defaultdict(lambda: collections.defaultdict(dict))
for l in open(sys.argv[1]):
    f=l.rstrip('\n').split('\t')
    if len(f)<7 or f[0]!='w6' or f[2]!='tps': continue
    d[f[1]][f[3]][f[4]]=float(f[5])
for v in sorted(d):
    g=d[v].get('gunique',{}); s=d[v].get('single',{})
    runs=sorted(set(g)&set(s))
    r=[g[x]/s[x] for x in runs]
    mg=statistics.median(g.values()); ms=statistics.median(s.values())
    print(f"{v}: gunique {mg:,.0f} single {ms:,.0f} x{mg/ms:.2f} [{min(r):.2f}-{max(r):.2f}] runs {len(runs)}")

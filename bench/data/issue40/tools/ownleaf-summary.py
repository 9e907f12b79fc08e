#!/usr/bin/env python3
# Across pair.sh runs: per point, per run, the medians of gunique/local for
# the main build (d5e412c) and the removal, and the median of the paired
# differences (removal - main) of that ratio, iterations 4 on.
#   summary.py DIR:MAINSLOT ...   (MAINSLOT: A or B, where d5e412c ran)
import sys,statistics as st,collections
WARM=3
runs=[]
for arg in sys.argv[1:]:
    d,slot=arg.split(':')
    m=collections.defaultdict(dict)
    for line in open(d+'/raw.tsv'):
        b,p,v,t,i,ms=line.split()
        m[(int(p),v)][(b,t,int(i))]=float(ms)
    runs.append((d.rstrip('/').split('/')[-1],slot,m))
order=['random-reinsert','correlated-reinsert','random-update','correlated-update']
pts=sorted(set(k for _,_,m in runs for k in m), key=lambda k:(k[0],order.index(k[1])))
print('| keys | partitions | d5e412c: median gunique/local, each run | removal: each run | removal − d5e412c, paired, each run | all iterations pooled: d5e412c, removal, paired difference (quartiles) |')
print('|---|---|---|---|---|---|')
for p,v in pts:
    M=[];R=[];D=[];allm=[];allr=[];alld=[]
    for name,slot,m in runs:
        other='B' if slot=='A' else 'A'
        pm=m[(p,v)]
        its=sorted(set(k[2] for k in pm if k[2]>WARM))
        rm=[pm[(slot,'wg',i)]/pm[(slot,'wl',i)] for i in its]
        rr=[pm[(other,'wg',i)]/pm[(other,'wl',i)] for i in its]
        dd=[rr[k]-rm[k] for k in range(len(its))]
        M.append(st.median(rm));R.append(st.median(rr));D.append(st.median(dd))
        allm+=rm;allr+=rr;alld+=dd
    def qs(x):
        x=sorted(x);n=len(x);return '%+.2f (%+.2f to %+.2f)'%(st.median(x),x[n//4],x[3*n//4])
    print('| %s | %d | %s | %s | %s | ×%.2f, ×%.2f, %s |'%(v,p,' '.join('%.2f'%x for x in M),' '.join('%.2f'%x for x in R),' '.join('%+.2f'%x for x in D),st.median(allm),st.median(allr),qs(alld)))

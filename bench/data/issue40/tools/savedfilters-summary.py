import sys,collections,statistics as st
d=collections.defaultdict(list)
for f in sys.argv[1:]:
    for l in open(f):
        p=l.rstrip('\n').split('\t')
        if len(p)<7 or p[0]!='w5': continue
        _,var,step,c,run,val,unit=p[:7]
        if c!='gunique' and c!='local': continue
        try: d[(var,c,step)].append(float(val))
        except: pass
vars_=sorted(set(k[0] for k in d))
for v in vars_:
    print('##',v)
    for m in ['ready','rate-1s','rate-5s','rate-10s','rate','p50','p99']:
        for c in ['local','gunique']:
            r=d.get((v,c,'restart-'+m),[]); n=d.get((v,c,'nosave-'+m),[]); cr=d.get((v,c,'crash-'+m),[])
            f=lambda x: ('%.3g [%.3g–%.3g] n=%d'%(st.median(x),min(x),max(x),len(x))) if x else '-'
            print('%-9s %-8s restart %-30s nosave %-30s crash %s'%(m,c,f(r),f(n),f(cr)))

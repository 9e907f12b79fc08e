# ratios.py DIR...: workload 7 tps per variant and contender (medians), and
# the ratios gunique / single, gunique / local and local / single of each
# run, as medians over every run of the directories named, with the lowest
# and highest run in brackets (python3 ratios.py pg18-w7-r1 pg18-w7-r2).
import sys, statistics, collections

vals = collections.defaultdict(dict)
for d in sys.argv[1:]:
    for line in open(d + '/raw.tsv'):
        f = line.rstrip('\n').split('\t')
        if f[0] == 'w7' and f[2] == 'tps':
            vals[(d, f[1], f[4])][f[3]] = float(f[5])
out = collections.defaultdict(lambda: collections.defaultdict(list))
for (d, variant, run), tps in vals.items():
    for a, b in (('gunique', 'single'), ('gunique', 'local'), ('local', 'single')):
        if a in tps and b in tps:
            out[variant][a + ' / ' + b].append(tps[a] / tps[b])
    for c, v in tps.items():
        out[variant][c].append(v)
for variant in sorted(out, key=lambda x: (len(x), x)):
    cells = []
    for k, x in sorted(out[variant].items()):
        if '/' in k:
            cells.append(f"{k} x{statistics.median(x):.2f} [{min(x):.2f}-{max(x):.2f}]")
        else:
            cells.append(f"{k} {statistics.median(x):.0f}")
    print(variant + ': ' + ', '.join(cells))

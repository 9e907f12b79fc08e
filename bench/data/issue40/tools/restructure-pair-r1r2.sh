#!/bin/bash
# after chain2: the restructure (d5e412c against 03a8858, main's C) paired, two runs, clusters swapped
cd /work/scratch/q1
until grep -q '^CHAIN2DONE' runs2.log; do sleep 15; done
A=/work/scratch/b1/build/before-15/gunique.so; B=/work/scratch/b1/build/after-15/gunique.so
echo "$(date -u +%T) restructure pair r1 start load $(cut -d' ' -f1-3 /proc/loadavg)"
/work/scratch/w1/pair/pair.sh /work/scratch/q1/restructure-pair-r1 $A $B 31 > restructure-pair-r1.log 2>&1
echo "$(date -u +%T) restructure pair r2 start load $(cut -d' ' -f1-3 /proc/loadavg)"
/work/scratch/w1/pair/pair.sh /work/scratch/q1/restructure-pair-r2 $B $A 31 > restructure-pair-r2.log 2>&1
echo "$(date -u +%T) CHAIN3DONE load $(cut -d' ' -f1-3 /proc/loadavg)"

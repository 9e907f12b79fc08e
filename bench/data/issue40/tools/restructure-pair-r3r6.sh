#!/bin/bash
cd /work/scratch/q1
A=/work/scratch/b1/build/before-15/gunique.so; B=/work/scratch/b1/build/after-15/gunique.so
for i in 3 4 5 6; do
	if ((i % 2)); then X=$A; Y=$B; else X=$B; Y=$A; fi
	echo "$(date -u +%T) restructure pair r$i start load $(cut -d' ' -f1-3 /proc/loadavg)"
	/work/scratch/w1/pair/pair.sh /work/scratch/q1/restructure-pair-r$i $X $Y 31 "6 128" > restructure-pair-r$i.log 2>&1
done
echo "$(date -u +%T) CHAIN4DONE load $(cut -d' ' -f1-3 /proc/loadavg)"

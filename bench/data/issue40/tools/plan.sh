#!/usr/bin/env bash
# Phase 2 of b1's A/B plan: wait for /work/scratch/b1/AFTER, build it, then
# rounds of (before, after) per workload until the rounds are done or the
# deadline would be passed.
#
#   plan.sh            (env: ROUNDS, ORDER, DEADLINE, GIVEUP, per-workload
#                       BENCH_W*_PARTITIONS passed through W2P/W6P)
set -uo pipefail
B=/work/scratch/b1
# a plan restarted while the previous one's run goes on waits for it
if [ -n "${WAITPID:-}" ]; then while kill -0 "$WAITPID" 2>/dev/null; do sleep 5; done; fi
cd "$B"
ROUNDS=${ROUNDS:-"1 2 3"}
ORDER=${ORDER:-"1 4 7 2 6"}
DEADLINE=${DEADLINE:-07:25}     # no run pair may end after this (UTC)
GIVEUP=${GIVEUP:-07:05}         # stop waiting for AFTER
# estimated minutes of one pair (before + after) per workload, from the
# timing runs (load 5 to 17 on 2 cores)
declare -A EST=([1]=3 [2]=${EST2:-14} [4]=5 [6]=${EST6:-22} [7]=${EST7:-6})
export BENCH_W2_PARTITIONS=${W2P:-}
export BENCH_W6_PARTITIONS=${W6P:-}
[ -n "$BENCH_W2_PARTITIONS" ] || unset BENCH_W2_PARTITIONS
[ -n "$BENCH_W6_PARTITIONS" ] || unset BENCH_W6_PARTITIONS

secs() { date -u -d "$1" +%s; }
now() { date -u +%s; }

# While AFTER is not named, run round 1's before runs ahead (each
# workload's runs still alternate: before, after, before, after).
first=${ROUNDS%% *}
ahead=""
for w in $ORDER; do
	[ -s "$B/AFTER" ] && break
	./ab.sh one before "$w" "$first"
	ahead="$ahead $w"
done
while [ ! -s "$B/AFTER" ]; do
	if [ "$(now)" -ge "$(secs "$GIVEUP")" ]; then echo "$(date -u +%T) no AFTER by $GIVEUP"; exit 1; fi
	sleep 60
done

current=
switch_after()
{
	local h
	h=$(git -C /work/main rev-parse --verify "$(head -n 1 "$B/AFTER" | tr -d '[:space:]')^{commit}") || { echo "bad AFTER"; return 1; }
	[ "$h" = "$current" ] && return 0
	if [ "$(cat build/after-15/COMMIT 2>/dev/null)" = "$h" ] && [ "$(cat build/after-18/COMMIT 2>/dev/null)" = "$h" ]; then
		current=$h
		return 0
	fi
	echo "$(date -u +%T) building after = $h"
	./ab.sh build after "$h" || return 1
	current=$h
}
switch_after || exit 1
echo "$(date -u +%T) SQL scripts: $(cd build/after-15 && cat gunique--*.sql | md5sum | cut -c1-12) after, $(cd build/before-15 && cat gunique--*.sql | md5sum | cut -c1-12) before"

for w in $ahead; do
	./ab.sh one after "$w" "$first"
done
for r in $ROUNDS; do
	# a newer hash is used from the next round, if the file asks to restart
	if [ "$(sed -n 2p "$B/AFTER" | tr -d '[:space:]')" = restart ]; then
		switch_after || exit 1
	fi
	for w in $ORDER; do
		if [ $(( $(now) + EST[$w] * 60 )) -gt "$(secs "$DEADLINE")" ]; then
			echo "$(date -u +%T) skip w$w round $r: would end after $DEADLINE"
			continue
		fi
		case " $ahead " in *" $w "*) [ "$r" = "$first" ] && continue ;; esac
		./ab.sh one before "$w" "$r"
		./ab.sh one after "$w" "$r"
	done
done
echo "$(date -u +%T) plan done"

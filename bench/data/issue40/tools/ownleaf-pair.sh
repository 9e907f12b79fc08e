#!/bin/bash
# Paired measurement of two builds of gunique.so, by hand: two clusters of
# PostgreSQL 15 (one per build), the same tables in each (workload 2's
# shape: 1,000,000 rows, range partitions on a, 5,000 timed rows every
# 200th a; "local": unique (b, a); "gunique": unique (b)), one session per
# cluster kept open, and the timed statements run in lockstep: iteration i
# runs in one cluster then the other (which goes first alternates), local
# and gunique in turn.  Reinsert: BEGIN; INSERT the 5,000 rows (keys that
# come back: inserted and rolled back once before); ROLLBACK.  Update:
# with a btree on c, BEGIN; non-HOT UPDATE of c of 5,000 rows with
# consecutive a; ROLLBACK.  psql's \timing of the timed statement only.
#   pair.sh OUTDIR SO_A SO_B [ITER] [PARTS]
set -u
OUT=$1; SOA=$2; SOB=$3; ITER=${4:-25}; PARTS=${5:-"6 128 512"}
W=/work/scratch/w1/pair/work
SRC=/work/scratch/w1/pg15
mkdir -p "$OUT"; rm -rf $W; mkdir -p $W; chown gunique $W "$OUT"
TOTAL=${PAIR_TOTAL:-1000000}; EVERY=200
PERM="(((a)::bigint + 1) * 1327217885 % 2147483647)::int"

setup() { # setup NAME SO PORT
	local root=$W/pg-$1
	mkdir -p $root; cp -a $SRC/usr $root/
	local pgc=$root/usr/lib/postgresql/15/bin/pg_config
	cp "$2" $($pgc --pkglibdir)/gunique.so
	chmod -R a+rX $root
	su gunique -c "$root/usr/lib/postgresql/15/bin/initdb -D $W/data-$1 -A trust -U gunique -E UTF8 --locale=C --no-sync" >/dev/null
	cat >> $W/data-$1/postgresql.conf <<EOC
shared_preload_libraries = 'gunique'
port = $3
listen_addresses = ''
unix_socket_directories = '$W'
shared_buffers = 1GB
max_wal_size = 8GB
checkpoint_timeout = 30min
synchronous_commit = off
autovacuum = off
maintenance_work_mem = 512MB
jit = off
max_connections = 50
max_locks_per_transaction = 16384
EOC
	su gunique -c "$root/usr/lib/postgresql/15/bin/pg_ctl -D $W/data-$1 -l $W/server-$1.log -w start" >/dev/null
	echo "$root/usr/lib/postgresql/15/bin/psql -X -h $W -p $3 -U gunique -d postgres"
}
PA=$(setup A "$SOA" 7160); PB=$(setup B "$SOB" 7161)
stop() { for n in A B; do su gunique -c "$W/pg-$n/usr/lib/postgresql/15/bin/pg_ctl -D $W/data-$n -m fast stop" >/dev/null 2>&1; done; }
trap stop EXIT
sqlboth() { su gunique -c "$PA -q -v ON_ERROR_STOP=1" <<<"$1" >/dev/null & su gunique -c "$PB -q -v ON_ERROR_STOP=1" <<<"$1" >/dev/null; wait; }
sqlboth "CREATE EXTENSION gunique; CREATE EXTENSION IF NOT EXISTS pg_prewarm;"
{
	echo "build	so"; echo "A	$(md5sum < $SOA | cut -c1-12)	$SOA"; echo "B	$(md5sum < $SOB | cut -c1-12)	$SOB"
	echo "iterations	$ITER"; echo "postgres	$(su gunique -c "$PA -At -c 'SELECT version()'")"
} > $OUT/meta.tsv

# sessions: fd 7 -> A, fd 8 -> B
start_sessions() { # start_sessions TAG
	rm -f $W/out-A $W/out-B
	exec 7> >(su gunique -c "$PA -q" > $W/out-A 2>&1)
	exec 8> >(su gunique -c "$PB -q" > $W/out-B 2>&1)
	for fd in 7 8; do echo '\timing on' >&$fd; done
}
SEQ=0
sync_on() { # sync_on A|B: wait until the session has run everything sent
	SEQ=$((SEQ + 1)); local fd=7; [ "$1" = B ] && fd=8
	echo "\\echo SYNC-$SEQ" >&$fd
	until grep -q "^SYNC-$SEQ\$" $W/out-$1; do sleep 0.01; done
}
end_sessions() { echo '\q' >&7; echo '\q' >&8; exec 7>&- 8>&-; sleep 1; }
send() { local fd=7; [ "$1" = B ] && fd=8; echo "$2" >&$fd; }

for P in $PARTS; do
	for order in random correlated; do
		if [ $order = random ]; then bexpr=$PERM; else bexpr=a; fi
		sqlboth "
DROP TABLE IF EXISTS wl, wg, come;
CREATE TABLE come AS SELECT a, $bexpr AS b, 'test'::text AS c FROM generate_series(0, $TOTAL - 1) a WHERE a % $EVERY = 0;
CREATE TABLE wl (a int, b int, c text) PARTITION BY RANGE (a);
CREATE TABLE wg (a int, b int, c text) PARTITION BY RANGE (a);
DO \$\$ BEGIN FOR i IN 0 .. $P - 1 LOOP
 EXECUTE format('CREATE TABLE %I PARTITION OF wl FOR VALUES FROM (%s) TO (%s)', 'wl_p' || i, i::bigint * $TOTAL / $P, (i + 1)::bigint * $TOTAL / $P);
 EXECUTE format('CREATE TABLE %I PARTITION OF wg FOR VALUES FROM (%s) TO (%s)', 'wg_p' || i, i::bigint * $TOTAL / $P, (i + 1)::bigint * $TOTAL / $P);
END LOOP; END \$\$;
INSERT INTO wl SELECT a, $bexpr, 'test' FROM generate_series(0, $TOTAL - 1) a WHERE a % $EVERY <> 0 ORDER BY a;
INSERT INTO wg SELECT * FROM wl ORDER BY a;
CREATE UNIQUE INDEX wl_key ON wl (b, a);
CREATE UNIQUE INDEX wg_key ON wg USING gunique (b);
VACUUM (FREEZE, ANALYZE) wl, wg, come;
CHECKPOINT;"
		for case_ in reinsert update; do
			if [ $case_ = update ]; then
				sqlboth "INSERT INTO wl SELECT * FROM come; INSERT INTO wg SELECT * FROM come; CREATE INDEX wl_c ON wl (c); CREATE INDEX wg_c ON wg (c); VACUUM (ANALYZE) wl, wg; CHECKPOINT;"
			fi
			start_sessions
			for s in A B; do
				send $s "SELECT count(*) FROM (SELECT pg_prewarm(c.oid) FROM pg_class c WHERE c.relkind = 'i' AND (c.relname LIKE 'wl%' OR c.relname LIKE 'wg%')) s;"
				for t in wl wg; do
					if [ $case_ = reinsert ]; then
						send $s "BEGIN; INSERT INTO $t SELECT * FROM come; ROLLBACK;"
					else
						send $s "BEGIN; UPDATE $t SET c = 'updated' WHERE a >= $((TOTAL / 2)) AND a < $((TOTAL / 2 + TOTAL / EVERY)); ROLLBACK;"
					fi
				done
				sync_on $s
			done
			for ((i = 1; i <= ITER; i++)); do
				if ((i % 2)); then first=A; second=B; else first=B; second=A; fi
				for s in $first $second; do
					if (((i / 2) % 2)); then tabs="wl wg"; else tabs="wg wl"; fi
					for t in $tabs; do
						if [ $case_ = reinsert ]; then stmt="INSERT INTO $t SELECT * FROM come;"
						else stmt="UPDATE $t SET c = 'updated' WHERE a >= $((TOTAL / 2)) AND a < $((TOTAL / 2 + TOTAL / EVERY));"; fi
						send $s "BEGIN;"
						send $s "\\echo T $P $order-$case_ $t $i"
						send $s "$stmt"
						send $s "\\echo E"
						send $s "ROLLBACK;"
					done
					sync_on $s
				done
			done
			end_sessions
			for s in A B; do
				awk -v b=$s '/^T /{tag=$2"\t"$3"\t"$4"\t"$5; next} /^Time: / && tag!="" {print b"\t"tag"\t"$2; tag=""} /^E$/{tag=""}' $W/out-$s >> $OUT/raw.tsv
			done
			echo "$(date -u +%H:%M:%S) $P $order-$case_ load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a $OUT/log.txt
		done
	done
done

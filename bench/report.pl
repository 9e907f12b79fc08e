#!/usr/bin/env perl
# Write RESULTS.md from the raw results of one bench/run.
#
#   perl bench/report.pl OUTDIR [REPORT]
#
# Reads OUTDIR/raw.tsv (workload, variant, step, contender, run, value,
# unit), OUTDIR/meta.tsv (key, value) and OUTDIR/sanity.tsv; writes REPORT
# (default OUTDIR/RESULTS.md).  Every number is the median of the runs;
# every row gives the ratio to the contender "local".  No modules beyond
# perl's core.
use strict;
use warnings;
use utf8;
use open qw(:std :encoding(UTF-8));
use FindBin;
use lib $FindBin::RealBin;
use BenchNumbers qw(median thousands);

my $dir = shift or die "usage: report.pl OUTDIR [REPORT]\n";
my $report = shift // "$dir/RESULTS.md";

my @CONTENDERS = qw(local gunique trigger sidetable single none);    # none: workload 10's table without a key

# ---------------------------------------------------------------------------
# Input
# ---------------------------------------------------------------------------
my (%meta, @settings);
open my $mf, '<', "$dir/meta.tsv" or die "report.pl: $dir/meta.tsv: $!\n";
while (<$mf>) {
	chomp;
	my ($k, $v) = split /\t/, $_, 2;
	next unless defined $v;
	if ($k eq 'setting') { push @settings, $v } else { $meta{$k} = $v }
}
close $mf;

# $val{workload}{variant}{step}{contender} = [values of every run];
# $byrun{...}{contender}{run} = the value of one run (workload 6 pairs runs)
my (%val, %unit, %byrun);
open my $rf, '<', "$dir/raw.tsv" or die "report.pl: $dir/raw.tsv: $!\n";
while (<$rf>) {
	chomp;
	next if /^\s*$/ || /^#/;
	my ($w, $variant, $step, $c, $run, $v, $u) = split /\t/;
	push @{ $val{$w}{$variant}{$step}{$c} }, $v;
	$byrun{$w}{$variant}{$step}{$c}{$run} = $v;
	$unit{$w}{$step} = $u;
}
close $rf;

my @sanity;
if (open my $sf, '<', "$dir/sanity.tsv") {
	while (<$sf>) { chomp; push @sanity, [ split /\t/ ] if length }
	close $sf;
}

# ---------------------------------------------------------------------------
# Numbers
# ---------------------------------------------------------------------------

# Largest max/min ratio of the runs over the cells of a table, to show how
# noisy it is.
my $worst_spread;
sub note_spread
{
	my ($label, @v) = @_;
	return if @v < 2;
	my @s = sort { $a <=> $b } @v;
	return if $s[0] <= 0;
	my $r = $s[-1] / $s[0];
	$worst_spread = [ $r, $label ] if !$worst_spread || $r > $worst_spread->[0];
}

sub fmt
{
	my $v = shift;
	return 'n/a' unless defined $v;
	my $s = $v >= 100 ? sprintf('%.0f', $v) : $v >= 10 ? sprintf('%.1f', $v) : $v >= 1 ? sprintf('%.2f', $v) : sprintf('%.3f', $v);
	return thousands($s);
}

sub ratio
{
	my ($v, $base) = @_;
	return '' unless defined $v && defined $base && $base > 0;
	return sprintf('×%.2f', $v / $base);
}

# The cell of one contender: its median, and its ratio to local's median.
sub cell
{
	my ($runs, $base_runs, $label, $c) = @_;
	return 'n/a' unless $runs && @$runs;
	note_spread($label, @$runs);
	my $m = median(@$runs);
	return fmt($m) if $c eq 'local' || !$base_runs;
	my $r = ratio($m, median(@$base_runs));
	return $r ? fmt($m) . " ($r)" : fmt($m);
}

# The contenders present in a workload, in the reporting order.
sub present
{
	my $w = shift;
	my %seen;
	for my $variant (values %{ $val{$w} }) {
		for my $step (values %$variant) { $seen{$_} = 1 for keys %$step }
	}
	return grep { $seen{$_} } @CONTENDERS;
}

sub spread_line
{
	my $line = '';
	if ($worst_spread) {
		$line = sprintf("Largest spread between runs in this table (max/min): %.2f (%s).\n\n", @$worst_spread);
	}
	undef $worst_spread;
	return $line;
}

# ---------------------------------------------------------------------------
# Output
# ---------------------------------------------------------------------------
my $out = '';
sub p { $out .= join('', @_) }

my $runs = $meta{runs} // '?';
p "# gunique benchmark results\n\n";
p "Written by `bench/report.pl` from the raw results of one `bench/run` ",
  "(scale **$meta{scale}**, **$runs** run", ($runs eq '1' ? '' : 's'), ", $meta{date}). ",
  "Every contender ran in the same cluster, on the same data, with the same settings. ",
  "Each number is the median of the runs", ($runs eq '1' ? ' (one run: no median, no noise estimate)' : ''), "; ",
  "the ratio in parentheses is the contender's median divided by `local`'s in the same row ",
  "(for times, higher is slower; for tps, higher is faster). ",
  "Raw values of every run are in `raw.tsv`; how to run and what the contenders are: `bench/README.md`.\n\n";

p "## Machine and settings\n\n";
p "- CPU: ", ($meta{cpu} || 'unknown'), "; $meta{nproc} cores (nproc); memory $meta{memory}; $meta{kernel}\n";
p "- load average (1, 5, 15 min) at start: $meta{loadavg_start}; at end: ", ($meta{loadavg_end} // '?'), "\n";
p "- $meta{postgres}\n";
p "- gunique $meta{gunique} (source $meta{gunique_commit}; gunique.so md5 $meta{gunique_so}, a private copy for the whole run)\n";
p "- server settings (every contender): shared_preload_libraries = 'gunique', ", join(', ', @settings), "\n";
p "- prewarm: $meta{prewarm}\n" if $meta{prewarm};
{
	# Checkpoints the benchmark did not ask for (by WAL volume or by time)
	# land in the middle of some step: say how many there were.
	my ($wal, $time) = (0, 0);
	if (open my $lf, '<', "$dir/logs/server.log") {
		while (<$lf>) {
			next unless /checkpoint starting: (.*)/;
			my $why = $1;    # a later match would reset $1
			$wal++ if $why =~ /\bwal\b/;
			$time++ if $why =~ /\btime\b/;
		}
		p "- checkpoints not requested by the benchmark (by WAL volume, by time): $wal, $time", ($wal + $time ? " (they add noise to the steps they overlap)" : ""), "\n";
	}
}
p "- scale $meta{scale}: $meta{params}\n";
p "- contenders: $meta{contenders}\n";
my @took = map { defined $meta{"elapsed_w$_"} ? "workload $_: $meta{\"elapsed_w$_\"} s" : () } 1 .. 10;
p "- wall-clock time: ", join(', ', @took), "\n" if @took;
p "\n";
p "Contenders: `local` a unique btree that includes the partition key (unique per partition only: ",
  "the cost floor, not a global guarantee); `gunique` `CREATE UNIQUE INDEX ... USING gunique (key)`; ",
  "`trigger` a btree per partition and a BEFORE row trigger that takes an advisory lock on the key's hash ",
  "and looks the key up through the parent; `sidetable` a table of the keys with a primary key, kept in step ",
  "by row triggers; `single` the same rows in one unpartitioned table with a unique btree.\n\n";

# Workload 1 ----------------------------------------------------------------
if ($val{w1}) {
	my @c = present('w1');
	my @steps = qw(insert delete create attach detach);
	p "## Workload 1: the talk's timing table (ms)\n\n";
	p "`test(a int, b int, c text)` range-partitioned on `a` into 6 partitions, unique key `b`; ",
	  "each step timed on its own (psql `\\timing`): insert N rows with one INSERT ... SELECT, delete them all, ",
	  "create the enforcement over N rows, attach a 7th partition of N/6 rows (with what the contender needs ",
	  "to keep the guarantee), detach it. `single` has no partitions: n/a.\n\n";
	for my $variant (qw(correlated random)) {
		next unless $val{w1}{$variant};
		my $v = $val{w1}{$variant};
		p "### ", ($variant eq 'correlated' ? 'Correlated keys (b = a)' : 'Random keys (b = a permutation of a)'), "\n\n";
		p "| contender | ", join(' | ', @steps), " |\n";
		p "|---|", join('', map { '---:|' } @steps), "\n";
		for my $c (@c) {
			p "| $c | ", join(' | ', map { cell($v->{$_}{$c}, $v->{$_}{local}, "$variant $_ $c", $c) } @steps), " |\n";
		}
		p "\n", spread_line();
	}
}

# Workload 2 ----------------------------------------------------------------
if ($val{w2}) {
	my @c = present('w2');
	p "## Workload 2: insert cost per row against the number of partitions (µs/row)\n\n";
	p "One INSERT ... SELECT of new rows, interleaved with the rows already there, into a table ",
	  "range-partitioned into 1 to 512 partitions (the time of the statement divided by the rows). ",
	  "`single` has no partitions: the same value in every row.\n\n";
	p "![insert cost per row against partitions](w2-scaling.svg)\n\n";
	# int keys first (correlated, random), then the other key types
	my %title = (uuid => 'uuid', email => 'text e-mail addresses',
				 pair => 'two columns (int, text e-mail)',
				 reinsert => 'inserted again after a rollback',
				 update => 'a non-HOT UPDATE that keeps them (µs per row updated)');
	for my $variant (sort { ($a =~ tr/-//) <=> ($b =~ tr/-//) || $a cmp $b } keys %{ $val{w2} }) {
		my $v = $val{w2}{$variant};
		my ($order, $keys) = split /-/, $variant;
		p "### ", ucfirst($order), " keys", ($keys ? ", $title{$keys}" : ''), "\n\n";
		p "| partitions | ", join(' | ', @c), " |\n";
		p "|---:|", join('', map { '---:|' } @c), "\n";
		for my $parts (sort { $a <=> $b } grep { $_ ne '-' } keys %$v) {
			p "| $parts | ", join(' | ', map {
				my $runs = $_ eq 'single' ? $v->{'-'}{single} : $v->{$parts}{$_};
				cell($runs, $v->{$parts}{local}, "$variant $parts $_", $_)
			} @c), " |\n";
		}
		p "\n", spread_line();
	}
}

# gunique's btree searches of partitions per row of workload 2 ------------
if ($val{w2searches}) {
	my $v = $val{w2searches};
	my %parts = map { %{ $v->{$_} } } keys %$v;
	my @parts = sort { $a <=> $b } grep { /^\d+$/ } keys %parts;
	p "### Workload 2: btree searches per row (gunique)\n\n";
	p "Partitions whose btree gunique searched per row of the timed statement ",
	  "(`gunique_stat_probes`, reset just before it; own partition included), median of the runs.\n\n";
	p "| keys | ", join(' | ', @parts), " |\n";
	p "|---|", join('', map { '---:|' } @parts), "\n";
	for my $variant (sort { ($a =~ tr/-//) <=> ($b =~ tr/-//) || $a cmp $b } keys %$v) {
		p "| $variant | ", join(' | ', map {
			my $runs = $v->{$variant}{$_}{gunique};
			$runs && @$runs ? sprintf('%.3f', median(@$runs)) : ''
		} @parts), " |\n";
	}
	p "\n";
}

# Workloads 3 and 4: one row per contender, tps and latency ----------------
sub pgbench_table
{
	my ($w, $variant) = @_;
	my $v = $val{$w}{$variant} or return;
	p "| contender | tps | tps vs local | latency avg (ms) | latency vs local |\n";
	p "|---|---:|---:|---:|---:|\n";
	for my $c (present($w)) {
		next unless $v->{tps}{$c};
		my ($t, $l) = (median(@{ $v->{tps}{$c} }), median(@{ $v->{latency}{$c} }));
		note_spread("$variant tps $c", @{ $v->{tps}{$c} });
		my $tl = $v->{tps}{local} ? median(@{ $v->{tps}{local} }) : undef;
		my $ll = $v->{latency}{local} ? median(@{ $v->{latency}{local} }) : undef;
		p "| $c | ", fmt($t), " | ", (ratio($t, $tl) || '–'), " | ", fmt($l), " | ", (ratio($l, $ll) || '–'), " |\n";
	}
	p "\n", spread_line();
}

if ($val{w3a}) {
	p "## Workload 3a: concurrent inserters (pgbench)\n\n";
	p "Clients insert one row per transaction (prepared) into 16 range partitions; the partition key is random, ",
	  "the unique key a permutation of a sequence's nextval(), so keys look random and never collide.\n\n";
	pgbench_table('w3a', '-');
}
if ($val{w3b}) {
	p "## Workload 3b: UUID de-duplication, hash vs list partitioning (pgbench)\n\n";
	p "The workload of \"Postgres partitioning performance: Hash vs. List\": 10 clients, each transaction ",
	  "inserts 1,000 `gen_random_uuid()` rows into 16 partitions. `local` is a primary key on the parent ",
	  "(hash on id) or on each partition (list on `lower(left(id::text, 1))`); in both cases a given id can ",
	  "only land in one partition, so `local` is globally unique here. gunique sees that the hash partition key ",
	  "is its key, and that the list partition key is an expression over its key whose equality is image equality (uuid), so in both cases it probes no other partition.\n\n";
	for my $variant (qw(hash list)) {
		next unless $val{w3b}{$variant};
		p "### ", ($variant eq 'hash' ? 'Hash partitioning on id' : 'List partitioning on lower(left(id::text, 1))'), "\n\n";
		pgbench_table('w3b', $variant);
	}
}
if ($val{w4}) {
	p "## Workload 4: lookups by a unique key that is not the partition key (pgbench)\n\n";
	p "A pgbench_accounts-like table in 200 partitions (range on bid), unique key aid; prepared statements. ",
	  "With per-partition indexes (`local` and `gunique` alike) a lookup by aid probes every partition's btree ",
	  "and locks every partition: gunique gives the guarantee, not a faster lookup. Only `single` does one probe.\n\n";
	for my $variant (qw(select-only select-update)) {
		next unless $val{w4}{$variant};
		p "### ", ($variant eq 'select-only' ? 'SELECT abalance WHERE aid = :aid' : 'UPDATE abalance WHERE aid = :aid, then SELECT it'), "\n\n";
		pgbench_table('w4', $variant);
	}
}

# Workload 5: large tables and restarts ---------------------------------------
if ($val{w5}) {
	p "## Workload 5: large tables, and the first minute after a restart\n\n";
	p "One INSERT of new keys (µs per row), then a clean restart and an immediate one (a crash), each followed by ",
	  "single-row inserts of new keys from one client: their latency in ms (p50, p99, max, and max-later: the slowest ",
	  "but the session's first, which loads a new session's caches). \"ready\" is the time ",
	  "from the start of the server until gunique's key filters are all back (loaded from the file saved at shutdown); ",
	  "\"crash-ready\" the same after the crash, when the background worker has built them again as the inserts asked. ",
	  "\"nosave\" (with BENCH_W5_NOSAVE=1) is a clean restart with gunique's save file removed while the server is stopped: ",
	  "the background worker alone builds the filters again. \"down\" is the seconds the clean stop took (gunique saves then), ",
	  "\"file\" the save file's size, \"rate-Ns\" the inserts per second over the first N seconds from the first insert, ",
	  "\"load\" the 1-minute load average when the inserts started. ",
	  "Medians of the runs; gunique's ratio to local's in parentheses.\n\n";
	my @after = qw(down file up ready rate-1s rate-5s rate-10s rate p50 p99 max max-later load);
	my @order = (qw(insert insert-warm), (map { my $w = $_; map { "$w-$_" } @after } qw(restart nosave crash)),
	  qw(filter-bytes-per-key shared-memory));
	for my $variant (sort keys %{ $val{w5} }) {
		my $v = $val{w5}{$variant};
		my @cc = grep { my $c = $_; grep { $v->{$_}{$c} } keys %$v } @CONTENDERS;
		p "### $variant\n\n| step | unit | ", join(' | ', @cc), " |\n|---|---|", join('', map { '---:|' } @cc), "\n";
		for my $step (grep { $v->{$_} } @order) {
			p "| $step | $unit{w5}{$step} | ",
			  join(' | ', map { cell($v->{$step}{$_}, $v->{$step}{local}, "$variant $step $_", $_) } @cc), " |\n";
		}
		p "\n", spread_line();
	}
}

# Workload 6: the talk's lookups by the global key, against partitions -------
if ($val{w6}) {
	my %parts;
	for my $variant (keys %{ $val{w6} }) {
		my ($mode, $n) = $variant =~ /^(.*)-(\d+)$/ or next;
		$parts{$mode}{$n} = 1;
	}
	p "## Workload 6: the talk's lookups by the global key, against the number of partitions (pgbench)\n\n";
	p "`pgbench -i --partitions=N` (range on aid), then `UPDATE pgbench_accounts SET bid = aid`; the key is bid; ",
	  "prepared statements, :bid random over every account. `local` is a plain btree on bid in every partition, ",
	  "`gunique` `CREATE UNIQUE INDEX ... USING gunique (bid)`, `single` the same rows unpartitioned with a unique btree ",
	  "on bid. `local` searches every partition's btree for a key, and so does `gunique` without its lookup path ",
	  "(`gunique.enable_lookup`, from f9416bd: one scan of the partitions that can hold the key, for a plain SELECT). ",
	  "tps, medians of the runs; each ratio is of medians, and in brackets the lowest and highest ratio of one run's ",
	  "values (the contenders of a run ran one after the other). pgbench's tps counts each new session's start ",
	  "(its relation cache, five custom plans of every partition before the generic plan), which at 1,000 partitions ",
	  "takes seconds; the second half of each run leaves it out.\n\n";
	# the ratio of two contenders' medians, and the range of the runs' ratios
	my $pair = sub {
		my ($cell, $step, $c1, $c2) = @_;
		my ($r1, $r2) = ($byrun{w6}{$cell}{$step}{$c1}, $byrun{w6}{$cell}{$step}{$c2});
		return 'n/a' unless $r1 && $r2 && %$r1 && %$r2;
		# two decimals, or two significant digits below 0.1 (single's lead at 1,000 partitions)
		my $x = sub { my $r = shift; $r >= 0.1 ? sprintf('%.2f', $r) : sprintf('%.2g', $r) };
		my $m2 = median(values %$r2);
		return 'n/a' unless $m2 > 0;
		my $s = '×' . $x->(median(values %$r1) / $m2);
		my @per = sort { $a <=> $b } map { $r1->{$_} / $r2->{$_} } grep { exists $r2->{$_} && $r2->{$_} > 0 } keys %$r1;
		$s .= ' [' . $x->($per[0]) . '–' . $x->($per[-1]) . ']' if @per > 1;
		return $s;
	};
	my %title = ('select-only' => 'SELECT abalance WHERE bid = :bid',
				 'select-update' => 'UPDATE abalance WHERE bid = :bid, then SELECT it',
				 'update-only' => 'UPDATE abalance WHERE bid = :bid alone');
	my %steps = (tps => "pgbench's tps, the whole run",
				 'tps-warm' => 'tps of the second half of the run (warm sessions)');
	for my $mode (qw(select-only select-update update-only)) {
		next unless $parts{$mode};
		my @n = sort { $a <=> $b } keys %{ $parts{$mode} };
		for my $step (qw(tps tps-warm)) {
			next unless grep { $val{w6}{"$mode-$_"}{$step} } @n;
			my @cc = grep { my $c = $_; grep { $val{w6}{"$mode-$_"}{$step}{$c} } @n } qw(local gunique single);
			p "### $title{$mode}: $steps{$step}\n\n";
			p "| partitions | ", join(' | ', @cc), " | gunique / local | gunique / single |\n";
			p "|---:|", join('', map { '---:|' } @cc), "---:|---:|\n";
			for my $n (@n) {
				my $v = $val{w6}{"$mode-$n"}{$step};
				p "| $n | ", join(' | ', map {
					note_spread("$mode $n partitions $step $_", @{ $v->{$_} || [] });
					$v->{$_} ? fmt(median(@{ $v->{$_} })) : 'n/a'
				} @cc), " | ", $pair->("$mode-$n", $step, 'gunique', 'local'), " | ",
				  $pair->("$mode-$n", $step, 'gunique', 'single'), " |\n";
			}
			p "\n", spread_line();
		}
	}
}

# Workload 7: de-duplicating ingest with ON CONFLICT DO NOTHING --------------
if ($val{w7}) {
	# variants: "<partitions>" (batches of 1,000) and "<partitions>x1" (one row each)
	my @n = sort { ($a =~ /x1$/) <=> ($b =~ /x1$/) || ($a =~ /^(\d+)/)[0] <=> ($b =~ /^(\d+)/)[0] }
	  grep { /^\d+(x1)?$/ } keys %{ $val{w7} };
	my $label = sub { my ($n) = @_; $n =~ /^(\d+)x1$/ ? "$1, one row a statement" : $n };
	p "## Workload 7: de-duplicating ingest, INSERT ... ON CONFLICT DO NOTHING (pgbench)\n\n";
	p "`w7(id bigint, day date, payload text)`; 10 clients, each transaction inserts a batch of 1,000 ids with ",
	  "`INSERT ... SELECT ... ON CONFLICT (id) DO NOTHING`, 200 of which (20%) the table already holds ",
	  "(with `gunique`, each in another partition than the one the new row's day routes it to); batches share no id. ",
	  "`single` one unpartitioned table with a unique btree on id; `local` hash-partitioned on id into the same number ",
	  "of partitions, a primary key on id (a duplicate lands in the partition that holds its id); `gunique` ",
	  "range-partitioned on day, one day per partition, `CREATE UNIQUE INDEX ... USING gunique (id)`. ",
	  "Medians of the runs; each ratio is of medians, and in brackets the lowest and highest ratio of one run's values. ",
	  "After every run each table held every id exactly once (sanity checks below). ",
	  "Rows per second count the 1,000 rows tried per transaction, 800 of them inserted. ",
	  "Rows marked \"one row a statement\": each transaction is one prepared `INSERT ... VALUES (...) ON CONFLICT (id) DO NOTHING` ",
	  "of one id, every fifth id held (with `gunique`, in another partition), 100 times as many transactions.\n\n";
	my $refused = sub { my ($n) = @_; $val{w7}{$n}{refused} && $val{w7}{$n}{refused}{gunique} };
	if (grep { $refused->($_) } @n) {
		p "**gunique: refused by this server.** Before PostgreSQL 18 (without the core change of `contrib-patches/`), ",
		  "PostgreSQL arbitrates ON CONFLICT only with btree indexes, and gunique refuses any `INSERT ... ON CONFLICT` ",
		  "on a table with a gunique index (\"INSERT ... ON CONFLICT is not supported on a table with a gunique index ",
		  "before PostgreSQL 18\"): nothing to measure.\n\n";
	}
	my $pair = sub {
		my ($n, $step, $c1, $c2) = @_;
		return 'refused' if ($c1 eq 'gunique' || $c2 eq 'gunique') && $refused->($n);
		my ($r1, $r2) = ($byrun{w7}{$n}{$step}{$c1}, $byrun{w7}{$n}{$step}{$c2});
		return 'n/a' unless $r1 && $r2 && %$r1 && %$r2;
		my $m2 = median(values %$r2);
		return 'n/a' unless $m2 > 0;
		my $s = sprintf('×%.2f', median(values %$r1) / $m2);
		my @per = sort { $a <=> $b } map { $r1->{$_} / $r2->{$_} } grep { exists $r2->{$_} && $r2->{$_} > 0 } keys %$r1;
		$s .= sprintf(' [%.2f–%.2f]', $per[0], $per[-1]) if @per > 1;
		return $s;
	};
	my %steps = (tps => 'transactions per second (higher is faster)',
				 rows => 'rows per second, tried (higher is faster)',
				 latency => 'average latency, ms (lower is faster)');
	for my $step (qw(tps rows latency)) {
		my @cc = grep { my $c = $_; grep { $val{w7}{$_}{$step}{$c} || ($c eq 'gunique' && $refused->($_)) } @n }
		  qw(single local gunique);
		next unless @cc;
		p "### $steps{$step}\n\n";
		p "| partitions | ", join(' | ', @cc), " | gunique / single | gunique / local | spread (max/min of runs) |\n";
		p "|---:|", join('', map { '---:|' } @cc), "---:|---:|---|\n";
		for my $n (@n) {
			my $v = $val{w7}{$n}{$step};
			my @spread;
			my @cells = map {
				my $c = $_;
				if ($c eq 'gunique' && $refused->($n)) { 'refused' }
				elsif ($v->{$c} && @{ $v->{$c} }) {
					note_spread("$n partitions $step $c", @{ $v->{$c} });
					my @s = sort { $a <=> $b } @{ $v->{$c} };
					push @spread, sprintf('%s %.2f', $c, $s[-1] / $s[0]) if @s > 1 && $s[0] > 0;
					fmt(median(@{ $v->{$c} }));
				}
				else { 'n/a' }
			} @cc;
			p "| ", $label->($n), " | ", join(' | ', @cells), " | ", $pair->($n, $step, 'gunique', 'single'), " | ",
			  $pair->($n, $step, 'gunique', 'local'), " | ", (@spread ? join(', ', @spread) : '–'), " |\n";
		}
		p "\n", spread_line();
	}
}

# Workload 8: upserts against transactions that collided first -------------
if ($val{w8}) {
	p "## Workload 8: upserts against transactions that collided first (pgbench)\n\n";
	p "`w8(id, p, k)` in list partitions by p, a primary key (id, p), the contender's unique key on k (`single`: ",
	  "the table unpartitioned with a unique btree). 8 clients, `--max-tries=1`, half the transactions insert two rows ",
	  "1 ms apart (the second with a key drawn near the upserts'), half `INSERT ... ON CONFLICT DO NOTHING` of one row; ",
	  "`deadlock_timeout` 5 ms. Medians of the runs, in brackets the lowest and highest run.\n\n";
	my %refused = map { $_ => 1 } grep { $val{w8}{$_}{refused} && $val{w8}{$_}{refused}{gunique} } keys %{ $val{w8} };
	if (%refused) {
		p "**gunique: refused by this server** (before PostgreSQL 18, without `contrib-patches/`, gunique refuses ",
		  "`INSERT ... ON CONFLICT`): nothing to measure.\n\n";
	}
	my @steps = (['deadlocks', 'deadlocks'], ['deadlocks-log', 'deadlocks in the server log'],
				 ['other-failures', 'other failed transactions'], ['transactions', 'transactions'], ['tps', 'tps'],
				 ['upsert-23505', 'upserts failing 23505'], ['collisions', 'collisions two_rows caught'],
				 ['skipped', 'upserts that skipped their row'], ['duplicates', 'duplicate keys']);
	# counts as whole numbers (a median of an even number of runs may end in .5)
	my $f = sub {
		my ($step, $v) = @_;
		return fmt($v) if $unit{w8}{$step} ne 'count';
		my $s = sprintf($v == int($v) ? '%d' : '%.1f', $v);
		return thousands($s);
	};
	my $range = sub {
		my ($step, @s) = @_;
		@s = sort { $a <=> $b } @s;
		my $m = $f->($step, median(@s));
		return @s > 1 && $s[0] != $s[-1] ? "$m [" . $f->($step, $s[0]) . '–' . $f->($step, $s[-1]) . ']' : $m;
	};
	for my $n (sort { $a <=> $b } grep { /^\d+$/ } keys %{ $val{w8} }) {
		my @cc = grep { my $c = $_; grep { $val{w8}{$n}{$_->[0]}{$c} } @steps } qw(single gunique);
		p "### $n partitions\n\n";
		p "| contender | ", join(' | ', map { $_->[1] } @steps), " |\n";
		p "|---|", join('', map { '---:|' } @steps), "\n";
		for my $c (@cc) {
			p "| $c | ", join(' | ', map {
				my $v = $val{w8}{$n}{$_->[0]}{$c};
				$v && @$v ? $range->($_->[0], @$v) : 'n/a'
			} @steps), " |\n";
		}
		p "| gunique | refused |", join('', map { ' |' } @steps[1 .. $#steps]), "\n" if $refused{$n};
		p "\n";
	}
}

# Workload 9: adding the key to a live table ---------------------------------
if ($val{w9}) {
	my $v = $val{w9};
	p "## Workload 9: adding the unique key to a live table (pgbench writers running)\n\n";
	p "Each statement ran while 4 pgbench writers (prepared, a fixed total rate, or full speed: see the scale line above) ",
	  "inserted rows (half the transactions), updated a non-key column (a quarter) and changed the key (a quarter) ",
	  "of the table it builds on: `gunique` is the range-partitioned table and its gunique index on k (not the partition key), ",
	  "`single` the same rows in one unpartitioned table with PostgreSQL's unique btree. \"baseline\" is the writers alone. ",
	  "Over the writers' transactions that overlap the statement: the longest (the stall), p99 and p50 latency ",
	  "(pgbench's, from each transaction's scheduled start), how many took over 1 s, and the transactions that ended ",
	  "during it per second. Medians of the runs, in brackets the lowest and highest run.\n\n";
	my @ops = grep { $v->{$_} } qw(baseline create create-concurrently reindex-concurrently attach);
	my %title = (baseline => 'baseline (writers alone)', create => 'CREATE UNIQUE INDEX (blocks writers)',
				 'create-concurrently' => 'CREATE UNIQUE INDEX CONCURRENTLY',
				 'reindex-concurrently' => 'REINDEX INDEX CONCURRENTLY', attach => 'ALTER TABLE ... ATTACH PARTITION');
	# counts as whole numbers (a median of an even number of runs may end in .5)
	my $f = sub { my ($count, $x) = @_; $count ? thousands(sprintf($x == int($x) ? '%d' : '%.1f', $x)) : fmt($x) };
	my $range = sub {
		my ($count, @s) = @_;
		@s = sort { $a <=> $b } @s;
		return 'n/a' unless @s;
		my $m = $f->($count, median(@s));
		return @s > 1 ? "$m [" . $f->($count, $s[0]) . '–' . $f->($count, $s[-1]) . ']' : $m;
	};
	my @steps = (['seconds', 'statement (s)'], ['stall', 'longest wait (ms)'], ['p99', 'p99 (ms)'], ['p50', 'p50 (ms)'],
				 ['over-1s', 'waits over 1 s'], ['tps', 'writers\' tps'],
				 ['stall-after', 'longest wait begun after it (ms)']);
	# stall-after from 719f4a4 on
	@steps = grep { my $st = $_->[0]; grep { $v->{$_}{$st} } @ops } @steps;
	for my $c (grep { my $c = $_; grep { $v->{$_}{seconds}{$c} } @ops } qw(gunique single)) {
		p "### ", ($c eq 'gunique' ? 'gunique: the partitioned table' : 'single: one table, btree'), "\n\n";
		my $base = $v->{baseline}{tps}{$c};
		p "| statement | ", join(' | ', map { $_->[1] } @steps), " | tps / baseline |\n|---|", join('', map { '---:|' } @steps), "---:|\n";
		for my $op (grep { $v->{$_}{seconds}{$c} } @ops) {
			my $t = $v->{$op}{tps}{$c};
			p "| $title{$op} | ", join(' | ', map { $range->(($unit{w9}{ $_->[0] } // '') eq 'count', @{ $v->{$op}{ $_->[0] }{$c} || [] }) } @steps), " | ",
			  ($op ne 'baseline' && $t && $base ? ratio(median(@$t), median(@$base)) : '–'), " |\n";
		}
		p "\n";
	}
	# per-run ratios of seconds: median of the runs' ratios [lowest–highest]
	my $pair = sub {
		my ($op1, $c1, $op2, $c2) = @_;
		my ($r1, $r2) = ($byrun{w9}{$op1}{seconds}{$c1}, $byrun{w9}{$op2}{seconds}{$c2});
		return unless $r1 && $r2;
		my @per = sort { $a <=> $b } map { $r1->{$_} / $r2->{$_} } grep { exists $r2->{$_} && $r2->{$_} > 0 } keys %$r1;
		return unless @per;
		return [ median(@per), $per[0], $per[-1], scalar @per ];
	};
	my @ratios = (['create-concurrently', 'gunique', 'create', 'gunique', 'gunique: CREATE INDEX CONCURRENTLY / CREATE INDEX (target: at most 2)', 2],
				  ['create-concurrently', 'gunique', 'create-concurrently', 'single', 'gunique CREATE INDEX CONCURRENTLY / btree CREATE INDEX CONCURRENTLY on one table'],
				  ['create-concurrently', 'single', 'create', 'single', 'btree on one table: CREATE INDEX CONCURRENTLY / CREATE INDEX (PostgreSQL\'s own, for reference)'],
				  ['create', 'gunique', 'create', 'single', 'gunique CREATE INDEX / btree CREATE INDEX on one table'],
				  ['reindex-concurrently', 'gunique', 'create-concurrently', 'gunique', 'gunique: REINDEX INDEX CONCURRENTLY / CREATE INDEX CONCURRENTLY']);
	my @rows = grep { $_->[6] = $pair->(@$_[0 .. 3]) } @ratios;
	if (@rows) {
		p "### Ratios of the statements' durations\n\n";
		p "| ratio | median of the runs' ratios | lowest–highest | runs |\n|---|---:|---:|---:|\n";
		for (@rows) {
			my ($m, $lo, $hi, $n) = @{ $_->[6] };
			p sprintf("| %s | ×%.2f | %.2f–%.2f | %d |\n", $_->[4], $m, $lo, $hi, $n);
		}
		p "\n";
	}
	# issue 42's targets
	my @t;
	for my $op (grep { $v->{$_} } qw(create-concurrently reindex-concurrently attach)) {
		my $runs = $byrun{w9}{$op}{stall}{gunique} or next;
		my @over = grep { $runs->{$_} > 1000 } sort keys %$runs;
		my @s = sort { $a <=> $b } values %$runs;
		push @t, sprintf("- %s: no writer waits more than 1 s: %s (longest wait %s to %s ms over %d run%s)\n", $title{$op},
			@over ? 'not met in ' . scalar(@over) . ' of ' . scalar(keys %$runs) . ' runs' : 'met in every run',
			fmt($s[0]), fmt($s[-1]), scalar @s, @s == 1 ? '' : 's');
		if (my $aft = $byrun{w9}{$op}{'stall-after'}{gunique}) {
			my @ao = grep { $aft->{$_} > 1000 } keys %$aft;
			my @as = sort { $a <=> $b } values %$aft;
			push @t, sprintf("  - and in the seconds after it, writers that began once it had ended: %s (longest %s to %s ms)\n",
				@ao ? 'a wait over 1 s in ' . scalar(@ao) . ' of ' . scalar(keys %$aft) . ' runs' : 'none waited over 1 s',
				fmt($as[0]), fmt($as[-1]));
		}
	}
	if (my $r = $pair->('create-concurrently', 'gunique', 'create', 'gunique')) {
		my $runs = $byrun{w9}{'create-concurrently'}{seconds}{gunique};
		my $base = $byrun{w9}{create}{seconds}{gunique};
		my @over = grep { exists $base->{$_} && $base->{$_} > 0 && $runs->{$_} / $base->{$_} > 2 } keys %$runs;
		push @t, sprintf("- CREATE INDEX CONCURRENTLY at most 2× CREATE INDEX: %s (×%.2f, %.2f to %.2f)\n",
			@over ? 'not met in ' . scalar(@over) . " of $r->[3] runs" : 'met in every run', @$r[0 .. 2]);
	}
	p "### Issue 42's targets\n\n", @t, "\n" if @t;
}

# Workload 10: global keys on Citus -------------------------------------------
if ($meta{w10_skipped}) {
	p "## Workload 10: global keys on Citus distributed tables\n\n";
	p "**Skipped:** $meta{w10_skipped}. Workload 10 needs Citus built for the PostgreSQL it runs on ",
	  "(`tools/install-deps` builds it into 17 and 18).\n\n";
}
if ($val{w10}) {
	my $v = $val{w10};
	p "## Workload 10: global keys on Citus distributed tables (pgbench, a coordinator and 2 workers on this machine)\n\n";
	p "`ev(tenant int, id bigint, v int, payload text)` distributed by tenant (hash). `gunique`: ",
	  "`CREATE UNIQUE INDEX ... USING gunique (id)`, the global key (its key table distributed by id, written in the ",
	  "row's distributed transaction); `local`: `UNIQUE (id, tenant)`, a key with the distribution column, the best ",
	  "Citus allows today (id first, so that a lookup by id alone uses it in each shard); `none`: no unique index. ",
	  "Each table loaded with the same rows, then measured by turns, the order turning with each run. ",
	  "Medians of the runs; each ratio is the median of the runs' own ratios, in brackets the lowest and highest.\n\n";
	p "- Citus $meta{w10_citus}; nodes: $meta{w10_nodes}\n\n" if $meta{w10_citus};
	# per-run ratios A / B of one step: [median, lowest, highest, runs]
	my $ratios = sub {
		my ($variant, $step, $c1, $c2, $invert) = @_;
		my ($r1, $r2) = ($byrun{w10}{$variant}{$step}{$c1}, $byrun{w10}{$variant}{$step}{$c2});
		return unless $r1 && $r2;
		my @per = sort { $a <=> $b }
		  map { $invert ? $r2->{$_} / $r1->{$_} : $r1->{$_} / $r2->{$_} }
		  grep { exists $r2->{$_} && $r1->{$_} > 0 && $r2->{$_} > 0 } keys %$r1;
		return unless @per;
		return [ median(@per), $per[0], $per[-1], scalar @per ];
	};
	my $rfmt = sub {
		my $r = shift;
		return 'n/a' unless $r;
		my $x = sub { my $n = shift; $n >= 0.1 ? sprintf('%.2f', $n) : sprintf('%.2g', $n) };
		return '×' . $x->($r->[0]) . ($r->[3] > 1 ? ' [' . $x->($r->[1]) . '–' . $x->($r->[2]) . ']' : '');
	};
	my $med = sub {
		my ($variant, $step, $c) = @_;
		my $r = $v->{$variant}{$step}{$c};
		return 'n/a' unless $r && @$r;
		note_spread("$variant $step $c", @$r);
		return fmt(median(@$r));
	};
	# a count: whole, or with one decimal for the median of an even number of runs
	my $count = sub {
		my ($variant, $step, $c) = @_;
		my $r = $v->{$variant}{$step}{$c};
		return 'n/a' unless $r && @$r;
		my $m = median(@$r);
		return thousands(sprintf($m == int($m) ? '%d' : '%.1f', $m));
	};
	my $spread = sub {
		my ($variant, $step, @cc) = @_;
		my @s;
		for my $c (@cc) {
			my @x = sort { $a <=> $b } @{ $v->{$variant}{$step}{$c} || [] };
			push @s, sprintf('%s %.2f', $c, $x[-1] / $x[0]) if @x > 1 && $x[0] > 0;
		}
		return @s ? join(', ', @s) : '–';
	};

	# inserts
	my @ins = grep { $v->{$_} } sort { ($a =~ /^copy/) <=> ($b =~ /^copy/) || ($a =~ /(\d+)/)[0] <=> ($b =~ /(\d+)/)[0] }
	  grep { /^(insert-\d+|copy)$/ } keys %$v;
	my @targets;
	if (@ins) {
		my @cc = grep { my $c = $_; grep { $v->{$_}{rows}{$c} } @ins } qw(none local sidetable gunique);
		my $side = grep { $_ eq 'sidetable' } @cc;
		p "### Inserts: rows per second (higher is faster)\n\n";
		p "The cost ratio is the time per row, gunique / local (issue 44's target: at most ×2), and local / none ",
		  "(what Citus's own key costs)",
		  ($side ? "; gunique / sidetable is what gunique adds to Citus's own cost of writing the row and its key " .
		   "on two shards in one transaction (sidetable: the application does it by hand)" : ''), ".\n\n";
		p "| statement | ", join(' | ', @cc), " | cost gunique / local | cost local / none |",
		  ($side ? " cost gunique / sidetable | cost sidetable / local |" : ''), " spread (max/min of runs) |\n";
		p "|---|", join('', map { '---:|' } @cc), "---:|---:|", ($side ? "---:|---:|" : ''), "---|\n";
		my %title = (copy => 'COPY FROM a file');
		for my $variant (@ins) {
			my $t = $title{$variant} // ($variant =~ /^insert-(\d+)$/ && $1 == 1
				? 'INSERT of one row (pgbench, prepared)' : "INSERT of $1 rows a statement (pgbench, prepared)");
			my $g = $ratios->($variant, 'rows', 'gunique', 'local', 1);
			p "| $t | ", join(' | ', map { $med->($variant, 'rows', $_) } @cc), " | ", $rfmt->($g), " | ",
			  $rfmt->($ratios->($variant, 'rows', 'local', 'none', 1)), " | ",
			  ($side ? $rfmt->($ratios->($variant, 'rows', 'gunique', 'sidetable', 1)) . " | " .
			   $rfmt->($ratios->($variant, 'rows', 'sidetable', 'local', 1)) . " | " : ''),
			  $spread->($variant, 'rows', @cc), " |\n";
			if ($g) {
				my $r1 = $byrun{w10}{$variant}{rows}{gunique};
				my $r2 = $byrun{w10}{$variant}{rows}{local};
				my @over = grep { exists $r2->{$_} && $r1->{$_} > 0 && $r2->{$_} / $r1->{$_} > 2 } keys %$r1;
				push @targets, sprintf("- %s: cost of gunique at most ×2 of local: %s (×%.2f, %.2f to %.2f)\n", $t,
					@over ? 'not met in ' . scalar(@over) . " of $g->[3] run" . ($g->[3] == 1 ? '' : 's') : 'met in every run',
					@$g[0 .. 2]);
			}
		}
		p "\n";
		if ($v->{'insert-1'}{shards}) {
			my @pc = grep { $v->{'insert-1'}{shards}{$_} } @cc;
			p "Shards touched by one single-row INSERT, counted as for the lookups below (",
			  "the commands Citus sent for it, over 20 inserts of the first run, each its own transaction): ",
			  join('; ', map {
				my $c = $_;
				my $m = median(@{ $v->{'insert-1'}{shards}{$c} });
				my @x = sort { $a <=> $b } @{ $v->{'insert-1'}{'shards-max'}{$c} || [] };
				my @t = @{ $v->{'insert-1'}{'two-phase'}{$c} || [] };
				"$c " . ($m == int($m) ? int($m) : sprintf('%.2f', $m)) . (@x ? " (at most $x[-1])" : '')
				  . (@t ? ', ' . median(@t) . ' of 20 committed in two phases' : '')
			  } @pc), ".\n\n";
		}
		my @lat = grep { $v->{$_}{latency} } @ins;
		if (@lat) {
			p "Average latency (ms, pgbench): ", join('; ', map {
				my $variant = $_;
				"$variant: " . join(', ', map { "$_ " . $med->($variant, 'latency', $_) } @cc)
			} @lat), ".\n\n";
		}
		p spread_line();
	}

	# lookups
	my @n = sort { $a <=> $b } map { /^lookup-(\d+)$/ ? $1 : () } keys %$v;
	if (@n) {
		p "### Lookups by the key alone: `SELECT ... WHERE id = :k` (pgbench, prepared)\n\n";
		p "Shards touched: the distinct shards (of the table or of any other distributed table, the key table's ",
		  "included) named in the commands Citus sent to the nodes or ran locally for one lookup ",
		  "(`citus.log_remote_commands`, `citus.log_local_commands`), over ",
		  "20 lookups of the same prepared statement (custom plans, then the generic one): mean (largest). ",
		  "Task Count: EXPLAIN (ANALYZE) of the prepared lookup, Citus's count of its shard queries. ",
		  "Issue 44's target: a lookup on `gunique` touches at most 2 shards whatever the shard count.\n\n";
		p "| shards | local tps | gunique tps | tps gunique / local | shards touched: local | gunique | Task Count: local | gunique |\n";
		p "|---:|---:|---:|---:|---:|---:|---:|---:|\n";
		my %touch;
		for my $s (@n) {
			my $var = "lookup-$s";
			my $sh = sub {
				my $c = shift;
				my ($m, $x) = ($v->{$var}{shards}{$c}, $v->{$var}{'shards-max'}{$c});
				return 'n/a' unless $m && @$m;
				my @xs = sort { $a <=> $b } @{ $x || [] };
				my $mm = median(@$m);
				return ($mm == int($mm) ? int($mm) : sprintf('%.2f', $mm)) . (@xs ? ' (' . $xs[-1] . ')' : '');
			};
			p "| $s | ", $med->($var, 'tps', 'local'), " | ", $med->($var, 'tps', 'gunique'), " | ",
			  $rfmt->($ratios->($var, 'tps', 'gunique', 'local')), " | ", $sh->('local'), " | ", $sh->('gunique'), " | ",
			  $count->($var, 'tasks', 'local'), " | ", $count->($var, 'tasks', 'gunique'), " |\n";
			my @xs = sort { $a <=> $b } @{ $v->{$var}{'shards-max'}{gunique} || [] };
			$touch{$s} = $xs[-1] if @xs;
		}
		p "\n", spread_line();
		if (%touch) {
			my @over = grep { $touch{$_} > 2 } sort { $a <=> $b } keys %touch;
			push @targets, sprintf("- A lookup by the key on gunique touches at most 2 shards: %s\n",
				@over ? 'not met at ' . join(', ', map { "$_ shards ($touch{$_} touched)" } @over)
				: 'met at every shard count (' . join(', ', map { "$_: $touch{$_}" } sort { $a <=> $b } keys %touch) . ')');
		}
	}

	# building the key, once per shard count
	my @b = sort { $a <=> $b } map { /^build-(\d+)$/ ? $1 : () } keys %$v;
	if (@b) {
		p "### Building the key on the loaded table (one value per shard count and run of bench/run)\n\n";
		p "| shards | local: ADD UNIQUE (id, tenant) (s) | gunique: CREATE UNIQUE INDEX ... USING gunique (id) (s) | gunique / local |\n";
		p "|---:|---:|---:|---:|\n";
		for my $s (@b) {
			p "| $s | ", $med->("build-$s", 'seconds', 'local'), " | ", $med->("build-$s", 'seconds', 'gunique'), " | ",
			  $rfmt->($ratios->("build-$s", 'seconds', 'gunique', 'local')), " |\n";
		}
		p "\n";
		undef $worst_spread;
	}
	p "### Issue 44's targets (2 workers on this machine)\n\n", @targets, "\n" if @targets;
}

# Sanity checks -------------------------------------------------------------
if (@sanity) {
	my %by;
	push @{ $by{"$_->[0]\t$_->[1]"} }, $_ for @sanity;
	my $failed = grep { $_->[3] ne $_->[4] } @sanity;
	p "## Sanity checks (untimed)\n\n";
	p "Before the timings count, each contender is shown to enforce what it claims: each statement runs in a ",
	  "transaction that is rolled back; \"refused\" means it raised unique_violation (SQLSTATE 23505). ",
	  scalar(@sanity), " checks, $failed unexpected.\n\n";
	# One row per statement (the key orders or partitionings it ran with
	# merged), one column per contender.
	my (@rows, %cells, %cols);
	for my $s (@sanity) {
		my ($w, $c, $desc, $exp, $got) = @$s;
		my ($variant, $text) = $desc =~ /^([^:]+): (.*)$/ ? ($1, $2) : ('', $desc);
		my $row = "$w: $text";
		push @rows, $row unless $cells{$row};
		$cols{$c} = 1;
		my $o = $got eq $exp ? $got : "$got (expected $exp)";
		$cells{$row}{$c}{$o}{$variant} = 1;
	}
	my @cc = grep { $cols{$_} } @CONTENDERS;
	p "| statement | ", join(' | ', @cc), " |\n|---|", join('', map { '---|' } @cc), "\n";
	for my $row (@rows) {
		p "| $row | ", join(' | ', map {
			my $o = $cells{$row}{$_};
			!$o ? '' : keys %$o == 1 ? (keys %$o)[0]
			  : join('; ', map { "$_ (" . join(', ', sort keys %{ $o->{$_} }) . ")" } sort keys %$o)
		} @cc), " |\n";
	}
	p "\n";
}

open my $of, '>', $report or die "report.pl: $report: $!\n";
print $of $out;
close $of;

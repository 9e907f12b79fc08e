# Copyright (c) gunique contributors
#
# A randomized stateful test: several sessions run random sequences of
# INSERT (one row and many), UPDATE of the key, a non-HOT UPDATE that keeps
# it, UPDATE that moves a row to another partition, DELETE, COPY, bulk
# inserts of many new keys (so that key filters are built and outgrown),
# DETACH [CONCURRENTLY], ATTACH, DROP,
# TRUNCATE, REINDEX [CONCURRENTLY] of a leaf, REINDEX of the whole tree,
# CREATE TABLE ... PARTITION OF, VACUUM, savepoints, ROLLBACK [TO], PREPARE
# TRANSACTION / COMMIT PREPARED / ROLLBACK PREPARED, and crashes (SIGKILL of
# a backend, or an immediate shutdown) and fast shutdowns (which save the
# summaries that the next start loads) with restarts, against a table of 4
# and one of 40 range partitions (a group of 16 or more leaves has a group
# filter) with a gunique index on a column that is not the partition key.
# At times a pgbench load inserts keys from a sequence beside the DDL (and
# looks recent ones up and updates them by the key, see below).
# Added for issue 39 (GUNIQUE_STATEFUL_MORE=0 leaves them out): DETACH
# CONCURRENTLY beside lookups and UPDATE and DELETE by the key, and a loop
# of DETACH CONCURRENTLY and ATTACH beside them; ALTER COLUMN TYPE of the
# key; a second unique index that upserts collide with plain transactions
# on (PostgreSQL 18); and checks that a clean restart loads the filters
# saved at the shutdown, and of what it loaded.
# Added for issue 42 (GUNIQUE_STATEFUL_CONCURRENT=0 leaves them out): the
# gunique index dropped and made again by CREATE UNIQUE INDEX
# CONCURRENTLY, REINDEX INDEX CONCURRENTLY of it (valid, or left invalid by
# a failed build, which finishes it), beside inserts and UPDATEs of keys
# other partitions hold (see "Concurrent builds" below).
# The sessions also look rows up by the key (lookups, see below), which
# gunique plans as its own scan of the partitioned table.
# On PostgreSQL 18 the sessions also run INSERT ... ON CONFLICT DO NOTHING
# (upserts, see below); on 15 and 17, which refuse ON CONFLICT on such a
# table, none is generated, and with GUNIQUE_STATEFUL_LOOKUPS=0 a seed makes
# the same steps as before upserts and lookups were added (the operations
# and their weights are those of before).
#
# A model in Perl knows the committed rows of every partition, what each
# open or prepared transaction and each savepoint has done, and predicts
# each statement's outcome: must succeed, must fail with a unique violation,
# or (when another transaction's work decides it) one of the legal
# outcomes.  A statement that waits is left waiting, and other sessions go
# on (waits are found with pg_isolation_test_session_is_blocked(), as
# isolationtester finds them, never by timing); it is judged when it ends,
# after the waiting statements it was seen waiting for (pg_blocking_pids():
# a statement queued behind a TRUNCATE that waits for the pgbench load may
# end before the TRUNCATE is seen to end).
#
# Upserts (PostgreSQL 18): of one row and of many, into t or into one
# partition, with and without the conflict target (k), with and without
# RETURNING; keys new, held by committed rows (in other partitions or the
# target), by the session's own transaction, by other open or prepared
# transactions, by another session's waiting upsert or plain statement,
# repeated within the statement, and committed bulk keys (more of them
# while other transactions hold keys, to have them wait, and race once
# the holder ends); and plain INSERT, COPY and UPDATE of keys that
# another session's waiting upsert writes.  Since statements seldom wait
# long enough for that, a race of the two is at times set up in one step
# (a scene): a transaction inserts a key, an upsert and a plain statement
# of it (and of another key, that the first of them then holds) wait
# for it, and it commits or rolls back.  The model's rules:
#   - a row is inserted iff its key is free for the statement's
#     transaction when its turn comes: no committed live row and no row of
#     its own transaction (earlier rows of the statement included) in any
#     attached partition, in that transaction's view;
#   - a key another transaction inserts or deletes makes the statement
#     wait: it is judged when it ends, after that transaction did (it
#     committed: the row is skipped if the key is then held; rolled back:
#     inserted if free), and it must not end while that transaction still
#     holds the key;
#   - it must succeed, or be a deadlock victim once it waited; never a
#     unique violation, also where it races a plain INSERT, COPY or
#     UPDATE of the key in another partition (src/README, "ON CONFLICT
#     DO NOTHING", point 5): the first of the two decides, the upsert
#     skipping the row if the plain statement's committed (inserting it
#     if it rolled back), or the plain statement failing (23505) if the
#     upsert's committed.  Where the model cannot order them (each was
#     running when the other ended) the upsert's row is taken from
#     RETURNING, and a plain statement in autocommit whose row made the
#     upsert skip must have committed; a plain statement's outcome is
#     taken as it comes (its rows in iff it succeeded), and a later
#     statement is judged with it (see op_upsert).
#     No upsert starts while a DDL statement waits, nor DDL while an
#     upsert waits (one ending before the other is seen to end would be
#     judged out of order); beside DDL open in another transaction when
#     it begins or ends, a detached partition (23514), a deadlock and a
#     serialization failure are legal too, and a unique violation only
#     while a partition that may hold the key is being attached;
#   - RETURNING gives exactly the rows inserted, psql's ROW_COUNT their
#     number, and its backend holds no upsert lock once it has ended.
# Where work the model cannot order decides a row (DDL, or a waiting
# upsert or plain statement of the key in autocommit that may have
# committed it first), the statement has RETURNING (asked for whenever
# another transaction may decide a row when the statement begins, and a
# plain statement takes a running upsert's key only if it has it), and
# the row's fate is taken from it; the checks below then cover it.  A
# round's summary counts the races with plain statements and who won
# them, and the first race of a round that each side won is noted with
# the steps before it.
#
# Lookups: SELECT k, p FROM t WHERE k = n, k = ANY ('{...}') or k IN (...)
# (one key, or up to six, some absent, some repeated), one in three through
# a view of t (tv, which the planner pulls up), also as prepared
# statements with generic plans, and at times from one leaf partition (a
# plain scan of its btree; the model has no partitioned partitions); in
# autocommit, in the session's transaction (READ COMMITTED: its own changes
# seen), and in REPEATABLE READ transactions that only look up (their
# snapshot is their first lookup's).  Keys live, deleted, rolled back, held
# by other open or prepared transactions, by the session's own, bulk keys
# live or gone, new ones; those of partitions that another transaction
# truncated, took out or put in preferred (the lookup waits for its lock).
# At times (a race) one session sends a burst of lookups and, at once,
# another ends its transaction (COMMIT, ROLLBACK, ROLLBACK TO SAVEPOINT,
# COMMIT or ROLLBACK PREPARED), keys that end decides preferred, so that
# snapshots fall anywhere in it, a rollback of a TRUNCATE included.  Since
# transactions with DDL are seldom open long, a scene at times plays in
# one step: a transaction truncates (or detaches, drops, attaches,
# reindexes a leaf), maybe inserts or bulk-inserts, another session looks
# its partition's keys up (and waits), a third races its end; the second
# is at times a REPEATABLE READ transaction that took its snapshot before
# the DDL and looks the keys up again after the end.  The model's rules:
#   - every change of the committed state makes a version, and while a
#     lookup may need them the versions are kept, with the partitions whose
#     storage their commit replaced (TRUNCATE);
#   - a lookup sent at version f and judged at version l took its snapshot
#     at some version i, f <= i <= l (REPEATABLE READ: one of the versions
#     that its transaction's lookups so far allow), and read the
#     partitions attached at some version j, max(i, f) <= j <= l: gunique
#     reads the partition descriptors when the lookup runs, as
#     PostgreSQL's planner does, so a partition attached after the
#     snapshot is read, with the rows the snapshot sees in it;
#   - for some such i and j it returns exactly the rows of its keys the
#     snapshot sees: committed at version i, with the changes of the
#     session's own transaction, in a partition attached at j (or in the
#     leaf read); never a row twice, nor one of a key not asked for;
#   - but a row may be missing from a partition that a TRUNCATE committed
#     after version i and while the lookup ran emptied (the lookup waited
#     for its lock and then reads it empty, as PostgreSQL's plan would);
#     from a leaf, after version i (a plain scan reads what TRUNCATE left);
#   - a serialization failure (40001, not from a leaf) only where a key
#     may be found nowhere and a partition attached at j was truncated
#     after version i (src/README, "Lookups": the storage is newer than
#     the snapshot); a deadlock only if the lookup waited, or raced; 42P01
#     only for a leaf dropped by version j; nothing else;
#   - so that every commit a lookup may see is a version before it is
#     judged, no lookup starts while another session's statement in
#     autocommit that runs DDL, TRUNCATE or the bulk delete is running (it
#     may commit when the model does not see it: once pgbench's lock is
#     released, say; DETACH CONCURRENTLY commits its first transaction and
#     then waits), and no lookup takes a key that a running statement in
#     autocommit writes; nor does such a statement start while a lookup
#     runs (of its keys).  A lookup's verdict, and the candidate versions,
#     are in the failure's message.
#
# Every few steps all sessions end their transactions, and then:
#   - no upsert lock is held (an advisory lock with field4 0x6775, which
#     pg_locks shows as objsubid 26485);
#   - gunique_verify() reports nothing and no key appears twice (while t_k
#     is valid: see "Concurrent builds"), and t_k is in the catalogs as the
#     model has it;
#   - the rows of every partition (attached or not) are the model's;
#   - one lookup of every hot key (and a few more) and of two keys of each
#     partition's share of every bulk finds exactly the model's rows; once
#     a round, EXPLAIN shows a lookup by one key, by an array and by a
#     prepared statement's generic plan as a Custom Scan (GuniqueLookup)
#     with no Append, and EXPLAIN ANALYZE of a live key finds its row;
#   - every live key is refused from another partition (from every other
#     one with 4 partitions), in a subtransaction rolled back, and (18)
#     skipped there by one upsert of them all, through a WITH query (while
#     t_k is valid; refused also while it is invalid after a failed merge);
#   - the server log holds no assertion failure, PANIC, internal error
#     (XX000) or signal other than the test's own SIGKILL;
# and the pgbench load saw no error but "no partition for the row" or a
# deadlock (see load_stop), and its lookups and UPDATEs by the key (of
# keys it inserted lately, planned afresh and from the plan cache, beside
# every DDL of the test: load_touch) no error but a deadlock or a
# serialization failure, nor a key found twice.
#
# Clean restarts: a fast shutdown follows a CHECKPOINT (a checkpoint that
# ends after the save writes WAL after it, and the next start refuses the
# file).  The server log tells whether the start loaded the saved filters
# ("gunique loaded N key ranges and M filters"), refused them (with the
# reason) or found none saved; the round's summary counts each, and a round
# whose clean restarts never loaded a file fails.  After a start that
# loaded one, the checks run at once, so that every loaded summary is
# checked before a statement changes it (and every later probe and lookup
# reads it, as the model judges them).
#
# DETACH CONCURRENTLY scenes (detach_scene): the random steps never run a
# lookup, nor an UPDATE or DELETE of a key, beside a DETACH CONCURRENTLY in
# autocommit (its first transaction commits when the model cannot see it),
# so a scene plays it in one step.  Transactions open before the detach,
# REPEATABLE READ ones included, and others' lookups and UPDATE, DELETE,
# UPDATE of the key and moves by the key of the partition's rows (and of
# others) race its first transaction, run while its second one waits for
# those transactions, and race their end; then the partition is attached
# again, and at times detached and attached again a few times, each raced.
# The model's rules:
#   - the first transaction commits between the DETACH's start and its
#     wait (nothing in the scene holds a lock it waits for: checked in
#     pg_locks), so the model commits it as the statement starts: the
#     partition is then "detaching", out for every later snapshot, in for
#     an earlier one (lookup_rows: attached at i, detaching at j), as
#     PostgreSQL's partition descriptor leaves it out by the active
#     snapshot; the second transaction changes nothing a statement sees;
#   - a statement that raced the first transaction, or an ATTACH, sees the
#     partition in or out: a lookup by its versions, an UPDATE or DELETE by
#     the key finds its row (and changes it) or none (either_done); any
#     other outcome, an error included, fails;
#   - statements that start after the first transaction committed see
#     the partition out: UPDATE and DELETE of its rows find none, those of
#     a REPEATABLE READ snapshot taken before read it.
# Flap scenes (flap_scene): a psql of its own detaches concurrently and
# attaches again, 8 to 29 times, a partition with rows, while the
# sessions (two statements a cycle, one after the other), a pgbench of the
# scene's own (its errors but deadlocks and serialization failures fail
# the test) and the pgbench load look up its keys and others and UPDATE
# and DELETE rows by the key; the model does not follow the loop: the
# partition is in or out for each statement (a lookup may miss its rows,
# an UPDATE or DELETE finds its row or none), and no key is inserted
# meanwhile.  Every lookup maps the partitions its descriptors hold to the
# leaves of the tree (a reader of one before a commit of the loop and of
# the other after it got "partition ... has no leaf of gunique index
# ...", 55000, until the fix of that: see flap_scene).  In half the scenes
# a second psql runs REINDEX INDEX CONCURRENTLY of other partitions' leaves
# beside the loop (a deadlock with an ATTACH, 40P01, stops either loop).
#
# ALTER COLUMN TYPE (op_alter_type): between int and bigint or numeric, in
# autocommit or in a transaction, in turn making a duplicate, keeping
# every key, and turning one key into a free one (a CASE in USING).  A
# duplicate (another row of an attached partition holds the key) must
# fail with a unique violation and change nothing; else the row has the
# new key.  It rewrites every attached partition and rebuilds its indexes
# under AccessExclusiveLock: DDL, waiting for every transaction that
# locked t, and judged with the rows as it ends; for lookups, new storage
# as TRUNCATE's (a snapshot taken before it, then a wait for its lock,
# reads the partitions empty, as in PostgreSQL).  The view of t is made
# again in the same statement (a DO block), and the sessions' prepared
# lookups return the key as numeric (a cached plan must not change its
# result type).  A table detached before keeps its type, and is not
# attached again until t's is that type again.  Not once bulk inserts
# made the table large (a rewrite then takes long).  Run only if the
# server can (alter_probe, once, on a table of its own: without gunique's
# help PostgreSQL refuses to rebuild a gunique index of a partitioned
# table); the summary says why it was skipped.
#
# A second unique index (PostgreSQL 18, rounds 1, 3...: collide_scene):
# t has a column u and a unique btree index t_up on (u, p), made before
# the gunique one in rounds 1, 5... (the executor inserts into it first),
# after it in rounds 3, 7...  A collide scene's plain transaction inserts
# a key, and another session's upsert (ON CONFLICT (k) DO NOTHING, or
# with no conflict target: every unique index an arbiter) collides with
# it on t_up only, on k only, or on both; at times the plain transaction
# then inserts the upsert's key into another partition, deletes its first
# row, and commits or rolls back.  The model predicts the upsert's outcome
# from the rows that end left (see collide_scene): a unique violation on
# t_up where it is not an arbiter, the row skipped where it is, one on k
# where the upsert's row is free of t_up by then and meets its key in the
# other partition (src/README, "ON CONFLICT DO NOTHING", 4; isolation
# upsert-collide), a deadlock only where t_up comes after t_k and the
# target is k (the upsert's entry is in t_k when it waits in t_up); and
# the plain transaction's insert of the upsert's key goes in without
# waiting for it.
#
# Concurrent builds (issue 42): DROP INDEX t_k, CREATE UNIQUE INDEX
# CONCURRENTLY t_k ON t USING gunique (k) and REINDEX INDEX CONCURRENTLY
# t_k, each in autocommit while no other DDL is about (build_scene).  A
# build takes many transactions and waits for the other sessions': it is
# left running, as other DDL that waits, and the sessions' steps go on
# beside it (inserts and UPDATEs of keys other partitions hold are boosted,
# and deletes of the rows that hold a key twice), until it ends (at the
# latest when the checks end every transaction).  Before a build, half the
# time the duplicates are deleted (it may then succeed), at times one is
# made (it must fail); at times another session holds a REPEATABLE READ
# snapshot, which each leaf's build waits for with that leaf ready and the
# next ones not made; and a third session inserts keys held elsewhere
# beside it, at times in a transaction that it leaves open, which inserts
# more of them once the build has ended.  The model's rules (dup_verdict,
# build_done):
#   - t_k is valid, none (dropped), building, or invalid (a build failed);
#     with t_k valid, every statement is judged as before;
#   - none: a key held by another partition goes in (nothing checks it);
#     the model keeps one row of a key per partition, so while t_k is not
#     valid (or a DROP INDEX waits) no statement writes a key into a
#     partition that holds it or may come to (slot_taken);
#   - building: such a key may go in or fail with a unique violation (the
#     leaves become ready one by one, and an insert probes the ready ones);
#   - invalid after a build that failed in its merge: every leaf is built
#     and ready (one held invalid), and every transaction's probe searches
#     them all (the build waited for every writer that might not have
#     probed every leaf; each statement locks its partition's indexes
#     again, and so sees the leaves made ready before it):
#     such a key is refused, and the checks insert every live key
#     elsewhere, refused; after another failure (a leaf's build, a
#     deadlock): either;
#   - a statement sent in one state and judged in another: either (the
#     checks see what it left);
#   - a build that succeeds leaves t_k valid in the catalogs, no key twice
#     in t (a GROUP BY ... HAVING count(*) > 1 query), gunique_verify
#     silent, and in the model no key twice committed, nor in an open or
#     prepared transaction's view with a row of its own (but where a
#     statement still running may have changed it): from then on every
#     statement is judged as with a valid t_k;
#   - a build fails only with a unique violation (or a deadlock, once it
#     waited) of a key that two rows held, committed or in a transaction's
#     view, since it began, and t_k is then invalid (or gone, if CREATE
#     INDEX failed before its first commit); a REINDEX of a valid t_k
#     succeeds (or is a deadlock victim) and leaves it valid;
#   - while t_k is not valid no other DDL, upsert, race or collide scene
#     runs (ON CONFLICT needs a valid arbiter), and a crash is a SIGKILL
#     (a clean restart may save no filter).
# A round's summary counts the steps begun in each state, the builds by
# outcome, and the inserts of keys held elsewhere by state and outcome.
#
# The run is reproducible from its seed, printed at the start: the PRNG
# decides every step, and only what timing decides varies (how far the
# pgbench load gets, and which of two deadlocked sessions is the victim).
#
#   GUNIQUE_STATEFUL_SEED=n       the seed (default: 2)
#   GUNIQUE_STATEFUL_STEPS=n      steps per table (default: 300, a CI run of
#                                 about two minutes)
#   GUNIQUE_STATEFUL_ROUNDS=n     tables made (default: 3), in turn of
#   GUNIQUE_STATEFUL_PARTITIONS=  each of these numbers of partitions
#     n,n...                      (default: 4,40,80: 80 for a group filter
#                                 that tags keys by partition, src/README
#                                 invariant 6)
#   GUNIQUE_STATEFUL_CHECK_EVERY=n  steps between checks (default: 10)
#   GUNIQUE_STATEFUL_LOOKUPS=0    no lookups: a seed makes the steps it made
#                                 before lookups were added (default: 1)
#   GUNIQUE_STATEFUL_MORE=0       none of the operations of issue 39 (DETACH
#                                 CONCURRENTLY and flap scenes, ALTER COLUMN
#                                 TYPE, the second unique index, the load's
#                                 lookups, a check after each restart that
#                                 loaded filters): a seed makes the steps it
#                                 made before them (default: 1; 0 with
#                                 GUNIQUE_STATEFUL_LOOKUPS=0)
#   GUNIQUE_STATEFUL_CONCURRENT=0  none of the concurrent builds of issue
#                                 42: a seed makes the steps it made before
#                                 them (default: 1; 0 with
#                                 GUNIQUE_STATEFUL_MORE=0)
#   GUNIQUE_STATEFUL_WEIGHTS=     the weights of these operations, by the
#     name=n,...                  names in @ops (e.g. "flap scene=20,load=10")
#   GUNIQUE_STATEFUL_TIMES=1      each round notes the time its steps took,
#                                 by operation
#
# A long run: many tables rather than very many steps each, as a table
# grows with its bulk inserts (each large one gives the filters more keys
# than all before it, up to 400,000), e.g.
#   GUNIQUE_STATEFUL_SEED=7 GUNIQUE_STATEFUL_ROUNDS=20 GUNIQUE_STATEFUL_STEPS=1000 \
#     make installcheck REGRESS= ISOLATION= PROVE_TESTS=t/006_stateful.pl
#
# To keep every outcome predictable, DDL runs only while no other session
# has DDL open or waiting, UPDATE and DELETE pick rows no other open
# transaction has touched, and the checks run once every session has ended
# its transaction (prepared ones are finished then, too).
#
# (The seeds and steps below are those of the test before lookups were
# added: GUNIQUE_STATEFUL_LOOKUPS=0 makes them again.)
# On the tree before the fixes of issue 13's items 1 and 5 (PostgreSQL 15)
# it found:
#   - item 1, a group filter rebuilt by a bulk insert in a transaction that
#     took a partition out, outliving the ROLLBACK: its keys are then
#     accepted in other partitions.  The default run (seed 2: BEGIN; DROP
#     TABLE t_12; bulk insert; ROLLBACK at step 210 of the 40-partition
#     round), and seeds 3, 4, 5 and 7 (with DETACH PARTITION) of 300 steps;
#   - item 5, inserts beside REINDEX [INDEX|TABLE] CONCURRENTLY:
#     GUNIQUE_STATEFUL_PARTITIONS=4 GUNIQUE_STATEFUL_ROUNDS=1
#     GUNIQUE_STATEFUL_STEPS=1000 with seed 13 ("XX000 index N is missing
#     from its gunique index tree" in the pgbench load, step 619) and seed 11
#     (a load backend killed by SIGSEGV at step 209, while REINDEX INDEX
#     CONCURRENTLY waited); timing decides, so such runs may need repeating.
# With upserts (PostgreSQL 18) it found, on the tree of 72d9f91 and so
# still at 3b596b2, an ON CONFLICT DO NOTHING failing with a unique
# violation for a key a partition held all along, while another
# transaction had truncated that partition and then inserted (rebuilding
# its summary), and rolled back: the conflict check ruled the partition
# out by the summary of a transaction in progress (seed 3, 600 steps,
# step 319 of the 4-partition round, with the test's first weights; about
# half the runs).  Without the upsert lock, seeds 7 and 8 (600 steps, the
# 40-partition round) fail with a unique violation between two upserts of
# one key.
# With the flap scenes (issue 39), on the tree before 5f5bc4f, lookups and
# UPDATE and DELETE by the key failed with 55000 "partition ... has no
# leaf of gunique index ..." beside a loop of DETACH CONCURRENTLY and
# ATTACH: the default run, in the 40-partition round, at step 66 on 15,
# 165 on 17 and 15 on 18 (the scene's pgbench; timing decides, so not
# every run); GUNIQUE_STATEFUL_WEIGHTS="flap scene=20,load=10"
# GUNIQUE_STATEFUL_PARTITIONS=20 makes it likelier.
# With the concurrent builds (issue 42), on the tree before the light
# probes' fix of that issue (spec light-open-reindex), the pgbench load's
# inserts failed with XX000 "could not open relation with OID ..." beside
# REINDEX INDEX CONCURRENTLY of leaves and of t_k: a light probe locked a
# leaf its group listed, which the REINDEX had dropped meanwhile, and
# opened it (seed 7 on PostgreSQL 15, step 73 of the 80-partition round;
# timing decides, so not every run).  With the merge check of a
# concurrent build left out, seed 2 fails at step 12 of the first round
# (a build over a duplicate succeeds); with the tree marked valid before
# the merge, at the same step (a build failing on a duplicate leaves it
# valid).  Without the wait for writers before the merge it passes: each
# leaf's CREATE INDEX CONCURRENTLY waits for the statements older than its
# validation, and a later statement locks its partition's indexes again,
# processing the invalidations that make it probe the leaves ready by
# then.
#
# The model, the sessions and the driver are modules, in t/lib:
# GuniqueStatefulModel (what t must hold, and what a statement may do),
# GuniqueStatefulSessions (psql sessions, the control session, the trace
# and failures) and GuniqueStatefulDriver (running and judging statements,
# the random operations, a step, the pgbench load).  This file is the plan:
# the settings and the seed, the operations and their weights, the scenes,
# the checks and the rounds.

use strict;
use warnings;
use PostgreSQL::Test::Cluster;
use PostgreSQL::Test::Utils;
use Test::More;
use IPC::Run;
use Time::HiRes qw(time usleep);
use List::Util qw(min max);
use FindBin;
use lib "$FindBin::RealBin/lib";
use GuniqueOnConflict;
use GuniqueStatefulModel;
use GuniqueStatefulSessions;
use GuniqueStatefulDriver;

my $seed = $ENV{GUNIQUE_STATEFUL_SEED} // 2;
my %total;    # counts over the rounds
my $steps = $ENV{GUNIQUE_STATEFUL_STEPS} // 300;
my $rounds = $ENV{GUNIQUE_STATEFUL_ROUNDS} // 3;
my $check_every = $ENV{GUNIQUE_STATEFUL_CHECK_EVERY} // 10;
my $lookups = $ENV{GUNIQUE_STATEFUL_LOOKUPS} // 1;
# the operations of issue 39 (DETACH CONCURRENTLY and flap scenes, ALTER
# COLUMN TYPE, a second unique index, the load's lookups, a check after a
# restart that loaded filters)
my $more = $lookups && ($ENV{GUNIQUE_STATEFUL_MORE} // 1);
# the concurrent builds of t_k (DROP INDEX, CREATE INDEX CONCURRENTLY,
# REINDEX INDEX CONCURRENTLY), and the inserts of keys held elsewhere beside
# them
my $conc = $more && ($ENV{GUNIQUE_STATEFUL_CONCURRENT} // 1);
my @sizes = split /,/, ($ENV{GUNIQUE_STATEFUL_PARTITIONS} // '4,40,80');
my $nsess = 3;
note "seed $seed, $steps steps, $rounds rounds: reproduce with "
  . "GUNIQUE_STATEFUL_SEED=$seed GUNIQUE_STATEFUL_STEPS=$steps "
  . "GUNIQUE_STATEFUL_ROUNDS=$rounds";
srand($seed);

my $node = PostgreSQL::Test::Cluster->new('stateful');
$node->init;
$node->append_conf(
	'postgresql.conf', qq{
shared_preload_libraries = 'gunique'
max_prepared_transactions = 10
max_connections = 40
deadlock_timeout = 100ms
autovacuum = off
restart_after_crash = on
log_line_prefix = '%m [%p] %e: '
log_min_messages = warning
});
$node->start;
# INSERT ... ON CONFLICT DO NOTHING across partitions: PostgreSQL 18 only
# upserts where the server arbitrates ON CONFLICT with gunique (18, or 15
# and 17 with the core change of contrib-patches/)
my $pg18 = on_conflict_supported($node);
$node->safe_psql(
	'postgres', q{
CREATE EXTENSION gunique;
CREATE SEQUENCE load_k START 1000000000;
CREATE TABLE load_out (state text, msg text);
-- one INSERT of a new key by the pgbench load; any error is recorded
CREATE FUNCTION load_insert(p int) RETURNS void LANGUAGE plpgsql AS $f$
BEGIN
	BEGIN
		INSERT INTO t VALUES (p, nextval('load_k'));
	EXCEPTION WHEN OTHERS THEN
		INSERT INTO load_out VALUES (SQLSTATE, SQLERRM);
	END;
END
$f$;
-- a lookup and an UPDATE by the key of a key the load inserted lately
-- (d before the last), each planned afresh or from the plan cache; any
-- error is recorded
CREATE SEQUENCE load_touches;
CREATE FUNCTION load_touch(d int) RETURNS void LANGUAGE plpgsql AS $f$
DECLARE
	key bigint := (SELECT last_value FROM load_k) - d;
	n bigint;
BEGIN
	PERFORM nextval('load_touches');
	BEGIN
		IF d % 2 = 0 THEN
			SELECT count(*) INTO n FROM t WHERE k = key;
			UPDATE t SET v = v + 1 WHERE k = key;
		ELSE
			EXECUTE format('SELECT count(*) FROM t WHERE k = %s', key) INTO n;
			EXECUTE format('UPDATE t SET v = v + 1 WHERE k = %s', key);
		END IF;
		IF n > 1 THEN
			INSERT INTO load_out VALUES ('touch twice', format('key %s found %s times', key, n));
		END IF;
	EXCEPTION WHEN OTHERS THEN
		INSERT INTO load_out VALUES ('touch ' || SQLSTATE, SQLERRM);
	END;
END
$f$;
-- would inserting k into the partition of p be refused?  (rolled back)
CREATE FUNCTION try_insert(p int, k int) RETURNS text LANGUAGE plpgsql AS $f$
BEGIN
	BEGIN
		INSERT INTO t VALUES (p, k);
		RAISE EXCEPTION USING ERRCODE = 'P0009';
	EXCEPTION
		WHEN SQLSTATE 'P0009' THEN RETURN 'inserted';
		WHEN OTHERS THEN RETURN SQLSTATE;
	END;
END
$f$;
});
# The sessions and the driver run against this cluster (and driver_on
# takes from the PRNG: see there).
sessions_on($node, $seed);
driver_on(node => $node, more => $more, lookups => $lookups, pg18 => $pg18, sessions => $nsess);

#
# The operations, and their weights (GUNIQUE_STATEFUL_WEIGHTS sets them by
# name): each makes an action for the session of a step (step, in the
# driver), or undef if it does not apply now; a scene, a crash and the
# start of the pgbench load are played by themselves (play).
#
my @ops = (
	[ 12, 'insert', sub { op_insert($_[0], 1) } ],
	[ 4, 'insert many', sub { op_insert($_[0], 2 + int(rand(4))) } ],
	[ 3, 'copy', \&op_copy ],
	[ 3, 'update key', \&op_update_key ],
	[ 3, 'update keeping key', \&op_update_keep ],
	[ 3, 'move', \&op_move ],
	[ 3, 'delete', \&op_delete ],
	[ 2, 'bulk', sub { op_bulk($_[0], 0) } ],
	[ 1, 'bulk large', sub { op_bulk($_[0], 1) } ],
	[ 1, 'bulk delete', \&op_bulk_delete ],
	[ 6, 'begin', \&op_begin ],
	[ 3, 'commit', sub { op_end($_[0], 'COMMIT') } ],
	[ 3, 'rollback', sub { op_end($_[0], 'ROLLBACK') } ],
	[ 1, 'prepare', sub { op_end($_[0], 'PREPARE') } ],
	[ 1, 'commit prepared', sub { op_finish_prepared($_[0], 1) } ],
	[ 1, 'rollback prepared', sub { op_finish_prepared($_[0], 0) } ],
	[ 2, 'savepoint', \&op_savepoint ],
	[ 2, 'rollback to', \&op_rollback_to ],
	[ 1, 'release', \&op_release ],
	[ 2, 'detach', sub { op_detach($_[0], 0) } ],
	[ 1, 'detach concurrently', sub { op_detach($_[0], 1) } ],
	[ 3, 'attach', \&op_attach ],
	[ 1, 'drop', \&op_drop ],
	[ 2, 'truncate', \&op_truncate ],
	[ 1, 'create', \&op_create ],
	[ 1, 'reindex leaf', sub { op_reindex($_[0], 'leaf') } ],
	[ 2, 'reindex leaf concurrently', sub { op_reindex($_[0], 'leafconc') } ],
	[ 1, 'reindex table', sub { op_reindex($_[0], 'table') } ],
	[ 1, 'reindex table concurrently', sub { op_reindex($_[0], 'tableconc') } ],
	[ 1, 'vacuum', sub { op_reindex($_[0], 'vacuum') } ],
	[ 1, 'crash', sub { return if grep { $_->{pending} } @sess or $M{load}; return { play => \&crash }; } ],
	[ 1, 'load', sub { return if $M{load}; return { play => \&load_start }; } ],
);
# Upserts only on PostgreSQL 18 (15 and 17 refuse ON CONFLICT on the
# table): there the operations, and so the seeds' steps, are as before.
push @ops,
  [ 6, 'upsert', sub { op_upsert($_[0], 1) } ],
  [ 4, 'upsert many', sub { op_upsert($_[0], 2 + int(rand(5))) } ],
  [ 3, 'race scene', \&op_race_scene ]
  if $pg18;
# Lookups (with GUNIQUE_STATEFUL_LOOKUPS=0 the steps are those of before)
push @ops,
  [ 10, 'lookup', sub { op_lookup($_[0]) } ],
  [ 3, 'lookup race', \&op_lookup_race ],
  [ 2, 'begin repeatable read', \&op_begin_rr ],
  [ 2, 'lookup scene', \&op_lookup_scene ]
  if $lookups;
# The operations of issue 39 (with GUNIQUE_STATEFUL_MORE=0 the steps are
# those of before them)
push @ops,
  [ 1, 'detach concurrently scene', \&op_detach_scene ],
  [ 1, 'alter column type', \&op_alter_type ],
  [ 1, 'flap scene', \&op_flap_scene ]
  if $more;
push @ops, [ 3, 'collide scene', \&op_collide_scene ] if $more && $pg18;
# The concurrent builds (with GUNIQUE_STATEFUL_CONCURRENT=0 the steps are
# those of before them)
push @ops,
  [ 1, 'drop index', \&op_drop_index ],
  [ 0, 'create index concurrently', \&op_build_scene ],
  [ 1, 'reindex index concurrently', \&op_reindex_scene ],
  [ 1, 'insert colliding', \&op_insert_colliding ],
  [ 0, 'dedup', \&op_dedup ]
  if $conc;
# weights set by GUNIQUE_STATEFUL_WEIGHTS (name=weight,...)
for my $w (split /,/, $ENV{GUNIQUE_STATEFUL_WEIGHTS} // '')
{
	my ($name, $weight) = $w =~ /^\s*(.*?)\s*=\s*(\d+)\s*$/ or die "GUNIQUE_STATEFUL_WEIGHTS: $w";
	my ($op) = grep { $_->[1] eq $name } @ops or die "GUNIQUE_STATEFUL_WEIGHTS: no operation \"$name\"";
	$op->[0] = $weight;
}

# Weights added to those of @ops for session d's step.  A transaction
# that took a partition out (or emptied one) tends to outgrow the
# filters, and then to roll back (a stale group filter outliving the
# rollback was found so).
sub boost
{
	my ($d) = @_;
	my $t = $d->{tx};
	my $ddl = $t && ($t->{ddl} || %{ $t->{trunc} });
	my $big = $ddl && @{ $t->{bulks} };
	return (
		'detach' => $t && !$ddl ? 4 : 0,
		'drop' => $t && !$ddl ? 2 : 0,
		# (and, for lookups, more transactions that truncate: a lookup
		# beside them may wait for their locks, or race with their end)
		'truncate' => $t && !$ddl ? ($lookups ? 6 : 2) : 0,
		'bulk large' => $ddl && !$big ? 40 : 0,
		# beside the pgbench load, rebuild leaves while it inserts
		'reindex leaf concurrently' => $M{load} ? 15 : 0,
		'reindex table concurrently' => $M{load} ? 3 : 0,
		# and detach and attach beside its lookups and UPDATEs by the key;
		# more often until a run has had one (its end checks that it has:
		# seed 2 once went without)
		'detach concurrently scene' => ($more && $M{load} ? 3 : 0)
		  + ($more && !$total{dc_scenes} && !($M{dc} && $M{dc}{scenes}) ? 4 : 0),
		'flap scene' => $more && $M{load} ? 3 : 0,
		'rollback' => $big ? 6 : 0,
		'rollback to' => $big ? 4 : 0,
		# upserts of keys other transactions hold, or other upserts wait
		# for: more of them (op_upsert prefers those keys)
		'upsert' => $pg18 && grep({ %{ $_->{where} } } others($t)) ? 30 : 0,
		'upsert many' => $pg18 && grep({ %{ $_->{where} } } others($t)) ? 10 : 0,
		# lookups of keys other transactions decide, and races with the
		# end of a transaction that truncated or took a partition out
		# (and in the session's own transaction, which is seldom long)
		'lookup' => !$lookups ? 0
		  : ($t ? 8 : 0) + (grep({ %{ $_->{where} } } others($t)) ? 4 : 0)
		  + (grep({ %{ $_->{trunc} } || $_->{ddl} } others($t)) ? 10 : 0),
		'lookup race' => !$lookups || $t ? 0
		  : (%prepared || grep({ $_ != $d && $_->{tx} && !$_->{pending} } @sess) ? 4 : 0)
		  + (grep({ $_ != $d && $_->{tx} && !$_->{pending} && ($_->{tx}{ddl} || %{ $_->{tx}{trunc} }) } @sess) ? 8 : 0),
		# the concurrent builds: t_k made again soon after it is dropped,
		# an invalid one finished (or dropped), and meanwhile keys held
		# elsewhere inserted, and duplicates deleted
		!$conc ? () : build_boost($d));
}

# Has a build of t_k ("CREATE INDEX CONCURRENTLY: 00000", ...) had that
# outcome, in an earlier round or this one?
sub build_reached
{
	my ($outcome) = @_;
	return $total{"gb $outcome"} || $M{gb}{$outcome};
}

sub build_boost
{
	my ($d) = @_;
	my $g = gidx_state();
	my $about = $g ne 'valid' || $M{greindex};
	return (
		'create index concurrently' => $g eq 'none' ? 20 : 0,
		'reindex index concurrently' => $g eq 'invalid' ? 15 : $M{load} ? 2 : 0,
		# (an invalid t_k is kept for a REINDEX until one has finished it)
		'drop index' => $g eq 'invalid'
		  && build_reached('REINDEX INDEX CONCURRENTLY of an invalid tree: 00000') ? 3 : 0,
		'insert colliding' => ($about ? 10 : 0) + ($d->{tx} && $d->{tx}{beside_build} && $g eq 'valid' ? 15 : 0),
		'dedup' => $g ne 'valid' && dup_keys($d->{tx}) ? 5 : 0,
		# (which the steps with t_k not valid make rarer: DDL waits)
		'alter column type' => $M{alter} ? 0 : 2);
}

#
# Scenes: several statements of several sessions in one step, each judged
# as any other.
#

# Lookups beside DDL in a transaction, which is seldom open long: a scene
# of several statements in one step (see lookup_scene).
sub op_lookup_scene
{
	my ($d) = @_;
	return if $d->{tx} || !ddl_ok($d) || grep { $_->{pending} } @sess;
	return { play => \&lookup_scene };
}

# Session d begins a transaction (a savepoint, at times), truncates a
# partition (or detaches, drops or attaches one, or reindexes a leaf), and
# at times inserts or bulk-inserts (rebuilding summaries); another session
# looks keys up (those of the partitions d changed preferred: it waits for
# their locks); then a third sends a burst of lookups and at once d
# commits, rolls back, or rolls back to the savepoint.  At times the second
# session is a REPEATABLE READ transaction that took its snapshot before
# the DDL, and looks the keys up again after d's end (a TRUNCATE committed
# since: a serialization failure, or the rows).  Each statement is judged
# as any other; the scene stops where one of d's waits.
sub lookup_scene
{
	my ($d) = @_;
	trace("$d->{s}{name}: scene: DDL in a transaction, lookups beside it");
	$M{lk}{scenes}++;
	my $rd = pick(grep { $_ != $d && !$_->{pending} && !($_->{tx} && $_->{tx}{aborted}) } @sess);
	if ($rd && !$rd->{tx} && rand() < 0.5)
	{
		run_action($rd, op_begin_rr($rd));
		my $first = op_lookup($rd);
		run_action($rd, $first) if $first;
		return if $rd->{pending};
	}
	run_action($d, op_begin($d));
	my $t = $d->{tx} or return;
	my $save = rand() < 0.3 && op_savepoint($d);
	run_action($d, $save) if $save;
	my $r = rand();
	my $ddl = ($r < 0.55 ? op_truncate($d)
		  : $r < 0.7 ? op_detach($d, 0)
		  : $r < 0.82 ? op_reindex($d, 'leaf')
		  : $r < 0.9 ? op_drop($d)
		  : op_attach($d)) || op_truncate($d);
	run_action($d, $ddl) if $ddl;
	return if $d->{pending} || $t->{aborted};
	# rebuild the truncated leaf's summary (as a TRUNCATE rolled back once
	# was found with, src/README "Lookups"), or others'
	$r = rand();
	my $more = $r < 0.35 && defined $ddl->{trunc_slot} ? op_insert_into($d, $ddl->{trunc_slot}, 1 + int(rand(3)))
	  : $r < 0.5 ? op_insert($d, 1 + int(rand(3)))
	  : $r < 0.65 ? op_bulk($d, 0) : undef;
	run_action($d, $more) if $more;
	return if $d->{pending};
	# reindexed: its leaf's keys
	my @keys = race_keys($t);
	push @keys, sort { $a <=> $b } keys %{ $M{rows}{$1} // {} }
	  if $ddl && $ddl->{sql} =~ /REINDEX INDEX t_(\d+)_k_idx/;
	my $lb = $rd && !$rd->{pending} && op_lookup($rd, undef, \@keys);
	run_action($rd, $lb) if $lb;
	my $end = ($save && !$t->{aborted} && rand() < 0.4 && op_rollback_to($d))
	  || op_end($d, !$t->{aborted} && rand() < 0.5 ? 'COMMIT' : 'ROLLBACK');
	my $c = pick(grep { $_ != $d && !$_->{pending} && !$_->{tx} } @sess);
	my $lc = $c && op_lookup($c, \@keys);
	if ($lc)
	{
		$lc->{raced} = 1;
		run_action($c, $lc, 1);
	}
	run_action($d, $end);
	settle($c, 1) if $lc && $c->{pending};
	return unless $rd && $rd->{tx} && $rd->{tx}{rr};
	settle($rd, 1) if $rd->{pending};
	my $again = !$rd->{pending} && op_lookup($rd, undef, \@keys);
	run_action($rd, $again) if $again;
}

# A race of an upsert and a plain statement of one key, set up in one
# step (the random steps seldom leave a statement waiting long enough for
# another session to take its key): session d (h) inserts a free key k2
# in its transaction; session x runs an upsert, or a plain INSERT, COPY
# or UPDATE, of another free key k1 and k2 (its row of k1 is then in), or
# of k2 alone, and waits for h; session y runs the other kind, of k1 (and
# k2), or of k2: it waits for x's row of k1, or for h; then h commits or
# rolls back, and whichever of x and y is first decides the other's row
# (src/README, "ON CONFLICT DO NOTHING", point 5).  x and y may be in
# transaction blocks.  The scene only picks the keys: each statement is
# judged as any other, and it stops where one does not wait.
sub op_race_scene
{
	my ($d) = @_;
	return if grep { $_->{pending} || ($_->{tx} && ($_->{tx}{aborted} || $_->{tx}{rr})) } @sess;
	return if other_ddl(undef) || gidx_state() ne 'valid';
	return if race_free_keys() < 2;
	return { play => \&race_scene };
}

# Hot keys that no row holds, nor any transaction writes.
sub race_free_keys
{
	return grep { !key_slots(undef, $_) && !uncertain(undef, $_) } 1 .. $M{hot};
}

sub race_scene
{
	my ($d) = @_;
	trace("$d->{s}{name}: scene: an upsert races a plain statement");
	$M{race}{scenes}++;
	my @free = race_free_keys();
	my $k2 = pick(@free);
	my $k1 = pick(grep { $_ != $k2 } @free);
	my $x = pick(grep { $_ != $d } @sess);
	my ($y) = grep { $_ != $d && $_ != $x } @sess;
	run_action($d, op_begin($d)) unless $d->{tx};
	my $t = $d->{tx} or return;
	my $ah = race_plain($d, [$k2], 1) or return;
	run_action($d, $ah);
	return if $d->{pending} || $t->{aborted};
	my $upfirst = rand() < 0.5;
	my $r = rand();
	my ($kx, $ky) = $r < 0.4 ? ([ $k1, $k2 ], [$k1]) : $r < 0.7 ? ([ $k1, $k2 ], [ $k1, $k2 ]) : ([$k2], [$k2]);
	my $ax = $upfirst ? race_upsert($x, $kx) : race_plain($x, $kx);
	run_action($x, $ax) if $ax;
	if ($x->{pending})
	{
		my $ay = $upfirst ? race_plain($y, $ky) : race_upsert($y, $ky);
		run_action($y, $ay) if $ay && race_ok($y, $ay->{ops}, 1);
	}
	run_action($d, op_end($d, rand() < 0.5 ? 'COMMIT' : 'ROLLBACK'));
}

# A plain statement of session d that inserts keys: an INSERT, a COPY, or
# (of one key, not $insert) an UPDATE of a live key to it.
sub race_plain
{
	my ($d, $keys, $insert) = @_;
	my $t = $d->{tx};
	my @slots = attached_slots($t) or return;
	my $r = $insert ? 0.5 : rand();
	my $u = @$keys == 1 && $r < 0.25 && pick(live_keys_untouched($t));
	if ($u)
	{
		my ($k, $slot) = @$u;
		return {
			sql => "UPDATE t SET k = $keys->[0] WHERE k = $k RETURNING k",
			row => [ $slot, $k ],
			ops => [ [ 'del', $slot, $k ], [ 'ins', $slot, $keys->[0] ] ],
			done => \&rows_done
		};
	}
	my @ops = map { [ 'ins', pick(@slots), $_ ] } @$keys;
	my $a = {
		sql => 'INSERT INTO t VALUES ' . join(', ', map { '(' . rand_p($_->[1]) . ", $_->[2])" } @ops),
		ops => \@ops,
		done => \&rows_done
	};
	return $r >= 0.75 ? as_copy($a) : $a;
}

# An upsert of keys by session d (into t, or at times into a partition).
sub race_upsert
{
	my ($d, $keys) = @_;
	my @slots = attached_slots($d->{tx}) or return;
	my $direct = rand() < 0.3 ? pick(@slots) : undef;
	my @rows = map { my $slot = $direct // pick(@slots); [ $slot, rand_p($slot), $_ ] } @$keys;
	return upsert_action($d, \@rows, $direct);
}

#
# A second unique index (PostgreSQL 18, rounds 1, 3, 5...): t has a
# column u and a unique btree index t_up on (u, p), made before the gunique
# one (the executor inserts into it first, and finds a conflict there
# first) in rounds 1, 5, 9..., after it in rounds 3, 7...  Only collide
# scenes write u: their keys are a range of their own (ulo to uhi, never
# taken by another statement: op_upsert leaves them alone, and UPDATE and
# DELETE pick hot keys), each row with u = k % 50 and p = 10 * slot + 5, so
# that two of them collide on t_up where they share u in one partition.
# A scene, in one step, from a state where no transaction holds such a
# key: a plain transaction (session b) inserts k1, and another session's
# upsert of one row, INSERT ... ON CONFLICT [(k)] DO NOTHING, into t or
# into a partition, collides with it:
#   - on t_up only ('u': k2, with k1's u, into k1's partition): the
#     upsert's check of k passes, and it waits for b in the executor (the
#     pre-check of its arbiter t_up, with no conflict target; else the
#     insertion into t_up); then, with (k), a unique violation on t_up if
#     b committed (t_up is not an arbiter), a row skipped without it (every
#     unique index is then an arbiter), the row in if b rolled back or
#     deleted k1 first.  At times b then inserts k2 into another partition
#     while the upsert waits for it: the upsert holds k2's upsert lock,
#     and b goes in without waiting for it (the holder waits for b: src/
#     README, "ON CONFLICT DO NOTHING", 4), but where t_up comes after t_k
#     and the upsert has (k) its entry of k2 is in t_k already, and b waits
#     for it: a deadlock, as within one table (one of them 40P01).  If b
#     deleted k1 and committed, the upsert's row is free of t_up and meets
#     k2 in b's other partition: a unique violation, where PostgreSQL within
#     one table would have skipped the row (src/README, 4; isolation
#     upsert-collide);
#   - on k only ('k': k1 into another partition, where k1's u is free):
#     the upsert waits for b in gunique's check, and skips its row if b
#     committed, inserts it if b rolled back or deleted k1 first;
#   - on both ('both': k1 into k1's partition): skipped if b committed;
#   - with b's row committed before ('committed', as 'u'): a unique
#     violation on t_up at once with (k), skipped without.
# The variants come in turn (committed with (k), committed without, u, k,
# u, both), so that each outcome is reached in a round.  The upsert's
# outcome is judged when it ends, by the rows b's end left.
#
# Does a row of t's view in slot's partition hold u on t_up?
sub u_held
{
	my ($t, $slot, $u) = @_;
	my %k = map { $_ => 1 } keys %{ $M{rows}{$slot} // {} }, ($t ? keys %{ $t->{rows}{$slot} // {} } : ());
	return scalar grep { my $k = $_; is_ukey($k) && $k % 50 == $u && grep { $_ == $slot } key_slots($t, $k) } keys %k;
}

sub op_collide_scene
{
	my ($d) = @_;
	return unless $M{uidx};
	return if grep { $_->{pending} || ($_->{tx} && ($_->{tx}{aborted} || $_->{tx}{rr})) } @sess;
	return if other_ddl(undef) || gidx_state() ne 'valid' || scalar(attached_slots(undef)) < 2;
	return if grep { grep { is_ukey($_) } keys %{ $_->{where} } } (map { $_->{tx} // () } @sess), values %prepared;
	return { play => \&collide_scene };
}

# An insert of key k with its u into slot's partition, by session d: it
# must go in (its keys are free), in a scene sc without waiting for the
# upsert it races (or, where a deadlock is possible, as its victim).
sub u_insert
{
	my ($d, $slot, $k, $sc) = @_;
	return {
		sql => 'INSERT INTO t (p, k, u) VALUES (' . (10 * $slot + 5) . ", $k, " . ($k % 50) . ')',
		ops => [ [ 'ins', $slot, $k ] ],
		done => sub {
			my ($d, $st, $a) = @_;
			my $dl = $sc && $sc->{deadlock};
			$M{collide}{'b inserts the key the upsert waits with'}{ $st . ($a->{waited} ? ' (waited)' : '') }++ if $sc;
			fail_now("$d->{s}{name}: $a->{sql}: $st" . ($a->{waited} ? ' (it waited)' : '')
				  . ' where the model allows 00000' . ($dl ? ' or 40P01 (a deadlock)' : ' without waiting')
				  . ($st ne '00000' ? ": $d->{s}{lasterr}" : ''))
			  unless $st eq '00000' && (!$a->{waited} || $dl) || ($st eq '40P01' && $dl);
			delete $a->{race};
			rows_done($d, $st, $a);
		}
	};
}

sub collide_scene
{
	my ($b) = @_;
	my $a = pick(grep { $_ != $b } @sess);
	# the variants in turn (the first two are certain to end in a unique
	# violation on t_up and in a row skipped for it), the target at random
	my $var = (qw(committed committed u k u both))[ ($M{collide}{scenes} // 0) % 6 ];
	my @att = attached_slots(undef);
	my $s = pick(@att);
	my $s2 = pick(grep { $_ != $s } @att);
	my @free = grep { !key_slots(undef, $_) && !uncertain(undef, $_) } $M{ulo} .. $M{uhi};
	my $k1 = pick(grep { !u_held(undef, $s, $_ % 50) && !u_held(undef, $s2, $_ % 50) } @free);
	return unless defined $k1;
	my $u = $k1 % 50;
	my $k2 = pick(grep { $_ != $k1 && $_ % 50 == $u } @free);
	return unless defined $k2;
	my ($bs, $as, $ak) = $var eq 'k' ? ($s2, $s, $k1) : $var eq 'both' ? ($s, $s, $k1) : ($s, $s, $k2);
	my $target = ($M{collide}{scenes} // 0) < 2 ? ($M{collide}{scenes} // 0 ? '' : ' (k)') : rand() < 0.5 ? ' (k)' : '';
	my $into = rand() < 0.3 ? "t_$as" : 't';
	my $sc = { var => $var, target => $target, b => $b, k1 => $k1, k2 => $k2, u => $u, bs => $bs, s2 => $s2, as => $as, ak => $ak };
	trace("$b->{s}{name}: scene: a plain transaction's row ($bs:$k1, u $u) and $a->{s}{name}'s upsert ($as:$ak) collide ($var$target)");
	$M{collide}{scenes}++;
	run_action($b, op_begin($b)) unless $b->{tx} || ($var eq 'committed' && rand() < 0.5);
	run_action($b, u_insert($b, $bs, $k1));
	return if $b->{pending} || ($b->{tx} && $b->{tx}{aborted});
	run_action($b, op_end($b, 'COMMIT')) if $var eq 'committed' && $b->{tx};
	$sc->{btx} = $b->{tx};
	run_action(
		$a,
		{
			sql => "INSERT INTO $into (p, k, u) VALUES (" . (10 * $as + 5) . ", $ak, $u) ON CONFLICT$target DO NOTHING RETURNING p, k",
			ops => [ [ 'ins', $as, $ak ] ],
			upsert => 1,
			returning => 1,
			collide => $sc,
			done => \&collide_done
		});
	return unless $b->{tx};
	if ($a->{pending} && $var eq 'u' && rand() < 0.5 && !u_held(undef, $s2, $u))
	{
		$sc->{k2_in_s2} = 1;
		$sc->{deadlock} = $M{uidx} eq 'after' && $target;
		run_action($b, u_insert($b, $s2, $k2, $sc));
		wait_any() while $a->{pending} && $b->{pending};
	}
	settle($b, 1) if $b->{pending};
	return if $b->{pending} || !$b->{tx};
	if (!$b->{tx}{aborted} && $var ne 'both' && rand() < 0.4)
	{
		$sc->{deleted} = 1;
		run_action($b, { sql => "DELETE FROM t WHERE k = $k1 RETURNING k", row => [ $bs, $k1 ], ops => [ [ 'del', $bs, $k1 ] ], done => \&rows_done });
	}
	# (the first 'u' rolls back: its row is certain to go in)
	run_action($b, op_end($b, $b->{tx}{aborted} || $M{collide}{scenes} == 3 || rand() < 0.4 ? 'ROLLBACK' : 'COMMIT'))
	  if $b->{tx} && !$b->{pending};
	settle($a, 1) if $a->{pending};
}

# The end of a collide scene's upsert: judged by the rows that b's end
# left (see above).
sub collide_done
{
	my ($d, $st, $a) = @_;
	my $sc = $a->{collide};
	my $t = $d->{tx};
	my ($var, $target, $as, $ak, $u) = @$sc{qw(var target as ak u)};
	my $what = "$d->{s}{name}: $a->{sql}";
	my $locks = ctl_query(
		"SELECT count(*) FROM pg_locks WHERE pid = $d->{s}{pid} AND locktype = 'advisory' AND objsubid = 26485");
	fail_now("$what: $st, and the session still holds $locks upsert locks") if $locks ne '0';
	# does b still hold (insert or delete, uncommitted) a row it waited for?
	my $bt = $sc->{b}{tx};
	my $bpend = $bt && $sc->{btx} && $bt == $sc->{btx} && !$bt->{dead}
	  && (exists $bt->{where}{ $sc->{k1} } || exists $bt->{where}{ $sc->{k2} });
	my ($v, $why);
	if ($bpend)
	{
		($v, $why) = ('wait', "b's transaction still holds its rows");
	}
	else
	{
		my $hk = live_slots($t, $ak) ? 1 : 0;
		my $hu = u_held($t, $as, $u);
		$why = "k $ak " . ($hk ? 'held' : 'free') . ", u $u in t_$as " . ($hu ? 'held' : 'free');
		if ($var eq 'k' || $var eq 'both')
		{
			# it waited in gunique's check of k
			$v = $hk ? 'skip' : $hu ? ($target ? '23505' : 'skip') : 'in';
		}
		else
		{
			# its check of k passed, it waited in the executor
			$v = $hu ? ($target ? '23505' : 'skip') : $hk ? '23505' : 'in';
		}
	}
	my %legal = ($v =~ /^(in|skip)$/ ? '00000' : $v => 1);
	$legal{'40P01'} = 1 if $sc->{deadlock};
	my $n = scalar(grep { $_ ne '' } split /\n/, $a->{out});
	my $got = $st ne '00000' ? $st : $n ? 'in' : 'skip';
	my $key = $st eq '23505' && $d->{s}{lasterr} =~ /Key \((u, p|k)\)=/ ? " on $1" : '';
	$M{collide}{outcomes}{"$var$target: $got$key" . ($sc->{k2_in_s2} ? ' (b inserted k2 elsewhere' . ($sc->{deleted} ? ', deleted k1' : '') . ')' : $sc->{deleted} ? ' (b deleted k1)' : '')}++;
	fail_now("$what: $got$key where the model says $v ($var$target, $why; b "
		  . ($sc->{k2_in_s2} ? 'inserted k2 into t_' . $sc->{s2} . ', ' : '')
		  . ($sc->{deleted} ? 'deleted k1, ' : '') . "t_up made $M{uidx} t_k)"
		  . ($st ne '00000' ? ": $d->{s}{lasterr}" : ''))
	  unless $legal{$st} && ($st ne '00000' || $got eq $v);
	fail_now("$what: RETURNING gave $n rows, ROW_COUNT $a->{rowcount}, where it " . ($got eq 'in' ? 'inserted' : 'skipped') . ' its row')
	  if $st eq '00000' && ($a->{rowcount} ne $n || ($n && $a->{out} ne (10 * $as + 5) . "|$ak"));
	if ($st ne '00000')
	{
		stmt_failed($d);
		return;
	}
	return unless $n;
	my $tx = $t // new_txn();
	apply_ops($tx, $a->{ops});
	commit_txn($tx) unless $t;
}

#
# DETACH PARTITION ... CONCURRENTLY beside lookups and UPDATE and DELETE
# by the key: a scene, in one step.  (The random steps run neither beside
# a DETACH CONCURRENTLY in autocommit: its first transaction commits at a
# moment the model cannot see, so lookup_busy keeps lookups away, and
# every key is uncertain for UPDATE and DELETE while it runs.)  Session d
# detaches the partition of slot: other sessions, at times, have begun
# transactions that read or changed t (a REPEATABLE READ one keeps its
# snapshot, and reads the partition all along), and one of them races the
# DETACH with lookups or an UPDATE or DELETE by the key of the partition's
# rows (its row is in or out: either_done).  The first transaction commits
# before the DETACH waits (nothing here holds a lock it waits for), and the
# model commits it at once, the partition then "detaching": out for every
# later snapshot (PostgreSQL's partition descriptor leaves it out for a
# snapshot that sees that commit), in for earlier ones (lookup_rows).  Its
# second transaction waits for every transaction that locked t, and
# meanwhile the other sessions look its keys up and UPDATE and DELETE them
# by the key, in those transactions and in autocommit (no row found: each
# statement's snapshot is later); then one races the end of those
# transactions with lookups or an UPDATE or DELETE, and the DETACH ends.
# At times the partition is then attached again while another session
# races that with lookups or an UPDATE or DELETE of its rows (in or out;
# the ATTACH is judged first).  Every statement is judged as any other.
#
sub op_detach_scene
{
	my ($d) = @_;
	# (a prepared transaction would hold the second transaction up until
	# the checks)
	return if !$more || $d->{tx} || %prepared || grep { $_->{pending} } @sess;
	return unless ddl_ok($d);
	return if scalar(attached_slots(undef)) < 3;
	return { play => \&detach_scene };
}

# Keys of slot's partition to look up: its rows', and two bulk keys.
sub dc_keys
{
	my ($slot) = @_;
	return ((sort { $a <=> $b } keys %{ $M{rows}{$slot} // {} }), bulk_sample($slot, 2));
}

# An UPDATE or DELETE by the key by session d: of a row of slot's
# partition (most often) or of another one, that no other transaction has
# touched; a key it sets is free everywhere, and a row it moves goes to
# another partition.  With $either, a row of slot's partition may be seen
# in or out (either_done).
sub dc_modify
{
	my ($d, $slot, $either) = @_;
	my $t = $d->{tx};
	return if $t && ($t->{aborted} || $t->{rr});
	my ($k, $from);
	if (rand() < 0.7)
	{
		$k = pick(grep { my $k = $_; !uncertain($t, $k) && grep { $_ == $slot } key_slots($t, $k) }
			  sort { $a <=> $b } grep { $_ < $bulk_base && !is_ukey($_) } keys %{ $M{rows}{$slot} // {} });
		$from = $slot;
	}
	if (!defined $k)
	{
		my $r = pick(live_keys_untouched($t)) or return;
		($k, $from) = @$r;
	}
	my $r = rand();
	my $a;
	if ($r < 0.3)
	{
		$a = { sql => "UPDATE t SET v = v + 1 WHERE k = $k RETURNING k", ops => [ [ 'del', $from, $k ], [ 'ins', $from, $k ] ] };
	}
	elsif ($r < 0.55)
	{
		$a = { sql => "DELETE FROM t WHERE k = $k RETURNING k", ops => [ [ 'del', $from, $k ] ] };
	}
	elsif ($r < 0.8)
	{
		my $k2 = pick(grep { !key_slots(undef, $_) && !key_slots($t, $_) && !uncertain($t, $_) } 1 .. $M{hot});
		return unless defined $k2;
		$a = { sql => "UPDATE t SET k = $k2 WHERE k = $k RETURNING k", ops => [ [ 'del', $from, $k ], [ 'ins', $from, $k2 ] ] };
	}
	else
	{
		my $to = pick(grep { $_ != $from && $_ != $slot } attached_slots($t));
		return unless defined $to;
		$a = { sql => 'UPDATE t SET p = ' . rand_p($to) . " WHERE k = $k RETURNING k", ops => [ [ 'del', $from, $k ], [ 'ins', $to, $k ] ] };
	}
	$a->{row} = [ $from, $k ];
	$a->{either} = 1 if $either && $from == $slot;
	$a->{done} = \&rows_done;
	return $a;
}

# Lookups (most often: a burst of them, with $burst) or an UPDATE or
# DELETE by the key, by session e.
sub dc_statement
{
	my ($e, $slot, $keys, $either, $burst) = @_;
	if (($e->{tx} && $e->{tx}{rr}) || rand() < 0.55)
	{
		return $burst ? op_lookup($e, $keys) : op_lookup($e, undef, $keys);
	}
	return dc_modify($e, $slot, $either);
}

sub dc_detach_action
{
	my ($slot) = @_;
	return {
		sql => "ALTER TABLE t DETACH PARTITION t_$slot CONCURRENTLY",
		ddl => 1,
		dconc => 1,
		done => \&ddl_done,
		after => sub { $_[0]{parts}{$slot} = { exists => 1, attached => 0 }; $_[0]{ddl}++; }
	};
}

# A DETACH CONCURRENTLY (det) was just sent: its first transaction
# commits before it waits (nothing about holds a lock it waits for), and
# the model commits it at once: the partition "detaching", out for every
# later snapshot; its second transaction changes nothing a statement sees.
sub dc_first
{
	my ($det, $slot) = @_;
	my $t1 = new_txn();
	$t1->{parts}{$slot} = { exists => 1, attached => 0, detaching => 1 };
	commit_txn($t1);
	$det->{ddl} = $det->{touch}{ddl} = 0;
}

# May session d run DDL with nothing else about?
sub dc_quiet
{
	my ($d) = @_;
	return ddl_ok($d) && !grep { $_->{pending} || $_->{tx} } @sess;
}

# Session d's DDL (the ATTACH or DETACH CONCURRENTLY of slot's partition,
# $detach) raced by another session's lookups or UPDATE or DELETE by the
# key (its row in or out), judged after the DDL.
sub dc_race
{
	my ($d, $slot, $keys, $ddl, $detach) = @_;
	my $c = pick(grep { $_ != $d } @sess);
	my $race = dc_statement($c, $slot, $keys, 1, 1);
	if ($race)
	{
		$race->{raced} = 1;
		run_action($c, $race, 1);
	}
	run_action($d, $ddl, 1);
	dc_first($ddl, $slot) if $detach;
	settle_first($d);
	settle($c, 1) if $c->{pending};
}

sub detach_scene
{
	my ($d) = @_;
	# (the pgbench load, if it runs, looks keys up and updates them by the
	# key meanwhile: load_touch)
	my $touched = $M{load} && ctl_query('SELECT last_value FROM load_touches');
	detach_scene_play($d);
	$M{dc}{load_touches} += ctl_query('SELECT last_value FROM load_touches') - $touched if $M{load};
}

sub detach_scene_play
{
	my ($d) = @_;
	my @att = attached_slots(undef);
	my $slot = pick(grep { %{ $M{rows}{$_} // {} } } @att) // pick(@att);
	trace("$d->{s}{name}: scene: DETACH PARTITION t_$slot CONCURRENTLY beside lookups and modifications by the key");
	$M{dc}{scenes}++;
	my @keys = dc_keys($slot);
	my @o = grep { $_ != $d } @sess;
	# transactions that locked t before the detach (its second transaction
	# waits for them)
	for my $b (grep { !$_->{tx} } @o)
	{
		next if rand() < 0.4;
		run_action($b, rand() < 0.4 ? op_begin_rr($b) : op_begin($b));
		my $first = $b->{tx} && dc_statement($b, $slot, \@keys, 0);
		run_action($b, $first) if $first;
		# (nothing is detached yet: the step ends as any other)
		return if grep { $_->{pending} } @sess;
	}
	# a race with the DETACH
	my $c = pick(grep { !($_->{tx} && $_->{tx}{aborted}) } @o);
	my $race = $c && dc_statement($c, $slot, \@keys, 1, 1);
	if ($race)
	{
		$race->{raced} = 1;
		$M{dc}{raced}{ $race->{lookup} ? 'lookups' : 'modifications' }++;
		run_action($c, $race, 1);
	}
	my $det = dc_detach_action($slot);
	run_action($d, $det, 1);
	dc_first($det, $slot);
	# waiting for the transactions that locked t (a virtual transaction
	# ID's lock), or then for the partition's lock (a wait that ended
	# before pg_locks was read is looked at again)
	for (1 .. 100)
	{
		settle($d, 1);
		last unless $d->{pending};
		my $w = ctl_query("SELECT string_agg(locktype || ' ' || mode, ', ') FROM pg_locks WHERE pid = $d->{s}{pid} AND NOT granted");
		next if $w eq '';
		fail_now("DETACH CONCURRENTLY waits in its first transaction ($w): the scene cannot place its commit")
		  unless $w =~ /virtualxid|transactionid|AccessExclusiveLock/;
		$M{dc}{waited}++;
		last;
	}
	# beside its wait
	for (1 .. 2 + int(rand(4)))
	{
		my $e = pick(grep { !$_->{pending} && !($_->{tx} && $_->{tx}{aborted}) } @o) or last;
		my $a = dc_statement($e, $slot, \@keys, 0) or next;
		run_action($e, $a);
	}
	# a race with the end of the transactions it waits for
	my @ends = grep { $_->{tx} && !$_->{pending} } @o;
	$c = pick(grep { !$_->{tx} && !$_->{pending} } @o);
	$race = $c && @ends && $d->{pending} && dc_statement($c, $slot, \@keys, 0, 1);
	if ($race)
	{
		$race->{raced} = 1;
		run_action($c, $race, 1);
	}
	run_action($_, op_end($_, $_->{tx}{aborted} || rand() < 0.5 ? 'ROLLBACK' : 'COMMIT')) for @ends;
	dc_wait($d);
	# attached again, and at times detached and attached again a few times
	# more (a loop of DETACH CONCURRENTLY and ATTACH), each raced (once, in
	# a table that bulk inserts made large: see flap_scene)
	my $cycles = rand() < 0.6 ? (rand() < 0.6 ? 1 : 2 + int(rand(4))) : 0;
	$cycles = min($cycles, 1) if bulk_count() > 30_000;
	for my $i (1 .. $cycles)
	{
		last unless dc_quiet($d) && view_part(undef, $slot)->{exists} && !view_part(undef, $slot)->{attached}
		  && slot_type(undef, $slot) eq t_type(undef);
		$M{dc}{attach}++;
		dc_race($d, $slot, \@keys, attach_action($slot));
		last if $i == $cycles || !view_part(undef, $slot)->{attached} || !dc_quiet($d);
		$M{dc}{again}++;
		dc_race($d, $slot, \@keys, dc_detach_action($slot), 1);
	}
}

# Every other session's transaction ends (and its statements), and then
# the DETACH of session d.
sub dc_wait
{
	my ($d) = @_;
	my $deadline = time + 120;
	while ($d->{pending})
	{
		settle_all(1);
		last unless $d->{pending};
		fail_now('DETACH CONCURRENTLY does not end') if time > $deadline;
		my ($e) = grep { $_ != $d && $_->{tx} && !$_->{pending} } @sess;
		if ($e)
		{
			run_action($e, op_end($e, $e->{tx}{aborted} || rand() < 0.5 ? 'ROLLBACK' : 'COMMIT'));
		}
		elsif (grep { $_ != $d && $_->{pending} } @sess)
		{
			wait_any();
		}
		else
		{
			# the pgbench load's transactions
			usleep(10_000);
		}
	}
}

# Wait until session d's statement ends, before any other is judged: a
# statement racing it is judged with it.
sub settle_first
{
	my ($d) = @_;
	my $deadline = time + 120;
	while ($d->{pending})
	{
		settle($d, 1);
		last unless $d->{pending};
		fail_now("session $d->{s}{name} hangs in: $d->{pending}{sql}") if time > $deadline;
		usleep(5000);
	}
}

#
# DETACH CONCURRENTLY and ATTACH in a loop (a scene, in one step): a psql
# of its own detaches concurrently and attaches again, 8 to 29 times (2
# or more in a table that bulk inserts made large), the partition of a
# slot, while the sessions look up its keys and others (bursts) and
# UPDATE and DELETE rows by the key, in autocommit, a pgbench of its own
# looks its keys up and updates some by the key, and the pgbench load, if
# it runs, does too (load_touch).  Every lookup maps the
# partitions its descriptors hold to the leaves of the gunique tree, and
# each DETACH and ATTACH changes both (in the moment between the commit
# and its invalidations the two disagreed once: "partition ... has no
# leaf of gunique index ...", 55000, from lookups of the partition's keys
# above all).  The model does not follow the loop: the partition is in or
# out for every statement of the scene, so a lookup may miss its rows
# (lookup_judge), an UPDATE or DELETE of one finds it or not (either_done);
# no key is inserted meanwhile (the loop's ATTACH must find its keys
# free), and a key an UPDATE sets is free everywhere.  Any error of the
# loop but a deadlock fails the test; the partition is attached at the end.
#
sub op_flap_scene
{
	my ($d) = @_;
	return if !$more || %prepared || grep { $_->{pending} || $_->{tx} } @sess;
	return unless ddl_ok($d);
	return if scalar(attached_slots(undef)) < 3;
	return { play => \&flap_scene };
}

sub flap_scene
{
	my @att = attached_slots(undef);
	my $slot = pick(grep { %{ $M{rows}{$_} // {} } } @att) // pick(@att);
	my ($lo, $hi) = slot_bounds($slot);
	my $n = 8 + int(rand(22));
	# each ATTACH checks the keys of the partition's range in every leaf:
	# fewer of them as bulk inserts fill the table
	my $big = bulk_count();
	$n = max(2, int($n * 30_000 / $big)) if $big > 30_000;
	trace("scene: t_$slot detached concurrently and attached $n times, beside lookups and modifications by the key");
	$M{flap}{scenes}++;
	my @keys = dc_keys($slot);
	my $touched = $M{load} && ctl_query('SELECT last_value FROM load_touches');
	my $sql = "\\set VERBOSITY verbose\n"
	  . ("ALTER TABLE t DETACH PARTITION t_$slot CONCURRENTLY;\nALTER TABLE t ATTACH PARTITION t_$slot FOR VALUES FROM ($lo) TO ($hi);\n" x $n)
	  . "\\q\n";
	# beside it, a pgbench of its own looks the partition's keys up, and
	# updates some by the key, as fast as it can (the seed decides none of
	# it; its answers are not judged, its errors are)
	my @pk = @keys[ 0 .. min(11, $#keys) ];
	my $script = $node->basedir . '/flap.sql';
	unlink $script;
	PostgreSQL::Test::Utils::append_to_file($script,
		join('', map { "SELECT k, p FROM t WHERE k = $_;\n" } @pk)
		  . join('', map { "UPDATE t SET v = v + 1 WHERE k = $_;\n" } grep { $_ < $bulk_base } @pk[ 0 .. min(2, $#pk) ]));
	my ($bout, $berr) = ('', '');
	my $bench = @pk && IPC::Run::start(
		[
			'pgbench', '--no-vacuum', '--client', 2, '--jobs', 2, '--time', 600,
			'--max-tries', 1000, '--file', $script, '-h', $node->host, '-p', $node->port, 'postgres'
		],
		'<', \undef, '>', \$bout, '2>', \$berr);
	my ($out, $err) = ('', '');
	my $h = IPC::Run::start(
		[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port, '-d', 'postgres' ],
		'<', \$sql, '>', \$out, '2>', \$err);
	# at times, beside it, another session rebuilds other partitions'
	# leaves (REINDEX INDEX CONCURRENTLY): an ATTACH's check must merge a
	# leaf that replaced another while it read the tree.  The two may
	# deadlock (README.md), which stops either loop; a REINDEX stopped so
	# leaves an index invalid, _ccnew or _ccold (dropped below)
	my @others = grep { $_ != $slot } @att;
	my ($rout, $rerr, $rh) = ('', '');
	if (@others && rand() < 0.5)
	{
		my $rsql = "\\set VERBOSITY verbose\n"
		  . join('', map { 'REINDEX INDEX CONCURRENTLY t_' . pick(@others) . "_k_idx;\n" } 1 .. 2 + int(rand(5)))
		  . "\\q\n";
		$rh = IPC::Run::start(
			[ 'psql', '-X', '-q', '-v', 'ON_ERROR_STOP=1', '-h', $node->host, '-p', $node->port, '-d', 'postgres' ],
			'<', \$rsql, '>', \$rout, '2>', \$rerr);
		$M{flap}{reindex}++;
	}
	$M{flap_slot} = $slot;
	my $deadline = time + 120;
	my $hang = sub {
		fail_now("the loop of DETACH CONCURRENTLY and ATTACH does not end:\n$err"
			  . ctl_query("SELECT string_agg(format('%s %s %s %s:%s %s %s', pid, backend_type, state, wait_event_type, wait_event, pg_blocking_pids(pid), query), E'\\n') FROM pg_stat_activity"))
		  if time > $deadline;
	};
	# two statements a cycle, the sessions in turn, one after the other
	# (each beside the loop), whatever the timing: the seed decides them
	for my $i (0 .. 2 * $n - 1)
	{
		my $e = $sess[ $i % @sess ];
		while (grep { $_->{pending} } @sess)
		{
			$h->pump_nb if $h->pumpable;
			settle_all(1);
			last unless grep { $_->{pending} } @sess;
			$hang->();
			usleep(2000);
		}
		my $a = rand() < 0.6 ? op_lookup($e, \@keys) : dc_modify($e, $slot, 1);
		next unless $a;
		$M{flap}{ $a->{lookup} ? 'lookups' : 'modifications' }++;
		run_action($e, $a);
	}
	while ($h->pumpable || ($rh && $rh->pumpable))
	{
		$h->pump_nb if $h->pumpable;
		$rh->pump_nb if $rh && $rh->pumpable;
		$hang->();
		settle_all(1);
		usleep(5000);
	}
	eval { $h->finish };
	if ($rh)
	{
		eval { $rh->finish };
		my @rerrs = grep { /ERROR/ } split /\n/, $rerr;
		fail_now("REINDEX INDEX CONCURRENTLY beside the loop of DETACH CONCURRENTLY and ATTACH failed:\n$rerr")
		  if grep { !/ERROR:  40P01:/ } @rerrs;
		$M{flap}{reindex_errors}{$_}++ for map { /ERROR:  (\w+):/ ? $1 : 'other' } @rerrs;
		ctl_retry("DROP INDEX $_")
		  for split /\n/, ctl_query("SELECT string_agg(indexrelid::regclass::text, E'\\n') FROM pg_index WHERE NOT indisvalid AND indexrelid::regclass::text LIKE 't\\_%\\_k\\_idx\\_cc%'");
	}
	settle_all(1);
	wait_any() while grep { $_->{pending} } @sess;
	delete $M{flap_slot};
	if ($bench)
	{
		fail_now("the pgbench beside the loop of DETACH CONCURRENTLY and ATTACH stopped: $berr")
		  unless $bench->pumpable;
		$bench->signal('TERM');
		eval { $bench->finish };
		fail_now("the pgbench beside the loop of DETACH CONCURRENTLY and ATTACH: $berr")
		  if $berr =~ /abort|ERROR|server closed/;
		$M{flap}{bench}++;
	}
	$M{flap}{load_touches} += ctl_query('SELECT last_value FROM load_touches') - $touched if $M{load};
	my @errs = grep { /ERROR/ } split /\n/, $err;
	$M{flap}{errors}{$_}++ for map { /ERROR:  (\w+):/ ? $1 : 'other' } @errs;
	fail_now("the loop of DETACH CONCURRENTLY and ATTACH failed:\n$err")
	  if grep { !/ERROR:  40P01:/ } @errs;
	# a deadlock stopped it: the partition attached again
	if (@errs)
	{
		ctl_retry("ALTER TABLE t DETACH PARTITION t_$slot FINALIZE")
		  if ctl_query("SELECT count(*) FROM pg_inherits WHERE inhrelid = 't_$slot'::regclass AND inhdetachpending") ne '0';
		ctl_retry("ALTER TABLE t ATTACH PARTITION t_$slot FOR VALUES FROM ($lo) TO ($hi)")
		  if ctl_query("SELECT count(*) FROM pg_inherits WHERE inhrelid = 't_$slot'::regclass") eq '0';
	}
	$M{flap}{cycles} += $n;
}

#
# Concurrent builds of t_k (see the header): a scene starts the build, or
# the REINDEX, and leaves it running; the other sessions' steps go on
# beside it, until it ends (at the latest when the checks end every
# transaction).
#
sub op_build_scene
{
	my ($d) = @_;
	return if gidx_state() ne 'none' || !gidx_ddl_ok($d);
	return { play => sub { build_scene($_[0], 'create') } };
}

sub op_reindex_scene
{
	my ($d) = @_;
	my $g = gidx_state();
	return if ($g ne 'valid' && $g ne 'invalid') || !gidx_ddl_ok($d);
	return { play => sub { build_scene($_[0], 'reindex') } };
}

# Session d builds t_k ($how: 'create' or 'reindex').  Before a build,
# half the time the duplicates are deleted (it may then succeed), at times
# one is made (it must then fail).  At times another session first takes
# a REPEATABLE READ snapshot (a lookup), which each leaf's build waits for
# with that leaf ready and the next ones not made: writers meanwhile meet
# some leaves ready and others not.  While the build runs, a third session
# inserts keys held elsewhere, at times in a transaction that it leaves
# open, whose first insert is of a free key: the build then waits for it
# only before its merge (or as it builds the leaf of a partition it wrote
# to), and later steps of the transaction prefer inserts of keys held
# elsewhere into the partitions it wrote to (boost: after the build, with
# what the transaction knew of the tree as it began).
sub build_scene
{
	my ($d, $how) = @_;
	my $g = gidx_state();
	my $want_ok;
	trace("$d->{s}{name}: scene: " . ($how eq 'create' ? 'CREATE INDEX CONCURRENTLY' : 'REINDEX INDEX CONCURRENTLY') . " of t_k ($g)");
	if ($g ne 'valid')
	{
		# until a build of a dropped t_k has succeeded in this run, such a
		# build comes after the duplicates are deleted and has no inserts
		# beside it; once one has, and until one has failed on a duplicate,
		# it comes after an insert of a key held elsewhere (which then goes
		# in): else timing alone decides whether a run reaches each outcome.
		# Until a REINDEX has finished an invalid t_k, that REINDEX too
		# comes after the duplicates are deleted, alone.
		my $r = rand();
		my $reached = sub { build_reached("CREATE INDEX CONCURRENTLY: $_[0]") };
		my $finished = build_reached('REINDEX INDEX CONCURRENTLY of an invalid tree: 00000');
		$want_ok = ($how eq 'create' && $g eq 'none' && !$reached->('00000'))
		  || ($how eq 'reindex' && $g eq 'invalid' && !$finished);
		my $want_dup = $how eq 'create' && $g eq 'none'
		  && $reached->('00000') && !$reached->('23505');
		my $pre = $want_ok ? op_dedup($d) : $want_dup ? op_insert_colliding($d)
		  : $r < 0.5 ? op_dedup($d) : $r < 0.65 ? op_insert_colliding($d) : undef;
		run_action($d, $pre) if $pre;
		return if $d->{pending};
	}
	my $e = pick(grep { $_ != $d && !$_->{pending} && !$_->{tx} } @sess);
	if ($e && rand() < 0.5)
	{
		run_action($e, op_begin_rr($e));
		my $l = op_lookup($e);
		run_action($e, $l) if $l;
	}
	run_action($d, build_action($how));
	return if $want_ok;
	my ($f) = grep { $_ != $d && !$_->{pending} && !($_->{tx} && ($_->{tx}{rr} || $_->{tx}{aborted})) } @sess;
	return unless $d->{pending} && $f;
	my $n = 1 + int(rand(3));
	if (!$f->{tx} && rand() < 0.4)
	{
		run_action($f, op_begin($f));
		my $w = $f->{tx} && op_insert_into($f, pick(attached_slots($f->{tx})), 1);
		run_action($f, $w) if $w;
		$n = rand() < 0.5 ? 0 : 1;
	}
	for (1 .. $n)
	{
		last if $f->{pending} || ($f->{tx} && $f->{tx}{aborted});
		my $a = op_insert_colliding($f) or last;
		run_action($f, $a);
	}
}

#
# Crashes and restarts.  Open transactions are gone; prepared ones stay.
#
sub crash
{
	my ($d) = @_;
	# (a clean restart with t_k not valid may save no filter: the round's
	# check that one loaded the filters saved would fail)
	if (gidx_state() ne 'valid' || rand() < 0.5)
	{
		trace("crash: SIGKILL of $d->{s}{name} (pid $d->{s}{pid})");
		my $offset = -s $node->logfile;
		sess_kill($d->{s});
		$node->wait_for_log(
			qr/all server processes terminated; reinitializing.*database system is ready to accept connections/s,
			$offset);
	}
	else
	{
		# a fast shutdown saves the summaries, and the start loads them
		my $mode = rand() < 0.5 ? 'immediate' : 'fast';
		trace("crash: $mode shutdown");
		# no checkpoint under way at the shutdown: one that ends after the
		# save writes WAL after it, and the start refuses the file
		ctl_query('CHECKPOINT') if $mode eq 'fast';
		my $offset = -s $node->logfile;
		$node->stop($mode);
		$node->start;
		restart_loaded($offset) if $mode eq 'fast';
	}
	$M{crashes}++;
	connect_all();
	sess_prepare();
	# the filters loaded are those every later probe and lookup reads:
	# check them at once, before any statement changes them
	check('after a restart that loaded saved filters')
	  if $more && $M{restart}{just_loaded};
	delete $M{restart}{just_loaded};
}

# Did the start after a fast shutdown load the summaries saved at the
# shutdown (the server log from offset)?  Counted: loaded, refused (with
# the reason), not saved.
sub restart_loaded
{
	my ($offset) = @_;
	my $log = slurp_file($node->logfile, $offset);
	my $r = $M{restart} //= {};
	$r->{clean}++;
	if ($log =~ /gunique loaded (\d+) key ranges and (\d+) filters saved at the last shutdown/)
	{
		$r->{loaded}++;
		$r->{ranges} += $1;
		$r->{filters} += $2;
		$r->{just_loaded} = 1;
		trace("restart: loaded $1 key ranges and $2 filters");
	}
	elsif ($log =~ /gunique did not load the key filters saved in "[^"]*"\n.*?DETAIL:  ([^\n]*)/s)
	{
		$r->{refused}{$1}++;
		trace("restart: the saved filters were refused: $1");
	}
	else
	{
		my ($why) = $log =~ /(gunique did not save[^\n]*(?:\n[^\n]*DETAIL:  [^\n]*)?)/;
		$why //= 'nothing saved';
		$why =~ s/\n.*?DETAIL: /:/s;
		$r->{unsaved}{$why}++;
		trace("restart: no saved filters: $why");
	}
}

#
# Checks, with every session's transaction ended.
#
sub check
{
	my ($what) = @_;
	quiesce();
	# no upsert lock outlives its statement (field4 0x6775 of an advisory
	# lock tag shows as objsubid)
	my $locks = ctl_query(
		"SELECT count(*) FROM pg_locks WHERE locktype = 'advisory' AND objsubid = 26485");
	fail_now("upsert locks held with every transaction ended ($what): $locks") if $locks ne '0';
	# t_k as the model has it (the concurrent builds): while it is not
	# valid, keys may be held twice (the rows below are the model's)
	my $valid = gidx_state() eq 'valid';
	if ($conc)
	{
		my $c = gidx_catalog();
		fail_now("t_k is $c in the catalogs, " . gidx_state() . " in the model ($what)") if $c ne gidx_state();
	}
	if ($valid)
	{
		my $problems = ctl_query(
			q{SELECT string_agg(problem || ' ' || coalesce(relation::text, '') || ' ' || detail, E'\n') FROM gunique_verify('t_k')});
		fail_now("gunique_verify ($what):\n$problems") if $problems ne '';
		my $dups = ctl_query(
			'SELECT string_agg(k::text, \' \') FROM (SELECT k FROM t GROUP BY k HAVING count(*) > 1) d');
		fail_now("keys held twice ($what): $dups") if $dups ne '';
	}

	# the partitions, and their rows
	detach_finalize();
	my @exist = existing_slots(undef);
	my $attached = join ' ',
	  sort { $a <=> $b } map { s/^t_//r } split /\n/,
	  ctl_query("SELECT inhrelid::regclass FROM pg_inherits WHERE inhparent = 't'::regclass");
	my $want = join ' ', sort { $a <=> $b } attached_slots(undef);
	fail_now("attached partitions: $attached, the model says $want")
	  if $attached ne $want;
	my $got = ctl_query(
		join(' UNION ALL ',
			map { "SELECT $_, k FROM t_$_ WHERE k < $bulk_base" } @exist)
		  . ' ORDER BY 1, 2') if @exist;
	$got //= '';
	my @want;
	for my $slot (@exist)
	{
		push @want, "$slot|$_"
		  for sort { $a <=> $b } grep { $_ < $bulk_base } keys %{ $M{rows}{$slot} // {} };
	}
	fail_now("rows ($what):\n got: " . join(' ', split /\n/, $got) . "\nwant: @want")
	  if $got ne join("\n", @want);
	my $gotb = @exist ? ctl_query(
		join(' UNION ALL ',
			map { "SELECT $_, count(*), coalesce(sum(k), 0) FROM t_$_ WHERE k >= $bulk_base AND k < $load_base" } @exist)
		  . ' ORDER BY 1') : '';
	my @wantb;
	my $tot = bulk_totals();
	for my $slot (@exist)
	{
		push @wantb, "$slot|" . ($tot->{$slot}[0] // 0) . '|' . ($tot->{$slot}[1] // 0);
	}
	fail_now("bulk rows ($what):\n got: $gotb\nwant: " . join("\n", @wantb))
	  if $gotb ne join("\n", @wantb);

	# every live key is refused from another partition (and while t_k is
	# invalid after a failed merge, by its leaves, all ready)
	my @att = attached_slots(undef);
	my @probe;
	@att = () unless $valid || (gidx_state() eq 'invalid' && $M{gfail} eq 'merge');
	for my $slot (@att)
	{
		my @keys = grep { $_ < $bulk_base } keys %{ $M{rows}{$slot} // {} };
		push @keys, bulk_sample($slot, 3);
		for my $k (grep { defined } @keys)
		{
			my @to = grep { $_ != $slot } @att;
			@to = (pick(@to)) if @att > 4;
			push @probe, map { [ rand_p($_), $k ] } @to;
		}
	}
	if (@probe)
	{
		my $res = ctl_query(
			'SELECT string_agg(format(\'%s->%s: %s\', k, p, r), \' \') FROM (SELECT p, k, try_insert(p, k) r FROM (VALUES '
			  . join(', ', map { "($_->[0], $_->[1])" } @probe)
			  . ") v(p, k)) x WHERE r <> '23505'");
		fail_now("live keys not refused elsewhere ($what" . ($valid ? '' : ', t_k invalid') . "): $res") if $res ne '';
		$M{grefused} += @probe unless $valid;
		# and skipped by an upsert into another partition, through a
		# data-modifying WITH query (rolled back)
		if ($pg18 && $valid)
		{
			ctl_query('BEGIN');
			$res = ctl_query(
				'WITH ins AS (INSERT INTO t VALUES '
				  . join(', ', map { "($_->[0], $_->[1])" } @probe)
				  . ' ON CONFLICT DO NOTHING RETURNING p, k) SELECT string_agg(format(\'%s->%s\', k, p), \' \') FROM ins');
			ctl_query('ROLLBACK');
			fail_now("live keys not skipped by an upsert elsewhere ($what): $res") if $res ne '';
		}
	}
	check_lookups($what) if $lookups;
	check_log($what);
	$M{checks}++;
}

# One lookup of every hot key (and a few new ones) and of the first and
# last key of every partition's share of each bulk, from the control
# session: exactly the model's rows.  Once a round, EXPLAIN shows that a
# lookup by one key, by an array and by a prepared statement's generic
# plan is gunique's scan, and EXPLAIN ANALYZE that it finds a live key.
sub check_lookups
{
	my ($what) = @_;
	my $c = ver_copy();
	my %keys = map { $_ => 1 } (1 .. $M{hot} + 5);
	for my $r (@{ $M{bulks} })
	{
		my $n = @{ $r->{slots} };
		for my $i (0 .. $n - 1)
		{
			my $first = $r->{lo} + (($i - $r->{lo} % $n) % $n);
			next if $first > $r->{hi};
			$keys{$first} = 1;
			$keys{ $first + $n * int(($r->{hi} - $first) / $n) } = 1;
		}
	}
	my @keys = sort { $a <=> $b } keys %keys;
	my %got;
	push @{ $got{ $_->[0] } }, int($_->[1] / 10)
	  for map { [ split /\|/ ] } split /\n/,
	  ctl_query("SELECT k, p FROM t WHERE k = ANY ('{" . join(',', @keys) . "}')");
	my @bad = map { "key $_ not asked for" } grep { !$keys{$_} } sort { $a <=> $b } keys %got;
	for my $k (@keys)
	{
		my $g = join(',', sort { $a <=> $b } @{ $got{$k} // [] });
		my $w = join(',', sort { $a <=> $b } lookup_rows($c, $c, undef, $k));
		push @bad, "$k in [$g], the model's in [$w]" if $g ne $w;
	}
	fail_now("a lookup of every key ($what; key in [slots]): " . join('; ', @bad[ 0 .. min(9, $#bad) ]))
	  if @bad;
	$M{lk}{checked} += @keys;
	return if gidx_state() ne 'valid' || $M{explained}++;
	my @plans = (
		ctl_query('EXPLAIN (COSTS OFF) SELECT k, p FROM t WHERE k = 1'),
		ctl_query("EXPLAIN (COSTS OFF) SELECT k, p FROM t WHERE k = ANY ('{1,2,3}')"));
	ctl_query('PREPARE lkx(int) AS SELECT k, p FROM t WHERE k = $1');
	ctl_query('SET plan_cache_mode = force_generic_plan');
	push @plans, ctl_query('EXPLAIN (COSTS OFF) EXECUTE lkx(1)');
	ctl_query('RESET plan_cache_mode');
	ctl_query('DEALLOCATE lkx');
	for my $plan (@plans)
	{
		fail_now("a lookup by the key is not gunique's scan ($what):\n$plan")
		  unless $plan =~ /^Custom Scan \(GuniqueLookup\) on t$/m && $plan !~ /Append|Seq Scan|Bitmap/;
	}
	my ($k) = grep { live_slots(undef, $_) } sort { $a <=> $b } keys %{ $M{where} };
	return unless defined $k;
	my $plan = ctl_query("EXPLAIN (ANALYZE, COSTS OFF, TIMING OFF, SUMMARY OFF) SELECT k, p FROM t WHERE k = $k");
	fail_now("EXPLAIN ANALYZE of a lookup of live key $k ($what):\n$plan")
	  unless $plan =~ /^Custom Scan \(GuniqueLookup\) on t \(actual rows=1(?:\.00)? loops=1\)$/m
	  && $plan =~ /Partitions Searched: (\d+)/ && $1 >= 1;
	$M{lk}{explain} = $plan =~ /Partitions Searched: (\d+)\n.*Partitions Ruled Out: (\d+)/s ? "$1 searched, $2 ruled out" : '?';
}


#
# A round: a table of nparts partitions, steps random steps.
#
sub new_round
{
	my ($round, $nparts) = @_;
	%M = (
		round => $round,
		nparts => $nparts,
		nslots => $nparts + ($nparts > 10 ? 8 : 2),
		hot => $nparts > 10 ? 300 : 40,
		bulk => $nparts > 10 ? 30000 : 3000,
		next_bulk => $bulk_base,
		bulk_sent => 0,
		bulks => [],
		parts => {},
		rows => {},
		where => {},
		gid => 100 * $round,
		ktype => 'int',
		# the gunique index t_k (the concurrent builds)
		gidx => 'valid',
		# a second unique index (see collide_scene)
		uidx => $pg18 && $more && $round % 2 == 1 ? ($round % 4 == 1 ? 'before' : 'after') : undef,
	);
	$M{ulo} = $M{hot} + 100;
	$M{uhi} = $M{ulo} + 999;
	my $sql = 'CREATE TABLE t (p int NOT NULL, k int, v int NOT NULL DEFAULT 0' . ($M{uidx} ? ', u int' : '')
	  . ") PARTITION BY RANGE (p);\n";
	for my $slot (0 .. $nparts - 1)
	{
		my ($lo, $hi) = slot_bounds($slot);
		$sql .= "CREATE TABLE t_$slot PARTITION OF t FOR VALUES FROM ($lo) TO ($hi);\n";
		$M{parts}{$slot} = { exists => 1, attached => 1 };
	}
	# Even rounds: a unique btree index made before the gunique one, which
	# the executor inserts into first, so that an upsert racing a plain
	# statement of its row in its own partition may wait for it there
	# (src/README, "ON CONFLICT DO NOTHING", point 5).  Redundant beside
	# t_k, it reports a key held twice in one partition first.
	$sql .= "CREATE UNIQUE INDEX t_kp ON t (k, p);\n" if $round % 2 == 0;
	$sql .= "CREATE UNIQUE INDEX t_up ON t (u, p);\n" if ($M{uidx} // '') eq 'before';
	$sql .= "CREATE UNIQUE INDEX t_k ON t USING gunique (k);\n";
	$sql .= "CREATE UNIQUE INDEX t_up ON t (u, p);\n" if ($M{uidx} // '') eq 'after';
	$sql .= "CREATE INDEX t_v ON t (v);\n";
	$sql .= "CREATE VIEW tv AS SELECT k, p FROM t;\n";
	my $t = new_txn();
	my @rows;
	for my $k (1 .. $M{hot})
	{
		next if rand() < 0.5;
		my $slot = int(rand($nparts));
		push @rows, '(' . rand_p($slot) . ", $k)";
		txn_set_row($t, $slot, $k, 1);
	}
	$sql .= 'INSERT INTO t VALUES ' . join(', ', @rows) . ";\n";
	$node->safe_psql('postgres', $sql);
	commit_txn($t);
	sess_prepare();
}

sub end_round
{
	load_stop();
	quiesce();
	my $sql = "DROP VIEW tv;\nDROP TABLE t;\n";
	$sql .= "DROP TABLE IF EXISTS t_$_;\n" for (0 .. $M{nslots} - 1);
	ctl_query($_) for split /\n/, $sql;
}

connect_all();
alter_probe();
for my $round (1 .. $rounds)
{
	my $nparts = $sizes[ ($round - 1) % @sizes ];
	new_round($round, $nparts);
	my $start = time;
	eval {
		for my $i (1 .. $steps)
		{
			$stepno = $i;
			my $t0 = time;
			$M{gsteps}{ gidx_state() }++ if $conc;
			step(\@ops, \&boost);
			settle_all(1);
			load_tick();
			$M{times}{$last_op} += time - $t0;
			$t0 = time;
			check("after step $i") if $i % $check_every == 0 || $i == $steps;
			$M{times}{check} += time - $t0;
		}
		end_round();
		1;
	} or do {
		my $err = $@;
		eval { fail_now($err) } unless $err eq "FAILED\n";
		$failed = 1;
	};
	my $ups = !$pg18 ? '' : sprintf(
		', %d upserts (%d into a partition, %d waited, %d beside a running upsert of a key; rows: %d in, %d skipped, %d of them from RETURNING%s; errors: %s)',
		$M{upserts} // 0, $M{ups_direct} // 0, $M{ups_waited} // 0, $M{ups_stacked} // 0, $M{ups_in} // 0,
		$M{ups_skip} // 0, $M{ups_learned} // 0,
		join('', map { ", $M{ups_learn_why}{$_} $_" } sort keys %{ $M{ups_learn_why} // {} }),
		join(' ', map { "$_ $M{ups_err}{$_}" } sort keys %{ $M{ups_err} // {} }) || 'none');
	# races of upserts with plain statements of one key (see op_upsert)
	my $r = $M{race} // {};
	my $hist = sub { my ($h) = @_; join(' ', map { "$_ $h->{$_}" } sort keys %{ $h // {} }) || 'none' };
	my $sum = sub { List::Util::sum(0, values %{ $_[0] // {} }) };
	$ups .= sprintf(
		', races with plain statements: %d scenes, %d upserts (ended: %s; the keys raced: %d rows in, %d skipped; '
		  . 'taken from RETURNING while the plain statement ran: %d in, %d skipped), '
		  . '%d plain statements (ended: %s; %d of the unique violations predicted; '
		  . '%d that had to have committed); won by the upsert %d times (the plain statement failing on its key), '
		  . 'by the plain statement %d (the upsert skipping its row)',
		$r->{scenes} // 0, $sum->($r->{ups}),
		$hist->($r->{ups}), $r->{ups_rows}{in} // 0, $r->{ups_rows}{skip} // 0,
		$r->{ups_learned}{in} // 0, $r->{ups_learned}{skip} // 0,
		$sum->($r->{plain}),
		$hist->($r->{plain}), $r->{plain_known} // 0, $r->{must_commit} // 0,
		$r->{won}{upsert} // 0, $r->{won}{'plain statement'} // 0) if $pg18;
	my $lk = $M{lk} // {};
	my $lks = !$lookups ? '' : sprintf(
		', %d lookups (%d statements, %d from a leaf, %d through a view, %d prepared; %d in READ COMMITTED and %d in REPEATABLE READ transactions, %d beside DDL (%d scenes), %d raced, %d waited, %d judged over several versions; %d keys, %d rows found, %d with a truncated row missing, %d with a row of a flap scene\'s partition missing; errors: %s; keys checked: %d; EXPLAIN ANALYZE: %s)',
		map({ $lk->{$_} // 0 } qw(actions stmts leaf view prep rc rr ddl scenes raced waited versions keys rows missing flap_missing)),
		join(' ', map { "$_ $lk->{err}{$_}" } sort keys %{ $lk->{err} // {} }) || 'none',
		$lk->{checked} // 0, $lk->{explain} // 'not run');
	$lks .= sprintf(', UPDATE and DELETE by the key: %s', $hist->($M{md})) if $lookups;
	# clean restarts: did the start load the filters saved at the shutdown?
	my $rs = $M{restart} // {};
	my $res = sprintf(', %d clean restarts (%d loaded the saved filters: %d key ranges, %d filters; refused: %s; not saved: %s)',
		$rs->{clean} // 0, $rs->{loaded} // 0, $rs->{ranges} // 0, $rs->{filters} // 0,
		$hist->($rs->{refused}), $hist->($rs->{unsaved}));
	# the operations of issue 39
	my $dc = $M{dc} // {};
	my $more_s = !$more ? '' : sprintf(
		', %d DETACH CONCURRENTLY scenes (%d waited for older transactions; beside a DETACH CONCURRENTLY: %s; '
		  . 'raced with its first transaction: %s; %d attached again and %d detached again, each raced; '
		  . 'modifications by the key that raced a DETACH or ATTACH: %s; the load\'s lookups and UPDATEs by the key meanwhile: %d; '
		  . 'finished by FINALIZE after a deadlock: %d)'
		  . ', ALTER COLUMN TYPE: %s, the load\'s lookups and UPDATEs by the key: %d (errors: %s)',
		$dc->{scenes} // 0, $dc->{waited} // 0, $hist->($dc->{beside}), $hist->($dc->{raced}), $dc->{attach} // 0,
		$dc->{again} // 0,
		$hist->($dc->{either}), $dc->{load_touches} // 0, $M{detach_finalized} // 0,
		$alter_ok ? $hist->($M{alter}) : "skipped ($alter_why)", $M{touches} // 0, $hist->($M{touch_err}));
	my $fl = $M{flap} // {};
	$more_s .= sprintf(', %d flap scenes (up to %d DETACH CONCURRENTLY and ATTACH; beside them: %d lookups, %d modifications by the key, a pgbench of lookups and UPDATEs by the key in %d, REINDEX INDEX CONCURRENTLY of other leaves in %d (errors: %s); the load\'s lookups and UPDATEs by the key meanwhile: %d; errors: %s)',
		$fl->{scenes} // 0, $fl->{cycles} // 0, $fl->{lookups} // 0, $fl->{modifications} // 0, $fl->{bench} // 0,
		$fl->{reindex} // 0, $hist->($fl->{reindex_errors}), $fl->{load_touches} // 0,
		$hist->($fl->{errors}))
	  if $more;
	$more_s .= sprintf(', a second unique index t_up (u, p) made %s t_k: %d collide scenes (%s; the plain transaction inserting the key the upsert waits with: %s)',
		$M{uidx}, $M{collide}{scenes} // 0, $hist->($M{collide}{outcomes}),
		$hist->($M{collide}{'b inserts the key the upsert waits with'}))
	  if $M{uidx};
	# the concurrent builds
	$more_s .= sprintf(', concurrent builds of t_k (steps begun with it %s): %s; inserts of a key held elsewhere, by the state of t_k: %s; live keys refused elsewhere by the leaves of an invalid t_k: %d',
		$hist->($M{gsteps}), $hist->($M{gb}), $hist->($M{gdup}), $M{grefused} // 0)
	  if $conc;
	ok(!$failed,
		sprintf('round %d, %d partitions: %d steps, %d checks, %d crashes, %d loads, %d large bulks (%d after DDL)%s%s%s%s (%.0f s)',
			$round, $nparts, $stepno, $M{checks} // 0, $M{crashes} // 0, $M{loads} // 0,
			$M{large} // 0, $M{large_ddl} // 0, $ups, $lks, $res, $more_s, time - $start));
	note('time by operation: ' . join(', ', map { sprintf('%s %.1f s', $_, $M{times}{$_}) }
		  sort { $M{times}{$b} <=> $M{times}{$a} } keys %{ $M{times} }))
	  if $ENV{GUNIQUE_STATEFUL_TIMES};
	last if $failed;
	# a round whose fast shutdowns saved filters that no start loaded has
	# not reached the path (a checkpoint ending after the save, say)
	ok(!$rs->{clean} || $rs->{loaded},
		"round $round: a clean restart loaded the filters saved at its shutdown")
	  or diag('refused: ' . $hist->($rs->{refused}) . '; not saved: ' . $hist->($rs->{unsaved}));
	$total{dc_scenes} += $dc->{scenes} // 0;
	$total{dc_waited} += $dc->{waited} // 0;
	$total{dc_lookups} += $dc->{beside}{lookups} // 0;
	$total{dc_mods} += $dc->{beside}{modifications} // 0;
	$total{dc_attach} += $dc->{attach} // 0;
	$total{alter} += List::Util::sum(0, values %{ $M{alter} // {} });
	$total{alter_dup} += List::Util::sum(0, map { $M{alter}{$_} } grep { /^duplicate/ } keys %{ $M{alter} // {} });
	$total{collide} += $M{collide}{scenes} // 0;
	for my $o (keys %{ $M{collide}{outcomes} // {} })
	{
		$total{"collide $1"} += $M{collide}{outcomes}{$o} if $o =~ /: (in|skip|23505 on u, p|23505 on k|40P01)/;
	}
	$total{steps} += $stepno;
	for my $o (keys %{ $M{gb} // {} })
	{
		$total{"gb $o"} += $M{gb}{$o};
	}
	for my $o (keys %{ $M{gdup} // {} })
	{
		$total{"gdup $1"} += $M{gdup}{$o} if $o =~ /^(building)/;
	}
}

# Each operation of issue 39 was reached (in a run of the default length
# or longer: a shorter one may miss some).
if ($more && !$failed && $total{steps} >= 900)
{
	my @miss;
	push @miss, 'a DETACH CONCURRENTLY scene' unless $total{dc_scenes};
	push @miss, 'a DETACH CONCURRENTLY that waited for older transactions' unless $total{dc_waited};
	push @miss, 'a lookup beside a DETACH CONCURRENTLY' unless $total{dc_lookups};
	push @miss, 'an UPDATE or DELETE by the key beside a DETACH CONCURRENTLY' unless $total{dc_mods};
	push @miss, 'an ALTER COLUMN TYPE' if $alter_ok && !$total{alter};
	push @miss, 'an ALTER COLUMN TYPE that makes a duplicate' if $alter_ok && !$total{alter_dup};
	if ($pg18)
	{
		push @miss, "a collide scene's upsert $_" for grep { !$total{"collide $_"} } ('in', 'skip', '23505 on u, p');
	}
	ok(!@miss, 'the operations of issue 39 were reached') or diag('not reached: ' . join('; ', @miss));
}
# Each outcome of the concurrent builds was reached (same length).
if ($conc && !$failed && $total{steps} >= 900)
{
	my @miss;
	push @miss, 'a CREATE INDEX CONCURRENTLY that made t_k valid' unless $total{'gb CREATE INDEX CONCURRENTLY: 00000'};
	push @miss, 'a CREATE INDEX CONCURRENTLY that failed on a duplicate' unless $total{'gb CREATE INDEX CONCURRENTLY: 23505'};
	push @miss, 'a REINDEX INDEX CONCURRENTLY that finished an invalid t_k'
	  unless $total{'gb REINDEX INDEX CONCURRENTLY of an invalid tree: 00000'};
	push @miss, 'a REINDEX INDEX CONCURRENTLY of a valid t_k' unless $total{'gb REINDEX INDEX CONCURRENTLY of a valid tree: 00000'};
	push @miss, 'an insert of a key held elsewhere beside a build' unless $total{'gdup building'};
	ok(!@miss, 'the outcomes of the concurrent builds were reached') or diag('not reached: ' . join('; ', @miss));
}

$_->{s} && sess_close($_->{s}) for @sess;
sess_close($ctl);
$node->stop('immediate');
done_testing();

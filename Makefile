# gunique: unique indexes across the partitions of a partitioned table.

EXTENSION = gunique
MODULE_big = gunique
OBJS = \
	src/common.o \
	src/gunique.o \
	src/hooks.o \
	src/admin/leafcheck.o \
	src/admin/stats.o \
	src/admin/verify.o \
	src/am/btread.o \
	src/am/handler.o \
	src/am/scope.o \
	src/am/tree.o \
	src/citus/citusddl.o \
	src/citus/globalkey.o \
	src/citus/keyroute.o \
	src/citus/keysync.o \
	src/ddl/concurrent.o \
	src/ddl/ddl.o \
	src/ddl/fkey.o \
	src/ddl/merge.o \
	src/insert/keepkey.o \
	src/insert/keylock.o \
	src/insert/probe.o \
	src/insert/probegroup.o \
	src/insert/probescan.o \
	src/insert/waiters.o \
	src/locate/builder.o \
	src/locate/filter.o \
	src/locate/keymap.o \
	src/locate/locate.o \
	src/locate/persist.o \
	src/locate/rebuilds.o \
	src/locate/summary.o \
	src/read/keyplan.o \
	src/read/keyprune.o \
	src/read/lookup.o \
	src/read/lookupplan.o \
	src/read/passnode.o \
	src/upsert/onconflict.o \
	src/upsert/waitgraph.o

DATA = gunique--1.0.sql gunique--1.0--1.1.sql gunique--1.1--1.2.sql \
	gunique--1.2--1.3.sql gunique--1.3--1.4.sql gunique--1.4--1.5.sql gunique--1.5--1.6.sql \
	gunique--1.6--1.7.sql gunique--1.7--1.8.sql
PGFILEDESC = "gunique - unique indexes across partitions"

REGRESS = opclass plain partitioned probescan summary filter onconflict foreignkey lifecycle altertype verify comments privileges rollback progress checkleaves nested keytypes keytypes-icu keepkey comeback lookup merge create-concurrently modify-by-key limits limits-upsert settings
REGRESS_OPTS = --inputdir=. --outputdir=$(CURDIR)/results-regress

ISOLATION = insert-insert insert-insert-3 summary-race filter-race views-race insert-delete update-move deadlock copy-update create-vs-insert create-concurrently-vs-insert create-concurrently-validate create-concurrently-lock create-concurrently-keepkey attach-vs-insert waiters detach-vs-insert reindex-vs-insert reindex-writers drop-rollback attach-lock-order attach-index-writers attach-writers attach-online attach-one-at-a-time light-race light-open-reindex serializable rollback-race attach-progress update-keepkey lookup-moves lookup-ddl lookup-serializable lookup-detach-concurrently upsert-race upsert-collide merge-race attach-default attach-vs-reindex-leaf own-leaf-wait modify-by-key-vs-move keyplan-invalidation modify-by-key-only
ISOLATION_OPTS = --inputdir=. --outputdir=$(CURDIR)/results-isolation

TAP_TESTS = 1

EXTRA_CLEAN = results-regress results-isolation

# The release a save file was written by (persist.c): gunique.control's.
GUNIQUE_VERSION = $(shell sed -n "s/^default_version = '\(.*\)'/\1/p" $(srcdir)/gunique.control)
PG_CPPFLAGS = -I$(srcdir)/src -DGUNIQUE_VERSION='"$(GUNIQUE_VERSION)"'

PG_CONFIG ?= pg_config
PGXS := $(shell $(PG_CONFIG) --pgxs)
include $(PGXS)

# The module the tests load by path (t/pause/: the TAP tests, and
# sql/progress.sql), built with the extension and never installed.
all: t/pause/gunique_test_pause$(DLSUFFIX)
t/pause/gunique_test_pause$(DLSUFFIX): t/pause/gunique_test_pause.c
	$(MAKE) -C t/pause PG_CONFIG=$(PG_CONFIG)
clean: clean-pause
.PHONY: clean-pause
clean-pause:
	$(MAKE) -C t/pause clean PG_CONFIG=$(PG_CONFIG)

# PGXS tracks no header dependencies unless the server was configured with
# --enable-depend: rebuild every object when any of our headers changes,
# rather than link objects compiled against an older struct layout.
$(OBJS): $(wildcard $(srcdir)/src/*.h $(srcdir)/src/*/*.h)

# The benchmark suite, on demand and never in CI (bench/README.md), against
# the gunique installed in $(PG_CONFIG)'s PostgreSQL:
#   make bench BENCH_ARGS="--scale small --publish"
.PHONY: bench
bench:
	bench/run --pg-config $(shell command -v $(PG_CONFIG)) $(BENCH_ARGS)

# The archive PGXN takes, gunique-VERSION.zip of HEAD with META.json made
# from tools/META.json.in and gunique.control's version (tools/dist).
.PHONY: dist
dist:
	$(srcdir)/tools/dist

# The regression and isolation tests, a line each ("REGRESS: a b c",
# "ISOLATION: x y z"), for tools/test-all; builds nothing.
.PHONY: print-tests
print-tests:
	@echo 'REGRESS: $(REGRESS)'
	@echo 'ISOLATION: $(ISOLATION)'

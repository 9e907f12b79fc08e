/*-------------------------------------------------------------------------
 *
 * persist.c
 *	  Key ranges and filters saved at a clean shutdown, loaded at start.
 *
 * Rebuilding the filters after a restart reads every leaf.  After a clean
 * shutdown it need not: the keeper, a background worker that lives as
 * long as the server, saves every summary (range and filter) when it is
 * told to stop, once no other process that could insert is left, and the
 * postmaster loads them at the next start, before any other process
 * exists.  The file is trusted only if it is provably current
 * (src/README, "Saved filters"):
 *   - it is whole: its own size, magic and version, and a CRC-32C over
 *     everything in it;
 *   - it belongs to this data directory's own history: every start of
 *     the server with gunique draws a new random start identifier and
 *     keeps it in the data directory (gunique_start.id), and the file
 *     carries the identifier of the run that saved it; a file from
 *     another copy of the data directory, or from an earlier run, carries
 *     another one;
 *   - it belongs to the shutdown that followed it: the control file says
 *     the cluster was shut down cleanly, with the same system identifier
 *     and timeline, and its last checkpoint starts where WAL ended when
 *     the file was saved, so nothing was logged between the save and the
 *     shutdown (a server run without gunique, or pg_resetwal, would show);
 *   - it is used once: the postmaster removes it as it loads it.
 * Anything else leaves the file unused (and removed), with a LOG, and the
 * filters are rebuilt as after a crash (builder.c).
 *
 *-------------------------------------------------------------------------
 */
#include "postgres.h"

#include <sys/stat.h>
#include <unistd.h>

#include "access/xlog.h"
#include "access/xlog_internal.h"
#include "catalog/pg_control.h"
#include "common/controldata_utils.h"
#include "miscadmin.h"
#include "port/pg_crc32c.h"
#include "postmaster/bgworker.h"
#include "replication/walsender.h"
#include "replication/walsender_private.h"
#include "storage/fd.h"
#include "storage/ipc.h"
#include "storage/latch.h"
#include "storage/proc.h"
#include "storage/procarray.h"
#include "storage/shmem.h"
#include "utils/memutils.h"
#include "utils/wait_event.h"

#include "locate/filter.h"
#include "locate/persist.h"
#include "locate/summary.h"

#define PERSIST_FILE		"gunique_filters.dat"
#define PERSIST_TMP_FILE	"gunique_filters.tmp"
#define START_ID_FILE		"gunique_start.id"
#define START_ID_TMP_FILE	"gunique_start.tmp"
#define PERSIST_MAGIC		0x47554e51	/* "GUNQ" */
#define START_ID_MAGIC		0x47554e53	/* "GUNS" */
#define PERSIST_VERSION		11	/* 11: the start identifier */
#define PERSIST_BUSY_WAIT_MS	10000	/* for builds under way at the save */

typedef struct PersistHeader
{
	uint32		magic;
	uint32		version;
	uint64		sysid;			/* the cluster's system identifier */
	uint64		start_id;		/* of the run that saved it */
	TimeLineID	tli;
	XLogRecPtr	end;			/* where WAL ended at the save */
	uint32		nentries;
	uint64		filter_bytes;	/* of the filters' bits, all together */
	uint64		file_size;
	/* what wrote it: keys hash and filters lay out bits as these do */
	uint32		pg_version;		/* PG_VERSION_NUM */
	char		gunique_version[16];	/* GUNIQUE_VERSION */
	uint32		entry_size;		/* sizeof(PersistEntry) */
} PersistHeader;

/* After every entry: the CRC-32C of all that precedes it. */
typedef struct PersistTrailer
{
	pg_crc32c	crc;
	uint32		magic;
} PersistTrailer;

typedef struct PersistEntry
{
	GuniqueSummarySaved summary;	/* "filter": 1 if a filter follows */
	GuniqueFilterSaved filter;
} PersistEntry;

/* gunique_start.id: the identifier drawn at the last start */
typedef struct StartIdFile
{
	uint32		magic;
	uint32		pad;
	uint64		start_id;
	pg_crc32c	crc;			/* of the fields above */
} StartIdFile;

/*
 * In shared memory, set by the postmaster at start: this run's identifier,
 * or 0 if it could not be kept in the data directory (then nothing is
 * saved).
 */
typedef struct PersistShared
{
	uint64		start_id;
} PersistShared;

static PersistShared *persist_shared = NULL;

static volatile sig_atomic_t keeper_stop = false;

PGDLLEXPORT void gunique_keeper_main(Datum arg);

/* Write all of "len" bytes, and add them to the CRC. */
static bool
persist_write(FILE *f, const void *data, size_t len, pg_crc32c *crc)
{
	COMP_CRC32C(*crc, data, len);
	return fwrite(data, 1, len, f) == len;
}

/*
 * Close "f", written as "tmp" ("ok" if every write was whole), and rename
 * it durably to "path"; false, with a LOG and "tmp" removed, if any of it
 * failed.
 */
static bool
persist_put_in_place(FILE *f, bool ok, const char *tmp, const char *path)
{
	if (FreeFile(f) != 0)
		ok = false;
	if (!ok)
	{
		/* a short write without an error is a full disk */
		if (errno == 0)
			errno = ENOSPC;
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not write file \"%s\": %m", tmp)));
		unlink(tmp);
		return false;
	}
	return durable_rename(tmp, path, LOG) == 0;
}

/*
 * The start identifier kept in the data directory, or 0 if there is none
 * that is whole.
 */
static uint64
start_id_read(void)
{
	FILE	   *f = AllocateFile(START_ID_FILE, PG_BINARY_R);
	StartIdFile data;
	pg_crc32c	crc;
	bool		ok;

	if (f == NULL)
		return 0;
	ok = fread(&data, 1, sizeof(data), f) == sizeof(data) &&
		fgetc(f) == EOF;
	FreeFile(f);
	if (!ok || data.magic != START_ID_MAGIC)
		return 0;
	INIT_CRC32C(crc);
	COMP_CRC32C(crc, &data, offsetof(StartIdFile, crc));
	FIN_CRC32C(crc);
	return EQ_CRC32C(crc, data.crc) ? data.start_id : 0;
}

/*
 * Draw this run's start identifier and keep it in the data directory,
 * durably, before any process that could change a leaf exists.  0 if it
 * could not be kept: this run then saves nothing, since the next start
 * would compare a saved file with an older identifier, one that a copy of
 * this data directory may share.
 */
static uint64
start_id_renew(void)
{
	StartIdFile data = {0};
	FILE	   *f;
	bool		ok;

	data.magic = START_ID_MAGIC;
	do
	{
		if (!pg_strong_random(&data.start_id, sizeof(data.start_id)))
		{
			ereport(LOG,
					(errmsg("gunique could not generate a random start identifier"),
					 errdetail("Key filters will not be saved at shutdown.")));
			return 0;
		}
	} while (data.start_id == 0);
	INIT_CRC32C(data.crc);
	COMP_CRC32C(data.crc, &data, offsetof(StartIdFile, crc));
	FIN_CRC32C(data.crc);

	f = AllocateFile(START_ID_TMP_FILE, PG_BINARY_W);
	if (f == NULL)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", START_ID_TMP_FILE)));
		return 0;
	}
	errno = 0;
	ok = fwrite(&data, 1, sizeof(data), f) == sizeof(data);
	if (!persist_put_in_place(f, ok, START_ID_TMP_FILE, START_ID_FILE))
		return 0;
	return data.start_id;
}

/*
 * Save every summary and filter, then put the file in place; the keeper
 * calls it once no process that could insert is left.
 */
static void
persist_save(void)
{
	GuniqueSummarySaved *all;
	int			n;
	PersistHeader header = {0};
	PersistTrailer trailer = {0};
	pg_crc32c	crc;
	FILE	   *f;
	bool		ok = true;

	/*
	 * pg_upgrade's run of the new cluster restores the schema alone; then
	 * pg_upgrade puts the old cluster's files in place, without WAL.
	 * Nothing this run summarized describes the leaves the next start
	 * finds.
	 */
	if (IsBinaryUpgrade)
		return;

	/*
	 * With WAL archiving, the shutdown switches to a new WAL segment before
	 * its checkpoint; switching here makes that a no-op (the segment is
	 * still empty then), so that the checkpoint starts where WAL ends now.
	 */
	if (XLogArchivingActive())
		(void) RequestXLogSwitch(false);

	/*
	 * The identifier this run drew at start, as the data directory still
	 * holds it: the next start compares the file with what it finds there.
	 */
	header.start_id = persist_shared->start_id;
	if (header.start_id == 0 || start_id_read() != header.start_id)
	{
		ereport(LOG,
				(errmsg("gunique did not save its key filters"),
				 errdetail("The file \"%s\" does not hold the identifier this server drew at start.",
						   START_ID_FILE)));
		return;
	}

	/*
	 * Where WAL ends, before anything is copied: a process that changes a
	 * summary after the copy (a walsender can run SQL) writes WAL after
	 * that (its btree insert or its commit), and the file is not used.
	 */
	header.end = GetXLogInsertRecPtr();
	header.tli = GetWALInsertionTimeLine();
	all = gunique_summary_save_all(&n, PERSIST_BUSY_WAIT_MS);
	if (all == NULL && n == 0 && gunique_filter_arena_ready())
	{
		ereport(LOG,
				(errmsg("gunique did not save its key filters: a filter was still being built")));
		return;
	}
	header.magic = PERSIST_MAGIC;
	header.version = PERSIST_VERSION;
	header.pg_version = PG_VERSION_NUM;
	strlcpy(header.gunique_version, GUNIQUE_VERSION,
			sizeof(header.gunique_version));
	header.entry_size = sizeof(PersistEntry);
	header.sysid = GetSystemIdentifier();
	header.nentries = n;
	header.file_size = sizeof(PersistHeader) + sizeof(PersistTrailer) +
		sizeof(PersistEntry) * n;
	for (int i = 0; i < n; i++)
		if (all[i].filter != 0)
		{
			GuniqueFilterSaved fs;

			(void) gunique_filter_saved(all[i].filter, &fs);
			header.filter_bytes += fs.nbytes;
		}
	header.file_size += header.filter_bytes;

	f = AllocateFile(PERSIST_TMP_FILE, PG_BINARY_W);
	if (f == NULL)
	{
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not create file \"%s\": %m", PERSIST_TMP_FILE)));
		return;
	}
	INIT_CRC32C(crc);
	ok = persist_write(f, &header, sizeof(header), &crc);
	for (int i = 0; ok && i < n; i++)
	{
		PersistEntry entry;
		char	   *bits = NULL;

		memset(&entry, 0, sizeof(entry));
		entry.summary = all[i];
		entry.summary.filter = 0;
		if (all[i].filter != 0)
		{
			bits = gunique_filter_saved(all[i].filter, &entry.filter);
			entry.summary.filter = 1;
		}
		ok = persist_write(f, &entry, sizeof(entry), &crc);
		if (ok && bits != NULL)
			ok = persist_write(f, bits, entry.filter.nbytes, &crc);
	}
	FIN_CRC32C(crc);
	trailer.crc = crc;
	trailer.magic = PERSIST_MAGIC;
	if (ok)
		ok = fwrite(&trailer, 1, sizeof(trailer), f) == sizeof(trailer);
	if (!persist_put_in_place(f, ok, PERSIST_TMP_FILE, PERSIST_FILE))
		return;
	ereport(LOG,
			(errmsg("gunique saved %d key ranges and filters (%llu bytes of filters)",
					n, (unsigned long long) header.filter_bytes)));
}

/*
 * Is any process left that could insert: a backend, an autovacuum worker
 * or a background worker other than the keeper?  WAL senders, which stay
 * until the shutdown checkpoint, and auxiliary processes write no index.
 */
static bool
persist_writers_left(void)
{
	for (int i = 0; i < MaxBackends; i++)
	{
		PGPROC	   *proc = &ProcGlobal->allProcs[i];
		int			pid = proc->pid;
		bool		walsender = false;

		/* a PGPROC keeps the pid of the process that last had it */
		if (pid == 0 || pid == MyProcPid || BackendPidGetProc(pid) == NULL)
			continue;
		for (int w = 0; WalSndCtl != NULL && w < max_wal_senders; w++)
			if (WalSndCtl->walsnds[w].pid == pid)
				walsender = true;
		if (!walsender)
			return true;
	}
	return false;
}

static void
keeper_sigterm(SIGNAL_ARGS)
{
	int			save_errno = errno;

	keeper_stop = true;
	SetLatch(MyLatch);
	errno = save_errno;
}

/*
 * The keeper: waits to be told to stop; then, once every process that
 * could insert has gone, saves the summaries.  An immediate shutdown or a
 * crash kills it first: nothing is saved.
 */
void
gunique_keeper_main(Datum arg)
{
	pqsignal(SIGTERM, keeper_sigterm);
	BackgroundWorkerUnblockSignals();
	/* a keeper stopped while the server ran may have saved: start afresh */
	if (gunique_filter_arena_ready())
		gunique_filter_thaw();

	while (!keeper_stop)
	{
		(void) WaitLatch(MyLatch, WL_LATCH_SET | WL_EXIT_ON_PM_DEATH, -1L,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	while (persist_writers_left())
	{
		(void) WaitLatch(MyLatch, WL_TIMEOUT | WL_EXIT_ON_PM_DEATH, 20L,
						 PG_WAIT_EXTENSION);
		ResetLatch(MyLatch);
	}
	if (gunique_filter_arena_ready())
		persist_save();
	proc_exit(0);
}

/* Register the keeper (in _PG_init, under shared_preload_libraries). */
void
gunique_persist_init(void)
{
	BackgroundWorker worker;

	memset(&worker, 0, sizeof(worker));
	worker.bgw_flags = BGWORKER_SHMEM_ACCESS;
	worker.bgw_start_time = BgWorkerStart_RecoveryFinished;
	worker.bgw_restart_time = 10;
	snprintf(worker.bgw_library_name, BGW_MAXLEN, "gunique");
	snprintf(worker.bgw_function_name, BGW_MAXLEN, "gunique_keeper_main");
	snprintf(worker.bgw_name, BGW_MAXLEN, "gunique filter keeper");
	snprintf(worker.bgw_type, BGW_MAXLEN, "gunique filter keeper");
	RegisterBackgroundWorker(&worker);
}

/*
 * Read exactly "len" bytes, adding them to the CRC if "crc" is not NULL.
 */
static bool
persist_read(FILE *f, void *data, size_t len, pg_crc32c *crc)
{
	if (fread(data, 1, len, f) != len)
		return false;
	if (crc != NULL)
		COMP_CRC32C(*crc, data, len);
	return true;
}

/*
 * Will the server replay WAL, or have its files replaced, after it loads
 * the file?  Replay changes btrees without gunique: it must not start from
 * saved summaries.
 */
static const char *
persist_replay_ahead(void)
{
	struct stat st;

	if (IsBinaryUpgrade)
		return gettext_noop("The server was started by pg_upgrade.");
	if (stat(STANDBY_SIGNAL_FILE, &st) == 0 ||
		stat(RECOVERY_SIGNAL_FILE, &st) == 0)
		return gettext_noop("The server starts in recovery: a standby, or a recovery to a point in time.");
	if (stat(BACKUP_LABEL_FILE, &st) == 0)
		return gettext_noop("The server starts from a base backup.");
	return NULL;
}

/* Is the header that of a whole file of this cluster's last shutdown? */
static bool
persist_header_current(PersistHeader *header, uint64 last_start_id,
					   const char **why)
{
	ControlFileData *control;
	bool		crc_ok;
	struct stat st;

	if (stat(PERSIST_FILE, &st) != 0 || (uint64) st.st_size != header->file_size)
	{
		*why = gettext_noop("The file is not as long as its header says.");
		return false;
	}
	if (last_start_id == 0 || header->start_id != last_start_id)
	{
		*why = gettext_noop("The file was not saved by the last run of this data directory.");
		return false;
	}
	control = get_controlfile(".", &crc_ok);
	if (!crc_ok)
		*why = gettext_noop("The control file is corrupt.");
	else if (control->system_identifier != header->sysid)
		*why = gettext_noop("The file is of another cluster.");
	else if (control->state != DB_SHUTDOWNED)
		*why = gettext_noop("The cluster did not shut down cleanly after the file was saved.");
	else if (control->checkPointCopy.ThisTimeLineID != header->tli ||
			 control->checkPointCopy.redo != header->end)
		*why = gettext_noop("WAL was written after the file was saved.");
	else
		*why = NULL;
	pfree(control);
	return *why == NULL;
}

/*
 * Read the header; false if there is no file, or it was not written by
 * this release of gunique for this PostgreSQL: another release may hash
 * keys or lay out filters otherwise.
 */
static bool
persist_read_header(FILE *f, PersistHeader *header)
{
	return persist_read(f, header, sizeof(PersistHeader), NULL) &&
		header->magic == PERSIST_MAGIC && header->version == PERSIST_VERSION &&
		header->pg_version == PG_VERSION_NUM &&
		strncmp(header->gunique_version, GUNIQUE_VERSION,
				sizeof(header->gunique_version)) == 0 &&
		header->entry_size == sizeof(PersistEntry);
}

/*
 * Do the header's counts fit in the file as it is?  Before the CRC is
 * checked, they must not size anything beyond what the file could hold.
 */
static bool
persist_header_fits(PersistHeader *header)
{
	struct stat st;

	return stat(PERSIST_FILE, &st) == 0 &&
		(uint64) st.st_size == header->file_size &&
		header->filter_bytes <= header->file_size &&
		header->nentries <= header->file_size / sizeof(PersistEntry);
}

/*
 * In the postmaster, before shared memory is sized: how many bytes of
 * filters a file to load holds, so that the filters' area has room for
 * them from the start.  Nothing is trusted yet.
 */
void
gunique_persist_shmem_request(void)
{
	FILE	   *f;
	PersistHeader header;

	RequestAddinShmemSpace(sizeof(PersistShared));
	f = AllocateFile(PERSIST_FILE, PG_BINARY_R);
	if (f == NULL)
		return;
	if (persist_read_header(f, &header) && persist_header_fits(&header))
		/* each filter is aligned, with a header, in pages of the area */
		gunique_filter_set_inplace_extra(header.filter_bytes +
										 (uint64) header.nentries * 8192 +
										 header.filter_bytes / 32);
	FreeFile(f);
}

/* Read and pass over "len" bytes, adding them to the CRC. */
static bool
persist_skip(FILE *f, uint64 len, pg_crc32c *crc)
{
	char		buf[8192];

	while (len > 0)
	{
		size_t		chunk = Min(len, sizeof(buf));

		if (!persist_read(f, buf, chunk, crc))
			return false;
		len -= chunk;
	}
	return true;
}

/*
 * Take back what persist_load_entries loaded from a file that did not
 * prove whole.
 */
static void
persist_unload(GuniqueSummarySaved *loaded, int n)
{
	for (int i = 0; i < n; i++)
	{
		if (loaded[i].filter != 0)
			gunique_filter_unload(loaded[i].filter);
		gunique_summary_unload(&loaded[i]);
	}
}

/*
 * Load the entries of a file found current, in one pass: each filter's
 * bits are read straight into their place, and everything read goes into
 * the CRC.  If the file then proves not whole (its CRC or its trailer),
 * all that was loaded is taken back; no other process exists yet to have
 * seen it.  A filter without room, or an entry without a place, is passed
 * over.  False if the file is not whole.
 */
static bool
persist_load_entries(FILE *f, PersistHeader *header)
{
	/* no more than the table of summaries holds: the header is not proven */
	int			room = (int) Min(header->nentries,
								 (uint32) gunique_max_summaries);
	GuniqueSummarySaved *loaded = palloc(sizeof(GuniqueSummarySaved) *
										 Max(room, 1));
	int			nloaded = 0;
	int			filters = 0;
	pg_crc32c	crc;
	PersistHeader again;
	PersistTrailer trailer;
	bool		ok;

	INIT_CRC32C(crc);
	ok = persist_read(f, &again, sizeof(again), &crc) &&
		memcmp(&again, header, sizeof(again)) == 0;
	for (uint32 i = 0; ok && i < header->nentries; i++)
	{
		PersistEntry entry;
		GuniqueSummarySaved saved;
		char	   *bits = NULL;

		ok = persist_read(f, &entry, sizeof(entry), &crc);
		if (!ok)
			break;
		saved = entry.summary;
		saved.filter = 0;
		if (entry.summary.filter != 0)
		{
			saved.filter = gunique_filter_load(&entry.filter, &bits);
			ok = saved.filter != 0 ?
				persist_read(f, bits, entry.filter.nbytes, &crc) :
				persist_skip(f, entry.filter.nbytes, &crc);
		}
		if (ok && nloaded < room && gunique_summary_load(&saved))
		{
			loaded[nloaded++] = saved;
			filters += saved.filter != 0;
		}
		else if (saved.filter != 0)
			gunique_filter_unload(saved.filter);
	}
	FIN_CRC32C(crc);
	ok = ok && persist_read(f, &trailer, sizeof(trailer), NULL) &&
		trailer.magic == PERSIST_MAGIC && EQ_CRC32C(trailer.crc, crc);
	if (!ok)
		persist_unload(loaded, nloaded);
	else
		ereport(LOG,
				(errmsg("gunique loaded %d key ranges and %d filters saved at the last shutdown",
						nloaded, filters)));
	pfree(loaded);
	return ok;
}

/*
 * Load the file if it is whole and current, and remove it either way.
 */
static void
persist_load_file(uint64 last_start_id)
{
	FILE	   *f;
	PersistHeader header;
	const char *why = NULL;

	if ((f = AllocateFile(PERSIST_FILE, PG_BINARY_R)) == NULL)
		return;
	if ((why = persist_replay_ahead()) != NULL)
		;
	else if (!persist_read_header(f, &header))
		why = gettext_noop("The file was not written by this release of gunique for this release of PostgreSQL.");
	else if (persist_header_current(&header, last_start_id, &why))
	{
		if (!gunique_filter_arena_ready())
			why = gettext_noop("gunique.filter_memory is 0.");
		else if (fseeko(f, 0, SEEK_SET) != 0 ||
				 !persist_load_entries(f, &header))
			why = gettext_noop("The file is truncated or corrupt.");
	}
	if (why != NULL)
		ereport(LOG,
				(errmsg("gunique did not load the key filters saved in \"%s\"",
						PERSIST_FILE),
				 errdetail("%s", _(why)),
				 errhint("They are built again from the partitions as inserts need them.")));
	FreeFile(f);
	if (unlink(PERSIST_FILE) != 0 && errno != ENOENT)
		ereport(LOG,
				(errcode_for_file_access(),
				 errmsg("could not remove file \"%s\": %m", PERSIST_FILE)));
}

/*
 * In the postmaster at start (and at every restart after a crash), once
 * shared memory is made and before any other process exists: load the file
 * if it is whole and current, remove it, and draw this run's start
 * identifier.
 */
void
gunique_persist_load(void)
{
	bool		found;

	LWLockAcquire(AddinShmemInitLock, LW_EXCLUSIVE);
	persist_shared = ShmemInitStruct("gunique saved filters",
									 sizeof(PersistShared), &found);
	LWLockRelease(AddinShmemInitLock);
	if (!IsUnderPostmaster)
	{
		persist_load_file(start_id_read());
		persist_shared->start_id = start_id_renew();
	}
	gunique_filter_load_done();
}

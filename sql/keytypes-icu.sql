-- Key filters under a nondeterministic collation, where 'A' = 'a': the
-- collation-aware hash puts equal keys in the same place.  Needs a server
-- built with ICU (keytypes-icu_1.out: without).
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;
CREATE COLLATION keytype_ci
	(provider = icu, locale = 'und-u-ks-level2', deterministic = false);

CREATE FUNCTION keytype_check(keydef text, gen text, dup text,
							  indexdef text DEFAULT '(k)')
RETURNS TABLE (few_searched bool, duplicate_refused bool)
LANGUAGE plpgsql AS $$
DECLARE
	searched numeric;
	nprobes numeric;
BEGIN
	EXECUTE 'DROP TABLE IF EXISTS kt';
	EXECUTE format('CREATE TABLE kt (part int, %s) PARTITION BY RANGE (part)',
				   keydef);
	FOR p IN 0..19 LOOP
		EXECUTE format('CREATE TABLE kt_%s PARTITION OF kt FOR VALUES FROM (%s) TO (%s)',
					   p, p * 100, (p + 1) * 100);
	END LOOP;
	EXECUTE format('CREATE UNIQUE INDEX kt_k ON kt USING gunique %s', indexdef);
	EXECUTE format('INSERT INTO kt SELECT i %% 2000, %s FROM generate_series(1, 3000) i',
				   gen);
	-- filters made from the btrees, as the worker makes them: a filter made
	-- for an empty index is sized by a guess, which 3,000 more keys outgrow
	PERFORM gunique_build_filters('kt_k', true);
	PERFORM gunique_probe_stats_reset();
	EXECUTE format('INSERT INTO kt SELECT i %% 2000, %s FROM generate_series(3001, 6000) i',
				   gen);
	SELECT sum(partitions_probed), sum(probes) INTO searched, nprobes
	  FROM gunique_stat_probes WHERE partition::text LIKE 'kt\_%';
	few_searched := nprobes >= 3000 AND searched / nprobes < 0.05;
	BEGIN
		-- key 7 went to partition 0
		EXECUTE format('INSERT INTO kt VALUES (1999, %s)', dup);
		duplicate_refused := false;
	EXCEPTION WHEN unique_violation THEN
		duplicate_refused := true;
	END;
	RETURN NEXT;
END $$;

SELECT * FROM keytype_check('k text COLLATE keytype_ci',
	$$'User' || md5(i::text)$$, $$upper('User' || md5('7'))$$);
SELECT * FROM keytype_check('n int, k text COLLATE keytype_ci',
	$$i % 5, 'User' || md5(i::text)$$, $$2, upper('User' || md5('7'))$$,
	'(n, k)');
-- The pattern classes compare bytes, while "=" under this collation does
-- not: refused, as btree refuses its own (version 1.7), on a partitioned
-- table, on its top alone, and on a table that is not partitioned; with a
-- deterministic collation named for the index they serve.
CREATE TABLE kp (part int, k text COLLATE keytype_ci, c char(8) COLLATE keytype_ci)
	PARTITION BY RANGE (part);
CREATE TABLE kp_0 PARTITION OF kp FOR VALUES FROM (0) TO (100);
CREATE UNIQUE INDEX ON kp USING gunique (k text_pattern_ops);
CREATE UNIQUE INDEX ON ONLY kp USING gunique (k varchar_pattern_ops);
CREATE UNIQUE INDEX ON kp_0 USING gunique (c bpchar_pattern_ops);
CREATE UNIQUE INDEX ON kp_0 USING btree (c bpchar_pattern_ops);
CREATE UNIQUE INDEX kp_k ON kp USING gunique (k COLLATE "C" text_pattern_ops);
INSERT INTO kp VALUES (1, 'a', 'a'), (2, 'A', 'A');
DROP TABLE kp;
DROP TABLE IF EXISTS kt;
DROP FUNCTION keytype_check(text, text, text, text);

-- ALTER COLUMN ... TYPE to the collation (altertype): keys that differ only
-- in case, in two partitions, become one key, and the ALTER is refused
CREATE TABLE kc (part int, k text) PARTITION BY RANGE (part);
CREATE TABLE kc1 PARTITION OF kc FOR VALUES FROM (0) TO (10);
CREATE TABLE kc2 PARTITION OF kc FOR VALUES FROM (10) TO (20);
CREATE UNIQUE INDEX kc_k ON kc USING gunique (k);
INSERT INTO kc VALUES (1, 'User'), (11, 'USER');
-- (the error's code only: without ICU, where the collation is missing,
-- versions differ in how they point at it)
\set VERBOSITY sqlstate
ALTER TABLE kc ALTER COLUMN k TYPE text COLLATE keytype_ci;
\set VERBOSITY default
SELECT attcollation = 'default'::regcollation AS default_collation
  FROM pg_attribute WHERE attrelid = 'kc'::regclass AND attname = 'k';
UPDATE kc SET k = 'Other' WHERE part = 11;
\set VERBOSITY sqlstate
ALTER TABLE kc ALTER COLUMN k TYPE text COLLATE keytype_ci;
\set VERBOSITY default
INSERT INTO kc VALUES (12, 'USER');
SELECT * FROM gunique_verify('kc_k');
DROP TABLE kc;
DROP COLLATION IF EXISTS keytype_ci;

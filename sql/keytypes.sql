-- Key filters for every key whose equality has a consistent hash: keys of
-- many types, several columns, expressions, partial indexes and NULLS NOT
-- DISTINCT are ruled out of the other partitions without searching their
-- btrees, and keys equal under the index's equality (not only identical)
-- are still found.
SET client_min_messages = warning;
CREATE EXTENSION IF NOT EXISTS gunique;
RESET client_min_messages;

-- Make a table of 20 partitions keyed by "keydef" (a column definition),
-- with a gunique index on "indexdef", and 3,000 rows keyed by "gen" (an
-- expression of i), with filters built from them; then insert 3,000 more
-- and report the btrees of other partitions searched per new key, and
-- whether "dup", a key equal to gen(7) inserted into another partition, is
-- refused.
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

-- text, as e-mail addresses
SELECT * FROM keytype_check('k text',
	$$'user' || md5(i::text) || '@example.com'$$,
	$$'user' || md5('7') || '@example.com'$$);
-- varchar, bpchar, name
SELECT * FROM keytype_check('k varchar(60)', $$'sku-' || md5(i::text)$$,
	$$'sku-' || md5('7')$$);
SELECT * FROM keytype_check('k char(40)', $$md5(i::text)$$,
	$$md5('7') || '   '$$);
SELECT * FROM keytype_check('k name', $$md5(i::text)$$, $$md5('7')$$);
-- (text under a nondeterministic collation: keytypes-icu.sql)
-- numeric: 7.0 = 7.000
SELECT * FROM keytype_check('k numeric', $$i::numeric / 10$$,
	$$0.700000$$);
-- float8: -0 = 0
SELECT * FROM keytype_check('k float8', $$(i - 7)::float8 * 1.5$$,
	$$'-0'::float8$$);
-- bytea, inet, macaddr
SELECT * FROM keytype_check('k bytea', $$decode(md5(i::text), 'hex')$$,
	$$decode(md5('7'), 'hex')$$);
SELECT * FROM keytype_check('k inet', $$'10.0.0.0'::inet + i$$,
	$$'10.0.0.7/32'::inet$$);
SELECT * FROM keytype_check('k macaddr',
	$$('08:00:2b:00:' || lpad(to_hex(i / 256), 2, '0') || ':' || lpad(to_hex(i % 256), 2, '0'))::macaddr$$,
	$$'08002b000007'::macaddr$$);
-- interval: 1 day = 24 hours
SELECT * FROM keytype_check('k interval', $$make_interval(days => i)$$,
	$$interval '168 hours'$$);
-- timetz (equal only in the same zone); keys of two columns
SELECT * FROM keytype_check('k timetz',
	$$'00:00:00+00'::timetz + make_interval(secs => i)$$,
	$$'00:00:07+00'::timetz$$);
SELECT * FROM keytype_check('k bigint, e text', $$i / 3, 'e' || i$$,
	$$2, 'e7'$$, '(k, e)');
-- an expression key: lower(email)
SELECT * FROM keytype_check('k text',
	$$'User' || md5(i::text) || '@Example.com'$$,
	$$'user' || md5('7') || '@example.COM'$$, '(lower(k))');
-- a partial index
SELECT * FROM keytype_check('k text', $$'k' || i$$, $$'k7'$$,
	$$(k) WHERE k <> 'none'$$);
-- NULLS NOT DISTINCT: (NULL, 'e7') is a key like any other
SELECT * FROM keytype_check('k bigint, e text',
	$$CASE WHEN i % 2 = 1 THEN NULL ELSE i END, 'e' || i$$,
	$$NULL, 'e7'$$, '(k, e) NULLS NOT DISTINCT');
-- an enum
CREATE TYPE keytype_enum AS ENUM ('a', 'b', 'c', 'd', 'e', 'f', 'g', 'h');
SELECT * FROM keytype_check('k keytype_enum, n int',
	$$(ARRAY['a','b','c','d','e','f','g','h'])[1 + i % 8]::keytype_enum, i / 8$$,
	$$'h', 0$$, '(k, n)');

SELECT * FROM gunique_verify('kt_k');
DROP TABLE kt;

-- A key whose leading column follows the partitioning (an id growing with
-- time, say) has key ranges: with fewer partitions than a group filter
-- needs, each probe rules the others out by range, not by filter.
CREATE TABLE kr (part int, id bigint, email text) PARTITION BY RANGE (part);
SELECT format('CREATE TABLE kr_%s PARTITION OF kr FOR VALUES FROM (%s) TO (%s)',
			  p, p * 1000, (p + 1) * 1000) FROM generate_series(0, 7) p \gexec
CREATE UNIQUE INDEX kr_k ON kr USING gunique (id, email);
INSERT INTO kr SELECT i / 8, i, 'e' || i FROM generate_series(0, 31999) i;
SELECT gunique_probe_stats_reset();
INSERT INTO kr SELECT 4000 + i / 8, 32000 + i, 'e' || i FROM generate_series(0, 3999) i;
SELECT sum(probes) AS probes,
	   sum(partitions_skipped) >= 0.9 * 7 * sum(probes) AS ranges_rule_out,
	   sum(partitions_probed) < 0.05 * sum(probes) AS few_searched
  FROM gunique_stat_probes WHERE partition::text LIKE 'kr\_%';
INSERT INTO kr VALUES (7500, 4000, 'e4000');	-- it is in kr_0
DROP TABLE kr;
-- Arrays and ranges (version 1.5): equal arrays, and ranges equal once
-- canonical ('[7,8)' is '[7,7]') or by value ('[0.70,1.4)' is
-- '[0.7,1.40)'), are found; money has no hash function, so money[] keys
-- go without filters (searched, never wrongly ruled out).
SELECT * FROM keytype_check('k int[]', $$ARRAY[i, i + 1]$$, $$ARRAY[7, 8]$$);
SELECT * FROM keytype_check('k text[]', $$ARRAY['a' || i, NULL]$$,
							$$ARRAY['a7', NULL]$$);
SELECT * FROM keytype_check('k int4range', $$int4range(i, i + 1)$$,
							$$'[7,7]'::int4range$$);
SELECT * FROM keytype_check('k numrange', $$numrange(i / 10.0, i / 5.0)$$,
							$$numrange(0.70, 1.4)$$);
SELECT few_searched = false AS searched, duplicate_refused
  FROM keytype_check('k money[]', $$ARRAY[i::money]$$, $$ARRAY[7::money]$$);
-- The pattern classes (version 1.7): their equality is "=", so their keys
-- hash as text and char keys do.  Then an index written as in PostgreSQL's
-- insert_conflict test, (key, fruit text_pattern_ops), and lookups by the
-- key through it.
SELECT * FROM keytype_check('k text', $$'user' || md5(i::text)$$,
	$$'user' || md5('7')$$, '(k text_pattern_ops)');
SELECT * FROM keytype_check('k varchar(60)', $$'sku-' || md5(i::text)$$,
	$$'sku-' || md5('7')$$, '(k varchar_pattern_ops)');
SELECT * FROM keytype_check('k char(40)', $$md5(i::text)$$,
	$$md5('7') || '   '$$, '(k bpchar_pattern_ops)');
SELECT * FROM keytype_check('k varchar(60)', $$'sku-' || md5(i::text)$$,
	$$'sku-' || md5('7')$$, '(k varchar_ops)');
SELECT * FROM keytype_check('key int, fruit text', $$i, 'Fruit' || i$$,
	$$7, 'Fruit7'$$, '(key, fruit text_pattern_ops)');
ANALYZE kt;
EXPLAIN (COSTS OFF) SELECT * FROM kt WHERE key = 7 AND fruit = 'Fruit7';
SELECT * FROM kt WHERE key = 7 AND fruit = 'Fruit7';
SELECT * FROM kt WHERE key = 7 AND fruit = 'fruit7';
SELECT * FROM kt WHERE key = 1999 AND fruit = 'Fruit7';
DROP TABLE kt;
DROP FUNCTION keytype_check(text, text, text, text);
DROP TYPE keytype_enum;


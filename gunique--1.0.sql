/* gunique--1.0.sql */

-- complain if script is sourced in psql, rather than via CREATE EXTENSION
\echo Use "CREATE EXTENSION gunique" to load this file. \quit

CREATE FUNCTION gunique_handler(internal)
RETURNS index_am_handler
AS 'MODULE_PATHNAME'
LANGUAGE C;

CREATE ACCESS METHOD gunique TYPE INDEX HANDLER gunique_handler;
COMMENT ON ACCESS METHOD gunique IS 'unique btree index enforced across all partitions of a partitioned table';

-- Without shared_preload_libraries the utility hook is absent; this trigger
-- turns the statements that need it into a clear error.
CREATE FUNCTION gunique_ddl_guard()
RETURNS event_trigger
AS 'MODULE_PATHNAME'
LANGUAGE C;

CREATE EVENT TRIGGER gunique_ddl_guard ON ddl_command_start
	WHEN TAG IN ('CREATE INDEX', 'CREATE TABLE', 'ALTER TABLE', 'ALTER INDEX')
	EXECUTE FUNCTION gunique_ddl_guard();

-- Operator classes.  Each family mirrors the btree family of the same name:
-- the same operators, and support functions 1 (comparison), 2 (sort
-- support) and 4 (equal image, which keeps nbtree deduplication on) wherever
-- btree has them.

CREATE OPERATOR FAMILY bool_ops USING gunique;
CREATE OPERATOR FAMILY bpchar_ops USING gunique;
CREATE OPERATOR FAMILY bytea_ops USING gunique;
CREATE OPERATOR FAMILY char_ops USING gunique;
CREATE OPERATOR FAMILY datetime_ops USING gunique;
CREATE OPERATOR FAMILY enum_ops USING gunique;
CREATE OPERATOR FAMILY float_ops USING gunique;
CREATE OPERATOR FAMILY integer_ops USING gunique;
CREATE OPERATOR FAMILY interval_ops USING gunique;
CREATE OPERATOR FAMILY macaddr_ops USING gunique;
CREATE OPERATOR FAMILY network_ops USING gunique;
CREATE OPERATOR FAMILY numeric_ops USING gunique;
CREATE OPERATOR FAMILY oid_ops USING gunique;
CREATE OPERATOR FAMILY text_ops USING gunique;
CREATE OPERATOR FAMILY time_ops USING gunique;
CREATE OPERATOR FAMILY timetz_ops USING gunique;
CREATE OPERATOR FAMILY uuid_ops USING gunique;

CREATE OPERATOR CLASS bool_ops DEFAULT FOR TYPE boolean
	USING gunique FAMILY bool_ops AS
	OPERATOR 1 <(boolean,boolean),
	OPERATOR 2 <=(boolean,boolean),
	OPERATOR 3 =(boolean,boolean),
	OPERATOR 4 >=(boolean,boolean),
	OPERATOR 5 >(boolean,boolean),
	FUNCTION 1 btboolcmp(boolean,boolean),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS bpchar_ops DEFAULT FOR TYPE character
	USING gunique FAMILY bpchar_ops AS
	OPERATOR 1 <(character,character),
	OPERATOR 2 <=(character,character),
	OPERATOR 3 =(character,character),
	OPERATOR 4 >=(character,character),
	OPERATOR 5 >(character,character),
	FUNCTION 1 bpcharcmp(character,character),
	FUNCTION 2 bpchar_sortsupport(internal),
	FUNCTION 4 btvarstrequalimage(oid);

CREATE OPERATOR CLASS bytea_ops DEFAULT FOR TYPE bytea
	USING gunique FAMILY bytea_ops AS
	OPERATOR 1 <(bytea,bytea),
	OPERATOR 2 <=(bytea,bytea),
	OPERATOR 3 =(bytea,bytea),
	OPERATOR 4 >=(bytea,bytea),
	OPERATOR 5 >(bytea,bytea),
	FUNCTION 1 byteacmp(bytea,bytea),
	FUNCTION 2 bytea_sortsupport(internal),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS char_ops DEFAULT FOR TYPE "char"
	USING gunique FAMILY char_ops AS
	OPERATOR 1 <("char","char"),
	OPERATOR 2 <=("char","char"),
	OPERATOR 3 =("char","char"),
	OPERATOR 4 >=("char","char"),
	OPERATOR 5 >("char","char"),
	FUNCTION 1 btcharcmp("char","char"),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS date_ops DEFAULT FOR TYPE date
	USING gunique FAMILY datetime_ops AS
	OPERATOR 1 <(date,date),
	OPERATOR 2 <=(date,date),
	OPERATOR 3 =(date,date),
	OPERATOR 4 >=(date,date),
	OPERATOR 5 >(date,date),
	FUNCTION 1 date_cmp(date,date),
	FUNCTION 2 date_sortsupport(internal),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS timestamp_ops DEFAULT FOR TYPE timestamp without time zone
	USING gunique FAMILY datetime_ops AS
	OPERATOR 1 <(timestamp without time zone,timestamp without time zone),
	OPERATOR 2 <=(timestamp without time zone,timestamp without time zone),
	OPERATOR 3 =(timestamp without time zone,timestamp without time zone),
	OPERATOR 4 >=(timestamp without time zone,timestamp without time zone),
	OPERATOR 5 >(timestamp without time zone,timestamp without time zone),
	FUNCTION 1 timestamp_cmp(timestamp without time zone,timestamp without time zone),
	FUNCTION 2 timestamp_sortsupport(internal),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS timestamptz_ops DEFAULT FOR TYPE timestamp with time zone
	USING gunique FAMILY datetime_ops AS
	OPERATOR 1 <(timestamp with time zone,timestamp with time zone),
	OPERATOR 2 <=(timestamp with time zone,timestamp with time zone),
	OPERATOR 3 =(timestamp with time zone,timestamp with time zone),
	OPERATOR 4 >=(timestamp with time zone,timestamp with time zone),
	OPERATOR 5 >(timestamp with time zone,timestamp with time zone),
	FUNCTION 1 timestamptz_cmp(timestamp with time zone,timestamp with time zone),
	FUNCTION 2 timestamp_sortsupport(internal),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS enum_ops DEFAULT FOR TYPE anyenum
	USING gunique FAMILY enum_ops AS
	OPERATOR 1 <(anyenum,anyenum),
	OPERATOR 2 <=(anyenum,anyenum),
	OPERATOR 3 =(anyenum,anyenum),
	OPERATOR 4 >=(anyenum,anyenum),
	OPERATOR 5 >(anyenum,anyenum),
	FUNCTION 1 enum_cmp(anyenum,anyenum),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS float4_ops DEFAULT FOR TYPE real
	USING gunique FAMILY float_ops AS
	OPERATOR 1 <(real,real),
	OPERATOR 2 <=(real,real),
	OPERATOR 3 =(real,real),
	OPERATOR 4 >=(real,real),
	OPERATOR 5 >(real,real),
	FUNCTION 1 btfloat4cmp(real,real),
	FUNCTION 2 btfloat4sortsupport(internal);

CREATE OPERATOR CLASS float8_ops DEFAULT FOR TYPE double precision
	USING gunique FAMILY float_ops AS
	OPERATOR 1 <(double precision,double precision),
	OPERATOR 2 <=(double precision,double precision),
	OPERATOR 3 =(double precision,double precision),
	OPERATOR 4 >=(double precision,double precision),
	OPERATOR 5 >(double precision,double precision),
	FUNCTION 1 btfloat8cmp(double precision,double precision),
	FUNCTION 2 btfloat8sortsupport(internal);

CREATE OPERATOR CLASS int2_ops DEFAULT FOR TYPE smallint
	USING gunique FAMILY integer_ops AS
	OPERATOR 1 <(smallint,smallint),
	OPERATOR 2 <=(smallint,smallint),
	OPERATOR 3 =(smallint,smallint),
	OPERATOR 4 >=(smallint,smallint),
	OPERATOR 5 >(smallint,smallint),
	FUNCTION 1 btint2cmp(smallint,smallint),
	FUNCTION 2 btint2sortsupport(internal),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS int4_ops DEFAULT FOR TYPE integer
	USING gunique FAMILY integer_ops AS
	OPERATOR 1 <(integer,integer),
	OPERATOR 2 <=(integer,integer),
	OPERATOR 3 =(integer,integer),
	OPERATOR 4 >=(integer,integer),
	OPERATOR 5 >(integer,integer),
	FUNCTION 1 btint4cmp(integer,integer),
	FUNCTION 2 btint4sortsupport(internal),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS int8_ops DEFAULT FOR TYPE bigint
	USING gunique FAMILY integer_ops AS
	OPERATOR 1 <(bigint,bigint),
	OPERATOR 2 <=(bigint,bigint),
	OPERATOR 3 =(bigint,bigint),
	OPERATOR 4 >=(bigint,bigint),
	OPERATOR 5 >(bigint,bigint),
	FUNCTION 1 btint8cmp(bigint,bigint),
	FUNCTION 2 btint8sortsupport(internal),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS interval_ops DEFAULT FOR TYPE interval
	USING gunique FAMILY interval_ops AS
	OPERATOR 1 <(interval,interval),
	OPERATOR 2 <=(interval,interval),
	OPERATOR 3 =(interval,interval),
	OPERATOR 4 >=(interval,interval),
	OPERATOR 5 >(interval,interval),
	FUNCTION 1 interval_cmp(interval,interval);

CREATE OPERATOR CLASS macaddr_ops DEFAULT FOR TYPE macaddr
	USING gunique FAMILY macaddr_ops AS
	OPERATOR 1 <(macaddr,macaddr),
	OPERATOR 2 <=(macaddr,macaddr),
	OPERATOR 3 =(macaddr,macaddr),
	OPERATOR 4 >=(macaddr,macaddr),
	OPERATOR 5 >(macaddr,macaddr),
	FUNCTION 1 macaddr_cmp(macaddr,macaddr),
	FUNCTION 2 macaddr_sortsupport(internal),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS inet_ops DEFAULT FOR TYPE inet
	USING gunique FAMILY network_ops AS
	OPERATOR 1 <(inet,inet),
	OPERATOR 2 <=(inet,inet),
	OPERATOR 3 =(inet,inet),
	OPERATOR 4 >=(inet,inet),
	OPERATOR 5 >(inet,inet),
	FUNCTION 1 network_cmp(inet,inet),
	FUNCTION 2 network_sortsupport(internal),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS numeric_ops DEFAULT FOR TYPE numeric
	USING gunique FAMILY numeric_ops AS
	OPERATOR 1 <(numeric,numeric),
	OPERATOR 2 <=(numeric,numeric),
	OPERATOR 3 =(numeric,numeric),
	OPERATOR 4 >=(numeric,numeric),
	OPERATOR 5 >(numeric,numeric),
	FUNCTION 1 numeric_cmp(numeric,numeric),
	FUNCTION 2 numeric_sortsupport(internal);

CREATE OPERATOR CLASS oid_ops DEFAULT FOR TYPE oid
	USING gunique FAMILY oid_ops AS
	OPERATOR 1 <(oid,oid),
	OPERATOR 2 <=(oid,oid),
	OPERATOR 3 =(oid,oid),
	OPERATOR 4 >=(oid,oid),
	OPERATOR 5 >(oid,oid),
	FUNCTION 1 btoidcmp(oid,oid),
	FUNCTION 2 btoidsortsupport(internal),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS name_ops DEFAULT FOR TYPE name
	USING gunique FAMILY text_ops AS
	OPERATOR 1 <(name,name),
	OPERATOR 2 <=(name,name),
	OPERATOR 3 =(name,name),
	OPERATOR 4 >=(name,name),
	OPERATOR 5 >(name,name),
	FUNCTION 1 btnamecmp(name,name),
	FUNCTION 2 btnamesortsupport(internal),
	FUNCTION 4 btvarstrequalimage(oid);

CREATE OPERATOR CLASS text_ops DEFAULT FOR TYPE text
	USING gunique FAMILY text_ops AS
	OPERATOR 1 <(text,text),
	OPERATOR 2 <=(text,text),
	OPERATOR 3 =(text,text),
	OPERATOR 4 >=(text,text),
	OPERATOR 5 >(text,text),
	FUNCTION 1 bttextcmp(text,text),
	FUNCTION 2 bttextsortsupport(internal),
	FUNCTION 4 btvarstrequalimage(oid);

CREATE OPERATOR CLASS time_ops DEFAULT FOR TYPE time without time zone
	USING gunique FAMILY time_ops AS
	OPERATOR 1 <(time without time zone,time without time zone),
	OPERATOR 2 <=(time without time zone,time without time zone),
	OPERATOR 3 =(time without time zone,time without time zone),
	OPERATOR 4 >=(time without time zone,time without time zone),
	OPERATOR 5 >(time without time zone,time without time zone),
	FUNCTION 1 time_cmp(time without time zone,time without time zone),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS timetz_ops DEFAULT FOR TYPE time with time zone
	USING gunique FAMILY timetz_ops AS
	OPERATOR 1 <(time with time zone,time with time zone),
	OPERATOR 2 <=(time with time zone,time with time zone),
	OPERATOR 3 =(time with time zone,time with time zone),
	OPERATOR 4 >=(time with time zone,time with time zone),
	OPERATOR 5 >(time with time zone,time with time zone),
	FUNCTION 1 timetz_cmp(time with time zone,time with time zone),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS uuid_ops DEFAULT FOR TYPE uuid
	USING gunique FAMILY uuid_ops AS
	OPERATOR 1 <(uuid,uuid),
	OPERATOR 2 <=(uuid,uuid),
	OPERATOR 3 =(uuid,uuid),
	OPERATOR 4 >=(uuid,uuid),
	OPERATOR 5 >(uuid,uuid),
	FUNCTION 1 uuid_cmp(uuid,uuid),
	FUNCTION 2 uuid_sortsupport(internal),
	FUNCTION 4 btequalimage(oid);

ALTER OPERATOR FAMILY datetime_ops USING gunique ADD
	OPERATOR 1 <(date,timestamp with time zone),
	OPERATOR 2 <=(date,timestamp with time zone),
	OPERATOR 3 =(date,timestamp with time zone),
	OPERATOR 4 >=(date,timestamp with time zone),
	OPERATOR 5 >(date,timestamp with time zone),
	FUNCTION 1 (date, timestamp with time zone) date_cmp_timestamptz(date,timestamp with time zone),
	OPERATOR 1 <(date,timestamp without time zone),
	OPERATOR 2 <=(date,timestamp without time zone),
	OPERATOR 3 =(date,timestamp without time zone),
	OPERATOR 4 >=(date,timestamp without time zone),
	OPERATOR 5 >(date,timestamp without time zone),
	FUNCTION 1 (date, timestamp without time zone) date_cmp_timestamp(date,timestamp without time zone),
	OPERATOR 1 <(timestamp with time zone,date),
	OPERATOR 2 <=(timestamp with time zone,date),
	OPERATOR 3 =(timestamp with time zone,date),
	OPERATOR 4 >=(timestamp with time zone,date),
	OPERATOR 5 >(timestamp with time zone,date),
	FUNCTION 1 (timestamp with time zone, date) timestamptz_cmp_date(timestamp with time zone,date),
	OPERATOR 1 <(timestamp with time zone,timestamp without time zone),
	OPERATOR 2 <=(timestamp with time zone,timestamp without time zone),
	OPERATOR 3 =(timestamp with time zone,timestamp without time zone),
	OPERATOR 4 >=(timestamp with time zone,timestamp without time zone),
	OPERATOR 5 >(timestamp with time zone,timestamp without time zone),
	FUNCTION 1 (timestamp with time zone, timestamp without time zone) timestamptz_cmp_timestamp(timestamp with time zone,timestamp without time zone),
	OPERATOR 1 <(timestamp without time zone,date),
	OPERATOR 2 <=(timestamp without time zone,date),
	OPERATOR 3 =(timestamp without time zone,date),
	OPERATOR 4 >=(timestamp without time zone,date),
	OPERATOR 5 >(timestamp without time zone,date),
	FUNCTION 1 (timestamp without time zone, date) timestamp_cmp_date(timestamp without time zone,date),
	OPERATOR 1 <(timestamp without time zone,timestamp with time zone),
	OPERATOR 2 <=(timestamp without time zone,timestamp with time zone),
	OPERATOR 3 =(timestamp without time zone,timestamp with time zone),
	OPERATOR 4 >=(timestamp without time zone,timestamp with time zone),
	OPERATOR 5 >(timestamp without time zone,timestamp with time zone),
	FUNCTION 1 (timestamp without time zone, timestamp with time zone) timestamp_cmp_timestamptz(timestamp without time zone,timestamp with time zone);

ALTER OPERATOR FAMILY float_ops USING gunique ADD
	OPERATOR 1 <(double precision,real),
	OPERATOR 2 <=(double precision,real),
	OPERATOR 3 =(double precision,real),
	OPERATOR 4 >=(double precision,real),
	OPERATOR 5 >(double precision,real),
	FUNCTION 1 (double precision, real) btfloat84cmp(double precision,real),
	OPERATOR 1 <(real,double precision),
	OPERATOR 2 <=(real,double precision),
	OPERATOR 3 =(real,double precision),
	OPERATOR 4 >=(real,double precision),
	OPERATOR 5 >(real,double precision),
	FUNCTION 1 (real, double precision) btfloat48cmp(real,double precision);

ALTER OPERATOR FAMILY integer_ops USING gunique ADD
	OPERATOR 1 <(bigint,integer),
	OPERATOR 2 <=(bigint,integer),
	OPERATOR 3 =(bigint,integer),
	OPERATOR 4 >=(bigint,integer),
	OPERATOR 5 >(bigint,integer),
	FUNCTION 1 (bigint, integer) btint84cmp(bigint,integer),
	OPERATOR 1 <(bigint,smallint),
	OPERATOR 2 <=(bigint,smallint),
	OPERATOR 3 =(bigint,smallint),
	OPERATOR 4 >=(bigint,smallint),
	OPERATOR 5 >(bigint,smallint),
	FUNCTION 1 (bigint, smallint) btint82cmp(bigint,smallint),
	OPERATOR 1 <(integer,bigint),
	OPERATOR 2 <=(integer,bigint),
	OPERATOR 3 =(integer,bigint),
	OPERATOR 4 >=(integer,bigint),
	OPERATOR 5 >(integer,bigint),
	FUNCTION 1 (integer, bigint) btint48cmp(integer,bigint),
	OPERATOR 1 <(integer,smallint),
	OPERATOR 2 <=(integer,smallint),
	OPERATOR 3 =(integer,smallint),
	OPERATOR 4 >=(integer,smallint),
	OPERATOR 5 >(integer,smallint),
	FUNCTION 1 (integer, smallint) btint42cmp(integer,smallint),
	OPERATOR 1 <(smallint,bigint),
	OPERATOR 2 <=(smallint,bigint),
	OPERATOR 3 =(smallint,bigint),
	OPERATOR 4 >=(smallint,bigint),
	OPERATOR 5 >(smallint,bigint),
	FUNCTION 1 (smallint, bigint) btint28cmp(smallint,bigint),
	OPERATOR 1 <(smallint,integer),
	OPERATOR 2 <=(smallint,integer),
	OPERATOR 3 =(smallint,integer),
	OPERATOR 4 >=(smallint,integer),
	OPERATOR 5 >(smallint,integer),
	FUNCTION 1 (smallint, integer) btint24cmp(smallint,integer);

ALTER OPERATOR FAMILY text_ops USING gunique ADD
	OPERATOR 1 <(name,text),
	OPERATOR 2 <=(name,text),
	OPERATOR 3 =(name,text),
	OPERATOR 4 >=(name,text),
	OPERATOR 5 >(name,text),
	FUNCTION 1 (name, text) btnametextcmp(name,text),
	OPERATOR 1 <(text,name),
	OPERATOR 2 <=(text,name),
	OPERATOR 3 =(text,name),
	OPERATOR 4 >=(text,name),
	OPERATOR 5 >(text,name),
	FUNCTION 1 (text, name) bttextnamecmp(text,name);

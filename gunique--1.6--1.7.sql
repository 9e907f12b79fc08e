/* gunique--1.6--1.7.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gunique UPDATE TO '1.7'" to load this file. \quit

-- The pattern operator classes, as btree has them: text, varchar and char
-- ordered byte by byte whatever the collation (~<~ and the like), with the
-- ordinary "=" as their equality, so that an index written for btree with
-- text_pattern_ops can move to gunique unchanged.  Their keys hash as text
-- and char keys do (the hash functions of "=", which under a deterministic
-- collation is byte equality).  As for btree, CREATE INDEX refuses them on
-- a column with a nondeterministic collation, where "=" is not byte
-- equality (ddl.c).
CREATE OPERATOR FAMILY text_pattern_ops USING gunique;
CREATE OPERATOR FAMILY bpchar_pattern_ops USING gunique;

CREATE OPERATOR CLASS text_pattern_ops FOR TYPE text
	USING gunique FAMILY text_pattern_ops AS
	OPERATOR 1 ~<~(text,text),
	OPERATOR 2 ~<=~(text,text),
	OPERATOR 3 =(text,text),
	OPERATOR 4 ~>=~(text,text),
	OPERATOR 5 ~>~(text,text),
	FUNCTION 1 bttext_pattern_cmp(text,text),
	FUNCTION 2 bttext_pattern_sortsupport(internal),
	FUNCTION 4 btequalimage(oid);

CREATE OPERATOR CLASS bpchar_pattern_ops FOR TYPE character
	USING gunique FAMILY bpchar_pattern_ops AS
	OPERATOR 1 ~<~(character,character),
	OPERATOR 2 ~<=~(character,character),
	OPERATOR 3 =(character,character),
	OPERATOR 4 ~>=~(character,character),
	OPERATOR 5 ~>~(character,character),
	FUNCTION 1 btbpchar_pattern_cmp(character,character),
	FUNCTION 2 btbpchar_pattern_sortsupport(internal),
	FUNCTION 4 btequalimage(oid);

-- btree's aliases for varchar columns: classes of type text in the text
-- families, with no members of their own (the family's serve).  A class
-- needs one item at least; STORAGE of its own input type is none.
CREATE OPERATOR CLASS varchar_pattern_ops FOR TYPE text
	USING gunique FAMILY text_pattern_ops AS
	STORAGE text;

CREATE OPERATOR CLASS varchar_ops FOR TYPE text
	USING gunique FAMILY text_ops AS
	STORAGE text;

/* gunique--1.4--1.5.sql */

-- complain if script is sourced in psql, rather than via ALTER EXTENSION
\echo Use "ALTER EXTENSION gunique UPDATE TO '1.5'" to load this file. \quit

-- Arrays and ranges, as btree has them: compared element by element, and
-- bound by bound.  Their keys get key filters through the hash functions
-- of their hash operator families, when the element (or subtype) has one.
CREATE OPERATOR FAMILY array_ops USING gunique;
CREATE OPERATOR FAMILY range_ops USING gunique;

CREATE OPERATOR CLASS array_ops DEFAULT FOR TYPE anyarray
	USING gunique FAMILY array_ops AS
	OPERATOR 1 <(anyarray,anyarray),
	OPERATOR 2 <=(anyarray,anyarray),
	OPERATOR 3 =(anyarray,anyarray),
	OPERATOR 4 >=(anyarray,anyarray),
	OPERATOR 5 >(anyarray,anyarray),
	FUNCTION 1 btarraycmp(anyarray,anyarray);

CREATE OPERATOR CLASS range_ops DEFAULT FOR TYPE anyrange
	USING gunique FAMILY range_ops AS
	OPERATOR 1 <(anyrange,anyrange),
	OPERATOR 2 <=(anyrange,anyrange),
	OPERATOR 3 =(anyrange,anyrange),
	OPERATOR 4 >=(anyrange,anyrange),
	OPERATOR 5 >(anyrange,anyrange),
	FUNCTION 1 range_cmp(anyrange,anyrange);

-- PostgreSQL 18 gave btree's range_ops sort support; so does gunique's
-- where the server has it.
DO $$
BEGIN
	IF to_regprocedure('range_sortsupport(internal)') IS NOT NULL THEN
		ALTER OPERATOR FAMILY range_ops USING gunique
			ADD FUNCTION 2 (anyrange, anyrange) range_sortsupport(internal);
	END IF;
END $$;

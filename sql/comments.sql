--
-- Every object of the extension that psql describes has a comment (\df+
-- for functions, \dy+ for the event trigger, \dA+ for the access method,
-- \dv+ for the view, \dx for the extension), after CREATE EXTENSION and
-- after ALTER EXTENSION UPDATE from 1.7, which lacked some.
--
SET client_min_messages = warning;
DROP EXTENSION IF EXISTS gunique CASCADE;
RESET client_min_messages;
CREATE EXTENSION gunique;

-- The members of the extension with their comments.  Operator classes and
-- families are left out: btree's have no comments, and psql shows none for
-- them.  So is the view's row type, which the view's comment describes.
CREATE TEMP VIEW gunique_members AS
SELECT pg_describe_object(d.classid, d.objid, 0) AS object,
       obj_description(d.objid, c.relname) AS comment
  FROM pg_depend d
  JOIN pg_class c ON c.oid = d.classid
 WHERE d.refclassid = 'pg_extension'::regclass AND d.deptype = 'e'
   AND d.refobjid = (SELECT oid FROM pg_extension WHERE extname = 'gunique')
   AND d.classid NOT IN ('pg_opclass'::regclass, 'pg_opfamily'::regclass,
                         'pg_type'::regclass);

-- none without a comment
SELECT object FROM gunique_members WHERE comment IS NULL
 ORDER BY object COLLATE "C";
\pset format unaligned
SELECT extversion, obj_description(oid, 'pg_extension') AS comment
  FROM pg_extension WHERE extname = 'gunique';
SELECT object, comment FROM gunique_members ORDER BY object COLLATE "C";
\pset format aligned

-- 1.7 lacked some; the update adds the same comments as a new install has
DROP EXTENSION gunique;
CREATE EXTENSION gunique VERSION '1.7';
SELECT object FROM gunique_members WHERE comment IS NULL
 ORDER BY object COLLATE "C";
ALTER EXTENSION gunique UPDATE;
SELECT object FROM gunique_members WHERE comment IS NULL
 ORDER BY object COLLATE "C";
\pset format unaligned
SELECT extversion, obj_description(oid, 'pg_extension') AS comment
  FROM pg_extension WHERE extname = 'gunique';
SELECT object, comment FROM gunique_members ORDER BY object COLLATE "C";
\pset format aligned

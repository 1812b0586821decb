-- The sequences owned by columns of the given tables (serial: 'a', identity: 'i'): what
-- TRUNCATE ... RESTART IDENTITY restarts, and so what a reset in place restarts.
SELECT DISTINCT s.oid::regclass::text AS name
FROM pg_class s
JOIN pg_depend d ON d.classid = 'pg_class'::regclass AND d.objid = s.oid
                AND d.refclassid = 'pg_class'::regclass AND d.deptype IN ('a', 'i')
WHERE s.relkind = 'S' AND d.refobjid = ANY (%(tables)s::regclass[])
ORDER BY 1;

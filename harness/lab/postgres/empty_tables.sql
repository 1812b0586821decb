-- The tables of a fresh clone that hold no rows: what a reset in place truncates.
SELECT c.oid::regclass::text AS name
FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
WHERE c.relkind = 'r' AND n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
  AND (xpath('/row/e/text()', query_to_xml(
        format('SELECT NOT EXISTS (SELECT 1 FROM %s) AS e', c.oid::regclass),
        false, true, '')))[1]::text = 'true'
ORDER BY 1;

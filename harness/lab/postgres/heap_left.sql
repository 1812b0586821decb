-- The given tables whose heap still has pages after a reset's VACUUM: dead rows it could
-- not remove (an old snapshot somewhere), which would grow the table trial after trial.
SELECT t AS name
FROM unnest(%(tables)s::text[]) AS t
WHERE pg_relation_size(t::regclass) > 0
ORDER BY 1;

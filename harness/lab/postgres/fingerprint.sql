-- What a trial database holds that a trial could have changed, as one md5: its schema
-- objects (tables, columns, constraints, indexes, triggers, functions, types, views, rules,
-- policies, extensions, event triggers, publications), owners and grants, sequence states,
-- database settings, large objects, and the contents of every table. A database reset in
-- place is reused only when this equals the fingerprint of a fresh clone (recycle.py).
WITH user_class AS (
    SELECT c.oid, c.relkind, n.nspname
    FROM pg_class c JOIN pg_namespace n ON n.oid = c.relnamespace
    WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
), items AS (
    SELECT format('namespace %s %s %s', nspname, nspowner::regrole, nspacl)
    FROM pg_namespace
    WHERE nspname <> 'information_schema' AND nspname NOT LIKE 'pg\_%'
    UNION ALL
    SELECT format('class %s %s %s %s %s %s %s', c.oid::regclass, c.relkind, c.relpersistence,
                  c.relowner::regrole, c.relacl, c.relrowsecurity, c.reloptions)
    FROM pg_class c JOIN user_class u ON u.oid = c.oid
    UNION ALL
    SELECT format('column %s %s %s %s %s %s %s %s %s', a.attrelid::regclass, a.attnum,
                  a.attname, format_type(a.atttypid, a.atttypmod), a.attnotnull,
                  a.attisdropped, a.attidentity, a.attgenerated, pg_get_expr(d.adbin, d.adrelid))
    FROM pg_attribute a JOIN user_class u ON u.oid = a.attrelid
    LEFT JOIN pg_attrdef d ON d.adrelid = a.attrelid AND d.adnum = a.attnum
    WHERE a.attnum > 0
    UNION ALL
    SELECT format('constraint %s %s %s %s', conrelid::regclass, contypid::regtype, conname,
                  pg_get_constraintdef(oid))
    FROM pg_constraint WHERE connamespace IN (SELECT oid FROM pg_namespace
                                              WHERE nspname NOT LIKE 'pg\_%'
                                                AND nspname <> 'information_schema')
    UNION ALL
    SELECT format('index %s', pg_get_indexdef(i.indexrelid))
    FROM pg_index i JOIN user_class u ON u.oid = i.indrelid
    UNION ALL
    SELECT format('trigger %s %s', pg_get_triggerdef(t.oid), t.tgenabled)
    FROM pg_trigger t JOIN user_class u ON u.oid = t.tgrelid WHERE NOT t.tgisinternal
    UNION ALL
    SELECT format('rule %s', pg_get_ruledef(r.oid))
    FROM pg_rewrite r JOIN user_class u ON u.oid = r.ev_class
    UNION ALL
    SELECT format('policy %s %s %s %s %s %s', p.polrelid::regclass, p.polname, p.polcmd,
                  p.polroles, pg_get_expr(p.polqual, p.polrelid),
                  pg_get_expr(p.polwithcheck, p.polrelid))
    FROM pg_policy p
    UNION ALL
    SELECT format('function %s %s %s %s %s %s %s', p.oid::regprocedure, p.proowner::regrole,
                  p.proacl, p.prosecdef, p.proconfig, p.provolatile, md5(p.prosrc))
    FROM pg_proc p JOIN pg_namespace n ON n.oid = p.pronamespace
    WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
    UNION ALL
    SELECT format('type %s %s %s %s', t.oid::regtype, t.typtype, t.typowner::regrole, t.typacl)
    FROM pg_type t JOIN pg_namespace n ON n.oid = t.typnamespace
    WHERE n.nspname <> 'information_schema' AND n.nspname NOT LIKE 'pg\_%'
    UNION ALL
    SELECT format('enum %s %s %s', enumtypid::regtype, enumsortorder, enumlabel) FROM pg_enum
    UNION ALL
    SELECT format('extension %s %s', extname, extversion) FROM pg_extension
    UNION ALL
    SELECT format('event trigger %s %s %s %s', evtname, evtevent, evtfoid::regproc, evtenabled)
    FROM pg_event_trigger
    UNION ALL
    SELECT format('publication %s', pubname) FROM pg_publication
    UNION ALL
    SELECT format('default acl %s %s %s', defaclrole::regrole, defaclobjtype, defaclacl)
    FROM pg_default_acl
    UNION ALL
    SELECT format('sequence %s.%s %s %s %s', schemaname, sequencename, start_value,
                  increment_by, last_value)
    FROM pg_sequences
    UNION ALL
    SELECT format('database %s %s %s %s', datdba::regrole, datacl, datconnlimit,
                  (SELECT array_agg(s ORDER BY s) FROM pg_db_role_setting r, unnest(r.setconfig) s
                   WHERE r.setdatabase = d.oid))
    FROM pg_database d WHERE datname = current_database()
    UNION ALL
    SELECT format('large objects %s', count(*)) FROM pg_largeobject_metadata
    UNION ALL
    -- contents, one md5 per table or materialized view, through query_to_xml: one statement
    SELECT format('rows %s %s', u.oid::regclass, (xpath('/row/h/text()', query_to_xml(
        format('SELECT md5(coalesce(string_agg(t::text, %L ORDER BY t::text), %L)) AS h '
               'FROM %s t', E'\n', '', u.oid::regclass), false, true, '')))[1]::text)
    FROM user_class u WHERE u.relkind IN ('r', 'm')
)
SELECT md5(string_agg(item, E'\n' ORDER BY item)) AS fingerprint FROM items AS t(item);

-- DeltaBus least-privilege roles, for psql (15 or later). Run it as a
-- superuser, connected to the database that holds (or will hold) the outbox:
--
--   DELTABUS_RELAY_PASSWORD=... psql -v ON_ERROR_STOP=1 -d app -f deploy/sql/roles.sql
--
--   deltabus_migrate    `relay migrate`: owns the outbox table and index, creates
--                       the publication (CREATE on the database).
--   deltabus_relay      `relay run`, `bootstrap`, `rebuild`, `status`: LOGIN
--                       REPLICATION, SELECT on the outbox.
--   deltabus_janitor    `relay janitor`: SELECT, DELETE on the outbox.
--   deltabus_reconcile  `relay reconcile`: SELECT on the outbox.
--   deltabus_keyreader  NOLOGIN group for consumers that decrypt personal data
--                       (`relay consume` with DELTABUS_KEK): SELECT on the key
--                       tables (schema deltabus), nothing else. GRANT it to
--                       the consumer's own login role.
--   deltabus_eraser     NOLOGIN group for `relay erase`: SELECT, DELETE on
--                       deltabus.subject_keys, SELECT, INSERT, UPDATE on
--                       deltabus.erased_subjects (the erasure's record),
--                       SELECT on deltabus.key_root, and SELECT, DELETE on the
--                       outboxes (the subject's rows). GRANT it to the login
--                       of whoever handles erasures.
--   deltabus_relay also gets SELECT, INSERT on the key tables (a new subject's
--   key) and SELECT on deltabus.erased_subjects; deltabus_janitor and
--   deltabus_reconcile get nothing there.
--
-- Tables that deltabus_migrate creates later (another outbox schema or table)
-- get the same grants through its default privileges. Idempotent: a second run
-- re-asserts the attributes and grants and changes nothing else; the whole
-- script is one transaction. Roles are cluster-wide, grants per database: run
-- it once in each database that holds an outbox.
--
-- psql variables (-v name=value):
--   outbox_schema       schema of an existing outbox table (default public)
--   outbox_table        its name (default outbox)
--   producer_role       an existing role that writes events: INSERT on the outboxes
--   migrate_password    or the environment variable DELTABUS_MIGRATE_PASSWORD
--   relay_password      or DELTABUS_RELAY_PASSWORD
--   janitor_password    or DELTABUS_JANITOR_PASSWORD
--   reconcile_password  or DELTABUS_RECONCILE_PASSWORD
-- Prefer the environment for passwords: -v puts them in psql's argv. A password
-- left unset leaves that role's password as it is (none on the first run: the
-- role then needs another authentication method). A SCRAM-SHA-256 verifier
-- ('SCRAM-SHA-256$4096:...') is accepted in place of the clear text.

\set ON_ERROR_STOP on
\if :{?outbox_schema}
\else
  \set outbox_schema public
\endif
\if :{?outbox_table}
\else
  \set outbox_table outbox
\endif
\if :{?producer_role}
\else
  \set producer_role ''
\endif
\if :{?migrate_password}
\else
  \getenv migrate_password DELTABUS_MIGRATE_PASSWORD
\endif
\if :{?relay_password}
\else
  \getenv relay_password DELTABUS_RELAY_PASSWORD
\endif
\if :{?janitor_password}
\else
  \getenv janitor_password DELTABUS_JANITOR_PASSWORD
\endif
\if :{?reconcile_password}
\else
  \getenv reconcile_password DELTABUS_RECONCILE_PASSWORD
\endif

BEGIN;

-- The DO block reads the names from transaction-local settings (psql does not
-- substitute variables inside dollar quotes).
SELECT set_config('deltabus.outbox_schema', :'outbox_schema', true),
       set_config('deltabus.outbox_table', :'outbox_table', true),
       set_config('deltabus.producer_role', :'producer_role', true) \g /dev/null

DO $roles$
DECLARE
    outbox_schema text := current_setting('deltabus.outbox_schema');
    outbox_table  text := current_setting('deltabus.outbox_table');
    producer      text := current_setting('deltabus.producer_role');
    r             record;
    outbox        regclass;
    tbl           regclass;
    sch           name;
    tbl_owner     name;
BEGIN
    IF NOT (SELECT rolsuper FROM pg_roles WHERE rolname = current_user) THEN
        RAISE EXCEPTION 'roles.sql must run as a superuser (it sets REPLICATION and default privileges of deltabus_migrate); connected as %', current_user;
    END IF;
    IF producer <> '' AND NOT EXISTS (SELECT FROM pg_roles WHERE rolname = producer) THEN
        RAISE EXCEPTION 'producer_role % does not exist; create it first or leave producer_role unset', producer;
    END IF;

    FOR r IN SELECT * FROM (VALUES
            ('deltabus_migrate',   'NOREPLICATION', 'LOGIN'),
            ('deltabus_relay',     'REPLICATION',   'LOGIN'),
            ('deltabus_janitor',   'NOREPLICATION', 'LOGIN'),
            ('deltabus_reconcile', 'NOREPLICATION', 'LOGIN'),
            ('deltabus_keyreader', 'NOREPLICATION', 'NOLOGIN'),
            ('deltabus_eraser',    'NOREPLICATION', 'NOLOGIN')) AS r(name, replication, login)
    LOOP
        IF NOT EXISTS (SELECT FROM pg_roles WHERE rolname = r.name) THEN
            EXECUTE format('CREATE ROLE %I', r.name);
        END IF;
        EXECUTE format('ALTER ROLE %I WITH %s NOSUPERUSER NOCREATEDB NOCREATEROLE NOBYPASSRLS INHERIT %s',
                       r.name, r.login, r.replication);
    END LOOP;

    -- CREATE on the database: the publication (PostgreSQL 15 requires it) and
    -- the outbox schema when it does not exist yet.
    EXECUTE format('GRANT CONNECT, CREATE ON DATABASE %I TO deltabus_migrate', current_database());
    EXECUTE format('GRANT CONNECT ON DATABASE %I TO deltabus_relay, deltabus_janitor, deltabus_reconcile',
                   current_database());

    -- An existing outbox schema (public, say): PostgreSQL 15 no longer lets
    -- every role create tables in public.
    IF EXISTS (SELECT FROM pg_namespace WHERE nspname = outbox_schema) THEN
        EXECUTE format('GRANT USAGE, CREATE ON SCHEMA %I TO deltabus_migrate', outbox_schema);
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO deltabus_relay, deltabus_janitor, deltabus_reconcile', outbox_schema);
        IF producer <> '' THEN
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', outbox_schema, producer);
        END IF;
    END IF;

    -- Schemas and tables deltabus_migrate creates from now on, in any schema.
    ALTER DEFAULT PRIVILEGES FOR ROLE deltabus_migrate
        GRANT USAGE ON SCHEMAS TO deltabus_relay, deltabus_janitor, deltabus_reconcile;
    ALTER DEFAULT PRIVILEGES FOR ROLE deltabus_migrate
        GRANT SELECT ON TABLES TO deltabus_relay, deltabus_reconcile;
    ALTER DEFAULT PRIVILEGES FOR ROLE deltabus_migrate
        GRANT SELECT, DELETE ON TABLES TO deltabus_janitor;
    -- The eraser deletes a subject's outbox rows; the key tables' own
    -- grants are set where they are created (migrations/sql/create_keys.sql)
    -- and below.
    ALTER DEFAULT PRIVILEGES FOR ROLE deltabus_migrate
        GRANT USAGE ON SCHEMAS TO deltabus_eraser, deltabus_keyreader;
    ALTER DEFAULT PRIVILEGES FOR ROLE deltabus_migrate
        GRANT SELECT, DELETE ON TABLES TO deltabus_eraser;
    IF producer <> '' THEN
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE deltabus_migrate GRANT USAGE ON SCHEMAS TO %I', producer);
        EXECUTE format('ALTER DEFAULT PRIVILEGES FOR ROLE deltabus_migrate GRANT INSERT ON TABLES TO %I', producer);
    END IF;

    -- Outbox tables that already exist: the named one, and every table and
    -- schema deltabus_migrate owns (it creates nothing else), so that a later
    -- run (a new producer_role, say) covers them all.
    outbox := to_regclass(format('%I.%I', outbox_schema, outbox_table));
    FOR tbl IN
        SELECT outbox WHERE outbox IS NOT NULL
        UNION SELECT c.oid::regclass FROM pg_class c
              WHERE c.relowner = 'deltabus_migrate'::regrole AND c.relkind IN ('r', 'p')
                AND c.relnamespace NOT IN (SELECT oid FROM pg_namespace WHERE nspname = 'deltabus') -- the key tables: below
    LOOP
        EXECUTE format('GRANT SELECT ON %s TO deltabus_relay, deltabus_reconcile', tbl);
        EXECUTE format('GRANT SELECT, DELETE ON %s TO deltabus_janitor, deltabus_eraser', tbl);
        IF producer <> '' THEN
            EXECUTE format('GRANT INSERT ON %s TO %I', tbl, producer);
        END IF;
    END LOOP;
    FOR sch IN SELECT nspname FROM pg_namespace WHERE nspowner = 'deltabus_migrate'::regrole LOOP
        EXECUTE format('GRANT USAGE ON SCHEMA %I TO deltabus_relay, deltabus_janitor, deltabus_reconcile', sch);
        IF producer <> '' THEN
            EXECUTE format('GRANT USAGE ON SCHEMA %I TO %I', sch, producer);
        END IF;
    END LOOP;
    -- The key tables of personal data, when relay migrate made them already.
    IF to_regclass('deltabus.subject_keys') IS NOT NULL AND to_regclass('deltabus.key_root') IS NOT NULL THEN
        GRANT USAGE ON SCHEMA deltabus TO deltabus_relay, deltabus_keyreader, deltabus_eraser;
        REVOKE ALL ON deltabus.key_root, deltabus.subject_keys FROM PUBLIC, deltabus_janitor, deltabus_reconcile, deltabus_eraser, deltabus_keyreader;
        GRANT SELECT, INSERT ON deltabus.key_root, deltabus.subject_keys TO deltabus_relay;
        GRANT SELECT ON deltabus.key_root, deltabus.subject_keys TO deltabus_keyreader;
        GRANT SELECT ON deltabus.key_root TO deltabus_eraser;
        GRANT SELECT, DELETE ON deltabus.subject_keys TO deltabus_eraser;
    END IF;
    IF to_regclass('deltabus.erased_subjects') IS NOT NULL THEN
        REVOKE ALL ON deltabus.erased_subjects FROM PUBLIC, deltabus_janitor, deltabus_reconcile, deltabus_eraser, deltabus_keyreader;
        GRANT SELECT ON deltabus.erased_subjects TO deltabus_relay;
        GRANT SELECT, INSERT, UPDATE ON deltabus.erased_subjects TO deltabus_eraser;
    END IF;
    IF outbox IS NOT NULL THEN
        SELECT pg_get_userbyid(relowner) INTO tbl_owner FROM pg_class WHERE oid = outbox;
        IF tbl_owner <> 'deltabus_migrate' THEN
            RAISE WARNING 'table %.% is owned by %, so relay migrate as deltabus_migrate cannot index it or publish it', outbox_schema, outbox_table, tbl_owner
                USING HINT = format('ALTER TABLE %s OWNER TO deltabus_migrate (then GRANT INSERT ON it to the producers), or run relay migrate as %I', outbox, tbl_owner);
        END IF;
    END IF;
END
$roles$;

\if :{?migrate_password}
ALTER ROLE deltabus_migrate PASSWORD :'migrate_password';
\endif
\if :{?relay_password}
ALTER ROLE deltabus_relay PASSWORD :'relay_password';
\endif
\if :{?janitor_password}
ALTER ROLE deltabus_janitor PASSWORD :'janitor_password';
\endif
\if :{?reconcile_password}
ALTER ROLE deltabus_reconcile PASSWORD :'reconcile_password';
\endif

COMMIT;

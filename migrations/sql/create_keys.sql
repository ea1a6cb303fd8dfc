-- The key table of personal data (package pii/keys). Data keys, one per
-- (data subject, topic), each wrapped by the root key, which the KEK
-- (DELTABUS_KEK) wraps. Erasing a subject deletes its rows and records the
-- erasure in erased_subjects: no key is created again for a value written
-- before it. Not published: nothing here is an event. Idempotent: run again
-- it adds what an older release did not create.
CREATE SCHEMA IF NOT EXISTS deltabus;

CREATE TABLE IF NOT EXISTS deltabus.key_root (
    id         boolean     PRIMARY KEY DEFAULT true CHECK (id),
    kek        text        NOT NULL, -- which KEK wraps it: "file keyset <id>" or the KMS key URI; never key material
    wrap       bytea       NOT NULL, -- AES-256-GCM keyset wrapping the data keys, encrypted by the KEK
    prf        bytea       NOT NULL, -- HMAC-SHA256 PRF keyset of the keyed hashes, encrypted by the KEK
    created_at timestamptz NOT NULL DEFAULT now()
);

CREATE TABLE IF NOT EXISTS deltabus.subject_keys (
    subject    bytea       NOT NULL CHECK (length(subject) = 16), -- keyed hash of the subject's id, never the id
    topic      text        NOT NULL,
    wrapped    bytea       NOT NULL, -- the AES-256-GCM data keyset, encrypted by the root key
    created_at timestamptz NOT NULL DEFAULT now(),
    PRIMARY KEY (subject, topic)
);

CREATE TABLE IF NOT EXISTS deltabus.erased_subjects (
    subject   bytea       NOT NULL CHECK (length(subject) = 16), -- keyed hash of the subject's id
    topic     text        NOT NULL, -- '' = every topic
    erased_at timestamptz NOT NULL, -- the latest erasure: values written before it get no key
    PRIMARY KEY (subject, topic)
);

-- Default privileges of the roles in deploy/sql/roles.sql grant SELECT (and
-- the janitor DELETE) on every table deltabus_migrate creates: the key table
-- is not theirs. Grants it needs are in roles.sql.
DO $keys$
DECLARE
    r name;
BEGIN
    REVOKE ALL ON deltabus.key_root, deltabus.subject_keys, deltabus.erased_subjects FROM PUBLIC;
    FOR r IN SELECT rolname FROM pg_roles WHERE rolname IN ('deltabus_janitor', 'deltabus_reconcile', 'deltabus_eraser', 'deltabus_keyreader') LOOP
        EXECUTE format('REVOKE ALL ON deltabus.key_root, deltabus.subject_keys, deltabus.erased_subjects FROM %I', r);
    END LOOP;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'deltabus_relay') THEN
        GRANT USAGE ON SCHEMA deltabus TO deltabus_relay;
        GRANT SELECT, INSERT ON deltabus.key_root, deltabus.subject_keys TO deltabus_relay;
        GRANT SELECT ON deltabus.erased_subjects TO deltabus_relay;
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'deltabus_keyreader') THEN
        GRANT USAGE ON SCHEMA deltabus TO deltabus_keyreader;
        GRANT SELECT ON deltabus.key_root, deltabus.subject_keys TO deltabus_keyreader;
    END IF;
    IF EXISTS (SELECT FROM pg_roles WHERE rolname = 'deltabus_eraser') THEN
        GRANT USAGE ON SCHEMA deltabus TO deltabus_eraser;
        GRANT SELECT ON deltabus.key_root TO deltabus_eraser;
        GRANT SELECT, DELETE ON deltabus.subject_keys TO deltabus_eraser;
        GRANT SELECT, INSERT, UPDATE ON deltabus.erased_subjects TO deltabus_eraser;
    END IF;
END
$keys$;

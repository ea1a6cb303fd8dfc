#!/bin/sh
# Creates the DeltaBus roles (deploy/sql/roles.sql) when the postgres image
# initialises its data volume (/docker-entrypoint-initdb.d runs once, on an
# empty volume). Each role's password is read from its pgpass-format secret
# (the file the relay itself gets as PGPASSFILE: "*:*:*:ROLE:PASSWORD") and
# handed to psql in the environment, never on a command line.
#
# The image may source this file instead of running it: the body runs in a
# subshell so that nothing leaks into the entrypoint.
(
  set -eu
  secrets=${DELTABUS_SECRETS_DIR:-/run/secrets}
  roles_sql=${DELTABUS_ROLES_SQL:-/deltabus/roles.sql}

  # password FILE ROLE: the password of ROLE's line in a pgpass file, with the
  # pgpass escapes (\: and \\) undone.
  password() {
    line=$(grep -v '^#' "$1" | grep -m1 ":$2:") || {
      echo "10-deltabus-roles.sh: $1 has no line for role $2 (want *:*:*:$2:PASSWORD)" >&2
      return 1
    }
    printf '%s' "${line#*:*:*:*:}" | sed 's/\\\(.\)/\1/g'
  }

  DELTABUS_MIGRATE_PASSWORD=$(password "$secrets/migrate_pgpass" deltabus_migrate)
  DELTABUS_RELAY_PASSWORD=$(password "$secrets/relay_pgpass" deltabus_relay)
  DELTABUS_JANITOR_PASSWORD=$(password "$secrets/janitor_pgpass" deltabus_janitor)
  DELTABUS_RECONCILE_PASSWORD=$(password "$secrets/reconcile_pgpass" deltabus_reconcile)
  export DELTABUS_MIGRATE_PASSWORD DELTABUS_RELAY_PASSWORD DELTABUS_JANITOR_PASSWORD DELTABUS_RECONCILE_PASSWORD

  psql -v ON_ERROR_STOP=1 --no-psqlrc --username "$POSTGRES_USER" --dbname "$POSTGRES_DB" -f "$roles_sql"
)

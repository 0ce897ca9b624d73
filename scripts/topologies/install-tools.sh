#!/usr/bin/env bash
# Installs what `npm run test:topologies` needs on a Debian machine, when it is missing: the PostgreSQL
# server packages (initdb, pg_ctl, pg_basebackup: a primary and a streaming standby of Debian's major
# version) and PgBouncer. Needs root.
set -euo pipefail
missing=()
compgen -G '/usr/lib/postgresql/*/bin/initdb' >/dev/null || missing+=(postgresql)
command -v pgbouncer >/dev/null || [ -x /usr/sbin/pgbouncer ] || missing+=(pgbouncer)
if [ ${#missing[@]} -eq 0 ]; then
  echo "postgresql and pgbouncer are installed"
  exit 0
fi
echo "installing ${missing[*]}"
apt-get update -qq
DEBIAN_FRONTEND=noninteractive apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
ls -d /usr/lib/postgresql/*/bin
/usr/sbin/pgbouncer --version | head -1

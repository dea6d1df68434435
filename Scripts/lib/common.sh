# Shared helpers for the scripts in Scripts/ (source it, do not run it).
# Sets REPO_ROOT, loads Config/revsync.env and computes the stack's paths.
# shellcheck shell=bash disable=SC2034  # variables here are used by the scripts that source this file

REPO_ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
SCRIPTS="$REPO_ROOT/Scripts"

say() { printf '%s\n' "$*"; }
warn() { printf 'revsync: %s\n' "$*" >&2; }
die() { warn "error: $*"; exit 1; }
banner() { printf '==> %s\n' "$*"; }

# Read KEY=VALUE lines from Config/revsync.env; values already set in the environment win.
load_config() {
  local file="$REPO_ROOT/Config/revsync.env" line key val
  [[ -f $file ]] || die "missing $file"
  while IFS= read -r line || [[ -n $line ]]; do
    [[ $line =~ ^[[:space:]]*([A-Za-z_][A-Za-z0-9_]*)=(.*)$ ]] || continue
    key=${BASH_REMATCH[1]}
    val=${BASH_REMATCH[2]%"${BASH_REMATCH[2]##*[![:space:]]}"}  # trim trailing blanks
    val=${val#\"} val=${val%\"}
    [[ -n ${!key:-} ]] || export "$key=$val"
  done <"$file"
  local p
  for p in REVSYNC_PG_PORT REVSYNC_REDIS_PORT; do
    [[ ${!p} =~ ^[0-9]+$ ]] || die "$p must be a port number, got '${!p}'"
  done
}

# Run a command as the PostgreSQL owner: `postgres` when we are root (initdb refuses root), else ourselves.
as_pg() {
  if ((EUID == 0)); then (cd / && runuser -u postgres -- "$@"); else "$@"; fi
}

# Can the PostgreSQL owner reach DIR (or, if it does not exist yet, its nearest existing parent)?
pg_can_reach() {
  local d=$1
  while [[ ! -e $d ]]; do d=$(dirname "$d"); done
  as_pg test -x "$d" 2>/dev/null
}

# Compute STACK_DIR, PG_* and REDIS_* paths. Does not create anything.
stack_paths() {
  STACK_DIR=$REVSYNC_STACK_DIR
  [[ $STACK_DIR == /* ]] || STACK_DIR="$REPO_ROOT/$STACK_DIR"
  STACK_DIR=${STACK_DIR%/}
  STACK_FALLBACK_DIR="/tmp/revsync-stack-$(printf '%s' "$STACK_DIR" | sha256sum | cut -c1-12)"
  PG_BASE="$STACK_DIR/pg"
  # PostgreSQL needs a traversable path and a unix socket path shorter than ~107 bytes.
  if ! pg_can_reach "$STACK_DIR" || ((${#PG_BASE} > 80)); then
    PG_BASE=$STACK_FALLBACK_DIR
  fi
  PGDATA="$PG_BASE/data"
  PG_RUN="$PG_BASE/run"
  PG_LOG="$PG_BASE/postgres.log"
  REDIS_DIR="$STACK_DIR/redis"
  REDIS_PIDFILE="$REDIS_DIR/redis.pid"
  REDIS_LOG="$REDIS_DIR/redis.log"
  PG_BIN=$(pg_config --bindir 2>/dev/null || true)
  if [[ ! -x $PG_BIN/initdb ]]; then  # pg_config (libpq-dev) missing: take the newest installed server
    PG_BIN=$(find /usr/lib/postgresql -maxdepth 2 -name bin 2>/dev/null | sort -V | tail -n 1)
  fi
}

database_url() { printf 'postgres://%s@127.0.0.1:%s/%s' "$REVSYNC_DB_USER" "$REVSYNC_PG_PORT" "$REVSYNC_DB_NAME"; }
redis_url() { printf 'redis://127.0.0.1:%s' "$REVSYNC_REDIS_PORT"; }

load_config
stack_paths

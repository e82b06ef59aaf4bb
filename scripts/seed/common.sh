# Shared by rel.sh and test.sh (seed 001's step scripts): psql and pg_ctl calls only, so the same
# steps run against walsim and against a real PostgreSQL primary/standby pair.
#
# Environment (libpq's and pg_ctl's names):
#   PGHOST          host of both servers (default 127.0.0.1)
#   PGPORT          the primary's port            PGDATA          the primary's data directory
#   STANDBY_PGPORT  the standby's port            STANDBY_PGDATA  the standby's data directory
#   PGUSER, PGDATABASE, PGPASSWORD as libpq reads them
#   PG_CTL          pg_ctl to call (default: pg_ctl on PATH; walsim: scripts/seed/pg_ctl)
#   PSQL            psql to call (default: psql on PATH)

set -euo pipefail

export PGHOST="${PGHOST:-127.0.0.1}"
PSQL="${PSQL:-psql}"
PG_CTL="${PG_CTL:-pg_ctl}"
BLCKSZ=8192
# Heap tuples of one int column that fit a page (fillfactor 100): 226, on PostgreSQL and walsim.
ROWS_PER_PAGE=226

die() { echo "$(basename "$0"): $*" >&2; exit 1; }
need() { [ -n "${!1:-}" ] || die "set $1 ($2)"; }

# psql on the primary / the standby: no psqlrc, stop at the first error, quiet, unaligned.
primary() { need PGPORT "the primary's port"; "$PSQL" -X -q -v ON_ERROR_STOP=1 -At -p "$PGPORT" "$@"; }
standby() { need STANDBY_PGPORT "the standby's port"; "$PSQL" -X -q -v ON_ERROR_STOP=1 -At -p "$STANDBY_PGPORT" "$@"; }

now() { date +%s.%N; }
stamp() { date -d "@$1" '+%Y-%m-%d %H:%M:%S.%3N'; }

# pg_lsn text (X/Y, hex) as a number, to compare positions in the shell.
lsn_num() { local hi=${1%/*} lo=${1#*/}; echo $(( (16#$hi << 32) | 16#$lo )); }

# Wait until the standby has replayed everything the primary has written so far.
wait_replayed() {
  local target replay i
  target=$(lsn_num "$(primary -c 'SELECT pg_current_wal_lsn()')")
  for i in $(seq 1 600); do
    replay=$(standby -c 'SELECT pg_last_wal_replay_lsn()')
    [ -n "$replay" ] && [ "$(lsn_num "$replay")" -ge "$target" ] && return 0
    sleep 0.1
  done
  die "the standby did not replay up to the primary's WAL position within 60 s"
}

# shared_buffers of the standby (the node whose drops are measured) in 8kB buffers: NBuffers.
nbuffers() {
  local sb n unit
  sb=$(standby -c 'SHOW shared_buffers')
  n=${sb%%[!0-9]*}; unit=${sb#"$n"}
  case "$unit" in
    kB) echo $(( n * 1024 / BLCKSZ ));;
    MB) echo $(( n * 1024 * 1024 / BLCKSZ ));;
    GB) echo $(( n * 1024 * 1024 * 1024 / BLCKSZ ));;
    TB) echo $(( n * 1024 * 1024 * 1024 * 1024 / BLCKSZ ));;
    "") echo "$n";;
    *) die "cannot read shared_buffers \"$sb\"";;
  esac
}

step_pause() {
  wait_replayed
  standby -c 'SELECT pg_wal_replay_pause()' >/dev/null
  local i state
  for i in $(seq 1 600); do
    state=$(standby -c 'SELECT pg_get_wal_replay_pause_state()')
    if [ "$state" = paused ]; then echo "standby replay paused at $(standby -c 'SELECT pg_last_wal_replay_lsn()')"; return 0; fi
    sleep 0.1
  done
  die "standby replay did not pause within 60 s (state: $state)"
}

# The seed: pg_ctl stop -D $PGDATA -w -mi
step_stop() {
  need PGDATA "the primary's data directory"
  "$PG_CTL" stop -D "$PGDATA" -w -m immediate
}

# Resume replay and promote at once; print both timestamps and their difference (the failover).
# Like pg_ctl promote -w: request promotion without waiting (pg_promote(false)), then poll
# pg_is_in_recovery() ten times a second with short sessions. A session that waits inside
# pg_promote(true) would hold a snapshot for the whole replay, and on real PostgreSQL the replay of
# a TRUNCATE cancels it ("canceling statement due to conflict with recovery"); a short poll that
# is cancelled the same way is simply retried.
step_resume() {
  local t0 t1 i state=t
  t0=$(now)
  standby -c 'SELECT pg_wal_replay_resume()' >/dev/null
  [ "$(standby -c 'SELECT pg_promote(false)')" = t ] || die "the standby refused pg_promote()"
  for i in $(seq 1 6000); do
    state=$(standby -c 'SELECT pg_is_in_recovery()' 2>/dev/null) || state=t
    [ "$state" = f ] && break
    sleep 0.1
  done
  t1=$(now)
  [ "$state" = f ] || die "the standby did not promote within 600 s"
  echo "resume:   $(stamp "$t0")"
  echo "promoted: $(stamp "$t1")"
  awk -v a="$t0" -v b="$t1" 'BEGIN { printf "failover: %.3f s\n", b - a }'
}

#!/usr/bin/env bash
# Seed 001's test.sh (Test B): 1000 one-block relations; their VACUUM or TRUNCATE is replayed at
# failover.
#
#   test.sh create | insert | delete | pause | vacuum | truncate | stop | resume | count
#       one step, against the servers named by the environment (see common.sh); the same script
#       drives walsim and a real PostgreSQL pair. NTABLES (default 1000) sets the table count.
#   test.sh            (no step) Test B on walsim: for VACUUM and TRUNCATE, full-scan ("master",
#       before PostgreSQL 14) and cached-lookup ("patched"), each on a fresh walsim cluster at
#       SHARED_BUFFERS (default 128MB), all steps above through psql and pg_ctl; prints the seed's
#       tables.
. "$(dirname "$0")/common.sh"
. "$(dirname "$0")/walsim-cli.sh"

NTABLES="${NTABLES:-1000}"

usage() { echo "usage: $(basename "$0") [create|insert|delete|pause|vacuum|truncate|stop|resume|count]" >&2; exit 2; }

# One statement per table, all through one psql session: one transaction (one drop) per table.
each_table() { seq 1 "$NTABLES" | sed "s/.*/$1/"; }

run_test_b() {
  local root sb json ports variant strategy out secs
  root=$(cd "$(dirname "$0")/../.." && pwd)
  sb="${SHARED_BUFFERS:-128MB}"
  declare -A result
  dir=""
  trap '[ -n "$dir" ] && (cd "$root" && walsim_cli cluster.ts stop --dir "$dir" --mode immediate >/dev/null 2>&1); [ -n "$dir" ] && rm -rf "$dir"' EXIT
  echo "seed 001 Test B through psql: $NTABLES one-block relations, shared_buffers $sb, one run per cell"
  for variant in vacuum truncate; do
    for strategy in full-scan cached-lookup; do
      dir=$(mktemp -d "${TMPDIR:-/tmp}/walsim-test-b.XXXXXX")
      json=$(cd "$root" && walsim_cli cluster.ts start --dir "$dir" --shared-buffers "$sb" --drop-strategy "$strategy" --json | tail -n 1)
      ports=$(node -e 'const j = JSON.parse(process.argv[1]); const p = (n) => j.started.find((s) => s.name === n).pgPort; console.log(p("primary"), p("standby"))' "$json")
      export PGPORT="${ports% *}" STANDBY_PGPORT="${ports#* }" PGDATA="$dir/primary" STANDBY_PGDATA="$dir/standby"
      export PG_CTL="$root/scripts/seed/pg_ctl"
      "$0" create >/dev/null
      "$0" insert >/dev/null
      if [ "$variant" = vacuum ]; then "$0" delete >/dev/null; fi
      "$0" pause >/dev/null
      "$0" "$variant" >/dev/null
      "$0" stop >/dev/null
      out=$("$0" resume)
      secs=$(echo "$out" | awk '/^failover:/ { print $2 }')
      result["$variant,$strategy"]=$secs
      echo "  $variant, $strategy: failover $secs s" >&2
      (cd "$root" && walsim_cli cluster.ts stop --dir "$dir" --mode immediate >/dev/null)
      rm -rf "$dir"
      dir=""
    done
  done
  for variant in vacuum truncate; do
    echo
    echo "### ${variant^^} recovery performance for $NTABLES relations"
    echo
    echo "| s_b | Master (full-scan) | Patched (cached-lookup) | %reg |"
    echo "| --- | ---: | ---: | ---: |"
    awk -v sb="$sb" -v m="${result[$variant,full-scan]}" -v p="${result[$variant,cached-lookup]}" \
      'BEGIN { printf "| %s | %.3f | %.3f | %.2f%% |\n", sb, m, p, (p - m) / m * 100 }'
  done
  echo
  echo "(seconds from SELECT pg_wal_replay_resume() to the end of SELECT pg_promote(), measured by this script)"
}

case "${1:-}" in
  "") run_test_b;;
  create)
    each_table 'CREATE TABLE multi_t& (c int);' | primary
    echo "created $NTABLES tables (multi_t1 … multi_t$NTABLES)";;
  insert)
    each_table "INSERT INTO multi_t& SELECT generate_series(1, $ROWS_PER_PAGE);" | primary
    echo "inserted $ROWS_PER_PAGE rows (one 8kB block) into each of $NTABLES tables";;
  delete)
    each_table 'DELETE FROM multi_t&;' | primary
    echo "deleted all rows of $NTABLES tables";;
  pause) step_pause;;
  vacuum)
    each_table 'VACUUM multi_t&;' | primary
    echo "vacuumed $NTABLES tables, one transaction each";;
  truncate)
    each_table 'TRUNCATE multi_t&;' | primary
    echo "truncated $NTABLES tables, one transaction each";;
  stop) step_stop;;
  resume) step_resume;;
  count)
    rows=$(each_table 'SELECT count(*) FROM multi_t&;' | standby | awk '{ s += $1 } END { print s + 0 }')
    echo "$NTABLES tables: $rows rows on the standby";;
  *) usage;;
esac

#!/usr/bin/env bash
# Seed 001's rel.sh (Test A): one relation of NBuffers/XXX pages; its VACUUM is replayed at failover.
#
#   rel.sh create | insert [NB/512|PAGES] | delete | pause | vacuum | truncate | stop | resume | count
#
# Run the steps in the seed's order: create, insert, delete, pause (standby), vacuum, stop, resume
# (standby). psql for SQL, pg_ctl for stop; see common.sh for the environment (PGPORT, PGDATA,
# STANDBY_PGPORT, STANDBY_PGDATA, PG_CTL). The same script drives walsim and a real PostgreSQL pair.
. "$(dirname "$0")/common.sh"

TABLE=rel_t

usage() { echo "usage: $(basename "$0") create|insert [NB/512|PAGES]|delete|pause|vacuum|truncate|stop|resume|count" >&2; exit 2; }

case "${1:-}" in
  create)
    primary -c "CREATE TABLE $TABLE (c int)"
    echo "created $TABLE";;
  insert)
    size="${2:-${REL_SIZE:-NB/512}}"
    nb=$(nbuffers)
    case "$size" in
      NB/*[!0-9]*|NB/) die "invalid size \"$size\" (accepted: NB/<k> or a page count)";;
      NB/*) pages=$(( nb / ${size#NB/} ));;
      ''|*[!0-9]*) die "invalid size \"$size\" (accepted: NB/<k> or a page count)";;
      *) pages=$size;;
    esac
    [ "$pages" -ge 1 ] || die "size \"$size\" is less than one page with NBuffers $nb"
    rows=$(( pages * ROWS_PER_PAGE ))
    primary -c "INSERT INTO $TABLE SELECT generate_series(1, $rows)"
    echo "inserted $rows rows ($pages pages, $size of NBuffers $nb) into $TABLE";;
  delete)
    primary -c "DELETE FROM $TABLE"
    echo "deleted all rows of $TABLE";;
  pause) step_pause;;
  vacuum)
    primary -c "VACUUM $TABLE"
    echo "vacuumed $TABLE";;
  truncate)
    primary -c "TRUNCATE $TABLE"
    echo "truncated $TABLE";;
  stop) step_stop;;
  resume) step_resume;;
  count) echo "$TABLE: $(standby -c "SELECT count(*) FROM $TABLE") rows on the standby";;
  *) usage;;
esac

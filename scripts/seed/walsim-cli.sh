# How the seed scripts run a walsim CLI (scripts/<name>.ts) from the repository root: through tsx,
# as `npm run` does; inside the test suite, which names prebuilt bundles of the same sources in
# WALSIM_ENTRY_BUNDLE, the bundle instead (server/entry.ts, entryArgs: tsx's loader costs about
# 1 s of CPU per start, the bundle about 0.25 s).
walsim_cli() {
  local script=$1 bundled
  shift
  bundled="${WALSIM_ENTRY_BUNDLE:-}/scripts/${script%.ts}.mjs"
  if [ -n "${WALSIM_ENTRY_BUNDLE:-}" ] && [ -f "$bundled" ]; then
    node "$bundled" "$@"
  else
    node --import tsx "scripts/$script" "$@"
  fi
}

#!/usr/bin/env bash
# `npm run test:postgres`: the integration suite again, on PostgreSQL (DESIGN.md §12). Every platform a test
# starts, and every admin command it runs, gets a throw-away database of its own on the server at
# TEST_POSTGRES_URL (default postgres://postgres@127.0.0.1:5432/postgres, trust auth); the run drops them at
# its end. The tests of SQLite's own machinery (its migrations, read worker, locks and file faults) run in
# `npm test` only; the repository contract suites run in both.
set -euo pipefail
cd "$(dirname "$0")/.."

URL=${TEST_POSTGRES_URL:-postgres://postgres@127.0.0.1:5432/postgres}
if ! npx --no-install node -e "
  const pg = require('pg');
  const c = new pg.Client({ connectionString: process.argv[1], connectionTimeoutMillis: 3000 });
  c.connect().then(() => c.end(), (e) => { console.error(e.message); process.exit(1); });
" "$URL"; then
  echo "test:postgres: no PostgreSQL at $URL (start it: DESIGN.md §13, or set TEST_POSTGRES_URL)" >&2
  exit 1
fi

# The tests of several instances (DESIGN.md §13) start private redis-servers and HAProxy: the binaries must be there.
for bin in redis-server haproxy; do
  if ! command -v "$bin" >/dev/null; then
    echo "test:postgres: no $bin on PATH (Debian: apt-get install redis-server haproxy)" >&2
    exit 1
  fi
done

export TEST_DATABASE=postgres
# vitest.config.ts leaves out the SQLite-only files when TEST_DATABASE=postgres.
exec npx --no-install vitest run test/integration/ "$@"

#!/usr/bin/env bash
# `npm run test:browser`: the tests that drive real Chromium (DESIGN.md §16) through playwright-core: Debian's
# `chromium` package (`apt-get install -y chromium`), or CHROMIUM_PATH.
set -euo pipefail
cd "$(dirname "$0")/.."
CHROMIUM=${CHROMIUM_PATH:-/usr/bin/chromium}
if [ ! -x "$CHROMIUM" ]; then
  echo "test:browser: no Chromium at $CHROMIUM (Debian: apt-get install -y chromium, or set CHROMIUM_PATH)" >&2
  exit 1
fi
exec npx --no-install vitest run --project browser "$@"

#!/usr/bin/env bash
# `npm run test:node22`: the parts of the suite that must also hold on Node 22, the other supported line
# (DESIGN.md §17): the agent's unit and integration tests (the bundle test among them: it runs the built bundle
# on this Node) and a platform integration smoke. `npm test` runs the whole suite on the pinned Node 24.
#
# Node 22 comes from the npm registry (node-linux-<arch>, the official build), fetched once into
# node_modules/.cache. Vitest runs on it, so its workers and every process a test spawns (process.execPath) do too.
set -euo pipefail
cd "$(dirname "$0")/.."

VERSION=22.23.3
case "$(uname -m)" in
  x86_64) ARCH=x64 ;;
  aarch64 | arm64) ARCH=arm64 ;;
  *) echo "test:node22: no Node build in the npm registry for $(uname -m)" >&2; exit 1 ;;
esac
DIR=node_modules/.cache/node-$VERSION
NODE22="$DIR/node_modules/node-linux-$ARCH/bin/node"
if [ ! -x "$NODE22" ]; then
  npm install --prefix "$DIR" --no-save --no-audit --no-fund "node-linux-$ARCH@$VERSION"
fi
echo "test:node22: $("$NODE22" --version) at $NODE22"

# Filters are path substrings (vitest run FILTER...).
exec "$NODE22" node_modules/vitest/vitest.mjs run \
  test/unit/agent/ \
  test/unit/shared/ \
  test/integration/agent- \
  test/integration/serve.test.ts \
  test/integration/serve-metrics-and-cors.test.ts \
  test/integration/device-api \
  test/integration/command-lifecycle.test.ts \
  test/integration/command-reports-and-cancel.test.ts \
  test/integration/command-controls.test.ts \
  test/integration/long-poll.test.ts \
  test/unit/platform/checkpointer.test.ts \
  "$@"

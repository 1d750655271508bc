#!/bin/sh
# Fails when gen/ is not what `npm run generate` produces from proto/ and the contracts (run by CI).
# Lints the proto, regenerates (buf's TypeScript, then the contracts' ABIs in gen/abi/ from a
# fresh `hardhat build`), then compares gen/ with the committed tree, counting modified,
# deleted and untracked files.
set -eu
cd "$(dirname "$0")/.."
PATH="$PWD/node_modules/.bin:$PATH"

buf lint
buf generate
npm run --silent generate:abi

status=0
if ! git diff --exit-code --stat -- gen/; then
  echo "gen/ is stale: run 'npm run generate' and commit the result." >&2
  status=1
fi
untracked=$(git ls-files --others --exclude-standard -- gen/)
if [ -n "$untracked" ]; then
  echo "gen/ has files that are not committed:" >&2
  echo "$untracked" >&2
  status=1
fi
if [ "$status" -eq 0 ]; then
  echo "gen/ is up to date with proto/ and contracts/."
fi
exit "$status"

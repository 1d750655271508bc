#!/bin/sh
# Smoke check of `npm start` as a user runs it: start the service on free ports, call
# the price and every trade with curl, call gRPC on the same port (grpcurl when it is
# installed, else scripts/grpc-call.ts), check a refused key, then stop it with SIGTERM
# and require exit code 0.   Usage: sh scripts/smoke-start.sh
set -eu
cd "$(dirname "$0")/.."
PATH="$PWD/node_modules/.bin:$PATH"
work=$(mktemp -d)
pid=""
cleanup() {
  # npm, and the service it started (npm's child; its embedded chain goes with it).
  if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then
    pkill -KILL -P "$pid" 2>/dev/null || true
    kill -KILL "$pid" 2>/dev/null || true
  fi
  rm -rf "$work"
}
trap cleanup EXIT
fail() {
  echo "SMOKE FAIL: $*" >&2
  echo "--- stderr" >&2; cat "$work/err" >&2 || true
  echo "--- stdout (last lines)" >&2; tail -n 20 "$work/out" >&2 || true
  exit 1
}

PORT=0 CHAIN_PORT=0 API_KEYS= npm start >"$work/out" 2>"$work/err" &
pid=$!

i=0
until grep -q "is ready" "$work/err" 2>/dev/null; do
  i=$((i + 1))
  [ "$i" -gt 240 ] && fail "not ready after 120 s"
  kill -0 "$pid" 2>/dev/null || fail "npm start exited early"
  sleep 0.5
done

api=$(sed -n 's/^  API: *\(http[^ ]*\).*/\1/p' "$work/err")
key=$(sed -n "s/^export API_KEY='\([^']*\)'.*/\1/p" "$work/err")
[ -n "$api" ] || fail "no API URL in the banner"
[ -n "$key" ] || fail "no generated key in the banner"
wallet=$(node -e 'console.log(require("./.dev/deployment.json").exchangeWallet)')
dai=$(node -e 'console.log(require("./.dev/deployment.json").stableCoins.DAI)')
usdt=$(node -e 'console.log(require("./.dev/deployment.json").stableCoins.USDT)')
usdc=$(node -e 'console.log(require("./.dev/deployment.json").stableCoins.USDC)')
customer=0x3C44CdDdB6a900fa2b585dd299e03d12FA4293BC
echo "service at $api"

curl -sS -f "$api/api/v1/token/price" -H "api_key: $key" >"$work/price.json" || fail "price"
node -e 'const p=require(process.argv[1]); const k=Object.keys(p.rateForCashCurrency).sort().join(); if (k!=="CHF,EUR,USD") process.exit(1)' "$work/price.json" || fail "price shape"
echo "price: $(cat "$work/price.json")"

trade() { # path amount stable logs
  curl -sS -f -X POST "$api$1" -H "api_key: $key" -H 'Content-Type: application/json' \
    -d "{\"userAddress\":\"$wallet\",\"destinatary\":\"$customer\",\"amount\":\"$2\",\"usdAddress\":\"$3\"}" >"$work/trade.json" || fail "POST $1"
  n=$(node -e 'const r=require(process.argv[1]); console.log(r.status === true ? Object.keys(r.events).length : -1)' "$work/trade.json")
  [ "$n" = "$4" ] || fail "POST $1: $n logs, expected $4"
  echo "POST $1: status true, $n logs"
}
trade /api/v1/token/sell 10 "$dai" 5
trade /api/v1/token/buy 25 "$usdt" 3
trade /api/v1/remmitance 25 "$usdc" 3

# Prometheus metrics on their own port (METRICS_PORT, default 9464), no key.
metrics=$(sed -n 's/^  Metrics: *\(http[^ ]*\).*/\1/p' "$work/err")
[ -n "$metrics" ] || fail "no metrics URL in the banner"
curl -sS -f "$metrics" >"$work/metrics.txt" || fail "metrics"
grep -q '^token_service_trades_total{kind="sell",stable="DAI",outcome="success"} 1$' "$work/metrics.txt" || fail "metrics: no successful sell counted"
echo "metrics: $(grep -c '^token_service_' "$work/metrics.txt") token_service_ samples at $metrics"

code=$(curl -sS -o /dev/null -w '%{http_code}' "$api/api/v1/token/price" -H "api_key: wrong-key")
[ "$code" = "401" ] || fail "a wrong key got $code"
echo "wrong key: 401"

hostport=${api#http://}
body="{\"user_address\":\"$wallet\",\"destinatary\":\"$customer\",\"amount\":\"10\",\"usd_address\":\"$dai\"}"
if command -v grpcurl >/dev/null 2>&1; then
  grpcurl -plaintext -import-path proto -proto tokentrade/v1/token.proto -H "api_key: $key" -d "$body" "$hostport" tokentrade.v1.TokenService/Sell >"$work/grpc.json" || fail "grpcurl Sell"
  echo "grpcurl Sell: ok"
else
  node --import tsx scripts/grpc-call.ts -H "api_key: $key" -d "$body" "$hostport" tokentrade.v1.TokenService/Sell >"$work/grpc.json" || fail "gRPC Sell"
  echo "gRPC Sell (grpc-js; grpcurl is not installed): ok"
fi
n=$(node -e 'console.log(require(process.argv[1]).events.length)' "$work/grpc.json")
[ "$n" = "5" ] || fail "gRPC Sell: $n events"

kill -TERM "$pid"
status=0
wait "$pid" || status=$?
pid=""
[ "$status" -eq 0 ] || fail "exit code $status after SIGTERM"
grep -q '"msg":"stopped"' "$work/out" || fail "no 'stopped' log line"
echo "SIGTERM: exit 0"
echo "SMOKE OK"

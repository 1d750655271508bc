#!/bin/sh
# Makes sure Debian's chromium is installed, for the tests that drive a real browser with
# playwright-core (which never downloads a browser of its own). Installs it with apt-get when
# it is missing and this runs as root; prints the browser's path.   Usage: sh scripts/ensure-chromium.sh
set -eu
for candidate in /usr/bin/chromium /usr/bin/chromium-browser; do
  if [ -x "$candidate" ]; then echo "$candidate"; exit 0; fi
done
if [ "$(id -u)" != "0" ]; then
  echo "chromium is not installed, and installing it needs root: apt-get install -y chromium" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2 || true
apt-get install -y -qq --no-install-recommends chromium >&2
echo /usr/bin/chromium

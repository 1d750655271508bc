#!/bin/sh
# Makes sure Debian's softhsm2 (a PKCS#11 token in files) and opensc (pkcs11-tool) are installed,
# for the PKCS#11 signer's tests and `npm run signer -- pkcs11 …`. Installs them with apt-get when
# missing and this runs as root; prints the path of SoftHSM's PKCS#11 module.
#   Usage: sh scripts/ensure-softhsm.sh
set -eu
module() {
  for candidate in /usr/lib/softhsm/libsofthsm2.so /usr/lib/x86_64-linux-gnu/softhsm/libsofthsm2.so \
    /usr/lib/aarch64-linux-gnu/softhsm/libsofthsm2.so; do
    if [ -f "$candidate" ]; then echo "$candidate"; return 0; fi
  done
  return 1
}
if module >/dev/null && command -v softhsm2-util >/dev/null && command -v pkcs11-tool >/dev/null; then
  module
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "softhsm2 and opensc are not installed, and installing them needs root: apt-get install -y softhsm2 opensc" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "softhsm2 and opensc are not installed, and this machine has no apt-get: install them with its package manager" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2 || true
if ! apt-get install -y -qq --no-install-recommends softhsm2 opensc >&2; then
  echo "apt-get could not install softhsm2 and opensc (are Debian's packages reachable?)" >&2
  exit 1
fi
module || { echo "softhsm2 is installed but libsofthsm2.so was not found" >&2; exit 1; }

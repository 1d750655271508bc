#!/bin/sh
# Makes sure Debian's prometheus package (it brings promtool) is installed, for the alert rules'
# unit tests (`promtool test rules`) and the check of the dashboard's expressions (`promtool check
# rules`): test/deploy/prometheus.test.ts. Installs it with apt-get when missing and this runs as
# root; prints promtool's path. The tests start no Prometheus server (the package's own service
# is Debian's to start or not: a container's policy-rc.d usually stops it).
#   Usage: sh scripts/ensure-promtool.sh
set -eu
if command -v promtool >/dev/null; then
  command -v promtool
  exit 0
fi
if [ "$(id -u)" != "0" ]; then
  echo "promtool is not installed, and installing it needs root: apt-get install -y prometheus" >&2
  exit 1
fi
if ! command -v apt-get >/dev/null; then
  echo "promtool is not installed, and this machine has no apt-get: install Prometheus's promtool with its package manager" >&2
  exit 1
fi
export DEBIAN_FRONTEND=noninteractive
apt-get update -qq >&2 || true
if ! apt-get install -y -qq --no-install-recommends prometheus >&2; then
  echo "apt-get could not install prometheus (are Debian's packages reachable?)" >&2
  exit 1
fi
command -v promtool || { echo "prometheus is installed but promtool was not found" >&2; exit 1; }

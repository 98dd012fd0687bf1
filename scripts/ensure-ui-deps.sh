#!/usr/bin/env bash
# What the notebook UI's tests need beyond the Python venv, installed only when missing:
#   - Debian's chromium (/usr/bin/chromium) for the Playwright browser tests (a test tool's own
#     browser download does not work on our machines, so Playwright drives this one);
#   - extension/node_modules (npm ci) for the front-end build and unit tests, reinstalled when
#     package-lock.json is newer than the install.
# Safe to run again and again: it does nothing when everything is there.
set -euo pipefail
cd "$(dirname "$0")/.."

SUDO=""
if [ "$(id -u)" != 0 ]; then SUDO="sudo"; fi

if [ ! -x /usr/bin/chromium ]; then
  echo "ensure-ui-deps: installing Debian's chromium"
  $SUDO apt-get update -q
  $SUDO apt-get install -y -q chromium
fi

stamp=extension/node_modules/.package-lock.json  # npm writes it on every install
if [ ! -f "$stamp" ] || [ extension/package-lock.json -nt "$stamp" ]; then
  echo "ensure-ui-deps: npm ci in extension/"
  (cd extension && npm ci --no-audit --no-fund)
fi

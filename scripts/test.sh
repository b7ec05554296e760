#!/usr/bin/env bash
# The whole test suite, exactly as CI runs it (.ci/run calls this script).
# It checks formatting and vet, runs the allocation checks without the race
# detector (it allocates), then runs every test with the race detector.
# Whatever the tests need from the machine it installs or starts itself:
# see the sections below. Usage: scripts/test.sh [extra go test flags]
set -euo pipefail
cd "$(dirname "$0")/.."

export PATH="$PATH:/usr/local/go/bin:$(go env GOPATH 2>/dev/null)/bin"
command -v go >/dev/null || { echo "test.sh: Go is not installed (want Go 1.26)" >&2; exit 1; }

# need_pkg CMD PACKAGE: install a Debian package when its command is missing.
need_pkg() {
  command -v "$1" >/dev/null && return 0
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    echo "== installing $2 (for $1)"
    if [ -z "${apt_updated:-}" ]; then apt-get update -qq; apt_updated=1; fi
    DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "$2" >/dev/null
  fi
  command -v "$1" >/dev/null || { echo "test.sh: $1 is missing: install the Debian package $2" >&2; exit 1; }
}

# SIP end-to-end tests drive the simulated PBX with real SIPp.
need_pkg sipp sip-tester
# pbxsim's hold/unhold and transfer tests drive two real softphones.
need_pkg baresip baresip
# The web panel is tested in real headless Chromium.
need_pkg chromium chromium
# Directory tests (directory/) start their own OpenLDAP slapd and MariaDB
# server (mariadb-install-db into a temporary directory).
need_pkg /usr/sbin/slapd slapd
need_pkg ldapsearch ldap-utils
need_pkg /usr/sbin/mariadbd mariadb-server
need_pkg /usr/sbin/nats-server nats-server   # the bus tests (bus/natstest) start their own servers
# The socket.io tests (nethcti/sio) drive the official socket.io client in
# Node; the phone-island browser test (cmd/ctibridge) bundles the published
# @nethesis/phone-island with react and react-dom (esbuild; buffer for a
# Node import in its dist/). The npm packages go to a cache directory the
# tests are told of. phone-island is unpacked with npm pack: its dist/
# bundles its dependencies, and one of them is a GitHub repository that
# npm install would fetch with git. It comes after npm install, which
# removes what its package.json does not list.
need_pkg node nodejs
need_pkg npm npm
export CTIBRIDGE_NODE_DIR="${CTIBRIDGE_NODE_DIR:-${XDG_CACHE_HOME:-$HOME/.cache}/ctibridge/node}"
npm_missing=""
for p in socket.io-client react react-dom esbuild buffer @nethesis/phone-island; do
  [ -f "$CTIBRIDGE_NODE_DIR/node_modules/$p/package.json" ] || npm_missing=1
done
if [ -n "$npm_missing" ]; then
  echo "== installing the npm packages the tests run into $CTIBRIDGE_NODE_DIR"
  mkdir -p "$CTIBRIDGE_NODE_DIR"
  npm install --prefix "$CTIBRIDGE_NODE_DIR" --no-audit --no-fund --silent \
    socket.io-client@4 react@18.3.1 react-dom@18.3.1 esbuild@0.28.2 buffer@6.0.3 >/dev/null
  island="$CTIBRIDGE_NODE_DIR/node_modules/@nethesis/phone-island"
  tgz=$(npm pack --silent --pack-destination "$CTIBRIDGE_NODE_DIR" @nethesis/phone-island@1.0.9 | tail -1)
  rm -rf "$island" && mkdir -p "$island"
  tar -xzf "$CTIBRIDGE_NODE_DIR/$tgz" -C "$island" --strip-components=1
  rm -f "$CTIBRIDGE_NODE_DIR/$tgz"
fi
# Store tests run against a real PostgreSQL: $CTIBRIDGE_TEST_DATABASE if set,
# else a server on 127.0.0.1:5432 if one answers, else a throwaway cluster
# the tests start from the installed binaries (initdb, pg_ctl).
if [ -z "${CTIBRIDGE_TEST_DATABASE:-}" ] && ! ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1; then
  need_pkg psql postgresql
  ls /usr/lib/postgresql/*/bin/initdb >/dev/null 2>&1 || need_pkg /usr/lib/postgresql/15/bin/initdb postgresql
fi

echo "== gofmt"
unformatted=$(gofmt -l $(git ls-files '*.go' 2>/dev/null || find . -name '*.go'))
if [ -n "$unformatted" ]; then
  echo "gofmt would change:"; echo "$unformatted"; exit 1
fi

echo "== go vet"
go vet ./...

# Allocation checks (tests named *Alloc*): the race detector allocates, so
# they are only meaningful without it (TestReadsDoNotAllocate skips under
# -race). Run them here without -race, verbosely; a skip is a failure, and
# each check listed must have run.
echo "== allocation checks (without -race)"
alloc_out=$(go test -count=1 -run 'Alloc' -v ./... 2>&1) || { echo "$alloc_out"; exit 1; }
echo "$alloc_out" | grep -E '^ *--- ' || true
# Here-strings, not pipes: grep -q stops reading at its first match, and
# with pipefail the echo's SIGPIPE would read as "did not run".
if grep -qE '^ *--- SKIP' <<<"$alloc_out"; then
  echo "test.sh: an allocation check was skipped without -race" >&2; exit 1
fi
for t in TestReadsDoNotAllocate TestFanoutAllocs TestTokenCheckDoesNotAllocate \
         TestIndexLookupDoesNotAllocate TestNoiseDoesNotAllocate; do
  grep -qE "^--- PASS: $t " <<<"$alloc_out" || { echo "test.sh: $t did not run" >&2; exit 1; }
done

echo "== go test -race"
go test -race -count=1 -timeout 15m "$@" ./...

# Build the Debian package, install it, check it, purge it (root and dpkg
# only; it says "skipped" otherwise).
echo "== Debian package"
packaging/test-deb.sh

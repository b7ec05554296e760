#!/usr/bin/env bash
# CI test of the Debian package, on a throwaway machine (it installs and
# purges a package system-wide, so it needs root and dpkg; without them it
# says so and exits 0):
#
#   packaging/test-deb.sh [path/to/ctibridge_X_Y.deb]
#
# It builds the package (unless given one), installs it with dpkg -i, checks
# the files, owners and modes, the system user and that the unit is enabled
# but not started; runs `ctibridge check-config` on the installed files as
# the service user (it must name the missing ami-secret, then pass with it);
# runs `systemd-analyze verify` on the unit when systemd-analyze is there;
# then removes and purges the package and checks nothing is left. It purges
# any ctibridge installed before it starts, so it can run again after a
# failure.
set -euo pipefail
cd "$(dirname "$0")/.."

if [ "$(id -u)" != 0 ] || ! command -v dpkg >/dev/null; then
  echo "test-deb.sh: skipped: needs root and dpkg (a throwaway CI machine)"
  exit 0
fi

fail() { echo "test-deb.sh: FAIL: $*" >&2; exit 1; }
step() { echo "== $*"; }

deb=${1:-}
if [ -z "$deb" ]; then
  step "build"
  deb=$(packaging/build-deb.sh | tail -1)
fi
[ -f "$deb" ] || fail "no package at $deb"

# Idempotent: whatever an earlier run left.
dpkg --purge ctibridge >/dev/null 2>&1 || true

step "dpkg -i $deb"
DEBIAN_FRONTEND=noninteractive dpkg -i "$deb"
dpkg -s ctibridge | grep -q '^Status: install ok installed' || fail "not installed"

step "installed files"
[ -x /usr/bin/ctibridge ] || fail "/usr/bin/ctibridge missing"
/usr/bin/ctibridge version | grep -q '^ctibridge ' || fail "ctibridge version"
getent passwd ctibridge >/dev/null || fail "no ctibridge user"
getent group ctibridge >/dev/null || fail "no ctibridge group"
[ "$(getent passwd ctibridge | cut -d: -f7)" = /usr/sbin/nologin ] || fail "ctibridge user has a login shell"
want_stat() { # PATH "MODE USER GROUP"
  got=$(stat -c '%a %U %G' "$1") || fail "$1 missing"
  [ "$got" = "$2" ] || fail "$1 is '$got', want '$2'"
}
want_stat /etc/ctibridge "750 root ctibridge"
want_stat /etc/ctibridge/ctibridge.yaml "640 root ctibridge"
want_stat /etc/ctibridge/users.yaml "640 root ctibridge"
want_stat /var/lib/ctibridge "750 ctibridge ctibridge"
want_stat /usr/bin/ctibridge "755 root root"
conffiles=$(dpkg-query -W -f='${Conffiles}\n' ctibridge)
for f in /etc/ctibridge/ctibridge.yaml /etc/ctibridge/users.yaml; do
  grep -q " $f " <<<"$conffiles" || fail "$f is not a conffile"
done
unit=$(dpkg -L ctibridge | grep '/systemd/system/ctibridge.service$') || fail "no unit in the package"
[ -L /etc/systemd/system/multi-user.target.wants/ctibridge.service ] || fail "unit not enabled"
if [ -d /run/systemd/system ]; then
  systemctl is-active --quiet ctibridge && fail "unit started on install (want enabled, not started)"
fi

step "check-config on the installed files, as the service user"
as_service() { setpriv --reuid=ctibridge --regid=ctibridge --init-groups "$@"; }
out=$(as_service /usr/bin/ctibridge check-config --config /etc/ctibridge/ctibridge.yaml 2>&1) &&
  fail "check-config passed without a manager secret: $out"
grep -q 'key "ami-secret": required' <<<"$out" || fail "check-config did not name ami-secret: $out"
[ "$(grep -c '^error: ' <<<"$out")" = 1 ] || fail "want exactly one error (the secret): $out"
echo "$out" | sed 's/^/   /'
out=$(CTIBRIDGE_AMI_SECRET=not-a-real-secret as_service /usr/bin/ctibridge check-config --config /etc/ctibridge/ctibridge.yaml 2>&1) ||
  fail "check-config with a secret: $out"
echo "$out" | sed 's/^/   /'
# A broken edit is caught with its line and key.
cp /etc/ctibridge/ctibridge.yaml /tmp/ctibridge-test-bad.yaml
printf 'ami-usr: typo\nreconcile-every: soon\n' >>/tmp/ctibridge-test-bad.yaml
out=$(/usr/bin/ctibridge check-config --config /tmp/ctibridge-test-bad.yaml 2>&1) && fail "a bad config passed"
rm -f /tmp/ctibridge-test-bad.yaml
grep -q 'ctibridge-test-bad.yaml:[0-9]*: key "ami-usr": unknown key (hint: did you mean "ami-user"?)' <<<"$out" || fail "typo not reported: $out"
grep -q 'key "reconcile-every": not a duration' <<<"$out" || fail "bad duration not reported: $out"

step "reinstall over itself (the upgrade path): edited conffiles and modes are kept"
echo "# edited by test-deb.sh" >>/etc/ctibridge/users.yaml
DEBIAN_FRONTEND=noninteractive dpkg -i --force-confold "$deb" >/dev/null
grep -q '^# edited by test-deb.sh' /etc/ctibridge/users.yaml || fail "reinstall replaced an edited conffile"
want_stat /etc/ctibridge/users.yaml "640 root ctibridge"
[ -L /etc/systemd/system/multi-user.target.wants/ctibridge.service ] || fail "unit no longer enabled after reinstall"

step "systemd-analyze verify"
if command -v systemd-analyze >/dev/null; then
  # verify loads the unit in a scratch manager: no running systemd needed.
  if ! out=$(systemd-analyze verify "$unit" 2>&1); then
    fail "systemd-analyze verify $unit: $out"
  fi
  # It exits 0 on some warnings (unknown keys, bad values): those fail too.
  if grep -v -e 'Failed to .*cgroup' -e 'not running as PID 1' <<<"$out" | grep -q "ctibridge.service"; then
    fail "systemd-analyze verify warned: $out"
  fi
  echo "   ok"
else
  echo "   skipped: systemd-analyze is not installed (apt-get install systemd)"
fi

step "remove"
dpkg --remove ctibridge
[ -e /usr/bin/ctibridge ] && fail "/usr/bin/ctibridge left after remove"
[ -f /etc/ctibridge/ctibridge.yaml ] || fail "remove (not purge) must keep the conffiles"

step "purge"
dpkg --purge ctibridge
left=""
for p in /usr/bin/ctibridge /etc/ctibridge /var/lib/ctibridge "$unit" \
  /etc/systemd/system/multi-user.target.wants/ctibridge.service /etc/systemd/system/ctibridge.service \
  /var/lib/systemd/deb-systemd-helper-enabled/ctibridge.service \
  /var/lib/systemd/deb-systemd-helper-enabled/multi-user.target.wants/ctibridge.service \
  /var/lib/systemd/deb-systemd-helper-masked/ctibridge.service /usr/share/doc/ctibridge; do
  if [ -e "$p" ] || [ -L "$p" ]; then left="$left $p"; fi
done
[ -z "$left" ] || fail "left after purge:$left"
getent passwd ctibridge >/dev/null && fail "user ctibridge left after purge"
getent group ctibridge >/dev/null && fail "group ctibridge left after purge"
dpkg-statoverride --list | grep -q ctibridge && fail "statoverride left after purge"
dpkg -s ctibridge >/dev/null 2>&1 && fail "dpkg still knows ctibridge"
echo "test-deb.sh: ok"

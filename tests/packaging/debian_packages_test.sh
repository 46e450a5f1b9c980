#!/usr/bin/env bash
# The Debian packages of this build tree (cmake/TandemInstall.cmake), made
# and checked without installing them on this machine:
#   1. `cpack -G DEB` makes every package into OUT/debs (what the docker
#      test's images install, deploy/docker-images.sh --debs);
#   2. each package has its files, its conffiles and postinst, and Depends
#      that dpkg-shlibdeps derived (the Debian libraries its binaries load);
#   3. every systemd unit's exposure (`systemd-analyze security --offline`)
#      is at most 2.0 of 10, and an unhardened copy of a unit is refused by
#      the same check (the check can fail);
#   4. the SDK as an app sees it, unpacked into OUT/stage: find_package(tandem)
#      builds examples/cpp_app shared and static (OUT/app-build, which
#      sdk_example_round_test runs in a round), the C smoke program compiles
#      and runs from `pkg-config --cflags --libs tandem-client` (and
#      tandem-client-static: libtandem_client.a), and
#      python3-tandem's `import tandem` encodes a report outside any build tree.
# Usage: debian_packages_test.sh BUILD_DIR SOURCE_DIR OUT_DIR
set -euo pipefail
build="$1" src="$2" out="$3"
say() { echo "debian-packages: $*"; }
fail() { echo "debian-packages: FAIL: $*" >&2; exit 1; }
now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }

rm -rf "$out"
mkdir -p "$out/debs" "$out/stage"
t=$(now)
(cd "$build" && cpack -G DEB -B "$out/debs" >"$out/cpack.log" 2>&1) || {
  tail -40 "$out/cpack.log" >&2; fail "cpack"; }
say "cpack -G DEB: $(took "$t") s"
rm -rf "$out/debs/_CPack_Packages"

packages=(tandem-aggregator tandem-coordinator tandem-worker tandem-tools libtandem-client0
          libtandem-client-dev)
if compgen -G "$build/python/tandem/_tandem*.so" >/dev/null; then packages+=(python3-tandem); fi
declare -A deb=()
for p in "${packages[@]}"; do
  f=("$out"/debs/"${p}"_*.deb)
  [ ${#f[@]} -eq 1 ] && [ -f "${f[0]}" ] || fail "no single ${p}_*.deb in $out/debs"
  deb[$p]="${f[0]}"
  say "$(basename "${f[0]}"): $(du -k "${f[0]}" | cut -f1) KiB; Depends: $(dpkg-deb -f "${f[0]}" Depends)"
done

# 2. Contents, maintainer files, Depends.
has() {  # package path...
  local p="$1"; shift
  local listing; listing="$(dpkg-deb -c "${deb[$p]}")"
  for f in "$@"; do grep -qE " \./${f#/}( -> .*)?$" <<<"$listing" || fail "$p lacks $f"; done
}
has tandem-aggregator /usr/bin/tandem-aggregator /usr/lib/systemd/system/tandem-aggregator@.service \
  /etc/tandem/aggregator-leader.textproto /etc/tandem/aggregator-helper.textproto
has tandem-coordinator /usr/bin/tandem-coordinator /usr/lib/systemd/system/tandem-coordinator.service \
  /etc/tandem/coordinator.flags
has tandem-worker /usr/bin/tandem-worker /usr/lib/systemd/system/tandem-worker.service \
  /etc/tandem/worker.flags
has tandem-tools /usr/bin/tandem-client /usr/bin/tandem-sim /usr/bin/tandem-status \
  /usr/bin/tandem-admin /usr/bin/tandem-train /usr/bin/tandem-make-certs
has libtandem-client-dev /usr/include/tandem/client/c_api.h /usr/include/tandem/client/participant.h \
  /usr/lib/libtandem_client.a /usr/lib/libtandem_client.so /usr/lib/pkgconfig/tandem-client.pc \
  /usr/lib/pkgconfig/tandem-client-static.pc \
  /usr/lib/cmake/tandem/tandemConfig.cmake
has libtandem-client0 /usr/lib/libtandem_client.so.0
for p in tandem-aggregator tandem-coordinator tandem-worker; do
  ctl="$out/ctl-$p"
  dpkg-deb -e "${deb[$p]}" "$ctl"
  [ -x "$ctl/postinst" ] || fail "$p has no postinst"
  grep -q "^/etc/tandem/" "$ctl/conffiles" || fail "$p marks no conffile"
done
depends_on() {  # package library-package...
  local d; d="$(dpkg-deb -f "${deb[$1]}" Depends)"
  for lib in "${@:2}"; do
    grep -qE "(^|, )${lib//+/\\+}( |,|$)" <<<"$d" || fail "$1 does not depend on $lib: $d"
  done
}
depends_on tandem-aggregator libgrpc++1.51 libssl3 libsqlite3-0 libtbb12 libc6
depends_on tandem-coordinator libgrpc++1.51 libssl3 libsqlite3-0 libprometheus-cpp-core1.0
depends_on libtandem-client0 libgrpc++1.51 libabsl20220623 libstdc++6
depends_on libtandem-client-dev libtandem-client0 libabsl-dev
dpkg-deb -I "${deb[libtandem-client0]}" shlibs | grep -q "^libtandem_client 0 libtandem-client0" ||
  fail "libtandem-client0 has no shlibs file naming libtandem_client.so.0"

# 3. Unit hardening (exposure 0-10; --threshold is in tenths).
for p in tandem-aggregator tandem-coordinator tandem-worker; do dpkg-deb -x "${deb[$p]}" "$out/stage"; done
for unit in tandem-aggregator@leader tandem-coordinator tandem-worker; do
  systemd-analyze security --offline=true --root="$out/stage" --threshold=20 "$unit.service" \
    >"$out/security-$unit.txt" 2>&1 || { tail -5 "$out/security-$unit.txt" >&2;
    fail "$unit.service: exposure above 2.0"; }
  say "$unit.service: $(grep -o 'Overall exposure level.*' "$out/security-$unit.txt")"
done
units="$out/stage/usr/lib/systemd/system"
grep -v -E '^(NoNewPrivileges|Protect|Private|Restrict|CapabilityBoundingSet|SystemCall|LockPersonality|MemoryDeny|UMask)' \
  "$units/tandem-coordinator.service" >"$units/unhardened-control.service"
if systemd-analyze security --offline=true --root="$out/stage" --threshold=20 \
    unhardened-control.service >/dev/null 2>&1; then
  fail "the exposure check passed a unit without its hardening"
fi
rm "$units/unhardened-control.service"

# 4. The SDK from the packages, as an app builds against it.
for p in libtandem-client0 libtandem-client-dev; do dpkg-deb -x "${deb[$p]}" "$out/stage"; done
t=$(now)
cmake -S "$out/stage/usr/share/doc/libtandem-client-dev/examples/cpp_app" -B "$out/app-build" \
  -G Ninja -DCMAKE_BUILD_TYPE=Release -DCMAKE_PREFIX_PATH="$out/stage/usr" >"$out/app-cmake.log" 2>&1 ||
  { tail -30 "$out/app-cmake.log" >&2; fail "configuring examples/cpp_app against the packages"; }
cmake --build "$out/app-build" >"$out/app-build.log" 2>&1 ||
  { tail -40 "$out/app-build.log" >&2; fail "building examples/cpp_app against the packages"; }
[ -x "$out/app-build/cpp_app" ] && [ -x "$out/app-build/cpp_app_static" ] ||
  fail "cpp_app and cpp_app_static were not both built"
say "examples/cpp_app (shared and static) built against the packages: $(took "$t") s"
readelf -d "$out/app-build/cpp_app" | grep -q 'NEEDED.*libtandem_client.so.0' ||
  fail "cpp_app does not load libtandem_client.so.0"
if readelf -d "$out/app-build/cpp_app_static" | grep -q 'libtandem_client'; then
  fail "cpp_app_static loads libtandem_client"
fi
# What the shared library exports: the C ABI and tandem::, nothing of Abseil's.
exports="$(nm -D --defined-only "$out/stage/usr/lib/libtandem_client.so.0" | awk '{print $3}')"
grep -q '^tandem_participant_create$' <<<"$exports" || fail "tandem_participant_create not exported"
if grep -q '^_ZN4absl' <<<"$exports"; then fail "libtandem_client.so.0 exports Abseil symbols"; fi
export PKG_CONFIG_PATH="$out/stage/usr/lib/pkgconfig"
# shellcheck disable=SC2046
cc -o "$out/c_api_smoke" "$src/client/c_api_smoke.c" $(pkg-config --cflags --libs tandem-client) \
  -Wl,-rpath,"$out/stage/usr/lib" || fail "the C smoke program does not build from pkg-config"
"$out/c_api_smoke" >"$out/c_api_smoke.log" 2>&1 || { cat "$out/c_api_smoke.log" >&2;
  fail "the C smoke program against libtandem_client.so.0"; }
say "C ABI through pkg-config (shared): $(tail -1 "$out/c_api_smoke.log")"
cc -c -o "$out/c_api_smoke.o" "$src/client/c_api_smoke.c" $(pkg-config --cflags tandem-client-static)
# shellcheck disable=SC2046
c++ -o "$out/c_api_smoke_static" "$out/c_api_smoke.o" $(pkg-config --libs tandem-client-static) ||
  fail "the C smoke program does not link from pkg-config's tandem-client-static"
if readelf -d "$out/c_api_smoke_static" | grep -q libtandem_client; then
  fail "c_api_smoke_static loads libtandem_client"
fi
"$out/c_api_smoke_static" >"$out/c_api_smoke_static.log" 2>&1 || {
  cat "$out/c_api_smoke_static.log" >&2; fail "the C smoke program against libtandem_client.a"; }
say "C ABI through pkg-config (static): $(tail -1 "$out/c_api_smoke_static.log")"

if [ -n "${deb[python3-tandem]:-}" ]; then
  dpkg-deb -x "${deb[python3-tandem]}" "$out/stage"
  (cd "$out" && env -u PYTHONPATH PYTHONPATH="$out/stage/usr/lib/python3/dist-packages" \
    /usr/bin/python3 - <<'PY') || fail "python3-tandem"
import os, numpy as np, tandem
assert "/stage/usr/lib/python3/dist-packages/tandem" in tandem.__file__, tandem.__file__
enc = tandem.ReportEncoder("t", 1, 128, 16, 4, 1, clip_l2_norm=1.0)
r = enc.encode(np.full(128, 0.01, np.float32))
assert len(r.to_leader) > 0 and len(r.to_helper) > 0
print("debian-packages: python3-tandem imports and encodes from", os.path.dirname(tandem.__file__))
PY
fi
say "ok"

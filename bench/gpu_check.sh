#!/usr/bin/env bash
# GPU check, for a machine with a CUDA device (e.g. a lent H200), run from
# anywhere in the repository:
#
#   OUT=/tmp/results bash bench/gpu_check.sh
#
# 1. Builds the GPU targets in ./build (a no-op when up to date; configures
#    ./build with CUDA ON for sm_90 first if it does not exist).
# 2. Runs every ctest labelled gpu (each CUDA kernel against its CPU
#    reference, device-arena reuse) and fails if any of them skipped for
#    want of a device.
# 3. Runs the GPU benchmarks (CUDA paths and their CPU references) with a
#    short minimum time.
# Outputs under "${OUT:-/tmp}": device.txt, ctest_gpu.txt, the gtest logs of
# the gpu binaries, gpu_benchmark.txt and gpu_benchmark.json.
# Exit status: nonzero when a step fails; after a successful build every
# step runs regardless of the others.
set -uo pipefail

cd "$(dirname "$0")/.."
out="${OUT:-/tmp}"
mkdir -p "${out}"
build="${BUILD_DIR:-build}"
min_time="${BENCH_MIN_TIME:-0.05}"  # seconds (plain number: older Google Benchmark)
jobs="${JOBS:-$(nproc)}"
rc=0

{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv || true
  /usr/local/cuda/bin/nvcc --version | tail -n 1 || true
} > "${out}/device.txt" 2>&1

if [[ ! -f "${build}/CMakeCache.txt" ]]; then
  cmake -S . -B "${build}" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_ENABLE_CUDA=ON \
    -DCMAKE_CUDA_ARCHITECTURES=90 > "${out}/configure.txt" 2>&1 ||
    { echo "gpu_check: configure failed (${out}/configure.txt)"; exit 1; }
fi
cmake --build "${build}" -j "${jobs}" --target ml_kernels_gpu_test ml_search_gpu_test \
  ml_kernels_gpu_benchmark > "${out}/build.txt" 2>&1 ||
  { echo "gpu_check: build failed"; grep -E "error" "${out}/build.txt" | head -20; exit 1; }

ctest --test-dir "${build}" -L gpu --output-on-failure --timeout 900 \
  > "${out}/ctest_gpu.txt" 2>&1 || rc=1
for t in ml/kernels/ml_kernels_gpu_test ml/kernels/search/ml_search_gpu_test; do
  log="${out}/$(basename "${t}").txt"
  "${build}/${t}" > "${log}" 2>&1 || rc=1
  if grep -q "no CUDA device" "${log}"; then
    echo "FAIL: ${t} skipped its tests (no usable CUDA device)" | tee -a "${out}/ctest_gpu.txt"
    rc=1
  fi
done

"${build}/ml/kernels/ml_kernels_gpu_benchmark" --benchmark_min_time="${min_time}" \
  --benchmark_out="${out}/gpu_benchmark.json" --benchmark_out_format=json \
  > "${out}/gpu_benchmark.txt" 2>&1 || rc=1

tail -n 4 "${out}/ctest_gpu.txt"
echo "gpu_check: exit ${rc}; outputs in ${out}"
exit "${rc}"

#!/usr/bin/env bash
# Device check for ml/kernels on a machine with an NVIDIA GPU (e.g. H200):
# builds with CUDA (sm_90 only, to keep nvcc time small), runs the gpu-label
# tests (CUDA vs CPU reference) and the GPU + CPU benchmarks, and writes the
# logs to ${OUT:-./gpu_out}. Usage (repo root): bash bench/gpu_check.sh
set -uo pipefail
OUT_DIR="${OUT:-$PWD/gpu_out}"
BUILD="${BUILD_DIR:-build-gpu}"
mkdir -p "$OUT_DIR"
{
  date -u
  nvidia-smi --query-gpu=name,driver_version,memory.total --format=csv 2>&1 || true
  nproc
} > "$OUT_DIR/env.txt"

cmake -S . -B "$BUILD" -G Ninja -DCMAKE_BUILD_TYPE=Release -DTANDEM_ENABLE_CUDA=ON \
  -DCMAKE_CUDA_ARCHITECTURES=90 > "$OUT_DIR/configure.log" 2>&1 || { echo "configure failed"; tail -30 "$OUT_DIR/configure.log"; exit 1; }
cmake --build "$BUILD" -j"$(nproc)" --target ml_kernels_gpu_test ml_kernels_test \
  ml_kernels_gpu_benchmark ml_kernels_benchmark > "$OUT_DIR/build.log" 2>&1 || { echo "build failed"; grep -E 'error' "$OUT_DIR/build.log" | head -30; exit 1; }

rc=0
ctest --test-dir "$BUILD" -L gpu --output-on-failure > "$OUT_DIR/ctest_gpu.log" 2>&1 || rc=1
tail -15 "$OUT_DIR/ctest_gpu.log"
# Fails loudly if the tests were skipped (no device seen).
"$BUILD/ml/kernels/ml_kernels_gpu_test" > "$OUT_DIR/gpu_test.log" 2>&1 || rc=1
grep -q "SKIPPED" "$OUT_DIR/gpu_test.log" && { echo "GPU tests SKIPPED: no device visible"; rc=1; }
"$BUILD/ml/kernels/ml_kernels_gpu_benchmark" --benchmark_min_time=0.2 > "$OUT_DIR/gpu_benchmark.txt" 2>&1 || rc=1
"$BUILD/ml/kernels/ml_kernels_benchmark" --benchmark_filter='BM_(DusaForward|HammingTopK)/' \
  --benchmark_min_time=0.2 > "$OUT_DIR/cpu_benchmark.txt" 2>&1 || rc=1
cat "$OUT_DIR/gpu_benchmark.txt" | tail -8
echo "gpu_check rc=$rc"
exit $rc

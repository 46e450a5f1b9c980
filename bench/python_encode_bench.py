#!/usr/bin/env python3
"""Encoding one 2^20-parameter update from Python vs from C++.

The C++ side is client_encoder_benchmark's BM_Encode (the public
ReportEncoder::Encode an app calls, OpenSSL randomness; built with
-DTANDEM_BUILD_BENCHMARKS=ON); the Python side is tandem.ReportEncoder.encode
on a float32 NumPy array, for the same round (D = 2^20, B = 256, d = 1:
k = 2048 groups; clip 1, 16 fraction bits, the round tandem-coordinator
announces for a model of 2^20 parameters). Both run alternately, several
times, and the medians of real and CPU time (the latter steadier on a
shared machine) are compared: with the report released before the next
call (BM_Encode's loop) and with the previous report still alive
(BM_EncodeKeepPrevious, `r = enc.encode(u)` in a loop: glibc then cannot
reuse the freed buffers, in C++ as in Python). "+ both bytes" also turns
both requests into Python bytes (a copy of ~8.8 MB).

    bench/python_encode_bench.py --build build [--repeats 5] [--seconds 3] [--check 0.10]

--check F exits 1 when the Python CPU-time median exceeds C++'s by more than F.
"""

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import time


def cpu_model():
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True).stdout
        for line in out.splitlines():
            if line.startswith("Model name:"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or "unknown"


def cxx_ms(binary, bench, log2d, proofs, seconds):
    """(real, cpu) ms per Encode of C++ benchmark `bench`."""
    name = f"{bench}/log2D:{log2d}/B:256/d:1/proofs:{proofs}/real_time"
    out = subprocess.run([binary, f"--benchmark_filter=^{name}$", "--benchmark_format=json",
                          f"--benchmark_min_time={seconds}"], capture_output=True, text=True, check=True)
    runs = [b for b in json.loads(out.stdout)["benchmarks"] if b["name"] == name]
    if not runs:
        sys.exit(f"{binary} has no benchmark {name}")
    b = runs[0]
    scale = {"ns": 1e-6, "us": 1e-3, "ms": 1.0, "s": 1e3}[b["time_unit"]]
    return b["real_time"] * scale, b["cpu_time"] * scale


def python_ms(encoder, update, seconds, keep_previous, with_bytes=False):
    """(real, cpu) ms per encode() call from Python. Without keep_previous
    the report is released before the next call (as in BM_Encode's loop)."""
    n, start, cpu = 0, time.perf_counter(), time.process_time()
    r = None
    while True:
        if not keep_previous:
            r = None
        r = encoder.encode(update)
        if with_bytes:
            r.to_leader, r.to_helper  # noqa: B018 (materialize both bytes objects)
        n += 1
        elapsed = time.perf_counter() - start
        if elapsed >= seconds and n >= 3:
            return elapsed / n * 1e3, (time.process_time() - cpu) / n * 1e3


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--build", default="build", help="build tree with benchmarks and python")
    ap.add_argument("--log2d", type=int, default=20)
    ap.add_argument("--proofs", type=int, default=0, help="1: norm-bound proofs too")
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seconds", type=float, default=3.0, help="per measurement")
    ap.add_argument("--check", type=float, default=None)
    args = ap.parse_args()
    sys.path.insert(0, os.path.join(args.build, "python"))
    import numpy as np
    import tandem

    binary = os.path.join(args.build, "client", "client_encoder_benchmark")
    d = 1 << args.log2d
    encoder = tandem.ReportEncoder.for_model(d, block_size=256, log_blocks_per_group=1,
                                             norm_proofs=bool(args.proofs))
    assert encoder.dimension == d
    update = np.random.default_rng(1).normal(0, 1e-3, d).astype(np.float32)
    encoder.encode(update)  # warm up
    rows = {k: [] for k in ("cxx", "py", "py+bytes", "cxx-keep", "py-keep")}
    for _ in range(args.repeats):  # alternated, so that drifting load hits both
        rows["cxx"].append(cxx_ms(binary, "BM_Encode", args.log2d, args.proofs, args.seconds))
        rows["py"].append(python_ms(encoder, update, args.seconds, False))
        rows["py+bytes"].append(python_ms(encoder, update, args.seconds, False, True))
        if args.proofs == 0:
            rows["cxx-keep"].append(cxx_ms(binary, "BM_EncodeKeepPrevious", args.log2d, 0,
                                           args.seconds))
            rows["py-keep"].append(python_ms(encoder, update, args.seconds, True))
    med = {k: (statistics.median(r for r, _ in v), statistics.median(c for _, c in v))
           for k, v in rows.items() if v}
    print(f"CPU: {cpu_model()} ({os.cpu_count()} logical CPUs); load average "
          f"{os.getloadavg()[0]:.2f}")
    print(f"encode D=2^{args.log2d} B=256 d=1 proofs={args.proofs}; medians of {args.repeats} "
          f"(real / CPU ms per report):")
    labels = {"cxx": "C++  Encode, report released", "py": "Py   encode(), report released",
              "py+bytes": "Py   encode() + both bytes",
              "cxx-keep": "C++  Encode, previous kept", "py-keep": "Py   encode(), previous kept"}
    base = {"cxx": "cxx", "py": "cxx", "py+bytes": "cxx", "cxx-keep": "cxx-keep",
            "py-keep": "cxx-keep"}
    for k, (real, cpu) in med.items():
        b_real, b_cpu = med[base[k]]
        rel = "" if base[k] == k else (f"   vs C++: real {(real / b_real - 1) * 100:+.1f} %, "
                                       f"CPU {(cpu / b_cpu - 1) * 100:+.1f} %")
        print(f"  {labels[k]:<32} {real:7.2f} / {cpu:7.2f}{rel}")
    p, c = med["py"][1], med["cxx"][1]
    if args.check is not None and p > c * (1 + args.check):
        print(f"FAIL: Python CPU time more than {args.check * 100:.0f} % above C++")
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

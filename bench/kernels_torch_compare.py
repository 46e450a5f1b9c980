#!/usr/bin/python3
"""PyTorch CPU timings for the computations ml/kernels shares with PyTorch.

Comparison only (Debian python3-torch, not a project dependency):
  * dense attention softmax(q k^T / sqrt d) v, H=8, d=64, N in {1024, 2048}
    (same shapes as BM_DenseAttention/N);
  * CAT mixing via rFFT: y = irfft(conj(rfft(softmax(z))) * rfft(v)), H=8,
    D=512, N in {4096, 4000} (same as BM_CatMix/N/0).
Also checks, on a small case, that the FFT form equals the explicit gather
form, i.e. that PyTorch and our kernel compute the same function.

Usage: /usr/bin/python3 bench/kernels_torch_compare.py [--threads 2]
"""
import argparse
import math
import time

import torch


def best_of(fn, reps):
    best = float("inf")
    for _ in range(reps):
        t0 = time.perf_counter()
        fn()
        best = min(best, time.perf_counter() - t0)
    return best


def dense(q, k, v):
    s = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(q.shape[-1]))
    return torch.matmul(torch.softmax(s, dim=-1), v)


def cat_fft(z, v):
    # z (H, N) logits, v (N, D) with D = H * dh; R_ij = z*_{(j - i) mod N}.
    h, n = z.shape
    zs = torch.softmax(z, dim=-1)
    zf = torch.conj(torch.fft.rfft(zs, dim=-1))          # (H, N/2+1)
    vf = torch.fft.rfft(v.reshape(n, h, -1), dim=0)      # (N/2+1, H, dh)
    return torch.fft.irfft(vf * zf.t().unsqueeze(-1), n=n, dim=0).reshape(n, -1)


def cat_gather(z, v):
    h, n = z.shape
    zs = torch.softmax(z, dim=-1)
    idx = (torch.arange(n).unsqueeze(0) - torch.arange(n).unsqueeze(1)) % n  # j - i
    out = []
    for hh in range(h):
        r = zs[hh][idx]
        out.append(r @ v.reshape(n, h, -1)[:, hh, :])
    return torch.stack(out, dim=1).reshape(n, -1)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--reps", type=int, default=5)
    args = ap.parse_args()
    torch.set_num_threads(args.threads)
    torch.manual_seed(0)
    print(f"torch {torch.__version__}, threads {torch.get_num_threads()}")

    z = torch.randn(2, 12, dtype=torch.float64)
    v = torch.randn(12, 6, dtype=torch.float64)
    err = (cat_fft(z, v) - cat_gather(z, v)).abs().max().item()
    print(f"check: CAT fft vs gather max |diff| = {err:.2e}")
    assert err < 1e-10

    for n in (1024, 2048):
        q, k, vv = (torch.randn(8, n, 64) for _ in range(3))
        t = best_of(lambda: dense(q, k, vv), args.reps)
        gflops = 4.0 * 8 * n * n * 64 / t / 1e9
        print(f"dense_attention N={n}: {t * 1e3:.2f} ms, {gflops:.1f} GFLOP/s")

    for n in (4096, 4000):
        z = torch.randn(8, n)
        v = torch.randn(n, 512)
        t = best_of(lambda: cat_fft(z, v), args.reps)
        gbps = (2.0 * n * 512 + 8 * n) * 4 / t / 1e9
        print(f"cat_fft N={n}: {t * 1e3:.2f} ms, {gbps:.2f} GB/s (read v + write y + z)")


if __name__ == "__main__":
    main()

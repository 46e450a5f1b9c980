#!/usr/bin/python3
"""PyTorch CPU reference for ml/train/trainer_benchmark.cc, on PyTorch's best CPU setups.

Same models as the benchmark (MLP 784-256-128-10; CNN conv32-pool-conv64-pool-fc128-fc10;
deep CNN conv32-conv32-pool-conv64-conv64-pool-fc128-fc10, all 3x3 pad-1 convolutions),
same batch (64), same step (forward, cross-entropy, backward, Adam) on synthetic 28x28
inputs, on 1 and 2 intra-op threads, in these setups (each in its own child process, so
that the BLAS library and its thread pool are chosen before torch loads):

  blas=reference   Debian's default libblas.so.3 (netlib reference), as installed
  blas=openblas    OpenBLAS 0.3.21 (Debian libopenblas0-pthread), BLAS pool = threads
  blas=openblas1   OpenBLAS with its own pthread pool pinned to 1 (OPENBLAS_NUM_THREADS=1)
  x layout nchw / channels_last (CNNs), x mkldnn on (oneDNN convolutions) / off (CNNs)

Every child reports the BLAS library that torch actually mapped (from /proc/self/maps),
torch.backends.mkldnn.is_available() and the oneDNN version from torch.__config__.show().

How OpenBLAS is selected (--select):
  private (default)  `apt-get download libopenblas0-pthread` + `dpkg-deb -x` into a
                     temporary directory, children get LD_LIBRARY_PATH=<that>/openblas-pthread.
                     Nothing on the system changes; the directory is deleted at exit.
  alternatives       installs libopenblas0-pthread if missing (root), selects it with
                     update-alternatives for libblas.so.3 and liblapack.so.3, and on exit
                     (also on SIGINT/SIGTERM) restores each alternative's previous mode and
                     value and removes the package again if this script installed it.

Usage (Debian: apt-get install -y python3-torch; not a project dependency):
  /usr/bin/python3 bench/ml_torch_compare.py [--seconds 5] [--models mlp,cnn,deep_cnn]
"""
import argparse
import json
import os
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

ARCH = "x86_64-linux-gnu"
ALTS = (f"libblas.so.3-{ARCH}", f"liblapack.so.3-{ARCH}")
OB_PKG = "libopenblas0-pthread"
OB_DIR = f"/usr/lib/{ARCH}/openblas-pthread"


# ---------------------------------------------------------------- child: one measurement
def child(args):
    import torch
    from torch import nn

    torch.backends.mkldnn.enabled = bool(args.mkldnn)
    args.threads = int(args.threads)
    torch.set_num_threads(args.threads)
    torch.manual_seed(1)

    def conv(i, o):
        return [nn.Conv2d(i, o, 3, padding=1), nn.ReLU()]

    if args.model == "mlp":
        model = nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                              nn.Linear(128, 10))
    elif args.model == "cnn":
        model = nn.Sequential(*conv(1, 32), nn.MaxPool2d(2), *conv(32, 64), nn.MaxPool2d(2),
                              nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(),
                              nn.Linear(128, 10))
    else:  # deep_cnn: 6 weight tensors + 6 biases (MakeDeepCnn in ml/model/model_zoo.h)
        model = nn.Sequential(*conv(1, 32), *conv(32, 32), nn.MaxPool2d(2), *conv(32, 64),
                              *conv(64, 64), nn.MaxPool2d(2), nn.Flatten(),
                              nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))
    fmt = torch.channels_last if args.layout == "channels_last" else torch.contiguous_format
    if args.model != "mlp":
        model = model.to(memory_format=fmt)
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    shape = (1024, 784) if args.model == "mlp" else (1024, 1, 28, 28)
    x_all = torch.rand(shape)
    y_all = torch.randint(0, 10, (1024,))
    batch = args.batch
    if args.model != "mlp":
        x_all = x_all.contiguous(memory_format=fmt)

    def step(i):
        lo = (i * batch) % 1024
        x, y = x_all[lo:lo + batch], y_all[lo:lo + batch]
        opt.zero_grad(set_to_none=True)
        loss = loss_fn(model(x), y)
        loss.backward()
        opt.step()

    for i in range(5):  # warm-up
        step(i)
    n, start, cpu_start = 0, time.perf_counter(), time.process_time()
    while time.perf_counter() - start < args.seconds:
        step(n)
        n += 1
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    maps = open("/proc/self/maps").read()
    blas = sorted({line.split()[-1] for line in maps.splitlines()
                   if re.search(r"lib(open)?blas", line)})
    dnnl = re.search(r"MKL-DNN v([0-9.]+)", torch.__config__.show())
    print(json.dumps({
        "model": args.model, "threads": args.threads, "setup": args.setup,
        "samples_per_s": n * batch / elapsed, "ms_per_step": elapsed / n * 1e3,
        "samples_per_cpu_s": n * batch / cpu, "torch": torch.__version__,
        "blas_loaded": [os.path.realpath(b) for b in blas],
        "mkldnn_available": torch.backends.mkldnn.is_available(),
        "mkldnn_enabled": torch.backends.mkldnn.enabled,
        "onednn": dnnl.group(1) if dnnl else None,
    }))


# ---------------------------------------------------------------- parent: OpenBLAS selection
def run(cmd, check=True):
    return subprocess.run(cmd, check=check, capture_output=True, text=True)


def query_alt(name):
    """(mode, value) of an update-alternatives group, or None when it does not exist."""
    r = run(["update-alternatives", "--query", name], check=False)
    if r.returncode != 0:
        return None
    fields = dict(line.split(": ", 1) for line in r.stdout.splitlines() if ": " in line)
    return fields.get("Status"), fields.get("Value")


class OpenBlas:
    """Makes OpenBLAS available to the children; undo() puts the system back."""

    def __init__(self, select):
        self.select, self.tmp, self.saved, self.installed = select, None, {}, False
        self.env = {}

    def setup(self):
        if self.select == "private":
            self.tmp = tempfile.mkdtemp(prefix="ml_torch_compare_")
            r = subprocess.run(["apt-get", "download", OB_PKG], cwd=self.tmp,
                               capture_output=True, text=True)
            debs = [f for f in os.listdir(self.tmp) if f.endswith(".deb")]
            if r.returncode != 0 or not debs:
                raise RuntimeError(f"apt-get download {OB_PKG} failed: {r.stderr.strip()}")
            run(["dpkg-deb", "-x", os.path.join(self.tmp, debs[0]), os.path.join(self.tmp, "root")])
            self.env = {"LD_LIBRARY_PATH": os.path.join(self.tmp, "root") + OB_DIR}
            return
        # alternatives: record, install if missing, select.
        for name in ALTS:
            self.saved[name] = query_alt(name)
        status = run(["dpkg-query", "-W", "-f=${Status}", OB_PKG], check=False).stdout
        if "install ok installed" not in status:
            run(["apt-get", "install", "-y", "--no-install-recommends", OB_PKG])
            self.installed = True
        run(["update-alternatives", "--set", ALTS[0], f"{OB_DIR}/libblas.so.3"])
        run(["update-alternatives", "--set", ALTS[1], f"{OB_DIR}/liblapack.so.3"])

    def undo(self):
        if self.tmp:
            shutil.rmtree(self.tmp, ignore_errors=True)
            self.tmp = None
        if self.select != "alternatives" or not self.saved:
            return
        if self.installed:
            run(["apt-get", "remove", "-y", OB_PKG], check=False)
        for name, prev in self.saved.items():
            if prev is None:
                continue
            mode, value = prev
            if mode == "auto":
                run(["update-alternatives", "--auto", name], check=False)
            else:
                run(["update-alternatives", "--set", name, value], check=False)
        self.saved = {}


def reference_env(select):
    """Environment under which torch loads the reference BLAS."""
    if select == "alternatives":
        # The system alternative now points at OpenBLAS: point the child at the reference.
        return {"LD_LIBRARY_PATH": f"/usr/lib/{ARCH}/blas:/usr/lib/{ARCH}/lapack"}
    return {}


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=5.0)
    p.add_argument("--models", default="mlp,cnn,deep_cnn")
    p.add_argument("--threads", default="1,2")
    p.add_argument("--select", choices=("private", "alternatives"), default="private")
    p.add_argument("--skip_reference", action="store_true", help="no reference-BLAS runs")
    p.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    p.add_argument("--model", default="mlp", help=argparse.SUPPRESS)
    p.add_argument("--setup", default="", help=argparse.SUPPRESS)
    p.add_argument("--layout", default="nchw", help=argparse.SUPPRESS)
    p.add_argument("--mkldnn", type=int, default=1, help=argparse.SUPPRESS)
    p.add_argument("--batch", type=int, default=64)
    args = p.parse_args()
    if args.child:
        child(args)
        return

    ob = OpenBlas(args.select)

    def on_signal(signum, frame):
        raise SystemExit(128 + signum)

    signal.signal(signal.SIGTERM, on_signal)
    signal.signal(signal.SIGINT, on_signal)
    cpu = re.search(r"model name\s*: (.*)", open("/proc/cpuinfo").read()).group(1)
    flags = re.search(r"flags\s*: (.*)", open("/proc/cpuinfo").read()).group(1).split()
    simd = [f for f in ("avx2", "fma", "avx512f", "avx512bw", "avx512vl", "amx_tile") if f in flags]
    print(f"CPU: {cpu}; {os.cpu_count()} CPUs; flags: {' '.join(simd)}; "
          f"load average at start: {os.getloadavg()[0]:.2f}", flush=True)
    results = []
    try:
        ob.setup()
        for model in args.models.split(","):
            for threads in (int(t) for t in args.threads.split(",")):
                setups = []
                blas_list = ["openblas", "openblas1"] if threads > 1 else ["openblas"]
                if not args.skip_reference:
                    blas_list = ["reference"] + blas_list
                for blas in blas_list:
                    if model == "mlp":
                        setups.append((blas, "nchw", 1))
                    else:
                        for layout in ("nchw", "channels_last"):
                            for mkldnn in (1, 0):
                                setups.append((blas, layout, mkldnn))
                for blas, layout, mkldnn in setups:
                    env = dict(os.environ)
                    env.update(reference_env(args.select) if blas == "reference" else ob.env)
                    env["OPENBLAS_NUM_THREADS"] = "1" if blas == "openblas1" else str(threads)
                    env["OMP_NUM_THREADS"] = str(threads)
                    setup = (f"{blas}" + ("" if model == "mlp" else
                                          f",{layout},mkldnn={'on' if mkldnn else 'off'}"))
                    cmd = [sys.executable, os.path.abspath(__file__), "--child", "--model", model,
                           "--threads", str(threads), "--seconds", str(args.seconds),
                           "--layout", layout, "--mkldnn", str(mkldnn), "--setup", setup,
                           "--batch", str(args.batch)]
                    r = subprocess.run(cmd, env=env, capture_output=True, text=True)
                    if r.returncode != 0:
                        print(f"{model} threads={threads} {setup}: FAILED {r.stderr[-300:]}")
                        continue
                    res = json.loads(r.stdout.strip().splitlines()[-1])
                    results.append(res)
                    print(f"torch {res['torch']} {model} threads={threads} [{setup}]: "
                          f"{res['samples_per_s']:,.0f} samples/s ({res['ms_per_step']:.2f} ms/step,"
                          f" {res['samples_per_cpu_s']:,.0f} per CPU-s); BLAS loaded: "
                          f"{', '.join(res['blas_loaded'])}; oneDNN {res['onednn']} "
                          f"available={res['mkldnn_available']}", flush=True)
    finally:
        ob.undo()
    print(f"load average at end: {os.getloadavg()[0]:.2f}")
    print("\nbest setup per model and thread count:")
    best = {}
    for r in results:
        k = (r["model"], r["threads"])
        if k not in best or r["samples_per_s"] > best[k]["samples_per_s"]:
            best[k] = r
    for (model, threads), r in sorted(best.items()):
        print(f"  {model} threads={threads}: {r['samples_per_s']:,.0f} samples/s [{r['setup']}]")


if __name__ == "__main__":
    main()

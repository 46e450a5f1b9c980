#!/usr/bin/python3
"""PyTorch CPU reference for ml/train/trainer_benchmark.cc.

Same models (MLP 784-256-128-10, CNN conv32-pool-conv64-pool-fc128-fc10 with
3x3 pad-1 convolutions), same batch (64), same step (forward, cross-entropy,
backward, Adam) on synthetic 28x28 inputs, on 1 and 2 intra-op threads.

Usage (Debian: apt-get install -y python3-torch; not a project dependency):
  /usr/bin/python3 bench/ml_torch_compare.py [--seconds 5]
"""
import argparse
import time

import torch
from torch import nn


def mlp():
    return nn.Sequential(nn.Linear(784, 256), nn.ReLU(), nn.Linear(256, 128), nn.ReLU(),
                         nn.Linear(128, 10))


def cnn():
    return nn.Sequential(nn.Conv2d(1, 32, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Conv2d(32, 64, 3, padding=1), nn.ReLU(), nn.MaxPool2d(2),
                         nn.Flatten(), nn.Linear(64 * 7 * 7, 128), nn.ReLU(), nn.Linear(128, 10))


def measure(name, make, threads, seconds, batch=64):
    torch.set_num_threads(threads)
    torch.manual_seed(1)
    model = make()
    opt = torch.optim.Adam(model.parameters(), lr=1e-3)
    loss_fn = nn.CrossEntropyLoss()
    shape = (1024, 784) if name == "mlp" else (1024, 1, 28, 28)
    x_all = torch.rand(shape)
    y_all = torch.randint(0, 10, (1024,))

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
    while time.perf_counter() - start < seconds:
        step(n)
        n += 1
    elapsed = time.perf_counter() - start
    cpu = time.process_time() - cpu_start
    # CPU time covers all threads of the process: on a shared, loaded machine
    # samples per CPU-second (1 thread) is the steadier figure.
    print(f"torch {torch.__version__} {name} threads={threads} batch={batch}: "
          f"{n * batch / elapsed:,.0f} samples/s wall ({elapsed / n * 1e3:.2f} ms/step), "
          f"{n * batch / cpu:,.0f} samples per CPU-second")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--seconds", type=float, default=5.0)
    args = p.parse_args()
    for name, make in (("mlp", mlp), ("cnn", cnn)):
        for threads in (1, 2):
            measure(name, make, threads, args.seconds)


if __name__ == "__main__":
    main()

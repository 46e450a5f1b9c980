#!/usr/bin/env python3
"""A PyTorch CNN on Fashion-MNIST, trained by 20 Python clients through
tandem's two aggregators with differential privacy -- in one command:

    PYTHONPATH=build/python python3 examples/torch_fmnist.py

Each round, every sampled client (Poisson, rate q) runs a few SGD steps of
the CNN on its own shard (Dirichlet label skew) in PyTorch and returns its
update; tandem clips it, encodes it as a PREAMBLE block-sparse DPF key pair
with a norm-bound proof under a coordinator-signed ticket, and uploads one
share to each real tandem-aggregator daemon (TLS, roles). Each aggregator
adds its own discrete Gaussian noise (sigma = z * C) before releasing its
share; the decoded noisy mean updates the global model (FedAvg). Prints one
line per round (accuracy, upload bytes, epsilon at delta 1e-5), one line of
what a client sent against clear FedAvg and against Prio3-style dense
two-server sharing, and writes metrics.csv, metrics.json and report.html
into --report_dir. --no-norm_proofs is the cheap private path (dense 32-bit
shares, about the bytes of clear FedAvg); the proofs, which stop a malicious
client from pushing the sum past its clipping bound, cost the rest.

Needs Debian's python3-torch and dataset-fashion-mnist
(deploy/install-deps.sh); tandem itself needs only NumPy.
"""

import argparse
import os
import sys
import time

import torch
from torch import nn

import tandem


def make_cnn():
    return nn.Sequential(
        nn.Conv2d(1, 8, 5), nn.ReLU(), nn.MaxPool2d(2),     # 28 -> 24 -> 12
        nn.Conv2d(8, 16, 5), nn.ReLU(), nn.MaxPool2d(2),    # 12 -> 8 -> 4
        nn.Flatten(), nn.Linear(16 * 4 * 4, 10))


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=20)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--sample_rate", type=float, default=1.0, help="q (Poisson rate)")
    ap.add_argument("--local_steps", type=int, default=10)
    ap.add_argument("--batch_size", type=int, default=32)
    ap.add_argument("--lr", type=float, default=0.05, help="client SGD learning rate")
    ap.add_argument("--server_lr", type=float, default=1.0)
    ap.add_argument("--clip", type=float, default=0.5, help="L2 clipping bound C")
    ap.add_argument("--noise_multiplier", type=float, default=1.0,
                    help="z: each aggregator's discrete Gaussian sigma / C (1.0 = the "
                         "daemons' default floor)")
    ap.add_argument("--target_epsilon", type=float, default=0.0,
                    help="> 0: the noise multiplier is the least for which the rounds stay "
                         "within this epsilon (replaces --noise_multiplier)")
    ap.add_argument("--max_upload_vs_dense", type=float, default=0.0,
                    help="> 0: d is the smallest whose reports upload at most this multiple "
                         "of dense two-server sharing (replaces --log_blocks_per_group)")
    ap.add_argument("--baseline", action=argparse.BooleanOptionalAction, default=True,
                    help="also train clear-text FedAvg (no PREAMBLE, no DP) to compare")
    ap.add_argument("--log_blocks_per_group", type=int, default=0,
                    help="PREAMBLE d: a client sends 1 of 2^d blocks per group")
    ap.add_argument("--block_size", type=int, default=256)
    ap.add_argument("--encoding", default="auto", choices=["auto", "preamble", "dense"],
                    help="report encoding: auto picks, per round, the smaller upload of "
                         "PREAMBLE's block-sparse keys and dense additive shares")
    ap.add_argument("--norm_proofs", action=argparse.BooleanOptionalAction, default=True,
                    help="every report proves its norm bound to both aggregators (the "
                         "defence against malicious clients); --no-norm_proofs is the cheap "
                         "private path: dense 32-bit shares, about the bytes of clear FedAvg")
    ap.add_argument("--alpha", type=float, default=0.5, help="Dirichlet label skew")
    ap.add_argument("--train_items", type=int, default=20000)
    ap.add_argument("--test_items", type=int, default=2000)
    ap.add_argument("--seed", type=int, default=1)
    ap.add_argument("--report_dir", default="reports/python-torch")
    args = ap.parse_args(argv)

    torch.manual_seed(args.seed)
    torch.set_num_threads(1)
    x_train, y_train, x_test, y_test = tandem.datasets.load(
        "fmnist", seed=args.seed, max_train=args.train_items, max_test=args.test_items)
    shards = tandem.sim.dirichlet_split(y_train, args.clients, alpha=args.alpha, seed=args.seed)
    xt, yt = torch.from_numpy(x_train), torch.from_numpy(y_train)
    xe, ye = torch.from_numpy(x_test), torch.from_numpy(y_test)
    model = make_cnn()
    names = [n for n, _ in model.named_parameters()]
    initial = [p.detach().numpy().copy() for p in model.parameters()]
    print(f"tandem + PyTorch: CNN with {sum(w.size for w in initial)} parameters, "
          f"{len(x_train)} Fashion-MNIST images over {args.clients} clients "
          f"(Dirichlet {args.alpha}), q={args.sample_rate}, C={args.clip}, "
          f"z={args.noise_multiplier} per aggregator", flush=True)

    def load(weights):
        with torch.no_grad():
            for p, w in zip(model.parameters(), weights):
                p.copy_(torch.from_numpy(w))

    gen = torch.Generator().manual_seed(args.seed)

    def train(client, weights, round_):
        """A few SGD steps on this client's shard; returns trained - global."""
        load(weights)
        opt = torch.optim.SGD(model.parameters(), lr=args.lr, momentum=0.9)
        idx = torch.from_numpy(shards[client])
        model.train()
        for _ in range(args.local_steps):
            batch = idx[torch.randint(len(idx), (args.batch_size,), generator=gen)]
            opt.zero_grad()
            nn.functional.cross_entropy(model(xt[batch]), yt[batch]).backward()
            opt.step()
        return [p.detach().numpy() - w for p, w in zip(model.parameters(), weights)]

    def evaluate(weights, round_):
        load(weights)
        model.eval()
        with torch.no_grad():
            logits = model(xe)
            loss = nn.functional.cross_entropy(logits, ye).item()
            acc = (logits.argmax(1) == ye).float().mean().item()
        return acc, loss

    common = dict(evaluate=evaluate, tensor_names=names, rounds=args.rounds,
                  clients=args.clients, sample_rate=args.sample_rate, server_lr=args.server_lr,
                  clip=args.clip, seed=args.seed, progress=tandem.sim.print_progress)
    start = time.time()
    records = []
    if args.baseline:
        torch.manual_seed(args.seed)
        gen.manual_seed(args.seed)
        records += tandem.sim.run(train, initial, name="torch-cnn-fedavg-clear", private=False,
                                  **common).records
    gen.manual_seed(args.seed)
    # Through both real aggregator daemons (started for the run with a
    # policy whose noise floor is z, norm proofs required).
    private = tandem.sim.run(
        train, initial, name="torch-cnn-private-dp", noise_multiplier=args.noise_multiplier,
        block_size=args.block_size, log_blocks_per_group=args.log_blocks_per_group,
        norm_proofs=args.norm_proofs, encoding=args.encoding,
        target_epsilon=args.target_epsilon, max_upload_vs_dense=args.max_upload_vs_dense,
        **common).records
    records += private
    os.makedirs(args.report_dir, exist_ok=True)
    tandem.sim.write_report(args.report_dir, records,
                            title="tandem: PyTorch CNN on Fashion-MNIST with DP")
    last = private[-1]
    print(tandem.sim.bytes_line(private), flush=True)
    print(f"done in {time.time() - start:.1f}s: private accuracy {last['test_accuracy']:.4f}, "
          f"epsilon {last['epsilon']:.2f} at delta 1e-5 ("
          f"{'z for that epsilon' if args.target_epsilon else f'z = {args.noise_multiplier}'}, "
          f"C = {args.clip}); report: {args.report_dir}/report.html", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())

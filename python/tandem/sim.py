"""An in-process federation whose local training is a Python callable.

The coordinator's side (Poisson cohort sampling with rate q, FedAvg or
FedLUAR server side, privacy accounting) and the clients' reports run in
this process; the two aggregation servers are real tandem-aggregator
daemons on loopback, started with TLS, roles, coordinator-signed upload
tickets, norm proofs and a privacy policy matching the run -- exactly as
`tandem-sim` runs them. Each report is a PREAMBLE block-sparse DPF key
pair, and each aggregator adds its own discrete Gaussian noise before
anything is released.

    def train(client, weights, round):     # weights: list of float32 arrays
        ...                                # a few SGD steps on the client's shard
        return [new - old for new, old in zip(trained, weights)]

    def evaluate(weights, round):
        return accuracy, loss

    result = tandem.sim.run(train, initial_weights, evaluate=evaluate,
                            rounds=20, clients=20, noise_multiplier=0.5)
    tandem.sim.write_report("reports/python", result.records)

The records are plain dicts (variant, round, participants, accepted_reports,
test_accuracy, test_loss, bytes_up, clear_bytes_up, dense_bytes_up,
bytes_down, epsilon, seconds), the same rows tandem-sim writes to metrics.csv;
write_report makes the same metrics.csv, metrics.json and report.html.
clear_bytes_up and dense_bytes_up are what the same updates would upload as
clear FedAvg (4 bytes per value) and as Prio3-style dense two-server sharing
(8 bytes per value to the leader, a 16-byte seed to the helper).

Callbacks run in the calling thread, one at a time; the GIL is released
between them (while the reports are encoded, uploaded, verified, noised
and decoded). An exception in a callback stops the run and is re-raised.
"""

import collections
import math
import os

from . import _binaries, _tandem

Result = collections.namedtuple("Result", ["records", "weights"])


def policy(noise_multiplier, min_batch_size=1, norm_proofs=True, sample_rate=1.0,
           epsilon_budget=0.0):
    """The aggregators' PrivacyPolicy textproto for a run (as tandem-sim's):
    its noise as the floor, its minimum batch, proofs as asked, its Poisson
    rate as the trusted sampling rate, its budget (none when 0)."""
    budget = epsilon_budget if noise_multiplier > 0 and epsilon_budget > 0 else "inf"
    return (f"min_noise_multiplier: {noise_multiplier} min_batch_size: {min_batch_size} "
            f"require_norm_proofs: {'true' if norm_proofs else 'false'} "
            f"sampling_rate: {sample_rate} epsilon_budget: {budget}")


class Aggregators:
    """A leader and a helper tandem-aggregator on loopback (a context
    manager; close() stops them and removes their temporary state and
    logs). Certificates and the coordinator's ticket
    key are made afresh under `state_dir` unless `certs_dir` names a
    deploy/make-certs.sh output. `policy` is the aggregators' PrivacyPolicy
    textproto (see policy()); the daemons' private defaults when None."""

    def __init__(self, policy=None, *, binary=None, certs_dir=None):
        binary = binary or _binaries.binary("aggregator")
        self._a = _tandem._Aggregators(binary, policy or "", os.fspath(certs_dir or ""))

    @property
    def endpoints(self):
        """leader, helper (upload), leader_collector, helper_collector, certs_dir."""
        return self._a.endpoints()

    @property
    def state_dir(self):
        """Where the daemons keep their state and logs (leader.log, helper.log)."""
        return self._a.state_dir

    @property
    def pids(self):
        """(leader pid, helper pid); (0, 0) once closed."""
        return self._a.pids

    def close(self):
        """Stops both daemons (SIGTERM, clean shutdown)."""
        self._a.close()

    def kill(self):
        """Kills both daemons (SIGKILL; they would recover from their state)."""
        self._a.kill()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


def run(train, initial_weights, *, evaluate=None, rounds=5, clients=20, sample_rate=0.5,
        name="fedavg", private=True, fedluar=False, num_recycled=1, server_lr=1.0,
        block_size=256, log_blocks_per_group=1, clip=1.0, noise_multiplier=0.5, delta=1e-5,
        epsilon_budget=0.0, norm_proofs=True, min_batch_size=1, seed=1, crypto_seed=0,
        aggregators=None, progress=None, tensor_names=None, encoding="auto",
        target_epsilon=0.0, max_upload_vs_dense=0.0):
    """Runs `rounds` rounds; returns Result(records, weights).

    train(client, weights, round) -> update (list of arrays of the weights'
    shapes: trained minus global; float32/float64, finite).
    evaluate(weights, round) -> (accuracy, loss), optional.
    initial_weights: list of arrays (e.g. [p.detach().numpy() for p in
    model.parameters()]). FedLUAR recycles only tensors of rank >= 2.
    private=False averages in the clear (the baseline; no daemons). Without
    `aggregators` a pair is started for the run with policy(...) of its
    settings and stopped after it. `progress(record)` after each round
    (print_progress prints tandem-sim's line). encoding: "auto" (per round
    the smaller upload of PREAMBLE and dense sharing), "preamble" or "dense".
    max_upload_vs_dense > 0 sets log_blocks_per_group: the smallest d whose
    reports upload at most that multiple of dense two-server sharing;
    target_epsilon > 0 sets noise_multiplier: the least for which `rounds`
    rounds stay within it, crediting PREAMBLE's random block sampling (and
    epsilon_budget defaults to it). Result.records say what they spent.
    """
    weights = list(initial_weights)
    names = list(tensor_names) if tensor_names is not None else [
        f"t{i}" for i in range(len(weights))]
    shapes = [tuple(getattr(w, "shape", ())) for w in weights]
    options = dict(name=name, private=private, fedluar=fedluar, num_recycled=num_recycled,
                   rounds=rounds, clients=clients, sample_rate=sample_rate,
                   server_lr=server_lr, block_size=block_size,
                   log_blocks_per_group=log_blocks_per_group, clip=clip,
                   noise_multiplier=noise_multiplier, delta=delta,
                   epsilon_budget=epsilon_budget, norm_proofs=norm_proofs,
                   min_batch_size=min_batch_size, seed=seed, crypto_seed=crypto_seed,
                   encoding=encoding)
    if private and (target_epsilon or max_upload_vs_dense):
        dimension = sum(math.prod(s) for s in shapes)
        planned = _tandem._apply_targets(options, dimension, float(max_upload_vs_dense),
                                         float(target_epsilon))
        # The coordinator's ledger takes the planned budget; the aggregators'
        # policy keeps the one given (their ledgers do not credit block
        # sampling), with the calibrated noise as its floor.
        options.update(planned)
        noise_multiplier = planned["noise_multiplier"]
    owned = None
    if private and aggregators is None:
        owned = aggregators = Aggregators(policy(noise_multiplier, min_batch_size, norm_proofs,
                                                 sample_rate, epsilon_budget))
    try:
        endpoints = aggregators.endpoints if private else {}
        records, final = _tandem._run_federation(options, names, [list(s) for s in shapes],
                                                 weights, train, evaluate, endpoints, progress)
    finally:
        if owned is not None:
            owned.close()
    return Result(records, final)


def print_progress(r):
    """tandem-sim's per-round line for a record."""
    def times(base):
        return f"{r['bytes_up'] / base:.2f}x" if base else "n/a"
    print(f"[{r['variant']:<26}] round {r['round']:2d}  clients {r['participants']:2d}  "
          f"reports {r['accepted_reports']:2d}  acc {r['test_accuracy']:.4f}  "
          f"up {r['bytes_up'] / 1024:8.1f} KiB ({times(r.get('clear_bytes_up', 0))} clear, "
          f"{times(r.get('dense_bytes_up', 0))} dense sharing)  eps {r['epsilon']:.3f}  "
          f"{r['seconds']:.1f}s", flush=True)


def bytes_line(records):
    """The cost of privacy in one line (tandem-sim prints the same): what a
    client sent per round against the same updates as clear FedAvg and as
    Prio3-style dense two-server sharing. None without baselines."""
    up = sum(r["bytes_up"] for r in records)
    clear = sum(r.get("clear_bytes_up", 0) for r in records)
    dense = sum(r.get("dense_bytes_up", 0) for r in records)
    clients = sum(r["participants"] for r in records)
    if not (clients and clear and dense):
        return None
    name = records[0]["variant"]
    encoded = [r for r in records if r.get("encoding")]
    dense_rounds = sum(1 for r in encoded if r["encoding"] == "dense")
    tail = f"; dense encoding in {dense_rounds} of {len(encoded)} rounds" if encoded else ""
    return (f"[{name:<26}] a client sent {up / clients:.0f} B per round, "
            f"{32 * up / clear:.1f} bits per coordinate: {up / clear:.3f}x clear FedAvg "
            f"({clear / clients:.0f} B), {up / dense:.3f}x dense two-server sharing "
            f"({dense / clients:.0f} B){tail}")


def write_report(directory, records, title="tandem federation report"):
    """metrics.csv, metrics.json and report.html (inline SVG plots) into
    `directory` (created), as tandem-sim writes them."""
    _tandem._write_report(os.fspath(directory), title, [dict(r) for r in records])


def dirichlet_split(labels, num_clients, alpha=0.5, seed=1, min_per_client=10,
                    num_classes=None):
    """Client shards with Dirichlet(alpha) label skew (ml/data/partition.h,
    the split tandem-sim uses): a list of index arrays, each sample once."""
    import numpy as np
    labels = np.asarray(labels)
    if labels.ndim != 1 or labels.dtype.kind not in "iu":
        raise TypeError("labels must be a 1-D integer array")
    if num_classes is None:
        num_classes = int(labels.max()) + 1 if labels.size else 0
    return _tandem._dirichlet_split(labels.astype(np.int64), int(num_classes), int(num_clients),
                                    float(alpha), int(seed), int(min_per_client))

#!/usr/bin/env python3
"""Your PyTorch model through the real tandem daemons, in one command:

    PYTHONPATH=build/python python3 examples/torch_federation.py

1. The CNN's initial state_dict is saved as safetensors and the operator
   creates the task from it through the coordinator's task API
   (tandem-admin task create, mutual TLS with the operator's certificate):
   the server never needs the architecture, only the named tensors.
   With --native_clients=N the same coordinator also runs a tandem-native
   CNN task side by side, trained by N tandem-client (C++) processes.
2. Both tandem-aggregator daemons run as in a deployment: TLS, roles,
   coordinator-signed upload tickets, norm proofs, each adding its own
   discrete Gaussian noise; devices enroll with operator tokens.
3. --clients devices train the CNN in PyTorch on their shards of sklearn
   digits and upload their updates by tensor name (Participant.upload takes
   a dict); after every released version the sampled devices evaluate it on
   their held-out examples and report the counts through both aggregators
   (private federated evaluation).
4. The released model is exported (tandem-admin task export, over the task
   API) and evaluated again in plain PyTorch.

Needs Debian's python3-torch (deploy/install-deps.sh); tandem itself needs
only NumPy.
"""

import argparse
import os
import re
import subprocess
import sys
import tempfile
import time

import numpy as np
import torch
from torch import nn

import tandem


def make_cnn():
    return nn.Sequential(nn.Conv2d(1, 8, 3), nn.ReLU(), nn.Flatten(),   # 8x8 -> 6x6
                         nn.Linear(8 * 6 * 6, 10))


def binary(name):
    env = {"aggregator": "TANDEM_AGGREGATOR_BIN", "coordinator": "TANDEM_COORDINATOR_BIN",
           "admin": "TANDEM_ADMIN_BIN", "client": "TANDEM_CLIENT_BIN"}[name]
    return os.environ.get(env) or tandem._tandem._default_binaries()[name]


def images(x):
    return torch.from_numpy(np.asarray(x, np.float32).reshape(-1, 1, 8, 8))


def load_state(model, state):
    model.load_state_dict({k: torch.from_numpy(np.array(v)) for k, v in state.items()})


def start_coordinator(work, ep, log):
    """A coordinator without a command-line task: tasks come through its task
    API (the admin listener, operators' certificates only)."""
    cmd = [binary("coordinator"), "--listen=127.0.0.1:0", "--nocommand_line_task",
           "--admin_listen=127.0.0.1:0", "--admin_identities=operator.tandem",
           "--leader=" + ep["leader_collector"], "--helper=" + ep["helper_collector"],
           "--announce_leader=" + ep["leader"], "--announce_helper=" + ep["helper"],
           f"--tls_cert={ep['certs_dir']}/coordinator.pem",
           f"--tls_key={ep['certs_dir']}/coordinator.key",
           f"--tls_ca={ep['certs_dir']}/ca.pem", f"--ticket_key={ep['certs_dir']}/ticket.key",
           f"--state_dir={work}/coordinator", f"--enrollment_keys={work}/enroll.pub"]
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=log, text=True)
    admin = None
    for line in proc.stdout:
        m = re.match(r"admin on (\d+)", line)
        if m:
            admin = "127.0.0.1:" + m.group(1)
        m = re.match(r"listening on (\d+)", line)
        if m:
            return proc, "127.0.0.1:" + m.group(1), admin
    raise RuntimeError("tandem-coordinator did not start; see its log")


def operator_flags(ep, admin):
    """tandem-admin's flags for the coordinator's task API."""
    certs = ep["certs_dir"]
    return [f"--admin={admin}", f"--tls_cert={certs}/operator.pem",
            f"--tls_key={certs}/operator.key", f"--tls_ca={certs}/ca.pem"]


def task_document(task_id, model, args, min_reports, evaluation):
    """A TaskSpec textproto (proto/task.proto): the task as an operator writes it."""
    text = f"""task_id: "{task_id}"
model {{ {model} }}
training {{ local_steps: {args.local_steps} }}
encoding {{ block_size: 64 log_blocks_per_group: 1 }}
privacy {{ clip: {args.clip} noise_multiplier: {args.noise_multiplier} norm_proofs: true
          min_batch_size: {min_reports} sample_rate: 1 }}
rounds {{ rounds: {args.rounds} min_reports: {min_reports} target_reports: {min_reports}
         round_timeout_s: 300 }}
"""
    if evaluation:
        text += (f"evaluation {{ every: 1 noise_multiplier: {args.eval_noise_multiplier} "
                 f"max_examples: {args.eval_max_examples} }}\n")
    return text


def create_task(work, ep, admin, name, text):
    path = os.path.join(work, name + ".textproto")
    with open(path, "w") as f:
        f.write(text)
    subprocess.run([binary("admin"), "task", "create", f"--spec={path}"] +
                   operator_flags(ep, admin), check=True, stdout=subprocess.DEVNULL)


def start_native_clients(work, ep, address, n):
    """n tandem-client processes (the C++ SDK) training the native CNN task."""
    procs = []
    for k in range(n):
        token = os.path.join(work, f"native-{k}.token")
        with open(token, "w") as f:
            f.write(subprocess.run([binary("admin"), "token", "mint",
                                    f"--signing_key={work}/enroll.key"], check=True,
                                   capture_output=True, text=True).stdout)
        procs.append(subprocess.Popen(
            [binary("client"), f"--coordinator={address}", f"--client_id=native-{k}",
             "--task_id=native-cnn", "--dataset=digits", f"--num_shards={n}", f"--shard={k}",
             f"--state_dir={work}/native-{k}", f"--tls_ca={ep['certs_dir']}/ca.pem",
             "--leader=" + ep["leader"], "--leader_name=leader.tandem",
             "--helper=" + ep["helper"], "--helper_name=helper.tandem",
             f"--enrollment_token_file={token}", "--max_errors=200", f"--seed={k + 1}"],
            stdout=subprocess.DEVNULL, stderr=open(os.path.join(work, f"native-{k}.log"), "w")))
    return procs


def task_line(ep, admin, task):
    """tandem-admin task show's first line for `task`."""
    out = subprocess.run([binary("admin"), "task", "show", f"--task={task}"] +
                         operator_flags(ep, admin), check=True, capture_output=True, text=True)
    return out.stdout.splitlines()[0]


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--rounds", type=int, default=8)
    ap.add_argument("--clients", type=int, default=20)
    ap.add_argument("--local_steps", type=int, default=20)
    ap.add_argument("--lr", type=float, default=0.1)
    ap.add_argument("--clip", type=float, default=0.5)
    ap.add_argument("--noise_multiplier", type=float, default=0.7,
                    help="z of training rounds, per aggregator")
    ap.add_argument("--eval_noise_multiplier", type=float, default=0.7,
                    help="z of federated evaluation rounds, per aggregator")
    ap.add_argument("--eval_max_examples", type=int, default=20,
                    help="held-out examples a device counts at most (its sensitivity)")
    ap.add_argument("--native_clients", type=int, default=0,
                    help="also run a tandem-native CNN task on the same coordinator, trained "
                         "by this many tandem-client processes (at least --clients)")
    ap.add_argument("--work_dir", default="", help="state and logs (default: a temporary one)")
    args = ap.parse_args(argv)
    torch.manual_seed(1)
    work = args.work_dir or tempfile.mkdtemp(prefix="tandem-torch-")
    os.makedirs(work, exist_ok=True)
    x_train, y_train, x_test, y_test = tandem.datasets.load("digits", seed=1)
    x_train, x_test = images(x_train), images(x_test)
    y_train = torch.from_numpy(np.asarray(y_train, np.int64))
    y_test = torch.from_numpy(np.asarray(y_test, np.int64))

    # 1. The task is the model's tensors: no architecture leaves this process.
    init_file = os.path.join(work, "init.safetensors")
    tandem.save_safetensors(init_file, {k: v.numpy() for k, v in make_cnn().state_dict().items()})

    # 2. The daemons. The aggregators' floor is the smaller of the two noises.
    policy = tandem.sim.policy(min(args.noise_multiplier, args.eval_noise_multiplier),
                               min_batch_size=args.clients, norm_proofs=True)
    results = {}
    with tandem.sim.Aggregators(policy) as aggregators:
        ep = aggregators.endpoints
        subprocess.run([binary("admin"), "keygen", f"--out={work}/enroll"], check=True,
                       stdout=subprocess.DEVNULL)
        log = open(os.path.join(work, "coordinator.log"), "w")
        coordinator, address, admin = start_coordinator(work, ep, log)
        native = []
        try:
            # The operator creates the task: its document names the weights
            # file, whose bytes tandem-admin sends with it.
            create_task(work, ep, admin, "torch", task_document(
                "torch", 'weights_file: "init.safetensors" num_classes: 10 '
                'input_shape: [1, 8, 8]', args,
                args.clients, evaluation=True))
            if args.native_clients:
                if args.native_clients < args.clients:
                    raise ValueError("--native_clients must be at least --clients (the "
                                     "aggregators' minimum batch)")
                create_task(work, ep, admin, "native-cnn", task_document(
                    "native-cnn", 'layers { kind: "conv2d" units: 8 padding: 1 } '
                    'layers { kind: "relu" } layers { kind: "max_pool" } '
                    'layers { kind: "flatten" } layers { kind: "dense" units: 10 } '
                    'dataset: "digits"', args, args.native_clients, evaluation=False))
                native = start_native_clients(work, ep, address, args.native_clients)
            # 3. The devices: one Participant each (own device key and state).
            devices = []
            for k in range(args.clients):
                token = subprocess.run(
                    [binary("admin"), "token", "mint", f"--signing_key={work}/enroll.key"],
                    check=True, capture_output=True, text=True).stdout.strip()
                devices.append({
                    # Named: this coordinator may run other tasks (a device
                    # that checks in for any task may be handed one its
                    # framework cannot train).
                    "p": tandem.Participant(
                        address, f"phone-{k}", task_id="torch",
                        tls_root_ca=f"{ep['certs_dir']}/ca.pem",
                        leader=ep["leader"], leader_name="leader.tandem", helper=ep["helper"],
                        helper_name="helper.tandem", state_dir=f"{work}/device-{k}",
                        enrollment_token=token),
                    "train": torch.arange(k, len(y_train), args.clients),
                    "held_out": torch.arange(k, len(y_test), args.clients),
                    "done": False})
            model, last_state, evaluations = make_cnn(), None, []
            deadline = time.time() + 600
            while not all(d["done"] for d in devices) and time.time() < deadline:
                for d in devices:
                    if d["done"]:
                        continue
                    r = d["p"].check_in()
                    if r.outcome == "done":
                        d["done"] = True
                        continue
                    if r.outcome != "assigned":
                        continue
                    # The task's data schema: this device's examples must fit it.
                    if tuple(r.assignment.input_shape) != tuple(x_train.shape[1:]):
                        raise ValueError("the task takes examples of shape %s, this device has %s"
                                         % (r.assignment.input_shape, tuple(x_train.shape[1:])))
                    state = d["p"].download_state_dict()
                    load_state(model, state)
                    if r.assignment.evaluation is not None:
                        with torch.no_grad():
                            logits = model(x_test[d["held_out"]]).numpy()
                        counts = tandem.evaluation_counts(logits, y_test[d["held_out"]].numpy(),
                                                          r.assignment.evaluation)
                        d["p"].upload_evaluation(counts)
                        last_state = state
                        continue
                    opt = torch.optim.SGD(model.parameters(), lr=args.lr)
                    rows = d["train"]
                    for step in range(args.local_steps):
                        batch = rows[torch.randint(len(rows), (32,))]
                        opt.zero_grad()
                        nn.functional.cross_entropy(model(x_train[batch]), y_train[batch]).backward()
                        opt.step()
                    trained = model.state_dict()
                    d["p"].upload({k: trained[k].numpy() - v for k, v in state.items()},
                                  num_examples=len(rows))
                time.sleep(0.05)
            if not all(d["done"] for d in devices):
                raise RuntimeError("the task did not finish in time; see " + work)
            for p in native:  # the native task's clients stop when it is done
                p.wait(timeout=max(1, deadline - time.time()))
            for task in ["torch"] + (["native-cnn"] if native else []):
                results[task] = task_line(ep, admin, task)
                print(results[task])
            text = open(os.path.join(work, "coordinator.log")).read()
            for m in re.finditer(r"federated evaluation of version (\d+) from (\d+) reports: "
                                 r"accuracy ([0-9.e-]+), loss ([0-9.e-]+) over ~([0-9.e-]+) "
                                 r"examples \(noise sd ([0-9.e-]+) examples\), epsilon "
                                 r"([0-9.e+-]+|inf)", text):
                evaluations.append({"version": int(m.group(1)), "reports": int(m.group(2)),
                                    "accuracy": float(m.group(3)), "loss": float(m.group(4)),
                                    "examples": float(m.group(5)), "sd": float(m.group(6)),
                                    "epsilon": float(m.group(7))})
                print("version %d: federated accuracy %.3f, loss %.3f over ~%.0f held-out "
                      "examples (noise sd %.1f), epsilon %.2f" % (
                          evaluations[-1]["version"], evaluations[-1]["accuracy"],
                          evaluations[-1]["loss"], evaluations[-1]["examples"],
                          evaluations[-1]["sd"], evaluations[-1]["epsilon"]))
            # 4. The released model, out of the coordinator (task API).
            out = os.path.join(work, "model.safetensors")
            subprocess.run([binary("admin"), "task", "export", "--task=torch", f"--out={out}"] +
                           operator_flags(ep, admin), check=True, stdout=subprocess.DEVNULL)
        finally:
            for p in native:
                if p.poll() is None:
                    p.kill()
            coordinator.terminate()
            coordinator.wait(timeout=30)
            log.close()

    # ... into plain PyTorch.
    exported = make_cnn()
    state = tandem.load_safetensors(out)
    load_state(exported, state)
    # The examples the devices counted: each its first eval_max_examples
    # held-out ones (the federated figure is these, noised).
    counted = torch.cat([d["held_out"][:args.eval_max_examples] for d in devices])
    with torch.no_grad():
        correct = exported(x_test).argmax(1) == y_test
    accuracy = correct.float().mean().item()
    counted_accuracy = correct[counted].float().mean().item()
    print("exported model (%s): test accuracy %.3f in plain PyTorch (%.3f on the %d examples "
          "the devices counted)" % (out, accuracy, counted_accuracy, len(counted)))
    results.update(evaluations=evaluations, exported_accuracy=accuracy,
                   counted_accuracy=counted_accuracy, counted_examples=len(counted),
                   exported=state, last_downloaded=last_state, work_dir=work)
    return results


if __name__ == "__main__":
    main()
    sys.exit(0)

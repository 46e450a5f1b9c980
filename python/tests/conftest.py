"""Fixtures of the tandem Python tests: real daemons of this build tree on
loopback (port 0), with TLS, roles and upload tickets.

Run by ctest (label python, python/CMakeLists.txt) with PYTHONPATH at the
build's package dir; by hand:
    PYTHONPATH=build/python python3 -m pytest python/tests
"""

import os
import shutil
import signal
import subprocess
import tempfile
import threading

import pytest

import tandem


def binary(name):
    env = {"aggregator": "TANDEM_AGGREGATOR_BIN", "coordinator": "TANDEM_COORDINATOR_BIN",
           "worker": "TANDEM_WORKER_BIN", "admin": "TANDEM_ADMIN_BIN"}[name]
    return os.environ.get(env) or tandem._tandem._default_binaries()[name]


class Daemon:
    """A child process that prints "listening on PORT"; stdout drained after."""

    def __init__(self, args, log_path):
        self.log = open(log_path, "a")
        self.proc = subprocess.Popen(args, stdout=subprocess.PIPE, stderr=self.log, text=True)
        self.port = None
        for line in self.proc.stdout:
            if line.startswith("listening on "):
                self.port = int(line.split()[2])
                break
        if self.port is None:
            self.stop()
            raise RuntimeError(f"{args[0]} did not start; see {log_path}")
        threading.Thread(target=self.proc.stdout.read, daemon=True).start()

    @property
    def address(self):
        return f"127.0.0.1:{self.port}"

    def stop(self, kill=False):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGKILL if kill else signal.SIGTERM)
            try:
                self.proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.log.close()


class Federation:
    """Both aggregators and a tandem-coordinator running a digits MLP task."""

    def __init__(self, rounds, noise_multiplier=0.0, extra=()):
        self.aggregators = tandem.sim.Aggregators(
            tandem.sim.policy(noise_multiplier, min_batch_size=1, norm_proofs=True))
        ep = self.aggregators.endpoints
        self.certs = ep["certs_dir"]
        self.dir = tempfile.mkdtemp(prefix="tandem-pytest-")
        # Devices enroll with single-use tokens of an operator key, minted
        # by tandem-admin as an app's backend would.
        subprocess.run([binary("admin"), "keygen", f"--out={self.dir}/enroll"], check=True,
                       stdout=subprocess.DEVNULL)
        self.coordinator = Daemon([
            binary("coordinator"), "--listen=127.0.0.1:0",
            "--leader=" + ep["leader_collector"], "--helper=" + ep["helper_collector"],
            "--announce_leader=" + ep["leader"], "--announce_helper=" + ep["helper"],
            "--leader_name=leader.tandem", "--helper_name=helper.tandem",
            f"--tls_cert={self.certs}/coordinator.pem", f"--tls_key={self.certs}/coordinator.key",
            f"--tls_ca={self.certs}/ca.pem", f"--ticket_key={self.certs}/ticket.key",
            f"--state_dir={self.dir}/coordinator", "--task_id=py", "--dataset=digits",
            "--hidden=16", "--sample_rate=1", f"--noise_multiplier={noise_multiplier}",
            "--norm_proofs", "--min_batch_size=1", "--min_reports=1", "--target_reports=1",
            "--block_size=64", "--log_blocks_per_group=1", "--clip=1", "--local_steps=5",
            "--client_lr=0.05", f"--rounds={rounds}", "--round_timeout_s=120",
            "--metrics_port=0", f"--enrollment_keys={self.dir}/enroll.pub", *extra],
            f"{self.dir}/coordinator.log")
        self.leader, self.helper = ep["leader"], ep["helper"]

    def token(self):
        """A fresh single-use enrollment token (tandem-admin token mint)."""
        return subprocess.run(
            [binary("admin"), "token", "mint", f"--signing_key={self.dir}/enroll.key",
             "--issuer=pytest"], check=True, capture_output=True, text=True).stdout.strip()

    def participant(self, client_id, **kw):
        """A Participant pinned to both aggregators, verifying the servers' TLS,
        enrolled with its own token unless `enrollment_token` is given."""
        kw.setdefault("enrollment_token", self.token())
        return tandem.Participant(
            self.coordinator.address, client_id, tls_root_ca=f"{self.certs}/ca.pem",
            leader=self.leader, leader_name="leader.tandem", helper=self.helper,
            helper_name="helper.tandem", **kw)

    def close(self):
        # SIGKILL: the tests need no clean shutdown (which takes seconds).
        self.coordinator.stop(kill=True)
        self.aggregators.kill()
        shutil.rmtree(self.dir, ignore_errors=True)


@pytest.fixture
def federation_factory():
    made = []

    def make(**kw):
        f = Federation(**kw)
        made.append(f)
        return f

    yield make
    for f in made:
        f.close()

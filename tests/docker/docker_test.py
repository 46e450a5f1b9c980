#!/usr/bin/python3
"""The compose topology for real (ctest label `docker`): builds the images
(deploy/docker-images.sh: debootstrap'd Debian 12 base, the Debian packages
of this build tree installed with apt), runs the daemons from their
packaged systemd units and configuration in a container of that image until
a private round is released (tests/packaging/units_round.sh), installs the
SDK and Python packages with apt in that image (import, encode, the
packaged daemons on PATH), brings deploy/docker-compose.yml up (helper, leader, coordinator, 12 client replicas, worker, Prometheus; host networking, TLS
everywhere with certificates from deploy/make-certs.sh), waits for a
federated round and prints the accuracy and epsilon the coordinator reports,
SIGKILLs one aggregator container while clients upload the next round
(once it holds reports of it) and restarts it, checks that the round still completes with every
accepted report (none lost across the restart, every reported upload
counted), reads a scraped series back from Prometheus, and tears everything
down.

Docker: uses a running engine, else starts dockerd itself (root only:
--bridge=none --iptables=false, overlay2 where the kernel mounts overlay,
else vfs) and stops only the dockerd it started. Exits 77 (ctest: skipped)
with a message only when Docker cannot run here (no engine, no dockerd
binary or not root, or dockerd does not come up).

  docker_test.py --source SRC --debs DIR --status PATH
Environment: TANDEM_DOCKER_VICTIM=leader|helper (default leader),
TANDEM_DOCKER_KEEP=1 (leave the topology up for inspection).
"""
import argparse
import json
import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import time
import urllib.parse
import urllib.request

PROJECT = "tandemdockertest"
PORTS = [7000, 7001, 7002, 7011, 7012, 7022, 7100, 9090, 9100, 9101, 9102, 9103]
METRICS = {"leader": 9101, "helper": 9102}
CLIENTS = 12
SKIP = 77
timings = []


class Failure(Exception):
    pass


def log(*a):
    print("docker-test:", *a, flush=True)


def timed(what, start):
    timings.append((what, time.time() - start))
    log("%s: %.1f s" % (what, time.time() - start))


def run(cmd, check=True, timeout=600, **kw):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                       timeout=timeout, **kw)
    if check and r.returncode != 0:
        raise Failure("%s exited %d:\n%s" % (" ".join(cmd), r.returncode, r.stdout[-3000:]))
    return r


def wait_for(what, timeout, probe, interval=1.0):
    """Calls probe() until it returns a truthy value; Failure after timeout."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        v = probe()
        if v:
            return v
        time.sleep(interval)
    raise Failure("timed out after %d s waiting for %s" % (timeout, what))


def http_get(url, timeout=3):
    try:
        with urllib.request.urlopen(url, timeout=timeout) as r:
            return r.read().decode()
    except Exception:  # refused, reset, timeout: not up (yet)
        return None


def sample(page, name, labels):
    """The value of the first sample of `name` carrying all `labels`."""
    for line in (page or "").splitlines():
        if not (line.startswith(name + "{") or line.startswith(name + " ")):
            continue
        if all('%s="%s"' % kv in line for kv in labels.items()):
            return float(line.rsplit(" ", 1)[1])
    return None


class Engine:
    """A Docker engine: the running one, or a dockerd this test starts."""

    def __init__(self):
        self.docker = "/usr/bin/docker" if os.path.exists("/usr/bin/docker") else shutil.which(
            "docker")
        self.proc = None
        self.log_path = None

    def answers(self):
        return run([self.docker, "info"], check=False, timeout=30).returncode == 0

    def start(self):
        if self.docker is None:
            return "no docker CLI (install docker.io)"
        if self.answers():
            log("using the running Docker engine")
            return None
        dockerd = shutil.which("dockerd") or "/usr/sbin/dockerd"
        if not os.path.exists(dockerd):
            return "no Docker engine runs and dockerd is not installed (docker.io)"
        if os.geteuid() != 0:
            return "no Docker engine runs and starting dockerd needs root"
        drivers = [os.environ["TANDEM_DOCKER_STORAGE_DRIVER"]] if os.environ.get(
            "TANDEM_DOCKER_STORAGE_DRIVER") else (["overlay2", "vfs"] if overlay_mounts()
                                                 else ["vfs"])
        for driver in drivers:
            start = time.time()
            self.log_path = tempfile.mktemp(prefix="tandem-dockerd-", suffix=".log")
            with open(self.log_path, "w") as out:
                self.proc = subprocess.Popen(
                    [dockerd, "--storage-driver=" + driver, "--bridge=none", "--iptables=false",
                     "--ip6tables=false"], stdout=out, stderr=out, start_new_session=True)
            deadline = time.time() + 60
            while time.time() < deadline and self.proc.poll() is None and not self.answers():
                time.sleep(0.5)
            if self.proc.poll() is None and self.answers():
                timed("dockerd start (%s, started by this test, pid %d)" % (driver, self.proc.pid),
                      start)
                return None
            log("dockerd --storage-driver=%s did not come up:\n%s" % (driver, tail(self.log_path)))
            self.stop()
        return "dockerd does not start here (log above)"

    def stop(self):
        """Stops the dockerd this test started (never another one)."""
        if self.proc is None:
            return
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        log("stopped the dockerd it started (pid %d)" % self.proc.pid)
        self.proc = None


def overlay_mounts():
    d = tempfile.mkdtemp(prefix="tandem-ovl-")
    for sub in ("l", "u", "w", "m"):
        os.mkdir(os.path.join(d, sub))
    ok = subprocess.run(["mount", "-t", "overlay", "overlay", "-o",
                         "lowerdir=%s/l,upperdir=%s/u,workdir=%s/w" % (d, d, d), d + "/m"],
                        stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode == 0
    if ok:
        subprocess.run(["umount", d + "/m"])
    shutil.rmtree(d, ignore_errors=True)
    return ok


def tail(path, n=3000):
    try:
        with open(path) as f:
            return f.read()[-n:]
    except OSError:
        return ""


class Topology:
    def __init__(self, engine, compose_file, status_bin, certs):
        self.e = engine
        self.compose = [shutil.which("docker-compose") or "docker-compose", "-p", PROJECT, "-f",
                        compose_file]
        self.status_bin = status_bin
        self.certs = certs

    def dc(self, *args, check=True, timeout=600):
        return run(self.compose + list(args), check=check, timeout=timeout)

    def container(self, service):
        ids = self.dc("ps", "-q", service).stdout.split()
        if not ids:
            raise Failure("no container for " + service)
        return ids[0]

    def status(self):
        r = run([self.status_bin, "--coordinator=127.0.0.1:7000",
                 "--tls_ca=" + os.path.join(self.certs, "client-roots.pem"),
                 "--server_name=coordinator.tandem", "--json"], check=False, timeout=30)
        if r.returncode != 0:
            return None
        try:
            return json.loads(r.stdout)
        except ValueError:
            return None

    def dump(self):
        log("--- containers ---")
        print(run([self.e.docker, "ps", "-a", "--filter", "name=" + PROJECT], check=False).stdout)
        log("--- logs (last 60 lines per container) ---")
        print(self.dc("logs", "--no-color", "--tail=60", check=False).stdout[-60000:])


def history(st):
    return (st or {}).get("history", [])


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--source", required=True)
    ap.add_argument("--debs", required=True,
                    help="the build tree's Debian packages (tests/packaging: cpack -G DEB)")
    ap.add_argument("--status", required=True, help="tandem-status of this build")
    args = ap.parse_args()
    signal.signal(signal.SIGTERM, lambda *_: sys.exit(143))  # ctest timeout: tear down
    total = time.time()

    engine = Engine()
    why = engine.start()
    if why:
        print("SKIPPED: Docker cannot run on this machine: %s" % why, flush=True)
        return SKIP
    work = tempfile.mkdtemp(prefix="tandem-docker-test-")
    topo = None
    try:
        busy = []
        for p in PORTS:
            s = socket.socket()
            s.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)  # as the daemons bind
            try:
                s.bind(("127.0.0.1", p))
            except OSError:
                busy.append(p)
            finally:
                s.close()
        if busy:
            raise Failure("loopback ports %s are in use; the compose topology needs %s" %
                          (busy, PORTS))

        start = time.time()
        cmd = [os.path.join(args.source, "deploy", "docker-images.sh"), "--debs", args.debs]
        r = run(cmd, timeout=1200, env=dict(os.environ, DOCKER=engine.docker))
        print(r.stdout, end="")
        timed("images from the Debian packages (deploy/docker-images.sh)", start)
        missing = run([engine.docker, "run", "--rm", "--network=host", "tandem:latest", "sh", "-c",
                       "for b in /usr/bin/tandem-*; do ldd $b 2>&1 | grep 'not found' "
                       "| sed \"s|^|$b: |\"; done"], check=False).stdout
        if "not found" in missing:
            raise Failure("the image lacks runtime libraries:\n" + missing)
        log("every binary the packages installed in tandem:latest finds its libraries")

        # The daemons from their packaged systemd units and configuration.
        start = time.time()
        pkg = os.path.join(args.source, "tests", "packaging")
        r = run([engine.docker, "run", "--rm", "--network=host", "--user=root",
                 "-v", pkg + ":/packaging-test:ro", "tandem:latest",
                 "/packaging-test/units_round.sh", "/packaging-test/fmnist-mlp.textproto"],
                check=False, timeout=400)
        print(r.stdout, end="")
        if r.returncode != 0:
            raise Failure("a round with the packaged units failed (exit %d)" % r.returncode)
        timed("packaged units: daemons from their ExecStart lines, one private round", start)

        # The SDK and Python packages, installed with apt into the same image
        # (their Depends resolved from Debian's archive): the CMake package
        # is there, and python3-tandem imports, encodes, and finds the
        # packaged daemons on PATH (no build tree in the container).
        start = time.time()
        check = ("import numpy as np, tandem\n"
                 "from tandem import _binaries\n"
                 "assert _binaries.binary('aggregator') == '/usr/bin/tandem-aggregator', "
                 "_binaries.binary('aggregator')\n"
                 "r = tandem.ReportEncoder('t', 1, 128, 16, 4, 1).encode("
                 "np.full(128, 0.01, np.float32))\n"
                 "assert r.to_leader and r.to_helper\n"
                 "print('docker-test: python3-tandem from apt:', tandem.__file__)\n")
        r = run([engine.docker, "run", "--rm", "--network=host", "--user=root",
                 "-v", os.path.abspath(args.debs) + ":/debs:ro", "tandem:latest", "sh", "-c",
                 "apt-get update -qq && DEBIAN_FRONTEND=noninteractive apt-get install -y -qq "
                 "--no-install-recommends /debs/libtandem-client0_*.deb "
                 "/debs/libtandem-client-dev_*.deb /debs/python3-tandem_*.deb >/dev/null && "
                 "test -f /usr/lib/cmake/tandem/tandemConfig.cmake && "
                 "test -f /usr/lib/libtandem_client.so.0 && python3 -c \"$0\"", check],
                check=False, timeout=400)
        print(r.stdout, end="")
        if r.returncode != 0:
            raise Failure("installing libtandem-client-dev and python3-tandem with apt failed "
                          "(exit %d)" % r.returncode)
        timed("apt-get install of the SDK and Python packages", start)

        # The deploy files as a user has them, next to their own certs/.
        deploy = os.path.join(work, "deploy")
        os.makedirs(deploy)
        src = os.path.join(args.source, "deploy")
        shutil.copy(os.path.join(src, "docker-compose.yml"), deploy)
        shutil.copy(os.path.join(src, "prometheus.yml"), deploy)
        shutil.copytree(os.path.join(src, "compose"), os.path.join(deploy, "compose"))
        shutil.copytree(os.path.join(src, "monitoring"), os.path.join(deploy, "monitoring"))
        certs = os.path.join(deploy, "certs")
        start = time.time()
        # --one-host: the clients verify the coordinator's 127.0.0.1.
        run([os.path.join(src, "make-certs.sh"), "--one-host", certs])
        for key in ("leader.key", "helper.key", "coordinator.key", "ticket.key", "tokens.txt"):
            os.chown(os.path.join(certs, key), 10001, 10001)  # the image's user; mode stays 0600
        timed("certificates (deploy/make-certs.sh)", start)

        topo = Topology(engine, os.path.join(deploy, "docker-compose.yml"), args.status, certs)
        start = time.time()
        topo.dc("up", "-d", "--scale", "client=%d" % CLIENTS, "helper", "leader", "coordinator",
                "client", "worker", "prometheus", timeout=900)
        timed("docker-compose up (%d containers)" % (CLIENTS + 5), start)

        # One round, with what the coordinator reports.
        st = wait_for("the first released round", 600,
                      lambda: (lambda s: s if history(s) else None)(topo.status()), 2)
        first = history(st)[0]
        timed("compose up to round 1 released", start)
        acc, eps = first.get("accuracy", 0.0), first.get("epsilon", 0.0)
        log("round 1: accuracy %.4f, epsilon %.4f (delta 1e-5), %s accepted reports" %
            (acc, eps, first.get("acceptedReports")))
        if not (0 < acc <= 1) or not (0 < eps < math.inf):
            raise Failure("implausible round summary %s" % first)

        victim = os.environ.get("TANDEM_DOCKER_VICTIM", "leader")
        kill_round, before = kill_mid_round(topo, victim)

        # The round completes with every accepted report.
        start = time.time()
        def released():
            for h in history(topo.status()):
                if int(h.get("aggregationRound", 0)) == kill_round:
                    return h
            return None
        done = wait_for("aggregation round %d to be released after the restart" % kill_round,
                        300, released, 2)
        timed("restart to round released", start)
        accepted, uploads = int(done.get("acceptedReports", 0)), int(done.get("uploadsDone", 0))
        log("round %d released: %d accepted reports, %d uploads reported, accuracy %.4f, "
            "epsilon %.4f" % (kill_round, accepted, uploads, done.get("accuracy", 0.0),
                              done.get("epsilon", 0.0)))
        if accepted < before or accepted != uploads:
            raise Failure("reports lost: %s held %d before the kill; the round counted %d "
                          "of %d reported uploads" % (victim, before, accepted, uploads))

        # Prometheus scraped the daemons: one series read back through its API.
        # The most over the last 10 minutes: a leader SIGKILLed in the last
        # round restarts its counters at 0 and may take no upload after it.
        start = time.time()
        def scraped():
            q = urllib.parse.quote('max_over_time(tandem_aggregator_uploads_total{code="OK"}[10m])')
            page = http_get("http://127.0.0.1:9090/api/v1/query?query=" + q)
            if not page:
                return None
            res = json.loads(page).get("data", {}).get("result", [])
            roles = {r["metric"].get("role"): float(r["value"][1]) for r in res}
            return roles if roles.get("leader", 0) > 0 and roles.get("helper", 0) > 0 else None
        roles = wait_for("Prometheus to serve the aggregators' upload counters", 90, scraped, 2)
        rounds = json.loads(http_get("http://127.0.0.1:9090/api/v1/query?query=" +
                                     "tandem_coordinator_completed_rounds") or "{}")
        log("Prometheus: tandem_aggregator_uploads_total{code=\"OK\"} %s; "
            "tandem_coordinator_completed_rounds %s" %
            (roles, [r["value"][1] for r in rounds.get("data", {}).get("result", [])]))
        timed("Prometheus readback", start)
        timed("whole docker test", total)
        print("1 passed, 0 failed", flush=True)
        return 0
    except (Failure, subprocess.TimeoutExpired) as e:
        log("FAILED: %s" % e)
        if topo is not None:
            topo.dump()
        if engine.log_path:
            log("--- dockerd log ---\n" + tail(engine.log_path))
        print("0 passed, 1 failed", flush=True)
        return 1
    finally:
        if topo is not None and os.environ.get("TANDEM_DOCKER_KEEP") != "1":
            start = time.time()
            topo.dc("down", "-v", "--remove-orphans", "-t", "5", check=False)
            timed("docker-compose down", start)
        shutil.rmtree(work, ignore_errors=True)
        engine.stop()
        for what, secs in timings:
            log("timing %-55s %7.1f s" % (what, secs))


def kill_mid_round(topo, victim):
    """SIGKILLs `victim` in an open round once it holds reports of it
    (stored: pending or accepted), preferably while clients are still
    uploading (the coordinator's uploads_done below assigned_clients; the
    last attempt takes any moment before the release), restarts it and
    checks that it still holds them. Returns (aggregation round, reports
    held at the kill)."""
    port = METRICS[victim]
    attempts = 4  # rounds 2..5 of the compose file's 5
    for attempt in range(attempts):
        strict = attempt < attempts - 1
        st = wait_for("a collecting round", 120,
                      lambda: (lambda s: s if s and s.get("phase") == "collecting" else None)(
                          topo.status()), 0.5)
        rnd, task = int(st.get("aggregationRound", 0)), st.get("taskId", "")
        released = len(history(st))

        def held_now():
            c = http_get("http://127.0.0.1:9100/metrics", timeout=1)
            if (sample(c, "tandem_coordinator_aggregation_round", {}) not in (None, rnd) or
                    (sample(c, "tandem_coordinator_completed_rounds", {}) or 0) > released):
                return ("missed", None, None)  # the round closed: try the next one
            page = http_get("http://127.0.0.1:%d/metrics" % port, timeout=1)
            if sample(page, "tandem_aggregator_open_round", {"task": task}) != rnd:
                return None
            n = sum(sample(page, "tandem_aggregator_reports", {"task": task, "state": s}) or 0
                    for s in ("pending", "accepted"))
            if n < 1:
                return None
            if strict:
                done = sample(c, "tandem_coordinator_uploads_done", {})
                assigned = sample(c, "tandem_coordinator_assigned_clients", {})
                if done is None or assigned is None or done >= assigned:
                    return None
                return (int(n), int(done), int(assigned))
            return (int(n), None, None)
        before, done, assigned = wait_for(
            "%s to hold reports of round %d%s" % (victim, rnd, " while clients upload"
                                                  if strict else ""), 180, held_now, 0.1)
        if before == "missed":
            log("round %d closed before a kill %s; trying the next one" %
                (rnd, "during its uploads" if strict else "in it"))
            continue
        cid = topo.container(victim)
        run([topo.e.docker, "kill", "-s", "KILL", cid])
        killed = time.time()
        st = topo.status()
        if st is None or len(history(st)) != released:
            log("round %d was released before the kill landed; trying the next one" % rnd)
            run([topo.e.docker, "start", cid])
            continue
        log("SIGKILLed %s (%s) in aggregation round %d holding %d of its reports%s" %
            (victim, cid[:12], rnd, before, " (%d of %d clients had reported their upload)" %
             (done, assigned) if strict else ""))
        run([topo.e.docker, "start", cid])

        def after():
            page = http_get("http://127.0.0.1:%d/metrics" % port)
            if not page:
                return None
            n = [sample(page, "tandem_aggregator_reports", {"task": task, "state": s})
                 for s in ("pending", "accepted")]
            return None if None in n else (int(n[0] + n[1]),)
        kept = wait_for("%s back after the restart" % victim, 90, after, 0.5)[0]
        timed("%s SIGKILL to serving again" % victim, killed)
        log("%s restarted holding %d reports of round %d" % (victim, kept, rnd))
        if kept < before:
            raise Failure("%s lost reports across the restart: %d before, %d after" %
                          (victim, before, kept))
        return rnd, before
    raise Failure("no round stayed open long enough to kill %s in it" % victim)


if __name__ == "__main__":
    sys.exit(main())

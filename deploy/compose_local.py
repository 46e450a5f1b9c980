#!/usr/bin/python3
"""Runs the docker-compose topology (deploy/docker-compose.yml) as local
processes, without Docker: each service's command runs from the build tree
(its entrypoint, e.g. tandem-replica, is not used). Its loopback ports (host
networking) are shifted by --port-offset (so that runs and tests do not
collide; service host names become 127.0.0.1 too), /metrics ports become 0,
mounted config files are copied with the same rewriting, and
volumes become folders under a temporary directory. Mounts from ./certs
(the TLS material of deploy/make-certs.sh --one-host: everything here is on
one host, and clients verify the coordinator's 127.0.0.1) come from a fresh
run of that script in the temporary directory, or from --certs DIR (made
there when missing). The last service runs in the foreground (extra
arguments after `--` are appended to it), as `deploy.replicas` copies when
set (each with its own --client_id and --shard, as distinct host names would
give, and its own TANDEM_REPLICA_INDEX, the line of tokens.txt it redeems,
as the compose file's tandem-replica entry point claims one); the other
services are stopped when it exits. Exit code: the foreground's (the worst
replica's).

  deploy/compose_local.py --build build -- --rounds=2
  deploy/compose_local.py --services helper,leader,coordinator,client
"""
import argparse
import os
import threading
import re
import shutil
import signal
import subprocess
import sys
import tempfile
import time

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
CERTS = "./certs/"  # compose mount sources made by deploy/make-certs.sh
BINARIES = {  # compose command -> path in the build tree
    "tandem-aggregator": "aggregator/service/tandem-aggregator",
    "tandem-sim": "server/sim/tandem-sim",
    "tandem-worker": "ml/worker/tandem-worker",
    "tandem-train": "ml/tandem-train",
    "tandem-coordinator": "server/tandem-coordinator",
    "tandem-client": "client/tandem-client",
    "tandem-admin": "server/tandem-admin",  # the one-shot `tasks` (run it last)
}


def rewrite(text, services, offset, mounts):
    """Maps compose addresses and container paths onto this machine. The
    compose file uses host networking (127.0.0.1 ports); service names and
    0.0.0.0 are mapped too. /metrics listeners get port 0 (any free port):
    nothing here scrapes them."""
    text = re.sub(r'(metrics_listen_address:\s*"[^":]*):\d+"', r'\1:0"', text)
    text = re.sub(r"(--metrics_listen=[^:\s]*):\d+", r"\1:0", text)
    text = re.sub(r"--metrics_port=\d+", "--metrics_port=0", text)

    def port(m):
        return "%s:%d" % (m.group(1), int(m.group(2)) + offset)
    names = "|".join(re.escape(s) for s in services)
    text = re.sub(r"\b(%s|0\.0\.0\.0|127\.0\.0\.1):([1-9]\d*)\b" % names, port, text)
    text = re.sub(r"\b(?:%s|0\.0\.0\.0):" % names, "127.0.0.1:", text)
    for container, local in sorted(mounts.items(), key=lambda kv: -len(kv[0])):
        text = text.replace(container, local)
    return text


def wait_for_port_line(proc, log, timeout=30):
    """Waits for "listening on PORT" (aggregators print their "collector on"
    and "peer on" lines before it), then copies the rest of stdout to `log`
    so that the pipe never fills."""
    deadline = time.time() + timeout
    while time.time() < deadline:
        line = proc.stdout.readline()
        if not line:
            break
        log.write(line)
        log.flush()
        if line.startswith("listening on"):
            def drain():
                for rest in proc.stdout:
                    log.write(rest)
                log.flush()
            threading.Thread(target=drain, daemon=True).start()
            return True
    return False


def make_certs(certs_dir):
    """Runs deploy/make-certs.sh --one-host (idempotent) into certs_dir."""
    r = subprocess.run([os.path.join(HERE, "make-certs.sh"), "--one-host", certs_dir],
                       stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
    if r.returncode != 0:
        sys.exit("compose-local: make-certs.sh failed:\n" + r.stdout)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default="build", help="CMake build directory")
    ap.add_argument("--compose", default=os.path.join(HERE, "docker-compose.yml"))
    ap.add_argument("--port-offset", type=int, default=20000)
    ap.add_argument("--certs", default="",
                    help="TLS material for the ./certs mounts (default: made afresh)")
    ap.add_argument("--services", default="helper,leader,sim",
                    help="services to run, in start order (the last runs in the foreground)")
    ap.add_argument("--extra", action="append", default=[], metavar="SERVICE=ARG",
                    help="append ARG to SERVICE's command (repeatable; later flags win)")
    ap.add_argument("sim_args", nargs="*", help="extra arguments for the foreground service")
    args = ap.parse_args()

    with open(args.compose) as f:
        compose = yaml.safe_load(f)
    services = compose["services"]
    work = tempfile.mkdtemp(prefix="tandem-compose-")
    started = []
    try:
        certs_dir = os.path.abspath(args.certs or os.path.join(work, "certs"))
        make_certs(certs_dir)
        order = args.services.split(",")
        for i, name in enumerate(order):
            svc = services[name]
            mounts = {}
            for vol in svc.get("volumes", []):
                src, dst = vol.split(":")[0], vol.split(":")[1]
                if src.startswith(CERTS):  # certificates and keys, used as they are
                    mounts[dst] = os.path.join(certs_dir, src[len(CERTS):])
                    # The folder they are mounted in (e.g. tandem-sim's
                    # --certs_dir) is the certificates folder here.
                    if os.path.basename(dst) == os.path.basename(src):
                        mounts.setdefault(os.path.dirname(dst), certs_dir)
                    continue
                if src.startswith("."):  # a file or folder of the repository
                    local = os.path.normpath(os.path.join(os.path.dirname(args.compose), src))
                    if os.path.isfile(local):
                        copy = os.path.join(work, name + "-" + os.path.basename(local))
                        mounts[dst] = copy  # written below, after rewriting
                        continue
                    mounts[dst] = local
                else:  # a named volume
                    mounts[dst] = os.path.join(work, name, src)
                    os.makedirs(mounts[dst], exist_ok=True)
            for vol in svc.get("volumes", []):
                src, dst = vol.split(":")[0], vol.split(":")[1]
                local = os.path.normpath(os.path.join(os.path.dirname(args.compose), src))
                if src.startswith(".") and not src.startswith(CERTS) and os.path.isfile(local):
                    with open(local) as f:
                        text = rewrite(f.read(), services, args.port_offset, mounts)
                    with open(mounts[dst], "w") as f:
                        f.write(text)
            command = [rewrite(c, services, args.port_offset, mounts) for c in svc["command"]]
            binary = os.path.join(args.build, BINARIES[command[0]])
            command = [binary] + command[1:]
            command += [e.split("=", 1)[1] for e in args.extra if e.split("=", 1)[0] == name]
            if i == len(order) - 1:
                replicas = svc.get("deploy", {}).get("replicas", 1)
                print("compose-local: running", name, "x%d" % replicas, flush=True)
                if replicas == 1:
                    return subprocess.call(command + args.sim_args,
                                           env=dict(os.environ, TANDEM_REPLICA_INDEX="0"))
                procs = []
                for r in range(replicas):
                    extra = ["--client_id=%s-%d" % (name, r), "--shard=%d" % r]
                    # One state folder per replica (a volume per container).
                    cmd = [c.replace("/var/lib/tandem/client",
                                     os.path.join(work, "%s-%d" % (name, r)))
                           for c in command]
                    log = open(os.path.join(work, "%s-%d.log" % (name, r)), "w")
                    # The replica's index (tandem-replica claims one in the
                    # compose file): its line of tokens.txt.
                    env = dict(os.environ, TANDEM_REPLICA_INDEX=str(r))
                    procs.append((subprocess.Popen(cmd + extra + args.sim_args, env=env,
                                                   stdout=log, stderr=log), log.name))
                worst = 0
                for p, log_name in procs:
                    rc = p.wait()
                    if rc != 0:
                        with open(log_name) as f:
                            print("compose-local: %s exited %d:\n%s" % (
                                os.path.basename(log_name), rc, f.read()[-2000:]),
                                file=sys.stderr)
                        worst = max(worst, rc if rc > 0 else 128 - rc)  # -N: signal N
                return worst
            log = open(os.path.join(work, name + ".log"), "w")
            proc = subprocess.Popen(command, stdout=subprocess.PIPE, stderr=log, text=True)
            started.append(proc)
            if not wait_for_port_line(proc, log):
                log.close()
                with open(log.name) as f:
                    tail = f.read()[-4000:]
                print("compose-local: %s did not start (log %s):\n%s" % (name, log.name, tail),
                      file=sys.stderr)
                return 1
            print("compose-local: started", name, flush=True)
    finally:
        for proc in reversed(started):
            proc.send_signal(signal.SIGTERM)
        for proc in started:
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        shutil.rmtree(work, ignore_errors=True)


if __name__ == "__main__":
    sys.exit(main())

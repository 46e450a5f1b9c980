#!/usr/bin/python3
"""Deploy files cannot go stale: docker-compose.yml and deploy/k8s/*.yaml
parse, name binaries the build produces, mount files that exist, wire the
leader to the helper's address, keep leader and helper in separate k8s
namespaces, point coordinator and clients at services that exist, pass only
flags the binaries define (`--helpfull` of the built binary), and every
aggregator config they carry passes `tandem-aggregator --check_config`.
  deploy_files_test.py SOURCE_DIR AGGREGATOR_BINARY BUILD_DIR
Prints 'N passed, M failed'."""
import glob
import os
import re
import subprocess
import sys
import tempfile

import yaml

SRC, AGG, BUILD = sys.argv[1], sys.argv[2], sys.argv[3]
BUILT = {"tandem-coordinator": "server/tandem-coordinator",
         "tandem-client": "client/tandem-client",
         "tandem-aggregator": "aggregator/service/tandem-aggregator",
         "tandem-worker": "ml/worker/tandem-worker",
         "tandem-sim": "tests/sim/tandem-sim"}
_flags = {}
passed, failed = 0, 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)


def built_binaries():
    names = set()
    for path in glob.glob(os.path.join(SRC, "**", "CMakeLists.txt"), recursive=True):
        if "/build" in path[len(SRC):]:
            continue
        with open(path) as f:
            names.update(re.findall(r"add_executable\((tandem-[a-z-]+)", f.read()))
    return names


def check_config_text(text, what):
    with tempfile.NamedTemporaryFile("w", suffix=".textproto", delete=False) as f:
        f.write(text)
    r = subprocess.run([AGG, "--config=" + f.name, "--check_config"], capture_output=True, text=True)
    os.unlink(f.name)
    check(r.returncode == 0 and "config ok" in r.stdout, "%s: %s" % (what, r.stdout.strip()))


def defined_flags(binary):
    """The flags a built binary declares (absl --helpfull)."""
    if binary not in _flags:
        out = subprocess.run([os.path.join(BUILD, BUILT[binary]), "--helpfull"],
                             capture_output=True, text=True)
        _flags[binary] = set(re.findall(r"^\s+--([a-z_0-9]+)", out.stdout + out.stderr, re.M))
    return _flags[binary]


def check_flags(command, what):
    if command[0] not in BUILT:
        return
    known = defined_flags(command[0])
    for arg in command[1:]:
        m = re.match(r"--([a-z_0-9]+)", arg)
        check(m is not None and m.group(1) in known, "%s: %s is a flag of %s" % (what, arg, command[0]))


binaries = built_binaries()
check({"tandem-aggregator", "tandem-sim", "tandem-worker"} <= binaries, "binaries found in CMake")

# docker-compose.yml
compose_path = os.path.join(SRC, "deploy", "docker-compose.yml")
with open(compose_path) as f:
    compose = yaml.safe_load(f)
services = compose["services"]
check({"leader", "helper", "sim"} <= set(services), "compose services")
listen = {}
for name, svc in services.items():
    check(svc["command"][0] in binaries, "compose %s runs a built binary" % name)
    check_flags(svc["command"], "compose " + name)
    for vol in svc.get("volumes", []):
        src = vol.split(":")[0]
        if src.startswith("."):
            local = os.path.normpath(os.path.join(SRC, "deploy", src))
            if vol.split(":")[1].endswith(".textproto"):
                check(os.path.isfile(local), "compose %s mounts %s" % (name, src))
                with open(local) as f:
                    text = f.read()
                check_config_text(text, "compose " + src)
                m = re.search(r'listen_address: "[^:]+:(\d+)"', text)
                if m:
                    listen[name] = m.group(1)
                peer = re.search(r'peer \{ address: "([^"]+)"', text)
                if peer:
                    compose_peer = peer.group(1)
        elif not src.startswith("/"):
            check(src in compose.get("volumes", {}), "compose volume %s declared" % src)
check(compose_peer == "helper:" + listen.get("helper", "?"), "leader's peer is the helper service")
sim_cmd = " ".join(services["sim"]["command"])
check("--leader=leader:" + listen["leader"] in sim_cmd and
      "--helper=helper:" + listen["helper"] in sim_cmd, "sim talks to both aggregators")

coord_cmd = " ".join(services["coordinator"]["command"])
check("--leader=leader:" + listen["leader"] in coord_cmd and
      "--helper=helper:" + listen["helper"] in coord_cmd, "coordinator talks to both aggregators")
coord_port = re.search(r"--listen=0\.0\.0\.0:(\d+)", coord_cmd).group(1)
check("--coordinator=coordinator:" + coord_port in services["client"]["command"],
      "clients talk to the coordinator")
check(services["client"].get("deploy", {}).get("replicas", 1) > 1, "client replicas")

# k8s
namespaces, services_k8s, peers, targets = {}, {}, [], []
for path in sorted(glob.glob(os.path.join(SRC, "deploy", "k8s", "*.yaml"))):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    check(len(docs) > 0, path + " has documents")
    for d in docs:
        kind = d.get("kind")
        check(bool(d.get("apiVersion")) and bool(kind) and d.get("metadata", {}).get("name"),
              "%s: apiVersion/kind/name" % path)
        if kind == "Namespace":
            continue
        ns = d["metadata"].get("namespace")
        check(bool(ns), "%s %s has a namespace" % (kind, d["metadata"]["name"]))
        if kind == "ConfigMap":
            for key, text in d.get("data", {}).items():
                if key.endswith(".textproto"):
                    check_config_text(text, "k8s %s/%s" % (ns, key))
                    role = re.search(r'role: "(\w+)"', text).group(1)
                    namespaces[role] = ns
                    peer = re.search(r'peer \{ address: "([^"]+)"', text)
                    if peer:
                        peers.append(peer.group(1))
        if kind == "Service":
            port = d["spec"]["ports"][0]["port"]
            services_k8s["%s.%s.svc:%d" % (d["metadata"]["name"], ns, port)] = True
        if kind in ("StatefulSet", "Deployment", "Job"):
            for c in d["spec"]["template"]["spec"]["containers"]:
                check(c["command"][0] in binaries, "k8s %s runs a built binary" % c["name"])
                check_flags(c["command"], "k8s " + c["name"])
                for arg in c["command"]:
                    m = re.match(r"--(?:leader|helper|coordinator)=(.+)", arg)
                    if m:
                        targets.append(m.group(1))
check(namespaces.get("leader") and namespaces.get("helper") and
      namespaces["leader"] != namespaces["helper"], "leader and helper in separate namespaces")
check(all(p in services_k8s for p in peers) and peers, "leader's peer is the helper Service")
check(all(t in services_k8s for t in targets) and len(targets) >= 3,
      "coordinator and clients reach existing Services: %s" % targets)

# The image holds every binary the compose and k8s files run.
with open(os.path.join(SRC, "deploy", "Dockerfile")) as f:
    dockerfile = f.read()
image_bins = set(re.findall(r"/(tandem-[a-z-]+)\b", " ".join(
    l for l in dockerfile.splitlines() if l.startswith("COPY --from=build"))))
used = {svc["command"][0] for svc in services.values()}
for path in glob.glob(os.path.join(SRC, "deploy", "k8s", "*.yaml")):
    with open(path) as f:
        for d in yaml.safe_load_all(f):
            if d and d.get("kind") in ("StatefulSet", "Deployment", "Job"):
                used.update(c["command"][0] for c in d["spec"]["template"]["spec"]["containers"])
check(used <= image_bins, "the image copies every binary the deploy files run: missing %s"
      % sorted(used - image_bins))

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)

#!/usr/bin/python3
"""Deploy files cannot go stale: docker-compose.yml and deploy/k8s/*.yaml
parse, name binaries the build produces, mount files that exist, wire the
leader to the helper's peer listener, keep leader and helper in separate k8s
namespaces, point coordinator and clients at services that exist, pass only
flags the binaries define (`--helpfull` of the built binary), and every
aggregator config they carry passes `tandem-aggregator --check_config`.
Compose (issue 19): every service on network_mode: host, every listener on
its own loopback port, Prometheus scraping every daemon's /metrics, and the
image (deploy/docker-images.sh) holding every binary the files run.
Trust boundaries (issue 17): every aggregator serves TLS with a coordinator
key, identities and distinct upload/collector(/peer) listeners; the
coordinator (and the sim playing it) calls the collector listeners with its
certificate, pins the aggregators and signs tickets; clients pin both
aggregators; deploy/make-certs.sh, run in a temporary directory, makes every
file the deploy files reference, the identities they name, bundles that
verify exactly the parties each listener expects, and CAs that cannot issue
another party's name.
Replicas (issue 24): the replicated k8s files run each aggregator as a
Deployment whose replicas pass --replica_id from the pod name and a
postgres_conninfo without a password, next to a PostgreSQL
StatefulSet in the same namespace that only that aggregator's pods reach;
the leader's and the helper's databases and Secrets are in different
namespaces; the compose file's PostgreSQL and replicas are in a non-default
profile, so the default topology is unchanged.
Client identity and the worker (issue 34): make-certs.sh issues no
localhost / 127.0.0.1 (its CAs cannot either) unless --one-host, which the
one-host runs (compose) need and which makes every party carry both; the
worker's certificate (worker.tandem) chains to the coordinator operator's CA
and worker-roots.pem holds that CA alone; no CA can issue another party's
name as a DNS, URI or e-mail SAN. The k8s worker runs with mutual TLS,
--callers and --model_writers naming the coordinator, which calls it with
--worker_name and --worker_ca; NetworkPolicies admit each listener only
from whom must reach it (clients: uploads and check-ins; the coordinator:
collectors and the worker; the leader: the helper's peer; an aggregator's
own pods: its database), and each namespace denies the rest. No database
password is on any command line or in an environment variable: the
replicas' conninfo says sslmode=verify-full with the operator's CA and
passfile (a 0600 copy of the Secret's pgpass), the database serves the
certificate make-certs.sh issued for its Service name and reads its password
from a file. Compose devices enroll: the coordinator trusts enroll.pub, each
client replica redeems its own line of tokens.txt (tandem-replica's index).
Tasks through the task API (issue 33): the compose and k8s coordinators
serve an admin listener with --admin_identities; the compose `tasks`
service and the k8s Job run `tandem-admin task create` against it (through
an entry point the image holds) with make-certs.sh's operator.pem, whose
identity is admitted, which the coordinator's roots verify and which no
other operator's CA can issue, and a document of deploy/tasks (mounted
read-only; in k8s a ConfigMap the README makes from it) whose task both
aggregators' configs provision in the document's population; the k8s
admin port admits that Job's pods only; the clients name the coordinator's
command-line task.
  deploy_files_test.py SOURCE_DIR AGGREGATOR_BINARY BUILD_DIR
Prints 'N passed, M failed'."""
import atexit
import glob
import os
import re
import shutil
import subprocess
import sys
import tempfile

import yaml

SRC, AGG, BUILD = sys.argv[1], sys.argv[2], sys.argv[3]
BUILT = {"tandem-coordinator": "server/tandem-coordinator",
         "tandem-client": "client/tandem-client",
         "tandem-aggregator": "aggregator/service/tandem-aggregator",
         "tandem-worker": "ml/worker/tandem-worker",
         "tandem-sim": "server/sim/tandem-sim",
         "tandem-admin": "server/tandem-admin"}
TLS_DIR = "/etc/tandem/tls/"  # where compose and k8s put the make-certs.sh files
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


def defined_flags(binary):
    """The flags a built binary declares (absl --helpfull)."""
    if binary not in _flags:
        path = os.path.join(BUILD, BUILT[binary])
        built = os.access(path, os.X_OK)
        check(built, "%s is built (%s): its flags are checked" % (binary, path))
        text = ""
        if built:
            out = subprocess.run([path, "--helpfull"], capture_output=True, text=True)
            text = out.stdout + out.stderr
        _flags[binary] = set(re.findall(r"^\s+--([a-z_0-9]+)", text, re.M))
    return _flags[binary]


def check_flags(command, what):
    if command[0] not in BUILT:
        return
    known = defined_flags(command[0])
    args = list(command[1:])
    while args and command[0] == "tandem-admin" and not args[0].startswith("-"):
        args.pop(0)  # its subcommand (task create)
    for arg in args:
        m = re.match(r"--([a-z_0-9]+)", arg)
        check(m is not None and m.group(1) in known, "%s: %s is a flag of %s" % (what, arg, command[0]))


def flags_of(command):
    """--name=value (or a bare --name: "true") of a command, by name."""
    out = {}
    for arg in command[1:]:
        m = re.match(r"--([a-z_0-9]+)(?:=(.*))?$", arg)
        if m:
            out[m.group(1)] = m.group(2) if m.group(2) is not None else "true"
    return out


# --- AggregatorConfig textprotos (the subset the deploy files use) ----------

def _strip(text):
    return "\n".join(line.split("#", 1)[0] for line in text.splitlines())


def _block(text, name):
    m = re.search(r"(?:^|\s)%s\s*\{([^}]*)\}" % name, text)
    return m.group(1) if m else ""


def _values(text, name):
    return re.findall(r"(?:^|[\s{])%s:\s*(\"[^\"]*\"|[^\s}]+)" % name, text)


def _one(text, name):
    v = _values(text, name)
    return v[0].strip('"') if v else ""


def _top_level(text):
    """text without its { } blocks (nested ones included)."""
    prev = None
    while prev != text:
        prev, text = text, re.sub(r"\w+\s*\{[^{}]*\}", "", text)
    return text


def _bodies(text, name):
    """The bodies of every `name { ... }` block, nested braces kept."""
    out = []
    for m in re.finditer(r"(?:^|\s)%s\s*\{" % name, text):
        depth, i = 1, m.end()
        while i < len(text) and depth:
            depth += {"{": 1, "}": -1}.get(text[i], 0)
            i += 1
        out.append(text[m.end():i - 1])
    return out


def task_populations(text, command):
    """task id -> population an aggregator provisions (task_policies, then
    --task=ID[@POPULATION]; no population = one of its own, named like the
    task, as proto/config.proto says)."""
    out = {}
    for body in _bodies(_strip(text), "task_policies"):
        flat = _top_level(body)
        task = _one(flat, "task_id")
        out[task] = _one(flat, "population") or task
    for v in flags_of(command).get("task", "").split(","):
        if v:
            task, _, population = v.partition("@")
            out[task] = population or task
    return out


def spec_fields(path):
    """(task_id, population) of a TaskSpec textproto (top-level fields; no
    population = one named like the task)."""
    with open(path) as f:
        top = _top_level(_strip(f.read()))
    task = _one(top, "task_id")
    return task, _one(top, "population") or task


def aggregator_settings(text, command):
    """What an aggregator runs with: its config, then its flags over it (as
    aggregator_main.cc applies them)."""
    t = _strip(text)
    top = re.sub(r"\w+\s*\{[^}]*\}", "", t)  # top-level fields only
    tls, peer, policy = _block(t, "tls"), _block(t, "peer"), _block(t, "default_policy")
    s = {"role": _one(top, "role"), "listen": _one(top, "listen_address"),
         "collector_listen": _one(top, "collector_listen_address"),
         "peer_listen": _one(top, "peer_listen_address"),
         "coordinator_identities": [v.strip('"') for v in _values(top, "coordinator_identities")],
         "leader_identities": [v.strip('"') for v in _values(top, "leader_identities")],
         "coordinator_key": _one(top, "coordinator_public_key_path"),
         "unticketed": _one(top, "allow_unticketed_uploads") == "true",
         "plaintext": _one(tls, "insecure_plaintext") == "true",
         "cert": _one(tls, "cert_chain_path"), "key": _one(tls, "private_key_path"),
         "roots": _one(tls, "root_ca_path"),
         "peer": _one(peer, "address"), "peer_name": _one(peer, "server_name"),
         "metrics": _one(top, "metrics_listen_address"),
         "tasks": re.findall(r'task_policies\s*\{[^}]*?task_id:\s*"([^"]*)"', t),
         "unprovisioned": _one(top, "allow_unprovisioned_tasks") == "true",
         "populations": task_populations(text, command),
         "policy": {k: _one(policy, k) for k in ("min_noise_multiplier", "min_batch_size",
                                                 "epsilon_budget", "sampling_rate",
                                                 "require_norm_proofs")}}
    f = flags_of(command)
    for flag, key in (("role", "role"), ("listen", "listen"), ("peer", "peer"),
                      ("collector_listen", "collector_listen"), ("peer_listen", "peer_listen"),
                      ("coordinator_key", "coordinator_key"), ("peer_name", "peer_name"),
                      ("metrics_listen", "metrics")):
        if flag in f:
            s[key] = f[flag]
    for flag, key in (("coordinator_identity", "coordinator_identities"),
                      ("leader_identity", "leader_identities")):
        if flag in f:
            s[key] = [v for v in f[flag].split(",") if v]
    s["plaintext"] = s["plaintext"] or f.get("insecure_plaintext") == "true"
    s["unticketed"] = s["unticketed"] or f.get("allow_unticketed_uploads") == "true"
    s["unprovisioned"] = s["unprovisioned"] or f.get("allow_unprovisioned_tasks") == "true"
    if "task" in f:
        s["tasks"] += [v.split("@")[0] for v in f["task"].split(",") if v]
    return s


def port(address):
    return address.rsplit(":", 1)[-1] if ":" in address else ""


# What k8s substitutes for $(VAR) in a command, for --check_config: a pod
# name, and a placeholder connection string (--check_config does not
# connect; the real one is in a Secret).
K8S_VARS = {"fieldRef:metadata.name": "tandem-aggregator-7c9d5b6f4-x2k8q",
            "secretKeyRef": "host=placeholder"}
REPLICA_ID = re.compile(r"^[A-Za-z0-9._-]{1,63}$")  # proto/config.proto


def check_config_text(text, what, certs, flags=()):
    """--check_config, with the TLS paths pointing at make-certs.sh's files
    (a validator that loads them finds them), and the flags the service
    passes over its config (all but --config)."""
    with tempfile.NamedTemporaryFile("w", suffix=".textproto", delete=False) as f:
        f.write(text.replace(TLS_DIR, certs + "/"))
    flags = [a for a in flags if not a.startswith("--config=")]
    r = subprocess.run([AGG, "--config=" + f.name, "--check_config"] + flags,
                       capture_output=True, text=True)
    os.unlink(f.name)
    check(r.returncode == 0 and "config ok" in r.stdout,
          "%s: %s" % (what, (r.stdout + r.stderr).strip()))


def check_aggregator(s, what):
    """TLS and roles of one aggregator (issue 17)."""
    check(s["role"] in ("leader", "helper"), "%s: role %r" % (what, s["role"]))
    check(not s["plaintext"], "%s runs with TLS (no insecure_plaintext)" % what)
    check(not s["unticketed"], "%s requires upload tickets" % what)
    # Issue 33: only the tasks its operator provisioned, the coordinator's among them.
    check(not s["unprovisioned"], "%s opens rounds only for provisioned tasks" % what)
    check("default" in s["tasks"], "%s provisions the coordinator's task 'default' (has %s)"
          % (what, s["tasks"]))
    check(all(s[k].startswith(TLS_DIR) for k in ("cert", "key", "roots")),
          "%s: certificate, key and roots under %s" % (what, TLS_DIR))
    check(s["coordinator_key"].startswith(TLS_DIR), "%s has the coordinator's ticket key" % what)
    check(bool(s["coordinator_identities"]), "%s names the coordinator's identity" % what)
    ports = [port(s["listen"]), port(s["collector_listen"])]
    if s["role"] == "helper":
        ports.append(port(s["peer_listen"]))
        check(bool(s["leader_identities"]), "%s names the leader's identity" % what)
    else:
        check(bool(s["peer_name"]), "%s pins the helper's identity (peer.server_name)" % what)
    check(all(ports) and len(set(ports)) == len(ports),
          "%s: distinct upload/collector/peer ports %s" % (what, ports))
    p = s["policy"]  # the shipped files never weaken the private defaults
    check((not p["min_noise_multiplier"] or float(p["min_noise_multiplier"]) >= 1) and
          (not p["min_batch_size"] or int(p["min_batch_size"]) >= 10) and
          (not p["epsilon_budget"] or float(p["epsilon_budget"]) <= 10) and
          (not p["sampling_rate"] or float(p["sampling_rate"]) >= 1) and
          p["require_norm_proofs"] != "false",
          "%s: policy no weaker than the defaults %s" % (what, p))


def check_coordinator(f, leader, helper, addr, what):
    """A coordinator (or the sim playing it): TLS with its own certificate,
    pinned aggregators, collector listeners, a ticket key."""
    check("insecure_plaintext" not in f, "%s runs with TLS" % what)
    for k in ("tls_cert", "tls_key", "tls_ca", "ticket_key"):
        check(f.get(k, "").startswith(TLS_DIR), "%s has --%s under %s" % (what, k, TLS_DIR))
    check(f.get("leader") == addr(leader, "collector_listen"),
          "%s calls the leader's collector listener: %s" % (what, f.get("leader")))
    check(f.get("helper") == addr(helper, "collector_listen"),
          "%s calls the helper's collector listener: %s" % (what, f.get("helper")))
    check(f.get("announce_leader") == addr(leader, "listen") and
          f.get("announce_helper") == addr(helper, "listen"),
          "%s names the upload listeners to clients" % what)
    check(f.get("leader_name") in helper["leader_identities"],
          "%s pins the leader as the helper knows it" % what)
    check(f.get("helper_name") == leader["peer_name"],
          "%s pins the helper as the leader knows it" % what)


def check_client(f, coordinator, what):
    check("insecure_plaintext" not in f, "%s runs with TLS" % what)
    check(f.get("tls_ca", "").startswith(TLS_DIR), "%s has --tls_ca" % what)
    for role in ("leader", "helper"):
        name = f.get(role + "_name")
        check(bool(f.get(role)) and f.get(role) == coordinator.get("announce_" + role) and
              bool(name) and name == coordinator.get(role + "_name"),
              "%s pins the %s (address and identity) as the coordinator knows it" % (what, role))
    check(f.get("leader") != f.get("helper") and f.get("leader_name") != f.get("helper_name"),
          "%s: leader and helper differ" % what)


def tls_paths(values):
    """The paths under TLS_DIR among values (settings or --flag=value)."""
    out = set()
    for v in values:
        if isinstance(v, str):
            v = v.split("=", 1)[1] if v.startswith("--") and "=" in v else v
            if v.startswith(TLS_DIR):
                out.add(v)
    return out


def openssl(*args):
    return subprocess.run(["openssl"] + list(args), capture_output=True, text=True)


def verifies(bundle, cert, name):
    r = openssl("verify", "-CAfile", bundle, "-purpose", "any", "-verify_hostname", name, cert)
    return r.returncode == 0


def sans(cert):
    r = openssl("x509", "-in", cert, "-noout", "-ext", "subjectAltName")
    return set(re.findall(r"DNS:([^,\s]+)", r.stdout))


def san_list(cert):
    """Every SAN of a certificate, in order, as 'DNS:x' / 'IP:x' / 'URI:x'."""
    r = openssl("x509", "-in", cert, "-noout", "-ext", "subjectAltName")
    body = r.stdout.split("\n", 1)[1] if "\n" in r.stdout else ""
    return [v.strip().replace("IP Address:", "IP:") for v in body.split(",") if v.strip()]


def chains(bundle, cert):
    """The chain verifies (name constraints included), whatever its names."""
    return openssl("verify", "-CAfile", bundle, "-purpose", "any", cert).returncode == 0


def verifies_ip(bundle, cert, ip):
    r = openssl("verify", "-CAfile", bundle, "-purpose", "any", "-verify_ip", ip, cert)
    return r.returncode == 0


def name_constraints(ca):
    """(permitted, excluded) names of a CA's nameConstraints."""
    r = openssl("x509", "-in", ca, "-noout", "-ext", "nameConstraints").stdout
    m = re.search(r"Permitted:(.*?)(?:Excluded:|$)", r, re.S)
    x = re.search(r"Excluded:(.*)$", r, re.S)
    return (set(m.group(1).split()) if m else set(), set(x.group(1).split()) if x else set())


def forge(issuer_dir, issuer, san, work_dir, tag, cn=None):
    """A certificate with the SAN `san` (e.g. 'DNS:x', 'URI:x') and the CN
    `cn` (default x), issued by the `issuer` CA of `issuer_dir`; its path
    (None when openssl refuses to make it)."""
    key, csr, pem, ext = (os.path.join(work_dir, "forged-%s.%s" % (tag, e))
                          for e in ("key", "csr", "pem", "ext"))
    with open(ext, "w") as f:
        f.write("subjectAltName = %s\nextendedKeyUsage = serverAuth, clientAuth\n" % san)
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key)
    openssl("req", "-new", "-key", key, "-subj", "/CN=" + (cn or san.split(":", 1)[1]),
            "-out", csr)
    r = openssl("x509", "-req", "-in", csr, "-CA", os.path.join(issuer_dir, issuer + "-ca.pem"),
                "-CAkey", os.path.join(issuer_dir, issuer + "-ca.key"), "-set_serial", "7",
                "-days", "1", "-extfile", ext, "-out", pem)
    return pem if r.returncode == 0 else None


# --- make-certs.sh in a temporary directory ---------------------------------
work = tempfile.mkdtemp(prefix="deploy-files-test-")
atexit.register(shutil.rmtree, work, True)
CERTS = os.path.join(work, "certs")
MAKE = os.path.join(SRC, "deploy", "make-certs.sh")
r = subprocess.run([MAKE, CERTS], capture_output=True, text=True)
check(r.returncode == 0, "make-certs.sh runs: %s" % (r.stdout + r.stderr).strip()[-500:])
made = set(os.listdir(CERTS)) if os.path.isdir(CERTS) else set()
with open(os.path.join(SRC, "deploy", ".gitignore")) as f:
    check("/certs/" in f.read().split(), "deploy/certs is git-ignored")

binaries = built_binaries()
check({"tandem-aggregator", "tandem-sim", "tandem-worker", "tandem-admin"} <= binaries,
      "binaries found in CMake")
# The entry points the image holds (deploy/docker-images.sh installs them
# from deploy/docker into its bin/): a compose `entrypoint`, or a k8s
# `command` whose `args` are the command, runs one of them.
with open(os.path.join(SRC, "deploy", "docker-images.sh")) as f:
    IMAGE_ENTRY_POINTS = set(re.findall(
        r'install -m 0755 "\$here/docker/([\w-]+)" "\$work/ctx/bin/\1"', f.read()))
check({"tandem-replica", "tandem-create-task"} <= IMAGE_ENTRY_POINTS and
      all(os.access(os.path.join(SRC, "deploy", "docker", e), os.X_OK)
          for e in IMAGE_ENTRY_POINTS),
      "the image installs the executable entry points of deploy/docker: %s"
      % sorted(IMAGE_ENTRY_POINTS))


def container_command(c):
    """A k8s container's command and args, without an image entry point
    that runs them (as a compose service's `command` under its `entrypoint`)."""
    full = list(c.get("command", [])) + list(c.get("args", []))
    return full[1:] if full and full[0] in IMAGE_ENTRY_POINTS else full


TASK_CREATE = ["tandem-admin", "task", "create"]

# --- docker-compose.yml -----------------------------------------------------
compose_path = os.path.join(SRC, "deploy", "docker-compose.yml")
with open(compose_path) as f:
    compose = yaml.safe_load(f)
services = compose["services"]
check({"leader", "helper", "coordinator", "client", "sim"} <= set(services), "compose services")
aggs = {}
referenced = set()  # basenames the deploy files expect from make-certs.sh
TANDEM_SERVICES = {n for n, svc in services.items() if svc.get("image", "").startswith("tandem:")}
check(set(services) - TANDEM_SERVICES == {"prometheus", "postgres"},
      "every compose service but prometheus and postgres runs the tandem image")
# The default topology (no --profile) is the one above; the replicas and
# their database only run when asked for.
DEFAULT_SERVICES = {n for n, svc in services.items() if not svc.get("profiles")}
check(DEFAULT_SERVICES == {"helper", "leader", "coordinator", "client", "worker", "prometheus",
                           "tasks"},
      "compose default topology: %s" % sorted(DEFAULT_SERVICES))
for name, svc in services.items():
    # Host networking (issue 19): no bridge networks, distinct loopback ports.
    check(svc.get("network_mode") == "host" and "networks" not in svc and "ports" not in svc,
          "compose %s uses network_mode: host (no networks, no published ports)" % name)
    if name not in TANDEM_SERVICES:
        continue
    check(svc["command"][0] in binaries, "compose %s runs a built binary" % name)
    check_flags(svc["command"], "compose " + name)
    if svc.get("entrypoint"):
        check(len(svc["entrypoint"]) == 1 and svc["entrypoint"][0] in IMAGE_ENTRY_POINTS,
              "compose %s's entrypoint %s is one the image holds" % (name, svc["entrypoint"]))
    mounted = {}
    for vol in svc.get("volumes", []):
        src, dst = vol.split(":")[0], vol.split(":")[1]
        if src.startswith("./certs/"):
            check(os.path.basename(src) == os.path.basename(dst) and dst.startswith(TLS_DIR),
                  "compose %s mounts %s at %s%s" % (name, src, TLS_DIR, os.path.basename(src)))
            referenced.add(os.path.basename(src))
            mounted[dst] = src
        elif src.startswith("."):
            local = os.path.normpath(os.path.join(SRC, "deploy", src))
            if dst.endswith(".textproto"):
                check(os.path.isfile(local), "compose %s mounts %s" % (name, src))
                with open(local) as f:
                    text = f.read()
                check_config_text(text, "compose %s %s" % (name, src), CERTS,
                                  svc["command"][1:])
                aggs[name] = aggregator_settings(text, svc["command"])
                aggs[name]["text"] = text
        elif not src.startswith("/"):
            check(src in compose.get("volumes", {}), "compose volume %s declared" % src)
    used = tls_paths(svc["command"])
    sim_certs = (flags_of(svc["command"]).get("certs_dir", "")
                 if svc["command"][0] == "tandem-sim" else "")
    if sim_certs:  # tandem-sim reads its files from one folder
        used |= {m for m in mounted if os.path.dirname(m) == sim_certs}
    if name in aggs:
        used |= tls_paths(aggs[name].values())
    check(used <= set(mounted), "compose %s mounts every TLS file it names: missing %s"
          % (name, sorted(used - set(mounted))))
    check(set(mounted) <= used, "compose %s mounts no TLS file it does not use: %s"
          % (name, sorted(set(mounted) - used)))
for name in ("leader", "helper"):
    check(name in aggs and aggs[name]["role"] == name, "compose %s runs role %s" % (name, name))
    check_aggregator(aggs.get(name, aggregator_settings("", ["x"])), "compose " + name)
leader, helper = aggs.get("leader"), aggs.get("helper")


def compose_addr(agg, key):
    """With host networking every listener is on loopback."""
    return "127.0.0.1:%s" % port(agg[key])


check(leader["peer"] == compose_addr(helper, "peer_listen"),
      "leader's peer is the helper's peer listener: %s" % leader["peer"])
coord = flags_of(services["coordinator"]["command"])
check_coordinator(coord, leader, helper, compose_addr, "compose coordinator")
# The simulator plays the coordinator and the clients: the collector
# listeners with the coordinator's certificate, uploads to the upload
# listeners, tickets signed with the coordinator's key, all from --certs_dir.
sim = flags_of(services["sim"]["command"])
check("insecure_plaintext" not in sim, "compose sim runs with TLS")
check(sim.get("certs_dir") == TLS_DIR.rstrip("/"), "compose sim reads its TLS files from %s" % TLS_DIR)
sim_files = {os.path.basename(v.split(":")[1]) for v in services["sim"].get("volumes", [])
             if v.startswith("./certs/")}
check({"coordinator.pem", "coordinator.key", "ticket.key", "coordinator-roots.pem"} <= sim_files,
      "compose sim mounts the coordinator's certificate, key, roots and ticket key: %s"
      % sorted(sim_files))
check(sim.get("leader_collector") == compose_addr(leader, "collector_listen") and
      sim.get("helper_collector") == compose_addr(helper, "collector_listen"),
      "compose sim calls the collector listeners")
check(sim.get("leader") == compose_addr(leader, "listen") and
      sim.get("helper") == compose_addr(helper, "listen"),
      "compose sim uploads to the upload listeners")
# Issue 33: the aggregators open rounds only for provisioned tasks, so the
# simulator's task (and the coordinator's, "default" unless named) must be
# provisioned on both.
for who, task in (("sim", sim.get("task_id", "")), ("coordinator", coord.get("task_id", "default"))):
    check(bool(task) and all(task in a["tasks"] for a in (leader, helper)),
          "compose %s's task %r is provisioned on both aggregators (%s, %s)"
          % (who, task, leader["tasks"], helper["tasks"]))
coord_port = port(coord.get("listen", ""))
check(flags_of(services["client"]["command"]).get("coordinator") == "127.0.0.1:" + coord_port,
      "clients talk to the coordinator")
check_client(flags_of(services["client"]["command"]), coord, "compose client")
# Issue 34: compose devices enroll as k8s ones do. The coordinator trusts the
# operator's enroll.pub (no open enrollment); each client replica redeems the
# line of tokens.txt its index names: the variable tandem-replica exports
# (claimed in a volume every replica shares, created by the image) and
# compose_local.py sets per replica.
client_svc = services["client"]
client = flags_of(client_svc["command"])
check(coord.get("device_enrollment", "enrolled") == "enrolled" and
      coord.get("enrollment_keys", "") == TLS_DIR + "enroll.pub",
      "compose coordinator admits enrolled devices only, trusting enroll.pub: %s"
      % {k: coord.get(k) for k in ("device_enrollment", "enrollment_keys")})
line_env = client.get("enrollment_token_line_env", "")
check(client.get("enrollment_token_file") == TLS_DIR + "tokens.txt" and bool(line_env),
      "compose clients redeem a line of tokens.txt: %s"
      % {k: client.get(k) for k in ("enrollment_token_file", "enrollment_token_line_env")})
with open(os.path.join(SRC, "deploy", "docker", "tandem-replica")) as f:
    replica_script = f.read()
m = re.search(r'claims="\$\{TANDEM_REPLICA_CLAIMS:-([^}]+)\}"', replica_script)
claims_dir = m.group(1) if m else "?"
check(client_svc.get("entrypoint") == ["tandem-replica"] and
      re.search(r"export %s\b" % re.escape(line_env or "?"), replica_script) is not None,
      "compose clients run tandem-replica, which exports %s" % line_env)
claim_vols = [v.split(":")[0] for v in client_svc.get("volumes", [])
              if v.split(":")[1] == claims_dir]
check(len(claim_vols) == 1 and claim_vols[0] in compose.get("volumes", {}),
      "compose clients share a named volume at tandem-replica's claims folder %s: %s"
      % (claims_dir, claim_vols))
with open(os.path.join(SRC, "deploy", "Dockerfile")) as f:
    check(claims_dir in f.read(), "the image creates %s (a named volume on it is tandem's)"
          % claims_dir)
with open(os.path.join(SRC, "deploy", "compose_local.py")) as f:
    local_runner = f.read()
check(line_env and line_env in local_runner and '"--one-host"' in local_runner,
      "compose_local.py sets %s per replica and makes --one-host certificates" % line_env)
local_bins = set(re.findall(r'^\s*"(tandem-[a-z-]+)":', local_runner, re.M))
check({services[n]["command"][0] for n in TANDEM_SERVICES} <= local_bins,
      "compose_local.py runs every binary of the compose file: missing %s"
      % sorted({services[n]["command"][0] for n in TANDEM_SERVICES} - local_bins))

# Issue 33: tasks through the coordinator's task API. The coordinator serves
# its operators' admin listener; the one-shot `tasks` service creates a task
# of deploy/tasks there as an operator (operator.pem, checked against the
# certificates below), and both aggregators provision that task in the
# population its document names. The clients name the coordinator's
# command-line task: their data set is not the API task's.
TASKS_DIR = os.path.join(SRC, "deploy", "tasks")
task_creators = []  # (where, tandem-admin flags, coordinator flags)


def check_admin_listener(f, what):
    check(bool(f.get("admin_listen")) and
          bool([i for i in f.get("admin_identities", "").split(",") if i]) and
          f.get("admin_ca", "").startswith(TLS_DIR) and "insecure_plaintext" not in f,
          "%s serves an admin listener (mutual TLS) with --admin_identities and --admin_ca "
          "under %s: %s" % (what, TLS_DIR, {k: f.get(k) for k in ("admin_listen",
                                                                  "admin_identities",
                                                                  "admin_ca")}))


def check_task_document(path, what, aggregators):
    """A document of deploy/tasks whose task every aggregator provisions in
    its population; (task_id, population)."""
    local = os.path.realpath(path)
    check(os.path.dirname(local) == os.path.realpath(TASKS_DIR) and os.path.isfile(local),
          "%s creates a task from a document of deploy/tasks: %s" % (what, path))
    if not os.path.isfile(local):
        return None
    task, population = spec_fields(local)
    check(bool(task) and task == os.path.basename(local)[:-len(".textproto")],
          "%s: %s parses as the task %r" % (what, os.path.basename(local), task))
    for agg_what, agg in aggregators:
        check(agg["populations"].get(task) == population and not agg["unprovisioned"],
              "%s: task %r is provisioned by %s in population %r: %s"
              % (what, task, agg_what, population, agg["populations"]))
    return task, population


check_admin_listener(coord, "compose coordinator")
creators = sorted(n for n in TANDEM_SERVICES if services[n]["command"][:3] == TASK_CREATE)
check("tasks" in creators and all(n in DEFAULT_SERVICES for n in creators),
      "compose's default topology creates tasks through the task API: %s" % creators)
compose_aggs = [("compose " + n, a) for n, a in sorted(aggs.items())]
for name in creators:
    svc, what = services[name], "compose " + name
    f = flags_of(svc["command"])
    check(f.get("admin") == "127.0.0.1:" + port(coord.get("admin_listen", "")),
          "%s calls the coordinator's admin listener: %s" % (what, f.get("admin")))
    check(all(f.get(k, "").startswith(TLS_DIR) for k in ("tls_cert", "tls_key", "tls_ca")) and
          "insecure_plaintext" not in f,
          "%s calls it with a certificate, key and roots under %s" % (what, TLS_DIR))
    check(svc.get("entrypoint") == ["tandem-create-task"] and
          "coordinator" in svc.get("depends_on", []) and svc.get("restart", "no") == "no",
          "%s is one-shot, after the coordinator, through tandem-create-task (which waits)"
          % what)
    spec, local = f.get("spec", ""), None
    for vol in svc.get("volumes", []):
        src, dst = vol.split(":")[0], vol.split(":")[1]
        if src.startswith(".") and spec.startswith(dst.rstrip("/") + "/"):
            check(vol.endswith(":ro"), "%s mounts %s read-only" % (what, src))
            local = os.path.normpath(os.path.join(SRC, "deploy", src, os.path.relpath(spec, dst)))
    check(local is not None, "%s mounts its --spec %s" % (what, spec))
    check_task_document(local or "?", what, compose_aggs)
    task_creators.append(("compose", f, coord))
check(client.get("task_id") == coord.get("task_id", "default"),
      "compose clients name the coordinator's command-line task %r: %r"
      % (coord.get("task_id", "default"), client.get("task_id")))

# Every listener of the topology on its own loopback port, and Prometheus
# scraping each daemon's /metrics.
worker = flags_of(services["worker"]["command"])
listeners = {
    "leader upload": leader["listen"], "leader collector": leader["collector_listen"],
    "leader metrics": leader["metrics"], "helper upload": helper["listen"],
    "helper collector": helper["collector_listen"], "helper peer": helper["peer_listen"],
    "helper metrics": helper["metrics"], "coordinator": coord.get("listen", ""),
    "coordinator admin": coord.get("admin_listen", ""),
    "coordinator metrics": "127.0.0.1:" + coord.get("metrics_port", ""),
    "worker": worker.get("listen", ""), "worker metrics": worker.get("metrics_listen", "")}
# The replicas (profile `replicas`): leader-r1, leader-r2 over the database
# of the `postgres` service.
pg = services.get("postgres", {})
pg_env = pg.get("environment", {})
check(pg.get("image", "").startswith("tandem-postgres:"), "compose postgres runs tandem-postgres")
check(bool(pg.get("profiles")) and "replicas" in pg.get("profiles", []),
      "compose postgres is in the non-default profile replicas: %s" % pg.get("profiles"))
pg_dbs = set(str(pg_env.get("POSTGRES_DATABASES", "")).split(","))
pg_port = str(pg_env.get("POSTGRES_PORT", "5432"))
check(not pg_env.get("POSTGRES_PASSWORD"), "compose postgres holds no password (loopback trust)")
for vol in pg.get("volumes", []):
    check(vol.split(":")[0] in compose.get("volumes", {}), "compose volume %s declared" % vol)
check(any(v.split(":")[1] == "/var/lib/postgresql/data" for v in pg.get("volumes", [])),
      "compose postgres keeps its data in a volume")
listeners["postgres"] = "127.0.0.1:" + pg_port
replicas = sorted(n for n in aggs if n not in ("leader", "helper"))
check(len(replicas) >= 2, "compose runs several aggregator replicas: %s" % replicas)
replica_ids, dbs_of_role = set(), {}
for name in replicas:
    svc, a = services[name], aggs[name]
    f = flags_of(svc["command"])
    what = "compose " + name
    check_aggregator(a, what)
    check(bool(svc.get("profiles")) and "replicas" in svc.get("profiles", []),
          "%s is in the non-default profile replicas" % what)
    check("postgres" in svc.get("depends_on", []), "%s depends on postgres" % what)
    rid = f.get("replica_id", "")
    check(bool(REPLICA_ID.match(rid)) and rid not in replica_ids,
          "%s has its own valid --replica_id: %r" % (what, rid))
    replica_ids.add(rid)
    conninfo = dict(kv.split("=", 1) for kv in f.get("postgres_conninfo", "").split() if "=" in kv)
    check(conninfo.get("host") == "127.0.0.1" and conninfo.get("port", "5432") == pg_port and
          conninfo.get("dbname") in pg_dbs and "password" not in conninfo,
          "%s uses a database of compose postgres, on loopback, without a password: %s"
          % (what, conninfo))
    dbs_of_role.setdefault(a["role"], set()).add(conninfo.get("dbname"))
    check(not any(v.endswith(":/var/lib/tandem/" + a["role"]) for v in svc.get("volumes", [])),
          "%s keeps no state volume (its state is in the database)" % what)
    check(a["peer"] == compose_addr(helper, "peer_listen") or a["role"] == "helper",
          "%s's peer is the helper's peer listener" % what)
    for key in ("listen", "collector_listen", "metrics"):
        listeners["%s %s" % (name, key)] = a[key]
check(all(len(d) == 1 for d in dbs_of_role.values()),
      "compose replicas of one aggregator share one database: %s" % dbs_of_role)
check(len({d for ds in dbs_of_role.values() for d in ds}) ==
      sum(len(d) for d in dbs_of_role.values()),
      "compose leader and helper replicas never share a database: %s" % dbs_of_role)
simr = flags_of(services.get("sim-replicas", {}).get("command", ["x"]))
check(simr.get("leader") in {compose_addr(aggs[n], "listen") for n in replicas} and
      simr.get("leader_collector") in {compose_addr(aggs[n], "collector_listen")
                                       for n in replicas} and
      simr.get("helper") == compose_addr(helper, "listen") and
      simr.get("helper_collector") == compose_addr(helper, "collector_listen") and
      simr.get("certs_dir") == TLS_DIR.rstrip("/"),
      "compose sim-replicas drives the replicas and the helper: %s" % simr)
prom_flags = dict(a[2:].split("=", 1) for a in services["prometheus"]["command"]
                  if a.startswith("--") and "=" in a)
listeners["prometheus"] = prom_flags.get("web.listen-address", "")
for what, address in listeners.items():
    check(address.startswith("127.0.0.1:") and port(address).isdigit(),
          "compose %s listens on a loopback port: %r" % (what, address))
ports = [port(a) for a in listeners.values()]
check(len(set(ports)) == len(ports), "compose listeners use distinct ports: %s" % listeners)
prom_mounts = {v.split(":")[1]: v.split(":")[0] for v in services["prometheus"].get("volumes", [])}
prom_config = prom_mounts.get(prom_flags.get("config.file", ""), "")
check(prom_config.startswith("./") and os.path.isfile(os.path.join(SRC, "deploy", prom_config)),
      "compose prometheus mounts its --config.file: %s" % prom_config)
if os.path.isfile(os.path.join(SRC, "deploy", prom_config)):
    with open(os.path.join(SRC, "deploy", prom_config)) as f:
        prom = yaml.safe_load(f)
    targets = {t for job in prom.get("scrape_configs", []) for sc in job.get("static_configs", [])
               for t in sc.get("targets", [])}
    daemons = {listeners[k] for k in ("coordinator metrics", "leader metrics", "helper metrics",
                                      "worker metrics")}
    check(targets == daemons, "prometheus scrapes every daemon's /metrics: %s vs %s"
          % (sorted(targets), sorted(daemons)))
check(services["client"].get("deploy", {}).get("replicas", 1) >= 10,
      "client replicas fill a batch of the default policy (10)")
compose_parties = {"leader": leader["cert"], "helper": helper["cert"],
                   "coordinator": coord.get("tls_cert", "")}

# --- k8s --------------------------------------------------------------------
namespaces, services_k8s, peers, targets = {}, {}, [], []
k8s_aggs, k8s_coord, k8s_client, secrets_used = {}, {}, {}, {}
k8s_workers = []  # (flags, workload, container)
k8s_commands = []  # (command without entry point, workload, container)
configmaps = {}
docs_all = []
file_of = {}  # id(document) -> its file: a workload mounts its own file's ConfigMap
# The replicated variants (*-replicated.yaml) reuse the single-process
# files' names; one applies either, so each is checked on its own.
repl_aggs, repl_namespaces, db_secrets = {}, {}, {}
for path in sorted(glob.glob(os.path.join(SRC, "deploy", "k8s", "*.yaml"))):
    with open(path) as f:
        docs = [d for d in yaml.safe_load_all(f) if d]
    check(len(docs) > 0, path + " has documents")
    docs_all += docs
    for d in docs:
        file_of[id(d)] = os.path.basename(path)


def tandem_containers(pod):
    """The containers running the tandem image (not PostgreSQL)."""
    return [c for c in pod["containers"] if c.get("image", "").startswith("tandem:")]


def env_source(container, var):
    """Where a container's env var comes from: 'value', 'fieldRef:<path>',
    'secretKeyRef' (with the Secret and key) or None."""
    for e in container.get("env", []):
        if e.get("name") == var:
            if "value" in e:
                return ("value", e["value"])
            ref = e.get("valueFrom", {})
            if "fieldRef" in ref:
                return ("fieldRef:" + ref["fieldRef"].get("fieldPath", ""), None)
            if "secretKeyRef" in ref:
                return ("secretKeyRef", (ref["secretKeyRef"].get("name"),
                                         ref["secretKeyRef"].get("key")))
    return (None, None)


def k8s_expand(container, arg):
    """An argument as --check_config sees it: each $(VAR) by what k8s puts
    there (K8S_VARS: a pod name, a placeholder connection string)."""
    def sub(m):
        kind, _ = env_source(container, m.group(1))
        return K8S_VARS.get(kind, m.group(0))
    return re.sub(r"\$\(([A-Za-z_][A-Za-z0-9_]*)\)", sub, arg)


for d in docs_all:
    kind = d.get("kind")
    check(bool(d.get("apiVersion")) and bool(kind) and d.get("metadata", {}).get("name"),
          "%s: apiVersion/kind/name" % d.get("metadata", {}).get("name"))
    if kind == "Namespace":
        continue
    ns = d["metadata"].get("namespace")
    check(bool(ns), "%s %s has a namespace" % (kind, d["metadata"]["name"]))
    if kind == "ConfigMap":
        for key, text in d.get("data", {}).items():
            if key.endswith(".textproto"):
                check_config_text(text, "k8s %s/%s" % (ns, key), CERTS)
                check("postgres_conninfo" not in _strip(text),
                      "k8s %s/%s holds no postgres_conninfo (a Secret does)" % (ns, key))
                configmaps[(file_of[id(d)], ns, d["metadata"]["name"], key)] = text
    if kind == "Service":
        for p in d["spec"]["ports"]:
            services_k8s["%s.%s.svc:%d" % (d["metadata"]["name"], ns, p["port"])] = ns
for d in docs_all:
    if d.get("kind") not in ("StatefulSet", "Deployment", "Job"):
        continue
    ns = d["metadata"]["namespace"]
    pod = d["spec"]["template"]["spec"]
    volumes = {v["name"]: v for v in pod.get("volumes", [])}
    for c in tandem_containers(pod):
        what = "k8s %s/%s" % (ns, c["name"])
        cmd = container_command(c)
        k8s_commands.append((cmd, d, c))
        check(not c.get("args") or (len(c.get("command", [])) == 1 and
                                    c["command"][0] in IMAGE_ENTRY_POINTS),
              "%s: args only under an entry point the image holds: %s" % (what, c.get("command")))
        check(cmd[0] in binaries, "%s runs a built binary" % what)
        check_flags(cmd, what)
        for arg in cmd:
            m = re.match(r"--(?:leader|helper|coordinator|announce_leader|announce_helper)=(.+)",
                         arg)
            if m:
                targets.append(m.group(1))
        used = tls_paths(cmd)
        for m in c.get("volumeMounts", []):
            v = volumes.get(m["name"], {})
            if "configMap" in v and m.get("subPath"):
                text = configmaps.get((file_of[id(d)], ns, v["configMap"]["name"],
                                       m["subPath"]))
                check(text is not None, "%s mounts ConfigMap key %s of its own file"
                      % (what, m["subPath"]))
                if text is not None and cmd[0] == "tandem-aggregator":
                    s = aggregator_settings(text, cmd)
                    f = flags_of(cmd)
                    if "replica_id" in f or "postgres_conninfo" in f:
                        check_config_text(text, "k8s %s (%s) with its flags"
                                          % (file_of[id(d)], d["kind"]), CERTS,
                                          [k8s_expand(c, a) for a in cmd[1:]])
                        repl_aggs[s["role"]] = (s, d, c)
                        repl_namespaces[s["role"]] = ns
                    else:
                        k8s_aggs[s["role"]] = s
                        namespaces[s["role"]] = ns
                    if s["peer"]:
                        peers.append(s["peer"])
                    used |= tls_paths(s.values())
        for m in c.get("volumeMounts", []):
            v = volumes.get(m["name"], {})
            # A database's Secret (tandem-<role>-db, keys projected by name)
            # is checked with the replicas below.
            if "secret" in v and not v["secret"]["secretName"].endswith("-db"):
                check(m["mountPath"].rstrip("/") + "/" == TLS_DIR, "%s mounts its Secret at %s"
                      % (what, TLS_DIR))
                secrets_used.setdefault((ns, v["secret"]["secretName"]), set()).update(
                    os.path.basename(u) for u in used)
        if cmd[0] == "tandem-coordinator":
            k8s_coord = flags_of(cmd)
        if cmd[0] == "tandem-worker":
            k8s_workers.append((flags_of(cmd), d, c))
        if cmd[0] == "tandem-client":
            k8s_client = flags_of(cmd)
        if used:
            check(any("secret" in volumes.get(m["name"], {}) for m in c.get("volumeMounts", [])),
                  "%s mounts a Secret for %s" % (what, sorted(used)))
check(namespaces.get("leader") and namespaces.get("helper") and
      namespaces["leader"] != namespaces["helper"], "leader and helper in separate namespaces")
check(all(p in services_k8s for p in peers) and peers, "leader's peer is the helper Service")
check(all(t in services_k8s for t in targets) and len(targets) >= 7,
      "coordinator and clients reach existing Services: %s" % targets)
for role in ("leader", "helper"):
    check(role in k8s_aggs, "k8s runs the %s" % role)
    check_aggregator(k8s_aggs.get(role, aggregator_settings("", ["x"])), "k8s " + role)
k8s_leader = k8s_aggs.get("leader", aggregator_settings("", ["x"]))
k8s_helper = k8s_aggs.get("helper", aggregator_settings("", ["x"]))
svc_of = {role: "tandem-%s.%s.svc" % (role, namespaces.get(role, "?"))
          for role in ("leader", "helper")}


def k8s_addr(agg, key):
    return "%s:%s" % (svc_of.get(agg["role"], "?"), port(agg[key]))


check(k8s_leader["peer"] == k8s_addr(k8s_helper, "peer_listen"),
      "k8s leader's peer is the helper's peer listener")
check_coordinator(k8s_coord, k8s_leader, k8s_helper, k8s_addr, "k8s coordinator")
check_client(k8s_client, k8s_coord, "k8s client")

# --- k8s tasks through the task API (issue 33) ------------------------------
# As in compose: the coordinator's admin listener (a port of its Service),
# a Job running tandem-admin task create with the operator's Secret and a
# document from a ConfigMap the README makes from deploy/tasks, whose task
# every aggregator variant provisions in its population.
check_admin_listener(k8s_coord, "k8s coordinator")
check(k8s_client.get("task_id") == k8s_coord.get("task_id", "default"),
      "k8s clients name the coordinator's command-line task %r: %r"
      % (k8s_coord.get("task_id", "default"), k8s_client.get("task_id")))
coord_wls = [d for cmd, d, _ in k8s_commands if cmd[:1] == ["tandem-coordinator"]]
k8s_coord_ns = coord_wls[0]["metadata"]["namespace"] if coord_wls else "?"
admin_port = port(k8s_coord.get("admin_listen", ""))
admin_addr = "tandem-coordinator.%s.svc:%s" % (k8s_coord_ns, admin_port)
check(admin_addr in services_k8s, "k8s Service tandem-coordinator serves the admin port %s"
      % admin_port)
with open(os.path.join(SRC, "deploy", "k8s", "README.md")) as f:
    k8s_readme = f.read().replace("\\\n", " ")
configmaps_made = {}  # (namespace, name) -> {key: path}
for m in re.finditer(r"kubectl -n (\S+) create configmap (\S+)(.*)", k8s_readme):
    keys = {}
    for spec in re.findall(r"--from-file=(\S+)", m.group(3)):
        key, _, path = spec.rpartition("=")
        keys[key or os.path.basename(path)] = path
    configmaps_made[(m.group(1), m.group(2))] = keys
k8s_all_aggs = ([("k8s " + r, a) for r, a in sorted(k8s_aggs.items())] +
                [("k8s %s-replicated" % r, v[0]) for r, v in sorted(repl_aggs.items())])
k8s_creators = [(cmd, d, c) for cmd, d, c in k8s_commands if cmd[:3] == TASK_CREATE]
check(bool(k8s_creators) and all(d["kind"] == "Job" for _, d, _ in k8s_creators),
      "k8s creates tasks through the task API with a Job: %s"
      % [(d["kind"], d["metadata"]["name"]) for _, d, _ in k8s_creators])
task_job_apps = set()
for cmd, d, c in k8s_creators:
    ns = d["metadata"]["namespace"]
    what = "k8s %s/%s" % (ns, d["metadata"]["name"])
    f = flags_of(cmd)
    pod = d["spec"]["template"]["spec"]
    check(c.get("command") == ["tandem-create-task"] and
          pod.get("restartPolicy") in ("OnFailure", "Never"),
          "%s: a Job through tandem-create-task (which waits for the coordinator): %s"
          % (what, c.get("command")))
    check(f.get("admin") == admin_addr,
          "%s calls the coordinator's admin listener %s: %s" % (what, admin_addr, f.get("admin")))
    check(all(f.get(k, "").startswith(TLS_DIR) for k in ("tls_cert", "tls_key", "tls_ca")) and
          "insecure_plaintext" not in f,
          "%s calls it with a certificate, key and roots under %s" % (what, TLS_DIR))
    task_job_apps.add(d["spec"]["template"].get("metadata", {}).get("labels", {}).get("app"))
    spec, volumes, source = f.get("spec", ""), {v["name"]: v for v in pod.get("volumes", [])}, None
    for m in c.get("volumeMounts", []):
        v = volumes.get(m["name"], {})
        if ("configMap" in v and not m.get("subPath") and
                os.path.dirname(spec) == m["mountPath"].rstrip("/")):
            check(m.get("readOnly") is True, "%s mounts its ConfigMap read-only" % what)
            source = configmaps_made.get((ns, v["configMap"]["name"]), {}).get(
                os.path.basename(spec))
            check(source is not None and source.startswith("deploy/tasks/"),
                  "%s: the README makes ConfigMap %s/%s with %s from deploy/tasks: %s"
                  % (what, ns, v["configMap"]["name"], os.path.basename(spec), source))
    check(source is not None, "%s reads its --spec %s from a ConfigMap" % (what, spec))
    check_task_document(os.path.join(SRC, source or "?"), what, k8s_all_aggs)
    task_creators.append(("k8s", f, k8s_coord))
# The admin port admits the Job's pods by their label (NetworkPolicies
# below): no other workload of the namespace may carry it.
check(bool(task_job_apps) and None not in task_job_apps and
      not [x for x in docs_all if x.get("kind") in ("StatefulSet", "Deployment", "Job") and
           x["metadata"].get("namespace") == k8s_coord_ns and
           all(x is not d for _, d, _ in k8s_creators) and
           x["spec"]["template"].get("metadata", {}).get("labels", {}).get("app")
           in task_job_apps],
      "k8s task Jobs' pods carry a label (%s) no other workload of %s carries"
      % (sorted(a or "" for a in task_job_apps), k8s_coord_ns))

# --- k8s worker (issue 34): mutual TLS, the coordinator its only caller ------
coord_identities = set(k8s_leader["coordinator_identities"]) | set(
    k8s_helper["coordinator_identities"])
check(len(k8s_workers) == 1, "k8s runs one kind of worker: %d" % len(k8s_workers))
k8s_worker = k8s_workers[0][0] if k8s_workers else {}
worker_wl = k8s_workers[0][1] if k8s_workers else {"metadata": {}, "spec": {}}
worker_ns = worker_wl["metadata"].get("namespace", "?")
check("insecure_plaintext" not in k8s_worker and
      all(k8s_worker.get(k, "").startswith(TLS_DIR) for k in ("tls_cert", "tls_key", "tls_ca")),
      "k8s worker serves mutual TLS (--tls_cert/--tls_key/--tls_ca under %s): %s"
      % (TLS_DIR, k8s_worker))
worker_callers = [v for v in k8s_worker.get("callers", "").split(",") if v]
worker_writers = [v for v in k8s_worker.get("model_writers", "").split(",") if v]
check(bool(worker_callers) and set(worker_callers) == coord_identities,
      "k8s worker admits only the coordinator's identity %s: --callers=%s"
      % (sorted(coord_identities), worker_callers))
check(bool(worker_writers) and set(worker_writers) <= set(worker_callers),
      "k8s worker's model writers %s are among its callers" % worker_writers)
# One process holds the loaded models: a StatefulSet of one behind a headless
# Service, whose pod 0 the coordinator names.
worker_svc = [x for x in docs_all if x.get("kind") == "Service" and
              x["metadata"].get("namespace") == worker_ns and
              x["metadata"]["name"] == worker_wl["spec"].get("serviceName")]
worker_port = port(k8s_worker.get("listen", ""))
check(worker_wl.get("kind") == "StatefulSet" and worker_wl["spec"].get("replicas") == 1 and
      len(worker_svc) == 1 and worker_svc[0]["spec"].get("clusterIP") == "None" and
      [str(p["port"]) for p in worker_svc[0]["spec"]["ports"]] == [worker_port],
      "k8s worker: a StatefulSet of one behind a headless Service on its port %s" % worker_port)
worker_pod0 = "%s-0.%s.%s.svc:%s" % (worker_wl["metadata"].get("name"),
                                     worker_wl["spec"].get("serviceName"), worker_ns, worker_port)
check(k8s_coord.get("worker") == worker_pod0,
      "k8s coordinator calls the worker's pod %s: %s" % (worker_pod0, k8s_coord.get("worker")))
check(k8s_coord.get("worker_name") == "worker.tandem" and
      k8s_coord.get("worker_ca", "").startswith(TLS_DIR),
      "k8s coordinator pins the worker (--worker_name=worker.tandem, --worker_ca under %s): %s"
      % (TLS_DIR, {k: k8s_coord.get(k) for k in ("worker_name", "worker_ca")}))

# --- k8s NetworkPolicies (issue 34) ------------------------------------------
POLICIES = [x for x in docs_all if x.get("kind") == "NetworkPolicy"]
ANY = ("*", "*")


def selects(selector, labels):
    return all(labels.get(k) == v for k, v in (selector.get("matchLabels") or {}).items())


def admitted(fname, ns, labels, port_no):
    """Who the NetworkPolicies of namespaces.yaml and of `fname` (one variant
    is applied at a time) admit to a pod of `ns` with `labels` on `port_no`:
    None when no policy selects the pod (all admitted), else a set of
    (namespace, app label) with ANY for everyone."""
    out, selected = set(), False
    for pol in POLICIES:
        if (file_of[id(pol)] not in (fname, "namespaces.yaml") or
                pol["metadata"].get("namespace") != ns or
                not selects(pol["spec"].get("podSelector", {}), labels) or
                "Ingress" not in pol["spec"].get("policyTypes", ["Ingress"])):
            continue
        selected = True
        for rule in pol["spec"].get("ingress", []) or []:
            ports = [str(p.get("port")) for p in rule.get("ports", [])]
            if ports and str(port_no) not in ports:
                continue
            if not rule.get("from"):
                out.add(ANY)
                continue
            for peer in rule["from"]:
                if "ipBlock" in peer:
                    out.add(ANY)
                    continue
                nsel = peer.get("namespaceSelector")
                if nsel is None:
                    peer_ns = ns
                else:
                    peer_ns = (nsel.get("matchLabels") or {}).get(
                        "kubernetes.io/metadata.name", "*")
                psel = (peer.get("podSelector") or {}).get("matchLabels") or {}
                out.add((peer_ns, psel.get("app", "*")))
    return out if selected else None


def workload_of(fname, app):
    for x in docs_all:
        if (x.get("kind") in ("StatefulSet", "Deployment") and file_of[id(x)] == fname and
                x["spec"]["template"]["metadata"].get("labels", {}).get("app") == app):
            return x
    return None


coord_wl = workload_of("coordinator.yaml", "tandem-coordinator")
coord_ns = coord_wl["metadata"]["namespace"] if coord_wl else "?"
COORD = (coord_ns, "tandem-coordinator")
LEADER = (namespaces.get("leader", "?"), "tandem-leader")
expected_ingress = []  # (file, namespace, app, port, allowed sources, what)
for fname in ("leader.yaml", "leader-replicated.yaml"):
    expected_ingress += [
        (fname, LEADER[0], "tandem-leader", port(k8s_leader["listen"]), {ANY}, "uploads"),
        (fname, LEADER[0], "tandem-leader", port(k8s_leader["collector_listen"]), {COORD},
         "collector")]
for fname in ("helper.yaml", "helper-replicated.yaml"):
    hns = namespaces.get("helper", "?")
    expected_ingress += [
        (fname, hns, "tandem-helper", port(k8s_helper["listen"]), {ANY}, "uploads"),
        (fname, hns, "tandem-helper", port(k8s_helper["collector_listen"]), {COORD},
         "collector"),
        (fname, hns, "tandem-helper", port(k8s_helper["peer_listen"]), {LEADER}, "peer")]
for role in ("leader", "helper"):
    rns = namespaces.get(role, "?")
    expected_ingress.append(("%s-replicated.yaml" % role, rns, "tandem-%s-db" % role, "5432",
                             {(rns, "tandem-" + role)}, "database"))
expected_ingress += [
    ("coordinator.yaml", coord_ns, "tandem-coordinator", port(k8s_coord.get("listen", "")),
     {ANY}, "check-ins"),
    ("worker.yaml", worker_ns, "tandem-worker", worker_port, {COORD}, "worker"),
    ("coordinator.yaml", coord_ns, "tandem-coordinator", port(k8s_coord.get("admin_listen", "")),
     {(coord_ns, app) for app in task_job_apps}, "task API: the task Job only")]
for fname, ns, app, port_no, want, what in expected_ingress:
    got = admitted(fname, ns, {"app": app}, port_no)
    check(got == want, "k8s %s: %s/%s port %s (%s) admits exactly %s: %s"
          % (fname, ns, app, port_no, what, sorted(want), got))
# /metrics: not open to everyone; every namespace denies the rest by default.
metrics_from = admitted("coordinator.yaml", coord_ns, {"app": "tandem-coordinator"},
                        k8s_coord.get("metrics_port", ""))
check(metrics_from is not None and ANY not in metrics_from and COORD not in metrics_from,
      "k8s coordinator's /metrics is admitted from Prometheus's namespace only: %s"
      % metrics_from)
for ns in set(namespaces.values()) | {coord_ns, worker_ns}:
    check(any(file_of[id(p)] == "namespaces.yaml" and p["metadata"].get("namespace") == ns and
              p["spec"].get("podSelector") == {} and not p["spec"].get("ingress")
              for p in POLICIES),
          "namespaces.yaml denies ingress to every pod of %s by default" % ns)

# The Secrets: made by the README's kubectl commands from make-certs.sh files.
with open(os.path.join(SRC, "deploy", "k8s", "README.md")) as f:
    readme = f.read().replace("\\\n", " ")
created = {}
for line in readme.splitlines():
    m = re.search(r"kubectl -n (\S+) create secret generic (\S+)(.*)", line)
    if m:
        # --from-file=[KEY=]PATH: the file (the key, when named, is checked
        # with the databases' Secrets below).
        files = [f.rpartition("=")[2] for f in re.findall(r"--from-file=(\S+)", m.group(3))]
        created[(m.group(1), m.group(2))] = {os.path.basename(p) for p in files}
        check(all(p.startswith("deploy/certs/") for p in files),
              "secret %s from deploy/certs" % m.group(2))
        referenced |= {os.path.basename(p) for p in files}
for key, used in secrets_used.items():
    check(key in created, "README creates Secret %s/%s" % key)
    check(used == created.get(key, set()), "Secret %s/%s holds exactly %s (README: %s)"
          % (key + (sorted(used), sorted(created.get(key, set())))))
k8s_parties = {"leader": k8s_leader["cert"], "helper": k8s_helper["cert"],
               "coordinator": k8s_coord.get("tls_cert", "")}

# --- k8s replicas (issue 24): *-replicated.yaml -----------------------------
SAME = ("listen", "collector_listen", "peer_listen", "peer", "peer_name", "coordinator_identities",
        "leader_identities", "coordinator_key", "cert", "key", "roots")
db_of_role = {}
for role in ("leader", "helper"):
    check(role in repl_aggs, "k8s runs the %s as replicas (%s-replicated.yaml)" % (role, role))
    if role not in repl_aggs:
        continue
    s, d, c = repl_aggs[role]
    ns, fname = d["metadata"]["namespace"], file_of[id(d)]
    what = "k8s %s" % fname
    check_aggregator(s, what)
    # A drop-in for the single-process file: same namespace, listeners and
    # identities, so the coordinator, the clients and the peer need no change.
    check(ns == namespaces.get(role), "%s: in the %s's namespace %s" % (what, role, ns))
    single = k8s_aggs.get(role, {})
    check(all(s[k] == single.get(k) for k in SAME),
          "%s: listeners and identities as the single-process file: %s" % (
              what, {k: (s[k], single.get(k)) for k in SAME if s[k] != single.get(k)}))
    pod = d["spec"]["template"]["spec"]
    labels = d["spec"]["template"]["metadata"].get("labels", {})
    check(d["kind"] == "Deployment" and d["spec"].get("replicas", 1) >= 2,
          "%s: a Deployment with several replicas" % what)
    check(all("configMap" in v or "secret" in v or
              v.get("emptyDir", {}).get("medium") == "Memory" for v in pod.get("volumes", []))
          and "volumeClaimTemplates" not in d["spec"],
          "%s: stateless (no volume for state)" % what)
    svc_selects = [x for x in docs_all if x.get("kind") == "Service" and file_of[id(x)] == fname
                   and x["metadata"]["name"] == "tandem-" + role]
    check(len(svc_selects) == 1 and
          all(labels.get(k) == v for k, v in svc_selects[0]["spec"]["selector"].items()),
          "%s: the Service tandem-%s selects the replicas" % (what, role))
    f = flags_of(c["command"])
    m = re.match(r"^\$\((\w+)\)$", f.get("replica_id", ""))
    check(bool(m) and env_source(c, m.group(1))[0] == "fieldRef:metadata.name",
          "%s passes --replica_id from the pod name: %r" % (what, f.get("replica_id")))
    # Issue 34: the conninfo holds no password and no variable (so no
    # Secret's value lands on the command line): TLS verified against the
    # operator's CA (sslrootcert), the password from passfile.
    conninfo = f.get("postgres_conninfo", "")
    ci = dict(kv.split("=", 1) for kv in conninfo.split() if "=" in kv)
    check(bool(ci) and "password" not in ci and "$(" not in conninfo,
          "%s: --postgres_conninfo holds no password or variable: %r" % (what, conninfo))
    check(ci.get("sslmode") == "verify-full",
          "%s: conninfo sslmode=verify-full: %r" % (what, ci.get("sslmode")))
    mounts = {m["mountPath"].rstrip("/"): m for m in c.get("volumeMounts", [])}
    volumes = {v["name"]: v for v in pod.get("volumes", [])}

    def secret_file(path, container=c):
        """(Secret, key) a path of `container` projects, else None."""
        for mp, m in {x["mountPath"].rstrip("/"): x
                      for x in container.get("volumeMounts", [])}.items():
            v = volumes.get(m["name"], {}).get("secret")
            if v and os.path.dirname(path) == mp:
                items = {i["path"]: i["key"] for i in v.get("items", [])}
                key = items.get(os.path.basename(path)) if items else os.path.basename(path)
                return (v["secretName"], key) if key else None
        return None
    root = secret_file(ci.get("sslrootcert", ""))
    check(root is not None and root[0].endswith("-db") and root[1] == role + "-ca.pem",
          "%s: sslrootcert %s is the Secret's %s-ca.pem (the %s operator's CA): %s"
          % (what, ci.get("sslrootcert"), role, role, root))
    secret = root[0] if root else None
    # passfile: libpq refuses a group-readable file, and a Secret's files
    # are 0440 under fsGroup, so an init container copies the Secret's
    # pgpass with mode 0600 into a memory volume the aggregator mounts.
    pf = ci.get("passfile", "")
    pf_mount = mounts.get(os.path.dirname(pf), {})
    pf_volume = volumes.get(pf_mount.get("name"), {})
    copies = []
    for ic in pod.get("initContainers", []):
        cmd = ic.get("command", [])
        if cmd[:3] == ["install", "-m", "0600"] and len(cmd) == 5 and cmd[4] == pf:
            ic_mounts = {m["mountPath"].rstrip("/"): m["name"] for m in ic.get("volumeMounts", [])}
            copies.append((secret_file(cmd[3], ic),
                           ic_mounts.get(os.path.dirname(pf)) == pf_mount.get("name")))
    check(pf_volume.get("emptyDir", {}).get("medium") == "Memory" and
          copies == [((secret, "pgpass"), True)],
          "%s: passfile %s is a 0600 copy of the Secret's pgpass in a memory volume: %s"
          % (what, pf, copies))
    db_secrets[role] = (ns, secret, ci)
    # Its PostgreSQL: a StatefulSet in the same namespace, with a volume, a
    # pg_isready probe and the password from the same Secret; a headless
    # Service; a NetworkPolicy letting only this aggregator's pods in.
    dbs = [x for x in docs_all if x.get("kind") == "StatefulSet" and file_of[id(x)] == fname and
           any(k.get("image", "").startswith("tandem-postgres:")
               for k in x["spec"]["template"]["spec"]["containers"])]
    check(len(dbs) == 1, "%s has a PostgreSQL StatefulSet" % what)
    if len(dbs) != 1:
        continue
    db = dbs[0]
    check(db["metadata"]["namespace"] == ns,
          "%s: the PostgreSQL StatefulSet is in the aggregator's namespace %s" % (what, ns))
    check(bool(db["spec"].get("volumeClaimTemplates")), "%s: PostgreSQL on a PVC" % what)
    pgc = [k for k in db["spec"]["template"]["spec"]["containers"]
           if k.get("image", "").startswith("tandem-postgres:")][0]
    check("pg_isready" in " ".join(pgc.get("readinessProbe", {}).get("exec", {})
                                   .get("command", [])),
          "%s: PostgreSQL readiness probe with pg_isready" % what)
    db_env = {e["name"]: e.get("value") for e in pgc.get("env", [])}
    db_volumes = {v["name"]: v for v in db["spec"]["template"]["spec"].get("volumes", [])}

    def db_secret_file(path):
        for m in pgc.get("volumeMounts", []):
            v = db_volumes.get(m["name"], {}).get("secret")
            if v and os.path.dirname(path) == m["mountPath"].rstrip("/"):
                items = {i["path"]: i["key"] for i in v.get("items", [])}
                key = items.get(os.path.basename(path)) if items else os.path.basename(path)
                return (v["secretName"], key) if key else None
        return None
    check(env_source(pgc, "POSTGRES_PASSWORD") == (None, None) and
          db_secret_file(db_env.get("POSTGRES_PASSWORD_FILE") or "") == (secret, "password"),
          "%s: PostgreSQL reads its password from the Secret %s's file (no env var): %s"
          % (what, secret, db_env.get("POSTGRES_PASSWORD_FILE")))
    check(db_secret_file(db_env.get("POSTGRES_TLS_CERT") or "") == (secret, role + "-db.pem") and
          db_secret_file(db_env.get("POSTGRES_TLS_KEY") or "") == (secret, role + "-db.key"),
          "%s: PostgreSQL serves %s-db.pem/.key from the Secret %s" % (what, role, secret))
    check(ci.get("host") == "%s.%s.svc" % (db["spec"].get("serviceName"), ns) and
          ci.get("dbname") == db_env.get("POSTGRES_DATABASES") and
          ci.get("user") == db_env.get("POSTGRES_USER"),
          "%s: the conninfo names its own server, database and login: %s" % (what, ci))
    # make-certs.sh's server certificate carries that name, under that CA.
    check(verifies(os.path.join(CERTS, role + "-ca.pem"), os.path.join(CERTS, role + "-db.pem"),
                   ci.get("host", "?")),
          "%s-db.pem verifies as %s under %s-ca.pem" % (role, ci.get("host"), role))
    db_of_role[role] = (ns, db_env.get("POSTGRES_DATABASES"))
    db_labels = db["spec"]["template"]["metadata"].get("labels", {})
    check(not all(db_labels.get(k) == v for k, v in labels.items()),
          "%s: the aggregator's Service does not select PostgreSQL" % what)
    heads = [x for x in docs_all if x.get("kind") == "Service" and file_of[id(x)] == fname and
             x["metadata"]["name"] == db["spec"].get("serviceName")]
    check(len(heads) == 1 and heads[0]["spec"].get("clusterIP") == "None" and
          heads[0]["metadata"]["namespace"] == ns and
          [p["port"] for p in heads[0]["spec"]["ports"]] == [5432],
          "%s: a headless Service %s for PostgreSQL" % (what, db["spec"].get("serviceName")))
    if len(heads) == 1:
        db_host = "%s.%s.svc" % (heads[0]["metadata"]["name"], ns)
        db_of_role[role] += (db_host,)
    pols = [x for x in docs_all if x.get("kind") == "NetworkPolicy" and file_of[id(x)] == fname
            and x["spec"]["podSelector"].get("matchLabels") == db_labels]
    rules = pols[0]["spec"].get("ingress", []) if len(pols) == 1 else []
    check(len(pols) == 1 and pols[0]["metadata"]["namespace"] == ns and bool(rules) and
          all(r.get("ports") == [{"port": 5432}] and r.get("from") and
              all(set(p) == {"podSelector"} and p["podSelector"].get("matchLabels") == labels
                  for p in r["from"]) for r in rules),
          "%s: only the %s's pods reach PostgreSQL (5432)" % (what, role))
check(len(db_secrets) == 2 and db_secrets["leader"][0] != db_secrets["helper"][0] and
      db_secrets["leader"][1] != db_secrets["helper"][1],
      "the leader's and the helper's databases are in different namespaces and Secrets: %s"
      % db_secrets)
check(len(db_of_role) == 2 and db_of_role["leader"] != db_of_role["helper"] and
      db_of_role["leader"][0] != db_of_role["helper"][0],
      "the leader's and the helper's PostgreSQL are different servers: %s" % db_of_role)
# The README makes each db Secret from files (no literal: the password on
# no command line) with the keys the files read, a pgpass line for the
# conninfo's server, database and login, and never applies both variants
# (the whole folder).
readme_made = set(re.findall(r">\s*deploy/certs/(\S+)", readme))
for role, (ns, secret, ci) in db_secrets.items():
    m = re.search(r"kubectl -n %s create secret generic %s (.*)" % (re.escape(ns),
                                                                  re.escape(secret or "?")),
                  readme)
    args = m.group(1) if m else ""
    keys = {}
    for spec in re.findall(r"--from-file=(\S+)", args):
        key, _, path = spec.rpartition("=")
        keys[key or os.path.basename(path)] = os.path.basename(path)
    check(m is not None and "--from-literal" not in args and
          set(keys) == {"password", "pgpass", role + "-db.pem", role + "-db.key", role + "-ca.pem"},
          "README creates Secret %s/%s from files with the keys its pods read: %s"
          % (ns, secret, sorted(keys)))
    check({keys.get("password"), keys.get("pgpass")} <= readme_made,
          "README writes the %s database's password files itself: %s" % (role, sorted(keys)))
    want = "%s:%s:%s:%s:" % (ci.get("host"), ci.get("port", "5432"), ci.get("dbname"),
                             ci.get("user"))
    check(re.search(r"printf '%s%%s\\n' \"\$pw\" > deploy/certs/%s" % (
              re.escape(want), re.escape(keys.get("pgpass") or "?")), readme) is not None,
          "README's %s pgpass line is for the conninfo's %s" % (role, want))
# No password on a command line (/proc/*/cmdline is world-readable) or in an
# environment variable: no k8s container (init containers and PostgreSQL
# included) takes a Secret's value as a variable (Secrets are files) or names
# a password in its arguments, nor does any compose service.
PASSWORD_ARG = re.compile(r"password\s*=|pgpassword|://[^/\s:@]+:[^@\s]+@", re.I)
for d in docs_all:
    if d.get("kind") not in ("StatefulSet", "Deployment", "Job"):
        continue
    pod = d["spec"]["template"]["spec"]
    for c in pod.get("initContainers", []) + pod.get("containers", []):
        what = "k8s %s/%s" % (file_of[id(d)], c["name"])
        args = c.get("command", []) + c.get("args", [])
        check(not any(PASSWORD_ARG.search(a) for a in args),
              "%s has no password in its command line" % what)
        check(not any("secretKeyRef" in e.get("valueFrom", {}) for e in c.get("env", [])) and
              not any("secretRef" in e for e in c.get("envFrom", [])) and
              not any("PASSWORD" in e["name"].upper() and not e["name"].upper().endswith("_FILE")
                      for e in c.get("env", [])),
              "%s takes no Secret's value or password into its environment" % what)
for name, svc in services.items():
    args = list(svc.get("command", [])) + list(svc.get("entrypoint", []) or [])
    env = svc.get("environment", {}) or {}
    env_names = env if isinstance(env, dict) else [e.split("=", 1)[0] for e in env]
    check(not any(PASSWORD_ARG.search(str(a)) for a in args) and
          not any("PASSWORD" in k.upper() and not k.upper().endswith("_FILE") for k in env_names),
          "compose %s has no password in its command line or environment" % name)
check(not re.search(r"kubectl apply -f deploy/k8s/?\s*$", readme, re.M),
      "README does not apply the whole deploy/k8s folder (both variants)")
check("kubectl -n tandem-leader scale deployment tandem-leader" in readme,
      "README says how to scale the replicas")

# --- make-certs.sh output against what the deploy files expect --------------
# Every certificate make-certs.sh issues, by the CA that issues it.
PARTIES = {"leader": "leader", "helper": "helper", "coordinator": "coordinator",
           "worker": "coordinator", "operator": "coordinator", "leader-db": "leader",
           "helper-db": "helper"}
IDENTITIES = {"leader.tandem", "helper.tandem", "coordinator.tandem", "worker.tandem",
              "operator.tandem"}
check("operator.pem" in made and "operator.key" in made,
      "make-certs.sh makes the operator's certificate operator.pem and its key")
check(referenced - readme_made <= made,
      "make-certs.sh makes every file the deploy files use: missing %s"
      % sorted(referenced - readme_made - made))


def cert(path):
    return os.path.join(CERTS, os.path.basename(path))


def read(path):
    return open(path).read() if os.path.isfile(path) else None


for where, agg_l, agg_h, co, cl, parties in (
        ("compose", leader, helper, coord, flags_of(services["client"]["command"]),
         compose_parties),
        ("k8s", k8s_leader, k8s_helper, k8s_coord, k8s_client, k8s_parties)):
    pem = {r: cert(p) for r, p in parties.items()}
    if not all(os.path.isfile(p) for p in pem.values()):
        check(False, "%s: party certificates exist: %s" % (where, pem))
        continue
    # Identities the configs name are SANs of the right certificates, and
    # the bundles verify exactly the parties each side expects.
    for agg in (agg_l, agg_h):
        ids = agg["coordinator_identities"]
        check(bool(ids) and set(ids) <= sans(pem["coordinator"]),
              "%s %s: coordinator identities %s are SANs of its certificate"
              % (where, agg["role"], ids))
        check(all(verifies(cert(agg["roots"]), pem["coordinator"], i) for i in ids),
              "%s %s's roots verify the coordinator" % (where, agg["role"]))
        check(not verifies(cert(agg["roots"]), pem[agg["role"]], agg["role"] + ".tandem"),
              "%s %s's roots do not trust its own CA" % (where, agg["role"]))
    check(all(verifies(cert(agg_h["roots"]), pem["leader"], i) for i in agg_h["leader_identities"])
          and set(agg_h["leader_identities"]) <= sans(pem["leader"]),
          "%s helper's roots verify the leader as %s" % (where, agg_h["leader_identities"]))
    check(verifies(cert(agg_l["roots"]), pem["helper"], agg_l["peer_name"]),
          "%s leader's roots verify the helper as %s" % (where, agg_l["peer_name"]))
    for role in ("leader", "helper"):
        check(verifies(cert(co.get("tls_ca", "")), pem[role], co.get(role + "_name", "?")),
              "%s coordinator's roots verify the %s as %s" % (where, role, co.get(role + "_name")))
        check(verifies(cert(cl.get("tls_ca", "")), pem[role], cl.get(role + "_name", "?")),
              "%s clients' roots verify the %s as %s" % (where, role, cl.get(role + "_name")))
    check(verifies(cert(cl.get("tls_ca", "")), pem["coordinator"], "coordinator.tandem"),
          "%s clients' roots verify the coordinator" % where)
    # One ticket key pair: the coordinator signs with what the aggregators check.
    pub = openssl("pkey", "-in", cert(co.get("ticket_key", "")), "-pubout").stdout
    check(bool(pub) and all(read(cert(a["coordinator_key"])) == pub for a in (agg_l, agg_h)),
          "%s aggregators hold the public key of the coordinator's ticket key" % where)

# Keys: EC P-256 for TLS, Ed25519 for tickets, private to their owner.
for role in PARTIES:
    k = os.path.join(CERTS, role + ".key")
    text = openssl("pkey", "-in", k, "-noout", "-text").stdout
    check("prime256v1" in text or "P-256" in text, "%s.key is EC P-256" % role)
    check(os.stat(k).st_mode & 0o077 == 0, "%s.key is private to its owner" % role)
check("ED25519" in openssl("pkey", "-in", os.path.join(CERTS, "ticket.key"), "-noout",
                           "-text").stdout.upper(), "ticket.key is Ed25519")

# A CA cannot issue another party's name: a leader.tandem certificate from
# the helper's CA, or a coordinator.tandem one from the leader's, is refused
# by every bundle that trusts the issuing CA.
for issuer, name, bundles in (
        ("helper", "leader.tandem", ("client-roots.pem", "coordinator-roots.pem")),
        ("leader", "coordinator.tandem", ("helper-roots.pem",)),
        ("coordinator", "helper.tandem", ("client-roots.pem", "leader-roots.pem")),
        # The operators' identity: only the coordinator operator's CA issues it.
        ("leader", "operator.tandem", ("client-roots.pem", "coordinator-roots.pem")),
        ("helper", "operator.tandem", ("client-roots.pem", "coordinator-roots.pem"))):
    key, csr, forged = (os.path.join(work, "forged." + e) for e in ("key", "csr", "pem"))
    ext = os.path.join(work, "forged.ext")
    with open(ext, "w") as f:
        f.write("subjectAltName = DNS:%s\nextendedKeyUsage = serverAuth, clientAuth\n" % name)
    openssl("genpkey", "-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256", "-out", key)
    openssl("req", "-new", "-key", key, "-subj", "/CN=" + name, "-out", csr)
    r = openssl("x509", "-req", "-in", csr, "-CA", os.path.join(CERTS, issuer + "-ca.pem"),
                "-CAkey", os.path.join(CERTS, issuer + "-ca.key"), "-set_serial", "7",
                "-days", "1", "-extfile", ext, "-out", forged)
    check(r.returncode == 0, "forged a %s certificate with the %s CA" % (name, issuer))
    for b in bundles:
        check(not verifies(os.path.join(CERTS, b), forged, name),
              "%s refuses %s issued by the %s CA" % (b, name, issuer))

# --- make-certs.sh names (issue 34) ------------------------------------------
# Without --one-host (what k8s uses) no certificate names localhost or an IP
# address, and no CA may issue one; each certificate names one party.
for party, ca in PARTIES.items():
    pem = os.path.join(CERTS, party + ".pem")
    names = san_list(pem)
    check(bool(names) and not any(n == "DNS:localhost" or n.startswith("IP:") for n in names),
          "%s.pem names no localhost or IP address: %s" % (party, names))
    check(chains(os.path.join(CERTS, ca + "-ca.pem"), pem),
          "%s.pem chains to %s-ca.pem" % (party, ca))
    check(len(set(n[4:] for n in names) & IDENTITIES) == (0 if party.endswith("-db") else 1),
          "%s.pem carries one party identity at most: %s" % (party, names))
for ca in ("leader", "helper", "coordinator"):
    allowed, excluded = name_constraints(os.path.join(CERTS, ca + "-ca.pem"))
    check("DNS:localhost" not in allowed and not any(n.startswith("IP:") for n in allowed) and
          {"IP:0.0.0.0/0.0.0.0", "IP:0:0:0:0:0:0:0:0/0:0:0:0:0:0:0:0"} <= excluded,
          "%s-ca.pem permits no localhost or IP address: %s, excluded %s"
          % (ca, sorted(allowed), sorted(excluded)))
    for san in ("DNS:localhost", "IP:127.0.0.1", "IP:::1"):
        forged = forge(CERTS, ca, san, work, "%s-%s" % (ca, san[:3]))
        check(forged is not None and not chains(os.path.join(CERTS, "client-roots.pem"), forged),
              "client-roots.pem refuses %s issued by the %s CA" % (san, ca))
# gRPC hands a caller gate every SAN (DNS, URI, e-mail, IP), so a CA must
# not issue another party's identity as a URI or an e-mail name either (the
# CN is no host name, so only the URI / e-mail constraints can refuse it).
for issuer, name, bundle in (("coordinator", "leader.tandem", "helper-roots.pem"),
                             ("leader", "coordinator.tandem", "helper-roots.pem"),
                             ("helper", "coordinator.tandem", "leader-roots.pem"),
                             ("coordinator", "helper.tandem", "leader-roots.pem")):
    for san in ("URI:" + name, "email:" + name, "URI:spiffe://" + name):
        forged = forge(CERTS, issuer, san, work, "%s-%s" % (issuer, san.split(":")[0]),
                       cn="forged identity")
        check(forged is not None and not chains(os.path.join(CERTS, bundle), forged),
              "%s refuses %s issued by the %s CA" % (bundle, san, issuer))
# The worker: worker.tandem first, its k8s Service names and the compose
# service name, issued by the coordinator operator's CA, server only;
# worker-roots.pem is that CA alone: the worker's --tls_ca (it verifies the
# coordinator among its callers, no aggregator) and the coordinator's
# --worker_ca.
wpem = os.path.join(CERTS, "worker.pem")
wnames = san_list(wpem)
check(wnames[:1] == ["DNS:worker.tandem"] and
      {"DNS:worker", "DNS:tandem-worker", "DNS:tandem-worker.tandem-compute",
       "DNS:tandem-worker.tandem-compute.svc",
       "DNS:tandem-worker.tandem-compute.svc.cluster.local"} <= set(wnames),
      "worker.pem: worker.tandem first, then its Service names: %s" % wnames)
check(verifies(os.path.join(CERTS, "coordinator-ca.pem"), wpem, "worker.tandem"),
      "worker.pem verifies as worker.tandem under coordinator-ca.pem")
eku = openssl("x509", "-in", wpem, "-noout", "-ext", "extendedKeyUsage").stdout
check("TLS Web Server Authentication" in eku and "Client" not in eku,
      "worker.pem is a TLS server certificate only: %s" % eku.split("\n", 1)[-1].strip())
check(read(os.path.join(CERTS, "worker-roots.pem")) ==
      read(os.path.join(CERTS, "coordinator-ca.pem")),
      "worker-roots.pem is the coordinator operator's CA alone")
w_roots = cert(k8s_worker.get("tls_ca", ""))
check(all(verifies(w_roots, cert(k8s_coord.get("tls_cert", "")), i) for i in worker_callers)
      and bool(worker_callers),
      "k8s worker's roots verify the coordinator's certificate as %s" % worker_callers)
check(not any(chains(w_roots, os.path.join(CERTS, r + ".pem")) for r in ("leader", "helper")),
      "k8s worker's roots refuse the aggregators' certificates")
check(verifies(cert(k8s_coord.get("worker_ca", "")), cert(k8s_worker.get("tls_cert", "")),
               k8s_coord.get("worker_name", "?")),
      "k8s coordinator's --worker_ca verifies the worker's certificate as %s"
      % k8s_coord.get("worker_name"))
check(cert(k8s_worker.get("tls_cert", "")) == wpem and
      cert(k8s_worker.get("tls_key", "")) == os.path.join(CERTS, "worker.key"),
      "k8s worker serves worker.pem / worker.key")
# Enough single-use tokens: one per compose client replica, one per k8s
# client Job completion.
with open(os.path.join(CERTS, "tokens.txt")) as f:
    n_tokens = len([line for line in f if line.strip()])
job = [x for x in docs_all if x.get("kind") == "Job" and
       any(container_command(k)[:1] == ["tandem-client"]
           for k in tandem_containers(x["spec"]["template"]["spec"]))]
completions = max([x["spec"].get("completions", 1) for x in job] or [0])
check(k8s_client.get("enrollment_token_file", "").startswith(TLS_DIR) and
      k8s_client.get("enrollment_token_line_env") == "JOB_COMPLETION_INDEX" and
      all(x["spec"].get("completionMode") == "Indexed" for x in job),
      "k8s clients redeem the line of tokens.txt their completion index names")
check(n_tokens >= services["client"].get("deploy", {}).get("replicas", 1) and
      n_tokens >= completions,
      "tokens.txt has a token per compose client replica and per k8s Job completion: %d"
      % n_tokens)

# --one-host (the compose file, compose_local.py, run-main.sh): every party
# also carries DNS:localhost and IP:127.0.0.1, the CAs may issue those and
# nothing else local; a folder made one way is refused the other way.
ONE = os.path.join(work, "one-host")
r = subprocess.run([MAKE, "--one-host", ONE], capture_output=True, text=True)
check(r.returncode == 0, "make-certs.sh --one-host runs: %s" % (r.stdout + r.stderr)[-300:])
for party, ca in PARTIES.items():
    names = san_list(os.path.join(ONE, party + ".pem"))
    if party == "operator":  # a client certificate: no host names at all
        check(names == ["DNS:operator.tandem"],
              "--one-host: operator.pem names operator.tandem only: %s" % names)
        continue
    check({"DNS:localhost", "IP:127.0.0.1"} <= set(names) and
          len([n for n in names if n.startswith("IP:")]) == 1,
          "--one-host: %s.pem carries localhost and 127.0.0.1 only besides its names: %s"
          % (party, names))
for ca in ("leader", "helper", "coordinator"):
    allowed, _ = name_constraints(os.path.join(ONE, ca + "-ca.pem"))
    check({"DNS:localhost", "IP:127.0.0.1/255.255.255.255"} <= allowed and
          len([n for n in allowed if n.startswith("IP:")]) == 1,
          "--one-host: %s-ca.pem permits localhost and 127.0.0.1 (no other address): %s"
          % (ca, sorted(allowed)))
    forged = forge(ONE, ca, "IP:127.0.0.2", work, "one-" + ca)
    check(forged is not None and not chains(os.path.join(ONE, "client-roots.pem"), forged),
          "--one-host: client-roots.pem refuses 127.0.0.2 issued by the %s CA" % ca)
compose_coord_host = client.get("coordinator", "").rsplit(":", 1)[0]
check(verifies_ip(os.path.join(ONE, "client-roots.pem"), os.path.join(ONE, "coordinator.pem"),
                  compose_coord_host) and
      not verifies_ip(os.path.join(CERTS, "client-roots.pem"),
                      os.path.join(CERTS, "coordinator.pem"), compose_coord_host),
      "compose clients' coordinator %s verifies with --one-host certificates only"
      % compose_coord_host)

# The task API's callers (issue 33): operator.pem names operator.tandem
# alone, for TLS clients only, issued by the coordinator operator's CA; the
# coordinator admits that identity (--admin_identities; no other party's
# certificate carries one it admits), its --admin_ca verifies operator.pem
# and no aggregator's certificate; the caller's roots verify the
# coordinator under the --admin address it dials (compose: 127.0.0.1 with
# --one-host certificates; k8s: its Service name).
opem = os.path.join(CERTS, "operator.pem")
check(san_list(opem) == ["DNS:operator.tandem"],
      "operator.pem names operator.tandem only: %s" % san_list(opem))
check(chains(os.path.join(CERTS, "coordinator-ca.pem"), opem),
      "operator.pem chains to coordinator-ca.pem")
eku = openssl("x509", "-in", opem, "-noout", "-ext", "extendedKeyUsage").stdout
check("TLS Web Client Authentication" in eku and "Server" not in eku,
      "operator.pem is a TLS client certificate only: %s" % eku.split("\n", 1)[-1].strip())
check(len(task_creators) >= 2, "compose and k8s create tasks: %s" % [w for w, _, _ in task_creators])
for where, f, co in task_creators:
    base = ONE if where == "compose" else CERTS
    op, key = (os.path.join(base, os.path.basename(f.get(k, "?"))) for k in ("tls_cert", "tls_key"))
    admitted_ids = {i for i in co.get("admin_identities", "").split(",") if i}
    check(os.path.isfile(op) and os.path.isfile(key) and bool(sans(op) & admitted_ids),
          "%s: the task creator's certificate %s carries an identity the coordinator admits %s"
          % (where, os.path.basename(op), sorted(admitted_ids)))
    check(os.path.isfile(key) and
          openssl("x509", "-in", op, "-noout", "-pubkey").stdout ==
          openssl("pkey", "-in", key, "-pubout").stdout,
          "%s: %s is the key of %s" % (where, os.path.basename(key), os.path.basename(op)))
    bundle = os.path.join(base, os.path.basename(co.get("admin_ca") or co.get("tls_ca", "?")))
    check(openssl("verify", "-CAfile", bundle, "-purpose", "sslclient", op).returncode == 0,
          "%s coordinator's admin roots %s verify %s as a TLS client"
          % (where, os.path.basename(bundle), os.path.basename(op)))
    check(not any(chains(bundle, os.path.join(base, r + ".pem")) for r in ("leader", "helper")),
          "%s coordinator's admin roots %s refuse the aggregators' certificates"
          % (where, os.path.basename(bundle)))
    others = {p: sans(os.path.join(base, p + ".pem")) & admitted_ids
              for p in PARTIES if p != "operator"}
    check(not any(others.values()),
          "%s: no other party's certificate carries an admitted identity: %s" % (where, others))
    host = f.get("admin", "").rsplit(":", 1)[0]
    roots = os.path.join(base, os.path.basename(f.get("tls_ca", "?")))
    coord_pem = os.path.join(base, os.path.basename(co.get("tls_cert", "?")))
    ok = (verifies_ip(roots, coord_pem, host) if re.match(r"^[0-9.]+$", host)
          else verifies(roots, coord_pem, host))
    check(ok, "%s: the task creator's roots %s verify the coordinator as %s"
          % (where, os.path.basename(roots), host))
one_before = {n: open(os.path.join(ONE, n), "rb").read() for n in os.listdir(ONE)}
r = subprocess.run([MAKE, ONE], capture_output=True, text=True)
check(r.returncode != 0 and "--one-host" in r.stderr and
      one_before == {n: open(os.path.join(ONE, n), "rb").read() for n in os.listdir(ONE)},
      "make-certs.sh without --one-host refuses a --one-host folder, changing nothing: %s"
      % r.stderr.strip()[-200:])
r = subprocess.run([MAKE, "--one-host", ONE], capture_output=True, text=True)
check(r.returncode == 0 and "0 file(s) made" in r.stdout,
      "make-certs.sh --one-host keeps a --one-host folder: %s" % r.stdout.strip()[-200:])
r = subprocess.run([MAKE, "--one-host", CERTS], capture_output=True, text=True)
check(r.returncode != 0, "make-certs.sh --one-host refuses a folder made without it")

# Renewal (issue 34; the daemons reload on SIGHUP): a rerun reissues every
# party certificate expiring within --renew-days (new keys, the same CAs)
# and remakes expired enrollment tokens, nothing else; the next run keeps all.
RENEW = os.path.join(work, "renew")
r = subprocess.run([MAKE, "--one-host", "--days", "10", "--token-days", "0", RENEW],
                   capture_output=True, text=True)
check(r.returncode == 0, "make-certs.sh --days 10 --token-days 0 runs: %s" % r.stderr[-200:])
old = {n: open(os.path.join(RENEW, n), "rb").read() for n in os.listdir(RENEW)}
r = subprocess.run([MAKE, "--one-host", RENEW], capture_output=True, text=True)
new = {n: open(os.path.join(RENEW, n), "rb").read() for n in os.listdir(RENEW)}
renewed = sorted(n for n in new if old.get(n) != new[n])
check(r.returncode == 0 and renewed == sorted(
          [p + e for p in PARTIES for e in (".pem", ".key")] + ["tokens.expiry", "tokens.txt"]),
      "make-certs.sh renews what expires within --renew-days, nothing else: %s %s"
      % (renewed, r.stderr[-200:]))
check(all(chains(os.path.join(RENEW, ca + "-ca.pem"), os.path.join(RENEW, p + ".pem"))
          for p, ca in PARTIES.items()),
      "renewed certificates chain to the CAs they had")
r = subprocess.run([MAKE, "--one-host", RENEW], capture_output=True, text=True)
check(r.returncode == 0 and "0 file(s) made" in r.stdout,
      "make-certs.sh keeps a renewed folder: %s" % r.stdout.strip()[-200:])

# Idempotent: a second run keeps every file; --force makes new ones.
before = {n: open(os.path.join(CERTS, n), "rb").read() for n in made}
r = subprocess.run([MAKE, CERTS], capture_output=True, text=True)
after = {n: open(os.path.join(CERTS, n), "rb").read() for n in os.listdir(CERTS)}
check(r.returncode == 0 and before == after and "0 file(s) made" in r.stdout,
      "make-certs.sh keeps existing files: %s" % r.stdout.strip()[-300:])
r = subprocess.run([MAKE, "--force", CERTS], capture_output=True, text=True)
check(r.returncode == 0 and open(os.path.join(CERTS, "leader.key"), "rb").read() !=
      before.get("leader.key"), "make-certs.sh --force makes new keys")

# The image holds every binary the compose and k8s files run: what the
# Debian packages deploy/docker-images.sh installs into it (its PACKAGES)
# hold, by cmake/TandemInstall.cmake's install(TARGETS ... COMPONENT c) of
# each package's component, plus the replica entry point.
with open(os.path.join(SRC, "deploy", "docker-images.sh")) as f:
    m = re.search(r"^PACKAGES=\(([^)]*)\)", f.read(), re.M)
image_packages = set(m.group(1).split()) if m else set()
with open(os.path.join(SRC, "cmake", "TandemInstall.cmake")) as f:
    install_rules = f.read()
package_of = {c.lower(): p for c, p in
              re.findall(r"set\(CPACK_DEBIAN_(\w+)_PACKAGE_NAME ([\w-]+)\)", install_rules)}
image_bins = set()
for targets, component in re.findall(
        r"install\(TARGETS ([^)]*?)\s+RUNTIME DESTINATION \S+ COMPONENT (\w+)\)", install_rules):
    if package_of.get(component) in image_packages:
        image_bins.update(targets.split())
check({"tandem-aggregator", "tandem-coordinator", "tandem-worker", "tandem-client"} <= image_bins,
      "the image's packages hold the daemons and the client: %s" % sorted(image_bins))
check(os.path.isfile(os.path.join(SRC, "deploy", "docker", "tandem-replica")),
      "the replica entry point exists")
used = {services[n]["command"][0] for n in TANDEM_SERVICES}
for d in docs_all:
    if d.get("kind") in ("StatefulSet", "Deployment", "Job"):
        used.update(container_command(c)[0]
                    for c in tandem_containers(d["spec"]["template"]["spec"]))
check(used <= image_bins, "the image's packages install every binary the deploy files run: missing %s"
      % sorted(used - image_bins))

print("%d passed, %d failed" % (passed, failed))
sys.exit(1 if failed else 0)

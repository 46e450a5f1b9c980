#!/usr/bin/python3
"""The operators' monitoring files cannot go stale: deploy/monitoring/
tandem-alerts.yml (Prometheus alerting rules) and
tandem-grafana-dashboard.json (a Grafana dashboard) use only series the
daemons register, with labels they set.

Checks:
  - the rules: rule groups with unique names; every rule an alert with a
    unique name, an expr, a `for` duration, labels.severity (critical,
    warning or info) and annotations summary and description;
  - every tandem_* series named in a rule's expr, a panel target's expr or a
    template variable's query is registered in the C++ sources (a quoted
    literal in a .cc file under server/, aggregator/ or base/, tests,
    benchmarks and fuzzers left out; a histogram's _bucket/_sum/_count
    series by its family), so renaming a metric fails this test; rate(),
    irate() and increase() take counters or histogram series only;
  - every label an expr selects, groups or matches on, a legend shows or an
    annotation prints ($labels.x) is one the sources set on some series, a
    target label of deploy/prometheus.yml, or one Prometheus adds (job,
    instance, le);
  - every `job` matcher matches a job of deploy/prometheus.yml;
  - the dashboard: JSON, schemaVersion >= 36, a datasource variable
    DS_PROMETHEUS and a `task` query variable (label_values), unique panel
    ids, every panel but a row with a datasource and at least one target
    with an expr (each target's datasource the variable's), and panels for
    the series operators watch (rounds, phase, accuracy, epsilon, ...);
  - docs/how-to/monitor.md names every alert;
  - where promtool is found (--promtool, $TANDEM_PROMTOOL, or PATH):
    `promtool check rules` on the rules and `promtool test rules` on
    deploy/monitoring/tandem-alerts_test.yml; skipped (and said so) without.

  check_monitoring.py [--repo DIR] [--promtool PATH]

Prints a line per failure and 'N passed, M failed'; exit 0 when none failed.
Python 3 standard library and PyYAML (Debian python3-yaml) only.
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys

import yaml

SOURCE_DIRS = ("server", "aggregator", "base")
SKIP_FILE = re.compile(r"(_test|_benchmark|_fuzzer)\.cc$")
METRIC = re.compile(r"\btandem_[a-z0-9_]+\b")
# Labels Prometheus itself adds to scraped or histogram series.
BUILTIN_LABELS = {"job", "instance", "le", "__name__"}
SEVERITIES = {"critical", "warning", "info"}
DURATION = re.compile(r"^([0-9]+(ms|s|m|h|d|w|y))+$")
# Series the dashboard must show (the brief of deploy/monitoring).
DASHBOARD_MUST_SHOW = (
    "tandem_coordinator_completed_rounds", "tandem_coordinator_phase",
    "tandem_coordinator_last_accuracy", "tandem_coordinator_epsilon_spent",
    "tandem_coordinator_last_round_accepted_reports", "tandem_coordinator_upload_bytes_total",
    "tandem_coordinator_download_bytes_total", "tandem_coordinator_checkins_total",
    "tandem_aggregator_refused_calls_total", "tandem_aggregator_verification_stalled_seconds",
    "tandem_coordinator_aggregator_clock_offset_seconds")

passed, failed = 0, 0


def check(ok, what):
    global passed, failed
    if ok:
        passed += 1
    else:
        failed += 1
        print("FAIL:", what)
    return ok


# ------------------------------------------------------------ the sources

# The C++ scanner the docs' metrics reference uses (docs/gen_reference.py):
# one definition of what a metric registration looks like.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "docs"))
from gen_reference import strip_comments  # noqa: E402


def metric_type(src, start):
    """counter, gauge, histogram, summary or None: how the literal at
    src[start] is registered (a prometheus-cpp builder's .Name("x"), or a
    Gauge("x", ...) / counter("x", ...) call of a callback family)."""
    before = src[max(0, start - 200):start]
    m = re.search(r"\b(Gauge|Counter|Histogram|Summary|gauge|counter|histogram)\s*\(\s*$", before)
    if m:
        return m.group(1).lower()
    if re.search(r"\.Name\(\s*$", before):
        builders = re.findall(r"Build(Counter|Gauge|Histogram|Summary)\s*\(\s*\)",
                              src[max(0, start - 400):start])
        if builders:
            return builders[-1].lower()
    return None


def scan_sources(repo):
    """({metric: type or None}, {label names set in metrics sources},
    files scanned)."""
    metrics, labels, n_files = {}, set(), 0
    for top in SOURCE_DIRS:
        for root, dirs, files in os.walk(os.path.join(repo, top)):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            for fname in sorted(files):
                if not fname.endswith(".cc") or SKIP_FILE.search(fname):
                    continue
                n_files += 1
                with open(os.path.join(root, fname), errors="replace") as f:
                    src = strip_comments(f.read())
                found_here = False
                for m in re.finditer(r'"(tandem_[a-z0-9_]+)"', src):
                    kind = metric_type(src, m.start())
                    if metrics.get(m.group(1)) is None:
                        metrics[m.group(1)] = kind
                    found_here = found_here or kind is not None
                if found_here:
                    # Label names: {"name", value} pairs, emplace_back("name", ...)
                    labels.update(re.findall(r'\{\s*"([a-z_][a-z0-9_]*)"\s*,\s*[^{},]+\}', src))
                    labels.update(re.findall(r'emplace_back\(\s*"([a-z_][a-z0-9_]*)"\s*,', src))
    return metrics, labels, n_files


def prometheus_config(repo):
    """(job names, static target label names) of deploy/prometheus.yml."""
    with open(os.path.join(repo, "deploy", "prometheus.yml")) as f:
        cfg = yaml.safe_load(f)
    jobs, labels = set(), set()
    for sc in cfg.get("scrape_configs") or []:
        jobs.add(sc["job_name"])
        for st in sc.get("static_configs") or []:
            labels.update((st.get("labels") or {}).keys())
    return jobs, labels


# ------------------------------------------------------------ expressions

def expr_metrics(expr):
    return set(METRIC.findall(expr))


def expr_labels(expr):
    """Label names an expression selects, groups or matches on."""
    names = set()
    for body in re.findall(r"\{([^{}]*)\}", expr):
        names.update(re.findall(r"([A-Za-z_][A-Za-z0-9_]*)\s*(?:=~|!~|!=|=)", body))
    for body in re.findall(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\(([^()]*)\)",
                           expr):
        names.update(x.strip() for x in body.split(",") if x.strip())
    for label in re.findall(r"label_values\(\s*[^,()]*,\s*([A-Za-z_][A-Za-z0-9_]*)\s*\)", expr):
        names.add(label)
    return names


def job_matchers(expr):
    """(op, value) of every `job` matcher."""
    return re.findall(r'\bjob\s*(=~|!~|!=|=)\s*"([^"]*)"', expr)


def check_expr(where, expr, registered, known_labels, jobs):
    """Metrics, rate() arguments, labels and job matchers of one expression."""
    for name in sorted(expr_metrics(expr)):
        kind = registered.get(name, "absent") if name in registered else "absent"
        base = re.sub(r"_(bucket|sum|count)$", "", name)
        if kind == "absent" and base != name and registered.get(base) in ("histogram", "summary"):
            kind = "counter"  # a histogram's _bucket/_sum/_count series
        check(kind != "absent",
              "%s: %s is not registered in any %s/**/*.cc (renamed or removed?)"
              % (where, name, "/, ".join(SOURCE_DIRS)))
    for fn, name in re.findall(r"\b(rate|irate|increase)\s*\(\s*(tandem_[a-z0-9_]+)", expr):
        kind = registered.get(name)
        check(kind != "gauge", "%s: %s() of %s, a gauge" % (where, fn, name))
    for label in sorted(expr_labels(expr)):
        check(label in known_labels, "%s: label %r is set on no tandem series" % (where, label))
    for op, value in job_matchers(expr):
        if op in ("=", "=~"):
            pattern = value if op == "=~" else re.escape(value)
            check(any(re.fullmatch(pattern, j) for j in jobs),
                  "%s: job%s\"%s\" matches no job of deploy/prometheus.yml (%s)"
                  % (where, op, value, ", ".join(sorted(jobs))))
        if op == "=~":
            for alt in value.split("|"):
                if re.fullmatch(r"[A-Za-z0-9_-]+", alt):
                    check(alt in jobs, "%s: job %s is not in deploy/prometheus.yml" % (where, alt))


# ------------------------------------------------------------ the rules

def check_rules(path, registered, known_labels, jobs):
    """Returns the alert names."""
    alerts = []
    with open(path) as f:
        doc = yaml.safe_load(f)
    if not check(isinstance(doc, dict) and isinstance(doc.get("groups"), list) and doc["groups"],
                 "%s: a top-level `groups` list" % path):
        return alerts
    group_names = [g.get("name") for g in doc["groups"] if isinstance(g, dict)]
    check(len(group_names) == len(doc["groups"]) and all(group_names),
          "%s: every group is a mapping with a name" % path)
    check(len(set(group_names)) == len(group_names), "%s: group names are unique" % path)
    for g in doc["groups"]:
        rules = g.get("rules") if isinstance(g, dict) else None
        if not check(isinstance(rules, list) and rules, "group %s has rules" % g.get("name")):
            continue
        for i, r in enumerate(rules):
            where = "group %s rule %d (%s)" % (g.get("name"), i, r.get("alert", "?"))
            if not check(isinstance(r.get("alert"), str) and re.fullmatch(r"[A-Z][A-Za-z0-9]+", r["alert"]),
                         "%s: an `alert` name in CamelCase" % where):
                continue
            alerts.append(r["alert"])
            expr = r.get("expr")
            if check(isinstance(expr, str) and expr.strip(), "%s: an expr" % where):
                check(bool(expr_metrics(expr)) or re.search(r"\bup\b", expr),
                      "%s: the expr reads a tandem series or up" % where)
                check_expr(where, expr, registered, known_labels, jobs)
            check(isinstance(r.get("for"), str) and DURATION.match(r["for"]),
                  "%s: a `for` duration" % where)
            labels = r.get("labels") or {}
            check(labels.get("severity") in SEVERITIES,
                  "%s: labels.severity one of %s" % (where, sorted(SEVERITIES)))
            ann = r.get("annotations") or {}
            for key in ("summary", "description"):
                check(isinstance(ann.get(key), str) and ann[key].strip(),
                      "%s: annotations.%s" % (where, key))
            text = " ".join(str(v) for v in ann.values())
            for label in sorted(set(re.findall(r"\$labels\.([A-Za-z_][A-Za-z0-9_]*)", text))):
                check(label in known_labels,
                      "%s: the annotations print $labels.%s, set on no tandem series" % (where, label))
    check(len(set(alerts)) == len(alerts), "%s: alert names are unique" % path)
    return alerts


# ------------------------------------------------------------ the dashboard

def all_panels(panels):
    for p in panels:
        yield p
        yield from all_panels(p.get("panels") or [])


def check_dashboard(path, registered, known_labels, jobs):
    try:
        with open(path) as f:
            dash = json.load(f)
    except ValueError as e:
        check(False, "%s parses as JSON: %s" % (path, e))
        return
    check(isinstance(dash.get("schemaVersion"), int) and dash["schemaVersion"] >= 36,
          "%s: schemaVersion >= 36" % path)
    check(bool(dash.get("title")) and bool(dash.get("uid")), "%s: a title and a uid" % path)
    variables = {v.get("name"): v for v in (dash.get("templating") or {}).get("list", [])}
    ds_var = variables.get("DS_PROMETHEUS") or {}
    check(ds_var.get("type") == "datasource" and ds_var.get("query") == "prometheus",
          "%s: a datasource variable DS_PROMETHEUS of type prometheus" % path)
    ds_ref = "${DS_PROMETHEUS}"
    task = variables.get("task") or {}
    query = task.get("query")
    query = query.get("query", "") if isinstance(query, dict) else str(query or "")
    if check(task.get("type") == "query" and "label_values(" in query,
             "%s: a `task` query variable from label_values" % path):
        check_expr("variable task", query, registered, known_labels, jobs)
        check((task.get("datasource") or {}).get("uid") == ds_ref,
              "variable task: datasource %s" % ds_ref)

    panels = list(all_panels(dash.get("panels") or []))
    check(panels, "%s: panels" % path)
    ids = [p.get("id") for p in panels]
    check(all(isinstance(i, int) for i in ids), "%s: every panel has an integer id" % path)
    check(len(set(ids)) == len(ids),
          "%s: panel ids are unique (%s repeated)"
          % (path, sorted({i for i in ids if ids.count(i) > 1})))
    shown = set()
    for p in panels:
        where = "panel %s (%s)" % (p.get("id"), p.get("title"))
        gp = p.get("gridPos") or {}
        check(all(isinstance(gp.get(k), int) for k in "hwxy") and gp["x"] + gp["w"] <= 24,
              "%s: a gridPos within 24 columns" % where)
        if p.get("type") == "row":
            continue  # a row only groups the panels below it
        check(bool(p.get("title")), "%s: a title" % where)
        check((p.get("datasource") or {}).get("uid") == ds_ref,
              "%s: datasource %s" % (where, ds_ref))
        targets = p.get("targets") or []
        if not check(targets, "%s: at least one target" % where):
            continue
        ref_ids = [t.get("refId") for t in targets]
        check(len(set(ref_ids)) == len(ref_ids) and all(ref_ids), "%s: unique refIds" % where)
        for t in targets:
            twhere = "%s target %s" % (where, t.get("refId"))
            expr = t.get("expr")
            if not check(isinstance(expr, str) and expr.strip(), "%s: an expr" % twhere):
                continue
            check((t.get("datasource") or {}).get("uid") in (None, ds_ref),
                  "%s: datasource %s" % (twhere, ds_ref))
            check_expr(twhere, expr, registered, known_labels, jobs)
            shown |= expr_metrics(expr)
            for label in re.findall(r"\{\{\s*([A-Za-z_][A-Za-z0-9_]*)\s*\}\}",
                                    t.get("legendFormat") or ""):
                check(label in known_labels, "%s: the legend shows {{%s}}, set on no series"
                      % (twhere, label))
    for name in DASHBOARD_MUST_SHOW:
        check(name in shown, "%s: a panel shows %s" % (path, name))


# ------------------------------------------------------------ promtool

def run_promtool(promtool, rules, rules_test):
    for args, cwd in (([promtool, "check", "rules", rules], None),
                      ([promtool, "test", "rules", os.path.basename(rules_test)],
                       os.path.dirname(rules_test))):
        try:
            p = subprocess.run(args, cwd=cwd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                               universal_newlines=True, timeout=60)
            out, rc = p.stdout, p.returncode
        except (OSError, subprocess.TimeoutExpired) as e:
            out, rc = str(e), -1
        if not check(rc == 0, "%s: exit %d" % (" ".join(args[1:]), rc)):
            print(out)
        else:
            print("promtool %s %s: ok" % (args[1], args[2]))


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--repo", default=os.path.dirname(os.path.dirname(here)),
                    help="the source tree (default: two levels above this script)")
    ap.add_argument("--promtool", default=os.environ.get("TANDEM_PROMTOOL") or shutil.which("promtool"),
                    help="promtool to run (default: $TANDEM_PROMTOOL, else promtool on PATH)")
    ap.add_argument("--rules", help="rules file (default: deploy/monitoring/tandem-alerts.yml)")
    ap.add_argument("--dashboard",
                    help="dashboard (default: deploy/monitoring/tandem-grafana-dashboard.json)")
    args = ap.parse_args()
    repo = os.path.abspath(args.repo)
    mon = os.path.join(repo, "deploy", "monitoring")
    rules = os.path.abspath(args.rules or os.path.join(mon, "tandem-alerts.yml"))
    dashboard = os.path.abspath(args.dashboard or os.path.join(mon, "tandem-grafana-dashboard.json"))
    rules_test = os.path.join(os.path.dirname(rules), "tandem-alerts_test.yml")

    registered, source_labels, n_files = scan_sources(repo)
    typed = {k: v for k, v in registered.items() if v is not None}
    if not check(len(typed) >= 10, "at least 10 tandem_* series registered in %d source files "
                 "(found %d: is --repo the source tree?)" % (n_files, len(typed))):
        return 1
    jobs, target_labels = prometheus_config(repo)
    known_labels = source_labels | target_labels | BUILTIN_LABELS
    print("check_monitoring: %d series registered in %d files; labels %s; jobs %s"
          % (len(typed), n_files, ", ".join(sorted(known_labels)), ", ".join(sorted(jobs))))

    alerts = check_rules(rules, registered, known_labels, jobs)
    check_dashboard(dashboard, registered, known_labels, jobs)

    with open(os.path.join(repo, "docs", "how-to", "monitor.md")) as f:
        doc = f.read()
    for a in alerts:
        check(re.search(r"\b%s\b" % a, doc), "docs/how-to/monitor.md names alert %s" % a)

    if args.promtool and os.access(args.promtool, os.X_OK):
        run_promtool(args.promtool, rules, rules_test)
    else:
        print("check_monitoring: SKIP promtool check/test rules: no promtool "
              "(Debian package prometheus, or --promtool PATH)")
    print("check_monitoring: %d alerts; %d passed, %d failed" % (len(alerts), passed, failed))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The text work of scripts/check-alerts.sh, which runs promtool and helm around it.

  exported ROOT...          every series name the host exports, from the Rust sources under ROOT
                            (register and sub_registry_with_prefix calls), with the suffixes the text
                            format gives each type (_total for counters, _bucket/_sum/_count for
                            histograms); and `up`, which Prometheus adds to every target
  used FILE...              every metric name the alerting rules, dashboards and rule tests name
  panel-rules DASHBOARD...  a rule file with one recording rule per panel query and template
                            variable, Grafana's variables filled in, for `promtool check rules` to
                            parse
  coverage RULES ANCHORS TEST...
                            every alert has a severity, a summary, a description and a runbook_url
                            into docs/operations.md whose anchor exists (ANCHORS: one a line), and
                            the tests see it fire and stay silent; every test loads RULES itself
  rendered RULES DASHBOARDS_DIR RENDERED JOB NAMESPACE RUNBOOK_BASE
                            the chart rendered (RENDERED, `helm template` output) ships RULES' groups,
                            for that job and namespace, and every dashboard, labelled for Grafana

Each check prints what is wrong and exits 1; silent and 0 when all is well.
"""

import json
import os
import re
import sys

import yaml

# The stand-in for one release's host targets in the rules file (the chart replaces it).
TARGETS = 'job="sunk",namespace="sunk"'
# Series Prometheus makes itself, not the host.
PROMETHEUS_SERIES = {"up"}


def fail(problems):
    for problem in problems:
        print(problem)
    sys.exit(1 if problems else 0)


# --- what the host exports --------------------------------------------------------------------------

REGISTER = re.compile(r'\.register\(\s*"([A-Za-z0-9_]+)"\s*,\s*"(?:[^"\\]|\\.)*"\s*,\s*(.*?)\)\s*;', re.S)
PREFIX = re.compile(r'sub_registry_with_prefix\(\s*"([A-Za-z0-9_]+)"\s*\)')
FN = re.compile(r"\bfn\s+\w+")


def metric_type(text, value, path):
    """counter, gauge or histogram: the registered value's declared type, looked up in its file."""
    declared = None
    field = re.fullmatch(r"self\.(\w+)\.clone\(\)", value)
    if field:
        found = re.search(r"^\s*(?:pub(?:\([^)]*\))?\s+)?%s:\s*([^\n]+?),?\s*$" % field.group(1), text, re.M)
        declared = found and found.group(1)
    elif re.fullmatch(r"[a-z_]\w*", value):
        found = re.search(r"let\s+(?:mut\s+)?%s\b[^;]*" % value, text)
        declared = found and found.group(0)
    elif re.fullmatch(r"[A-Z]\w*", value):
        found = re.search(r"impl\s+TypedMetric\s+for\s+%s\b.*?MetricType::(\w+)" % value, text, re.S)
        declared = found and found.group(1)
    for _ in range(3):
        if not declared:
            break
        for kind in ("Histogram", "Counter", "Gauge"):
            if kind in declared:
                return kind.lower()
        alias = re.search(r"\btype\s+%s\s*=\s*([^;]+);" % re.escape(declared.strip()), text)
        declared = alias and alias.group(1)
    sys.exit("%s: cannot tell the type of `%s`: teach scripts/check-alerts.py" % (path, value))


def exported(roots):
    names = set()
    for root in roots:
        for directory, _, files in os.walk(root):
            for name in files:
                if not name.endswith(".rs"):
                    continue
                path = os.path.join(directory, name)
                with open(path) as f:
                    text = f.read()
                prefixes = [(m.start(), m.group(1)) for m in PREFIX.finditer(text)]
                functions = [m.start() for m in FN.finditer(text)]
                for m in REGISTER.finditer(text):
                    # A prefix holds for the registrations after it in the same function.
                    start = max([at for at in functions if at < m.start()], default=0)
                    prefix = [p for at, p in prefixes if start <= at < m.start()]
                    series = (prefix[-1] + "_" if prefix else "") + m.group(1)
                    if not series.startswith("sunk_"):
                        continue
                    kind = metric_type(text, m.group(2).strip().rstrip(",").strip(), path)
                    suffixes = {"counter": ["_total"], "gauge": [""], "histogram": ["_bucket", "_sum", "_count"]}
                    names.update(series + suffix for suffix in suffixes[kind])
    return names


# --- what the rules and dashboards use ---------------------------------------------------------------

KEYWORDS = {"and", "or", "unless", "by", "without", "on", "ignoring", "group_left", "group_right",
            "offset", "bool", "inf", "nan", "atan2", "start", "end"}


def metric_names(expr):
    """The metric names a PromQL expression selects (a function or aggregation is followed by `(`)."""
    text = re.sub(r'"(?:[^"\\]|\\.)*"|\'(?:[^\'\\]|\\.)*\'|`[^`]*`', '""', expr)
    text = re.sub(r"\{[^}]*\}|\[[^\]]*\]", " ", text)
    text = re.sub(r"\b(?:by|without|on|ignoring|group_left|group_right)\s*\([^)]*\)", " ", text)
    names = set()
    for m in re.finditer(r"(?<![\w:.])[A-Za-z_:][\w:]*", text):
        if text[m.end():].lstrip().startswith("(") or m.group(0).lower() in KEYWORDS:
            continue
        names.add(m.group(0))
    return names


def grafana_to_promql(expr):
    """A panel's query as Prometheus would get it: $__rate_interval and friends become durations,
    every other variable a label value."""
    expr = re.sub(r"\$\{?__(?:rate_)?interval\}?|\$\{?__range\}?", "5m", expr)
    return re.sub(r"\$\{?\w+(?::\w+)?\}?", "x", expr)


def dashboard_queries(path):
    """(where, PromQL) of every panel target and query variable of a dashboard."""
    with open(path) as f:
        board = json.load(f)
    queries = []

    def panels(items):
        for panel in items:
            yield panel
            yield from panels(panel.get("panels", []))

    for panel in panels(board.get("panels", [])):
        for target in panel.get("targets", []):
            if target.get("expr"):
                where = "%s: panel %r, query %s" % (path, panel.get("title"), target.get("refId"))
                queries.append((where, grafana_to_promql(target["expr"])))
    for variable in board.get("templating", {}).get("list", []):
        if variable.get("type") != "query":
            continue
        query = variable.get("query")
        query = query.get("query", "") if isinstance(query, dict) else query or ""
        # label_values(<series selector>, label): the selector is PromQL.
        inner = re.fullmatch(r"\s*label_values\((.*),\s*\w+\s*\)\s*", query, re.S)
        queries.append(("%s: variable %s" % (path, variable["name"]), grafana_to_promql(inner.group(1) if inner else query)))
    return queries


def rule_exprs(path):
    with open(path) as f:
        rules = yaml.safe_load(f)
    return [(rule.get("alert") or rule.get("record"), rule["expr"]) for group in rules["groups"] for rule in group["rules"]]


def used(paths):
    names = set()
    for path in paths:
        if path.endswith(".json"):
            for _, expr in dashboard_queries(path):
                names |= metric_names(expr)
            continue
        with open(path) as f:
            document = yaml.safe_load(f)
        if "groups" in document:
            for _, expr in rule_exprs(path):
                names |= metric_names(expr)
        for test in document.get("tests", []):
            for series in test.get("input_series", []):
                names.add(re.match(r"\s*([A-Za-z_:][\w:]*)", series["series"]).group(1))
            for case in test.get("promql_expr_test", []):
                names |= metric_names(case["expr"])
    return names


def panel_rules(paths):
    rules = []
    for path in paths:
        for where, expr in dashboard_queries(path):
            # Named after the panel, so that promtool's complaint about a rule says which one it is.
            name = where[len(os.path.dirname(path)):]
            rules.append({"record": re.sub(r"[^A-Za-z0-9_:]+", "_", name).strip("_"), "expr": expr})
    yaml.safe_dump({"groups": [{"name": "dashboard-queries", "rules": rules}]}, sys.stdout, width=1000)


# --- the alerts' own conventions and their tests -----------------------------------------------------

def coverage(rules_path, anchors_path, tests):
    problems = []
    with open(anchors_path) as f:
        anchors = set(f.read().split())
    alerts = []
    with open(rules_path) as f:
        for group in yaml.safe_load(f)["groups"]:
            for rule in group["rules"]:
                name = rule.get("alert")
                if not name:
                    continue
                alerts.append(name)
                if rule.get("labels", {}).get("severity") not in ("critical", "warning"):
                    problems.append("%s: severity is neither critical nor warning" % name)
                notes = rule.get("annotations", {})
                for key in ("summary", "description", "runbook_url"):
                    if not notes.get(key, "").strip():
                        problems.append("%s: no %s" % (name, key))
                link = re.fullmatch(r"docs/operations\.md#([\w-]+)", notes.get("runbook_url", ""))
                if not link or link.group(1) not in anchors:
                    problems.append("%s: runbook_url %r is no heading of docs/operations.md"
                                    % (name, notes.get("runbook_url")))
                if TARGETS not in rule["expr"]:
                    problems.append("%s: selects no series of %s, which the chart fills in" % (name, TARGETS))
    fires, silent = set(), set()
    shipped = os.path.realpath(rules_path)
    for path in tests:
        with open(path) as f:
            document = yaml.safe_load(f)
        loaded = [os.path.realpath(os.path.join(os.path.dirname(path), p)) for p in document.get("rule_files", [])]
        if loaded != [shipped]:
            problems.append("%s: loads %s, not the shipped rules alone (%s)" % (path, loaded, rules_path))
        for test in document.get("tests", []):
            for case in test.get("alert_rule_test", []):
                (fires if case.get("exp_alerts") else silent).add(case["alertname"])
    for name in alerts:
        if name not in fires:
            problems.append("%s: no test sees it fire" % name)
        if name not in silent:
            problems.append("%s: no test sees it stay silent" % name)
    for name in (fires | silent) - set(alerts):
        problems.append("%s: tested, but no such alert" % name)
    return problems


# --- what the chart renders --------------------------------------------------------------------------

def rendered(rules_path, dashboards_dir, rendered_path, job, namespace, runbook_base):
    problems = []
    with open(rendered_path) as f:
        documents = [d for d in yaml.safe_load_all(f) if d]
    with open(rules_path) as f:
        groups = yaml.safe_load(f)["groups"]
    targets = 'job="%s",namespace="%s"' % (job, namespace)
    for group in groups:
        for rule in group["rules"]:
            rule["expr"] = rule["expr"].replace(TARGETS, targets)
            if runbook_base and "runbook_url" in rule.get("annotations", {}):
                rule["annotations"]["runbook_url"] = runbook_base + rule["annotations"]["runbook_url"]
    shipped = [d for d in documents if d.get("kind") == "PrometheusRule"]
    if len(shipped) != 1:
        problems.append("the chart renders %d PrometheusRules, not 1" % len(shipped))
    elif shipped[0]["spec"]["groups"] != groups:
        problems.append("the chart's PrometheusRule is not %s with %s for %s" % (rules_path, targets, TARGETS))
    maps = {}
    for d in documents:
        if d.get("kind") == "ConfigMap" and d["metadata"].get("labels", {}).get("grafana_dashboard") == "1":
            maps.update(d.get("data", {}))
    for name in sorted(os.listdir(dashboards_dir)):
        if not name.endswith(".json"):
            continue
        with open(os.path.join(dashboards_dir, name)) as f:
            board = json.load(f)
        key = "sunk-" + name
        if key not in maps:
            problems.append("no ConfigMap labelled grafana_dashboard=1 holds %s as %s" % (name, key))
        elif json.loads(maps[key]) != board:
            problems.append("the ConfigMap's %s is not %s" % (key, name))
    return problems


def main(argv):
    command, args = argv[1], argv[2:]
    if command == "exported":
        print("\n".join(sorted(exported(args) | PROMETHEUS_SERIES)))
    elif command == "used":
        print("\n".join(sorted(used(args))))
    elif command == "panel-rules":
        panel_rules(args)
    elif command == "coverage":
        fail(coverage(args[0], args[1], args[2:]))
    elif command == "rendered":
        fail(rendered(*args))
    else:
        sys.exit("unknown command %r" % command)


if __name__ == "__main__":
    main(sys.argv)

#!/usr/bin/env bash
# Checks the chart's alerting rules and Grafana dashboards (charts/sunk/files/monitoring/), in seconds:
#   - promtool checks the rules and runs their unit tests (tests/alerts/*_test.yaml), which must see
#     every alert fire and stay silent, loading the shipped file itself;
#   - every alert has a severity, a summary, a description and a runbook_url that is a heading of
#     docs/operations.md;
#   - every dashboard panel's and template variable's query parses (written into a throwaway rule
#     file for `promtool check rules`: promtool has no query parser of its own without a server);
#   - every metric name an alert, a panel or a rule test uses is one the host exports, as read from
#     its register calls under host/src and crates/ (so a renamed metric fails here);
#   - the chart renders exactly these rules (for its release's job and namespace) and dashboards, and
#     neither by default.
# Needs promtool (Debian's prometheus package), helm and python3-yaml (scripts/setup.sh). Prints what
# is wrong and exits 1.
set -euo pipefail
here=$(cd "$(dirname "$0")" && pwd)
source "$here/../tests/cluster/env.sh"
cd "$SUNK_ROOT"

command -v promtool >/dev/null || die "promtool is needed: scripts/setup.sh --packages-only installs it"
command -v helm >/dev/null || die "helm is needed: tests/cluster/build-kube.sh builds it"
monitoring=charts/sunk/files/monitoring
rules=$monitoring/alerts.yaml
dashboards=("$monitoring"/dashboards/*.json)
tests=(tests/alerts/*_test.yaml)
py() { python3 "$here/check-alerts.py" "$@"; }
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# promtool is chatty when all is well: its output only when it is not.
quiet() { "$@" >"$tmp/out" 2>&1 || { cat "$tmp/out"; die "failed: $*"; }; }

quiet promtool check rules "$rules"
quiet promtool test rules "${tests[@]}"

"$here/check-links.sh" --anchors docs/operations.md >"$tmp/anchors"
py coverage "$rules" "$tmp/anchors" "${tests[@]}" || die "alerts and their tests above"

py panel-rules "${dashboards[@]}" >"$tmp/panels.yaml"
quiet promtool check rules "$tmp/panels.yaml"

py exported host/src crates >"$tmp/exported"
py used "$rules" "${dashboards[@]}" "${tests[@]}" >"$tmp/used"
if unknown=$(LC_ALL=C comm -23 "$tmp/used" "$tmp/exported") && [[ -n $unknown ]]; then
  printf '%s\n' "$unknown"
  die "the metric names above are used by the alerts, the dashboards or their tests, but the host exports none of them"
fi

namespace=sunk-monitoring
base=https://example.org/sunk/
helm template r charts/sunk --namespace "$namespace" --set prometheusRule.enabled=true \
  --set prometheusRule.runbookBaseUrl="$base" --set grafanaDashboards.enabled=true >"$tmp/on.yaml"
py rendered "$rules" "$monitoring/dashboards" "$tmp/on.yaml" r-sunk "$namespace" "$base" ||
  die "the chart's PrometheusRule or dashboards above"
helm template r charts/sunk --api-versions monitoring.coreos.com/v1/PrometheusRule >"$tmp/off.yaml"
! grep -qE '^kind: PrometheusRule|grafana_dashboard' "$tmp/off.yaml" ||
  die "the chart renders a PrometheusRule or a dashboard by default"

log "alerts: $(grep -c '^ *- alert:' "$rules") rules tested, ${#dashboards[@]} dashboards with $(grep -c 'record:' "$tmp/panels.yaml") queries, every metric name exported"

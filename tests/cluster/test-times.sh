#!/usr/bin/env bash
# How long each end-to-end test of the last run took, longest first, and each module's total: read
# from logs/tests.tsv, where every test notes the namespaces it makes, each stamped with the
# millisecond it was made (modulo 0xffffff). A test runs from its first namespace to the next test's.
# down.sh wipes the cluster's logs: time a run of SUNK_KEEP_CLUSTER=1 ./scripts/test.sh, tests run on
# a cluster of up.sh, or a failed run's tests.tsv (.cache/failed-run-logs/), given as the argument.
set -euo pipefail
source "$(dirname "$0")/env.sh"
tsv=${1:-$SUNK_STATE/logs/tests.tsv}
[[ -f $tsv ]] || die "no $tsv: run the end-to-end tests first, or name a tests.tsv"
python3 - "$tsv" <<'PY'
import collections, sys
first = {}
for line in open(sys.argv[1]):
    test, namespace = line.rstrip("\n").split("\t")
    first.setdefault(test, int(namespace.rsplit("-", 1)[1], 16))
tests = list(first)
took = {test: ((first[after] - first[test]) % 0xFFFFFF) / 1000 for test, after in zip(tests, tests[1:])}
for test, seconds in sorted(took.items(), key=lambda item: -item[1]):
    print(f"{seconds:7.1f} s  {test}")
modules = collections.Counter()
for test, seconds in took.items():
    modules[test.split("::")[0]] += seconds
print("\nby module: " + ", ".join(f"{module} {seconds:.0f} s" for module, seconds in modules.most_common()))
print(f"the last test, {tests[-1]}, is not timed")
PY

#!/bin/sh
# Sidecar of slurmdbd: applies the QOS, accounts and users the chart's values declare (a file of
# sacctmgr commands, one per line, from a ConfigMap) once slurmdbd answers, and again whenever the
# file changes (the kubelet refreshes the volume after `helm upgrade`). Applying twice changes
# nothing: an `add` of what exists is skipped, a `modify` sets what is already set. Its readiness
# probe reads /run/slurmdbd/accounts-applied, which holds the digest of the last file applied whole.
set -u
file=/etc/sunk/accounting/sacctmgr.txt
marker=/run/slurmdbd/accounts-applied
applied=
while :; do
  digest=$(sha256sum "$file" | cut -d' ' -f1)
  if [ "$digest" != "$applied" ] && sacctmgr -n -P show cluster format=cluster >/dev/null 2>&1; then
    failed=0
    while IFS= read -r command; do
      [ -n "$command" ] || continue
      output=$(eval "sacctmgr -i $command" 2>&1) && status=0 || status=$?
      case $output in
        *"Nothing new added"* | *"Nothing added"* | *"Nothing modified"* | *"lready exist"*) status=0 ;;
      esac
      echo "sacctmgr $command: $(echo "$output" | tr '\n' ' ')"
      [ "$status" -eq 0 ] || failed=1
    done <"$file"
    if [ "$failed" -eq 0 ]; then
      applied=$digest
      echo "$digest" >"$marker"
      echo "accounting: $file applied ($digest)"
    fi
  fi
  sleep 5
done

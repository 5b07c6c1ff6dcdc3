#!/usr/bin/env bash
# Records slurmrestd's answers to the requests sunk's host makes, as fixtures for
# crates/slurm/tests/contract/. Usage: record.sh ROOT OUTDIR
#
#   ROOT    a Debian root holding Slurm (e.g. .cache/slurm-root-26.05, made by tests/cluster/build-slurm-root.sh)
#   OUTDIR  where the fixtures go, e.g. crates/slurm/tests/fixtures/slurmrestd/26.05.5
#
# Starts a standalone slurmctld, two static slurmd (r1, r2), one dynamic slurmd (dyn1) and slurmrestd inside
# ROOT, runs the same scenario once per data parser on a fresh cluster (so job ids match across parsers),
# and writes OUTDIR/<parser>.json (every exchange by name: request, status, answer) plus
# OUTDIR/openapi-paths.json and OUTDIR/openapi-schemas.json. PARSERS (default "v0.0.42 v0.0.43 v0.0.44") is
# cut down to the parsers ROOT has. SUNK_RECORD_HOLD=1 starts the cluster and waits instead (token and URL
# in the log), to experiment.
#
# Everything runs in a private mount namespace: the bind mounts, and a private /run (where auth/slurm
# keeps its sack socket), cannot collide with a local test cluster running in the same root, and they
# vanish with the last process. Ports: slurmctld 26817, slurmd 27001-27003, slurmrestd 26820 (on 127.0.0.1;
# slurmctld and slurmd have no bind address).
set -euo pipefail

usage() { echo "usage: $0 ROOT OUTDIR" >&2; exit 2; }
(($# == 2)) || usage

if [[ -z ${SUNK_RECORD_INSIDE:-} ]]; then
  [[ $(id -u) == 0 ]] || { echo "$0: needs root (chroot, mount)" >&2; exit 1; }
  root=$(realpath "$1")
  mkdir -p "$2"
  out=$(realpath "$2")
  chroot "$root" test -x /usr/sbin/slurmctld || { echo "$0: $root holds no Slurm" >&2; exit 1; }
  SUNK_RECORD_INSIDE=1 exec unshare --mount --propagation private bash "$(realpath "$0")" "$root" "$out"
fi

ROOT=$1
OUT=$2
# Ports are global: one recording at a time. The daemons inherit the lock, so one left running blocks too.
exec 9>"${TMPDIR:-/tmp}/sunk-contract-record.lock"
flock -n 9 || { echo "$0: another recording (or what it left running) holds ${TMPDIR:-/tmp}/sunk-contract-record.lock" >&2; exit 1; }
PARSERS=${PARSERS:-v0.0.42 v0.0.43 v0.0.44}
CTLD_PORT=26817
REST_PORT=26820
URL=http://127.0.0.1:$REST_PORT
REC=/sunk-record # inside ROOT
STATE=$ROOT$REC
HOST=$(hostname)
# How the host lists jobs: without SHOW_DETAIL (crates/slurm/src/client.rs, `jobs`).
JOBS_QUERY=flags=ALL
MY_NS=$(readlink /proc/self/ns/mnt)

log() { printf '[%s] %s\n' "$(date +%H:%M:%S)" "$*" >&2; }
die() {
  log "error: $*"
  for f in "$STATE"/log/*.log; do [[ -f $f ]] && { echo "== $f" >&2; tail -15 "$f" >&2; }; done
  exit 1
}

# Every process of this mount namespace but this shell: the daemons, and the job steps they forked
# (slurmstepd and the jobs' sleeps outlive a killed slurmd).
mine() {
  find /proc/[0-9]*/ns/mnt -maxdepth 0 -lname "${MY_NS//[/\\[}" 2>/dev/null | cut -d/ -f3 | grep -vx -e "$$" -e "$BASHPID" || true
}
stop_all() {
  log "stopping what this run started"
  local pids
  pids=$(mine | tr '\n' ' ')
  [[ -n ${pids// /} ]] || return 0
  # shellcheck disable=SC2086
  kill -TERM $pids 2>/dev/null || true
  for _ in $(seq 50); do
    pids=$(mine | tr '\n' ' ')
    [[ -n ${pids// /} ]] || return 0
    sleep 0.1
  done
  # shellcheck disable=SC2086
  kill -KILL $pids 2>/dev/null || true
}
trap stop_all EXIT
trap 'exit 143' TERM INT

# --- the root --------------------------------------------------------------------------------------

for fs in proc dev sys; do
  mountpoint -q "$ROOT/$fs" || mount --bind "/$fs" "$ROOT/$fs"
done
mount -t tmpfs -o mode=755 tmpfs "$ROOT/run"
if ! grep -qw "$HOST" "$ROOT/etc/hosts" 2>/dev/null; then
  cp /etc/hosts "$ROOT/etc/hosts"
fi
version=$(chroot "$ROOT" /usr/sbin/slurmctld -V | awk '{print $2}')
plugins=$ROOT/usr/lib/x86_64-linux-gnu/slurm-wlm
parsers=()
for parser in $PARSERS; do
  [[ -f $plugins/data_parser_${parser//./_}.so ]] && parsers+=("$parser")
done
((${#parsers[@]})) || die "$ROOT has none of the parsers $PARSERS"
log "Slurm $version in $ROOT; parsers ${parsers[*]}"

in_root() { chroot "$ROOT" /usr/bin/env SLURM_CONF=$REC/slurm.conf "$@"; }

write_config() {
  rm -rf "$STATE"
  mkdir -p "$STATE"/{ctld,run,log,spool}
  cat >"$STATE/slurm.conf" <<CONF
# Written by tests/contract/record.sh; modelled on tests/cluster/slurm.conf.in.
ClusterName=record
SlurmctldHost=$HOST(127.0.0.1)
SlurmctldPort=$CTLD_PORT
SlurmUser=slurm
SlurmdUser=root
AuthType=auth/slurm
CredType=cred/slurm
AuthAltTypes=auth/jwt
AuthAltParameters=jwt_key=$REC/jwt.key
AuthInfo=cred_expire=10
StateSaveLocation=$REC/ctld
SlurmctldPidFile=$REC/run/slurmctld.pid
SlurmctldLogFile=$REC/log/slurmctld.log
SlurmdLogFile=$REC/log/slurmd-%n.log
SlurmdSpoolDir=$REC/spool/%n
SlurmdPidFile=$REC/run/slurmd-%n.pid
ProctrackType=proctrack/linuxproc
TaskPlugin=task/none
JobAcctGatherType=jobacct_gather/none
MpiDefault=none
SelectType=select/cons_tres
SelectTypeParameters=CR_Core_Memory
MaxNodeCount=8
ReturnToService=2
KillWait=5
MinJobAge=300
SchedulerParameters=batch_sched_delay=0,sched_min_interval=0
PreemptType=preempt/partition_prio
PreemptMode=REQUEUE
NodeName=r[1-2] NodeHostname=$HOST NodeAddr=127.0.0.1 Port=27001-27002 CPUs=2 RealMemory=2000
# The dynamic node dyn1 is in no partition: no job lands on it by chance.
PartitionName=batch Nodes=r[1-2] Default=YES MaxTime=INFINITE State=UP PriorityTier=1
PartitionName=urgent Nodes=r[1-2] MaxTime=INFINITE State=UP PriorityTier=2 PreemptMode=OFF
CONF
  echo CgroupPlugin=disabled >"$STATE/cgroup.conf"
  head -c 64 /dev/urandom >"$STATE/slurm.key"
  head -c 64 /dev/urandom >"$STATE/jwt.key"
  local slurm_uid
  slurm_uid=$(awk -F: '$1=="slurm"{print $3}' "$ROOT/etc/passwd")
  chown "$slurm_uid:$slurm_uid" "$STATE/slurm.key" "$STATE/jwt.key" "$STATE/ctld"
  chmod 600 "$STATE/slurm.key" "$STATE/jwt.key"
}

# sign KEYFILE USER: an HS256 JWT as slurmrestd's auth/jwt expects (claims sun, iat, exp).
sign() {
  python3 - "$1" "$2" <<'PY'
import base64, hashlib, hmac, json, sys, time
key = open(sys.argv[1], "rb").read()
b64 = lambda raw: base64.urlsafe_b64encode(raw).rstrip(b"=")
now = int(time.time())
head = b64(json.dumps({"alg": "HS256", "typ": "JWT"}).encode())
body = b64(json.dumps({"iat": now, "exp": now + 3600, "sun": sys.argv[2]}).encode())
sig = b64(hmac.new(key, head + b"." + body, hashlib.sha256).digest())
print((head + b"." + body + b"." + sig).decode())
PY
}

# poll SECONDS WHAT CMD...: runs CMD until it succeeds.
poll() {
  local seconds=$1 what=$2
  shift 2
  local deadline=$((SECONDS + seconds))
  until "$@" >/dev/null 2>&1; do
    ((SECONDS < deadline)) || die "timed out after ${seconds}s waiting for $what"
    sleep 0.1
  done
}

start_cluster() {
  write_config
  setsid chroot "$ROOT" /usr/bin/env SLURM_CONF=$REC/slurm.conf /usr/sbin/slurmctld -D -i \
    >>"$STATE/log/slurmctld.out" 2>&1 </dev/null &
  poll 30 slurmctld in_root scontrol ping
  for node in r1 r2; do
    mkdir -p "$STATE/spool/$node"
    setsid chroot "$ROOT" /usr/bin/env SLURM_CONF=$REC/slurm.conf /usr/sbin/slurmd -D -N "$node" \
      >>"$STATE/log/slurmd-$node.out" 2>&1 </dev/null &
  done
  mkdir -p "$STATE/spool/dyn1"
  setsid chroot "$ROOT" /usr/bin/env SLURM_CONF=$REC/slurm.conf /usr/sbin/slurmd -D -Z -N dyn1 \
    --conf "CPUs=2 RealMemory=2000 Port=27003" >>"$STATE/log/slurmd-dyn1.out" 2>&1 </dev/null &
  DYN1_PID=$!
  # slurmrestd refuses to run as root or as SlurmUser.
  setsid chroot --userspec=nobody:nogroup "$ROOT" /usr/bin/env SLURM_CONF=$REC/slurm.conf SLURM_JWT=daemon \
    /usr/sbin/slurmrestd -a rest_auth/jwt -s openapi/slurmctld "127.0.0.1:$REST_PORT" \
    >>"$STATE/log/slurmrestd.log" 2>&1 </dev/null &
  TOKEN=$(sign "$STATE/jwt.key" root)
  poll 30 slurmrestd curl -sf -H "X-SLURM-USER-TOKEN: $TOKEN" "$URL/slurm/v0.0.42/ping"
  poll 60 "r1, r2 and dyn1 idle" nodes_idle
}

nodes_idle() {
  [[ $(call GET "slurm/v0.0.42/nodes") == 200 ]] || return 1
  jq -e '[.nodes[] | select(.state == ["IDLE"] or .state == ["IDLE","DYNAMIC_NORM"])] | length == 3' "$RESP"
}

stop_cluster() {
  # Kill the jobs first: their steps would outlive slurmd.
  in_root scancel --quiet --user=root 2>/dev/null || true
  poll 30 "jobs to end" no_job_holds_a_node
  stop_all
}

no_job_holds_a_node() {
  [[ $(call GET "slurm/v0.0.42/nodes") == 200 ]] || return 1
  jq -e '[.nodes[] | select(.state | index("ALLOCATED") or index("MIXED") or index("COMPLETING"))] | length == 0' "$RESP"
}

# --- requests --------------------------------------------------------------------------------------

RESP=$(mktemp)
# call METHOD PATH [BODY]: prints the HTTP status, leaves the body in $RESP. USE_TOKEN replaces the token,
# NO_TOKEN leaves it out.
call() {
  local method=$1 path=$2 body=${3-}
  : >"$RESP" # curl leaves the file alone when there is no body (304)
  local args=(-sS -o "$RESP" -w '%{http_code}' -X "$method")
  if [[ -n ${NO_TOKEN:-} ]]; then :; else args+=(-H "X-SLURM-USER-TOKEN: ${USE_TOKEN:-$TOKEN}"); fi
  [[ -n $body ]] && args+=(-H 'Content-Type: application/json' --data-binary "$body")
  curl "${args[@]}" "$URL/$path"
}

# rec NAME METHOD PATH [BODY]: makes the request and records it under $DIR. PATH is relative to the API
# version ("jobs", "job/12") unless it starts with /.
rec() {
  local name=$1 method=$2 path=$3 body=${4-} status
  [[ $path == /* ]] && path=${path#/} || path=slurm/$P/$path
  status=$(call "$method" "$path" "$body")
  echo "$status" >"$DIR/$name.status"
  rm -f "$DIR/$name.json" "$DIR/$name.body"
  if [[ ! -s $RESP ]]; then
    :
  elif jq -e . "$RESP" >/dev/null 2>&1; then
    jq -S --indent 1 . "$RESP" >"$DIR/$name.json"
  else
    cp "$RESP" "$DIR/$name.body"
  fi
  jq -n --arg method "$method" --arg path "/$path" --arg body "$body" \
    '{method: $method, path: $path} + (if $body == "" then {} else {body: ($body | fromjson)} end)' \
    >"$DIR/$name.request.json"
  log "$P $name: $method /$path -> $status"
}

# job BODY-FIELDS...: a job description (JSON) with sunk's usual fields, overridden by the given jq object.
job() {
  jq -cn --argjson extra "${1:-{\}}" '{job: ({
      name: "contract", partition: "batch", current_working_directory: "/tmp",
      environment: ["PATH=/bin:/usr/bin"], script: "#!/bin/sh\nexec sleep infinity",
      cpus_per_task: 1, memory_per_node: {set: true, number: 100}, time_limit: {set: true, number: 30}
    } + $extra)}'
}

# submit NAME BODY: records a submission; prints the job id.
submit() {
  rec "$1" POST job/submit "$2"
  jq -r '.job_id // empty' "$DIR/$1.json"
}

# The job's state flags joined by +, of a job or of an array's first record.
state_of() {
  [[ $(call GET "slurm/$P/job/$1") == 200 ]] || return 1
  jq -r '.jobs[0] | (.job_state | join("+"))' "$RESP"
}
job_is() { [[ $(state_of "$1") == "$2" ]]; }
# reason_in JOB REGEX: the job's pending reason, once the scheduler gave one, matches.
reason_in() {
  [[ $(call GET "slurm/$P/job/$1") == 200 ]] || return 1
  [[ $(jq -r '.jobs[0].state_reason' "$RESP") =~ ^($2)$ ]]
}
# array_pending_is ARRAY TASKS: the array's record of pending tasks holds TASKS (a pending task that is
# cancelled just leaves it: there is no record of it).
array_pending_is() {
  [[ $(call GET "slurm/$P/job/$1") == 200 ]] || return 1
  jq -e --arg want "$2" '.jobs[] | select(.array_task_string != "") | .array_task_string == $want' "$RESP"
}
# Every record of array $1: N running and the rest pending for Resources.
array_settled() {
  [[ $(call GET "slurm/$P/job/$1") == 200 ]] || return 1
  jq -e --argjson running "$2" '([.jobs[] | select(.job_state == ["RUNNING"])] | length) == $running
    and ([.jobs[] | select(.job_state == ["PENDING"]) | .state_reason] | all(. == "Resources"))' "$RESP"
}
# From the listing: GET node/<name> answers with the allocation as of the last listing (26.05.5: a
# node running its first job reads ALLOCATED with alloc_cpus 0 until someone lists all nodes).
node_is() {
  [[ $(call GET "slurm/$P/nodes") == 200 ]] || return 1
  jq -e --arg name "$1" --arg want "$2" '.nodes[] | select(.name == $name) | .state | join("+") == $want' "$RESP"
}
node_has() {
  [[ $(call GET "slurm/$P/nodes") == 200 ]] || return 1
  jq -e --arg name "$1" --arg flag "$2" '.nodes[] | select(.name == $name) | .state | index($flag) != null' "$RESP"
}

# rec_unchanged NAME LISTING [QUERY]: records LISTING?QUERY, then with update_time=<its last_update> as
# NAME; fails unless that says nothing changed (something may change in between: the caller polls).
rec_unchanged() {
  local name=$1 listing=$2 query=${3-} last
  rec "$listing" GET "$listing${query:+?$query}"
  last=$(jq -r '.last_update.number' "$DIR/$listing.json")
  rec "$name" GET "$listing?${query:+$query&}update_time=$last"
  [[ $(cat "$DIR/$name.status") == 304 ]] || jq -e '.[$l] | length == 0' --arg l "$listing" "$DIR/$name.json"
}

# --- the scenario ----------------------------------------------------------------------------------

scenario() {
  rec ping GET ping
  NO_TOKEN=1 rec ping-no-token GET ping
  local bad
  bad=$(sign <(head -c 64 /dev/urandom) root)
  USE_TOKEN=$bad rec ping-bad-token GET ping
  USE_TOKEN=$bad rec jobs-bad-token GET "jobs?$JOBS_QUERY"
  USE_TOKEN=$bad rec nodes-bad-token GET nodes
  rec partitions GET partitions
  rec nodes-idle GET nodes

  # Jobs that end at once: completed, failed.
  local done failed alloc multi running array pending held big
  done=$(submit submit "$(job '{"name":"done","script":"#!/bin/sh\ntrue"}')")
  failed=$(submit submit-failing "$(job '{"name":"failed","script":"#!/bin/sh\nexit 3"}')")
  poll 30 "job $done to complete" job_is "$done" COMPLETED
  poll 30 "job $failed to fail" job_is "$failed" FAILED
  rec job-completed GET "job/$done"

  # An allocation while there is room, then cancelled.
  rec allocate POST job/allocate "$(job '{"name":"alloc","immediate":true}' | jq -c 'del(.job.script)')"
  alloc=$(jq -r '.job_id // empty' "$DIR/allocate.json")
  [[ -n $alloc ]] || die "allocate gave no job id"
  poll 30 "allocation $alloc to run" job_is "$alloc" RUNNING
  rec job-allocated GET "job/$alloc"
  rec cancel DELETE "job/$alloc"
  poll 30 "allocation $alloc to end" job_is "$alloc" CANCELLED
  poll 30 "nodes to be free" no_job_holds_a_node
  rec cancel-done DELETE "job/$alloc"
  rec cancel-unknown DELETE job/999999

  # A 2-node job (1 CPU on each): both nodes MIXED.
  multi=$(submit submit-multinode "$(job '{"name":"multi","minimum_nodes":2,"maximum_nodes":2,"tasks":2,"tasks_per_node":1}')")
  poll 30 "job $multi to run" job_is "$multi" RUNNING
  poll 30 "r1 to be MIXED" node_is r1 MIXED
  poll 30 "r2 to be MIXED" node_is r2 MIXED
  rec nodes-mixed GET nodes

  # One CPU left after this one: an array's first task takes it, the others wait for Resources.
  running=$(submit submit-commented "$(job '{"name":"running","comment":"pod default/web-0","admin_comment":"{\"sunk\":\"placeholder\"}"}')")
  poll 30 "job $running to run" job_is "$running" RUNNING
  array=$(submit submit-array "$(job '{"name":"array","array":"0-3"}')")
  poll 30 "array $array: one task running" array_settled "$array" 1
  rec job-array GET "job/$array"
  rec job-array-task-running GET "job/${array}_0"
  rec job-array-task-pending GET "job/${array}_1"
  rec allocate-full POST job/allocate "$(job '{"name":"alloc-full","immediate":true}' | jq -c 'del(.job.script)')"

  pending=$(submit submit-pending "$(job '{"name":"pending"}')")
  poll 30 "job $pending to wait" reason_in "$pending" 'Priority|Resources'
  held=$(submit submit-held "$(job '{"name":"held","hold":true}')")
  poll 30 "job $held to be held" reason_in "$held" 'JobHeldUser|JobHeldAdmin'
  big=$(submit submit-big "$(job '{"name":"big","minimum_nodes":2,"cpus_per_task":2,"tasks":2,"tasks_per_node":1}')")
  poll 30 "job $big to wait" reason_in "$big" 'Priority|Resources'
  rec nodes-allocated GET nodes

  # Refusals.
  rec submit-unknown-partition POST job/submit "$(job '{"name":"refused","partition":"nope"}')"
  rec submit-mistyped POST job/submit "$(job '{"name":"mistyped","cpus_per_task":"two"}')"
  rec submit-no-cwd POST job/submit "$(job '{"name":"no-cwd"}' | jq -c 'del(.job.current_working_directory)')"

  rec job-running GET "job/$running"
  rec job-pending GET "job/$pending"
  rec job-unknown GET job/999999

  # Updates: an admin comment on a running job, placement limits on a pending one, and an unknown job.
  rec update-job POST "job/$running" '{"admin_comment":"{\"sunk\":\"updated\"}"}'
  rec update-job-excluded POST "job/$pending" '{"excluded_nodes":["r2"]}'
  rec job-pending-excluded GET "job/$pending"
  rec update-job-excluded-clear POST "job/$pending" '{"excluded_nodes":[""]}'
  rec update-job-unknown POST job/999999 '{"admin_comment":"x"}'

  # The full listing, and the same asked with its last_update.
  poll 30 "a job listing with nothing changed since" rec_unchanged jobs-unchanged jobs "$JOBS_QUERY"

  # Nodes: unchanged since the last listing, then after a change (drain).
  poll 30 "a node listing with nothing changed since" rec_unchanged nodes-unchanged nodes
  local nodes_last
  nodes_last=$(jq -r '.last_update.number' "$DIR/nodes.json")
  rec node-drain POST node/r1 '{"state":["DRAIN"],"reason":"k8s: cordoned by contract test"}'
  poll 30 "r1 to drain" node_has r1 DRAIN
  rec nodes-changed GET "nodes?update_time=$nodes_last"
  rec node-resume-not-drained POST node/r2 '{"state":["RESUME"]}'
  # dyn1 as sunk sees a node whose pod is gone: its slurmd stopped, drained, then down, then deleted.
  kill "$DYN1_PID"
  rec node-dyn1-drain POST node/dyn1 '{"state":["DRAIN"],"reason":"k8s: node going away"}'
  rec node-dyn1-down POST node/dyn1 '{"state":["DOWN"],"reason":"k8s: node gone"}'
  poll 30 "dyn1 to be down" node_has dyn1 DOWN
  rec nodes-drained-down GET nodes
  rec node-undrain POST node/r1 '{"state":["UNDRAIN"]}'
  rec node-undrain-again POST node/r1 '{"state":["UNDRAIN"]}'
  rec node-unknown GET node/nosuchnode
  rec node-delete DELETE node/dyn1
  rec node-delete-unknown DELETE node/nosuchnode

  # Cancels: one pending task of an array (it leaves the array's pending record), then one DELETE jobs
  # for a pending job, an unknown one and one already over.
  rec cancel-array-task DELETE "job/${array}_3"
  poll 30 "task ${array}_3 to leave the array's pending tasks" array_pending_is "$array" 1-2
  rec cancel-jobs DELETE jobs "$(jq -cn --arg a "$held" --arg b "$done" '{jobs: [$a, "999999", $b]}')"
  poll 30 "job $held to be cancelled" job_is "$held" CANCELLED

  # Slurm's own preemption: an urgent job needing both of r2's CPUs requeues what runs there.
  local urgent
  urgent=$(submit submit-urgent "$(job '{"name":"urgent","partition":"urgent","cpus_per_task":2,"required_nodes":["r2"]}')")
  poll 30 "urgent job $urgent to run" job_is "$urgent" RUNNING
  rec jobs-preempted GET "jobs?$JOBS_QUERY"
  rec job-preempted GET "job/$multi"

  external
}

# Placeholders with no script (flag EXTERNAL_JOB, parsers v0.0.43 and later; v0.0.42 refuses the flag).
external() {
  if [[ $P == v0.0.42 ]]; then
    rec submit-external POST job/submit "$(job '{"name":"external","flags":["EXTERNAL_JOB"]}' | jq -c 'del(.job.script)')"
    return 0
  fi
  in_root scancel --quiet --user=root
  poll 30 "jobs to end" no_job_holds_a_node
  rec submit-external POST job/submit "$(job '{"name":"external","flags":["EXTERNAL_JOB"]}' | jq -c 'del(.job.script)')"
  local ext ext_alloc node other urgent
  ext=$(jq -r '.job_id // empty' "$DIR/submit-external.json")
  [[ -n $ext ]] || die "no external job"
  poll 30 "external job $ext to run" job_is "$ext" RUNNING
  rec job-external GET "job/$ext"
  node=$(jq -r '.jobs[0].nodes' "$DIR/job-external.json")
  [[ $node == r1 ]] && other=r2 || other=r1
  poll 30 "$node to be MIXED" node_is "$node" MIXED
  rec nodes-external GET nodes
  rec submit-external-script POST job/submit "$(job '{"name":"external-script","flags":["EXTERNAL_JOB"]}')"
  rec allocate-external POST job/allocate \
    "$(job "{\"name\":\"external-alloc\",\"flags\":[\"EXTERNAL_JOB\"],\"immediate\":true,\"required_nodes\":[\"$other\"]}" | jq -c 'del(.job.script)')"
  ext_alloc=$(jq -r '.job_id // empty' "$DIR/allocate-external.json")
  [[ -n $ext_alloc ]] || die "no external allocation"
  poll 30 "external allocation $ext_alloc to run" job_is "$ext_alloc" RUNNING
  # PreemptMode=REQUEUE cannot requeue an external job: it ends PREEMPTED.
  urgent=$(submit submit-urgent-external "$(job "{\"name\":\"urgent-external\",\"partition\":\"urgent\",\"cpus_per_task\":2,\"required_nodes\":[\"$node\"]}")")
  poll 30 "urgent job $urgent to run" job_is "$urgent" RUNNING
  rec job-external-preempted GET "job/$ext"
  # Requeue has its own endpoints from v0.0.45 on (GET job/{id}/requeue, POST jobs/requeue).
  if [[ $P == "${parsers[-1]}" && -f $plugins/data_parser_v0_0_45.so ]]; then
    rec requeue GET "/slurm/v0.0.45/job/$urgent/requeue"
    poll 30 "job $urgent to be requeued" reason_in "$urgent" 'BeginTime|Priority|Resources'
    rec job-requeued GET "job/$urgent"
    rec requeue-external GET "/slurm/v0.0.45/job/$ext_alloc/requeue"
    rec requeue-jobs POST /slurm/v0.0.45/jobs/requeue "$(jq -cn --arg a "$ext_alloc" '{jobs: [$a, "999999"]}')"
  fi
  rec cancel-external DELETE "job/$ext_alloc"
  poll 30 "external allocation $ext_alloc to end" job_is "$ext_alloc" CANCELLED
}

# assemble DIR: the exchanges rec left in DIR as one object keyed by name, {request, status} plus the answer:
# `response` (JSON), `response_text` (anything else) or neither (no body). One file per parser rather than
# three per exchange: hundreds of small files took more than twice their size on disk.
assemble() {
  local request base json text
  for request in "$1"/*.request.json; do
    base=${request%.request.json}
    json=/dev/null text=/dev/null
    [[ -f $base.json ]] && json=$base.json
    [[ -f $base.body ]] && text=$base.body
    jq -n --arg name "${base##*/}" --slurpfile request "$request" --rawfile status "$base.status" \
      --slurpfile json "$json" --rawfile text "$text" \
      '{($name): ({request: $request[0], status: ($status | rtrimstr("\n") | tonumber)}
        + if $json != [] then {response: $json[0]} elif $text != "" then {response_text: $text} else {} end)}'
  done | jq -S --indent 1 -s add
}

# Recorded aside, then swapped in: a failed run leaves the previous fixtures as they were.
FINAL=$OUT
OUT=$(mktemp -d "$FINAL.recording.XXXX")
trap 'stop_all; rm -rf "$OUT"' EXIT
for P in "${parsers[@]}"; do
  DIR=$OUT/$P
  mkdir -p "$DIR"
  log "$P: starting a fresh cluster"
  start_cluster
  if [[ $P == "${parsers[0]}" ]]; then
    # The whole document is about 1 MB: keep what tells versions apart.
    [[ $(call GET openapi/v3) == 200 ]] || die "GET /openapi/v3 failed"
    jq -S --indent 1 '{info: .info, paths: (.paths | keys | sort)}' "$RESP" >"$OUT/openapi-paths.json"
    # Per parser: the enums sunk matches on, and the fields of a job and of a node.
    jq -S --indent 1 '. as $doc
      | def deref: if type == "object" and has("$ref") then $doc.components.schemas[.["$ref"] | split("/") | last] else . end;
        def values: deref | if . == null then null elif has("items") then .items | deref | .enum else .enum end;
      [.paths | keys[] | capture("^/slurm/(?<p>v[0-9.]+)/").p] | unique | map(. as $p | {($p): {
        job_flags: ($doc.components.schemas[$p + "_job_info"].properties.flags? | values),
        job_states: ($doc.components.schemas[$p + "_job_info"].properties.job_state? | values),
        node_states: ($doc.components.schemas[$p + "_node"].properties.state? | values),
        job_fields: ($doc.components.schemas[$p + "_job_info"].properties // {} | keys),
        job_desc_fields: ($doc.components.schemas[$p + "_job_desc_msg"].properties // {} | keys),
        node_fields: ($doc.components.schemas[$p + "_node"].properties // {} | keys)
      }}) | add' "$RESP" >"$OUT/openapi-schemas.json"
  fi
  if [[ -n ${SUNK_RECORD_HOLD:-} ]]; then
    log "holding: token $TOKEN, url $URL; kill $$ to stop"
    sleep infinity &
    wait $!
  fi
  scenario
  stop_cluster
  assemble "$DIR" >"$OUT/$P.json"
done
for P in "${parsers[@]}"; do
  mv "$OUT/$P.json" "$FINAL/"
done
mv "$OUT"/openapi-*.json "$FINAL/"
log "fixtures in $FINAL"

# Process helpers for the cluster scripts. Sourced after env.sh, never executed.

# start NAME CMD...: runs CMD in the background in its own session, pid in pids/NAME.pid, output
# appended to logs/NAME.log.
start() {
  local name=$1; shift
  setsid "$@" >>"$SUNK_STATE/logs/$name.log" 2>&1 </dev/null &
  echo $! >"$SUNK_STATE/pids/$name.pid"
  # The command too, so that a test can restart the component as a supervisor would.
  printf '%q ' "$@" >"$SUNK_STATE/pids/$name.cmd"
}

# wait_for WHAT SECONDS CMD...: polls CMD until it succeeds.
wait_for() {
  local what=$1 seconds=$2; shift 2
  for _ in $(seq $((seconds * 5))); do "$@" >/dev/null 2>&1 && return 0; sleep 0.2; done
  die "$what did not come up in ${seconds}s; logs in $SUNK_STATE/logs"
}

# stop_pid PID: TERM, then KILL after 5 s.
stop_pid() {
  local pid=$1
  kill -TERM "$pid" 2>/dev/null || return 0
  for _ in $(seq 50); do kill -0 "$pid" 2>/dev/null || return 0; sleep 0.1; done
  kill -KILL "$pid" 2>/dev/null || true
}

# token_of USER: the API server token of USER (written by up.sh).
token_of() { awk -F, -v user="$1" '$2==user{print $1}' "$SUNK_STATE/pki/tokens.csv"; }

# kubeconfig FILE USER TOKEN: a kubeconfig for the local API server.
kubeconfig() {
  local file=$1 user=$2 token=$3
  cat >"$file" <<KUBECONFIG
apiVersion: v1
kind: Config
clusters:
- name: sunk-local
  cluster:
    server: https://$BRIDGE_IP:$APISERVER_PORT
    certificate-authority-data: $(base64 -w0 "$SUNK_STATE/pki/ca.crt")
users:
- name: $user
  user:
    token: $token
contexts:
- name: sunk-local
  context: {cluster: sunk-local, user: $user}
current-context: sunk-local
KUBECONFIG
}

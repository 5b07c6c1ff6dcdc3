# Sourced by the hook pods' scripts (bash): Slurm's REST API without a Slurm client. Slurm's
# commands (auth/slurm, 24.11 and later) authenticate through a local daemon's socket (slurmctld,
# slurmd or sackd), which these pods do not have; slurmrestd takes a JWT signed with the cluster's
# JWT key instead.
# Env: SLURMRESTD (host:port), JWT_KEY (path of the key), SLURM_USER (whom its tokens name).

b64url() { openssl base64 -A | tr '+/' '-_' | tr -d '='; }

# hmac_sha256 KEYFILE: the HMAC-SHA256 of stdin under the key in KEYFILE, raw. The key is read by
# redirection and padded with bash builtins, so it is on no command line (where `ps` would show it);
# openssl only hashes.
hmac_sha256() {
  local key ipad="" opad="" i byte escape
  if (($(stat -c %s "$1") > 64)); then
    key=$(openssl dgst -sha256 -binary <"$1" | od -An -v -tx1 | tr -d ' \n')
  else
    key=$(od -An -v -tx1 <"$1" | tr -d ' \n')
  fi
  while ((${#key} < 128)); do key+=00; done
  for ((i = 0; i < 128; i += 2)); do
    byte=$((16#${key:i:2}))
    printf -v escape '\\x%02x' $((byte ^ 0x36))
    ipad+=$escape
    printf -v escape '\\x%02x' $((byte ^ 0x5c))
    opad+=$escape
  done
  # shellcheck disable=SC2059 # the pads are escapes printf must expand
  { printf "$opad"; { printf "$ipad"; cat; } | openssl dgst -sha256 -binary; } | openssl dgst -sha256 -binary
}

# jwt USER: an HS256 token for USER, valid for one minute: each is signed for one request, sent at
# once (the rest is for the clocks of this pod's Node and slurmctld's differing).
jwt() {
  local now header payload sig
  now=$(date +%s)
  header=$(printf '{"alg":"HS256","typ":"JWT"}' | b64url)
  payload=$(printf '{"iat":%d,"exp":%d,"sun":"%s"}' "$now" $((now + 60)) "$1" | b64url)
  sig=$(printf '%s.%s' "$header" "$payload" | hmac_sha256 "$JWT_KEY" | b64url)
  printf '%s.%s.%s' "$header" "$payload" "$sig"
}

# slurm_get PATH: slurmrestd's whole response (status line, headers, body) to a GET as the host's
# Slurm user (SLURM_USER, the chart's `slurm.user`: SlurmUser by default).
slurm_get() {
  local token
  token=$(jwt "$SLURM_USER")
  exec 3<>"/dev/tcp/${SLURMRESTD%:*}/${SLURMRESTD#*:}"
  # Connection: close, or slurmrestd 26.05 keeps even an HTTP/1.0 connection open (until its idle
  # time-out) and the read below waits for it.
  printf 'GET %s HTTP/1.0\r\nHost: %s\r\nConnection: close\r\nX-SLURM-USER-TOKEN: %s\r\n\r\n' "$1" "${SLURMRESTD%:*}" "$token" >&3
  cat <&3
  exec 3<&-
}

# status_line RESPONSE: the first line, without its CR.
status_line() { local line=${1%%$'\n'*}; printf '%s' "${line%$'\r'}"; }

# slurm_node_count: how many node records Slurm has.
slurm_node_count() {
  local response
  response=$(slurm_get /slurm/v0.0.42/nodes) || return 1
  [[ $(status_line "$response") == *" 200 "* ]] || return 1
  grep -c '"architecture":' <<<"$response" || true
}

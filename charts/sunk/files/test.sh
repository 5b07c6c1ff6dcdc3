#!/bin/bash
# `helm test`: slurmrestd serves the REST API with a JWT signed by the chart's key and reaches
# slurmctld, and the host is ready.
# Env: SLURMRESTD, JWT_KEY, HOST_ADDRESS, HOST_READY_PATH.
set -euo pipefail
source /etc/sunk/scripts/slurm-api.sh

response=$(slurm_get /slurm/v0.0.42/ping)
echo "slurmrestd /slurm/v0.0.42/ping: $(status_line "$response")"
[[ $(status_line "$response") == *" 200 "* ]]
[[ $response == *'"pinged": "UP"'* ]] || { echo "slurmctld is not UP: $response"; exit 1; }

exec 4<>"/dev/tcp/${HOST_ADDRESS%:*}/${HOST_ADDRESS#*:}"
printf 'GET %s HTTP/1.0\r\nHost: %s\r\n\r\n' "$HOST_READY_PATH" "${HOST_ADDRESS%:*}" >&4
host=$(cat <&4)
echo "host $HOST_READY_PATH: $(status_line "$host")"
[[ $(status_line "$host") == *" 200 "* ]]

nodes=$(slurm_node_count)
echo "Slurm node records: $nodes"
echo ok

#!/bin/sh
# Starts slapd with the configuration SLAPD_CONF (slapd.conf format), its database emptied and loaded
# from the LDIF SLAPD_SEED on every start, listening on ldap://:1389; further arguments go to slapd
# (e.g. -d stats for a log line per request).
set -eu
conf=${SLAPD_CONF:?the slapd.conf to run}
seed=${SLAPD_SEED:?the LDIF to load}
data=$(sed -n 's/^directory[[:space:]]\{1,\}//p' "$conf")
[ -n "$data" ] || { echo "$conf names no database directory" >&2; exit 2; }
mkdir -p "$data"
rm -rf "${data:?}"/*
slapadd -q -f "$conf" -l "$seed"
exec slapd -d 0 -f "$conf" -h "ldap://:1389/" "$@"

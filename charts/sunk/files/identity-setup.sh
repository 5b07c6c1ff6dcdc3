#!/bin/sh
# Init step of every pod users' jobs or logins run in (root): the image's users and groups and the
# chart's own (slurmCluster.identity; none with identity.ldap, whose users come from the directory),
# written to /etc/sunk/resolved, which the pod's containers mount over /etc/passwd and /etc/group.
# With HOMES set (the shared home's mount), each declared user's home under it is made once, owned
# by the user; an existing one is left as it is.
set -eu
for database in passwd group; do
  cat "/etc/$database" "/etc/sunk/identity/$database" >"/etc/sunk/resolved/$database"
  chmod 0644 "/etc/sunk/resolved/$database"
done
[ -n "${HOMES:-}" ] || exit 0
while IFS=: read -r name _ uid gid _ home _; do
  case $home in
    "$HOMES"/?*)
      [ -d "$home" ] && continue
      install -d -o "$uid" -g "$gid" -m 0750 "$home"
      echo "made $name's home $home"
      ;;
  esac
done </etc/sunk/identity/homes

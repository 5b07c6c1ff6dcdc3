#!/bin/sh
# Init container of login pods (root). sshd's configuration, host key and the users' authorized keys
# go to an emptyDir, owned and writable by root alone (sshd checks every directory above a key file);
# the cluster key goes to sackd's own emptyDir, SlurmUser's alone, which the sshd container (where
# users are) never mounts; the users and groups, and their homes, as in every Slurm pod.
set -eu
sh "$(dirname "$0")/identity-setup.sh"
sshd=/etc/ssh/sunk
chmod 0755 "$sshd"
install -m 0644 /etc/sunk/login/sshd_config "$sshd/sshd_config"
install -m 0600 /etc/sunk/host-key/ssh_host_ecdsa_key "$sshd/ssh_host_ecdsa_key"
install -d -m 0755 "$sshd/authorized_keys"
for keys in /etc/sunk/login/authorized_keys.*; do
  [ -e "$keys" ] || continue
  install -m 0644 "$keys" "$sshd/authorized_keys/${keys##*/authorized_keys.}"
done
# `helm test`'s key: the test user's too, allowed only its forced command.
if [ -e /etc/sunk/test-key/id_ecdsa ]; then
  install -m 0755 /etc/sunk/login/helm-test.sh "$sshd/helm-test.sh"
  printf 'restrict,command="/bin/sh %s/helm-test.sh" %s\n' "$sshd" "$(ssh-keygen -y -f /etc/sunk/test-key/id_ecdsa)" \
    >>"$sshd/authorized_keys/$(cat /etc/sunk/login/helm-test-user)"
fi
install -o slurm -g slurm -m 0600 /etc/sunk/slurm-key/slurm.key /etc/slurm/slurm.key
chown slurm:slurm /etc/slurm /run/slurm
chmod 0755 /etc/slurm /run/slurm
echo "login setup: users $(ls "$sshd/authorized_keys" | tr '\n' ' ')"

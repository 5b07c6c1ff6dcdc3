#!/bin/sh
# Starts MariaDB for slurmdbd: a data directory made on first start; the database and the user with
# the password from MARIADB_PASSWORD_FILE made or brought up to date on every start, through a local
# socket as the mysql account mariadb-install-db made (no password, no network); then mariadbd in
# the foreground with any arguments given (e.g. --innodb-buffer-pool-size=64M).
set -eu
data=/var/lib/mysql
database=${MARIADB_DATABASE:-slurm_acct_db}
user=${MARIADB_USER:-slurm}
password=$(cat "${MARIADB_PASSWORD_FILE:?the file holding the database user's password}")
case $database$user in *[!A-Za-z0-9_]*) echo "MARIADB_DATABASE and MARIADB_USER: letters, digits and _ only" >&2; exit 2 ;; esac
escaped=$(printf '%s' "$password" | sed "s/\\\\/\\\\\\\\/g; s/'/\\\\'/g")

if [ ! -d "$data/mysql" ]; then
  mariadb-install-db --user=mysql --datadir="$data" --skip-test-db --auth-root-authentication-method=socket >/dev/null
fi
mariadbd --datadir="$data" --skip-networking --socket=/run/mysqld/setup.sock &
setup=$!
for _ in $(seq 60); do mariadb-admin --socket=/run/mysqld/setup.sock ping >/dev/null 2>&1 && break; sleep 0.5; done
mariadb --socket=/run/mysqld/setup.sock <<SQL
CREATE DATABASE IF NOT EXISTS \`$database\`;
CREATE USER IF NOT EXISTS '$user'@'%' IDENTIFIED BY '$escaped';
ALTER USER '$user'@'%' IDENTIFIED BY '$escaped';
GRANT ALL ON \`$database\`.* TO '$user'@'%';
FLUSH PRIVILEGES;
SQL
mariadb-admin --socket=/run/mysqld/setup.sock shutdown
wait "$setup" || true
exec mariadbd --datadir="$data" --bind-address=0.0.0.0 --port=3306 "$@"

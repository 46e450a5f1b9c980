#!/bin/bash
# Runs inside a container of the tandem image (deploy/Dockerfile: the Debian
# packages installed with apt into a debootstrapped Debian 12), as root,
# from tests/docker/docker_test.py: the daemons start from their packaged
# systemd units and configuration, and a private round completes.
#   1. TLS material as an operator makes it (tandem-make-certs, one host
#      playing the three operators), readable by the group tandem;
#   2. the operator's edits of the packaged configuration: the aggregators'
#      and coordinator's peer addresses (this host);
#   3. every unit's ExecStart line, run as systemd would (no systemd in a
#      container): its User/Group, its StateDirectory created 0750 for that
#      user, its UMask, no new privileges;
#   4. a task created with tandem-admin over the admin listener of the
#      packaged flags, 10 tandem-client devices enrolled with the operator's
#      tokens, and one released round read back with tandem-status.
# Usage: units_round.sh TASK_SPEC   (exit 0: the round was released)
set -euo pipefail
spec="$1"
say() { echo "units-round: $*"; }
fail() {
  echo "units-round: FAIL: $*" >&2
  for f in /tmp/units/*.log; do echo "--- $f" >&2; tail -15 "$f" >&2; done
  exit 1
}
mkdir -p /tmp/units
tls=/etc/tandem/tls
[ -d "$tls" ] || fail "the packages' postinst made no $tls"
[ "$(stat -c %U:%G:%a "$tls")" = "root:tandem:750" ] || fail "$tls is $(stat -c %U:%G:%a "$tls")"
tandem-make-certs --one-host --key-mode 0640 "$tls" >/tmp/units/make-certs.log 2>&1 ||
  fail "tandem-make-certs"
chgrp -R tandem "$tls"
sed -i 's/helper\.tandem\.internal/127.0.0.1/' /etc/tandem/aggregator-leader.textproto
sed -i 's/leader\.tandem\.internal/127.0.0.1/; s/helper\.tandem\.internal/127.0.0.1/' \
  /etc/tandem/coordinator.flags

# 3. unit -> the command systemd would run (%i: the instance).
start_unit() {  # unit-file instance
  local file="$1" inst="$2" name cmd state user umask_
  name="$(basename "$file" .service)${inst:+$inst}"
  cmd="$(sed -n 's/^ExecStart=//p' "$file" | sed "s/%i/$inst/g")"
  state="$(sed -n 's/^StateDirectory=//p' "$file" | sed "s/%i/$inst/g")"
  user="$(sed -n 's/^User=//p' "$file")"
  umask_="$(sed -n 's/^UMask=//p' "$file")"
  [ -n "$cmd" ] && [ -n "$state" ] && [ "$user" = tandem ] || fail "$file: ExecStart/StateDirectory/User"
  grep -q '^NoNewPrivileges=yes' "$file" || fail "$file: no NoNewPrivileges"
  install -d -m 0750 -o "$user" -g "$user" "/var/lib/$state"
  say "$name: $cmd (as $user, state /var/lib/$state)"
  # shellcheck disable=SC2086
  setpriv --reuid="$user" --regid="$user" --init-groups --no-new-privs -- \
    sh -c "umask $umask_; exec $cmd" >"/tmp/units/$name.log" 2>&1 &
}
units=/usr/lib/systemd/system
start_unit "$units/tandem-aggregator@.service" helper
start_unit "$units/tandem-aggregator@.service" leader
start_unit "$units/tandem-coordinator.service" ""
start_unit "$units/tandem-worker.service" ""

# 4. The operator's task, then the devices.
TANDEM_CREATE_WAIT_S=60 tandem-create-task tandem-admin task create --spec="$spec" \
  --admin=127.0.0.1:7003 --tls_cert="$tls/operator.pem" --tls_key="$tls/operator.key" \
  --tls_ca="$tls/coordinator-ca.pem" >/tmp/units/create-task.log 2>&1 || fail "tandem-admin task create"
say "task default (Fashion-MNIST MLP) created through the admin listener"
for i in $(seq 0 9); do
  TANDEM_REPLICA_INDEX=$i tandem-client --coordinator=127.0.0.1:7000 --task_id=default \
    --tls_ca="$tls/client-roots.pem" --leader=127.0.0.1:7001 --leader_name=leader.tandem \
    --helper=127.0.0.1:7002 --helper_name=helper.tandem --dataset=fmnist --num_shards=10 \
    --shard="$i" --state_dir="/tmp/units/client$i" --enrollment_token_file="$tls/tokens.txt" \
    --enrollment_token_line_env=TANDEM_REPLICA_INDEX >"/tmp/units/client$i.log" 2>&1 &
done
status() {
  tandem-status --coordinator=127.0.0.1:7000 --tls_ca="$tls/client-roots.pem" \
    --server_name=coordinator.tandem --task_id=default "$@" 2>/dev/null
}
for _ in $(seq 1 150); do
  if status --json | grep -q '"completedRounds": *"\?[1-9]'; then
    say "round released:"
    status
    exit 0
  fi
  sleep 1
done
status >&2 || true
fail "no round released in 150 s"

#!/usr/bin/env bash
# Makes the TLS material of a tandem deployment with the openssl CLI
# (Debian 12's openssl 3.0 or later):
#
#   three CAs, one per trust domain (operator), each name-constrained to the
#   names of its own party (and of the services that party runs), so that a
#   bundle trusting several CAs still lets no operator issue a certificate for
#   another party's name:
#     leader-ca.{pem,key}        leader operator (the leader, its database)
#     helper-ca.{pem,key}        helper operator (the helper, its database)
#     coordinator-ca.{pem,key}   coordinator operator (the coordinator, the
#                                ML worker it runs)
#   one certificate per party, issued by its operator's CA, usable as TLS
#   server and client certificate (EC P-256, SHA-256):
#     leader.{pem,key}  helper.{pem,key}  coordinator.{pem,key}
#     SANs: <role>.tandem (the identity the configs name, listed first), the
#     docker-compose service name <role> and the k8s Service names of
#     deploy/k8s (tandem-<role>[.tandem-<role>[.svc[.cluster.local]]])
#   the ML worker's certificate, issued by the coordinator operator's CA (the
#   worker is the coordinator operator's: it receives the coordinator's
#   released models and held-out data), TLS server only:
#     worker.{pem,key}
#     SANs: worker.tandem (its identity: the coordinator's --worker_name), the
#     compose service name worker and its k8s Service names
#     (tandem-worker[.tandem-compute[.svc[.cluster.local]]])
#   the coordinator operator's own certificate for the coordinator's admin
#   listener (the task and device API: tandem-admin --tls_cert/--tls_key; the
#   coordinator's --admin_identities=operator.tandem), issued by the
#   coordinator operator's CA, TLS client only:
#     operator.{pem,key}
#     SAN: operator.tandem, nothing else (no host name: it serves nothing, so
#     not localhost or 127.0.0.1 either, even with --one-host)
#   each replicated aggregator's PostgreSQL server certificate, issued by that
#   aggregator operator's CA, TLS server only (deploy/k8s/*-replicated.yaml:
#   the aggregators connect with sslmode=verify-full, sslrootcert=<role>-ca.pem):
#     leader-db.{pem,key}  helper-db.{pem,key}
#     SANs: tandem-<role>-db.tandem-<role>.svc (what the conninfo names, first),
#     with .cluster.local, tandem-<role>-db.tandem-<role>, tandem-<role>-db
#   the coordinator's Ed25519 upload ticket key:
#     ticket.key (PKCS#8, the coordinator's --ticket_key)
#     ticket.pub (SubjectPublicKeyInfo, the aggregators' coordinator key)
#   the coordinator operator's Ed25519 device enrollment key and tokens:
#     enroll.key (PKCS#8, what `tandem-admin token mint --signing_key` takes)
#     enroll.pub (the coordinator's --enrollment_keys)
#     tokens.txt (64 single-use enrollment tokens, one per line, valid
#                 --token-days; kept unless enroll.key is remade, they expire
#                 within a day, or --force)
#     tokens.expiry (when they expire, seconds since the epoch)
#   the trust bundles (PEM roots) of each party:
#     leader-roots.pem       coordinator CA (collector listener) + helper CA (its peer)
#     helper-roots.pem       coordinator CA (collector listener) + leader CA (peer listener)
#     coordinator-roots.pem  leader CA + helper CA (the aggregators it calls)
#     client-roots.pem       leader CA + helper CA + coordinator CA (clients)
#     worker-roots.pem       coordinator CA: the worker's --tls_ca (its callers)
#                            and the coordinator's --worker_ca (the worker)
#   (the coordinator's --admin_ca, verifying operator.pem, and the operator's
#   tandem-admin --tls_ca, verifying the coordinator, are coordinator-ca.pem)
#
# No CA may issue localhost or an IP address (the constraints exclude every
# IP address), unless --one-host: then each CA may also issue DNS:localhost
# and IP:127.0.0.1, and every party certificate that serves (all but
# operator.pem) carries both, for one-host
# demos only (deploy/run-main.sh, the compose file and compose_local.py:
# their clients reach the coordinator at 127.0.0.1 and verify that name).
# A folder made with the other setting, or by an older make-certs.sh whose
# CAs permit other names (e.g. one made before operator.pem, whose
# coordinator CA cannot issue operator.tandem), is refused, changing
# nothing (rerun with --force to remake it: new CAs and keys).
#
# Why a certificate's aliases cannot name another party: (1) the name
# constraints above, checked by every TLS peer when it verifies the chain,
# let a CA issue only its own party's DNS names; URIs and e-mail names only
# under the reserved domain "invalid" (gRPC puts every SAN, DNS, URI, e-mail
# or IP, among the identities a caller gate sees, so those types are bound
# too); (2) the callers' gates (--coordinator_identity, --leader_identity,
# --admin_identities, the worker's --callers and --model_writers) match exact
# identities, e.g. coordinator.tandem, never a suffix or an alias; (3) clients
# pin both aggregators' names (--leader_name, --helper_name) and refuse one
# name for both roles. So each certificate names one party: coordinator.pem
# carries coordinator.tandem and only its own DNS aliases, never the
# worker's or the operator's names (worker.pem is a separate, server-only
# certificate, operator.pem a separate, client-only one).
#
# Usage: deploy/make-certs.sh [--force] [--one-host] [--days N] [--ca-days N]
#                             [--key-mode MODE] [--token-days N] [DIR]
#   DIR         output directory (default deploy/certs, git-ignored)
#   --force     remake everything (new CAs, new keys); without it, existing
#               files are kept and only missing ones are made (a certificate
#               whose CA is remade is reissued); a half-present pair, a
#               certificate that does not chain to its CA or match its key,
#               or a CA or certificate whose names differ from this run's
#               (--one-host or not, an older make-certs.sh) is an error
#   --one-host  one-host demos only: the CAs may also issue, and the party
#               certificates carry, DNS:localhost and IP:127.0.0.1
#   --days      validity of the party certificates (default 825)
#   --ca-days   validity of the CAs (default 3650)
#   --token-days  validity of the enrollment tokens (default 30)
#   --renew-days  a kept party certificate that expires within this many days
#               is reissued by its CA with a new key (default 30): rerun this
#               script from cron, then send the daemons SIGHUP (they reload
#               their certificates, keys and roots without a restart)
#   --key-mode  mode of the parties' private keys, ticket.key and tokens.txt
#               (default 0600; the CA keys stay 0600). Docker bind mounts
#               keep host ownership: the image's user (uid 10001) can read a
#               file only if it owns it (after this script: sudo chown 10001
#               DIR/{leader,helper,coordinator,operator,ticket}.key DIR/tokens.txt;
#               rerun this script with sudo then) or if the mode lets it
#               (0644: a throwaway one-host demo)
#
# One host plays the three operators here. In a real deployment each
# operator keeps its CA key to itself and gives the others only its CA
# certificate (the coordinator gives the aggregators only ticket.pub).
set -euo pipefail

usage() { sed -n '2,/^set -euo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; }

force=0
one_host=0
days=825
ca_days=3650
key_mode=0600
token_days=30
renew_days=30
dir=""
while [ $# -gt 0 ]; do
  case "$1" in
    --force) force=1 ;;
    --one-host) one_host=1 ;;
    --days) days="${2:?--days takes a value}"; shift ;;
    --days=*) days="${1#*=}" ;;
    --ca-days) ca_days="${2:?--ca-days takes a value}"; shift ;;
    --ca-days=*) ca_days="${1#*=}" ;;
    --key-mode) key_mode="${2:?--key-mode takes a value}"; shift ;;
    --key-mode=*) key_mode="${1#*=}" ;;
    --token-days) token_days="${2:?--token-days takes a value}"; shift ;;
    --token-days=*) token_days="${1#*=}" ;;
    --renew-days) renew_days="${2:?--renew-days takes a value}"; shift ;;
    --renew-days=*) renew_days="${1#*=}" ;;
    -h|--help) usage; exit 0 ;;
    -*) echo "make-certs: unknown option $1" >&2; usage >&2; exit 2 ;;
    *) [ -z "$dir" ] || { echo "make-certs: one directory only" >&2; exit 2; }; dir="$1" ;;
  esac
  shift
done
[ -n "$dir" ] || dir="$(cd "$(dirname "$0")" && pwd)/certs"
case "$days$ca_days$token_days$renew_days" in
  *[!0-9]*) echo "make-certs: --days/--ca-days/--token-days/--renew-days take a number" >&2
            exit 2 ;;
esac
case "$key_mode" in [0-7][0-7][0-7]|[0-7][0-7][0-7][0-7]) ;; *)
  echo "make-certs: --key-mode takes an octal mode" >&2; exit 2 ;; esac
command -v openssl >/dev/null || { echo "make-certs: openssl not found" >&2; exit 1; }

mkdir -p "$dir"
dir="$(cd "$dir" && pwd)"
tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT

ROLES=(leader helper coordinator)                    # the CAs (operators)
PARTIES=(leader helper coordinator worker operator leader-db helper-db)
made=()    # files written by this run
remade=()  # CAs made by this run

note() { printf 'make-certs: %-6s %s\n' "$1" "$2"; }

# The operator whose CA issues a party's certificate.
ca_of() {
  case "$1" in
    worker|operator) echo coordinator ;;
    *-db) echo "${1%-db}" ;;
    *) echo "$1" ;;
  esac
}

# Whether a party's certificate carries localhost and 127.0.0.1 (with
# --one-host): every one that serves; operator.pem only calls.
carries_local() {  # carries_local PARTY
  [ $one_host -eq 1 ] && [ "$1" != operator ]
}

# The DNS names a party's certificate carries, its identity first.
dns_names() {
  local p="$1" r
  case "$p" in
    operator)
      echo operator.tandem ;;
    worker)
      echo "worker.tandem worker tandem-worker tandem-worker.tandem-compute" \
           "tandem-worker.tandem-compute.svc tandem-worker.tandem-compute.svc.cluster.local" ;;
    *-db)
      r="${p%-db}"
      echo "tandem-$r-db.tandem-$r.svc tandem-$r-db.tandem-$r.svc.cluster.local" \
           "tandem-$r-db.tandem-$r tandem-$r-db" ;;
    *)
      r="$p"
      echo "$r.tandem $r tandem-$r tandem-$r.tandem-$r tandem-$r.tandem-$r.svc" \
           "tandem-$r.tandem-$r.svc.cluster.local" ;;
  esac
  if carries_local "$p"; then echo localhost; fi
}

# What a party's certificate may be used for: the three parties call each
# other (server and client); the worker and the databases only serve; the
# operator only calls (the coordinator's admin listener).
key_usage() {
  case "$1" in
    worker|*-db) echo serverAuth ;;
    operator) echo clientAuth ;;
    *) echo "serverAuth, clientAuth" ;;
  esac
}

# The names a CA may issue: its parties' names; IP addresses only with
# --one-host (127.0.0.1), else none; URIs and e-mail names only under the
# reserved domain "invalid", i.e. none a caller gate could mistake for an
# identity.
ca_names() {  # ca_names ROLE [PARTY]: "permitted;TYPE:VALUE" lines (without PARTY's)
  local r="$1" skip="${2:-}" p n
  for p in "${PARTIES[@]}"; do
    if [ "$(ca_of "$p")" != "$r" ] || [ "$p" = "$skip" ]; then continue; fi
    for n in $(dns_names "$p"); do echo "permitted;DNS:$n"; done
  done | awk '!seen[$0]++'
  if [ $one_host -eq 1 ]; then
    echo "permitted;IP:127.0.0.1/255.255.255.255"
  else
    echo "excluded;IP:0.0.0.0/0.0.0.0"
  fi
  echo "excluded;IP:::/::"
  echo "permitted;URI:.invalid"
  echo "permitted;email:.invalid"
}

# The name constraints (or SANs) of a certificate as sorted lines, to compare
# a kept file with what this run would make.
cert_constraints() {  # cert_constraints PEM
  openssl x509 -in "$1" -noout -ext nameConstraints 2>/dev/null | sed -n '2,$p' |
    awk '/Permitted:/ {k="permitted"; next} /Excluded:/ {k="excluded"; next}
         {gsub(/^ +| +$/, ""); if ($0 != "") print k ";" $0}' |
    sed -e 's|IP:0:0:0:0:0:0:0:0/0:0:0:0:0:0:0:0|IP:::/::|' | LC_ALL=C sort
}
cert_sans() {  # cert_sans PEM
  openssl x509 -in "$1" -noout -ext subjectAltName 2>/dev/null | sed -n '2,$p' |
    tr ',' '\n' | sed -e 's/^ *//' -e 's/ *$//' -e 's/^IP Address:/IP:/' | grep -v '^$' |
    LC_ALL=C sort
}
want_sans() {  # want_sans PARTY
  { for n in $(dns_names "$1"); do echo "DNS:$n"; done
    if carries_local "$1"; then echo "IP:127.0.0.1"; fi; } | LC_ALL=C sort
}
one_host_hint() {  # what to tell the user when a kept file's names differ
  if [ $one_host -eq 1 ]; then
    echo "made without --one-host or by an older make-certs.sh; rerun without --one-host," \
         "or with --force to remake the folder"
  else
    echo "made with --one-host or by an older make-certs.sh (which permitted localhost and" \
         "127.0.0.1); rerun with --one-host for a one-host demo, or with --force to remake" \
         "the folder"
  fi
}

new_ec_key() {  # new_ec_key PATH MODE
  (umask 077 && openssl genpkey -algorithm EC -pkeyopt ec_paramgen_curve:P-256 \
     -pkeyopt ec_param_enc:named_curve -out "$1" 2>/dev/null)
  chmod "$2" "$1"
}

# Both files of a pair exist (0), neither does (1); one alone is an error.
pair_state() {  # pair_state A B
  if [ -e "$1" ] && [ -e "$2" ]; then return 0; fi
  if [ ! -e "$1" ] && [ ! -e "$2" ]; then return 1; fi
  echo "make-certs: $(basename "$1") and $(basename "$2") go together but only one exists;" \
       "remove it or rerun with --force" >&2
  exit 1
}

same_public_key() {  # same_public_key CERT KEY
  [ -r "$2" ] || { echo "make-certs: cannot read $2 (owned by another user?)" >&2; exit 1; }
  [ "$(openssl x509 -in "$1" -noout -pubkey)" = "$(openssl pkey -in "$2" -pubout)" ]
}

make_ca() {  # make_ca ROLE
  local r="$1" pem="$dir/$1-ca.pem" key="$dir/$1-ca.key" constraints
  if [ $force -eq 0 ] && pair_state "$pem" "$key"; then
    same_public_key "$pem" "$key" || {
      echo "make-certs: $r-ca.pem does not match $r-ca.key; rerun with --force" >&2; exit 1; }
    [ "$(cert_constraints "$pem")" = "$(ca_names "$r" | LC_ALL=C sort)" ] || {
      if [ "$(ca_of operator)" = "$r" ] &&
         [ "$(cert_constraints "$pem")" = "$(ca_names "$r" operator | LC_ALL=C sort)" ]; then
        echo "make-certs: $r-ca.pem was made by an older make-certs.sh: it cannot issue" \
             "operator.tandem (operator.pem, the operators' certificate for the coordinator's" \
             "admin listener); rerun with --force to remake the folder (new CAs and keys" \
             "for every party)" >&2
      else
        echo "make-certs: $r-ca.pem permits other names than this run's: $(one_host_hint)" >&2
      fi
      exit 1; }
    note kept "$r-ca.pem $r-ca.key"
    return
  fi
  constraints="$(ca_names "$r" | paste -sd, - | sed 's/,/, /g')"
  cat >"$tmp/$r-ca.cnf" <<EOF
[req]
distinguished_name = dn
prompt = no
[dn]
O = tandem $r operator
CN = tandem $r operator CA
[ca_ext]
basicConstraints = critical, CA:TRUE, pathlen:0
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
nameConstraints = critical, $constraints
EOF
  new_ec_key "$key" 0600  # no daemon reads a CA key
  openssl req -x509 -new -key "$key" -config "$tmp/$r-ca.cnf" -extensions ca_ext \
    -days "$ca_days" -sha256 -set_serial "0x$(openssl rand -hex 16)" -out "$pem" 2>/dev/null
  chmod 0644 "$pem"
  made+=("$r-ca.pem" "$r-ca.key")
  remade+=("$r")
  note made "$r-ca.pem $r-ca.key (CA of the $r operator, names: $(ca_names "$r" |
    sed -n 's/^permitted;\(DNS\|IP\)://p' | paste -sd' ' -))"
}

ca_remade() {  # ca_remade ROLE
  local r
  for r in "${remade[@]}"; do [ "$r" = "$1" ] && return 0; done
  return 1
}

make_party() {  # make_party PARTY
  local p="$1" ca pem="$dir/$1.pem" key="$dir/$1.key" sans="" n
  ca="$(ca_of "$p")"
  if [ $force -eq 0 ] && ! ca_remade "$ca" && pair_state "$pem" "$key"; then
    openssl verify -CAfile "$dir/$ca-ca.pem" "$pem" >/dev/null 2>&1 || {
      echo "make-certs: $p.pem does not chain to $ca-ca.pem; rerun with --force" >&2; exit 1; }
    same_public_key "$pem" "$key" || {
      echo "make-certs: $p.pem does not match $p.key; rerun with --force" >&2; exit 1; }
    [ "$(cert_sans "$pem")" = "$(want_sans "$p")" ] || {
      echo "make-certs: $p.pem names other hosts than this run's: $(one_host_hint)" >&2
      exit 1; }
    if openssl x509 -in "$pem" -noout -checkend $((renew_days * 86400)) >/dev/null; then
      note kept "$p.pem $p.key"
      return
    fi
    note renew "$p.pem (expires within $renew_days days: a new key and certificate)"
  fi
  for n in $(dns_names "$p"); do sans+="DNS:$n,"; done
  if carries_local "$p"; then sans+="IP:127.0.0.1,"; fi
  sans="${sans%,}"
  cat >"$tmp/$p.ext" <<EOF
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = $(key_usage "$p")
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
subjectAltName = $sans
EOF
  new_ec_key "$key" "$key_mode"
  n="$(dns_names "$p" | awk '{print $1; exit}')"  # the identity, first SAN
  openssl req -new -key "$key" -subj "/O=tandem $ca operator/CN=$n" \
    -out "$tmp/$p.csr" 2>/dev/null
  openssl x509 -req -in "$tmp/$p.csr" -CA "$dir/$ca-ca.pem" -CAkey "$dir/$ca-ca.key" \
    -set_serial "0x$(openssl rand -hex 16)" -days "$days" -sha256 -extfile "$tmp/$p.ext" \
    -out "$pem" 2>/dev/null
  chmod 0644 "$pem"
  openssl verify -CAfile "$dir/$ca-ca.pem" "$pem" >/dev/null
  made+=("$p.pem" "$p.key")
  note made "$p.pem $p.key (identity $n, issued by $ca-ca, ${sans//,/ })"
}

make_ed25519_pair() {  # make_ed25519_pair NAME DESCRIPTION
  local name="$1" key="$dir/$1.key" pub="$dir/$1.pub"
  if [ $force -eq 0 ] && pair_state "$key" "$pub"; then
    [ -r "$key" ] || { echo "make-certs: cannot read $key (owned by another user?)" >&2; exit 1; }
    [ "$(openssl pkey -in "$key" -pubout)" = "$(cat "$pub")" ] || {
      echo "make-certs: $name.pub is not the public key of $name.key; rerun with --force" >&2
      exit 1; }
    note kept "$name.key $name.pub"
    return
  fi
  (umask 077 && openssl genpkey -algorithm ed25519 -out "$key" 2>/dev/null)
  chmod "$key_mode" "$key"
  openssl pkey -in "$key" -pubout -out "$pub"
  chmod 0644 "$pub"
  made+=("$name.key" "$name.pub")
  note made "$name.key $name.pub ($2)"
}

varint() {  # protobuf base-128 varint of $1 (< 2^63), raw bytes on stdout
  local v=$1
  while [ "$v" -ge 128 ]; do
    printf "\\x$(printf %02x $(((v & 127) | 128)))"
    v=$((v >> 7))
  done
  printf "\\x$(printf %02x "$v")"
}

# tokens.txt: single-use device enrollment tokens signed with enroll.key, one
# per line (the k8s client Job's completion index picks its line), in the
# format of crypto/sign/device_auth.h (what `tandem-admin token mint` prints):
# "tdmenroll1." + base64url(SignedEnrollmentToken{EnrollmentToken{16 random
# bytes, expiry in ms, issuer "make-certs"}, Ed25519 over
# "tandem.enrollment_token.v1" 0x00 || token}).
make_tokens() {
  local out="$dir/tokens.txt" n=64 tmp i expiry expires_at
  if [ $force -eq 0 ] && [ -s "$out" ] && ! printf '%s\n' "${made[@]}" | grep -qx enroll.key; then
    expires_at="$(cat "$dir/tokens.expiry" 2>/dev/null || echo 0)"
    case "$expires_at" in ''|*[!0-9]*) expires_at=0 ;; esac
    if [ "$expires_at" -gt $(($(date +%s) + 86400)) ]; then
      note kept "tokens.txt"
      return
    fi
    note renew "tokens.txt (expired, expiring within a day, or of unknown expiry)"
  fi
  expiry=$((($(date +%s) + token_days * 86400) * 1000))
  tmp=$(mktemp -d)
  : >"$tmp/all"
  for ((i = 0; i < n; i++)); do
    { printf '\x0a\x10'; openssl rand 16; printf '\x10'; varint "$expiry"
      printf '\x22\x0a%s' make-certs; } >"$tmp/t"
    { printf 'tandem.enrollment_token.v1\x00'; cat "$tmp/t"; } >"$tmp/in"
    openssl pkeyutl -sign -rawin -inkey "$dir/enroll.key" -in "$tmp/in" -out "$tmp/sig"
    { printf '\x0a'; varint "$(stat -c %s "$tmp/t")"; cat "$tmp/t"; printf '\x12\x40'
      cat "$tmp/sig"; } >"$tmp/s"
    printf 'tdmenroll1.%s\n' "$(base64 -w0 "$tmp/s" | tr '+/' '-_' | tr -d '=')" >>"$tmp/all"
  done
  (umask 077 && cp "$tmp/all" "$out")
  chmod "$key_mode" "$out"
  echo $((expiry / 1000)) >"$dir/tokens.expiry"
  chmod 0644 "$dir/tokens.expiry"
  rm -rf "$tmp"
  made+=(tokens.txt tokens.expiry)
  note made "tokens.txt ($n single-use device enrollment tokens, valid $token_days days)"
}

make_bundle() {  # make_bundle NAME CA_ROLE...
  local name="$1" r content=""
  shift
  for r in "$@"; do content+="$(cat "$dir/$r-ca.pem")"$'\n'; done
  if [ -e "$dir/$name" ] && [ "$(cat "$dir/$name")"$'\n' = "$content" ]; then
    note kept "$name"
    return
  fi
  if [ -e "$dir/$name" ] && [ $force -eq 0 ]; then
    local stale=0
    for r in "$@"; do ca_remade "$r" && stale=1; done
    [ $stale -eq 1 ] || {
      echo "make-certs: $name differs from the CAs it should hold; rerun with --force" >&2
      exit 1; }
  fi
  printf '%s' "$content" >"$dir/$name"
  chmod 0644 "$dir/$name"
  made+=("$name")
  note made "$name (roots: ${*/%/-ca})"
}

for r in "${ROLES[@]}"; do make_ca "$r"; done
for p in "${PARTIES[@]}"; do make_party "$p"; done
make_ed25519_pair ticket "Ed25519 upload ticket key of the coordinator"
make_ed25519_pair enroll "Ed25519 device enrollment key of the coordinator's operator"
make_tokens
make_bundle leader-roots.pem coordinator helper
make_bundle helper-roots.pem coordinator leader
make_bundle coordinator-roots.pem leader helper
make_bundle client-roots.pem leader helper coordinator
make_bundle worker-roots.pem coordinator

echo "make-certs: ${#made[@]} file(s) made in $dir"

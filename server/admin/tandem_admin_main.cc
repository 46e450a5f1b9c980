// tandem-admin: the operator's tool (ARCHITECTURE.md "Processes").
//
//   tandem-admin keygen --out=ops/enroll          ops/enroll.key (0600) + .pub
//   tandem-admin token mint --signing_key=ops/enroll.key [--count=20]
//       [--ttl_s=86400] [--issuer=backend-1] [--device_public_key=HEX]
//       prints one enrollment token per line (give each device one; the
//       coordinator redeems each once: --enrollment_keys=ops/enroll.pub)
//   tandem-admin devices list|enroll|revoke --admin=HOST:PORT
//       [--public_key=HEX] [--device_id=dev-...]
//       --tls_cert=op.pem --tls_key=op.key --tls_ca=ca.pem   (mutual TLS)
//       or --insecure_plaintext (a loopback coordinator)
//   tandem-admin task create --spec=task.textproto --admin=HOST:PORT (TLS flags)
//   tandem-admin task list|show|pause|resume|delete [--task=ID] --admin=...
//       the coordinator's task API (server/service/task_commands.h)
//   tandem-admin task export [--task=default] [--version=N] --out=model.safetensors
//       (--admin=HOST:PORT, over the task API; or --state_dir=DIR, read from
//       a coordinator's state directory on this machine)
//       a released model (the latest by default), validated, as safetensors
//   tandem-admin aggregator provision --task=ID [--population=P]
//       [--policy='epsilon_budget: 4 min_batch_size: 20'] --admin=HOST:PORT
//   tandem-admin aggregator list|retire [--task=ID] --admin=HOST:PORT
//       an aggregator's operator API (server/service/aggregator_commands.h),
//       by that aggregator's own operator (its --operator_identity)
// Exit status 0 on success, 1 on any error (printed on stderr).
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/grpc_credentials.h"
#include "base/grpc_status.h"
#include "base/ids.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "crypto/sign/device_auth.h"
#include "crypto/sign/ed25519.h"
#include "ml/model/safetensors.h"
#include "proto/coordinator.grpc.pb.h"
#include "server/core/released_models.h"
#include "server/service/aggregator_commands.h"
#include "server/service/task_commands.h"

ABSL_FLAG(std::string, out, "",
          "keygen: path prefix of the key pair (.key and .pub); task export: the .safetensors "
          "file to write");
ABSL_FLAG(std::string, state_dir, "", "task export: the coordinator's --state_dir");
ABSL_FLAG(std::string, task, "default", "task show|pause|resume|delete|export: the task id");
ABSL_FLAG(std::string, spec, "",
          "task create: the TaskSpec textproto (an opaque model's weights_file, relative to it, "
          "is sent with it)");
ABSL_FLAG(std::string, population, "",
          "aggregator provision: the devices whose budget the task spends (default: its own)");
ABSL_FLAG(std::string, policy, "",
          "aggregator provision: the task's PrivacyPolicy textproto (unset fields: the "
          "aggregator's default policy)");
ABSL_FLAG(uint64_t, version, 0, "task export: the released version (0 = the latest)");
ABSL_FLAG(std::string, signing_key, "", "token mint: the operator's Ed25519 PKCS#8 PEM");
ABSL_FLAG(int, count, 1, "token mint: tokens to print");
ABSL_FLAG(int64_t, ttl_s, 86400, "token mint: seconds until the tokens expire");
ABSL_FLAG(std::string, issuer, "operator", "token mint: audit label [A-Za-z0-9._-]{0,64}");
ABSL_FLAG(std::string, device_public_key, "",
          "token mint: hex of the one device key the token admits (empty = any one device)");
ABSL_FLAG(std::string, admin, "", "devices, task: the coordinator's admin listener host:port");
ABSL_FLAG(std::string, public_key, "", "devices enroll: hex of the device's Ed25519 public key");
ABSL_FLAG(std::string, device_id, "", "devices revoke: the device id (dev-...)");
ABSL_FLAG(std::string, tls_cert, "", "devices: the operator's PEM certificate chain");
ABSL_FLAG(std::string, tls_key, "", "devices: its PEM private key");
ABSL_FLAG(std::string, tls_ca, "", "devices: PEM roots verifying the coordinator");
ABSL_FLAG(bool, insecure_plaintext, false, "devices: no TLS (a loopback coordinator only)");

namespace {

using tandem::crypto::Ed25519SigningKey;

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", path));
  std::stringstream buf;
  buf << in.rdbuf();
  return buf.str();
}

absl::Status WriteFile(const std::string& path, const std::string& data, mode_t mode) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out << data;
  out.close();
  if (!out) return absl::PermissionDeniedError(absl::StrCat("cannot write ", path));
  ::chmod(path.c_str(), mode);
  return absl::OkStatus();
}

// Hex to bytes; false for odd lengths or non-hex digits.
bool ParseHex(absl::string_view hex, std::string* out) {
  if (hex.size() % 2 != 0) return false;
  for (char c : hex) {
    if (!absl::ascii_isxdigit(static_cast<unsigned char>(c))) return false;
  }
  *out = absl::HexStringToBytes(hex);
  return true;
}

absl::Status Keygen() {
  const std::string out = absl::GetFlag(FLAGS_out);
  if (out.empty()) return absl::InvalidArgumentError("keygen needs --out=PREFIX");
  TANDEM_ASSIGN_OR_RETURN(Ed25519SigningKey key,
                          Ed25519SigningKey::Generate(tandem::OpenSslRandom::Default()));
  TANDEM_ASSIGN_OR_RETURN(std::string priv, key.PrivateKeyPem());
  TANDEM_ASSIGN_OR_RETURN(std::string pub, key.PublicKeyPem());
  TANDEM_RETURN_IF_ERROR(WriteFile(out + ".key", priv, 0600));
  TANDEM_RETURN_IF_ERROR(WriteFile(out + ".pub", pub, 0644));
  std::printf("wrote %s.key and %s.pub\n", out.c_str(), out.c_str());
  return absl::OkStatus();
}

absl::Status MintTokens() {
  TANDEM_ASSIGN_OR_RETURN(std::string pem, ReadFile(absl::GetFlag(FLAGS_signing_key)));
  TANDEM_ASSIGN_OR_RETURN(Ed25519SigningKey key, Ed25519SigningKey::FromPem(pem));
  const int count = absl::GetFlag(FLAGS_count);
  if (count < 1 || count > 1000000)
    return absl::InvalidArgumentError("--count must be in [1, 1e6]");
  if (absl::GetFlag(FLAGS_ttl_s) < 1) return absl::InvalidArgumentError("--ttl_s must be >= 1");
  std::string device_key;
  if (!absl::GetFlag(FLAGS_device_public_key).empty() &&
      !ParseHex(absl::GetFlag(FLAGS_device_public_key), &device_key)) {
    return absl::InvalidArgumentError("--device_public_key must be hex");
  }
  const int64_t expiry =
      absl::ToUnixMillis(absl::Now()) + absl::GetFlag(FLAGS_ttl_s) * int64_t{1000};
  for (int i = 0; i < count; ++i) {
    tandem::proto::EnrollmentToken t;
    std::string id(tandem::crypto::kEnrollmentTokenIdSize, '\0');
    TANDEM_RETURN_IF_ERROR(tandem::OpenSslRandom::Default()->Fill(
        absl::MakeSpan(reinterpret_cast<uint8_t*>(id.data()), id.size())));
    t.set_token_id(id);
    t.set_expiry_unix_ms(expiry);
    t.set_issuer(absl::GetFlag(FLAGS_issuer));
    t.set_device_public_key(device_key);
    TANDEM_ASSIGN_OR_RETURN(tandem::proto::SignedEnrollmentToken s,
                            tandem::crypto::MintEnrollmentToken(key, t));
    std::printf("%s\n", tandem::crypto::EncodeEnrollmentToken(s).c_str());
  }
  return absl::OkStatus();
}

void PrintDevice(const tandem::proto::DeviceRecord& d) {
  std::printf("%s %s %s by=%s key=%s\n", d.device_id().c_str(), d.state().c_str(),
              absl::FormatTime("%Y-%m-%dT%H:%M:%SZ", absl::FromUnixMillis(d.enrolled_unix_ms()),
                               absl::UTCTimeZone())
                  .c_str(),
              d.enrolled_by().c_str(), absl::BytesToHexString(d.public_key()).c_str());
}

// The operator's mutual-TLS client credentials (--tls_cert --tls_key
// --tls_ca), or plaintext for a loopback daemon (--insecure_plaintext).
tandem::TlsFiles OperatorTls() {
  return {absl::GetFlag(FLAGS_insecure_plaintext), absl::GetFlag(FLAGS_tls_cert),
          absl::GetFlag(FLAGS_tls_key), absl::GetFlag(FLAGS_tls_ca), false};
}

absl::Status Devices(const std::string& verb) {
  if (absl::GetFlag(FLAGS_admin).empty()) {
    return absl::InvalidArgumentError("devices needs --admin=HOST:PORT");
  }
  const tandem::TlsFiles tls = OperatorTls();
  TANDEM_ASSIGN_OR_RETURN(auto creds, tandem::MakeChannelCredentials(tls));
  auto stub = tandem::proto::CoordinatorAdmin::NewStub(
      grpc::CreateChannel(absl::GetFlag(FLAGS_admin), creds));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(30));
  if (verb == "list") {
    tandem::proto::ListDevicesResponse r;
    TANDEM_RETURN_IF_ERROR(tandem::FromGrpcStatus(stub->ListDevices(&ctx, {}, &r)));
    for (const auto& d : r.devices()) PrintDevice(d);
    return absl::OkStatus();
  }
  if (verb == "enroll") {
    tandem::proto::EnrollDeviceRequest req;
    std::string key;
    if (!ParseHex(absl::GetFlag(FLAGS_public_key), &key) || key.empty()) {
      return absl::InvalidArgumentError(
          "devices enroll needs --public_key=HEX (tandem-client --print_device prints it)");
    }
    req.set_public_key(key);
    tandem::proto::EnrollDeviceResponse r;
    TANDEM_RETURN_IF_ERROR(tandem::FromGrpcStatus(stub->EnrollDevice(&ctx, req, &r)));
    PrintDevice(r.device());
    return absl::OkStatus();
  }
  if (verb == "revoke") {
    tandem::proto::RevokeDeviceRequest req;
    req.set_device_id(absl::GetFlag(FLAGS_device_id));
    tandem::proto::RevokeDeviceResponse r;
    TANDEM_RETURN_IF_ERROR(tandem::FromGrpcStatus(stub->RevokeDevice(&ctx, req, &r)));
    PrintDevice(r.device());
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError("devices: list, enroll or revoke");
}

// task export: a released model out of the coordinator's state directory,
// validated (layout, sizes, no NaN) before it is written.
absl::Status ExportTask() {
  const std::string state_dir = absl::GetFlag(FLAGS_state_dir);
  const std::string out = absl::GetFlag(FLAGS_out);
  if (state_dir.empty() || out.empty()) {
    return absl::InvalidArgumentError("task export needs --state_dir and --out");
  }
  const std::string task = absl::GetFlag(FLAGS_task);
  TANDEM_RETURN_IF_ERROR(tandem::ValidateId(task, "--task"));
  const std::string dir = (std::filesystem::path(state_dir) / "models" / task).string();
  TANDEM_ASSIGN_OR_RETURN(const uint64_t version, tandem::server::ResolveReleasedVersion(
                                                      dir, task, absl::GetFlag(FLAGS_version)));
  TANDEM_ASSIGN_OR_RETURN(
      const tandem::ml::SafetensorsFile file,
      tandem::ml::ReadSafetensorsFile(tandem::server::ReleasedModelPath(dir, version)));
  size_t params = 0;
  for (const tandem::ml::SafeTensor& t : file.tensors) {
    TANDEM_ASSIGN_OR_RETURN(const std::vector<float> values, tandem::ml::AsFloat32(t));
    params += values.size();
  }
  TANDEM_RETURN_IF_ERROR(tandem::ml::WriteSafetensorsFile(out, file));
  std::printf("exported task %s version %llu: %zu tensors, %zu parameters -> %s\n", task.c_str(),
              static_cast<unsigned long long>(version), file.tensors.size(), params, out.c_str());
  return absl::OkStatus();
}

absl::Status Run(const std::vector<char*>& args) {
  const std::string cmd = args.size() > 1 ? args[1] : "";
  const std::string sub = args.size() > 2 ? args[2] : "";
  if (cmd == "keygen") return Keygen();
  if (cmd == "token" && sub == "mint") return MintTokens();
  if (cmd == "devices") return Devices(sub);
  if (cmd == "task" && sub == "export" && absl::GetFlag(FLAGS_admin).empty()) return ExportTask();
  if (cmd == "task") {
    tandem::server::TaskCommandArgs a;
    a.admin = absl::GetFlag(FLAGS_admin);
    a.tls = OperatorTls();
    a.task = absl::GetFlag(FLAGS_task);
    a.spec_path = absl::GetFlag(FLAGS_spec);
    a.version = absl::GetFlag(FLAGS_version);
    a.out = absl::GetFlag(FLAGS_out);
    return tandem::server::RunTaskCommand(sub, a);
  }
  if (cmd == "aggregator") {
    tandem::server::AggregatorCommandArgs a;
    a.admin = absl::GetFlag(FLAGS_admin);
    a.tls = OperatorTls();
    a.task = absl::GetFlag(FLAGS_task);
    a.population = absl::GetFlag(FLAGS_population);
    a.policy = absl::GetFlag(FLAGS_policy);
    return tandem::server::RunAggregatorCommand(sub, a);
  }
  return absl::InvalidArgumentError(
      "usage: tandem-admin keygen | token mint | devices list|enroll|revoke | task "
      "create|list|show|pause|resume|delete|export | aggregator provision|list|retire "
      "(see --help)");
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage(
      "tandem operator tool: keygen, token mint, devices list|enroll|revoke, task "
      "create|list|show|pause|resume|delete|export, aggregator provision|list|retire");
  const std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  if (absl::Status s = Run(args); !s.ok()) {
    std::fprintf(stderr, "tandem-admin: %s\n", s.ToString().c_str());
    return 1;
  }
  return 0;
}

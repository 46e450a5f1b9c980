#include "tests/testing/enrollment.h"

#include <sys/stat.h>

#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/random.h"
#include "base/status_macros.h"
#include "crypto/sign/device_auth.h"
#include "crypto/sign/ed25519.h"

namespace tandem::testing {
namespace {

absl::Status Write(const std::string& path, const std::string& data) {
  std::ofstream out(path, std::ios::trunc);
  out << data;
  out.close();
  if (!out) return absl::InternalError(absl::StrCat("cannot write ", path));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::string> EnsureEnrollmentKey(const std::string& dir) {
  const std::string key_path = dir + "/enroll.key", pub_path = dir + "/enroll.pub";
  if (std::filesystem::exists(key_path) && std::filesystem::exists(pub_path)) return pub_path;
  TANDEM_ASSIGN_OR_RETURN(crypto::Ed25519SigningKey key,
                          crypto::Ed25519SigningKey::Generate(OpenSslRandom::Default()));
  TANDEM_ASSIGN_OR_RETURN(std::string priv, key.PrivateKeyPem());
  TANDEM_ASSIGN_OR_RETURN(std::string pub, key.PublicKeyPem());
  TANDEM_RETURN_IF_ERROR(Write(key_path, priv));
  ::chmod(key_path.c_str(), 0600);
  TANDEM_RETURN_IF_ERROR(Write(pub_path, pub));
  return pub_path;
}

absl::StatusOr<std::string> MintEnrollmentToken(const std::string& dir) {
  std::ifstream in(dir + "/enroll.key");
  std::stringstream pem;
  pem << in.rdbuf();
  if (!in) return absl::NotFoundError(absl::StrCat("no enrollment key in ", dir));
  TANDEM_ASSIGN_OR_RETURN(crypto::Ed25519SigningKey key,
                          crypto::Ed25519SigningKey::FromPem(pem.str()));
  proto::EnrollmentToken t;
  std::string id(crypto::kEnrollmentTokenIdSize, '\0');
  TANDEM_RETURN_IF_ERROR(OpenSslRandom::Default()->Fill(
      absl::MakeSpan(reinterpret_cast<uint8_t*>(id.data()), id.size())));
  t.set_token_id(id);
  t.set_expiry_unix_ms(absl::ToUnixMillis(absl::Now() + absl::Hours(24)));
  t.set_issuer("tandem-test");
  TANDEM_ASSIGN_OR_RETURN(proto::SignedEnrollmentToken s, crypto::MintEnrollmentToken(key, t));
  return crypto::EncodeEnrollmentToken(s);
}

absl::StatusOr<std::string> WriteEnrollmentToken(const std::string& dir, const std::string& path) {
  TANDEM_ASSIGN_OR_RETURN(std::string token, MintEnrollmentToken(dir));
  TANDEM_RETURN_IF_ERROR(Write(path, token + "\n"));
  return path;
}

}  // namespace tandem::testing

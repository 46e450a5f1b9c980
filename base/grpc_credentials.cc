#include "base/grpc_credentials.h"

#include <fstream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem {
namespace {

absl::StatusOr<std::string> ReadPem(const std::string& path, const char* what) {
  if (path.empty()) return absl::InvalidArgumentError(absl::StrCat(what, " path is empty"));
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read ", what, " at ", path));
  std::stringstream buf;
  buf << in.rdbuf();
  if (buf.str().find("-----BEGIN") == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(what, " at ", path, " is not PEM"));
  }
  return buf.str();
}

}  // namespace

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& tls) {
  if (tls.insecure_plaintext) return grpc::InsecureServerCredentials();
  grpc::SslServerCredentialsOptions options;
  grpc::SslServerCredentialsOptions::PemKeyCertPair pair;
  TANDEM_ASSIGN_OR_RETURN(pair.cert_chain, ReadPem(tls.cert_chain_path, "certificate chain"));
  TANDEM_ASSIGN_OR_RETURN(pair.private_key, ReadPem(tls.private_key_path, "private key"));
  options.pem_key_cert_pairs.push_back(std::move(pair));
  if (tls.require_client_cert) {
    TANDEM_ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(tls.root_ca_path, "root CA"));
    options.client_certificate_request =
        GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> MakeChannelCredentials(
    const TlsFiles& tls) {
  if (tls.insecure_plaintext) return grpc::InsecureChannelCredentials();
  grpc::SslCredentialsOptions options;
  TANDEM_ASSIGN_OR_RETURN(options.pem_root_certs, ReadPem(tls.root_ca_path, "root CA"));
  if (!tls.cert_chain_path.empty()) {
    TANDEM_ASSIGN_OR_RETURN(options.pem_cert_chain,
                            ReadPem(tls.cert_chain_path, "certificate chain"));
    TANDEM_ASSIGN_OR_RETURN(options.pem_private_key,
                            ReadPem(tls.private_key_path, "private key"));
  }
  return grpc::SslCredentials(options);
}

}  // namespace tandem

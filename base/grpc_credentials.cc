#include "base/grpc_credentials.h"

#include <grpcpp/security/tls_certificate_provider.h>
#include <grpcpp/security/tls_credentials_options.h>
#include <openssl/bio.h>
#include <openssl/evp.h>
#include <openssl/pem.h>
#include <openssl/x509.h>
#include <sys/mman.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "base/logging.h"
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

struct BioFree {
  void operator()(BIO* b) const { BIO_free(b); }
};
struct X509Free {
  void operator()(X509* x) const { X509_free(x); }
};
struct PkeyFree {
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
using Bio = std::unique_ptr<BIO, BioFree>;
using Cert = std::unique_ptr<X509, X509Free>;

Bio MemBio(const std::string& pem) {
  return Bio(BIO_new_mem_buf(pem.data(), static_cast<int>(pem.size())));
}

// An anonymous in-memory file holding `content`; -1 and errno on failure.
int MemFile(const std::string& content) {
  const int fd = memfd_create("tandem-tls", MFD_CLOEXEC);
  if (fd < 0) return -1;
  size_t done = 0;
  while (done < content.size()) {
    const ssize_t n = write(fd, content.data() + done, content.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      close(fd);
      return -1;
    }
    done += static_cast<size_t>(n);
  }
  return fd;
}

std::string FdPath(int fd) { return absl::StrCat("/proc/self/fd/", fd); }

// Plaintext, or checks the paths MakeServerCredentials needs.
absl::Status CheckServerPaths(const TlsFiles& tls) {
  if (tls.cert_chain_path.empty()) {
    return absl::InvalidArgumentError("certificate chain path is empty");
  }
  if (tls.private_key_path.empty()) return absl::InvalidArgumentError("private key path is empty");
  if (tls.require_client_cert && tls.root_ca_path.empty()) {
    return absl::InvalidArgumentError("root CA path is empty");
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ValidateTlsMaterial(const std::string& cert_chain_pem,
                                 const std::string& private_key_pem, const std::string& roots_pem,
                                 absl::Time now) {
  if (!cert_chain_pem.empty() || !private_key_pem.empty()) {
    Cert leaf(PEM_read_bio_X509(MemBio(cert_chain_pem).get(), nullptr, nullptr, nullptr));
    if (leaf == nullptr) {
      return absl::InvalidArgumentError("the certificate chain holds no PEM certificate");
    }
    std::unique_ptr<EVP_PKEY, PkeyFree> key(
        PEM_read_bio_PrivateKey(MemBio(private_key_pem).get(), nullptr, nullptr, nullptr));
    if (key == nullptr) {
      return absl::InvalidArgumentError("the private key is not an unencrypted PEM key");
    }
    if (X509_check_private_key(leaf.get(), key.get()) != 1) {
      return absl::InvalidArgumentError(
          "the private key is not the key of the chain's first certificate");
    }
    time_t t = absl::ToTimeT(now);
    if (X509_cmp_time(X509_get0_notAfter(leaf.get()), &t) <= 0) {
      return absl::InvalidArgumentError("the certificate has expired (notAfter is past)");
    }
    // A certificate renewed on a host whose clock runs a little ahead is
    // accepted; one that is not valid for another five minutes is not.
    time_t soon = absl::ToTimeT(now + absl::Minutes(5));
    if (X509_cmp_time(X509_get0_notBefore(leaf.get()), &soon) > 0) {
      return absl::InvalidArgumentError("the certificate is not valid yet (notBefore is ahead)");
    }
  }
  if (!roots_pem.empty()) {
    Cert root(PEM_read_bio_X509(MemBio(roots_pem).get(), nullptr, nullptr, nullptr));
    if (root == nullptr) return absl::InvalidArgumentError("the roots hold no PEM certificate");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeServerCredentials(
    const TlsFiles& tls) {
  if (tls.insecure_plaintext) return grpc::InsecureServerCredentials();
  if (tls.reloader != nullptr) return tls.reloader->ServerCredentials(tls);
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
  if (tls.reloader != nullptr) return tls.reloader->ChannelCredentials(tls);
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

// One file set: the paths it reads, the memfds gRPC reads, and the provider.
struct TlsReloader::Set {
  TlsFiles files;
  int pair_fd = -1;   // the key, then the chain; -1 without an identity
  int roots_fd = -1;  // -1 without roots

  ~Set() {
    if (pair_fd >= 0) close(pair_fd);
    if (roots_fd >= 0) close(roots_fd);
  }

  bool has_identity() const { return !files.cert_chain_path.empty(); }

  // A provider reading this set's memfds, one per credentials object: gRPC
  // 1.51's FileWatcherCertificateProvider stops reporting identity updates
  // once watchers with different needs share it (an identity-only listener
  // and a mutual-TLS one); every watcher of one credentials object needs the
  // same, so each gets its own (one refresh thread each).
  std::shared_ptr<grpc::experimental::FileWatcherCertificateProvider> NewProvider() const {
    constexpr unsigned kRefreshSeconds = 1;  // how soon gRPC sees a Reload()
    const std::string pair = pair_fd >= 0 ? FdPath(pair_fd) : "";
    const std::string roots = roots_fd >= 0 ? FdPath(roots_fd) : "";
    return std::make_shared<grpc::experimental::FileWatcherCertificateProvider>(pair, pair, roots,
                                                                                kRefreshSeconds);
  }

  // Reads and validates the files, then publishes them (the first time by
  // creating the memfds, later by dup2 over them).
  absl::Status Load() {
    std::string chain, key, roots;
    if (has_identity()) {
      TANDEM_ASSIGN_OR_RETURN(chain, ReadPem(files.cert_chain_path, "certificate chain"));
      TANDEM_ASSIGN_OR_RETURN(key, ReadPem(files.private_key_path, "private key"));
    }
    if (!files.root_ca_path.empty()) {
      TANDEM_ASSIGN_OR_RETURN(roots, ReadPem(files.root_ca_path, "root CA"));
    }
    if (absl::Status s = ValidateTlsMaterial(chain, key, roots, absl::Now()); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(
          has_identity() ? files.cert_chain_path : files.root_ca_path, ": ", s.message()));
    }
    if (has_identity()) TANDEM_RETURN_IF_ERROR(Publish(key + chain, &pair_fd));
    if (!roots.empty()) TANDEM_RETURN_IF_ERROR(Publish(roots, &roots_fd));
    return absl::OkStatus();
  }

  static absl::Status Publish(const std::string& content, int* fd) {
    const int fresh = MemFile(content);
    if (fresh < 0) {
      return absl::InternalError(absl::StrCat("memfd_create/write: ", std::strerror(errno)));
    }
    if (*fd < 0) {
      *fd = fresh;
      return absl::OkStatus();
    }
    const int r = dup2(fresh, *fd);
    const int err = errno;
    close(fresh);
    if (r < 0) return absl::InternalError(absl::StrCat("dup2: ", std::strerror(err)));
    return absl::OkStatus();
  }
};

TlsReloader::TlsReloader() = default;
TlsReloader::~TlsReloader() = default;

absl::StatusOr<TlsReloader::Set*> TlsReloader::SetFor(const TlsFiles& tls) {
  absl::MutexLock lock(&mu_);
  Key key{tls.cert_chain_path, tls.private_key_path, tls.root_ca_path};
  auto it = sets_.find(key);
  if (it != sets_.end()) return it->second.get();
  auto set = std::make_unique<Set>();
  set->files = tls;
  set->files.reloader = nullptr;
  TANDEM_RETURN_IF_ERROR(set->Load());
  Set* out = set.get();
  sets_.emplace(std::move(key), std::move(set));
  ++stats_.sets;
  return out;
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> TlsReloader::ServerCredentials(
    const TlsFiles& tls) {
  TANDEM_RETURN_IF_ERROR(CheckServerPaths(tls));
  TANDEM_ASSIGN_OR_RETURN(Set * set, SetFor(tls));
  grpc::experimental::TlsServerCredentialsOptions options(set->NewProvider());
  options.watch_identity_key_cert_pairs();
  if (tls.require_client_cert) {
    options.watch_root_certs();
    options.set_cert_request_type(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  } else {
    options.set_cert_request_type(GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE);
  }
  return grpc::experimental::TlsServerCredentials(options);
}

absl::StatusOr<std::shared_ptr<grpc::ChannelCredentials>> TlsReloader::ChannelCredentials(
    const TlsFiles& tls) {
  if (tls.root_ca_path.empty()) return absl::InvalidArgumentError("root CA path is empty");
  if (!tls.cert_chain_path.empty() && tls.private_key_path.empty()) {
    return absl::InvalidArgumentError("private key path is empty");
  }
  TANDEM_ASSIGN_OR_RETURN(Set * set, SetFor(tls));
  grpc::experimental::TlsChannelCredentialsOptions options;
  options.set_certificate_provider(set->NewProvider());
  options.watch_root_certs();
  if (set->has_identity()) options.watch_identity_key_cert_pairs();
  // The default verifier checks the server's name (the target, or the
  // pinned name of GRPC_SSL_TARGET_NAME_OVERRIDE_ARG) like SslCredentials.
  return grpc::experimental::TlsCredentials(options);
}

absl::Status TlsReloader::Reload() {
  absl::MutexLock lock(&mu_);
  absl::Status first;
  for (auto& [key, set] : sets_) {
    absl::Status s = set->Load();
    if (s.ok()) {
      ++stats_.reloaded;
      TANDEM_LOG(INFO) << "TLS: reloaded " << (set->has_identity() ? std::get<0>(key) : "")
                       << (std::get<2>(key).empty() ? "" : " roots " + std::get<2>(key));
    } else {
      ++stats_.failed;
      TANDEM_LOG(ERROR) << "TLS: kept the previous certificates: " << s;
      if (first.ok()) first = s;
    }
  }
  return first;
}

TlsReloader::Stats TlsReloader::stats() const {
  absl::MutexLock lock(&mu_);
  return stats_;
}

}  // namespace tandem

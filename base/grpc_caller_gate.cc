#include "base/grpc_caller_gate.h"

#include <grpc/grpc_security_constants.h>

#include <algorithm>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "base/logging.h"

namespace tandem {

void RefusalCounters::Add(const std::string& key) {
  absl::MutexLock lock(&mu_);
  ++counts_[key];
}

std::map<std::string, uint64_t> RefusalCounters::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return counts_;
}

std::vector<std::string> PeerIdentities(const grpc::AuthContext& context) {
  std::vector<std::string> out;
  if (!context.IsPeerAuthenticated()) return out;
  // DNS names only: the CAs' name constraints (deploy/make-certs.sh) permit
  // DNS names, and constrain no other SAN type, so an email, URI or IP SAN
  // spelling a role's name must not pass for that role.
  for (const grpc::string_ref& v : context.FindPropertyValues(GRPC_PEER_DNS_PROPERTY_NAME)) {
    out.emplace_back(v.data(), v.size());
  }
  // The subject CN only for a certificate with no SAN at all (RFC 6125
  // 6.4.4: a CN is not looked at once any SAN is present).
  if (out.empty() && context.FindPropertyValues(GRPC_X509_SAN_PROPERTY_NAME).empty()) {
    for (const grpc::string_ref& v : context.FindPropertyValues(GRPC_X509_CN_PROPERTY_NAME)) {
      out.emplace_back(v.data(), v.size());
    }
  }
  return out;
}

CallerGate::CallerGate(std::string listener, std::vector<std::string> allowed, bool enforce,
                       RefusalCounters* counters)
    : listener_(std::move(listener)),
      allowed_(std::move(allowed)),
      enforce_(enforce),
      counters_(counters) {}

grpc::Status CallerGate::Admit(const grpc::ServerContext& context) const {
  if (!enforce_) return grpc::Status::OK;
  std::shared_ptr<const grpc::AuthContext> auth = context.auth_context();
  const std::vector<std::string> ids =
      auth == nullptr ? std::vector<std::string>() : PeerIdentities(*auth);
  for (const std::string& id : ids) {
    if (std::find(allowed_.begin(), allowed_.end(), id) != allowed_.end()) {
      return grpc::Status::OK;
    }
  }
  counters_->Add(listener_ + "/identity");
  const std::string who = ids.empty() ? "an unauthenticated caller" : absl::StrJoin(ids, ",");
  TANDEM_LOG(WARNING) << "refused " << listener_ << " call from " << who << " (" << context.peer()
                      << ")";
  return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                      absl::StrCat("the ", listener_, " API is not open to ", who));
}

}  // namespace tandem

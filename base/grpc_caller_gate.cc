#include "base/grpc_caller_gate.h"

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
  for (const grpc::string_ref& v : context.FindPropertyValues("x509_subject_alternative_name")) {
    out.emplace_back(v.data(), v.size());
  }
  if (out.empty()) {
    for (const grpc::string_ref& v : context.FindPropertyValues("x509_common_name")) {
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

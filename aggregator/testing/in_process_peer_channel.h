// PeerChannel that calls a helper Aggregator in the same process (tests and
// the in-process simulator). It can be told to fail, to model an
// unreachable helper or a lost commit acknowledgement.
#ifndef TANDEM_AGGREGATOR_TESTING_IN_PROCESS_PEER_CHANNEL_H_
#define TANDEM_AGGREGATOR_TESTING_IN_PROCESS_PEER_CHANNEL_H_

#include <atomic>

#include "aggregator/core/aggregator.h"
#include "aggregator/core/peer_channel.h"

namespace tandem::aggregator {

class InProcessPeerChannel : public PeerChannel {
 public:
  // `helper` is not owned; it may be set later (the leader is created first).
  explicit InProcessPeerChannel(Aggregator* helper = nullptr) : helper_(helper) {}
  void set_helper(Aggregator* helper) { helper_ = helper; }
  // While set, every call fails with UNAVAILABLE before reaching the helper.
  void set_unreachable(bool v) { unreachable_ = v; }
  // While set, commits reach the helper but their reply is lost (UNAVAILABLE).
  void set_drop_commit_replies(bool v) { drop_commit_replies_ = v; }
  // While set, Verify reaches the helper but its reply is lost (UNAVAILABLE).
  void set_drop_verify_replies(bool v) { drop_verify_replies_ = v; }

  absl::StatusOr<proto::VerifyResponse> Verify(const proto::VerifyRequest& request) override {
    if (unreachable_ || helper_ == nullptr) return absl::UnavailableError("helper unreachable");
    absl::StatusOr<proto::VerifyResponse> response = helper_->HandleVerify(request);
    if (drop_verify_replies_) return absl::UnavailableError("verify reply lost");
    return response;
  }
  absl::StatusOr<proto::AcceptedSetAck> CommitAcceptedSet(
      const proto::AcceptedSet& request) override {
    if (unreachable_ || helper_ == nullptr) return absl::UnavailableError("helper unreachable");
    absl::StatusOr<proto::AcceptedSetAck> ack = helper_->HandleCommit(request);
    if (drop_commit_replies_) return absl::UnavailableError("commit reply lost");
    return ack;
  }

 private:
  Aggregator* helper_;
  std::atomic<bool> unreachable_{false};
  std::atomic<bool> drop_commit_replies_{false};
  std::atomic<bool> drop_verify_replies_{false};
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_TESTING_IN_PROCESS_PEER_CHANNEL_H_

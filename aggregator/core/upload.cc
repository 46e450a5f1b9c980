// The upload path of the client API (see aggregator.h): the ticket and the
// device's signature, the share validated, hashed once (its content digest,
// whose public-parts digest the verification reuses) and stored by the
// task's group commit, then kept parsed in the pending-share cache.
// Thread-safe as Aggregator is: any number of uploads run at once; each
// task's store writes are serialized by its upload queue.
#include <algorithm>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "aggregator/core/aggregator.h"
#include "aggregator/core/norm_verification.h"
#include "aggregator/core/task.h"
#include "base/ids.h"
#include "base/status_macros.h"
#include "crypto/sign/device_auth.h"
#include "crypto/sign/upload_ticket.h"

namespace tandem::aggregator {

absl::StatusOr<std::string> Aggregator::CheckTicket(const proto::UploadRequest& request,
                                                    proto::UploadTicket* ticket) const {
  if (options_.ticket_key == nullptr) return std::string();
  if (!request.has_ticket()) {
    return absl::UnauthenticatedError(
        "this aggregator accepts uploads with a coordinator ticket only");
  }
  // The key is chosen by the ticket's key id (rotation with overlap: the
  // coordinator's new key and those being rotated out), one check each.
  absl::InlinedVector<const crypto::Ed25519VerifyingKey*, 4> keys = {options_.ticket_key.get()};
  for (const crypto::Ed25519VerifyingKey& k : options_.previous_ticket_keys) keys.push_back(&k);
  absl::StatusOr<proto::UploadTicket> verified =
      crypto::VerifyUploadTicketWithAnyOf(keys, request.ticket());
  TANDEM_ASSIGN_OR_RETURN(*ticket, std::move(verified));
  // Expiry is on the coordinator's clock: checked against this server's
  // less the tolerated skew.
  TANDEM_RETURN_IF_ERROR(crypto::CheckTicketFor(
      *ticket, request.task_id(), request.round_id(), request.report_id(),
      absl::ToUnixMillis(clock_->Now()), absl::ToInt64Milliseconds(options_.max_clock_skew)));
  if (ticket->device_public_key().empty()) {
    if (options_.require_device_bound_tickets) {
      return absl::UnauthenticatedError(
          "this aggregator accepts only tickets bound to a device key");
    }
    if (!request.device_signature().empty()) {
      return absl::UnauthenticatedError("device_signature without a device-bound ticket");
    }
  } else if (request.device_signature().empty()) {
    // Refused before any parsing; the signature itself is checked once the
    // share's digest is known (Upload).
    return absl::UnauthenticatedError("the ticket is bound to a device key: sign the upload");
  }
  return crypto::TicketDigest(request.ticket());
}

absl::StatusOr<proto::UploadResponse> Aggregator::Upload(const proto::UploadRequest& request) {
  return UploadImpl(request, nullptr, nullptr);
}

absl::StatusOr<proto::UploadResponse> Aggregator::Upload(
    proto::UploadRequest* request, std::shared_ptr<google::protobuf::Arena> arena) {
  if (arena == nullptr || request->GetArena() != arena.get()) {
    return absl::InternalError("Upload: the request does not live on the given arena");
  }
  return UploadImpl(*request, request, std::move(arena));
}

google::protobuf::ArenaOptions Aggregator::UploadArenaOptions() {
  google::protobuf::ArenaOptions options;
  options.start_block_size = size_t{32} << 10;
  options.max_block_size = size_t{1} << 20;
  return options;
}

Aggregator::ArenaUpload Aggregator::NewArenaUpload() {
  ArenaUpload out;
  out.arena = std::make_shared<google::protobuf::Arena>(UploadArenaOptions());
  out.request = google::protobuf::Arena::CreateMessage<proto::UploadRequest>(out.arena.get());
  return out;
}

absl::StatusOr<proto::UploadResponse> Aggregator::UploadImpl(
    const proto::UploadRequest& request, proto::UploadRequest* on_arena,
    std::shared_ptr<google::protobuf::Arena> arena) {
  // The ticket first: an outsider learns nothing (not even whether the
  // task exists) and costs one signature check.
  proto::UploadTicket ticket;
  TANDEM_ASSIGN_OR_RETURN(const std::string ticket_digest, CheckTicket(request, &ticket));
  TANDEM_RETURN_IF_ERROR(ValidateId(request.task_id(), "task_id"));
  if (request.report_id().size() != kReportIdBytes) {
    return absl::InvalidArgumentError("report_id must be exactly 16 bytes");
  }
  if (!request.has_key_share() && !request.has_dense_share()) {
    return absl::InvalidArgumentError("key_share (or dense_share in a dense round) is missing");
  }
  TANDEM_ASSIGN_OR_RETURN(Task * task, GetTask(request.task_id(), /*create=*/false));
  const int64_t round_id = static_cast<int64_t>(request.round_id());
  if (task->store->replicated() != nullptr) {
    bool ahead;
    {
      absl::ReaderMutexLock lock(&task->state_mu);
      ahead = round_id > task->round_id;
    }
    if (ahead) {  // opened through another replica
      absl::MutexLock process_lock(&task->process_mu);
      TANDEM_RETURN_IF_ERROR(RefreshIfStale(*task, round_id));
    }
  }
  std::shared_ptr<const RoundCodec> codec;
  {
    absl::ReaderMutexLock lock(&task->state_mu);
    if (round_id > task->round_id || round_id <= 0) {
      return absl::NotFoundError(absl::StrCat("round ", request.round_id(), " is not open"));
    }
    if (round_id < task->round_id || task->closed) {
      return absl::FailedPreconditionError(absl::StrCat("round ", round_id, " is closed"));
    }
    const int64_t deadline = task->parameters.deadline_unix_ms();
    if (deadline != 0 && absl::ToUnixMillis(clock_->Now() - options_.max_clock_skew) > deadline) {
      return absl::FailedPreconditionError(
          absl::StrCat("round ", round_id, " is past its deadline by this aggregator's clock (",
                       absl::FormatDuration(options_.max_clock_skew), " of skew tolerated)"));
    }
    const int64_t cap = task->parameters.max_reports() != 0 ? task->parameters.max_reports()
                                                            : options_.max_reports_per_round;
    if (task->received >= cap) {
      return absl::ResourceExhaustedError(absl::StrCat("round ", round_id, " is full"));
    }
    codec = task->codec;
  }
  // The share of the round's encoding, well formed for this server.
  TANDEM_RETURN_IF_ERROR(codec->ValidateUpload(request));
  std::string share = codec->EncodeStored(request, ticket_digest);
  // Hashed here, on this upload's thread, not in the group commit's one:
  // the content digest (the store's ShareDigest of `share`), whose
  // public-parts digest the verification reuses (one pass over the bytes).
  std::optional<crypto::ProofDigest> public_digest;
  TANDEM_ASSIGN_OR_RETURN(std::string digest,
                          codec->StoredDigest(request, ticket_digest, share, &public_digest));
  // The device's signature: this digest is the content digest it signed
  // (crypto::UploadContentDigestOf), so the check costs one Ed25519
  // verification. Before any state is read: a stolen ticket learns nothing
  // either.
  if (!ticket.device_public_key().empty()) {
    TANDEM_RETURN_IF_ERROR(crypto::VerifyUploadSignature(
        ticket,
        options_.role == Role::kLeader ? crypto::UploadRole::kLeader : crypto::UploadRole::kHelper,
        ticket_digest, digest, request.device_signature()));
  }

  // The state alone (no share read; on the segment store a reader that does
  // not wait for a group commit in progress). The store checks again in the
  // group commit, so a concurrent duplicate is still caught there.
  TANDEM_ASSIGN_OR_RETURN(const std::optional<ReportRecord> existing,
                          StoredState(*task, request.report_id()));
  if (existing.has_value()) {
    if (existing->round_id == round_id && existing->share_digest == digest) {
      proto::UploadResponse response;  // identical retry
      response.set_accepted_for_verification(true);
      return response;
    }
    return absl::AlreadyExistsError("report id already used");
  }
  // What verification needs, parsed and validated already (share_cache.h):
  // cached once stored, so that a verification pass need not read it back.
  // Not built where nothing is cached (replicas, a zero budget).
  std::shared_ptr<ParsedShare> parsed;
  if (options_.pending_share_cache_bytes > 0 && task->store->replicated() == nullptr) {
    if (on_arena != nullptr) {  // the request's own messages, arena and all
      parsed = std::make_shared<ParsedShare>(std::move(arena), on_arena);
    } else {  // a copy, on an arena sized to it (the stored encoding holds
              // the same fields): one allocation
      parsed = std::make_shared<ParsedShare>(share.size());
      codec->CopyInto(request, parsed.get());
    }
    parsed->ticket_digest = ticket_digest;
    parsed->public_digest = public_digest;
  }
  TANDEM_RETURN_IF_ERROR(StoreUpload(
      *task, round_id, PendingReport{request.report_id(), std::move(share), std::move(digest)},
      std::move(parsed)));
  {
    absl::MutexLock lock(&task->state_mu);
    ++task->received;
  }
  proto::UploadResponse response;
  response.set_accepted_for_verification(true);
  return response;
}

absl::StatusOr<std::optional<ReportRecord>> Aggregator::StoredState(Task& task,
                                                                    const std::string& report_id) {
  Task::QueuedCheck mine;
  mine.report_id = report_id;
  task.checks.Submit(&mine, CombiningQueue<Task::QueuedCheck>::TakeAll,
                     [&](const std::vector<Task::QueuedCheck*>& batch) {
                       std::vector<std::string> ids;
                       ids.reserve(batch.size());
                       for (const Task::QueuedCheck* c : batch) ids.push_back(c->report_id);
                       absl::StatusOr<absl::flat_hash_map<std::string, ReportRecord>> states =
                           task.store->GetReportStates(ids);
                       for (Task::QueuedCheck* c : batch) {
                         if (!states.ok()) {
                           c->state = states.status();
                         } else if (auto it = states->find(c->report_id); it != states->end()) {
                           c->state = it->second;
                         } else {
                           c->state = std::nullopt;
                         }
                       }
                     });
  return std::move(mine.state);
}

absl::Status Aggregator::StoreUpload(Task& task, int64_t round_id, PendingReport report,
                                     std::shared_ptr<const ParsedShare> parsed) {
  Task::QueuedUpload mine;
  mine.round_id = round_id;
  mine.report = std::move(report);
  mine.parsed = std::move(parsed);
  // A batch is everything queued for the round at the head of the queue.
  const auto take = [](std::vector<Task::QueuedUpload*>* queue) {
    const int64_t round = queue->front()->round_id;
    std::vector<Task::QueuedUpload*> batch, rest;
    for (Task::QueuedUpload* u : *queue) (u->round_id == round ? batch : rest).push_back(u);
    *queue = std::move(rest);
    return batch;
  };
  task.uploads.Submit(&mine, take, [&](const std::vector<Task::QueuedUpload*>& batch) {
    const int64_t round = batch.front()->round_id;
    std::vector<PendingReport> reports;
    std::vector<std::shared_ptr<const ParsedShare>> parsed_shares;
    reports.reserve(batch.size());
    // Moved, not copied (134 KB per share at D = 2^20): a waiting upload
    // reads only its status back.
    for (Task::QueuedUpload* u : batch) {
      reports.push_back(std::move(u->report));
      parsed_shares.push_back(std::move(u->parsed));
    }
    absl::StatusOr<std::vector<absl::Status>> results = task.store->PutPendingBatch(round, reports);
    // Cached only once durable, and only what the store took as it is (OK:
    // stored now, or an identical retry of a stored report): verification
    // then skips the read-back. (Upload builds no parsed share where nothing
    // is cached; Put ignores a null one.)
    for (size_t i = 0; results.ok() && i < reports.size(); ++i) {
      if (!(*results)[i].ok()) continue;
      // Charged what it holds: its stored size, or its arena's blocks
      // where those are more (an upload's own arena).
      const int64_t held =
          std::max(static_cast<int64_t>(reports[i].share.size()),
                   parsed_shares[i] != nullptr ? parsed_shares[i]->arena_bytes() : int64_t{0});
      task.share_cache->Put(round, reports[i].report_id, std::move(parsed_shares[i]), held);
    }
    for (size_t i = 0; i < batch.size(); ++i) {
      batch[i]->status = results.ok() ? (*results)[i] : results.status();
    }
  });
  return mine.status;
}

}  // namespace tandem::aggregator

#include "client/internal/assignment_checks.h"

#include <cmath>
#include <cstring>
#include <tuple>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "base/status_macros.h"
#include "ml/spec/model_from_spec.h"

namespace tandem::client {
namespace {

bool BothOrNeither(const std::string& a, const std::string& b) { return a.empty() == b.empty(); }

std::string NormalizeName(absl::string_view name) { return absl::AsciiStrToLower(name); }

// "leader endpoint 'x' (server name 'y')" for error texts.
std::string Describe(const proto::Endpoint& e) {
  return e.server_name().empty()
             ? absl::StrCat("'", e.address(), "'")
             : absl::StrCat("'", e.address(), "' (TLS name '", e.server_name(), "')");
}

}  // namespace

absl::Status ValidateTrustOptions(const ParticipantOptions& o) {
  if (!BothOrNeither(o.leader_address, o.helper_address)) {
    return absl::InvalidArgumentError(
        "pin both aggregators' addresses (leader_address and helper_address) or neither");
  }
  if (!BothOrNeither(o.leader_name, o.helper_name)) {
    return absl::InvalidArgumentError(
        "pin both aggregators' TLS names (leader_name and helper_name) or neither");
  }
  if (!o.leader_address.empty() &&
      NormalizeAddress(o.leader_address) == NormalizeAddress(o.helper_address)) {
    return absl::InvalidArgumentError(
        absl::StrCat("leader_address and helper_address are both ", o.leader_address,
                     ": one server would receive both shares of every update"));
  }
  if (!o.leader_name.empty() && NormalizeName(o.leader_name) == NormalizeName(o.helper_name)) {
    return absl::InvalidArgumentError(
        absl::StrCat("leader_name and helper_name are both ", o.leader_name,
                     ": the two aggregators must have distinct identities"));
  }
  if (o.max_model_bytes < 1 || o.max_dimension < 1) {
    return absl::InvalidArgumentError("max_model_bytes and max_dimension must be >= 1");
  }
  return absl::OkStatus();
}

std::string NormalizeAddress(absl::string_view address) {
  std::string a = absl::AsciiStrToLower(address);
  absl::string_view v(a);
  for (absl::string_view scheme : {"dns:///", "dns:", "ipv4:", "ipv6:"}) {
    if (absl::ConsumePrefix(&v, scheme)) break;
  }
  std::string out(v);
  for (absl::string_view loopback : {"localhost:", "127.0.0.1:", "[::1]:"}) {
    if (absl::StartsWith(out, loopback)) {
      return absl::StrCat("loopback:", out.substr(loopback.size()));
    }
  }
  return out;
}

absl::StatusOr<UploadEndpoints> ResolveUploadEndpoints(const ParticipantOptions& o,
                                                       const proto::Endpoint& leader,
                                                       const proto::Endpoint& helper) {
  if (leader.address().empty() || helper.address().empty()) {
    return absl::InvalidArgumentError("the assignment names no aggregator endpoints");
  }
  UploadEndpoints out;
  out.leader = leader;
  out.helper = helper;
  if (!o.leader_address.empty()) {
    out.pinned = true;
    for (const auto& [got, want, role] : {std::make_tuple(&leader, &o.leader_address, "leader"),
                                          std::make_tuple(&helper, &o.helper_address, "helper")}) {
      if (NormalizeAddress(got->address()) != NormalizeAddress(*want)) {
        return absl::FailedPreconditionError(absl::StrCat(
            "the coordinator named ", role, " endpoint ", Describe(*got), ", this client pins ",
            role, " address '", *want, "': refusing to upload to an aggregator it does not trust"));
      }
    }
  }
  if (!o.leader_name.empty()) {
    out.pinned = true;
    for (const auto& [got, want, role] : {std::make_tuple(&leader, &o.leader_name, "leader"),
                                          std::make_tuple(&helper, &o.helper_name, "helper")}) {
      if (!got->server_name().empty() &&
          NormalizeName(got->server_name()) != NormalizeName(*want)) {
        return absl::FailedPreconditionError(
            absl::StrCat("the coordinator named ", role, " endpoint ", Describe(*got),
                         ", this client pins ", role, " identity '", *want,
                         "': refusing to upload to an aggregator it does not trust"));
      }
    }
    out.leader.set_server_name(o.leader_name);
    out.helper.set_server_name(o.helper_name);
  }
  if (NormalizeAddress(leader.address()) == NormalizeAddress(helper.address())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the coordinator named ", leader.address(),
        " as both leader and helper: one server would see both shares of the update; refusing"));
  }
  if (!out.leader.server_name().empty() &&
      NormalizeName(out.leader.server_name()) == NormalizeName(out.helper.server_name())) {
    return absl::FailedPreconditionError(absl::StrCat(
        "the assignment names TLS identity '", out.leader.server_name(),
        "' for both leader and helper: one party would see both shares of the update; refusing"));
  }
  return out;
}

absl::StatusOr<proto::UploadTicket> ParseUploadTicketFor(
    const proto::SignedUploadTicket& signed_ticket, absl::string_view task_id, uint64_t round_id) {
  proto::UploadTicket t;
  if (signed_ticket.ticket().empty() || !t.ParseFromString(signed_ticket.ticket())) {
    return absl::InvalidArgumentError("the upload ticket is empty or does not parse");
  }
  if (t.ticket_id().size() != 16) {
    return absl::InvalidArgumentError(
        absl::StrCat("the upload ticket id has ", t.ticket_id().size(), " bytes, not 16"));
  }
  if (t.task_id() != task_id || t.round_id() != round_id) {
    return absl::FailedPreconditionError(
        absl::StrCat("the upload ticket is for task '", t.task_id(), "' round ", t.round_id(),
                     ", the assignment is task '", task_id, "' round ", round_id));
  }
  return t;
}

absl::StatusOr<std::optional<proto::UploadTicket>> CheckAssignmentTicket(
    const proto::CheckInResponse& task) {
  if (!task.has_ticket()) return std::optional<proto::UploadTicket>();
  absl::StatusOr<proto::UploadTicket> t =
      ParseUploadTicketFor(task.ticket(), task.task_id(), task.round_id());
  if (!t.ok()) return t.status();
  return std::optional<proto::UploadTicket>(*std::move(t));
}

absl::Status CheckRoundBounds(const proto::CheckInResponse& task, const ParticipantOptions& o) {
  const proto::RoundParameters& rp = task.round_parameters();
  const uint64_t d = rp.dimension();
  const uint32_t k = rp.num_groups();
  const uint32_t b = rp.group_parameters().block_size();
  const uint32_t log_blocks = rp.group_parameters().log_num_blocks();
  if (d < 1 || d > o.max_dimension) {
    return absl::InvalidArgumentError(absl::StrCat("the round's dimension ", d,
                                                   " is outside this client's [1, ",
                                                   o.max_dimension, "] (max_dimension)"));
  }
  if (rp.encoding() == proto::REPORT_ENCODING_DENSE) {
    // The whole update is shared: no groups or blocks to check
    // (ReportBuilder::Create checks the width and the bound).
    if (task.dimension() != 0 && task.dimension() != d) {
      return absl::InvalidArgumentError(
          "the assignment's dimension disagrees with its round parameters");
    }
    return absl::OkStatus();
  }
  if (k < 1 || k > kMaxNumGroups || b < 1 || b > kMaxBlockSize || log_blocks > kMaxLogNumBlocks) {
    return absl::InvalidArgumentError(
        absl::StrCat("the round's num_groups ", k, ", block_size ", b, " or log_num_blocks ",
                     log_blocks, " is outside [1, ", kMaxNumGroups, "], [1, ", kMaxBlockSize,
                     "], [0, ", kMaxLogNumBlocks, "]"));
  }
  // k <= 2^12, B <= 2^20, 2^d <= 2^24: the product fits in 64 bits.
  if (uint64_t{k} * b * (uint64_t{1} << log_blocks) != d) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the round's dimension ", d, " is not num_groups * 2^log_num_blocks * block_size = ", k,
        " * 2^", log_blocks, " * ", b));
  }
  // The CheckInResponse's own copies, when the coordinator sets them.
  if ((task.dimension() != 0 && task.dimension() != d) ||
      (task.num_groups() != 0 && task.num_groups() != k) ||
      (task.has_group_parameters() && (task.group_parameters().block_size() != b ||
                                       task.group_parameters().log_num_blocks() != log_blocks))) {
    return absl::InvalidArgumentError(
        "the assignment's dimension/groups disagree with its round parameters");
  }
  // Fixed point and norm bound: ReportBuilder::Create (crypto's own checks).
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> CheckOpaqueModel(const proto::ModelSpec& m, const ParticipantOptions& o) {
  if (m.tensors_size() > kMaxOpaqueTensors || m.num_classes() < 0 || m.num_classes() == 1 ||
      m.num_classes() > kMaxClasses) {
    return absl::InvalidArgumentError(absl::StrCat(
        "opaque model out of bounds: ", m.tensors_size(), " tensors (max ", kMaxOpaqueTensors,
        "), num_classes ", m.num_classes(), " (0 or in [2, ", kMaxClasses, "])"));
  }
  const uint64_t max_params = o.max_model_bytes / sizeof(float);
  uint64_t params = 0;
  absl::flat_hash_set<std::string> names;
  for (const proto::TensorSpec& t : m.tensors()) {
    if (t.name().empty() || t.name().size() > 128 || !names.insert(t.name()).second ||
        t.shape_size() > 16) {
      return absl::InvalidArgumentError(absl::StrCat(
          "opaque model tensor '", t.name().substr(0, 128),
          "': names are unique, 1 to 128 bytes, and shapes have at most 16 dimensions"));
    }
    uint64_t n = 1;
    for (int64_t d : t.shape()) {
      // n <= max_params <= 2^61 and d <= max_params: no overflow before the check.
      if (d < 1 || static_cast<uint64_t>(d) > max_params ||
          n > max_params / static_cast<uint64_t>(d)) {
        return absl::InvalidArgumentError(
            absl::StrCat("opaque model tensor '", t.name(),
                         "' has a dimension < 1 or more parameters than this "
                         "client's max_model_bytes (",
                         o.max_model_bytes, ") hold"));
      }
      n *= static_cast<uint64_t>(d);
    }
    params += n;
    if (params > max_params) {
      return absl::InvalidArgumentError(
          absl::StrCat("the task's model has more parameters than this client's max_model_bytes (",
                       o.max_model_bytes, ") hold"));
    }
  }
  return params;
}

absl::StatusOr<uint64_t> CheckTrainingBounds(const proto::TrainingConfig& tc,
                                             const ParticipantOptions& o) {
  if (tc.local_epochs() > kMaxLocalEpochs || tc.local_steps() > kMaxLocalSteps ||
      tc.batch_size() > kMaxBatchSize) {
    return absl::InvalidArgumentError(
        absl::StrCat("training settings out of bounds: local_epochs ", tc.local_epochs(), " (max ",
                     kMaxLocalEpochs, "), local_steps ", tc.local_steps(), " (max ", kMaxLocalSteps,
                     "), batch_size ", tc.batch_size(), " (max ", kMaxBatchSize, ")"));
  }
  if (!std::isfinite(tc.learning_rate()) || tc.learning_rate() < 0 ||
      tc.learning_rate() > kMaxLearningRate || !std::isfinite(tc.momentum()) || tc.momentum() < 0 ||
      tc.momentum() >= 1 || !std::isfinite(tc.coido_fraction()) || tc.coido_fraction() < 0 ||
      tc.coido_fraction() > 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("training settings out of bounds: learning_rate ", tc.learning_rate(),
                     " (in [0, ", kMaxLearningRate, "]), momentum ", tc.momentum(),
                     " (in [0, 1)), coido_fraction ", tc.coido_fraction(), " (in [0, 1])"));
  }
  const proto::ModelSpec& m = tc.model();
  if (m.tensors_size() > 0) return CheckOpaqueModel(m, o);
  if (ml::IsLayered(m)) {
    // A native layer list: shapes chain and sizes are bounded
    // (ml/spec/model_from_spec.h), checked without allocating.
    TANDEM_ASSIGN_OR_RETURN(const int64_t n, ml::NativeParamCount(m));
    if (static_cast<uint64_t>(n) > o.max_model_bytes / sizeof(float)) {
      return absl::InvalidArgumentError(absl::StrCat(
          "the task's model has ", n, " parameters, more than this client's max_model_bytes (",
          o.max_model_bytes, ") hold"));
    }
    return static_cast<uint64_t>(n);
  }
  if (m.hidden_size() > kMaxHiddenLayers || m.input_dim() < 1 || m.input_dim() > kMaxLayerWidth ||
      m.num_classes() < 2 || m.num_classes() > kMaxClasses) {
    return absl::InvalidArgumentError(
        absl::StrCat("model out of bounds: ", m.hidden_size(), " hidden layers (max ",
                     kMaxHiddenLayers, "), input_dim ", m.input_dim(), " (in [1, ", kMaxLayerWidth,
                     "]), num_classes ", m.num_classes(), " (in [2, ", kMaxClasses, "])"));
  }
  // Each width <= 2^24, so each layer's (in + 1) * out < 2^49 and the sum of
  // at most 65 of them fits in 64 bits.
  uint64_t params = 0;
  int64_t in = m.input_dim();
  for (int i = 0; i <= m.hidden_size(); ++i) {
    const int64_t out = i < m.hidden_size() ? m.hidden(i) : m.num_classes();
    if (out < 1 || out > kMaxLayerWidth) {
      return absl::InvalidArgumentError(
          absl::StrCat("model hidden width ", out, " is outside [1, ", kMaxLayerWidth, "]"));
    }
    params += static_cast<uint64_t>(in + 1) * static_cast<uint64_t>(out);
    in = out;
  }
  if (params > o.max_model_bytes / sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "the task's model has ", params, " parameters, more than this client's max_model_bytes (",
        o.max_model_bytes, ") hold"));
  }
  return params;
}

absl::Status CheckRecycledLayers(const proto::TrainingConfig& tc, size_t num_tensors) {
  for (int i = 0; i < tc.recycled_layers_size(); ++i) {
    if (tc.recycled_layers(i) >= num_tensors ||
        (i > 0 && tc.recycled_layers(i) <= tc.recycled_layers(i - 1))) {
      return absl::InvalidArgumentError(
          absl::StrCat("recycled layer indices must be sorted, distinct and below the model's ",
                       num_tensors, " tensors; got ", tc.recycled_layers(i), " at position ", i));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<float>> ParseModelBlob(const std::string& blob, uint64_t params,
                                                  uint64_t max_bytes) {
  if (blob.size() > max_bytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        "downloaded model has ", blob.size(), " bytes, more than max_model_bytes ", max_bytes));
  }
  proto::Model model;
  if (!model.ParseFromString(blob) || model.layers_size() != 1 ||
      model.layers(0).dtype() != proto::DTYPE_FLOAT32 ||
      model.layers(0).data().size() % sizeof(float) != 0) {
    return absl::DataLossError("downloaded model is not one float32 tensor");
  }
  const proto::Tensor& t = model.layers(0);
  const uint64_t values = t.data().size() / sizeof(float);
  uint64_t product = 1;
  for (int64_t dim : t.shape()) {
    // Every factor is <= values (<= 2^62), so a product that passes stays exact.
    if (dim < 0 || (dim > 0 && product > values / static_cast<uint64_t>(dim))) {
      return absl::DataLossError("downloaded model's shape does not match its data");
    }
    product *= static_cast<uint64_t>(dim);
  }
  if (product != values) {
    return absl::DataLossError("downloaded model's shape does not match its data");
  }
  if (values != params) {
    return absl::InvalidArgumentError(
        absl::StrCat("downloaded model has ", values, " values, the task's model has ", params));
  }
  std::vector<float> out(values);
  if (values > 0) std::memcpy(out.data(), t.data().data(), values * sizeof(float));
  return out;
}

}  // namespace tandem::client

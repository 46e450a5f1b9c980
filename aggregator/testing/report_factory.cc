#include "aggregator/testing/report_factory.h"

#include <openssl/sha.h>

#include <cstring>
#include <limits>

#include "base/random.h"
#include "base/status_macros.h"
#include "crypto/dense/dense_sharing.h"
#include "crypto/dpf/sparse_dpf.h"
#include "crypto/proof/dense_norm_proof.h"
#include "crypto/proof/norm_proof.h"
#include "crypto/sign/device_auth.h"
#include "crypto/sign/upload_ticket.h"

namespace tandem::aggregator::testing {

proto::RoundParameters MakeRoundParameters(const std::string& task_id, uint64_t round_id,
                                           uint32_t log_num_blocks, uint32_t block_size,
                                           uint32_t num_groups) {
  proto::RoundParameters p;
  p.set_task_id(task_id);
  p.set_round_id(round_id);
  p.set_dimension(uint64_t{num_groups} * (uint64_t{1} << log_num_blocks) * block_size);
  // The encoding the report values stand for (entries < 2^20 = 16 * 2^16):
  // the servers measure a round's noise against it when there is no norm bound.
  p.mutable_fixed_point()->set_fractional_bits(16);
  p.mutable_fixed_point()->set_clip_l2_norm(16.0);
  p.mutable_group_parameters()->set_log_num_blocks(log_num_blocks);
  p.mutable_group_parameters()->set_block_size(block_size);
  p.mutable_group_parameters()->set_value_bits(64);
  p.set_num_groups(num_groups);
  p.mutable_dp()->set_min_batch_size(1);
  return p;
}

proto::RoundParameters MakeNormRoundParameters(const std::string& task_id, uint64_t round_id,
                                               uint32_t log_num_blocks, uint32_t block_size,
                                               uint32_t num_groups, uint64_t max_block_l2_squared,
                                               uint64_t max_l2_squared) {
  proto::RoundParameters p =
      MakeRoundParameters(task_id, round_id, log_num_blocks, block_size, num_groups);
  p.mutable_norm_bound()->set_max_block_l2_squared(max_block_l2_squared);
  p.mutable_norm_bound()->set_max_l2_squared(max_l2_squared);
  return p;
}

proto::RoundParameters MakeDenseRoundParameters(const std::string& task_id, uint64_t round_id,
                                                uint64_t dimension, uint64_t max_l2_squared) {
  proto::RoundParameters p = MakeRoundParameters(task_id, round_id, 0, 1, 1);
  p.set_dimension(dimension);
  p.set_encoding(proto::REPORT_ENCODING_DENSE);
  p.clear_group_parameters();
  p.mutable_group_parameters()->set_value_bits(64);
  p.set_num_groups(0);
  if (max_l2_squared > 0) {
    p.mutable_norm_bound()->set_max_block_l2_squared(max_l2_squared);
    p.mutable_norm_bound()->set_max_l2_squared(max_l2_squared);
  }
  return p;
}

absl::StatusOr<TestReport> MakeDenseReport(const proto::RoundParameters& params,
                                           const std::vector<int64_t>& values, uint64_t id,
                                           const std::vector<uint64_t>* witness) {
  TestReport r;
  for (int64_t x : values) r.dense.push_back(static_cast<uint64_t>(x));
  TANDEM_ASSIGN_OR_RETURN(crypto::DenseSharing sharing,
                          crypto::DenseSharing::Create(params.dimension(), 64));
  TANDEM_ASSIGN_OR_RETURN(auto shares, sharing.Share(r.dense, OpenSslRandom::Default()));
  std::string report_id(16, '\0');
  std::memcpy(report_id.data(), &id, sizeof(id));
  for (proto::UploadRequest* u : {&r.to_leader, &r.to_helper}) {
    u->set_task_id(params.task_id());
    u->set_round_id(params.round_id());
    u->set_report_id(report_id);
  }
  if (params.has_norm_bound()) {
    TANDEM_ASSIGN_OR_RETURN(
        crypto::proof::DenseNormProof sys,
        crypto::proof::DenseNormProof::Create(params.dimension(), 64, params.norm_bound()));
    TANDEM_ASSIGN_OR_RETURN(
        auto proofs,
        witness == nullptr
            ? sys.Prove(report_id, shares.first, shares.second, OpenSslRandom::Default())
            : sys.ProveWithWitness(report_id, shares.first, shares.second, *witness,
                                   OpenSslRandom::Default()));
    *r.to_leader.mutable_norm_proof() = std::move(proofs.first);
    *r.to_helper.mutable_norm_proof() = std::move(proofs.second);
  }
  *r.to_leader.mutable_dense_share() = std::move(shares.first);
  *r.to_helper.mutable_dense_share() = std::move(shares.second);
  return r;
}

namespace {

absl::StatusOr<TestReport> Build(const proto::RoundParameters& params,
                                 const std::vector<uint64_t>& values, SecureRandom* rng,
                                 bool cheat) {
  TANDEM_ASSIGN_OR_RETURN(
      crypto::SparseDpf dpf,
      crypto::SparseDpf::Create(params.dimension(),
                                static_cast<int>(params.group_parameters().block_size()),
                                static_cast<int>(params.num_groups()),
                                params.group_parameters().value_bits() == 32 ? 32 : 64));
  const int k = dpf.num_groups();
  const int b = dpf.block_size();
  if (values.size() != static_cast<size_t>(k) * b) {
    return absl::InvalidArgumentError("values must have num_groups * block_size entries");
  }
  std::vector<uint32_t> indices(k);
  TestReport report;
  report.dense.assign(dpf.dimension(), 0);
  for (int g = 0; g < k; ++g) {
    TANDEM_ASSIGN_OR_RETURN(uint64_t r, rng->NextUint64());
    indices[g] = static_cast<uint32_t>(r % dpf.blocks_per_group());
    for (int j = 0; j < b; ++j) {
      report.dense[g * dpf.group_dimension() + uint64_t{indices[g]} * b + j] =
          values[static_cast<size_t>(g) * b + j];
    }
  }
  TANDEM_ASSIGN_OR_RETURN(auto keys, dpf.GenerateKeys(indices, values, rng));
  std::string id(16, '\0');
  TANDEM_RETURN_IF_ERROR(
      rng->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(id.data()), id.size())));
  for (proto::UploadRequest* req : {&report.to_leader, &report.to_helper}) {
    req->set_task_id(params.task_id());
    req->set_round_id(params.round_id());
    req->set_report_id(id);
  }
  if (params.has_norm_bound()) {
    TANDEM_ASSIGN_OR_RETURN(crypto::proof::NormProofSystem sys,
                            crypto::proof::NormProofSystem::Create(
                                params.group_parameters(), params.num_groups(),
                                params.norm_bound()));
    std::pair<proto::NormProofShare, proto::NormProofShare> proof;
    if (cheat) {
      std::vector<uint64_t> derived, u0, u1;
      TANDEM_RETURN_IF_ERROR(sys.ClientValues(keys.first, keys.second, &derived, &u0, &u1));
      std::vector<uint64_t> zero(sys.circuit().witness_length(), 0);
      TANDEM_ASSIGN_OR_RETURN(
          proof, sys.ProveWithWitness(id, keys.first, keys.second, derived, zero, rng));
    } else {
      TANDEM_ASSIGN_OR_RETURN(proof, sys.Prove(id, keys.first, keys.second, rng));
    }
    *report.to_leader.mutable_norm_proof() = std::move(proof.first);
    *report.to_helper.mutable_norm_proof() = std::move(proof.second);
  }
  *report.to_leader.mutable_key_share() = std::move(keys.first);
  *report.to_helper.mutable_key_share() = std::move(keys.second);
  return report;
}

}  // namespace

absl::StatusOr<TestReport> MakeReport(const proto::RoundParameters& params, uint64_t seed) {
  auto rng = DeterministicRandom::FromSeed(seed);
  const size_t n = size_t{params.num_groups()} * params.group_parameters().block_size();
  std::vector<uint64_t> values(n);
  for (uint64_t& v : values) {
    TANDEM_ASSIGN_OR_RETURN(uint64_t r, rng->NextUint64());
    v = params.has_norm_bound() ? static_cast<uint64_t>(static_cast<int64_t>(r % 5) - 2)
                                : r & ((uint64_t{1} << 20) - 1);
  }
  return Build(params, values, rng.get(), /*cheat=*/false);
}

absl::StatusOr<TestReport> MakeReportWithValues(const proto::RoundParameters& params,
                                                const std::vector<int64_t>& values,
                                                uint64_t seed, bool cheat) {
  auto rng = DeterministicRandom::FromSeed(seed);
  std::vector<uint64_t> encoded(values.begin(), values.end());
  return Build(params, encoded, rng.get(), cheat);
}

absl::StatusOr<std::vector<uint64_t>> ShareValues(const proto::FinalizeResponse& response) {
  const proto::Tensor& t = response.aggregate_share();
  if (t.dtype() != proto::DTYPE_UINT64 || t.shape_size() != 1 ||
      t.data().size() != static_cast<size_t>(t.shape(0)) * 8) {
    return absl::InvalidArgumentError("aggregate share is not a uint64 vector");
  }
  std::vector<uint64_t> values(static_cast<size_t>(t.shape(0)));
  std::memcpy(values.data(), t.data().data(), t.data().size());
  return values;
}

absl::StatusOr<std::vector<uint64_t>> SumShares(const proto::FinalizeResponse& leader,
                                                const proto::FinalizeResponse& helper) {
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint64_t> sum, ShareValues(leader));
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint64_t> other, ShareValues(helper));
  if (sum.size() != other.size()) return absl::InvalidArgumentError("shares differ in size");
  AddInto(sum, other);
  return sum;
}

void AddInto(std::vector<uint64_t>& acc, const std::vector<uint64_t>& v) {
  if (acc.empty()) acc.assign(v.size(), 0);
  for (size_t i = 0; i < v.size(); ++i) acc[i] += v[i];
}

Policy PermissiveTestPolicy() {
  Policy p;
  p.min_noise_multiplier = 0;
  p.min_batch_size = 1;
  p.require_norm_proofs = false;
  p.epsilon_budget = std::numeric_limits<double>::infinity();
  return p;
}

PolicySet PermissiveTestPolicies() { return PolicySet::Uniform(PermissiveTestPolicy()); }

absl::StatusOr<crypto::Ed25519SigningKey> TestDeviceKey(const TestReport& report) {
  std::string seed(32, '\0');
  const std::string input = "tandem.test_device\0" + report.to_leader.report_id();
  SHA256(reinterpret_cast<const unsigned char*>(input.data()), input.size(),
         reinterpret_cast<unsigned char*>(seed.data()));
  return crypto::Ed25519SigningKey::FromSeed(seed);
}

absl::Status AttachTicket(TestReport& report, const proto::RoundParameters& params,
                          const crypto::Ed25519SigningKey& key, int64_t expiry_unix_ms,
                          bool bind_device) {
  proto::UploadTicket ticket;
  ticket.set_task_id(params.task_id());
  ticket.set_round_id(params.round_id());
  ticket.set_ticket_id(report.to_leader.report_id());
  ticket.set_expiry_unix_ms(expiry_unix_ms);
  if (bind_device) {
    absl::StatusOr<crypto::Ed25519SigningKey> device = TestDeviceKey(report);
    if (!device.ok()) return device.status();
    ticket.set_device_public_key(device->PublicKeyRaw());
  }
  absl::StatusOr<proto::SignedUploadTicket> signed_ticket = crypto::SignUploadTicket(key, ticket);
  if (!signed_ticket.ok()) return signed_ticket.status();
  *report.to_leader.mutable_ticket() = *signed_ticket;
  *report.to_helper.mutable_ticket() = *signed_ticket;
  return SignTestUploads(report);
}

absl::Status SignTestUploads(TestReport& report) {
  proto::UploadTicket ticket;
  if (!report.to_leader.has_ticket() ||
      !ticket.ParseFromString(report.to_leader.ticket().ticket()) ||
      ticket.device_public_key().empty()) {
    return absl::OkStatus();
  }
  absl::StatusOr<crypto::Ed25519SigningKey> device = TestDeviceKey(report);
  if (!device.ok()) return device.status();
  if (absl::Status s = crypto::SignUpload(*device, crypto::UploadRole::kLeader, &report.to_leader);
      !s.ok()) {
    return s;
  }
  return crypto::SignUpload(*device, crypto::UploadRole::kHelper, &report.to_helper);
}

}  // namespace tandem::aggregator::testing

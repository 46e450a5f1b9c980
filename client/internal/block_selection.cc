#include "client/internal/block_selection.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"

namespace tandem::client {
namespace {

constexpr char kMagic[4] = {'T', 'E', 'F', '1'};

absl::Status CheckGeometry(size_t size, const BlockGeometry& g) {
  if (g.num_groups == 0 || g.blocks_per_group == 0 || g.block_size == 0) {
    return absl::InvalidArgumentError("block geometry must have k, 2^d and B >= 1");
  }
  if (size > g.dimension()) {
    return absl::InvalidArgumentError(
        absl::StrCat("vector has ", size, " entries, the domain ", g.dimension()));
  }
  return absl::OkStatus();
}

// Coordinates [begin, end) of block j of group g, clamped to `size`.
std::pair<uint64_t, uint64_t> BlockRange(const BlockGeometry& g, uint32_t group, uint64_t block,
                                         size_t size) {
  const uint64_t begin = (uint64_t{group} * g.blocks_per_group + block) * g.block_size;
  const uint64_t end = begin + g.block_size;
  return {std::min<uint64_t>(begin, size), std::min<uint64_t>(end, size)};
}

}  // namespace

absl::StatusOr<std::vector<uint32_t>> SelectTopNormBlocks(absl::Span<const float> v,
                                                          const BlockGeometry& geometry) {
  if (absl::Status s = CheckGeometry(v.size(), geometry); !s.ok()) return s;
  std::vector<uint32_t> indices(geometry.num_groups, 0);
  for (uint32_t g = 0; g < geometry.num_groups; ++g) {
    double best = -1.0;
    for (uint64_t j = 0; j < geometry.blocks_per_group; ++j) {
      const auto [begin, end] = BlockRange(geometry, g, j, v.size());
      double sq = 0.0;  // double: B float squares without cancellation
      for (uint64_t i = begin; i < end; ++i) sq += static_cast<double>(v[i]) * v[i];
      if (sq > best) {  // strict: ties keep the lowest index
        best = sq;
        indices[g] = static_cast<uint32_t>(j);
      }
    }
  }
  return indices;
}

absl::StatusOr<std::vector<float>> UnsentResidual(absl::Span<const float> v,
                                                  absl::Span<const uint32_t> indices,
                                                  const BlockGeometry& geometry) {
  if (absl::Status s = CheckGeometry(v.size(), geometry); !s.ok()) return s;
  if (indices.size() != geometry.num_groups) {
    return absl::InvalidArgumentError(
        absl::StrCat(indices.size(), " block indices for ", geometry.num_groups, " groups"));
  }
  std::vector<float> out(v.begin(), v.end());
  for (uint32_t g = 0; g < geometry.num_groups; ++g) {
    if (indices[g] >= geometry.blocks_per_group) {
      return absl::InvalidArgumentError(
          absl::StrCat("block index ", indices[g], " of group ", g, " is out of range"));
    }
    const auto [begin, end] = BlockRange(geometry, g, indices[g], v.size());
    std::fill(out.begin() + begin, out.begin() + end, 0.0f);
  }
  return out;
}

std::vector<float> ErrorFeedback::Compensate(absl::string_view task_id,
                                             absl::Span<const float> update) const {
  std::vector<float> out(update.begin(), update.end());
  if (task_id == task_id_ && residual_.size() == update.size()) {
    for (size_t i = 0; i < out.size(); ++i) out[i] += residual_[i];
  }
  return out;
}

void ErrorFeedback::Keep(absl::string_view task_id, std::vector<float> residual) {
  task_id_ = std::string(task_id);
  residual_ = std::move(residual);
}

void ErrorFeedback::Clear() {
  task_id_.clear();
  residual_.clear();
}

std::string ErrorFeedback::Serialize() const {
  const uint32_t task_len = static_cast<uint32_t>(task_id_.size());
  const uint64_t n = residual_.size();
  std::string out(sizeof(kMagic) + sizeof(task_len) + task_len + sizeof(n) + n * sizeof(float),
                  '\0');
  char* p = out.data();
  std::memcpy(p, kMagic, sizeof(kMagic));
  p += sizeof(kMagic);
  std::memcpy(p, &task_len, sizeof(task_len));
  p += sizeof(task_len);
  std::memcpy(p, task_id_.data(), task_len);
  p += task_len;
  std::memcpy(p, &n, sizeof(n));
  p += sizeof(n);
  if (n > 0) std::memcpy(p, residual_.data(), n * sizeof(float));
  return out;
}

absl::StatusOr<ErrorFeedback> ErrorFeedback::Parse(absl::string_view bytes) {
  const auto bad = [] { return absl::InvalidArgumentError("not an error-feedback state"); };
  if (bytes.size() < sizeof(kMagic) + sizeof(uint32_t) ||
      std::memcmp(bytes.data(), kMagic, sizeof(kMagic)) != 0) {
    return bad();
  }
  bytes.remove_prefix(sizeof(kMagic));
  uint32_t task_len = 0;
  std::memcpy(&task_len, bytes.data(), sizeof(task_len));
  bytes.remove_prefix(sizeof(task_len));
  if (bytes.size() < uint64_t{task_len} + sizeof(uint64_t)) return bad();
  ErrorFeedback ef;
  ef.task_id_ = std::string(bytes.substr(0, task_len));
  bytes.remove_prefix(task_len);
  uint64_t n = 0;
  std::memcpy(&n, bytes.data(), sizeof(n));
  bytes.remove_prefix(sizeof(n));
  if (n > bytes.size() / sizeof(float) || n * sizeof(float) != bytes.size()) return bad();
  ef.residual_.resize(n);
  if (n > 0) std::memcpy(ef.residual_.data(), bytes.data(), n * sizeof(float));
  for (float x : ef.residual_) {
    if (!std::isfinite(x)) return bad();
  }
  return ef;
}

absl::Status LoadErrorFeedback(StateStore* store, ErrorFeedback* memory) {
  if (store == nullptr) return absl::OkStatus();
  absl::StatusOr<std::optional<std::string>> blob = store->Get(kErrorFeedbackKey);
  if (!blob.ok()) return blob.status();
  if (!blob->has_value()) {
    memory->Clear();
    return absl::OkStatus();
  }
  absl::StatusOr<ErrorFeedback> parsed = ErrorFeedback::Parse(**blob);
  if (parsed.ok()) {
    *memory = *std::move(parsed);
  } else {
    memory->Clear();  // torn or foreign: start afresh
  }
  return absl::OkStatus();
}

absl::Status SaveErrorFeedback(StateStore* store, const ErrorFeedback& memory) {
  if (store == nullptr) return absl::OkStatus();
  return store->Put(kErrorFeedbackKey, memory.Serialize());
}

}  // namespace tandem::client

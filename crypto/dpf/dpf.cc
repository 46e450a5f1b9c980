#include "crypto/dpf/dpf.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"

namespace tandem::crypto {

absl::StatusOr<Dpf> Dpf::Create(int log_domain_size, int value_bits, AesPath path) {
  if (log_domain_size < 0 || log_domain_size > 30) {
    return absl::InvalidArgumentError(
        absl::StrCat("log_domain_size must be in [0, 30], got ", log_domain_size));
  }
  if (value_bits != 32 && value_bits != 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("value_bits must be 32 or 64, got ", value_bits));
  }
  const int log_per_leaf = value_bits == 64 ? 1 : 2;  // 128 / value_bits outputs per AES block
  const int log_block = std::min(log_per_leaf, log_domain_size);
  TANDEM_ASSIGN_OR_RETURN(
      BlockDpf block, BlockDpf::Create(log_domain_size - log_block, 1 << log_block, value_bits,
                                       path));
  return Dpf(log_domain_size, log_block, std::move(block));
}

absl::StatusOr<std::pair<DpfKey, DpfKey>> Dpf::GenerateKeys(uint64_t alpha, uint64_t beta,
                                                            SecureRandom* rng) const {
  if (alpha >= domain_size()) {
    return absl::InvalidArgumentError(
        absl::StrCat("alpha ", alpha, " out of domain [0, ", domain_size(), ")"));
  }
  const uint64_t slot = alpha & ((uint64_t{1} << log_block_size_) - 1);
  std::vector<uint64_t> block(size_t{1} << log_block_size_);
  for (uint64_t j = 0; j < block.size(); ++j) {
    // Branch-free: mask is all ones iff j == slot (alpha is secret).
    const uint64_t diff = j ^ slot;
    const uint64_t is_equal = ((diff | (0 - diff)) >> 63) ^ 1;
    block[j] = beta & (0 - is_equal);
  }
  return block_dpf_.GenerateKeys(alpha >> log_block_size_, block, rng);
}

template <typename T>
absl::StatusOr<T> Dpf::EvaluateAt(const DpfKey& key, uint64_t x) const {
  if (x >= domain_size()) {
    return absl::InvalidArgumentError(absl::StrCat("x ", x, " out of domain"));
  }
  T block[4];
  TANDEM_RETURN_IF_ERROR(block_dpf_.EvaluateBlock<T>(
      key, x >> log_block_size_, absl::MakeSpan(block, size_t{1} << log_block_size_)));
  return block[x & ((uint64_t{1} << log_block_size_) - 1)];
}

template absl::StatusOr<uint32_t> Dpf::EvaluateAt<uint32_t>(const DpfKey&, uint64_t) const;
template absl::StatusOr<uint64_t> Dpf::EvaluateAt<uint64_t>(const DpfKey&, uint64_t) const;

}  // namespace tandem::crypto

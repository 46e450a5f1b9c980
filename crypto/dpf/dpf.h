// Point DPF over a domain of 2^n with values in Z_2^32 or Z_2^64.
//
// A thin layer over BlockDpf: BGI16 early termination packs 128/value_bits
// outputs into one leaf (Boyle, Gilboa, Ishai, CCS'16, section 3.2.1), so the
// tree has depth n - log2(128/value_bits) and each leaf costs one fixed-key
// AES call. The tree is the half-tree of Guo et al. (Eurocrypt 2023): one AES
// call per inner node. Full-domain evaluation of 2^n outputs therefore costs
// about 2 * 2^n * value_bits / 128 AES blocks.
//
// Immutable value type, thread-safe for const use; scratch is per thread.
#ifndef TANDEM_CRYPTO_DPF_DPF_H_
#define TANDEM_CRYPTO_DPF_DPF_H_

#include <cstdint>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/random.h"
#include "crypto/dpf/block_dpf.h"

namespace tandem::crypto {

using DpfKey = BlockDpfKey;

class Dpf {
 public:
  // Returns INVALID_ARGUMENT unless 0 <= log_domain_size <= 30 and
  // value_bits is 32 or 64; FAILED_PRECONDITION for an unsupported path.
  static absl::StatusOr<Dpf> Create(int log_domain_size, int value_bits,
                                    AesPath path = BestAesPath());

  int log_domain_size() const { return log_domain_size_; }
  uint64_t domain_size() const { return uint64_t{1} << log_domain_size_; }
  const BlockDpf& block_dpf() const { return block_dpf_; }

  // Keys of f(alpha) = beta (mod 2^value_bits), f(x) = 0 elsewhere.
  // INVALID_ARGUMENT when alpha is out of the domain; rng errors propagate.
  absl::StatusOr<std::pair<DpfKey, DpfKey>> GenerateKeys(uint64_t alpha, uint64_t beta,
                                                         SecureRandom* rng) const;

  // This party's share of f(x). INVALID_ARGUMENT on a bad x or key.
  template <typename T>
  absl::StatusOr<T> EvaluateAt(const DpfKey& key, uint64_t x) const;

  // out[x] = share of f(x) for all x (out.size() == domain_size()). T is
  // uint64_t, or uint32_t with 32-bit values. No allocation once `scratch`
  // is warm. INVALID_ARGUMENT on size or key mismatch.
  template <typename T>
  absl::Status EvaluateFullDomain(const DpfKey& key, absl::Span<T> out,
                                  BlockDpfScratch* scratch) const {
    return block_dpf_.EvaluateFullDomain<T>(key, out, scratch);
  }
  // accumulator[x] += share of f(x) (mod 2^value_bits).
  template <typename T>
  absl::Status EvaluateAndAdd(const DpfKey& key, absl::Span<T> accumulator,
                              BlockDpfScratch* scratch) const {
    return block_dpf_.EvaluateAndAdd<T>(key, accumulator, scratch);
  }

 private:
  Dpf(int log_domain_size, int log_block_size, BlockDpf block_dpf)
      : log_domain_size_(log_domain_size),
        log_block_size_(log_block_size),
        block_dpf_(std::move(block_dpf)) {}

  int log_domain_size_;
  int log_block_size_;  // outputs per leaf = 2^log_block_size_
  BlockDpf block_dpf_;
};

}  // namespace tandem::crypto

#endif  // TANDEM_CRYPTO_DPF_DPF_H_

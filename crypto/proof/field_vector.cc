#include "crypto/proof/field_vector.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/aes/block.h"
#include "crypto/aes/fixed_key_hash.h"
#include "crypto/dpf/internal/sha256.h"

namespace tandem::crypto::proof {

void BatchInverse(absl::Span<const uint64_t> in, absl::Span<uint64_t> out) {
  if (in.empty()) return;
  // out[i] = in[0] * ... * in[i] first, then unwound from the back.
  uint64_t running = 1;
  for (size_t i = 0; i < in.size(); ++i) {
    running = field::Mul(running, in[i]);
    out[i] = running;
  }
  uint64_t inv = field::Inverse(running);
  for (size_t i = in.size(); i-- > 1;) {
    const uint64_t prefix = out[i - 1];
    out[i] = field::Mul(inv, prefix);
    inv = field::Mul(inv, in[i]);
  }
  out[0] = inv;
}

absl::StatusOr<LagrangeDomain> LagrangeDomain::Create(size_t n) {
  if (n < 1 || n > (size_t{1} << 22)) {
    return absl::InvalidArgumentError(absl::StrCat("domain size must be in [1, 2^22], got ", n));
  }
  // prod_{j != i} (i - j) = i! * (n-1-i)! * (-1)^(n-1-i).
  std::vector<uint64_t> fact(n);
  fact[0] = 1;
  for (size_t i = 1; i < n; ++i) fact[i] = field::Mul(fact[i - 1], i);
  std::vector<uint64_t> denom(n), weights(n);
  for (size_t i = 0; i < n; ++i) {
    const uint64_t d = field::Mul(fact[i], fact[n - 1 - i]);
    denom[i] = ((n - 1 - i) & 1) ? field::Neg(d) : d;
  }
  BatchInverse(denom, absl::MakeSpan(weights));
  return LagrangeDomain(std::move(weights));
}

void LagrangeDomain::Coefficients(uint64_t x, absl::Span<uint64_t> out) const {
  const size_t n = weights_.size();
  if (x < n) {  // x is public (an evaluation point), so this branch leaks nothing
    for (size_t i = 0; i < n; ++i) out[i] = (i == x) ? 1 : 0;
    return;
  }
  // L_i(x) = l(x) * w_i / (x - i), l(x) = prod_j (x - j).
  std::vector<uint64_t> diff(n);
  uint64_t l = 1;
  for (size_t i = 0; i < n; ++i) {
    diff[i] = field::Sub(x, i);
    l = field::Mul(l, diff[i]);
  }
  BatchInverse(diff, out);
  for (size_t i = 0; i < n; ++i) out[i] = field::Mul(field::Mul(out[i], weights_[i]), l);
}

uint64_t LagrangeDomain::Evaluate(absl::Span<const uint64_t> values, uint64_t x) const {
  std::vector<uint64_t> c(weights_.size());
  Coefficients(x, absl::MakeSpan(c));
  DotAccumulator acc;
  for (size_t i = 0; i < c.size(); ++i) acc.Add(c[i], values[i]);
  return acc.Get();
}

namespace {

// field::Reduce128 in 64-bit operations only (so the loop vectorizes):
// 2^64 = 2^3 (mod p), so hi 2^64 + lo = (hi 2^3 mod 2^61) + (hi >> 58) +
// (lo mod 2^61) + (lo >> 61) (mod p), four terms below 2^61 each.
inline uint64_t Reduce128Split(uint64_t hi, uint64_t lo) {
  return field::Reduce64((lo & kP61) + (lo >> 61) + ((hi << 3) & kP61) + (hi >> 58));
}

}  // namespace

absl::Status ExpandField(absl::Span<const uint8_t> seed, absl::string_view label,
                         absl::Span<uint64_t> out) {
  static const absl::StatusOr<FixedKeyHash>* const kHash = new absl::StatusOr<FixedKeyHash>(
      FixedKeyHash::FromName("tandem.proof.xof.v1", BestAesPath()));
  if (!kHash->ok()) return kHash->status();
  TANDEM_ASSIGN_OR_RETURN(
      std::vector<uint8_t> digest,
      HashParts({label, absl::string_view(reinterpret_cast<const char*>(seed.data()),
                                          seed.size())}));
  const Block s = BlockFromBytes(digest.data());
  constexpr size_t kBatch = 256;
  Block blocks[kBatch];
  for (size_t start = 0; start < out.size(); start += kBatch) {
    const size_t n = std::min(kBatch, out.size() - start);
    (*kHash)->HashCounter(s, start, absl::MakeSpan(blocks, n));
    for (size_t i = 0; i < n; ++i) out[start + i] = Reduce128Split(blocks[i].hi, blocks[i].lo);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint8_t>> HashParts(std::initializer_list<absl::string_view> parts) {
  TANDEM_ASSIGN_OR_RETURN(internal::Sha256 sha, internal::Sha256::Create());
  for (absl::string_view part : parts) {
    TANDEM_RETURN_IF_ERROR(sha.UpdateU64(part.size()));
    TANDEM_RETURN_IF_ERROR(
        sha.Update(absl::MakeConstSpan(reinterpret_cast<const uint8_t*>(part.data()), part.size())));
  }
  TANDEM_ASSIGN_OR_RETURN(auto d, sha.Finish());
  return std::vector<uint8_t>(d.begin(), d.end());
}

}  // namespace tandem::crypto::proof

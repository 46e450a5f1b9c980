#include "crypto/proof/norm_circuit.h"

#include <bit>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/proof/goldilocks_lanes.h"

namespace tandem::crypto::proof {
namespace {

uint64_t ISqrt(uint64_t x) {
  uint64_t r = static_cast<uint64_t>(std::sqrt(static_cast<double>(x)));
  while (r > 0 && static_cast<unsigned __int128>(r) * r > x) --r;
  while (static_cast<unsigned __int128>(r + 1) * (r + 1) <= x) ++r;
  return r;
}

// sum of n squares of values below 2^(L+1), plus slack and bound, below p.
bool Exact(size_t n, int l, int slack_bits, uint64_t bound) {
  const unsigned __int128 total = static_cast<unsigned __int128>(n) << (2 * l + 2);
  return total + (static_cast<unsigned __int128>(1) << slack_bits) + bound < gl::kP;
}

// a * 2^l mod p for canonical a and 1 <= l <= 31: a 2^l = hi 2^64 + lo with
// hi < 2^31, and 2^64 = 2^32 - 1 (mod p), so a 2^l = lo + hi (2^32 - 1),
// the second term below 2^63; one carry correction (adding 2^32 - 1 back
// after a carry cannot carry again) and one conditional subtraction.
inline uint64_t MulPow2(uint64_t a, int l) {
  const uint64_t lo = a << l, hi = a >> (64 - l);
  const uint64_t t = hi * gl::kEpsilon;
  const uint64_t s = lo + t;
  return gl::Reduce64(s + (gl::kEpsilon & gl::Mask(s < t)));
}

// GadgetInputs' six inputs of L::kWidth values from `j` on (one group, one
// weight): (rho1 c, c), (rho2 h, h / K), (weight, v), h = X_hi - c,
// v = X_lo + 2^L c. Every result is canonical, so equal bit for bit to
// the scalar gl:: path (a canonical value is unique). REQUIRES: canonical
// operands; returns the output position after the batch.
template <typename L>
uint64_t* GadgetBatch(const uint64_t* c_in, const uint64_t* xlo, const uint64_t* xhi,
                      const uint64_t* rho1, const uint64_t* rho2, uint64_t pow2l,
                      uint64_t inverse_k, uint64_t weight, uint64_t* o) {
  uint64_t a1[L::kWidth], a2[L::kWidth], x2[L::kWidth], v[L::kWidth];
  const typename L::V c = L::Load(c_in);
  const typename L::V h = L::Sub(L::Load(xhi), c);
  L::Store(v, L::Add(L::Load(xlo), L::Mul(c, L::Splat(pow2l))));
  L::Store(a1, L::Mul(L::Load(rho1), c));
  L::Store(a2, L::Mul(L::Load(rho2), h));
  L::Store(x2, L::Mul(h, L::Splat(inverse_k)));
  for (int i = 0; i < L::kWidth; ++i, o += 6) {
    o[0] = a1[i];
    o[1] = c_in[i];
    o[2] = a2[i];
    o[3] = x2[i];
    o[4] = weight;
    o[5] = v[i];
  }
  return o;
}

}  // namespace

absl::StatusOr<NormCircuit> NormCircuit::Create(int num_blocks, int block_size, int value_bits,
                                                NormBound bound, size_t chunk_length,
                                                int num_queries) {
  if (num_blocks < 1 || num_blocks > 4096 || block_size < 1 || block_size > (1 << 20)) {
    return absl::InvalidArgumentError("num_blocks must be in [1, 4096], block_size in [1, 2^20]");
  }
  if (value_bits != 32 && value_bits != 64) {
    return absl::InvalidArgumentError("value_bits must be 32 or 64");
  }
  if (bound.max_block_l2_squared < 1 || bound.max_l2_squared < 1) {
    return absl::InvalidArgumentError("norm bounds must be >= 1");
  }
  const uint64_t smallest = std::min(bound.max_block_l2_squared, bound.max_l2_squared);
  // 2^L > sqrt(bound) >= |v| for every honest value; w - L <= 62 keeps X_hi
  // below p/2 and h, h -+ K below p in magnitude (norm_circuit.h).
  const int l = std::max<int>(std::bit_width(ISqrt(smallest)), std::max(1, value_bits - 62));
  if (l >= value_bits - 1) {
    return absl::InvalidArgumentError("norm bound too large for the value ring");
  }
  const int sb = std::bit_width(bound.max_block_l2_squared);
  const int st = std::bit_width(bound.max_l2_squared);
  const size_t n = static_cast<size_t>(num_blocks) * block_size;
  if (!Exact(block_size, l, sb, bound.max_block_l2_squared) ||
      !Exact(n, l, st, bound.max_l2_squared)) {
    return absl::InvalidArgumentError(
        absl::StrCat("norm bounds too large for exact arithmetic in F_(2^64-2^32+1) with ", n,
                     " values: need n * 2^(2L+2) + 2^S + bound < p (L = ", l, ")"));
  }
  const size_t calls = 3 * n + static_cast<size_t>(num_blocks) * sb + st;
  TANDEM_ASSIGN_OR_RETURN(ParallelSumCubicFlp flp,
                          ParallelSumCubicFlp::Create(calls, chunk_length, num_queries));
  return NormCircuit(num_blocks, block_size, value_bits, l, sb, st, bound, std::move(flp));
}

double NormCircuit::SoundnessLog2() const {
  const double joint = -std::log2(static_cast<double>(gl::kP));
  const double query = flp_.SoundnessLog2();
  const double hi = std::max(joint, query), lo = std::min(joint, query);
  return hi + std::log2(1.0 + std::exp2(lo - hi));
}

void NormCircuit::SplitSums(int party, const uint64_t* sums, size_t count, uint64_t* xlo,
                            uint64_t* xhi) const {
  const uint64_t mask = w_ == 64 ? ~uint64_t{0} : (uint64_t{1} << w_) - 1;
  const uint64_t lo_mask = (uint64_t{1} << l_) - 1;
  const uint64_t neg = 0 - static_cast<uint64_t>(party);  // all ones for party 1 (public)
  for (size_t j = 0; j < count; ++j) {
    const uint64_t u = ((sums[j] ^ neg) - neg) & mask;  // (-1)^party S mod 2^w
    const uint64_t lo = u & lo_mask, hi = u >> l_;      // both < 2^62 < p
    // (-1)^party again, now in F_p.
    xhi[j] = (neg & gl::Neg(hi)) | (~neg & hi);
    xlo[j] = (neg & gl::Neg(lo)) | (~neg & lo);
  }
}

absl::Status NormCircuit::DeriveGroupShare(int party, absl::Span<const uint64_t> group_outputs,
                                           absl::Span<uint64_t> xlo,
                                           absl::Span<uint64_t> xhi) const {
  const size_t b = static_cast<size_t>(b_);
  if (group_outputs.empty() || group_outputs.size() % b != 0 || xlo.size() != b ||
      xhi.size() != b || (party != 0 && party != 1)) {
    return absl::InvalidArgumentError("DeriveGroupShare: bad sizes or party");
  }
  // The block sum S (mod 2^64, hence mod 2^w), kept in xhi until the split.
  std::fill(xhi.begin(), xhi.end(), 0);
  for (size_t x = 0; x < group_outputs.size(); x += b) {
    for (size_t j = 0; j < b; ++j) xhi[j] += group_outputs[x + j];
  }
  SplitSums(party, xhi.data(), b, xlo.data(), xhi.data());
  return absl::OkStatus();
}

absl::Status NormCircuit::DeriveFromBlockSums(int party, absl::Span<const uint64_t> block_sums,
                                              absl::Span<uint64_t> derived) const {
  if (block_sums.size() != n_ || derived.size() != 2 * n_ || (party != 0 && party != 1)) {
    return absl::InvalidArgumentError("DeriveFromBlockSums: bad sizes or party");
  }
  // In place when block_sums is derived's second half: element j of the
  // sums is read before X_hi_j (the same element) and X_lo_j are written.
  SplitSums(party, block_sums.data(), n_, derived.data(), derived.data() + n_);
  return absl::OkStatus();
}

absl::StatusOr<std::vector<uint64_t>> NormCircuit::Witness(absl::Span<const uint64_t> u0,
                                                           absl::Span<const uint64_t> u1) const {
  if (u0.size() != n_ || u1.size() != n_) {
    return absl::InvalidArgumentError("Witness: u0 and u1 need k * B values");
  }
  const uint64_t mask = w_ == 64 ? ~uint64_t{0} : (uint64_t{1} << w_) - 1;
  const uint64_t lo_mask = (uint64_t{1} << l_) - 1;
  std::vector<uint64_t> witness(witness_length(), 0);
  unsigned __int128 total = 0;
  uint64_t too_big = 0;
  for (int g = 0; g < k_; ++g) {
    unsigned __int128 block = 0;
    for (int jj = 0; jj < b_; ++jj) {
      const size_t j = static_cast<size_t>(g) * b_ + jj;
      const uint64_t diff = (u0[j] - u1[j]) & mask;
      // Signed value in [-2^(w-1), 2^(w-1)).
      const int64_t v = w_ == 64 ? static_cast<int64_t>(diff)
                                 : static_cast<int64_t>(static_cast<int32_t>(diff));
      const int64_t xlo = static_cast<int64_t>(u0[j] & lo_mask) -
                          static_cast<int64_t>(u1[j] & lo_mask);
      const uint64_t magnitude = v < 0 ? 0 - static_cast<uint64_t>(v) : static_cast<uint64_t>(v);
      too_big |= magnitude >> l_;
      const uint64_t m = magnitude & lo_mask;  // < 2^L, exact square below
      block += static_cast<unsigned __int128>(m) * m;
      // v - xlo = c * 2^L exactly (both are congruent mod 2^L).
      witness[j] = FromSigned(
          static_cast<int64_t>(static_cast<uint64_t>(v) - static_cast<uint64_t>(xlo)) >> l_);
    }
    if (too_big != 0 || block > bound_.max_block_l2_squared) {
      return absl::InvalidArgumentError(
          absl::StrCat("block ", g, " exceeds the block norm bound"));
    }
    total += block;
    const uint64_t slack = bound_.max_block_l2_squared - static_cast<uint64_t>(block);
    for (int i = 0; i < sb_; ++i) witness[n_ + static_cast<size_t>(g) * sb_ + i] = (slack >> i) & 1;
  }
  if (total > bound_.max_l2_squared) {
    return absl::InvalidArgumentError("report exceeds the total norm bound");
  }
  const uint64_t slack = bound_.max_l2_squared - static_cast<uint64_t>(total);
  for (int i = 0; i < st_; ++i) witness[n_ + static_cast<size_t>(k_) * sb_ + i] = (slack >> i) & 1;
  return witness;
}

absl::Status NormCircuit::GadgetInputs(int party, absl::Span<const uint64_t> derived,
                                       absl::Span<const uint64_t> witness,
                                       absl::Span<const uint64_t> weights,
                                       absl::Span<uint64_t> out) const {
  if (derived.size() != derived_length() || witness.size() != witness_length() ||
      weights.size() != weights_length() || out.size() != flp_.input_length()) {
    return absl::InvalidArgumentError("GadgetInputs: sizes do not match the circuit");
  }
  // All operands are canonical (validated or reduced); one pass, no
  // division in the loop.
  const uint64_t one = party == 0 ? 1 : 0;
  // 1 / K, K = 2^(w-L) <= 2^62 < p: x = h / K is 0 or +-1 for an honest h.
  const uint64_t inverse_k = gl::Inverse(uint64_t{1} << (w_ - l_));
  const uint64_t* rho1 = weights.data();
  const uint64_t* rho2 = rho1 + n_;
  const uint64_t* rho3 = rho2 + n_;
  const uint64_t* sigma = rho3 + slack_bits();
  const uint64_t tau = sigma[k_];
  const uint64_t* xlo = derived.data();
  const uint64_t* xhi = derived.data() + n_;
  uint64_t* o = out.data();
  for (size_t g = 0, j = 0; g < static_cast<size_t>(k_); ++g) {
    // A public constant: party 0's share is the weight, party 1's zero.
    const uint64_t weight = gl::Mul(one, gl::Neg(gl::Add(sigma[g], tau)));
    const size_t end = j + static_cast<size_t>(b_);
#if defined(__AVX512F__) || defined(__AVX2__)
    const uint64_t pow2l = uint64_t{1} << l_;  // 2^L < p
    for (; j + lanes::WideOps::kWidth <= end; j += lanes::WideOps::kWidth) {
      o = GadgetBatch<lanes::WideOps>(witness.data() + j, xlo + j, xhi + j, rho1 + j, rho2 + j,
                                      pow2l, inverse_k, weight, o);
    }
#endif
    for (; j < end; ++j) {
      const uint64_t c = witness[j];
      const uint64_t h = gl::Sub(xhi[j], c);
      const uint64_t v = gl::Add(xlo[j], MulPow2(c, l_));  // X_lo + 2^L c; 1 <= L <= 30 (Exact)
      o[0] = gl::Mul(rho1[j], c);
      o[1] = c;
      o[2] = gl::Mul(rho2[j], h);
      o[3] = gl::Mul(h, inverse_k);
      o[4] = weight;
      o[5] = v;
      o += 6;
    }
  }
  for (size_t i = 0; i < slack_bits(); ++i) {
    const uint64_t s = witness[n_ + i];
    o[0] = gl::Mul(one, rho3[i]);
    o[1] = gl::Sub(gl::Add(s, s), one);
    o += 2;
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> NormCircuit::AffineShare(int party, absl::Span<const uint64_t> witness,
                                                  absl::Span<const uint64_t> weights) const {
  if (witness.size() != witness_length() || weights.size() != weights_length()) {
    return absl::InvalidArgumentError("AffineShare: sizes do not match the circuit");
  }
  const uint64_t one = party == 0 ? 1 : 0;
  const uint64_t* sigma = weights.data() + 2 * n_ + slack_bits();
  const uint64_t tau = sigma[k_];
  // Slack value of `bits` bits starting at witness[first].
  auto slack = [&](size_t first, int bits) {
    uint64_t s = 0;
    // 2^i < 2^64 (bits <= 64), reduced first.
    for (int i = 0; i < bits; ++i) {
      s = gl::Add(s, gl::Mul(gl::Reduce64(uint64_t{1} << i), witness[first + i]));
    }
    return s;
  };
  uint64_t y = 0;
  const uint64_t block_size = gl::Mul(one, static_cast<uint64_t>(b_));  // < p
  for (int g = 0; g < k_; ++g) {
    const uint64_t term = gl::Sub(gl::Mul(one, gl::Reduce64(bound_.max_block_l2_squared)),
                                  slack(n_ + static_cast<size_t>(g) * sb_, sb_));
    y = gl::Add(y, gl::Mul(sigma[g], term));
    // The B calls (-(sigma_g + tau), v) of the block each added
    // (sigma_g + tau) besides the weighted square: taken back here.
    y = gl::Sub(y, gl::Mul(block_size, gl::Add(sigma[g], tau)));
  }
  const uint64_t term = gl::Sub(gl::Mul(one, gl::Reduce64(bound_.max_l2_squared)),
                                slack(n_ + static_cast<size_t>(k_) * sb_, st_));
  return gl::Add(y, gl::Mul(tau, term));
}

}  // namespace tandem::crypto::proof

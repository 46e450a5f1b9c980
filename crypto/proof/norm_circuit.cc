#include "crypto/proof/norm_circuit.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <vector>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/proof/field_vector.h"
#include "crypto/proof/goldilocks_lanes.h"

namespace tandem::crypto::proof {
namespace {

uint64_t ISqrt(uint64_t x) {
  uint64_t r = static_cast<uint64_t>(std::sqrt(static_cast<double>(x)));
  while (r > 0 && static_cast<unsigned __int128>(r) * r > x) --r;
  while (static_cast<unsigned __int128>(r + 1) * (r + 1) <= x) ++r;
  return r;
}

// 3^digits, or the first power of three above 2^64 - 1 when 3^digits is
// larger (every comparison here is with values below 2^64).
unsigned __int128 Pow3(int digits) {
  unsigned __int128 x = 1;
  for (int i = 0; i < digits && x <= ~uint64_t{0}; ++i) x *= 3;
  return x;
}

// The least S with 3^S > bound: S ternary digits hold every slack in
// [0, bound].
int SlackDigits(uint64_t bound) {
  int s = 0;
  while (Pow3(s) <= bound) ++s;
  return s;
}

// sum of n squares of values below 2^(L+1), plus the largest slack 3^S - 1
// and the bound, below p.
bool Exact(size_t n, int l, int slack_digits, uint64_t bound) {
  const unsigned __int128 total = static_cast<unsigned __int128>(n) << (2 * l + 2);
  return total + Pow3(slack_digits) + bound < gl::kP;
}

// Rows of the circuit with C values per row (norm_circuit.h): k ceil(B / C)
// rows of values, then the slack digits, 2C a row.
size_t Rows(size_t k, size_t b, size_t digits, size_t c) {
  return k * ((b + c - 1) / c) + (digits + 2 * c - 1) / (2 * c);
}

// The `count` ternary digits of x, least significant first (x < 3^count).
// A division by the constant 3 compiles to a multiplication: no branch on x.
void PutDigits(uint64_t x, int count, uint64_t* out) {
  for (int i = 0; i < count; ++i, x /= 3) out[i] = x % 3;
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

// The first `count` values of one row, L::kWidth at a time (the rest left
// to the caller): c and h / K into the range slots (interleaved), v = X_lo +
// 2^L c into the square slots, h = X_hi - c. Every result is canonical, so
// equal bit for bit to the scalar gl:: path (a canonical value is unique).
// REQUIRES: canonical operands; returns how many values it wrote.
template <typename L>
size_t RowValues(const uint64_t* c_in, const uint64_t* xlo, const uint64_t* xhi, size_t count,
                 uint64_t pow2l, uint64_t inverse_k, uint64_t* range_slots,
                 uint64_t* square_slots) {
  size_t u = 0;
  for (; u + L::kWidth <= count; u += L::kWidth) {
    alignas(64) uint64_t x[L::kWidth];
    const typename L::V c = L::Load(c_in + u);
    L::Store(x, L::Mul(L::Sub(L::Load(xhi + u), c), L::Splat(inverse_k)));
    L::Store(square_slots + u, L::Add(L::Load(xlo + u), L::Mul(c, L::Splat(pow2l))));
    for (int i = 0; i < L::kWidth; ++i) {
      range_slots[2 * (u + i)] = c_in[u + i];
      range_slots[2 * (u + i) + 1] = x[i];
    }
  }
  return u;
}

}  // namespace

absl::StatusOr<NormCircuit> NormCircuit::Create(int num_blocks, int block_size, int value_bits,
                                                NormBound bound, size_t values_per_row,
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
  if (values_per_row > static_cast<size_t>(block_size)) {
    return absl::InvalidArgumentError(
        absl::StrCat("values_per_row ", values_per_row, " exceeds block_size ", block_size));
  }
  if (num_queries < 1 || num_queries > 8) {
    return absl::InvalidArgumentError("num_queries must be in [1, 8]");
  }
  const uint64_t smallest = std::min(bound.max_block_l2_squared, bound.max_l2_squared);
  // 2^L > sqrt(bound) >= |v| for every honest value; w - L <= 62 keeps X_hi
  // below p/2 and h below p/2 in magnitude (norm_circuit.h).
  const int l = std::max<int>(std::bit_width(ISqrt(smallest)), std::max(1, value_bits - 62));
  if (l >= value_bits - 1) {
    return absl::InvalidArgumentError("norm bound too large for the value ring");
  }
  const int sd = SlackDigits(bound.max_block_l2_squared);
  const int st = SlackDigits(bound.max_l2_squared);
  const size_t k = static_cast<size_t>(num_blocks), b = static_cast<size_t>(block_size);
  const size_t n = k * b;
  if (!Exact(b, l, sd, bound.max_block_l2_squared) || !Exact(n, l, st, bound.max_l2_squared)) {
    return absl::InvalidArgumentError(
        absl::StrCat("norm bounds too large for exact arithmetic in F_(2^64-2^32+1) with ", n,
                     " values: need n * 2^(2L+2) + 3^S + bound < p (L = ", l, ")"));
  }
  const size_t digits = k * static_cast<size_t>(sd) + static_cast<size_t>(st);
  const size_t q = static_cast<size_t>(num_queries);
  if (values_per_row == 0) {
    // For each N = 2^j the least C whose rows fit (Rows falls as C grows);
    // keep the shortest proof (3C + 1) Q + 3N, the smaller N on ties.
    size_t best_length = ~size_t{0};
    for (int j = 1; j <= 24; ++j) {
      const size_t wire_domain = size_t{1} << j;
      if (wire_domain <= q || Rows(k, b, digits, b) > wire_domain - q) continue;
      size_t lo = 1, hi = b;  // Rows(hi) fits
      while (lo < hi) {
        const size_t mid = lo + (hi - lo) / 2;
        if (Rows(k, b, digits, mid) <= wire_domain - q) {
          hi = mid;
        } else {
          lo = mid + 1;
        }
      }
      const size_t length = (3 * lo + 1) * q + 3 * wire_domain;
      if (length < best_length) {
        best_length = length;
        values_per_row = lo;
      }
      if (lo == 1) break;
    }
    if (values_per_row == 0) {
      return absl::InvalidArgumentError("no row layout fits a wire domain of 2^24");
    }
  }
  TANDEM_ASSIGN_OR_RETURN(RangeSquareFlp flp,
                          RangeSquareFlp::Create(Rows(k, b, digits, values_per_row),
                                                 2 * values_per_row, values_per_row, num_queries));
  return NormCircuit(num_blocks, block_size, value_bits, l, sd, st, bound, std::move(flp));
}

double NormCircuit::SoundnessLog2() const {
  const double joint = 1.0 - std::log2(static_cast<double>(gl::kP - 1));
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
    PutDigits(bound_.max_block_l2_squared - static_cast<uint64_t>(block), sd_,
              &witness[n_ + static_cast<size_t>(g) * sd_]);
  }
  if (total > bound_.max_l2_squared) {
    return absl::InvalidArgumentError("report exceeds the total norm bound");
  }
  PutDigits(bound_.max_l2_squared - static_cast<uint64_t>(total), st_,
            &witness[n_ + static_cast<size_t>(k_) * sd_]);
  return witness;
}

absl::Status NormCircuit::GadgetInputs(int party, absl::Span<const uint64_t> derived,
                                       absl::Span<const uint64_t> witness,
                                       absl::Span<const uint64_t> weights,
                                       absl::Span<uint64_t> out) const {
  if (derived.size() != derived_length() || witness.size() != witness_length() ||
      weights.size() != weights_length() || out.size() != flp_.input_length() ||
      (party != 0 && party != 1)) {
    return absl::InvalidArgumentError("GadgetInputs: sizes or party do not match the circuit");
  }
  // All operands are canonical (validated or reduced); one pass over the
  // values, no division in the loop.
  const size_t width = flp_.wires(), per_row = values_per_row(), range = flp_.range_slots();
  const size_t rows_per_block = RowsPerBlock(), value_rows = rows_per_block * k_;
  const size_t b = static_cast<size_t>(b_);
  std::fill(out.begin(), out.end(), 0);  // padding: G(0, 0, 0) = 0
  // The public square weights a_i = -(sigma_g + tau) / s_i, party 0 only.
  std::vector<uint64_t> square_weight(value_rows, 0);
  if (party == 0) {
    const absl::Span<const uint64_t> row_weights = RowWeights(weights).subspan(0, value_rows);
    BatchInverse(row_weights, absl::MakeSpan(square_weight));
    const uint64_t* sigma = weights.data() + flp_.num_rows() + range;
    const uint64_t tau = sigma[k_];
    for (size_t i = 0; i < value_rows; ++i) {
      square_weight[i] =
          gl::Mul(square_weight[i], gl::Neg(gl::Add(sigma[i / rows_per_block], tau)));
    }
  }
  // 1 / K, K = 2^(w-L) <= 2^62 < p: x = h / K is 0 or +-1 for an honest h.
  const uint64_t inverse_k = gl::Inverse(uint64_t{1} << (w_ - l_));
  const uint64_t* xlo = derived.data();
  const uint64_t* xhi = derived.data() + n_;
  for (size_t i = 0; i < value_rows; ++i) {
    uint64_t* o = out.data() + i * width;
    o[0] = square_weight[i];
    const size_t in_block = (i % rows_per_block) * per_row;
    const size_t first = (i / rows_per_block) * b + in_block;
    const size_t count = std::min(per_row, b - in_block);
    size_t u = 0;
#if defined(__AVX512F__) || defined(__AVX2__)
    u = RowValues<lanes::WideOps>(witness.data() + first, xlo + first, xhi + first, count,
                                  uint64_t{1} << l_, inverse_k, o + 1, o + 1 + range);
#endif
    for (; u < count; ++u) {
      const size_t j = first + u;
      const uint64_t c = witness[j];
      o[1 + 2 * u] = c;
      o[2 + 2 * u] = gl::Mul(gl::Sub(xhi[j], c), inverse_k);  // h / K, h = X_hi - c
      o[1 + range + u] = gl::Add(xlo[j], MulPow2(c, l_));     // v = X_lo + 2^L c; L <= 30 (Exact)
    }
  }
  // Slack digits z = d - 1 in the range slots of the last rows (a = 0).
  const uint64_t one = party == 0 ? 1 : 0;
  for (size_t e = 0; e < slack_digits(); ++e) {
    out[(value_rows + e / range) * width + 1 + e % range] = gl::Sub(witness[n_ + e], one);
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> NormCircuit::AffineShare(int party, absl::Span<const uint64_t> witness,
                                                  absl::Span<const uint64_t> weights) const {
  if (witness.size() != witness_length() || weights.size() != weights_length() ||
      (party != 0 && party != 1)) {
    return absl::InvalidArgumentError("AffineShare: sizes or party do not match the circuit");
  }
  const uint64_t one = party == 0 ? 1 : 0;
  const uint64_t* sigma = weights.data() + flp_.num_rows() + flp_.range_slots();
  const uint64_t tau = sigma[k_];
  // The slack of `count` ternary digits from witness[first] (Horner).
  auto slack = [&](size_t first, int count) {
    uint64_t s = 0;
    for (int i = count - 1; i >= 0; --i) s = gl::Add(gl::Mul(s, 3), witness[first + i]);
    return s;
  };
  uint64_t y = 0;
  for (int g = 0; g < k_; ++g) {
    const uint64_t term = gl::Sub(gl::Mul(one, gl::Reduce64(bound_.max_block_l2_squared)),
                                  slack(n_ + static_cast<size_t>(g) * sd_, sd_));
    y = gl::Add(y, gl::Mul(sigma[g], term));
  }
  const uint64_t term = gl::Sub(gl::Mul(one, gl::Reduce64(bound_.max_l2_squared)),
                                slack(n_ + static_cast<size_t>(k_) * sd_, st_));
  return gl::Add(y, gl::Mul(tau, term));
}

}  // namespace tandem::crypto::proof

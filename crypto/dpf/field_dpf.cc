#include "crypto/dpf/field_dpf.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "crypto/field/mersenne61.h"

namespace tandem::crypto {
namespace {

constexpr Block kClearLsb = {~uint64_t{1}, ~uint64_t{0}};

// bit ? a : b, without a branch on bit (0 or 1).
Block Select(uint64_t bit, Block a, Block b) { return b ^ (MaskFromBit(bit) & (a ^ b)); }
uint64_t Select(uint64_t bit, uint64_t a, uint64_t b) { return b ^ ((0 - bit) & (a ^ b)); }

}  // namespace

absl::StatusOr<FieldDpf> FieldDpf::Create(int log_domain_size, AesPath path) {
  if (log_domain_size < 1 || log_domain_size > 62) {
    return absl::InvalidArgumentError("log_domain_size must be in [1, 62]");
  }
  TANDEM_ASSIGN_OR_RETURN(FixedKeyHash left, FixedKeyHash::FromName("tandem-field-dpf-left", path));
  TANDEM_ASSIGN_OR_RETURN(FixedKeyHash right,
                          FixedKeyHash::FromName("tandem-field-dpf-right", path));
  TANDEM_ASSIGN_OR_RETURN(FixedKeyHash value,
                          FixedKeyHash::FromName("tandem-field-dpf-value", path));
  return FieldDpf(log_domain_size, left, right, value);
}

void FieldDpf::Expand(Block seed, Block* s_left, uint64_t* t_left, Block* s_right,
                      uint64_t* t_right) const {
  Block l, r;
  left_.Hash(absl::MakeConstSpan(&seed, 1), absl::MakeSpan(&l, 1));
  right_.Hash(absl::MakeConstSpan(&seed, 1), absl::MakeSpan(&r, 1));
  *t_left = Lsb(l);
  *t_right = Lsb(r);
  *s_left = l & kClearLsb;
  *s_right = r & kClearLsb;
}

uint64_t FieldDpf::Convert(Block seed) const {
  Block h;
  value_.Hash(absl::MakeConstSpan(&seed, 1), absl::MakeSpan(&h, 1));
  return field::Reduce128(h.hi, h.lo);
}

uint64_t FieldDpf::Output(const FieldDpfKey& key, Block seed, uint64_t t) const {
  // (-1)^party * (Convert(s) + t * CW_out); t is 0/1, so t * CW is a mask.
  const uint64_t v = field::Add(Convert(seed), (0 - t) & key.output_correction);
  return Select(static_cast<uint64_t>(key.party), field::Neg(v), v);
}

absl::StatusOr<std::pair<FieldDpfKey, FieldDpfKey>> FieldDpf::GenerateKeys(
    uint64_t alpha, uint64_t beta, SecureRandom* rng) const {
  if (rng == nullptr) return absl::InvalidArgumentError("rng is required");
  if (n_ < 64 && alpha >> n_ != 0) return absl::InvalidArgumentError("alpha outside the domain");
  if (beta >= field::kP61) return absl::InvalidArgumentError("beta must be < 2^61 - 1");
  Block roots[2];
  TANDEM_RETURN_IF_ERROR(rng->Fill(absl::MakeSpan(reinterpret_cast<uint8_t*>(roots), 32)));
  FieldDpfKey k0, k1;
  k0.party = 0;
  k1.party = 1;
  k0.seed = roots[0] & kClearLsb;
  k1.seed = roots[1] & kClearLsb;
  Block s[2] = {k0.seed, k1.seed};
  uint64_t t[2] = {0, 1};
  for (int level = 0; level < n_; ++level) {
    const uint64_t a = (alpha >> (n_ - 1 - level)) & 1;  // BGI16 Fig. 1, MSB first
    Block sl[2], sr[2];
    uint64_t tl[2], tr[2];
    for (int b = 0; b < 2; ++b) Expand(s[b], &sl[b], &tl[b], &sr[b], &tr[b]);
    FieldDpfCorrection cw;
    // The "lose" child is the one off alpha's path: right when a = 0.
    cw.seed = Select(a, sl[0], sr[0]) ^ Select(a, sl[1], sr[1]);
    cw.control_left = tl[0] ^ tl[1] ^ a ^ 1;
    cw.control_right = tr[0] ^ tr[1] ^ a;
    const uint64_t t_keep_cw = Select(a, cw.control_right, cw.control_left);
    for (int b = 0; b < 2; ++b) {
      const Block s_keep = Select(a, sr[b], sl[b]);
      const uint64_t t_keep = Select(a, tr[b], tl[b]);
      s[b] = s_keep ^ (MaskFromBit(t[b]) & cw.seed);
      t[b] = t_keep ^ (t[b] & t_keep_cw);
    }
    k0.corrections.push_back(cw);
  }
  // CW_out = (-1)^t1 * (beta - Convert(s0) + Convert(s1)).
  const uint64_t diff = field::Add(field::Sub(beta, Convert(s[0])), Convert(s[1]));
  const uint64_t out_cw = Select(t[1], field::Neg(diff), diff);
  k0.output_correction = out_cw;
  k1.corrections = k0.corrections;
  k1.output_correction = out_cw;
  return std::make_pair(std::move(k0), std::move(k1));
}

absl::Status FieldDpf::ValidateKey(const FieldDpfKey& key) const {
  if (key.party != 0 && key.party != 1) return absl::InvalidArgumentError("party must be 0 or 1");
  if (key.corrections.size() != static_cast<size_t>(n_)) {
    return absl::InvalidArgumentError(
        absl::StrCat("key has ", key.corrections.size(), " corrections, expected ", n_));
  }
  for (const FieldDpfCorrection& c : key.corrections) {
    if (c.control_left > 1 || c.control_right > 1) {
      return absl::InvalidArgumentError("control bits must be 0 or 1");
    }
  }
  if (key.output_correction >= field::kP61) {
    return absl::InvalidArgumentError("output correction outside the field");
  }
  return absl::OkStatus();
}

absl::StatusOr<uint64_t> FieldDpf::EvaluateAt(const FieldDpfKey& key, uint64_t x) const {
  TANDEM_RETURN_IF_ERROR(ValidateKey(key));
  if (n_ < 64 && x >> n_ != 0) return absl::InvalidArgumentError("x outside the domain");
  Block s = key.seed;
  uint64_t t = static_cast<uint64_t>(key.party);
  for (int level = 0; level < n_; ++level) {
    const FieldDpfCorrection& cw = key.corrections[level];
    Block sl, sr;
    uint64_t tl, tr;
    Expand(s, &sl, &tl, &sr, &tr);
    const Block m = MaskFromBit(t);
    sl ^= m & cw.seed;
    sr ^= m & cw.seed;
    tl ^= t & cw.control_left;
    tr ^= t & cw.control_right;
    const uint64_t bit = (x >> (n_ - 1 - level)) & 1;
    s = Select(bit, sr, sl);
    t = Select(bit, tr, tl);
  }
  return Output(key, s, t);
}

absl::Status FieldDpf::EvaluateFullDomain(const FieldDpfKey& key, absl::Span<uint64_t> out) const {
  TANDEM_RETURN_IF_ERROR(ValidateKey(key));
  if (n_ > 30 || out.size() != (size_t{1} << n_)) {
    return absl::InvalidArgumentError("out must hold 2^n values (n <= 30)");
  }
  std::vector<Block> seeds = {key.seed}, next;
  std::vector<uint64_t> ts = {static_cast<uint64_t>(key.party)}, next_t;
  for (int level = 0; level < n_; ++level) {
    const FieldDpfCorrection& cw = key.corrections[level];
    next.resize(seeds.size() * 2);
    next_t.resize(seeds.size() * 2);
    for (size_t i = 0; i < seeds.size(); ++i) {
      Block sl, sr;
      uint64_t tl, tr;
      Expand(seeds[i], &sl, &tl, &sr, &tr);
      const Block m = MaskFromBit(ts[i]);
      next[2 * i] = sl ^ (m & cw.seed);
      next[2 * i + 1] = sr ^ (m & cw.seed);
      next_t[2 * i] = tl ^ (ts[i] & cw.control_left);
      next_t[2 * i + 1] = tr ^ (ts[i] & cw.control_right);
    }
    seeds.swap(next);
    ts.swap(next_t);
  }
  for (size_t x = 0; x < seeds.size(); ++x) out[x] = Output(key, seeds[x], ts[x]);
  return absl::OkStatus();
}

}  // namespace tandem::crypto

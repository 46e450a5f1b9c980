// The validity circuit of PREAMBLE's norm bound (Asi, Feldman, Keller,
// Rothblum, Talwar, NeurIPS 2025: every sent block and the whole report are
// within the L2 bound of the privacy analysis), over F_p (p = 2^64 - 2^32 +
// 1, crypto/field/goldilocks.h; protocol v4), on the values that are
// actually aggregated in Z_2^w (w = value_bits).
//
// From the ring to the field without a conversion protocol [I, our design]:
// party b's block-DPF output is y_b with y_0 + y_1 the aggregated vector mod
// 2^w (crypto/dpf/block_dpf.h). Each party sums its outputs over the blocks
// of a group, S_b = sum_x y_b(x) mod 2^w (one pass, fused into the AES
// kernel: BlockDpf::EvaluateBlockSum), and sets u_b = (-1)^b S_b mod 2^w,
// in [0, 2^w). Once the VDPF digests match, every block but the sent one is
// zero, so u_0 - u_1 = S_0 + S_1 = the sent block (mod 2^w). Split
// u = hi * 2^L + lo (lo < 2^L, hi < 2^(w-L)): the F_p shares (-1)^b lo(u_b)
// add up to the integer X_lo = lo(u_0) - lo(u_1), |X_lo| < 2^L, and the
// same for X_hi, |X_hi| < 2^(w-L); both below p/2 (Create() requires
// w - L <= 62, and 2^62 < (p - 1)/2), so they are exact. The
// aggregated value is X_hi 2^L + X_lo mod 2^w. (Summing in the ring before
// the split costs one add per output; the split itself, 2 limbs and 2 field
// negations, is done once per coordinate instead of once per output.) The
// client proves, with a
// witness c in {-1, 0, 1} per coordinate (the borrow of the low limb):
//   (1) c^3 - c = 0
//   (2) h (h - K)(h + K) = 0, h = X_hi - c, K = 2^(w-L)
//   so v = X_lo + 2^L c is an integer with |v| < 2^(L+1) and
//   X_hi 2^L + X_lo = h 2^L + v = v (mod 2^w): v IS the aggregated value;
//   (3) per block g: bound_block - sum_{j in g} v_j^2 = sum_i 2^i s_{g,i},
//       and bound_total - sum_j v_j^2 = sum_i 2^i t_i (slack bits),
//   (4) s (s - 1) = 0 for every slack bit.
// Exactness over F_p, p = 2^64 - 2^32 + 1 (checked in Create()):
//   * |X_hi| < 2^(w-L) <= 2^62 and |c| <= 1, so |h| <= 2^(w-L) and
//     |h - K|, |h + K| <= 2^(w-L+1) <= 2^63 < p: (2) mod p forces the
//     integer h to be 0, K or -K (L >= w - 62);
//   * (1) forces the field element c into {-1, 0, 1} (p is prime), so
//     v = X_lo + 2^L c lifts to an integer with |v| < 2^(L+1);
//   * n 2^(2L+2) + 2^S + bound < p (n values per sum, S slack bits), so
//     (3) holds over the integers, not only mod p: both sides lie in an
//     interval shorter than p.
// An honest report (|v| <= sqrt(bound) < 2^L) always has a witness.
//
// All constraints are calls of the gadget Cubic(a, x) = a (x^2 - 1)
// (crypto/proof/flp.h), combined as
//   y = sum_j rho1_j C1_j + (rho2_j / K^2) C2_j + sum_i 4 rho3_i C4_i
//       + sum_g sigma_g C3_g + tau C3_total,
// with weights from the joint randomness (Fiat-Shamir over the client's
// shares, as Prio3's joint randomness; rho2 / K^2 and 4 rho3 are uniform
// when rho2 and rho3 are): for a violated constraint y = 0 with probability
// 1/p. Gadget calls (M = 3n + k S_b + S_t), each (a, x):
//   (rho1 c, c)               rho1 c (c^2 - 1)            = rho1 C1
//   (rho2 h, h / K)           rho2 h (h^2 / K^2 - 1)      = (rho2 / K^2) C2
//   (-(sigma_g + tau), v)     -(sigma_g + tau) (v^2 - 1)  (the -1 is paid back
//                                                          in the affine part)
//   (rho3, 2s - 1)            rho3 ((2s - 1)^2 - 1)       = 4 rho3 s (s - 1)
// and the affine part sum_g sigma_g (B_g - slack_g) + tau (B_t - slack_t)
// - B sum_g (sigma_g + tau). Constants enter party 0's share only.
// Protocol v3 spent three inputs per call on Mul3(a, b, e) = a b e, the
// same constraints as (rho1 c, c - 1, c + 1), (rho2 h, h - K, h + K),
// (-(sigma_g + tau) v, v, 1), (rho3 s, s - 1, 1).
//
// Immutable after Create; thread-safe.
#ifndef TANDEM_CRYPTO_PROOF_NORM_CIRCUIT_H_
#define TANDEM_CRYPTO_PROOF_NORM_CIRCUIT_H_

#include <cstddef>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "crypto/proof/flp.h"

namespace tandem::crypto::proof {

struct NormBound {
  uint64_t max_block_l2_squared = 0;  // per sent block, squared integer units
  uint64_t max_l2_squared = 0;        // whole report
};

class NormCircuit {
 public:
  // INVALID_ARGUMENT unless 1 <= num_blocks <= 4096, 1 <= block_size <=
  // 2^20, value_bits is 32 or 64, both bounds >= 1, and the bounds are small
  // enough for exact F_p arithmetic (see the file comment).
  static absl::StatusOr<NormCircuit> Create(int num_blocks, int block_size, int value_bits,
                                            NormBound bound, size_t chunk_length = 0,
                                            int num_queries = 2);

  int num_blocks() const { return k_; }
  int block_size() const { return b_; }
  int value_bits() const { return w_; }
  int lo_bits() const { return l_; }
  NormBound bound() const { return bound_; }
  size_t num_values() const { return n_; }  // k * B
  size_t derived_length() const { return 2 * n_; }  // X_lo then X_hi
  size_t witness_length() const { return n_ + slack_bits(); }
  size_t weights_length() const { return 2 * n_ + slack_bits() + k_ + 1; }
  size_t slack_bits() const { return static_cast<size_t>(k_) * sb_ + st_; }
  const ParallelSumCubicFlp& flp() const { return flp_; }
  // log2 of the total soundness error: 1/p (weights) + FLP query error.
  double SoundnessLog2() const;

  // This party's shares of X_lo, X_hi for one group from its DPF outputs
  // `group_outputs` (blocks of block_size, any count >= 1): the block sum S,
  // u = (-1)^party S mod 2^w, then (-1)^party lo(u), (-1)^party hi(u) into
  // xlo, xhi (block_size each, overwritten). INVALID_ARGUMENT on sizes.
  absl::Status DeriveGroupShare(int party, absl::Span<const uint64_t> group_outputs,
                                absl::Span<uint64_t> xlo, absl::Span<uint64_t> xhi) const;
  // The same for all groups from the block sums (n values, group order, as
  // SparseDpf::EvaluateBlockSums gives them) into derived (X_lo then X_hi,
  // 2n). block_sums may be derived's second half (in place).
  // INVALID_ARGUMENT on sizes or party.
  absl::Status DeriveFromBlockSums(int party, absl::Span<const uint64_t> block_sums,
                                   absl::Span<uint64_t> derived) const;

  // The honest witness from the sent blocks' u_0, u_1 (n values each, group
  // order). INVALID_ARGUMENT when a block or the report exceeds its bound
  // (no witness exists) or on sizes. Secret data: branch-free except for the
  // bound decision itself, which the client learns anyway.
  absl::StatusOr<std::vector<uint64_t>> Witness(absl::Span<const uint64_t> u0,
                                                absl::Span<const uint64_t> u1) const;

  // The Cubic inputs (flp().input_length()) and the affine part of y for one
  // share (party 0 adds the constants); applied to the sums of the shares
  // with party 0 it gives the prover's full values. INVALID_ARGUMENT on sizes.
  // REQUIRES: every element of derived, witness and weights is < p (as
  // ValidateShare, DeriveGroupShare and the weight XOF guarantee).
  absl::Status GadgetInputs(int party, absl::Span<const uint64_t> derived,
                            absl::Span<const uint64_t> witness,
                            absl::Span<const uint64_t> weights, absl::Span<uint64_t> out) const;
  absl::StatusOr<uint64_t> AffineShare(int party, absl::Span<const uint64_t> witness,
                                       absl::Span<const uint64_t> weights) const;

 private:
  NormCircuit(int k, int b, int w, int l, int sb, int st, NormBound bound, ParallelSumCubicFlp flp)
      : k_(k),
        b_(b),
        w_(w),
        l_(l),
        sb_(sb),
        st_(st),
        n_(size_t(k) * b),
        bound_(bound),
        flp_(std::move(flp)) {}

  // xlo, xhi = (-1)^party limbs of (-1)^party sums mod 2^w (count each);
  // sums may alias xhi. Branch-free.
  void SplitSums(int party, const uint64_t* sums, size_t count, uint64_t* xlo,
                 uint64_t* xhi) const;

  int k_, b_, w_, l_;
  int sb_, st_;  // slack bits per block bound and for the total bound
  size_t n_;
  NormBound bound_;
  ParallelSumCubicFlp flp_;
};

}  // namespace tandem::crypto::proof

#endif  // TANDEM_CRYPTO_PROOF_NORM_CIRCUIT_H_

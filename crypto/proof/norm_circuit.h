// The validity circuit of PREAMBLE's norm bound (Asi, Feldman, Keller,
// Rothblum, Talwar, NeurIPS 2025: every sent block and the whole report are
// within the L2 bound of the privacy analysis), over F_p (p = 2^64 - 2^32 +
// 1, crypto/field/goldilocks.h; protocol v5), on the values that are
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
//   (2) x^3 - x = 0, x = h / K, h = X_hi - c, K = 2^(w-L)
//   so v = X_lo + 2^L c is an integer with |v| < 2^(L+1) and
//   X_hi 2^L + X_lo = h 2^L + v = v (mod 2^w): v IS the aggregated value;
//   (3) per block g: bound_block - sum_{j in g} v_j^2 = sum_i 3^i d_{g,i},
//       and bound_total - sum_j v_j^2 = sum_i 3^i e_i (slack digits),
//   (4) z^3 - z = 0, z = d - 1, for every slack digit (so d in {0, 1, 2}).
// Exactness over F_p, p = 2^64 - 2^32 + 1 (checked in Create()):
//   * |X_hi| < 2^(w-L) <= 2^62 and |c| <= 1, so |h| <= 2^(w-L) < p/2:
//     (2) forces the field element h / K into {-1, 0, 1} (p is prime), so
//     the integer h is 0, K or -K (L >= w - 62);
//   * (1) forces the field element c into {-1, 0, 1}, so
//     v = X_lo + 2^L c lifts to an integer with |v| < 2^(L+1);
//   * n 2^(2L+2) + 3^S + bound < p (n values per sum, S slack digits), so
//     (3) holds over the integers, not only mod p: both sides lie in an
//     interval shorter than p, and a slack of S digits in {0, 1, 2} lies in
//     [0, 3^S), so sum v^2 <= bound.
// An honest report (|v| <= sqrt(bound) < 2^L) always has a witness.
//
// The proof (protocol v5): rows of the gadget of crypto/proof/flp.h,
//   G(a, x, v) = sum_t rho_t (x_t^3 - x_t) + a sum_u v_u^2,
// with y = sum_i s_i G(row i) + affine. A row holds C values of one block
// (C = values_per_row(); the block's last row is padded with zeros): their
// c and h / K in 2C range slots, their v in C square slots, and the public
// weight a_i = -(sigma_g + tau) / s_i; then rows of slack digits, z = d - 1
// in the range slots (a = 0). So
//   y = sum_{i,t} s_i rho_t (x_{i,t}^3 - x_{i,t})
//       + sum_g sigma_g (B_g - slack_g - sum_{j in g} v_j^2)
//       + tau (B_t - slack_t - sum_j v_j^2),
// the affine part sum_g sigma_g (B_g - slack_g) + tau (B_t - slack_t)
// taken from the witness (constants in party 0's share only). With the
// weights from the joint randomness (Fiat-Shamir over the client's shares,
// as Prio3's joint randomness): s_i uniform on F_p^* (so a_i exists),
// rho_t, sigma_g, tau uniform on F_p. For a violated constraint y is a
// non-zero polynomial of degree <= 2 in those weights (the monomials
// s_i rho_t, sigma_g, tau are distinct), so y = 0 with probability at most
// 2 / (p - 1) (Schwartz-Zippel). Per sent value the prover interpolates
// three wires where protocol v4 (the arity-2 gadget Cubic(a, x) = a (x^2 -
// 1) with per-value weights inside the wires: (rho1 c, c), (rho2 h, h / K),
// (-(sigma_g + tau), v)) interpolated six, and slack digits are ternary
// (0.63 as many as v4's bits).
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
  // values_per_row: C of the file comment, at most block_size; 0 picks the
  // C that minimises the proof length (3C + 1) Q + 3N.
  static absl::StatusOr<NormCircuit> Create(int num_blocks, int block_size, int value_bits,
                                            NormBound bound, size_t values_per_row = 0,
                                            int num_queries = 2);

  int num_blocks() const { return k_; }
  int block_size() const { return b_; }
  int value_bits() const { return w_; }
  int lo_bits() const { return l_; }
  NormBound bound() const { return bound_; }
  size_t num_values() const { return n_; }  // k * B
  size_t derived_length() const { return 2 * n_; }  // X_lo then X_hi
  size_t witness_length() const { return n_ + slack_digits(); }  // c, then digits
  size_t slack_digits() const { return static_cast<size_t>(k_) * sd_ + st_; }
  size_t values_per_row() const { return flp_.square_slots(); }
  // Weights: s (one per row, nonzero), rho (one per range slot), sigma (one
  // per block), tau; RowWeights and SlotWeights are the first two parts.
  size_t weights_length() const {
    return flp_.num_rows() + flp_.range_slots() + static_cast<size_t>(k_) + 1;
  }
  absl::Span<const uint64_t> RowWeights(absl::Span<const uint64_t> weights) const {
    return weights.subspan(0, flp_.num_rows());
  }
  absl::Span<const uint64_t> SlotWeights(absl::Span<const uint64_t> weights) const {
    return weights.subspan(flp_.num_rows(), flp_.range_slots());
  }
  const RangeSquareFlp& flp() const { return flp_; }
  // log2 of the total soundness error: 2 / (p - 1) (weights) + FLP query
  // error.
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

  // The gadget rows (flp().input_length()) and the affine part of y for one
  // share (party 0 adds the constants); applied to the sums of the shares
  // with party 0 it gives the prover's full values. INVALID_ARGUMENT on sizes.
  // REQUIRES: every element of derived, witness and weights is < p and
  // every row weight != 0 (as ValidateShare, DeriveGroupShare and the
  // weight XOF guarantee).
  absl::Status GadgetInputs(int party, absl::Span<const uint64_t> derived,
                            absl::Span<const uint64_t> witness,
                            absl::Span<const uint64_t> weights, absl::Span<uint64_t> out) const;
  absl::StatusOr<uint64_t> AffineShare(int party, absl::Span<const uint64_t> witness,
                                       absl::Span<const uint64_t> weights) const;

 private:
  NormCircuit(int k, int b, int w, int l, int sd, int st, NormBound bound, RangeSquareFlp flp)
      : k_(k),
        b_(b),
        w_(w),
        l_(l),
        sd_(sd),
        st_(st),
        n_(size_t(k) * b),
        bound_(bound),
        flp_(std::move(flp)) {}

  // Rows per block: ceil(B / C).
  size_t RowsPerBlock() const {
    return (static_cast<size_t>(b_) + values_per_row() - 1) / values_per_row();
  }

  // xlo, xhi = (-1)^party limbs of (-1)^party sums mod 2^w (count each);
  // sums may alias xhi. Branch-free.
  void SplitSums(int party, const uint64_t* sums, size_t count, uint64_t* xlo,
                 uint64_t* xhi) const;

  int k_, b_, w_, l_;
  int sd_, st_;  // slack digits per block bound and for the total bound
  size_t n_;
  NormBound bound_;
  RangeSquareFlp flp_;
};

}  // namespace tandem::crypto::proof

#endif  // TANDEM_CRYPTO_PROOF_NORM_CIRCUIT_H_

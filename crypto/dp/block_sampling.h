// Privacy amplification by PREAMBLE's block sampling (Asi, Feldman, Keller,
// Rothblum, Talwar, NeurIPS 2025: "block-sparse DPFs can be combined with
// random sampling and privacy amplification by sampling results"), as an
// RDP bound the accountant composes. The paper accounts numerically (RDP and
// PRV) for its own sampling schemes; the bound here is our derivation [I],
// for tandem's mechanism exactly:
//
//   each client takes part with probability q (Poisson); a participant's
//   clipped update x (||x||_2 <= C) is cut into k groups of m = 2^d blocks,
//   and it sends one block per group, each chosen uniformly and
//   independently, unscaled (block_selection RANDOM); the sum gets Gaussian
//   noise of standard deviation sigma C per coordinate (the coordinator
//   rescales by m afterwards: post-processing).
//
// With T = 1 / sigma^2, for add/remove neighbours, per round:
//
// Remove direction, D_a(P || Q) for integer a >= 2: at most the Poisson-
//   subsampled Gaussian at rate q / m [MTZ19's A_a]. Proof sketch: with L_j
//   the likelihood ratio of block j's shift, E_Q[(P/Q)^a] expands (the
//   blocks are disjoint coordinates, so independent under Q) into a sum of
//   exponentials of terms linear in the squared block norms t_j, which is
//   convex in (t_j): over the simplex sum t_j <= T its maximum sits at a
//   vertex, all of the norm in one block, where a group is exactly a
//   subsampled Gaussian at rate 1/m; log A_a(1/m, t) is convex in t and 0 at
//   0, so splitting the norm across groups gives no more than one group
//   with all of it; and Poisson participation at q on top thins the binomial
//   of A_a to rate q/m. Fractional orders use the next integer (Renyi
//   divergence does not decrease with the order).
// Add direction, D_a(Q || P) for real a > 1 (there the worst case is not
//   the vertex, so the argument above does not apply): with L = P/Q =
//   (1-q) + q M, M >= 0, E_Q[M] = 1, the function L^(1-a) lies below its
//   quadratic expansion around 1 with the curvature it has at L = 1 - q
//   (its third derivative is negative), c(q, a) = ((1-q)^(1-a) - 1 -
//   (a-1) q) / q^2; so E_Q[L^(1-a)] <= 1 + c q^2 Var_Q(M), and Var_Q(M) <=
//   (e^T - 1) / m^2 over every split of the norm (the same convexity):
//     D_a(Q || P) <= log(1 + ((1-q)^(1-a) - 1 - (a-1) q) (e^T - 1) / m^2) / (a-1).
//   For small q this is a q^2 (e^T - 1) / (2 m^2), the same leading term as
//   the remove direction at rate q/m.
// The round's RDP is the larger of the two, never more than the
// unamplified subsampled Gaussian (rate q, also a valid bound), so m = 1
// gives that exactly. Composition over rounds adds RDP [Mironov 2017].
//
// It holds for RANDOM block selection only: TOP_NORM picks blocks from the
// data and gets no amplification (the coordinator charges m = 1), and so
// does a dense round. Independent numerical checks of both directions on
// vertex and split norms: block_sampling_test.cc. Pure functions,
// thread-safe.
#ifndef TANDEM_CRYPTO_DP_BLOCK_SAMPLING_H_
#define TANDEM_CRYPTO_DP_BLOCK_SAMPLING_H_

#include <cstdint>

#include "absl/status/statusor.h"

namespace tandem::dp {

// Largest blocks-per-group the bound takes (2^24, the protocol's d <= 24).
inline constexpr int64_t kMaxBlocksPerGroup = int64_t{1} << 24;

// RDP at `order` of one round with client sampling rate q, noise multiplier
// sigma and m = blocks_per_group (see the file comment). INVALID_ARGUMENT
// unless 0 <= q <= 1, sigma > 0, order > 1 (finite) and 1 <= m <=
// kMaxBlocksPerGroup; INTERNAL if a series fails to converge.
absl::StatusOr<double> RdpBlockSampledGaussian(double q, double sigma, int64_t blocks_per_group,
                                               double order);
// The curve over rounds and orders: ComputeRdp(q, sigma, steps, orders,
// blocks_per_group) (accountant.h), which the ledger charges.

}  // namespace tandem::dp

#endif  // TANDEM_CRYPTO_DP_BLOCK_SAMPLING_H_

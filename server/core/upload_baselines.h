// What a client's upload is measured against wherever tandem states the cost
// of privacy (the coordinator's RoundSummary, tandem-sim's lines, metrics.csv/
// json and report.html, bench/). Both baselines are the strongest honest
// ones, never strawmen:
//
//  - clear FedAvg: the D-value update as float32 to one server, 4 D bytes;
//  - dense two-server secret sharing as Prio3 does it (CFRG VDAF draft:
//    the leader's share in full, the helper's expanded from a seed): the
//    leader receives D ring elements at the round's value width w (D w / 8
//    bytes) and the helper a 16-byte seed. Payload only: the ticket, device
//    signatures and norm proof that a private tandem report carries are not
//    counted, so the baseline is below any dense upload with the same checks
//    (Prio3's own norm-bounded vector types send several field elements per
//    coordinate, so this is lower still than what that peer ships).
//
// D is the update's real length (the padding PREAMBLE's groups need is
// PREAMBLE's cost, not the baseline's). Pure functions; thread-safe.
#ifndef TANDEM_SERVER_CORE_UPLOAD_BASELINES_H_
#define TANDEM_SERVER_CORE_UPLOAD_BASELINES_H_

#include <cstdint>

namespace tandem::server {

inline constexpr uint64_t kDenseHelperSeedBytes = 16;
// The widest value width of a round's ring Z_2^w (server/core/secure_sum.cc
// ValueBitsFor takes 32 where the round's sum fits, else this): the width
// of a baseline where the round's own is unknown (older records).
inline constexpr uint32_t kRoundValueBits = 64;

inline constexpr uint64_t ClearFedAvgBytes(uint64_t dimension) { return 4 * dimension; }

inline constexpr uint64_t DenseSharingBytes(uint64_t dimension,
                                            uint32_t value_bits = kRoundValueBits) {
  return (dimension * value_bits + 7) / 8 + kDenseHelperSeedBytes;
}

// Upload bits per coordinate of the update: 8 bytes / D (0 for D = 0).
inline constexpr double BitsPerCoordinate(double bytes, uint64_t dimension) {
  return dimension == 0 ? 0.0 : 8.0 * bytes / static_cast<double>(dimension);
}

}  // namespace tandem::server

#endif  // TANDEM_SERVER_CORE_UPLOAD_BASELINES_H_

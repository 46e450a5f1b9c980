// A round's release noise, drawn while the round is open instead of at its
// release (issue 36). The draw is independent of the reports (the same
// discrete Gaussian of the round's variance on every coordinate,
// crypto/dp/discrete_gaussian.h), so it may be drawn before any arrive:
// Finalize then adds it (one pass over the share) instead of sampling on
// the round boundary's critical path, where it took ~4.4 ms at D = 25,450
// and ~150 ms at D = 2^20 on two cores per aggregator, the leader's and
// then the helper's, while the coordinator and every client waited.
//
// The noise is a secret of this server like the draw at release was: it
// lives in this process only, is wiped when taken or dropped, and is used
// for one release at most (a second release of the round, e.g. a replica's
// retried sum, draws afresh). A restart or an abandoned round loses it:
// the release then draws at release, as before.
//
// Thread safety: thread-compatible (the task calls it under its
// process_mu); the draw runs on a thread of its own, joined by AddTo or
// the destructor.
#ifndef TANDEM_AGGREGATOR_CORE_PREPARED_NOISE_H_
#define TANDEM_AGGREGATOR_CORE_PREPARED_NOISE_H_

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "base/random.h"
#include "crypto/dp/discrete_gaussian.h"

namespace tandem::aggregator {

class PreparedNoise {
 public:
  // Starts drawing the noise of variance `sigma2` for `dimension`
  // coordinates on a thread of its own (its chunks on every core) from an
  // AES-128-CTR stream under a key and counter drawn now, on this thread,
  // from `random` (which need not be thread-safe and is not kept).
  // INVALID_ARGUMENT for an invalid sigma2, a zero dimension or a null
  // random; INTERNAL from `random`.
  static absl::StatusOr<std::unique_ptr<PreparedNoise>> Start(int64_t round_id,
                                                              const dp::Rational& sigma2,
                                                              size_t dimension,
                                                              SecureRandom* random);
  PreparedNoise(const PreparedNoise&) = delete;
  PreparedNoise& operator=(const PreparedNoise&) = delete;
  // Joins the draw; wipes the noise.
  ~PreparedNoise();

  // Whether this is the noise a release of `round_id` at variance `sigma2`
  // needs for a share of `dimension` coordinates.
  bool Matches(int64_t round_id, const dp::Rational& sigma2, size_t dimension) const;
  // Whether the draw has ended (then AddTo does not wait).
  bool Drawn() const { return drawn_flag_.load(std::memory_order_acquire); }
  // Adds the noise to `share` modulo 2^64 (as dp::AddDiscreteGaussianNoise
  // does), waiting for the draw to end, then wipes it. FAILED_PRECONDITION
  // when it was taken before or `share` has another size; the draw's error
  // when it failed. `share` is unchanged on every error.
  absl::Status AddTo(absl::Span<uint64_t> share);

 private:
  PreparedNoise(int64_t round_id, const dp::Rational& sigma2, size_t dimension)
      : round_id_(round_id), sigma2_(sigma2), noise_(dimension, 0) {}
  void Join();
  void Wipe();

  const int64_t round_id_;
  const dp::Rational sigma2_;
  std::vector<uint64_t> noise_;          // written by thread_ until it is joined
  absl::Status drawn_;                   // set by thread_
  std::atomic<bool> drawn_flag_{false};  // set by thread_ last
  std::thread thread_;
  bool taken_ = false;
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_CORE_PREPARED_NOISE_H_

// The simulated clients' error-feedback memories (top-k block selection,
// client/internal/block_selection.h): what a real participant keeps in its
// StateStore, kept here per client id for the clients that took part.
// Memory: 4 bytes per packed parameter per client that has reported in a
// top-norm round (e.g. 25,450 parameters x 1,000 clients = 102 MB).
// Thread-compatible.
#ifndef TANDEM_SERVER_SIM_CLIENT_MEMORY_H_
#define TANDEM_SERVER_SIM_CLIENT_MEMORY_H_

#include <cstdint>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "client/internal/block_selection.h"
#include "server/core/secure_sum.h"

namespace tandem::sim {

class ClientMemories {
 public:
  // In a TOP_NORM round of `sum`: `packed` + client `client`'s memory (none
  // the first time, or when the packed length changed, e.g. FedLUAR recycled
  // other tensors), and the memory becomes the blocks of that sum the
  // client's report will not carry (ReportBuilder selects the same blocks:
  // the selection is a function of the vector). RANDOM rounds: `packed`
  // unchanged. INVALID_ARGUMENT for a packed update longer than the round.
  absl::StatusOr<std::vector<float>> Compensate(int client, std::vector<float> packed,
                                                const server::SecureSum& sum);
  size_t clients() const { return memory_.size(); }

 private:
  absl::flat_hash_map<int, client::ErrorFeedback> memory_;
};

}  // namespace tandem::sim

#endif  // TANDEM_SERVER_SIM_CLIENT_MEMORY_H_

#include "server/sim/client_memory.h"

#include <utility>

#include "base/status_macros.h"

namespace tandem::sim {

absl::StatusOr<std::vector<float>> ClientMemories::Compensate(int client,
                                                              std::vector<float> packed,
                                                              const server::SecureSum& sum) {
  if (sum.config().block_selection != proto::BLOCK_SELECTION_TOP_NORM) return packed;
  const client::BlockGeometry geometry{.num_groups = sum.num_groups(),
                                       .blocks_per_group = sum.blocks_per_group(),
                                       .block_size = sum.config().block_size};
  client::ErrorFeedback& memory = memory_[client];
  std::vector<float> compensated = memory.Compensate(sum.config().task_id, packed);
  TANDEM_ASSIGN_OR_RETURN(std::vector<uint32_t> sent,
                          client::SelectTopNormBlocks(compensated, geometry));
  TANDEM_ASSIGN_OR_RETURN(std::vector<float> residual,
                          client::UnsentResidual(compensated, sent, geometry));
  memory.Keep(sum.config().task_id, std::move(residual));
  return compensated;
}

}  // namespace tandem::sim

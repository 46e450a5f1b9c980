// The simulator's report folder: metrics.csv, metrics.json and a
// self-contained report.html (inline SVG plots, no external assets) of
// accuracy, upload bytes and epsilon per round for every variant.
#ifndef TANDEM_SERVER_SIM_REPORT_H_
#define TANDEM_SERVER_SIM_REPORT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/sim/federation.h"

namespace tandem::sim {

// Writes the three files into `dir` (created if needed). INTERNAL on I/O errors.
absl::Status WriteReport(const std::string& dir, const std::string& title,
                         const std::vector<RoundRecord>& records);

// The HTML page alone (for tests).
std::string RenderHtml(const std::string& title, const std::vector<RoundRecord>& records);

}  // namespace tandem::sim

#endif  // TANDEM_SERVER_SIM_REPORT_H_

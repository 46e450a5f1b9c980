// The simulator's report folder: metrics.csv, metrics.json and a
// self-contained report.html (inline SVG plots, no external assets, nothing
// fetched from the network) with the run's parameters, a per-variant
// summary (accuracy, epsilon, time per round, bytes per client per server
// against clear FedAvg and dense two-server sharing), plots of accuracy,
// upload bytes and epsilon per round, and a privacy-utility plot (accuracy
// against epsilon for every DP run, the clear baseline as a line).
//
// Everything here is a pure function of its arguments (thread-compatible);
// WriteReport touches only files under `dir`.
#ifndef TANDEM_SERVER_SIM_REPORT_H_
#define TANDEM_SERVER_SIM_REPORT_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "server/sim/federation.h"

namespace tandem::sim {

// One variant as it was run (the report's link from a RoundRecord's
// `variant` label to its options).
struct ReportVariant {
  std::string name;                  // RoundRecord::variant
  // The variant without its noise setting: runs of one family with
  // different noise multipliers (tandem-sim --noise_sweep) are joined on
  // the privacy-utility plot. Empty: `name`.
  std::string family;
  bool private_aggregation = false;  // PREAMBLE reports (false: clear mean)
  double noise_multiplier = 0;       // z = sigma / C per aggregator (0: no DP)
};

// The run's parameters as the simulator used them (tandem_sim_main.cc fills
// this from the same values it passes to FederationOptions and
// LogBlocksPerGroup). dimension == 0 means unknown: the page then leaves
// out the parameters table and the D-based byte comparisons.
struct ReportParameters {
  std::string dataset;
  std::string model;                  // e.g. "mlp (hidden 32)"
  std::string mode;                   // inprocess or processes
  uint64_t dimension = 0;             // D: model parameters
  uint32_t block_size = 0;            // B
  uint64_t blocks = 0;                // ceil(D / B)
  uint32_t log_blocks_per_group = 0;  // d: one of 2^d blocks per group is sent
  uint64_t groups = 0;                // k: blocks sent per report (one per group)
  std::string block_selection;        // random or top_norm
  double clip = 0;                    // C, L2 bound of each update
  double sample_rate = 0;             // q (Poisson)
  double delta = 0;
  int rounds = 0;
  int clients = 0;
  int local_steps = 0;
  double client_lr = 0;
  std::string partition;
  double alpha = 0;                   // Dirichlet label skew
  bool norm_proofs = false;
  std::vector<ReportVariant> variants;
};

// Writes the three files into `dir` (created if needed). INTERNAL on I/O errors.
absl::Status WriteReport(const std::string& dir, const std::string& title,
                         const std::vector<RoundRecord>& records,
                         const ReportParameters& parameters);
// As above without parameters (no parameters table; the summary without
// the D-based comparisons; private variants told apart by their bytes).
absl::Status WriteReport(const std::string& dir, const std::string& title,
                         const std::vector<RoundRecord>& records);

// The HTML page alone (for tests).
std::string RenderHtml(const std::string& title, const std::vector<RoundRecord>& records,
                       const ReportParameters& parameters);
std::string RenderHtml(const std::string& title, const std::vector<RoundRecord>& records);

}  // namespace tandem::sim

#endif  // TANDEM_SERVER_SIM_REPORT_H_

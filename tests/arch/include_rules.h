// The dependency directions of ARCHITECTURE.md, checked on #include lines.
//
// Each source file belongs to the module named by its first path component
// (ml/worker/ is its own module). A file may include project headers only
// from the modules its module may depend on, and third-party headers only
// where the architecture allows them (gRPC in service/transport/worker
// adapters and mains; Eigen/oneTBB/CUDA only in ml, aggregator, client and
// tests; never in the client's public headers). internal/ headers are private
// to their module.
#ifndef TANDEM_TESTS_ARCH_INCLUDE_RULES_H_
#define TANDEM_TESTS_ARCH_INCLUDE_RULES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::arch {

struct Violation {
  std::string file;      // path relative to the scanned root
  int line = 0;          // 1-based
  std::string include;   // the included path
  std::string rule;      // which rule it breaks
};

// Checks one file's text. `relative_path` decides its module.
std::vector<Violation> CheckFile(absl::string_view relative_path,
                                 absl::string_view contents);

// Scans every .h/.cc/.cu/.cuh file under `root` (skipping build trees and
// hidden directories). NOT_FOUND when root is not a directory.
absl::StatusOr<std::vector<Violation>> CheckTree(const std::string& root);

std::string FormatViolation(const Violation& v);

}  // namespace tandem::arch

#endif  // TANDEM_TESTS_ARCH_INCLUDE_RULES_H_

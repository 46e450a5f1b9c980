// HTML text: what the project's pages (the coordinator's dashboard,
// server/service/coordinator_dashboard.h; tandem-sim's report,
// server/sim/report.h) put between tags and in double-quoted attribute
// values. Thread-safe (pure).
#ifndef TANDEM_BASE_HTML_H_
#define TANDEM_BASE_HTML_H_

#include <string>

#include "absl/strings/string_view.h"

namespace tandem {

// `s` with & < > " ' replaced by entities.
std::string HtmlEscape(absl::string_view s);

}  // namespace tandem

#endif  // TANDEM_BASE_HTML_H_

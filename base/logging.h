// One logging indirection point for all of tandem (this Abseil has no absl/log).
//
//   TANDEM_LOG(INFO) << "round " << id << " opened";
//   TANDEM_VLOG(2) << "detail";            // shown when SetVerbosity(>=2)
//   TANDEM_CHECK(invariant) << "why";      // aborts: trusted invariants only,
//                                          // never on wire or disk data.
//
// Lines go to the installed LogSink (default: stderr). Thread-safe: each line is
// formatted locally and handed to the sink under a mutex. Never log keys, seeds,
// shares or raw model updates: ids, sizes, codes and timings only.
#ifndef TANDEM_BASE_LOGGING_H_
#define TANDEM_BASE_LOGGING_H_

#include <memory>
#include <sstream>
#include <string>

#include "absl/strings/string_view.h"

namespace tandem {

enum class LogSeverity { kInfo = 0, kWarning = 1, kError = 2, kFatal = 3 };

// Receives every formatted log line. Implementations must be thread-safe.
class LogSink {
 public:
  virtual ~LogSink() = default;
  virtual void Send(LogSeverity severity, absl::string_view file, int line,
                    absl::string_view message) = 0;
};

// Installs `sink` (not owned; must outlive its use) and returns the previous
// one. nullptr restores the stderr sink.
LogSink* SetLogSink(LogSink* sink);

// Messages of severity below `min` are dropped (default kInfo).
void SetMinLogSeverity(LogSeverity min);
// TANDEM_VLOG(n) lines are emitted when n <= verbosity (default 0).
void SetVerbosity(int verbosity);
int Verbosity();

namespace logging_internal {

class LogMessage {
 public:
  LogMessage(LogSeverity severity, const char* file, int line);
  ~LogMessage();  // Sends the line; aborts for kFatal.
  LogMessage(const LogMessage&) = delete;
  LogMessage& operator=(const LogMessage&) = delete;
  std::ostream& stream() { return stream_; }

 private:
  LogSeverity severity_;
  const char* file_;
  int line_;
  std::ostringstream stream_;
};

// Swallows a stream expression when a log line is disabled.
struct Voidify {
  void operator&(std::ostream&) {}
};

bool IsEnabled(LogSeverity severity);

}  // namespace logging_internal
}  // namespace tandem

#define TANDEM_LOG_SEVERITY_INFO ::tandem::LogSeverity::kInfo
#define TANDEM_LOG_SEVERITY_WARNING ::tandem::LogSeverity::kWarning
#define TANDEM_LOG_SEVERITY_ERROR ::tandem::LogSeverity::kError
#define TANDEM_LOG_SEVERITY_FATAL ::tandem::LogSeverity::kFatal

#define TANDEM_LOG(severity)                                                  \
  !::tandem::logging_internal::IsEnabled(TANDEM_LOG_SEVERITY_##severity)      \
      ? (void)0                                                               \
      : ::tandem::logging_internal::Voidify() &                               \
            ::tandem::logging_internal::LogMessage(                           \
                TANDEM_LOG_SEVERITY_##severity, __FILE__, __LINE__)           \
                .stream()

#define TANDEM_VLOG(n)                                                        \
  (n) > ::tandem::Verbosity()                                                 \
      ? (void)0                                                               \
      : ::tandem::logging_internal::Voidify() &                               \
            ::tandem::logging_internal::LogMessage(                           \
                ::tandem::LogSeverity::kInfo, __FILE__, __LINE__)             \
                .stream()

#define TANDEM_CHECK(condition)                                               \
  (condition) ? (void)0                                                       \
              : ::tandem::logging_internal::Voidify() &                       \
                    ::tandem::logging_internal::LogMessage(                   \
                        ::tandem::LogSeverity::kFatal, __FILE__, __LINE__)    \
                            .stream()                                         \
                        << "Check failed: " #condition " "

#endif  // TANDEM_BASE_LOGGING_H_

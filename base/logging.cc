#include "base/logging.h"

#include <atomic>
#include <cstdio>
#include <cstdlib>

#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"

namespace tandem {
namespace {

const char* SeverityName(LogSeverity s) {
  switch (s) {
    case LogSeverity::kInfo:
      return "I";
    case LogSeverity::kWarning:
      return "W";
    case LogSeverity::kError:
      return "E";
    case LogSeverity::kFatal:
      return "F";
  }
  return "?";
}

class StderrSink : public LogSink {
 public:
  void Send(LogSeverity severity, absl::string_view file, int line,
            absl::string_view message) override {
    const std::string when =
        absl::FormatTime("%H:%M:%E3S", absl::Now(), absl::LocalTimeZone());
    absl::string_view base = file;
    if (size_t slash = base.rfind('/'); slash != absl::string_view::npos) {
      base.remove_prefix(slash + 1);
    }
    std::fprintf(stderr, "%s %s %.*s:%d] %.*s\n", SeverityName(severity),
                 when.c_str(), static_cast<int>(base.size()), base.data(), line,
                 static_cast<int>(message.size()), message.data());
  }
};

StderrSink& DefaultSink() {
  static StderrSink* sink = new StderrSink();
  return *sink;
}

absl::Mutex& SinkMutex() {
  static absl::Mutex* mu = new absl::Mutex();
  return *mu;
}

LogSink* g_sink = nullptr;  // Guarded by SinkMutex().
std::atomic<int> g_min_severity{0};
std::atomic<int> g_verbosity{0};

}  // namespace

LogSink* SetLogSink(LogSink* sink) {
  absl::MutexLock lock(&SinkMutex());
  LogSink* previous = g_sink;
  g_sink = sink;
  return previous;
}

void SetMinLogSeverity(LogSeverity min) {
  g_min_severity.store(static_cast<int>(min), std::memory_order_relaxed);
}
void SetVerbosity(int verbosity) {
  g_verbosity.store(verbosity, std::memory_order_relaxed);
}
int Verbosity() { return g_verbosity.load(std::memory_order_relaxed); }

namespace logging_internal {

bool IsEnabled(LogSeverity severity) {
  return severity == LogSeverity::kFatal ||
         static_cast<int>(severity) >=
             g_min_severity.load(std::memory_order_relaxed);
}

LogMessage::LogMessage(LogSeverity severity, const char* file, int line)
    : severity_(severity), file_(file), line_(line) {}

LogMessage::~LogMessage() {
  {
    absl::MutexLock lock(&SinkMutex());
    LogSink* sink = g_sink != nullptr ? g_sink : &DefaultSink();
    sink->Send(severity_, file_, line_, stream_.str());
  }
  if (severity_ == LogSeverity::kFatal) {
    std::fflush(stderr);
    std::abort();
  }
}

}  // namespace logging_internal
}  // namespace tandem

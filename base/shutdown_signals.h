// Daemon mains: SIGINT/SIGTERM are blocked before any thread starts (so
// every thread inherits the mask and none is interrupted), then the main
// thread waits for one of them and shuts down cleanly.
//   tandem::ShutdownSignals signals;          // first thing in main()
//   ... start servers ...
//   const int sig = signals.Wait();           // blocks until SIGINT/SIGTERM
// Not thread-safe: construct and Wait from the main thread.
#ifndef TANDEM_BASE_SHUTDOWN_SIGNALS_H_
#define TANDEM_BASE_SHUTDOWN_SIGNALS_H_

#include <pthread.h>

#include <csignal>

namespace tandem {

class ShutdownSignals {
 public:
  ShutdownSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);  // inherited by every later thread
  }
  // The signal number received.
  int Wait() const {
    int sig = 0;
    sigwait(&set_, &sig);
    return sig;
  }

 private:
  sigset_t set_;
};

}  // namespace tandem

#endif  // TANDEM_BASE_SHUTDOWN_SIGNALS_H_

// Daemon mains: SIGINT/SIGTERM/SIGHUP are blocked before any thread starts
// (so every thread inherits the mask and none is interrupted), then the main
// thread waits for them: SIGINT/SIGTERM end the wait (the daemon shuts down
// cleanly), each SIGHUP runs the daemon's reload (certificates and keys,
// issue 34 item 7) and the wait goes on.
//   tandem::ShutdownSignals signals;          // first thing in main()
//   ... start servers ...
//   const int sig = signals.Wait([&] { daemon->ReloadTls(); });
// Not thread-safe: construct and Wait from the main thread.
#ifndef TANDEM_BASE_SHUTDOWN_SIGNALS_H_
#define TANDEM_BASE_SHUTDOWN_SIGNALS_H_

#include <pthread.h>

#include <csignal>
#include <functional>

namespace tandem {

class ShutdownSignals {
 public:
  ShutdownSignals() {
    sigemptyset(&set_);
    sigaddset(&set_, SIGINT);
    sigaddset(&set_, SIGTERM);
    sigaddset(&set_, SIGHUP);
    pthread_sigmask(SIG_BLOCK, &set_, nullptr);  // inherited by every later thread
  }
  // The shutdown signal received (SIGINT or SIGTERM). Each SIGHUP before it
  // calls on_hangup on this thread (ignored when it is empty).
  int Wait(const std::function<void()>& on_hangup = nullptr) const {
    for (;;) {
      int sig = 0;
      sigwait(&set_, &sig);
      if (sig != SIGHUP) return sig;
      if (on_hangup) on_hangup();
    }
  }

 private:
  sigset_t set_;
};

}  // namespace tandem

#endif  // TANDEM_BASE_SHUTDOWN_SIGNALS_H_

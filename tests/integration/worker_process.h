// A real tandem-worker binary as a child process on loopback, for the
// integration tests of the worker (label integration). The child prints
// "tandem-worker listening on HOST:PORT (backend: ...)" once it serves;
// Start() reads that line to learn the port. Test-only, header-only; not
// thread-safe (one owner). The destructor SIGKILLs a child still running.
#ifndef TANDEM_TESTS_INTEGRATION_WORKER_PROCESS_H_
#define TANDEM_TESTS_INTEGRATION_WORKER_PROCESS_H_

#include <signal.h>
#include <sys/types.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace tandem::testing {

class WorkerProcess {
 public:
  WorkerProcess() = default;
  WorkerProcess(const WorkerProcess&) = delete;
  WorkerProcess& operator=(const WorkerProcess&) = delete;
  ~WorkerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (out_ != nullptr) fclose(out_);
  }

  // Forks and execs `binary` with `flags`; true once the port line was read.
  // False when the child exits (or closes stdout) before printing it.
  bool Start(const std::string& binary, const std::vector<std::string>& flags) {
    int fds[2];
    if (pipe(fds) != 0) return false;
    pid_ = fork();
    if (pid_ < 0) return false;
    if (pid_ == 0) {
      dup2(fds[1], STDOUT_FILENO);
      close(fds[0]);
      close(fds[1]);
      std::vector<char*> argv;
      argv.push_back(const_cast<char*>(binary.c_str()));
      for (const std::string& f : flags) argv.push_back(const_cast<char*>(f.c_str()));
      argv.push_back(nullptr);
      execv(binary.c_str(), argv.data());
      _exit(127);
    }
    close(fds[1]);
    FILE* out = fdopen(fds[0], "r");
    if (out == nullptr) return false;
    char line[512];
    while (fgets(line, sizeof(line), out) != nullptr) {
      const char* at = std::strstr(line, "listening on ");
      if (at == nullptr) continue;
      const std::string rest(at + std::strlen("listening on "));
      const size_t colon = rest.rfind(':', rest.find(' '));
      if (colon != std::string::npos) port_ = std::atoi(rest.c_str() + colon + 1);
      break;
    }
    out_ = out;  // kept open: a write to a closed pipe would SIGPIPE the child
    return port_ > 0;
  }

  // Sends SIGTERM and reaps the child: its exit code (128 + signal when
  // killed), -1 when none was started.
  int Stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    waitpid(pid_, &status, 0);
    pid_ = -1;
    return WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  }

  // True while the child has not exited (reaps it when it has).
  bool Alive() {
    if (pid_ <= 0) return false;
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == 0) return true;
    pid_ = -1;
    return false;
  }

  int port() const { return port_; }
  std::string address() const { return "127.0.0.1:" + std::to_string(port_); }

 private:
  pid_t pid_ = -1;
  int port_ = 0;
  FILE* out_ = nullptr;  // read end of the child's stdout
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_INTEGRATION_WORKER_PROCESS_H_

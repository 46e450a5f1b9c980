#include "tests/testing/daemon_process.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace tandem::testing {
namespace {

// Another test process never gets a port this one reserved, even while no
// daemon has bound it yet (the race of two federations on one port).
TEST(FreePort, TwoProcessesNeverDrawTheSamePort) {
  constexpr int kPorts = 300;  // 2.5 % of the range each
  std::set<int> ours;
  for (int i = 0; i < kPorts; ++i) {
    const int p = FreePort();
    ASSERT_GE(p, 20000);
    ASSERT_LT(p, 32000);
    EXPECT_TRUE(ours.insert(p).second) << "one process drew " << p << " twice";
  }
  int pipe_fds[2];
  ASSERT_EQ(pipe(pipe_fds), 0);
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {  // a second test process: its own draws, written back
    close(pipe_fds[0]);
    std::vector<int> drawn(kPorts);
    for (int& p : drawn) p = FreePort();
    const ssize_t n = write(pipe_fds[1], drawn.data(), drawn.size() * sizeof(int));
    _exit(n == static_cast<ssize_t>(drawn.size() * sizeof(int)) ? 0 : 1);
  }
  close(pipe_fds[1]);
  std::vector<int> theirs(kPorts);
  size_t got = 0;
  char* out = reinterpret_cast<char*>(theirs.data());
  while (got < theirs.size() * sizeof(int)) {
    const ssize_t n = read(pipe_fds[0], out + got, theirs.size() * sizeof(int) - got);
    if (n <= 0) break;
    got += static_cast<size_t>(n);
  }
  close(pipe_fds[0]);
  int status = 0;
  ASSERT_EQ(waitpid(child, &status, 0), child);
  ASSERT_TRUE(WIFEXITED(status) && WEXITSTATUS(status) == 0);
  ASSERT_EQ(got, theirs.size() * sizeof(int));
  for (int p : theirs) {
    EXPECT_NE(p, 0);
    EXPECT_FALSE(ours.count(p)) << "both processes drew " << p;
  }
}

}  // namespace
}  // namespace tandem::testing

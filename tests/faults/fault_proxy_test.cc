// FaultProxy against a small echo server on loopback: bytes pass unchanged,
// delay is applied per direction, a stall holds bytes until resumed, a cut
// resets live connections and refuses new ones until healed, a cut armed
// at a call's response falls exactly at its HTTP/2 frame, and targets off
// loopback are refused.
#include "tests/faults/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"

namespace tandem::testing {
namespace {

// Echoes every connection's bytes back until it ends. Owns its threads.
class EchoServer {
 public:
  EchoServer() {
    fd_ = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    socklen_t len = sizeof(a);
    bind(fd_, reinterpret_cast<sockaddr*>(&a), sizeof(a));
    listen(fd_, 16);
    getsockname(fd_, reinterpret_cast<sockaddr*>(&a), &len);
    port_ = ntohs(a.sin_port);
    acceptor_ = std::thread([this] {
      while (!stop_) {
        pollfd p{fd_, POLLIN, 0};
        if (poll(&p, 1, 50) <= 0) continue;
        const int c = accept(fd_, nullptr, nullptr);
        if (c < 0) continue;
        workers_.emplace_back([c] {
          char buf[4096];
          ssize_t n;
          while ((n = read(c, buf, sizeof(buf))) > 0) {
            if (send(c, buf, static_cast<size_t>(n), MSG_NOSIGNAL) != n) break;
          }
          close(c);
        });
      }
    });
  }
  ~EchoServer() {
    stop_ = true;
    acceptor_.join();
    shutdown(fd_, SHUT_RDWR);
    close(fd_);
    for (std::thread& t : workers_) t.join();
  }
  std::string address() const { return absl::StrCat("127.0.0.1:", port_); }

 private:
  int fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread acceptor_;
  std::vector<std::thread> workers_;
};

int Dial(int port) {
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  a.sin_port = htons(static_cast<uint16_t>(port));
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Up to `n` bytes read within `timeout` ("" on end of stream or reset).
std::string ReadFor(int fd, size_t n, absl::Duration timeout) {
  std::string out;
  const absl::Time end = absl::Now() + timeout;
  while (out.size() < n && absl::Now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 20) <= 0) continue;
    char buf[4096];
    const ssize_t r = read(fd, buf, std::min(sizeof(buf), n - out.size()));
    if (r <= 0) break;
    out.append(buf, static_cast<size_t>(r));
  }
  return out;
}

bool Send(int fd, const std::string& s) {
  return send(fd, s.data(), s.size(), MSG_NOSIGNAL) == static_cast<ssize_t>(s.size());
}

TEST(FaultProxy, ForwardsBytesUnchangedBothWays) {
  EchoServer echo;
  auto proxy = FaultProxy::Start(echo.address());
  ASSERT_THAT(proxy, IsOk());
  const int fd = Dial((*proxy)->port());
  ASSERT_GE(fd, 0);
  std::string big(300000, '\0');
  for (size_t i = 0; i < big.size(); ++i) big[i] = static_cast<char>(i * 131 + 7);
  std::thread writer([&] { EXPECT_TRUE(Send(fd, big)); });
  EXPECT_EQ(ReadFor(fd, big.size(), absl::Seconds(20)), big);
  writer.join();
  close(fd);
  EXPECT_EQ((*proxy)->connections_accepted(), 1u);
  EXPECT_EQ((*proxy)->bytes_forwarded(), 2 * big.size());
}

TEST(FaultProxy, DelaysEachDirection) {
  EchoServer echo;
  auto proxy = FaultProxy::Start(echo.address());
  ASSERT_THAT(proxy, IsOk());
  (*proxy)->SetDelay(absl::Milliseconds(150), absl::Milliseconds(20));
  const int fd = Dial((*proxy)->port());
  ASSERT_GE(fd, 0);
  const absl::Time start = absl::Now();
  ASSERT_TRUE(Send(fd, "ping"));
  EXPECT_EQ(ReadFor(fd, 4, absl::Seconds(10)), "ping");
  // Out and back, each held at least the delay (a lower bound only: a slow
  // machine may add to it, never take from it).
  EXPECT_GE(absl::Now() - start, absl::Milliseconds(300));
  close(fd);
}

TEST(FaultProxy, AStallHoldsBytesUntilResumed) {
  EchoServer echo;
  auto proxy = FaultProxy::Start(echo.address());
  ASSERT_THAT(proxy, IsOk());
  const int fd = Dial((*proxy)->port());
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(Send(fd, "a"));
  ASSERT_EQ(ReadFor(fd, 1, absl::Seconds(10)), "a");
  (*proxy)->Stall();
  ASSERT_TRUE(Send(fd, "held"));
  EXPECT_EQ(ReadFor(fd, 4, absl::Milliseconds(300)), "");  // nothing passes while stalled
  (*proxy)->Resume();
  EXPECT_EQ(ReadFor(fd, 4, absl::Seconds(10)), "held");
  close(fd);
}

TEST(FaultProxy, ACutResetsConnectionsAndRefusesNewOnesUntilHealed) {
  EchoServer echo;
  auto proxy = FaultProxy::Start(echo.address());
  ASSERT_THAT(proxy, IsOk());
  const int live = Dial((*proxy)->port());
  ASSERT_GE(live, 0);
  ASSERT_TRUE(Send(live, "x"));
  ASSERT_EQ(ReadFor(live, 1, absl::Seconds(10)), "x");
  (*proxy)->Cut();
  EXPECT_EQ(ReadFor(live, 1, absl::Seconds(5)), "");  // reset: end of stream
  close(live);
  const int during = Dial((*proxy)->port());  // the kernel accepts, the proxy resets
  ASSERT_GE(during, 0);
  Send(during, "y");
  EXPECT_EQ(ReadFor(during, 1, absl::Seconds(5)), "");
  close(during);
  EXPECT_GE((*proxy)->connections_refused(), 1u);
  (*proxy)->Heal();
  const int after = Dial((*proxy)->port());
  ASSERT_GE(after, 0);
  ASSERT_TRUE(Send(after, "z"));
  EXPECT_EQ(ReadFor(after, 1, absl::Seconds(10)), "z");
  close(after);
}

// One HTTP/2 frame: a 9-byte header (24-bit length, type, flags, stream 1)
// and its payload.
std::string Frame(uint8_t type, uint8_t flags, const std::string& payload) {
  std::string f = {static_cast<char>(payload.size() >> 16),
                   static_cast<char>(payload.size() >> 8),
                   static_cast<char>(payload.size()),
                   static_cast<char>(type),
                   static_cast<char>(flags),
                   0,
                   0,
                   0,
                   1};
  return f + payload;
}

// The echo server sends the frames back, so the proxy follows them on the
// target's side: two calls' trailers (HEADERS with END_STREAM) among DATA
// frames, sent in pieces that split a frame header.
TEST(FaultProxy, CutAtResponseCutsAtTheNthCallsTrailers) {
  const std::string data = Frame(0x0, 0x0, "hello");
  const std::string end1 = Frame(0x1, 0x5, "abc");    // HEADERS, END_STREAM | END_HEADERS
  const std::string headers = Frame(0x1, 0x4, "de");  // HEADERS without END_STREAM
  const std::string end2 = Frame(0x1, 0x5, "xyz");
  const std::string more = Frame(0x0, 0x0, "later");
  struct Case {
    int n;
    bool before;
    std::string expected;
  };
  for (const Case& c : {Case{1, false, data + end1}, Case{2, true, data + end1 + headers},
                        Case{2, false, data + end1 + headers + end2}}) {
    SCOPED_TRACE(absl::StrCat(c.n, c.before ? " before" : " after"));
    EchoServer echo;
    auto proxy = FaultProxy::Start(echo.address());
    ASSERT_THAT(proxy, IsOk());
    (*proxy)->CutAtResponse(c.n, c.before);
    const int fd = Dial((*proxy)->port());
    ASSERT_GE(fd, 0);
    const std::string all = data + end1 + headers + end2 + more;
    const size_t split = data.size() + end1.size() + headers.size() + 4;  // inside end2's header
    ASSERT_TRUE(Send(fd, all.substr(0, split)));
    absl::SleepFor(absl::Milliseconds(100));
    Send(fd, all.substr(split));
    EXPECT_EQ(ReadFor(fd, all.size(), absl::Seconds(5)), c.expected);
    EXPECT_TRUE((*proxy)->is_cut());
    close(fd);
  }
}

TEST(FaultProxy, RefusesTargetsOffLoopback) {
  EXPECT_THAT(FaultProxy::Start("10.0.0.1:80"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FaultProxy::Start("example.com:443"), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(FaultProxy::Start("127.0.0.1"), StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace tandem::testing

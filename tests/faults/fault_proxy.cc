#include "tests/faults/fault_proxy.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <condition_variable>
#include <cstring>
#include <deque>
#include <mutex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/time/clock.h"

namespace tandem::testing {
namespace {

constexpr size_t kChunk = 64 * 1024;
constexpr int kPollMs = 50;

// Closing with SO_LINGER 0 sends a reset: the peer sees the link break now,
// as after a partition, not a graceful end of stream.
void Reset(int fd) {
  linger l{1, 0};
  setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
  shutdown(fd, SHUT_RDWR);
}

}  // namespace

// One proxied connection: fds[0] the accepted side, fds[1] the target side.
// Direction d reads fds[d] and writes fds[1 - d].
struct FaultProxy::Link {
  struct Chunk {
    absl::Time due;
    std::string bytes;
  };
  struct Queue {
    std::mutex mu;
    std::condition_variable cv;
    std::deque<Chunk> chunks;
    absl::Time last_due = absl::InfinitePast();
    bool eof = false;
  };
  // Where the target's HTTP/2 frames start and end (CutAtResponse).
  struct Frames {
    std::string header;        // a frame header read in part
    uint32_t left = 0;         // payload bytes of the current frame still to come
    bool ends_stream = false;  // the current frame ends a call
  };
  int fds[2] = {-1, -1};
  Queue queues[2];
  Frames frames;     // direction 1 (the target's bytes), its writer only
  std::string held;  // a partial frame header withheld while armed (same)
  std::atomic<bool> closed{false};
  std::thread threads[4];
};

absl::StatusOr<std::unique_ptr<FaultProxy>> FaultProxy::Start(const std::string& target,
                                                              uint64_t seed) {
  std::vector<std::string> parts = absl::StrSplit(target, ':');
  int target_port = 0;
  if (parts.size() != 2 || (parts[0] != "127.0.0.1" && parts[0] != "localhost") ||
      !absl::SimpleAtoi(parts[1], &target_port) || target_port <= 0 || target_port > 65535) {
    return absl::InvalidArgumentError(
        absl::StrCat("fault proxy target must be 127.0.0.1:PORT (loopback only), got ", target));
  }
  const int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError(absl::StrCat("socket: ", std::strerror(errno)));
  const int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 || listen(fd, 64) != 0 ||
      getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    const std::string why = std::strerror(errno);
    close(fd);
    return absl::InternalError(absl::StrCat("fault proxy listen: ", why));
  }
  return std::unique_ptr<FaultProxy>(new FaultProxy(fd, ntohs(addr.sin_port), target_port, seed));
}

FaultProxy::FaultProxy(int listen_fd, int port, int target_port, uint64_t seed)
    : listen_fd_(listen_fd), port_(port), target_port_(target_port), rng_(seed) {
  acceptor_ = std::thread([this] { AcceptLoop(); });
}

FaultProxy::~FaultProxy() {
  stopping_ = true;
  acceptor_.join();
  close(listen_fd_);
  std::vector<std::unique_ptr<Link>> links;
  {
    absl::MutexLock lock(&mu_);
    links.swap(links_);
  }
  for (auto& link : links) {
    CloseLink(link.get());
    for (std::thread& t : link->threads) {
      if (t.joinable()) t.join();
    }
    for (int fd : link->fds) close(fd);
  }
}

std::string FaultProxy::address() const { return absl::StrCat("127.0.0.1:", port_); }

void FaultProxy::SetDelay(absl::Duration delay, absl::Duration jitter) {
  absl::MutexLock lock(&mu_);
  delay_ = delay;
  jitter_ = jitter;
}

void FaultProxy::SetLoss(double probability, absl::Duration penalty) {
  absl::MutexLock lock(&mu_);
  loss_ = probability;
  penalty_ = penalty;
}

void FaultProxy::Stall() { stalled_ = true; }

void FaultProxy::Resume() {
  stalled_ = false;
  absl::MutexLock lock(&mu_);
  for (auto& link : links_) {
    for (Link::Queue& q : link->queues) q.cv.notify_all();
  }
}

void FaultProxy::Cut() {
  cut_ = true;
  absl::MutexLock lock(&mu_);
  for (auto& link : links_) CloseLink(link.get());
}

void FaultProxy::Heal() { cut_ = false; }

void FaultProxy::CutAtResponse(int n, bool before) {
  responses_seen_ = 0;
  cut_before_ = before;
  cut_at_response_ = n;
}

bool FaultProxy::FindCutPoint(Link* link, const std::string& bytes, size_t* keep, size_t* hold) {
  Link::Frames& f = link->frames;
  size_t pos = 0;
  while (pos < bytes.size()) {
    if (f.left == 0 && f.header.empty() && cut_at_response_ > 0 && bytes.size() - pos < 9) {
      *hold = pos;  // the frame's header is not all here: decide on it next time
      return false;
    }
    if (f.left == 0 && f.header.size() < 9) {
      const size_t start = f.header.empty() ? pos : 0;
      const size_t take = std::min(9 - f.header.size(), bytes.size() - pos);
      f.header.append(bytes, pos, take);
      pos += take;
      if (f.header.size() < 9) break;
      const auto* h = reinterpret_cast<const uint8_t*>(f.header.data());
      f.left = (uint32_t{h[0]} << 16) | (uint32_t{h[1]} << 8) | h[2];
      f.ends_stream = h[3] == 0x1 && (h[4] & 0x1) != 0;  // HEADERS, END_STREAM
      f.header.clear();
      if (f.ends_stream && cut_at_response_ > 0 && cut_before_ &&
          responses_seen_ + 1 == cut_at_response_) {
        *keep = start;
        return true;
      }
    }
    const size_t take = std::min<size_t>(f.left, bytes.size() - pos);
    f.left -= static_cast<uint32_t>(take);
    pos += take;
    if (f.left == 0 && f.ends_stream) {
      f.ends_stream = false;
      if (cut_at_response_ > 0 && ++responses_seen_ == cut_at_response_) {
        *keep = pos;
        return true;
      }
    }
  }
  return false;
}

void FaultProxy::CloseLink(Link* link) {
  if (link->closed.exchange(true)) return;
  for (int fd : link->fds) Reset(fd);
  for (Link::Queue& q : link->queues) {
    std::lock_guard<std::mutex> lock(q.mu);
    q.cv.notify_all();
  }
}

absl::Time FaultProxy::DueTime(absl::Time arrived) {
  absl::MutexLock lock(&mu_);
  absl::Duration extra = delay_;
  if (jitter_ > absl::ZeroDuration()) {
    extra += absl::Nanoseconds(rng_() % static_cast<uint64_t>(absl::ToInt64Nanoseconds(jitter_)));
  }
  if (loss_ > 0 && std::uniform_real_distribution<double>(0, 1)(rng_) < loss_) extra += penalty_;
  return arrived + extra;
}

void FaultProxy::AcceptLoop() {
  while (!stopping_) {
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, kPollMs) <= 0) continue;
    const int client = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (client < 0) continue;
    if (cut_) {    // partitioned: the dialing side sees its connection reset
      ++refused_;  // counted first: a caller may look as soon as it sees the reset
      Reset(client);
      close(client);
      continue;
    }
    const int upstream = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<uint16_t>(target_port_));
    if (upstream < 0 || connect(upstream, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
      if (upstream >= 0) close(upstream);
      ++refused_;
      Reset(client);
      close(client);
      continue;
    }
    const int one = 1;
    setsockopt(client, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    setsockopt(upstream, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    auto link = std::make_unique<Link>();
    link->fds[0] = client;
    link->fds[1] = upstream;
    Link* l = link.get();
    l->threads[0] = std::thread([this, l] { Reader(l, 0); });
    l->threads[1] = std::thread([this, l] { Writer(l, 0); });
    l->threads[2] = std::thread([this, l] { Reader(l, 1); });
    l->threads[3] = std::thread([this, l] { Writer(l, 1); });
    ++accepted_;
    absl::MutexLock lock(&mu_);
    links_.push_back(std::move(link));
    if (cut_) CloseLink(l);  // cut while it was being set up
  }
}

void FaultProxy::Reader(Link* link, int direction) {
  Link::Queue& q = link->queues[direction];
  std::string buf(kChunk, '\0');
  while (!link->closed && !stopping_) {
    pollfd p{link->fds[direction], POLLIN, 0};
    if (poll(&p, 1, kPollMs) <= 0) continue;
    const ssize_t n = read(link->fds[direction], buf.data(), buf.size());
    if (n <= 0) break;
    const absl::Time due = DueTime(absl::Now());
    std::lock_guard<std::mutex> lock(q.mu);
    q.last_due = std::max(q.last_due, due);  // order kept: never before the chunk ahead
    q.chunks.push_back({q.last_due, buf.substr(0, static_cast<size_t>(n))});
    q.cv.notify_all();
  }
  std::lock_guard<std::mutex> lock(q.mu);
  q.eof = true;
  q.cv.notify_all();
}

void FaultProxy::Writer(Link* link, int direction) {
  Link::Queue& q = link->queues[direction];
  const int to = link->fds[1 - direction];
  while (true) {
    std::string bytes;
    {
      std::unique_lock<std::mutex> lock(q.mu);
      q.cv.wait_for(lock, std::chrono::milliseconds(10), [&] {
        return link->closed.load() ||
               (!q.chunks.empty() && !stalled_ && q.chunks.front().due <= absl::Now()) ||
               (q.eof && q.chunks.empty());
      });
      if (link->closed || stopping_) return;
      if (q.chunks.empty()) {
        if (q.eof) break;
        continue;
      }
      if (stalled_ || q.chunks.front().due > absl::Now()) continue;
      bytes = std::move(q.chunks.front().bytes);
      q.chunks.pop_front();
    }
    bool cut_after = false;
    if (direction == 1) {
      bytes.insert(0, link->held);
      link->held.clear();
      size_t keep = bytes.size(), hold = bytes.size();
      if (FindCutPoint(link, bytes, &keep, &hold)) {
        bytes.resize(keep);
        cut_after = true;
      } else if (hold < bytes.size()) {
        link->held = bytes.substr(hold);
        bytes.resize(hold);
      }
    }
    // Counted before the bytes reach the other end, so a caller that saw
    // them also sees the count (a failed send closes the link anyway).
    forwarded_ += bytes.size();
    size_t done = 0;
    while (done < bytes.size()) {
      const ssize_t n = send(to, bytes.data() + done, bytes.size() - done, MSG_NOSIGNAL);
      if (n <= 0) {
        CloseLink(link);
        return;
      }
      done += static_cast<size_t>(n);
    }
    if (cut_after) {
      cut_at_response_ = 0;
      Cut();
      return;
    }
  }
  if (!link->held.empty()) {  // the source ended: what was withheld goes too
    forwarded_ += link->held.size();
    send(to, link->held.data(), link->held.size(), MSG_NOSIGNAL);
  }
  shutdown(to, SHUT_WR);  // the source ended its stream: pass the end on
}

}  // namespace tandem::testing

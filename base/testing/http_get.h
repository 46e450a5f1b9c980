// Test helpers: one HTTP/1.0 request to 127.0.0.1:port, returning the whole
// response (status line, headers, body), or "" when the connection fails,
// and what tests read out of responses and pages. Blocking, no timeout
// beyond the kernel's; for tests against local servers.
#ifndef TANDEM_BASE_TESTING_HTTP_GET_H_
#define TANDEM_BASE_TESTING_HTTP_GET_H_

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <string>

namespace tandem::testing {

// `method` (GET, HEAD, POST, ...) of `path`, with an empty body.
inline std::string HttpRequest(int port, const std::string& method, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return "";
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return "";
  }
  const std::string req =
      method + " " + path + " HTTP/1.0\r\nHost: 127.0.0.1\r\nContent-Length: 0\r\n\r\n";
  send(fd, req.data(), req.size(), MSG_NOSIGNAL);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

inline std::string HttpGet(int port, const std::string& path) {
  return HttpRequest(port, "GET", path);
}

// The status line of a response ("HTTP/1.1 200 OK").
inline std::string StatusLine(const std::string& response) {
  return response.substr(0, response.find("\r\n"));
}

// The body of a response ("" without a header end).
inline std::string Body(const std::string& response) {
  const size_t at = response.find("\r\n\r\n");
  return at == std::string::npos ? "" : response.substr(at + 4);
}

// The text between `open` (its first occurrence at or after `from`) and the
// next `close`; "" when either is missing.
inline std::string Between(const std::string& s, const std::string& open, const std::string& close,
                           size_t from = 0) {
  const size_t a = s.find(open, from);
  if (a == std::string::npos) return "";
  const size_t b = s.find(close, a + open.size());
  return b == std::string::npos ? "" : s.substr(a + open.size(), b - a - open.size());
}

// How often `what` occurs in `s` (overlapping occurrences count).
inline size_t Count(const std::string& s, const std::string& what) {
  size_t n = 0;
  for (size_t at = s.find(what); at != std::string::npos; at = s.find(what, at + 1)) ++n;
  return n;
}

}  // namespace tandem::testing

#endif  // TANDEM_BASE_TESTING_HTTP_GET_H_

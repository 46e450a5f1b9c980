// MakeFileStateStore (participant.h): one file per key under a directory,
// replaced atomically (write to a temporary, fsync, rename, fsync the dir),
// so a crash leaves either the old or the new value.
#include <fcntl.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "tandem/client/participant.h"

namespace tandem::client {
namespace {

bool ValidKey(const std::string& key) {
  return !key.empty() && key.size() <= 128 && std::all_of(key.begin(), key.end(), [](char c) {
    return std::isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_';
  });
}

absl::Status Errno(const std::string& what) {
  return absl::InternalError(absl::StrCat(what, ": ", std::strerror(errno)));
}

class FileStateStore : public StateStore {
 public:
  explicit FileStateStore(std::filesystem::path dir) : dir_(std::move(dir)) {}

  absl::StatusOr<std::optional<std::string>> Get(const std::string& key) override {
    if (!ValidKey(key)) return absl::InvalidArgumentError("state key must match [A-Za-z0-9_-]{1,128}");
    std::ifstream in(dir_ / key, std::ios::binary);
    if (!in) return std::nullopt;
    std::stringstream buf;
    buf << in.rdbuf();
    return buf.str();
  }

  absl::Status Put(const std::string& key, const std::string& value) override {
    if (!ValidKey(key)) return absl::InvalidArgumentError("state key must match [A-Za-z0-9_-]{1,128}");
    const std::string tmp = (dir_ / (key + ".tmp")).string();
    const int fd = open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
    if (fd < 0) return Errno("open " + tmp);
    size_t off = 0;
    while (off < value.size()) {
      const ssize_t n = write(fd, value.data() + off, value.size() - off);
      if (n < 0) {
        close(fd);
        return Errno("write " + tmp);
      }
      off += static_cast<size_t>(n);
    }
    if (fsync(fd) != 0 || close(fd) != 0) return Errno("fsync " + tmp);
    if (rename(tmp.c_str(), (dir_ / key).c_str()) != 0) return Errno("rename " + tmp);
    return SyncDir();
  }

  absl::Status Delete(const std::string& key) override {
    if (!ValidKey(key)) return absl::InvalidArgumentError("state key must match [A-Za-z0-9_-]{1,128}");
    if (unlink((dir_ / key).c_str()) != 0 && errno != ENOENT) return Errno("unlink " + key);
    return SyncDir();
  }

 private:
  absl::Status SyncDir() {
    const int fd = open(dir_.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (fd < 0) return Errno("open " + dir_.string());
    const int rc = fsync(fd);
    close(fd);
    return rc == 0 ? absl::OkStatus() : Errno("fsync " + dir_.string());
  }
  std::filesystem::path dir_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<StateStore>> MakeFileStateStore(const std::string& dir) {
  if (dir.empty()) return absl::InvalidArgumentError("state directory is empty");
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("cannot create ", dir, ": ", ec.message()));
  return std::unique_ptr<StateStore>(new FileStateStore(dir));
}

}  // namespace tandem::client

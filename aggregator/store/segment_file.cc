#include "aggregator/store/segment_file.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <nmmintrin.h>
#include <sys/stat.h>
#include <sys/uio.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "base/status_macros.h"

namespace tandem::aggregator {
namespace {

constexpr char kMagic[4] = {'T', 'S', 'G', '1'};             // RecordCheck::kCrc32c
constexpr char kMagicOwnerDigest[4] = {'T', 'S', 'G', '2'};  // RecordCheck::kOwnerDigest
constexpr int kIovMax = 512;  // iovecs per pwritev (IOV_MAX is 1024 on Linux)

// CRC-32C (Castagnoli), hardware-accelerated where SSE4.2 is present.
struct Crc32cTable {
  uint32_t t[256];
  Crc32cTable() {
    for (uint32_t i = 0; i < 256; ++i) {
      uint32_t c = i;
      for (int k = 0; k < 8; ++k) c = (c >> 1) ^ ((c & 1) ? 0x82f63b78u : 0);
      t[i] = c;
    }
  }
};

// The raw CRC state (no pre/post inversion) after `n` bytes of `p`.
__attribute__((target("sse4.2"))) uint64_t Crc32cRaw(uint64_t c, const char* p, size_t n) {
  for (; n >= 8; p += 8, n -= 8) {
    uint64_t w;
    std::memcpy(&w, p, 8);
    c = _mm_crc32_u64(c, w);
  }
  for (; n > 0; ++p, --n) c = _mm_crc32_u8(static_cast<uint32_t>(c), static_cast<uint8_t>(*p));
  return c;
}

// Three streams of kStride bytes each per step: crc32 has a latency of 3
// cycles and a throughput of 1, so one dependent chain uses a third of the
// unit. The streams are joined with the CRC's linearity: the state of A || B
// from c is Z(state of A from c) ^ (state of B from 0), where Z advances a
// state over kStride zero bytes, a linear map of 32 bits: four 256-entry
// tables, one per byte of the state.
constexpr size_t kStride = 4096;

struct ZeroShift {
  uint32_t t[4][256];
  __attribute__((target("sse4.2"))) ZeroShift() {
    const std::string zeros(kStride, '\0');
    for (int b = 0; b < 4; ++b) {
      for (uint32_t v = 0; v < 256; ++v) {
        t[b][v] = static_cast<uint32_t>(Crc32cRaw(uint64_t{v} << (8 * b), zeros.data(), kStride));
      }
    }
  }
  uint32_t operator()(uint32_t c) const {
    return t[0][c & 0xff] ^ t[1][(c >> 8) & 0xff] ^ t[2][(c >> 16) & 0xff] ^ t[3][c >> 24];
  }
};

__attribute__((target("sse4.2"))) uint32_t Crc32cHardware(const char* p, size_t n) {
  static const ZeroShift shift;
  uint64_t c = 0xffffffffu;
  for (; n >= 3 * kStride; p += 3 * kStride, n -= 3 * kStride) {
    uint64_t c1 = 0, c2 = 0;
    for (size_t i = 0; i < kStride; i += 8) {
      uint64_t w0, w1, w2;
      std::memcpy(&w0, p + i, 8);
      std::memcpy(&w1, p + kStride + i, 8);
      std::memcpy(&w2, p + 2 * kStride + i, 8);
      c = _mm_crc32_u64(c, w0);
      c1 = _mm_crc32_u64(c1, w1);
      c2 = _mm_crc32_u64(c2, w2);
    }
    c = shift(shift(static_cast<uint32_t>(c)) ^ static_cast<uint32_t>(c1)) ^
        static_cast<uint32_t>(c2);
  }
  return ~static_cast<uint32_t>(Crc32cRaw(c, p, n));
}

void PutU32(char* out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out[i] = static_cast<char>((v >> (8 * i)) & 0xff);
}
uint32_t GetU32(const char* in) {
  uint32_t v = 0;
  for (int i = 0; i < 4; ++i) v |= static_cast<uint32_t>(static_cast<uint8_t>(in[i])) << (8 * i);
  return v;
}
constexpr absl::string_view kSuffix = ".seg";

absl::Status Corrupt(absl::string_view what) {
  return absl::DataLossError(absl::StrCat("segment store: corrupt ", what));
}

absl::Status ErrnoStatus(int err, absl::string_view what) {
  const std::string msg = absl::StrCat("segment store: ", what, ": ", std::strerror(err));
  if (err == ENOSPC || err == EDQUOT) return absl::ResourceExhaustedError(msg);
  if (err == EACCES || err == EPERM || err == EROFS) return absl::PermissionDeniedError(msg);
  if (err == EINTR || err == EAGAIN) return absl::UnavailableError(msg);
  return absl::InternalError(msg);
}

// Segment number of a file name NNNNNN.seg, or -1.
int64_t ParseSegmentName(absl::string_view name) {
  if (name.size() <= kSuffix.size() || !absl::EndsWith(name, kSuffix)) return -1;
  const absl::string_view digits = name.substr(0, name.size() - kSuffix.size());
  if (digits.size() < 6 || digits.size() > 18) return -1;
  for (char c : digits) {
    if (!absl::ascii_isdigit(static_cast<unsigned char>(c))) return -1;
  }
  int64_t n = 0;
  if (!absl::SimpleAtoi(digits, &n) || n < 1) return -1;
  if (absl::StrFormat("%06d", n) != digits) return -1;  // Only the names PathOf makes.
  return n;
}

absl::Status SyncDirectory(const std::string& dir) {
  const int fd = open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (fd < 0) return ErrnoStatus(errno, "open directory");
  const int rc = fsync(fd);
  const int err = errno;
  close(fd);
  if (rc != 0) return ErrnoStatus(err, "fsync directory");
  return absl::OkStatus();
}

}  // namespace

uint32_t Crc32cPortable(absl::string_view data) {
  static const Crc32cTable table;
  uint32_t c = 0xffffffffu;
  for (char ch : data) c = table.t[(c ^ static_cast<uint8_t>(ch)) & 0xff] ^ (c >> 8);
  return ~c;
}

uint32_t Crc32c(absl::string_view data) {
  static const bool hardware = __builtin_cpu_supports("sse4.2");
  if (hardware) return Crc32cHardware(data.data(), data.size());
  return Crc32cPortable(data);
}

absl::StatusOr<std::unique_ptr<SegmentFiles>> SegmentFiles::Open(const std::string& dir,
                                                                 int64_t max_segment_bytes,
                                                                 bool sync,
                                                                 int64_t max_record_bytes) {
  if (dir.empty() || max_segment_bytes < 1 || max_record_bytes < 0 ||
      max_record_bytes > int64_t{0xffffffff}) {
    return absl::InvalidArgumentError("segment store: bad directory, segment or record size");
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat("create ", dir));
  std::unique_ptr<SegmentFiles> files(
      new SegmentFiles(dir, max_segment_bytes, sync, max_record_bytes));
  for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
    const int64_t n = ParseSegmentName(entry.path().filename().string());
    if (n < 0) continue;  // Not ours.
    files->fds_.emplace(n, -1);
    files->next_segment_ = std::max(files->next_segment_, n + 1);
  }
  if (ec) return ErrnoStatus(ec.value(), absl::StrCat("list ", dir));
  return files;
}

SegmentFiles::~SegmentFiles() {
  for (const auto& [segment, fd] : fds_) {
    if (fd >= 0) close(fd);
  }
}

std::string SegmentFiles::PathOf(int64_t segment) const {
  return absl::StrFormat("%s/%06d%s", dir_, segment, kSuffix);
}

absl::Status SegmentFiles::StartSegment() {
  const int64_t segment = next_segment_++;
  const std::string path = PathOf(segment);
  const int fd = open(path.c_str(), O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0600);
  if (fd < 0) return ErrnoStatus(errno, absl::StrCat("create ", path));
  fds_[segment] = fd;
  // The new name must be durable before any record in it is indexed.
  if (sync_) TANDEM_RETURN_IF_ERROR(SyncDirectory(dir_));
  active_ = segment;
  active_fd_ = fd;
  active_end_ = 0;
  return absl::OkStatus();
}

absl::StatusOr<ShareLocation> SegmentFiles::Add(absl::string_view payload, absl::string_view tag,
                                                RecordCheck check) {
  if (flushing_) return absl::FailedPreconditionError("segment store: a flush is in progress");
  if (static_cast<int64_t>(payload.size()) > max_record_bytes_ || tag.size() != kTagBytes) {
    return absl::InvalidArgumentError("segment store: bad record");
  }
  // Rotation only between batches, so a batch lies in one segment.
  if (payloads_.empty() && (active_ < 0 || active_end_ >= max_segment_bytes_)) {
    TANDEM_RETURN_IF_ERROR(StartSegment());
  }
  ShareLocation loc{active_, active_end_ + pending_bytes_, static_cast<int64_t>(payload.size())};
  std::string header(kHeaderBytes, '\0');
  const bool crc = check == RecordCheck::kCrc32c;
  std::memcpy(header.data(), crc ? kMagic : kMagicOwnerDigest, 4);
  PutU32(header.data() + 4, static_cast<uint32_t>(payload.size()));
  std::memcpy(header.data() + 8, tag.data(), kTagBytes);
  PutU32(header.data() + 16, crc ? Crc32c(payload) : 0);
  headers_.push_back(std::move(header));
  payloads_.push_back(payload);
  pending_bytes_ += kHeaderBytes + static_cast<int64_t>(payload.size());
  return loc;
}

absl::Status SegmentFiles::Flush() {
  TANDEM_ASSIGN_OR_RETURN(const SegmentWrite write, BeginFlush());
  return EndFlush(write, write.Run());
}

absl::StatusOr<SegmentWrite> SegmentFiles::BeginFlush() {
  SegmentWrite write;
  if (payloads_.empty()) return write;  // nothing buffered: nothing to wait for
  if (flushing_) return absl::FailedPreconditionError("segment store: a flush is in progress");
  write.fd_ = active_fd_;
  write.offset_ = active_end_;
  write.total_ = pending_bytes_;
  write.sync_ = sync_;
  write.path_ = PathOf(active_);
  write.headers_ = std::move(headers_);
  write.payloads_ = std::move(payloads_);
  Discard();
  flushing_ = true;
  return write;
}

absl::Status SegmentFiles::EndFlush(const SegmentWrite& write, absl::Status written) {
  if (write.empty()) return written;
  flushing_ = false;
  if (!written.ok()) {
    // Whatever reached the file is unindexed dead space; the next batch
    // starts a fresh segment (this one stays readable for its live records).
    active_ = -1;
    active_fd_ = -1;
    return written;
  }
  active_end_ += write.total_;
  return absl::OkStatus();
}

absl::Status SegmentWrite::Run() const {
  if (total_ == 0) return absl::OkStatus();
  // Header and payload of every record, written in place (no copy).
  std::vector<iovec> iov;
  iov.reserve(2 * payloads_.size());
  for (size_t i = 0; i < payloads_.size(); ++i) {
    iov.push_back({const_cast<char*>(headers_[i].data()), headers_[i].size()});
    if (!payloads_[i].empty()) {
      iov.push_back({const_cast<char*>(payloads_[i].data()), payloads_[i].size()});
    }
  }
  int64_t done = 0;
  size_t first = 0;  // First iovec not fully written.
  while (done < total_) {
    const int count = static_cast<int>(std::min<size_t>(kIovMax, iov.size() - first));
    const ssize_t n = pwritev(fd_, iov.data() + first, count, offset_ + done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return ErrnoStatus(n < 0 ? errno : EIO, absl::StrCat("write ", path_));
    done += n;
    size_t left = static_cast<size_t>(n);  // Skip what was written.
    while (left > 0 && left >= iov[first].iov_len) left -= iov[first++].iov_len;
    if (left > 0) {
      iov[first].iov_base = static_cast<char*>(iov[first].iov_base) + left;
      iov[first].iov_len -= left;
    }
  }
  if (sync_ && fdatasync(fd_) != 0) return ErrnoStatus(errno, absl::StrCat("fdatasync ", path_));
  return absl::OkStatus();
}

absl::StatusOr<int> SegmentFiles::ReadFd(int64_t segment) {
  auto it = fds_.find(segment);
  if (it == fds_.end()) return Corrupt(absl::StrCat("index (segment ", segment, " is missing)"));
  if (it->second >= 0) return it->second;
  const int fd = open(PathOf(segment).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    if (errno == ENOENT) return Corrupt(absl::StrCat("index (segment ", segment, " is missing)"));
    return ErrnoStatus(errno, absl::StrCat("open ", PathOf(segment)));
  }
  it->second = fd;
  return fd;
}

absl::StatusOr<std::string> SegmentFiles::Read(const ShareLocation& loc, absl::string_view tag,
                                               bool* owner_checks) {
  if (loc.segment < 1 || loc.offset < 0 || loc.length < 0 || loc.length > max_record_bytes_ ||
      loc.offset > (int64_t{1} << 60) || tag.size() != kTagBytes) {
    return Corrupt("share location");
  }
  TANDEM_ASSIGN_OR_RETURN(const int fd, ReadFd(loc.segment));
  char header[kHeaderBytes];
  std::string payload(static_cast<size_t>(loc.length), '\0');
  iovec iov[2] = {{header, kHeaderBytes}, {payload.data(), payload.size()}};
  const size_t want = kHeaderBytes + payload.size();
  size_t got = 0;
  while (got < want) {
    // Re-aim the vectors past what has been read.
    iovec part[2];
    int count = 0;
    size_t skip = got;
    for (const iovec& v : iov) {
      if (skip >= v.iov_len) {
        skip -= v.iov_len;
        continue;
      }
      part[count++] = {static_cast<char*>(v.iov_base) + skip, v.iov_len - skip};
      skip = 0;
    }
    const ssize_t n = preadv(fd, part, count, loc.offset + static_cast<off_t>(got));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) return ErrnoStatus(errno, absl::StrCat("read ", PathOf(loc.segment)));
    if (n == 0) return Corrupt("share record (segment shorter than its index)");
    got += static_cast<size_t>(n);
  }
  const bool crc = std::memcmp(header, kMagic, 4) == 0;
  if (!crc && (owner_checks == nullptr || std::memcmp(header, kMagicOwnerDigest, 4) != 0)) {
    return Corrupt("record (bad magic)");
  }
  if (static_cast<int64_t>(GetU32(header + 4)) != loc.length) {
    return Corrupt("record (length mismatch)");
  }
  if (std::memcmp(header + 8, tag.data(), kTagBytes) != 0) {
    return Corrupt("record (belongs to another owner)");
  }
  if (crc && GetU32(header + 16) != Crc32c(payload)) return Corrupt("record (checksum mismatch)");
  if (!crc && GetU32(header + 16) != 0) return Corrupt("record (bad header)");
  if (owner_checks != nullptr) *owner_checks = !crc;
  return payload;
}

std::vector<int64_t> SegmentFiles::InactiveSegments() const {
  std::vector<int64_t> out;
  for (const auto& [segment, fd] : fds_) {
    if (segment != active_) out.push_back(segment);
  }
  return out;
}

absl::Status SegmentFiles::Remove(int64_t segment) {
  if (segment == active_) return absl::FailedPreconditionError("segment store: segment is active");
  auto it = fds_.find(segment);
  if (it == fds_.end()) return absl::OkStatus();
  if (it->second >= 0) close(it->second);
  fds_.erase(it);
  if (unlink(PathOf(segment).c_str()) != 0 && errno != ENOENT) {
    return ErrnoStatus(errno, absl::StrCat("unlink ", PathOf(segment)));
  }
  return absl::OkStatus();
}

}  // namespace tandem::aggregator

// Append-only share segments of a SegmentReportStore: files <dir>/NNNNNN.seg
// (decimal segment number, at least 6 digits). Each record is
//
//   magic (4) | payload length, uint32 LE (4) | tag (8) |
//   CRC-32C of the payload, uint32 LE (4) | payload
//
// with magic "TSG1" (the payload is checked against its CRC-32C) or "TSG2"
// (the CRC field is zero: the payload is covered by its owner's digest,
// which the reader checks instead; RecordCheck::kOwnerDigest). A share's
// digest in the index is the SHA-256 content digest of its bytes, checked
// on every read of it, so a CRC beside it would be a second pass over each
// ~134 KB share at upload for nothing (2.5 % of the pair's ingest CPU at
// D = 2^17, bench/README.md, issue 36); snapshots keep theirs.
//
// The tag ties the record to its owner in the index (a share's: the first 8
// bytes of its digest; a snapshot's: its round id), so a location that
// points at another valid record is caught, not only damaged bytes.
//
// A record is only ever read through a location (segment, offset, length)
// that the index committed after the record was written and synced, so the
// files are never scanned: bytes that no committed location names (a torn
// tail after a crash, a batch whose index commit failed) are dead space. An
// opened SegmentFiles never appends to a segment that existed before it
// (writes start in a fresh segment), so a torn tail is never followed by live
// records. Every read is validated against the index: magic, length, tag
// and (TSG1) CRC-32C of the payload (DATA_LOSS on any mismatch, a short read
// or a missing file).
//
// Thread safety: thread-compatible (the store calls it under its mutex).
#ifndef TANDEM_AGGREGATOR_STORE_SEGMENT_FILE_H_
#define TANDEM_AGGREGATOR_STORE_SEGMENT_FILE_H_

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace tandem::aggregator {

// CRC-32C (Castagnoli) of `data`: SSE4.2 where the CPU has it, else the
// portable table version (both exposed for the tests).
uint32_t Crc32c(absl::string_view data);
uint32_t Crc32cPortable(absl::string_view data);

// How a record's payload is checked on read (see the file comment).
enum class RecordCheck {
  kCrc32c,       // "TSG1": by the CRC-32C in its header
  kOwnerDigest,  // "TSG2": by the owner's digest, which the reader checks
};

struct ShareLocation {
  int64_t segment = 0;
  int64_t offset = 0;  // Of the record header.
  int64_t length = 0;  // Of the payload.
};

// The records of one flush and where they go (SegmentFiles::BeginFlush):
// Run writes and syncs them without touching the SegmentFiles, so that the
// caller need not hold its lock meanwhile. Holds views of the callers'
// payloads (valid until EndFlush). Movable.
class SegmentWrite {
 public:
  SegmentWrite() = default;
  // pwritev of every record at its place, then fdatasync when syncing.
  // Errors are the mapped errno (INTERNAL, RESOURCE_EXHAUSTED for ENOSPC).
  absl::Status Run() const;
  bool empty() const { return total_ == 0; }

 private:
  friend class SegmentFiles;
  int fd_ = -1;  // The active segment's (owned by SegmentFiles).
  int64_t offset_ = 0;
  int64_t total_ = 0;
  bool sync_ = false;
  std::string path_;  // For error messages.
  std::vector<std::string> headers_;
  std::vector<absl::string_view> payloads_;
};

class SegmentFiles {
 public:
  static constexpr int64_t kHeaderBytes = 20;
  static constexpr size_t kTagBytes = 8;
  static constexpr int64_t kDefaultMaxSegmentBytes = int64_t{64} << 20;

  // Opens (creating it when missing) the segment directory `dir`. A new
  // segment is started once the active one holds `max_segment_bytes`.
  // `sync`: fdatasync every Flush (off: durable across process crashes only).
  // Records hold at most `max_record_bytes` (< 4 GiB) of payload.
  static absl::StatusOr<std::unique_ptr<SegmentFiles>> Open(const std::string& dir,
                                                            int64_t max_segment_bytes, bool sync,
                                                            int64_t max_record_bytes);
  SegmentFiles(const SegmentFiles&) = delete;
  SegmentFiles& operator=(const SegmentFiles&) = delete;
  ~SegmentFiles();

  // Queues one record for the next Flush and returns where it will lie.
  // `tag` has kTagBytes bytes. The payload is not copied: it must stay
  // valid until the next Flush or Discard.
  absl::StatusOr<ShareLocation> Add(absl::string_view payload, absl::string_view tag,
                                    RecordCheck check = RecordCheck::kCrc32c);
  // Writes the buffered records and syncs them; only then may the index
  // name them. On failure the active segment is retired (nothing is
  // appended to it any more) and the buffered records are dropped.
  // Flush() = BeginFlush, Run, EndFlush.
  absl::Status Flush();
  // The same in steps: BeginFlush takes the buffered records (none: an
  // empty write; FAILED_PRECONDITION while another flush of records is in
  // progress, and Add is refused until its EndFlush); the caller runs the write with no lock held,
  // then reports its outcome to EndFlush, which returns it. Reads of committed locations may go on
  // meanwhile (they never touch the bytes in flight).
  absl::StatusOr<SegmentWrite> BeginFlush();
  absl::Status EndFlush(const SegmentWrite& write, absl::Status written);
  // Drops the buffered records (the batch was abandoned).
  void Discard() {
    headers_.clear();
    payloads_.clear();
    pending_bytes_ = 0;
  }

  // Reads the payload at `loc` and validates it against `tag` and, for a
  // kCrc32c record, its CRC. A kOwnerDigest record is DATA_LOSS unless
  // `owner_checks` is given; then *owner_checks says whether the caller
  // must check the payload against its digest (true) or the CRC did.
  absl::StatusOr<std::string> Read(const ShareLocation& loc, absl::string_view tag,
                                   bool* owner_checks = nullptr);

  // Every segment on disk except the one appends go to (reclaim candidates).
  std::vector<int64_t> InactiveSegments() const;
  // Deletes an inactive segment no committed location names any more.
  absl::Status Remove(int64_t segment);

  std::string PathOf(int64_t segment) const;

 private:
  SegmentFiles(std::string dir, int64_t max_segment_bytes, bool sync, int64_t max_record_bytes)
      : dir_(std::move(dir)),
        max_segment_bytes_(max_segment_bytes),
        max_record_bytes_(max_record_bytes),
        sync_(sync) {}
  absl::Status StartSegment();
  absl::StatusOr<int> ReadFd(int64_t segment);

  const std::string dir_;
  const int64_t max_segment_bytes_;
  const int64_t max_record_bytes_;
  const bool sync_;
  std::map<int64_t, int> fds_;  // Open descriptors, by segment (-1: known, not open).
  int64_t next_segment_ = 1;
  int64_t active_ = -1;  // Segment appends go to; -1: none yet.
  int active_fd_ = -1;
  int64_t active_end_ = 0;  // Bytes written and synced in the active segment.
  // Records queued since the last Flush: headers and the callers' payloads.
  std::vector<std::string> headers_;
  std::vector<absl::string_view> payloads_;
  int64_t pending_bytes_ = 0;
  bool flushing_ = false;  // Between BeginFlush and EndFlush.
};

}  // namespace tandem::aggregator

#endif  // TANDEM_AGGREGATOR_STORE_SEGMENT_FILE_H_

// KvCacheStore's reads: prefixes copied out (ReadFloats, ReadCodes), kept
// rows gathered (GatherRows), and pages scanned in place (ScanCodes,
// ScanRows). Each holds the cache's lock shared: appends wait, reads do not
// wait for each other. See kv_cache_store.h.
#include <algorithm>
#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/worker/huge_pages.h"
#include "ml/worker/kv_cache_entry.h"
#include "ml/worker/kv_cache_store.h"

namespace tandem::ml::worker {

absl::StatusOr<int64_t> KvCacheStore::PrefixLocked(const Entry& e, int64_t tokens) const {
  // e.mu is held (shared) by the caller.
  if (e.tokens == 0) {
    return absl::FailedPreconditionError(
        absl::StrCat("KV cache '", KvCacheStore::NameOf(e.name), "' is empty"));
  }
  if (tokens < 0 || tokens > e.tokens) {
    return absl::FailedPreconditionError(absl::StrCat("KV cache '", KvCacheStore::NameOf(e.name),
                                                      "' holds ", e.tokens,
                                                      " tokens, the request asked for ", tokens));
  }
  return tokens == 0 ? e.tokens : tokens;
}

absl::StatusOr<kernels::Tensor> KvCacheStore::ReadFloats(const std::string& name, KvPart part,
                                                         int64_t tokens) const {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Entry> e, Lookup(name));
  absl::ReaderMutexLock lock(&e->mu);
  TANDEM_ASSIGN_OR_RETURN(const int64_t n, PrefixLocked(*e, tokens));
  const KvCacheShape& s = e->shape;
  // Huge-page advised (huge_pages.h): a fresh 64 MiB tensor of 4 KiB pages
  // costs ~16K page faults, most of a whole-cache read here.
  TANDEM_ASSIGN_OR_RETURN(
      kernels::Tensor out,
      kernels::Tensor::FromData({s.heads, n, s.head_dim},
                                AdvisedFloats(static_cast<size_t>(s.heads * n * s.head_dim))));
  const size_t row = static_cast<size_t>(s.head_dim) * sizeof(float);
  TANDEM_RETURN_IF_ERROR(e->ForEachRun(n, [&](const Page& p, int64_t at, int64_t m) {
    for (int h = 0; h < s.heads; ++h) {
      const size_t from =
          part == KvPart::kKeys ? e->KeysAt(p.capacity, h, 0) : e->ValuesAt(p.capacity, h, 0);
      TANDEM_RETURN_IF_ERROR(allocator_->CopyOut(
          p.buffer, from, out.mutable_ptr() + (h * n + at) * s.head_dim, m * row));
    }
    return absl::OkStatus();
  }));
  return out;
}

absl::StatusOr<int64_t> KvCacheStore::GatherRows(const std::string& name, KvPart part,
                                                 int64_t tokens,
                                                 absl::Span<const int64_t> positions,
                                                 absl::Span<const int64_t> cu,
                                                 absl::Span<float> out) const {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Entry> e, Lookup(name));
  const KvCacheShape& s = e->shape;
  if (static_cast<int64_t>(cu.size()) != s.heads + 1 || cu.front() != 0 ||
      cu.back() != static_cast<int64_t>(positions.size()) ||
      !std::is_sorted(cu.begin(), cu.end())) {
    return absl::InvalidArgumentError(
        absl::StrCat("gather offsets must be heads + 1 = ", s.heads + 1,
                     " non-decreasing entries from 0 to the ", positions.size(), " positions"));
  }
  if (out.size() != positions.size() * static_cast<size_t>(s.head_dim)) {
    return absl::InvalidArgumentError("gather output has the wrong size");
  }
  absl::ReaderMutexLock lock(&e->mu);
  TANDEM_ASSIGN_OR_RETURN(const int64_t n, PrefixLocked(*e, tokens));
  // First token of each page read, to find a position's page by bisection.
  std::vector<int64_t> starts;
  starts.reserve(e->pages.size());
  TANDEM_RETURN_IF_ERROR(e->ForEachRun(n, [&](const Page&, int64_t at, int64_t) {
    starts.push_back(at);
    return absl::OkStatus();
  }));
  const size_t row = static_cast<size_t>(s.head_dim) * sizeof(float);
  for (int h = 0; h < s.heads; ++h) {
    for (int64_t i = cu[h]; i < cu[h + 1]; ++i) {
      const int64_t t = positions[i];
      if (t < 0 || t >= n) {
        return absl::InvalidArgumentError(
            absl::StrCat("position ", t, " (KV head ", h, ") is outside the ", n,
                         " tokens read of KV cache '", KvCacheStore::NameOf(name), "'"));
      }
      const size_t pi =
          static_cast<size_t>(std::upper_bound(starts.begin(), starts.end(), t) - starts.begin()) -
          1;
      const Page& p = e->pages[pi];
      const int64_t off = t - starts[pi];
      const size_t from =
          part == KvPart::kKeys ? e->KeysAt(p.capacity, h, off) : e->ValuesAt(p.capacity, h, off);
      TANDEM_RETURN_IF_ERROR(allocator_->CopyOut(p.buffer, from, out.data() + i * s.head_dim, row));
    }
  }
  return n;
}

namespace {

absl::Status CheckHeadOf(const std::string& name, const KvCacheShape& s, int head) {
  if (head < 0 || head >= s.heads) {
    return absl::InvalidArgumentError(absl::StrCat("head ", head, " outside [0, ", s.heads,
                                                   ") of KV cache '", KvCacheStore::NameOf(name),
                                                   "'"));
  }
  return absl::OkStatus();
}

// ReadCodes' and ScanCodes' checks of the cache and the head.
absl::Status CheckCodesOf(const std::string& name, const KvCacheShape& s, int head) {
  if (s.code_bits == 0) {
    return absl::InvalidArgumentError(absl::StrCat("KV cache '", KvCacheStore::NameOf(name),
                                                   "' holds no Spotlight codes (code_bits 0)"));
  }
  return CheckHeadOf(name, s, head);
}

}  // namespace

absl::StatusOr<int64_t> KvCacheStore::ScanInPlace(
    const Entry& e, int64_t tokens,
    absl::FunctionRef<void(const char* page, const Page& p, int64_t first, int64_t n)> fn) const {
  absl::ReaderMutexLock lock(&e.mu);
  TANDEM_ASSIGN_OR_RETURN(const int64_t n, PrefixLocked(e, tokens));
  TANDEM_RETURN_IF_ERROR(e.ForEachRun(n, [&](const Page& p, int64_t at, int64_t m) {
    const char* base = static_cast<const char*>(allocator_->HostView(p.buffer));
    if (base == nullptr) {
      return absl::UnimplementedError("KV cache pages are not host-readable here");
    }
    fn(base, p, at, m);
    return absl::OkStatus();
  }));
  return n;
}

absl::StatusOr<int64_t> KvCacheStore::ScanCodes(
    const std::string& name, int head, int64_t tokens,
    absl::FunctionRef<void(const uint32_t* codes, int64_t first, int64_t n)> fn) const {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Entry> e, Lookup(name));
  TANDEM_RETURN_IF_ERROR(CheckCodesOf(name, e->shape, head));
  return ScanInPlace(*e, tokens, [&](const char* base, const Page& p, int64_t at, int64_t m) {
    // Pages are 64-byte aligned and every offset in them a multiple of 4.
    fn(reinterpret_cast<const uint32_t*>(base + e->CodesAt(p.capacity, head, 0)), at, m);
  });
}

absl::StatusOr<int64_t> KvCacheStore::ScanRows(
    const std::string& name, int head, int64_t tokens,
    absl::FunctionRef<void(const float* keys, const float* values, int64_t first, int64_t n)> fn)
    const {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Entry> e, Lookup(name));
  TANDEM_RETURN_IF_ERROR(CheckHeadOf(name, e->shape, head));
  return ScanInPlace(*e, tokens, [&](const char* base, const Page& p, int64_t at, int64_t m) {
    fn(reinterpret_cast<const float*>(base + e->KeysAt(p.capacity, head, 0)),
       reinterpret_cast<const float*>(base + e->ValuesAt(p.capacity, head, 0)), at, m);
  });
}

absl::StatusOr<std::string> KvCacheStore::ReadCodes(const std::string& name, int head,
                                                    int64_t tokens) const {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Entry> e, Lookup(name));
  const KvCacheShape& s = e->shape;
  TANDEM_RETURN_IF_ERROR(CheckCodesOf(name, s, head));
  absl::ReaderMutexLock lock(&e->mu);
  TANDEM_ASSIGN_OR_RETURN(const int64_t n, PrefixLocked(*e, tokens));
  std::string out;
  ReserveAdvised(&out, static_cast<size_t>(n * s.code_bytes()));  // as ReadFloats
  out.resize(static_cast<size_t>(n * s.code_bytes()));
  TANDEM_RETURN_IF_ERROR(e->ForEachRun(n, [&](const Page& p, int64_t at, int64_t m) {
    return allocator_->CopyOut(p.buffer, e->CodesAt(p.capacity, head, 0),
                               out.data() + at * s.code_bytes(),
                               static_cast<size_t>(m * s.code_bytes()));
  }));
  return out;
}

}  // namespace tandem::ml::worker

#include "ml/worker/kv_cache_store.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/worker/huge_pages.h"
#include "ml/worker/resource_name.h"
#include "ml/worker/tensor_codec.h"

namespace tandem::ml::worker {

int64_t KvCacheShape::token_bytes() const {
  return int64_t{heads} * (2 * int64_t{head_dim} * int64_t{sizeof(float)} + code_bytes());
}

// One allocation of `capacity` tokens of every head; see the header for
// the layout. Owned by its Entry, freed through the allocator.
struct KvCacheStore::Page {
  void* buffer = nullptr;
  int64_t capacity = 0;
  int64_t used = 0;  // tokens stored
};

// One cache. Its shape is immutable (read without the lock); pages and
// token count change under `mu` only.
struct KvCacheStore::Entry {
  Entry(std::string n, KvCacheShape s, KvAllocator* a) : name(std::move(n)), shape(s), alloc(a) {}
  ~Entry() {
    for (const Page& p : pages) alloc->Free(p.buffer, static_cast<size_t>(PageBytes(p.capacity)));
  }
  int64_t PageBytes(int64_t capacity) const { return capacity * shape.token_bytes(); }
  // Byte offsets in a page of `capacity` tokens.
  size_t KeysAt(int64_t cap, int head, int64_t token) const {
    return static_cast<size_t>((head * cap + token) * shape.head_dim) * sizeof(float);
  }
  size_t ValuesAt(int64_t cap, int head, int64_t token) const {
    return KeysAt(cap, shape.heads, 0) + KeysAt(cap, head, token);
  }
  size_t CodesAt(int64_t cap, int head, int64_t token) const {
    return 2 * KeysAt(cap, shape.heads, 0) +
           static_cast<size_t>((head * cap + token) * shape.code_bytes());
  }
  // fn(page, first, m) for the pages holding tokens [0, n), in order: the
  // page holds tokens [first, first + m). Stops at fn's first error.
  // REQUIRES: mu held (shared) and n <= tokens.
  absl::Status ForEachRun(int64_t n,
                          absl::FunctionRef<absl::Status(const Page& page, int64_t first,
                                                         int64_t m)>
                              fn) const ABSL_NO_THREAD_SAFETY_ANALYSIS {
    int64_t at = 0;
    for (const Page& p : pages) {
      const int64_t m = std::min(p.used, n - at);
      if (m <= 0) break;
      TANDEM_RETURN_IF_ERROR(fn(p, at, m));
      at += m;
    }
    return absl::OkStatus();
  }

  const std::string name;
  const KvCacheShape shape;
  KvAllocator* const alloc;
  mutable absl::Mutex mu;  // appends hold it alone, reads share it
  std::vector<Page> pages ABSL_GUARDED_BY(mu);
  int64_t tokens ABSL_GUARDED_BY(mu) = 0;
  int64_t capacity ABSL_GUARDED_BY(mu) = 0;
  int64_t bytes = 0;  // guarded by the store's mu_
  bool live = true;   // guarded by the store's mu_
};

namespace {

absl::Status CheckName(absl::string_view name) { return CheckResourceName("KV cache", name); }

// A key: a name, or a hex-encoded owner, '/', a name (KvCacheStore::Key).
absl::Status CheckKey(const std::string& key) {
  const size_t slash = key.find('/');
  if (slash == std::string::npos) return CheckName(key);
  const absl::string_view owner(key.data(), slash);
  const bool hex = !owner.empty() && owner.size() % 2 == 0 &&
                   owner.find_first_not_of("0123456789abcdef") == absl::string_view::npos;
  if (!hex) return absl::InvalidArgumentError("malformed KV cache owner");
  return CheckName(absl::string_view(key).substr(slash + 1));
}

absl::Status CheckShape(const KvCacheShape& s) {
  if (s.heads < 1 || s.heads > kMaxKvHeads) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache heads must be in [1, ", kMaxKvHeads, "], got ", s.heads));
  }
  if (s.head_dim < 1 || s.head_dim > kMaxKvHeadDim) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache head_dim must be in [1, ", kMaxKvHeadDim, "], got ", s.head_dim));
  }
  if (s.code_bits < 0 || s.code_bits > kMaxKvCodeBits || s.code_bits % 32 != 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache code_bits must be 0 or a multiple of 32 up to ", kMaxKvCodeBits,
                     ", got ", s.code_bits));
  }
  return absl::OkStatus();
}

absl::Status NoCache(const std::string& name) {
  return absl::NotFoundError(
      absl::StrCat("KV cache '", KvCacheStore::NameOf(name), "' does not exist"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<KvCacheStore>> KvCacheStore::Create(
    KvCacheStoreOptions options, std::unique_ptr<KvAllocator> allocator) {
  if (allocator == nullptr) return absl::InvalidArgumentError("a KV cache store needs memory");
  if (options.max_bytes < 0 || options.max_bytes_per_owner < 0) {
    return absl::InvalidArgumentError("max_bytes and max_bytes_per_owner must be >= 0");
  }
  if (options.min_page_tokens < 1 || options.max_page_tokens < options.min_page_tokens) {
    return absl::InvalidArgumentError("need 1 <= min_page_tokens <= max_page_tokens");
  }
  return std::unique_ptr<KvCacheStore>(new KvCacheStore(options, std::move(allocator)));
}

KvCacheStore::~KvCacheStore() = default;

absl::StatusOr<KvCacheSummary> KvCacheStore::CreateCache(const std::string& name,
                                                         const KvCacheShape& shape, bool replace) {
  TANDEM_RETURN_IF_ERROR(CheckKey(name));
  TANDEM_RETURN_IF_ERROR(CheckShape(shape));
  auto entry = std::make_shared<Entry>(name, shape, allocator_.get());
  absl::MutexLock lock(&mu_);
  auto it = caches_.find(name);
  if (it != caches_.end()) {
    if (!replace) {
      return absl::FailedPreconditionError(absl::StrCat(
          "KV cache '", KvCacheStore::NameOf(name), "' exists; set replace to create it again"));
    }
    it->second->live = false;
    ChargeLocked(name, -it->second->bytes);
    it->second = entry;
  } else {
    caches_.emplace(name, entry);
  }
  return Summarize(*entry);
}

absl::StatusOr<std::shared_ptr<KvCacheStore::Entry>> KvCacheStore::Lookup(
    const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = caches_.find(name);
  if (it == caches_.end()) return NoCache(name);
  return it->second;
}

std::vector<int64_t> KvCacheStore::PlanPages(const Entry& e, int64_t tokens) const {
  // e.mu is held by the caller (shared or alone).
  std::vector<int64_t> out;
  int64_t capacity = e.capacity;
  int64_t left = tokens - (e.capacity - e.tokens);
  while (left > 0) {
    const int64_t cap =
        std::clamp(std::max(capacity, left), options_.min_page_tokens, options_.max_page_tokens);
    out.push_back(cap);
    capacity += cap;
    left -= cap;
  }
  return out;
}

absl::Status KvCacheStore::FitsLocked(const std::string& key, int64_t bytes) const {
  if (bytes > options_.max_bytes - used_) {
    return absl::ResourceExhaustedError(absl::StrCat(
        "out of memory: the KV cache needs ", bytes, " more bytes, ", used_, " of the worker's ",
        options_.max_bytes, " KV cache bytes (--max_gpu_mb) are in use"));
  }
  if (options_.max_bytes_per_owner > 0) {
    const auto it = used_by_owner_.find(std::string(OwnerPrefixOf(key)));
    const int64_t mine = it == used_by_owner_.end() ? 0 : it->second;
    if (bytes > options_.max_bytes_per_owner - mine) {
      return absl::ResourceExhaustedError(absl::StrCat(
          "out of memory: the KV cache needs ", bytes, " more bytes, ", mine, " of this caller's ",
          options_.max_bytes_per_owner, " KV cache bytes (--max_gpu_mb_per_caller) are in use"));
    }
  }
  return absl::OkStatus();
}

void KvCacheStore::ChargeLocked(const std::string& key, int64_t delta) {
  used_ += delta;
  const std::string owner(OwnerPrefixOf(key));
  int64_t& mine = used_by_owner_[owner];
  mine += delta;
  if (mine == 0) used_by_owner_.erase(owner);
}

absl::Status KvCacheStore::CheckAppendFits(const std::string& name, int64_t tokens) const {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Entry> e, Lookup(name));
  int64_t bytes = 0;
  {
    absl::ReaderMutexLock lock(&e->mu);
    for (int64_t cap : PlanPages(*e, tokens)) bytes += e->PageBytes(cap);
  }
  absl::MutexLock lock(&mu_);
  return FitsLocked(name, bytes);
}

absl::StatusOr<KvCacheSummary> KvCacheStore::Append(const std::string& name,
                                                    const kernels::Tensor& keys,
                                                    const kernels::Tensor& values,
                                                    absl::string_view codes) {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Entry> e, Lookup(name));
  const KvCacheShape& s = e->shape;
  if (keys.rank() != 3 || keys.dim(0) != s.heads || keys.dim(1) < 1 || keys.dim(2) != s.head_dim) {
    return absl::InvalidArgumentError(absl::StrCat(
        "keys must be (heads = ", s.heads, ", n >= 1, head_dim = ", s.head_dim, ") for KV cache '",
        KvCacheStore::NameOf(name), "', got ", keys.ShapeString()));
  }
  if (values.shape() != keys.shape()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "values ", values.ShapeString(), " must have the keys' shape ", keys.ShapeString()));
  }
  const int64_t n = keys.dim(1);
  if (static_cast<int64_t>(codes.size()) != s.heads * n * s.code_bytes()) {
    return absl::InvalidArgumentError(
        absl::StrCat("KV cache '", KvCacheStore::NameOf(name), "' takes ", s.code_bytes(),
                     " code bytes per token and head (", s.heads * n * s.code_bytes(), " for ", n,
                     " tokens), got ", codes.size()));
  }
  if (!AllFinite(keys.data()) || !AllFinite(values.data())) {
    return absl::InvalidArgumentError("KV cache keys and values must be finite");
  }
  absl::MutexLock entry_lock(&e->mu);
  // Budget first: nothing is allocated or changed unless every page fits.
  const std::vector<int64_t> plan = PlanPages(*e, n);
  int64_t added = 0;
  for (int64_t cap : plan) added += e->PageBytes(cap);
  {
    absl::MutexLock lock(&mu_);
    if (!e->live) return NoCache(name);
    TANDEM_RETURN_IF_ERROR(FitsLocked(name, added));
    ChargeLocked(name, added);
    e->bytes += added;
  }
  std::vector<Page> fresh;
  auto release = [&](absl::Status why) {
    for (const Page& p : fresh)
      allocator_->Free(p.buffer, static_cast<size_t>(e->PageBytes(p.capacity)));
    absl::MutexLock lock(&mu_);
    e->bytes -= added;
    if (e->live) ChargeLocked(name, -added);
    return why;
  };
  for (int64_t cap : plan) {
    absl::StatusOr<void*> buffer = allocator_->Allocate(static_cast<size_t>(e->PageBytes(cap)));
    if (!buffer.ok()) return release(buffer.status());
    fresh.push_back({*buffer, cap, 0});
  }
  // Copy into the last page's free tail, then the new pages: one CopyIn
  // per head and part (per page), none of the tokens held moves.
  const size_t first_fresh = e->pages.size();
  e->pages.insert(e->pages.end(), fresh.begin(), fresh.end());
  size_t page = first_fresh;
  while (page > 0 && e->pages[page - 1].used < e->pages[page - 1].capacity) --page;
  int64_t done = 0;
  absl::Status copied = absl::OkStatus();
  for (; done < n && copied.ok(); ++page) {
    Page& p = e->pages[page];
    const int64_t m = std::min(n - done, p.capacity - p.used);
    if (m <= 0) continue;
    const size_t row = static_cast<size_t>(s.head_dim) * sizeof(float);
    for (int h = 0; h < s.heads && copied.ok(); ++h) {
      const size_t src = static_cast<size_t>((h * n + done) * s.head_dim);
      copied.Update(allocator_->CopyIn(p.buffer, e->KeysAt(p.capacity, h, p.used), keys.ptr() + src,
                                       m * row));
      copied.Update(allocator_->CopyIn(p.buffer, e->ValuesAt(p.capacity, h, p.used),
                                       values.ptr() + src, m * row));
      if (s.code_bits > 0) {
        copied.Update(
            allocator_->CopyIn(p.buffer, e->CodesAt(p.capacity, h, p.used),
                               codes.data() + static_cast<size_t>((h * n + done) * s.code_bytes()),
                               static_cast<size_t>(m * s.code_bytes())));
      }
    }
    p.used += m;
    done += m;
  }
  if (!copied.ok()) {
    // A device error: roll the cache back to what it held.
    e->pages.resize(first_fresh);
    int64_t left = e->tokens;
    for (Page& p : e->pages) {
      p.used = std::min(left, p.capacity);
      left -= p.used;
    }
    return release(copied);
  }
  e->tokens += n;
  for (int64_t cap : plan) e->capacity += cap;
  absl::MutexLock lock(&mu_);
  if (!e->live) return NoCache(name);  // dropped while appending: freed with e
  return Summarize(*e);
}

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

absl::StatusOr<int64_t> KvCacheStore::Drop(const std::string& name) {
  absl::MutexLock lock(&mu_);
  auto it = caches_.find(name);
  if (it == caches_.end()) return NoCache(name);
  // The pages go with the last reference (an append or read in flight).
  it->second->live = false;
  const int64_t bytes = it->second->bytes;
  ChargeLocked(name, -bytes);
  caches_.erase(it);
  return bytes;
}

KvCacheSummary KvCacheStore::Summarize(const Entry& e) const {
  // Callers hold mu_; tokens and capacity are read racily for List (a
  // snapshot) unless the caller also holds e.mu.
  KvCacheSummary s;
  s.name = e.name;
  s.shape = e.shape;
  s.tokens = e.tokens;
  s.capacity_tokens = e.capacity;
  s.bytes = e.bytes;
  s.backend = std::string(allocator_->backend());
  return s;
}

absl::StatusOr<KvCacheSummary> KvCacheStore::Find(const std::string& name) const {
  TANDEM_ASSIGN_OR_RETURN(std::shared_ptr<Entry> e, Lookup(name));
  absl::ReaderMutexLock entry_lock(&e->mu);
  absl::MutexLock lock(&mu_);
  return Summarize(*e);
}

std::vector<KvCacheSummary> KvCacheStore::List() const {
  std::vector<std::shared_ptr<Entry>> entries;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [name, e] : caches_) entries.push_back(e);
  }
  std::vector<KvCacheSummary> out;
  for (const auto& e : entries) {
    absl::ReaderMutexLock entry_lock(&e->mu);
    absl::MutexLock lock(&mu_);
    out.push_back(Summarize(*e));
  }
  return out;
}

int64_t KvCacheStore::used_bytes() const {
  absl::MutexLock lock(&mu_);
  return used_;
}

std::string KvCacheStore::Key(absl::string_view owner, absl::string_view name) {
  // A name holding '/' could otherwise spell another owner's key: it gets
  // a key no cache can have (CheckKey refuses an empty owner part).
  if (name.find('/') != absl::string_view::npos) return absl::StrCat("/", name);
  if (owner.empty()) return std::string(name);
  return absl::StrCat(absl::BytesToHexString(owner), "/", name);
}

absl::string_view KvCacheStore::NameOf(absl::string_view key) {
  const size_t slash = key.find('/');
  return slash == absl::string_view::npos ? key : key.substr(slash + 1);
}

absl::string_view KvCacheStore::OwnerPrefixOf(absl::string_view key) {
  const size_t slash = key.find('/');
  return slash == absl::string_view::npos ? absl::string_view() : key.substr(0, slash + 1);
}

}  // namespace tandem::ml::worker

#include "ml/worker/kv_cache_store.h"

#include <algorithm>
#include <cstring>
#include <utility>

#include "absl/functional/function_ref.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "base/status_macros.h"
#include "ml/worker/kv_cache_entry.h"
#include "ml/worker/resource_name.h"
#include "ml/worker/tensor_codec.h"

namespace tandem::ml::worker {

int64_t KvCacheShape::token_bytes() const {
  return int64_t{heads} * (2 * int64_t{head_dim} * int64_t{sizeof(float)} + code_bytes());
}

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

// libFuzzer target for the SparseKeySet parser and validator. Built only with
// -DTANDEM_BUILD_FUZZERS=ON and clang (see bench/crypto.md). Any input must
// yield OK or INVALID_ARGUMENT; accepted inputs are then evaluated.
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <vector>

#include "absl/strings/string_view.h"
#include "crypto/dpf/key_validator.h"
#include "crypto/dpf/sparse_dpf.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const tandem::crypto::SparseDpf* dpf =
      new tandem::crypto::SparseDpf(tandem::crypto::SparseDpf::Create(96, 4, 3, 64).value());
  auto parsed = tandem::crypto::ParseSparseKeySet(
      absl::string_view(reinterpret_cast<const char*>(data), size), dpf->Shape());
  if (!parsed.ok()) {
    if (parsed.status().code() != absl::StatusCode::kInvalidArgument) std::abort();
    return 0;
  }
  tandem::crypto::SparseDpfScratch scratch;
  std::vector<uint64_t> acc(dpf->dimension());
  if (!dpf->EvaluateAndAccumulate(*parsed, absl::MakeSpan(acc), &scratch).ok()) std::abort();
  return 0;
}

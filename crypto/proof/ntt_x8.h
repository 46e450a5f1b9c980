// The transforms of crypto/proof/ntt.h eight butterflies at a time in the
// lanes of an AVX-512 register (crypto/proof/goldilocks_lanes.h, namespace
// x8), for builds that target AVX-512F; NttDomain dispatches to them for
// n >= 16. Internal to crypto/proof: the results are bit for bit those of
// NttDomain's portable transforms (ntt_test.cc), relaxed outputs included.
// Thread-compatible: pure functions of their arguments.
#ifndef TANDEM_CRYPTO_PROOF_NTT_X8_H_
#define TANDEM_CRYPTO_PROOF_NTT_X8_H_

#include <cstddef>
#include <cstdint>

namespace tandem::crypto::proof::internal {

// True when the build has the functions below.
bool HaveNttX8();

// Decimation in time (CoefficientsToValuesPortable's butterflies) over n
// values: in -> out (in == out allowed), each input first multiplied by
// scale[j] (gl::Mul) when scale is not null. REQUIRES: HaveNttX8(), n >= 16
// a power of two, roots = the domain's stage roots (ntt.cc StageRoots).
void DitX8(const uint64_t* in, const uint64_t* scale, uint64_t* out, size_t n,
           const uint64_t* roots);

// Decimation in frequency (ValuesToCoefficientsPortable's butterflies) over
// n values in place, roots = the inverse stage roots. Same REQUIRES.
void DifX8(uint64_t* x, size_t n, const uint64_t* roots);

}  // namespace tandem::crypto::proof::internal

#endif  // TANDEM_CRYPTO_PROOF_NTT_X8_H_

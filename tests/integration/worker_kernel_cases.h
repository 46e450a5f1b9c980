// One small, valid, deterministic request per kernel that tandem-worker
// serves (ml/worker/*_kernels.cc), for worker_all_kernels_test. A kernel
// added to the registry without an entry here makes that test fail.
// Inputs come from fixed seeds (RandomTensor) or literal values; every
// request asks for the "cpu" backend so that the wire answer and the
// in-process reference run the same code path. Test-only; thread-safe (pure
// functions).
#ifndef TANDEM_TESTS_INTEGRATION_WORKER_KERNEL_CASES_H_
#define TANDEM_TESTS_INTEGRATION_WORKER_KERNEL_CASES_H_

#include <optional>
#include <string>
#include <vector>

#include "proto/worker.pb.h"

namespace tandem::testing {

struct KernelCase {
  proto::KernelRequest request;  // request.kernel() is the registry name
  // Float outputs must satisfy |wire - reference| <= rtol * |reference| + atol;
  // integer and byte outputs must be equal. Both sides run the same CPU code
  // in the same build, so the defaults are tight.
  double rtol = 1e-6;
  double atol = 1e-7;
  // A model the request names (request.model), with its tensors' data: the
  // test loads it on the worker (LoadModel) and into the reference's
  // ModelStore before any case runs. Names are unique across cases.
  std::optional<proto::ModelHeader> model;
};

// Every case, in no particular order; names are unique.
std::vector<KernelCase> AllKernelCases();

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_INTEGRATION_WORKER_KERNEL_CASES_H_

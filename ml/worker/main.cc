// tandem-worker: serves the paper kernels (ml/kernels) over gRPC.
//
//   tandem-worker --listen=127.0.0.1:0 --max_concurrency=4 [--metrics_listen=127.0.0.1:9103]
//                 [--max_model_mb=4096] [--model_dir=/srv/tandem/models] [--max_gpu_mb=2048]
//                 [--max_gpu_mb_per_caller=0]
//   tandem-worker --listen=0.0.0.0:7100 --tls_cert=worker.pem --tls_key=worker.key
//                 --tls_ca=worker-roots.pem --callers=coordinator.tandem
//                 --model_writers=coordinator.tandem
//
// Plaintext only on a loopback --listen; with a certificate the listener is
// mutual TLS and only the identities named in --callers / --model_writers
// may call it (LoadModel, UnloadModel and in-place training only the
// writers): PERMISSION_DENIED for any other certificate of the CA.
// Models (LoadModel ...) are held in this process's memory up to
// --max_model_mb in total; checkpoints are read only from --model_dir.
// KV caches (CreateKvCache ...) are held up to --max_gpu_mb in total: in
// host memory on this build (backend "cpu"); a CUDA allocator would put
// them in device memory under the same flag.
// Prints "tandem-worker listening on HOST:PORT (backend: ...)" on stdout once
// serving (PORT is the bound one, useful with port 0), then runs until
// SIGTERM or SIGINT and shuts down gracefully.
#include <grpcpp/grpcpp.h>
#include <prometheus/registry.h>
#include <signal.h>

#include <cstdio>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_split.h"
#include "base/clock.h"
#include "base/grpc_credentials.h"
#include "base/large_buffers.h"
#include "base/logging.h"
#include "base/metrics_server.h"
#include "base/shutdown_signals.h"
#include "ml/kernels/backend.h"
#include "ml/worker/builtin_kernels.h"
#include "ml/worker/kernel_registry.h"
#include "ml/worker/kv_allocator.h"
#include "ml/worker/kv_cache_store.h"
#include "ml/worker/model_store.h"
#include "ml/worker/worker_service.h"

ABSL_FLAG(std::string, listen, "127.0.0.1:0", "host:port to listen on (port 0 = any free port)");
ABSL_FLAG(int, max_concurrency, 4, "simultaneous Run calls before RESOURCE_EXHAUSTED");
ABSL_FLAG(int, max_message_mb, 64, "gRPC message size cap in MiB (receive and send)");
ABSL_FLAG(int, max_tensor_melements, 64, "per-input tensor cap in millions of elements");
ABSL_FLAG(int, verbosity, 0, "TANDEM_VLOG level");
ABSL_FLAG(int64_t, max_model_mb, 4096,
          "memory budget of all loaded models (weights + optimizer state) in MiB");
ABSL_FLAG(int64_t, max_gpu_mb, 2048,
          "memory budget of all KV caches (CreateKvCache, AppendKvCache) in MiB; on a "
          "machine without a device the caches live in host memory under the same budget");
ABSL_FLAG(int64_t, max_gpu_mb_per_caller, 0,
          "memory budget of one caller's KV caches in MiB (each cache belongs to the TLS "
          "identity that created it), so that no caller can take all of --max_gpu_mb; 0 = "
          "--max_gpu_mb alone");
ABSL_FLAG(std::string, model_dir, "",
          "directory LoadModel may read checkpoints from (empty = checkpoints refused)");
ABSL_FLAG(std::string, tls_cert, "", "PEM certificate chain of this worker (TLS on)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, tls_ca, "", "PEM roots verifying the callers' client certificates");
ABSL_FLAG(std::string, callers, "",
          "comma-separated TLS identities allowed to call (required with TLS)");
ABSL_FLAG(std::string, model_writers, "",
          "comma-separated TLS identities allowed LoadModel/UnloadModel/in-place training");
ABSL_FLAG(int64_t, max_inflight_mb, 2048,
          "streamed request bytes (RunStream, LoadModel) all calls may hold at once, MiB");
ABSL_FLAG(std::string, metrics_listen, "",
          "Prometheus /metrics (calls by method and code) on this IPv4 host:port, plain HTTP");

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  tandem::SetVerbosity(absl::GetFlag(FLAGS_verbosity));

  const tandem::ShutdownSignals signals;  // before any thread starts
  // Streams of large tensors at memory speed, not page-fault speed: glibc
  // keeps large freed buffers mapped (base/large_buffers.h; measured: a
  // plain 64 MiB gRPC upload on loopback at 0.18 GB/s untuned, 1.5 GB/s
  // tuned). Before any thread starts too.
  if (!tandem::TuneAllocatorForLargeBuffers()) {
    TANDEM_LOG(WARNING) << "malloc tuning for large streams refused; streams will be slower";
  }

  const int melements = absl::GetFlag(FLAGS_max_tensor_melements);
  if (melements < 1 || melements > 2047) {
    std::cerr << "--max_tensor_melements must be in [1, 2047]\n";
    return 2;
  }
  tandem::ml::worker::KernelRegistry registry(
      {.max_tensor_elements = int64_t{melements} * 1000 * 1000});
  if (absl::Status s = tandem::ml::worker::RegisterBuiltinKernels(&registry); !s.ok()) {
    std::cerr << "kernel registration failed: " << s << "\n";
    return 1;
  }
  const int64_t model_mb = absl::GetFlag(FLAGS_max_model_mb);
  if (model_mb < 0 || model_mb > (int64_t{1} << 30)) {
    std::cerr << "--max_model_mb must be in [0, 2^30]\n";
    return 2;
  }
  tandem::ml::worker::ModelStore models(model_mb << 20);
  const int64_t cache_mb = absl::GetFlag(FLAGS_max_gpu_mb);
  const int64_t caller_mb = absl::GetFlag(FLAGS_max_gpu_mb_per_caller);
  if (cache_mb < 0 || cache_mb > (int64_t{1} << 30) || caller_mb < 0 ||
      caller_mb > (int64_t{1} << 30)) {
    std::cerr << "--max_gpu_mb and --max_gpu_mb_per_caller must be in [0, 2^30]\n";
    return 2;
  }
  // Host pages until the CUDA allocator exists (ml/worker/kv_allocator.h).
  auto caches = tandem::ml::worker::KvCacheStore::Create(
      {.max_bytes = cache_mb << 20, .max_bytes_per_owner = caller_mb << 20},
      std::make_unique<tandem::ml::worker::HostKvAllocator>());
  if (!caches.ok()) {
    std::cerr << "tandem-worker: " << caches.status() << "\n";
    return 1;
  }
  tandem::ml::worker::WorkerOptions options;
  options.model_dir = absl::GetFlag(FLAGS_model_dir);
  options.max_concurrency = absl::GetFlag(FLAGS_max_concurrency);
  options.max_message_bytes = int64_t{absl::GetFlag(FLAGS_max_message_mb)} << 20;
  options.max_inflight_bytes = absl::GetFlag(FLAGS_max_inflight_mb) << 20;
  if (!absl::GetFlag(FLAGS_tls_cert).empty() || !absl::GetFlag(FLAGS_tls_key).empty()) {
    options.tls = {.insecure_plaintext = false,
                   .cert_chain_path = absl::GetFlag(FLAGS_tls_cert),
                   .private_key_path = absl::GetFlag(FLAGS_tls_key),
                   .root_ca_path = absl::GetFlag(FLAGS_tls_ca),
                   .require_client_cert = true};
  }
  options.callers = absl::StrSplit(absl::GetFlag(FLAGS_callers), ',', absl::SkipEmpty());
  options.model_writers =
      absl::StrSplit(absl::GetFlag(FLAGS_model_writers), ',', absl::SkipEmpty());
  const std::string listen = absl::GetFlag(FLAGS_listen);
  // Declared before the worker: outlives the listener that reads it.
  tandem::TlsReloader tls_reloader;
  options.tls.reloader = &tls_reloader;
  std::unique_ptr<tandem::MetricsServer> metrics;
  std::shared_ptr<prometheus::Registry> rpc_metrics;
  if (const std::string m = absl::GetFlag(FLAGS_metrics_listen); !m.empty()) {
    auto started = tandem::MetricsServer::Start(m);
    if (!started.ok()) {
      std::cerr << "tandem-worker: " << started.status() << "\n";
      return 1;
    }
    metrics = *std::move(started);
    rpc_metrics = std::make_shared<prometheus::Registry>();
    metrics->Register(rpc_metrics);
    std::cout << "metrics on " << metrics->port() << std::endl;
  }
  auto worker = tandem::ml::worker::StartWorker(listen, &registry, tandem::RealClock::Default(),
                                                options, rpc_metrics, &models, caches->get());
  if (!worker.ok()) {
    std::cerr << "tandem-worker: " << worker.status() << "\n";
    return absl::IsInvalidArgument(worker.status()) ? 2 : 1;
  }
  const std::string host = listen.substr(0, listen.rfind(':'));
  std::cout << "tandem-worker listening on " << host << ":" << (*worker)->port
            << " (backend: " << tandem::ml::kernels::ActiveBackendDescription() << ")" << std::endl;

  const int sig = signals.Wait([&] {
    const absl::Status s = tls_reloader.Reload();
    TANDEM_LOG(INFO) << "SIGHUP: certificates " << (s.ok() ? "reloaded" : s.ToString());
  });
  TANDEM_LOG(INFO) << "signal " << sig << ", shutting down";
  worker->reset();
  return 0;
}

// The one connection to a tandem-worker that tandem.worker.Client's two
// binding objects share (python/tandem/worker.py): _WorkerClient (kernels,
// models) and _WorkerKvClient (KV caches) both call through it, so a Client
// holds one channel (one TLS session, one client identity: the owner of its
// KV caches) and close() closes both. Python sees it as _WorkerChannel.
//
// Thread safety: calls may run from several threads at once (gRPC stubs are
// thread-safe); Close() must not race a call.
#ifndef TANDEM_PYTHON_SRC_WORKER_CHANNEL_H_
#define TANDEM_PYTHON_SRC_WORKER_CHANNEL_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>

#include "base/grpc_credentials.h"
#include "base/grpc_status.h"
#include "proto/worker.grpc.pb.h"
#include "python/src/common.h"

namespace tandem::python {

class WorkerChannel {
 public:
  static constexpr int kMaxMessageBytes = 64 << 20;  // the worker's default cap

  // TLS when tls_root_ca is set (server_name overrides the name checked),
  // mutual TLS with tls_cert and tls_key. ValueError for a non-positive
  // timeout or an inconsistent TLS setting; the credentials' errors raise.
  WorkerChannel(const std::string& address, const std::string& tls_root_ca,
                const std::string& server_name, double timeout_s, const std::string& tls_cert,
                const std::string& tls_key)
      : timeout_s_(timeout_s) {
    if (!(timeout_s > 0)) throw py::value_error("timeout_s must be positive");
    if (tls_cert.empty() != tls_key.empty()) {
      throw py::value_error("tls_cert and tls_key go together");
    }
    if (!tls_cert.empty() && tls_root_ca.empty()) {
      throw py::value_error("a client certificate needs tls_root_ca (TLS)");
    }
    TlsFiles tls;
    tls.insecure_plaintext = tls_root_ca.empty();
    tls.root_ca_path = tls_root_ca;
    tls.cert_chain_path = tls_cert;  // mutual TLS: the worker's --callers name it
    tls.private_key_path = tls_key;
    auto creds = ValueOrThrow(MakeChannelCredentials(tls));
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(kMaxMessageBytes);
    args.SetMaxSendMessageSize(kMaxMessageBytes);
    if (!server_name.empty()) args.SetSslTargetNameOverride(server_name);
    stub_ = proto::Worker::NewStub(grpc::CreateCustomChannel(address, creds, args));
  }

  // Drops the channel (a worker shutting down waits for open channels).
  // Not while calls are in flight.
  void Close() { stub_.reset(); }

  // FailedPreconditionError once closed.
  void CheckOpen() const {
    if (stub_ == nullptr) ThrowStatus(absl::FailedPreconditionError("the client is closed"));
  }
  // REQUIRES: open (CheckOpen).
  proto::Worker::Stub* stub() const { return stub_.get(); }
  void SetDeadline(grpc::ClientContext* ctx) const {
    ctx->set_deadline(std::chrono::system_clock::now() +
                      std::chrono::microseconds(static_cast<int64_t>(timeout_s_ * 1e6)));
  }
  // One unary RPC, rpc(context) -> grpc::Status, with the GIL released;
  // raises its error.
  template <typename Rpc>
  void Call(Rpc rpc) {
    CheckOpen();
    grpc::Status s;
    {
      py::gil_scoped_release release;
      grpc::ClientContext ctx;
      SetDeadline(&ctx);
      s = rpc(&ctx);
    }
    OkOrThrow(FromGrpcStatus(s));
  }

 private:
  const double timeout_s_;
  std::unique_ptr<proto::Worker::Stub> stub_;
};

}  // namespace tandem::python

#endif  // TANDEM_PYTHON_SRC_WORKER_CHANNEL_H_

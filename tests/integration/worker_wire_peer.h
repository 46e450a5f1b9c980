// The peer of worker_wire_benchmark (issue 38 item 5): a plain gRPC service
// on loopback that only moves bytes, the floor any tensor protocol over gRPC
// pays. It borrows the Worker service's streaming shapes: LoadModel counts
// the data bytes of the chunks it receives (ModelInfo.bytes); ReadModel
// streams `payload_bytes` bytes in chunks of ReadModelRequest.model.version
// bytes (a bench-only reading of that field). No validation, no reassembly.
// Benchmark-only, header-only. Thread-safe (gRPC sync server threads; the
// payload is read-only once started).
#ifndef TANDEM_TESTS_INTEGRATION_WORKER_WIRE_PEER_H_
#define TANDEM_TESTS_INTEGRATION_WORKER_WIRE_PEER_H_

#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <cstdint>
#include <memory>
#include <string>

#include "proto/worker.grpc.pb.h"

namespace tandem::testing {

class WirePeer final : public proto::Worker::Service {
 public:
  // Listens on 127.0.0.1 (any free port) with `max_message_bytes` as the
  // message cap each way. Null when the server did not start.
  static std::unique_ptr<WirePeer> Start(size_t payload_bytes, int max_message_bytes) {
    std::unique_ptr<WirePeer> peer(new WirePeer(payload_bytes));
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.SetMaxReceiveMessageSize(max_message_bytes);
    b.SetMaxSendMessageSize(max_message_bytes);
    b.RegisterService(peer.get());
    peer->server_ = b.BuildAndStart();
    if (peer->server_ == nullptr || port == 0) return nullptr;
    grpc::ChannelArguments args;
    args.SetMaxReceiveMessageSize(max_message_bytes);
    args.SetMaxSendMessageSize(max_message_bytes);
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    peer->stub_ = proto::Worker::NewStub(grpc::CreateCustomChannel(
        "127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials(), args));
    return peer;
  }
  ~WirePeer() override {
    if (server_ != nullptr) server_->Shutdown();
  }

  proto::Worker::Stub* stub() const { return stub_.get(); }

  grpc::Status LoadModel(grpc::ServerContext*, grpc::ServerReader<proto::WorkerModelChunk>* reader,
                         proto::ModelInfo* info) override {
    proto::WorkerModelChunk c;
    int64_t n = 0;
    while (reader->Read(&c)) n += static_cast<int64_t>(c.data().size());
    info->set_bytes(n);
    return grpc::Status::OK;
  }

  grpc::Status ReadModel(grpc::ServerContext*, const proto::ReadModelRequest* req,
                         grpc::ServerWriter<proto::WorkerModelChunk>* writer) override {
    const size_t chunk = std::max<uint64_t>(req->model().version(), 1);
    proto::WorkerModelChunk c;
    for (size_t off = 0; off < payload_.size(); off += chunk) {
      c.set_data(payload_.data() + off, std::min(chunk, payload_.size() - off));
      if (!writer->Write(c)) break;
    }
    return grpc::Status::OK;
  }

 private:
  explicit WirePeer(size_t payload_bytes) : payload_(payload_bytes, '\x5a') {}

  const std::string payload_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<proto::Worker::Stub> stub_;
};

}  // namespace tandem::testing

#endif  // TANDEM_TESTS_INTEGRATION_WORKER_WIRE_PEER_H_

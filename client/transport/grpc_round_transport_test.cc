// GrpcRoundTransport against an in-process fake coordinator: the model
// download's size bound holds before anything is buffered.
#include "client/transport/grpc_round_transport.h"

#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server.h>
#include <grpcpp/server_builder.h>
#include <openssl/evp.h>

#include "absl/strings/str_cat.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::client {
namespace {

using ::tandem::testing::StatusIs;

// Streams `chunks` for every DownloadModel call.
class FakeCoordinator : public proto::Coordinator::Service {
 public:
  grpc::Status DownloadModel(grpc::ServerContext*, const proto::DownloadModelRequest*,
                             grpc::ServerWriter<proto::ModelChunk>* writer) override {
    for (const proto::ModelChunk& c : chunks) {
      if (!writer->Write(c)) break;
    }
    return grpc::Status::OK;
  }
  std::vector<proto::ModelChunk> chunks;
};

class GrpcRoundTransportTest : public ::testing::Test {
 protected:
  void SetUp() override {
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
    b.RegisterService(&service_);
    server_ = b.BuildAndStart();
    ASSERT_NE(server_, nullptr);
    address_ = absl::StrCat("127.0.0.1:", port);
  }
  void TearDown() override {
    if (server_ != nullptr) server_->Shutdown();
  }
  std::unique_ptr<GrpcRoundTransport> Transport(uint64_t max_model_bytes) {
    RetryPolicy policy;
    policy.call_deadline = absl::Seconds(10);
    return std::make_unique<GrpcRoundTransport>(address_, grpc::InsecureChannelCredentials(),
                                                RealClock::Default(), policy, max_model_bytes);
  }

  FakeCoordinator service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
};

proto::ModelChunk Chunk(uint64_t offset, uint64_t total, const std::string& data) {
  proto::ModelChunk c;
  c.set_model_version(1);
  c.set_offset(offset);
  c.set_total_bytes(total);
  c.set_data(data);
  return c;
}

std::string Sha256(const std::string& s) {
  unsigned char d[EVP_MAX_MD_SIZE];
  unsigned int len = 0;
  EVP_Digest(s.data(), s.size(), d, &len, EVP_sha256(), nullptr);
  return std::string(reinterpret_cast<const char*>(d), len);
}

TEST_F(GrpcRoundTransportTest, DownloadsAModelWithinTheBound) {
  const std::string model(3000, 'm');
  service_.chunks = {Chunk(0, 3000, model.substr(0, 2000)), Chunk(2000, 3000, model.substr(2000))};
  service_.chunks.back().set_sha256(Sha256(model));
  proto::DownloadModelRequest req;
  req.set_model_version(1);
  TANDEM_ASSERT_OK_AND_ASSIGN(std::string got, Transport(4096)->DownloadModel(req));
  EXPECT_EQ(got, model);
}

TEST_F(GrpcRoundTransportTest, AnAnnouncedOversizedModelIsRefusedBeforeBuffering) {
  // 1 TiB announced in the first chunk: refused at once, whatever follows.
  service_.chunks = {Chunk(0, uint64_t{1} << 40, "x")};
  proto::DownloadModelRequest req;
  req.set_model_version(1);
  EXPECT_THAT(
      Transport(uint64_t{256} << 20)->DownloadModel(req).status(),
      StatusIs(absl::StatusCode::kInvalidArgument, ::testing::HasSubstr("max_model_bytes")));
  // Just over a small bound.
  service_.chunks = {Chunk(0, 4097, std::string(10, 'x'))};
  EXPECT_THAT(Transport(4096)->DownloadModel(req).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Chunks that overrun what was announced: DATA_LOSS, as before.
  service_.chunks = {Chunk(0, 10, std::string(11, 'x'))};
  EXPECT_THAT(Transport(4096)->DownloadModel(req).status(), StatusIs(absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace tandem::client

// The Coordinator gRPC service over loopback: chunked download of a model
// larger than gRPC's 4 MB default message limit, status codes of malformed
// requests on the wire (an UploadDone without a ticket is UNAUTHENTICATED),
// and the /metrics endpoint.
#include "server/service/coordinator_service.h"

#include <arpa/inet.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>

#include <grpcpp/create_channel.h>
#include <grpcpp/server_builder.h>
#include <openssl/evp.h>

#include "base/testing/status_matchers.h"
#include "gtest/gtest.h"
#include "base/grpc_metrics.h"
#include "base/metrics_server.h"
#include "server/service/coordinator_metrics.h"

namespace tandem::server {
namespace {

class IdleAggregator : public AggregatorClient {
 public:
  absl::StatusOr<proto::OpenRoundResponse> OpenRound(const proto::RoundParameters&) override {
    return proto::OpenRoundResponse();
  }
  absl::StatusOr<proto::FinalizeResponse> Finalize(const proto::FinalizeRequest&) override {
    return absl::UnavailableError("not in this test");
  }
};

std::string HttpGet(int port, const std::string& path) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  inet_pton(AF_INET, "127.0.0.1", &a.sin_addr);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) return "";
  const std::string req = "GET " + path + " HTTP/1.0\r\n\r\n";
  send(fd, req.data(), req.size(), 0);
  std::string out;
  char buf[4096];
  for (ssize_t n; (n = recv(fd, buf, sizeof(buf), 0)) > 0;) out.append(buf, static_cast<size_t>(n));
  close(fd);
  return out;
}

TEST(CoordinatorService, StreamsAModelLargerThanOneMessageAndValidatesRequests) {
  const auto dir = std::filesystem::path(::testing::TempDir()) / "coordinator_service";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  CoordinatorOptions o;
  o.task_id = "big";
  o.model.set_input_dim(4);
  o.model.add_hidden(1024);
  o.model.add_hidden(1024);  // ~1.05 M floats = 4.2 MB serialized
  o.model.set_num_classes(2);
  o.task.secure_sum.block_size = 1024;
  o.task.secure_sum.log_blocks_per_group = 4;
  ml::Dataset eval;
  eval.num_classes = 2;
  eval.features = ml::Matrix::Zero(2, 4);
  eval.shape = {1, 1, 4};
  eval.labels = {0, 1};
  IdleAggregator leader, helper;
  FakeClock clock;
  auto random = DeterministicRandom::FromSeed(1);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto store, CoordinatorStore::Open((dir / "c.db").string()));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto device_store, DeviceStore::Open((dir / "devices.db").string()));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto devices, DeviceRegistry::Create({}, device_store.get(), &clock));
  o.devices = devices.get();
  TANDEM_ASSERT_OK_AND_ASSIGN(auto ticket_key, crypto::Ed25519SigningKey::Generate(random.get()));
  TANDEM_ASSERT_OK_AND_ASSIGN(auto c, Coordinator::Create(o, ticket_key, eval, &leader, &helper,
                                                          std::move(store), &clock, random.get()));
  // A host of this one task, without a registry (no task API).
  TANDEM_ASSERT_OK_AND_ASSIGN(auto host,
                              TaskHost::Create({.devices = devices.get(), .clock = &clock}));
  TaskParts parts;
  parts.coordinator = std::move(c);
  TANDEM_ASSERT_OK(host->Adopt(std::move(parts), {}));
  CoordinatorService service(host.get());
  int port = 0;
  grpc::ServerBuilder builder;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  auto rpc_registry = std::make_shared<prometheus::Registry>();  // the calls, counted
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> counting;
  counting.push_back(MakeRpcMetricsInterceptorFactory(rpc_registry));
  builder.experimental().SetInterceptorCreators(std::move(counting));
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(port, 0);
  // A stub with gRPC's default limits (4 MB receive).
  auto stub = proto::Coordinator::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));

  grpc::ClientContext ctx;
  proto::DownloadModelRequest req;
  req.set_task_id("big");
  req.set_model_version(0);
  auto reader = stub->DownloadModel(&ctx, req);
  std::string assembled, digest;
  int chunks = 0;
  for (proto::ModelChunk chunk; reader->Read(&chunk); ++chunks) {
    EXPECT_EQ(chunk.offset(), assembled.size());
    EXPECT_LE(chunk.data().size(), size_t{1} << 20);
    assembled += chunk.data();
    if (!chunk.sha256().empty()) digest = chunk.sha256();
  }
  ASSERT_TRUE(reader->Finish().ok());
  EXPECT_GT(assembled.size(), size_t{4} << 20);
  EXPECT_GE(chunks, 5);
  unsigned char want[32];
  unsigned int len = 0;
  EVP_Digest(assembled.data(), assembled.size(), want, &len, EVP_sha256(), nullptr);
  EXPECT_EQ(digest, std::string(reinterpret_cast<char*>(want), 32));
  proto::Model m;
  ASSERT_TRUE(m.ParseFromString(assembled));
  EXPECT_EQ(m.layers(0).data().size(), static_cast<size_t>(m.layers(0).shape(0)) * 4);

  // Malformed requests: the codes cross the wire unchanged.
  {
    grpc::ClientContext cc;
    proto::CheckInRequest bad;  // no device proof
    bad.set_client_id("spaces are not allowed");
    proto::CheckInResponse r;
    EXPECT_EQ(stub->CheckIn(&cc, bad, &r).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext cc;
    proto::UploadDoneRequest bad;
    bad.set_client_id("a");
    bad.set_task_id("big");
    bad.set_report_id("xx");
    proto::UploadDoneResponse r;
    EXPECT_EQ(stub->UploadDone(&cc, bad, &r).error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  }
  {
    grpc::ClientContext cc;
    proto::UploadDoneRequest unticketed;
    unticketed.set_client_id("a");
    unticketed.set_task_id("big");
    unticketed.set_round_id(1);
    unticketed.set_report_id(std::string(16, 'r'));
    proto::UploadDoneResponse r;
    EXPECT_EQ(stub->UploadDone(&cc, unticketed, &r).error_code(),
              grpc::StatusCode::UNAUTHENTICATED);
  }
  {
    grpc::ClientContext cc;
    proto::DownloadModelRequest old;
    old.set_task_id("big");
    old.set_model_version(3);
    auto rd = stub->DownloadModel(&cc, old);
    proto::ModelChunk chunk;
    EXPECT_FALSE(rd->Read(&chunk));
    EXPECT_EQ(rd->Finish().error_code(), grpc::StatusCode::NOT_FOUND);
  }
  // Downloaded bytes are counted; /metrics serves them.
  TANDEM_ASSERT_OK_AND_ASSIGN(auto metrics, MetricsServer::Start("127.0.0.1:0"));
  metrics->Register(MakeCoordinatorCollectable(host.get()));
  metrics->Register(rpc_registry);
  const std::string page = HttpGet(metrics->port(), "/metrics");
  EXPECT_NE(page.find("200 OK"), std::string::npos);
  EXPECT_NE(page.find("tandem_coordinator_download_bytes_total{task=\"big\"} " +
                      std::to_string(assembled.size())),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("tandem_coordinator_checkins_total{task=\"big\",outcome=\"task\"}"),
            std::string::npos)
      << page;
  // The interceptor counted the calls above by method and code.
  EXPECT_NE(page.find("tandem_rpc_server_handled_total{code=\"UNAUTHENTICATED\",grpc_method=\"UploadDone\","
                      "grpc_service=\"tandem.proto.Coordinator\"} 1"),
            std::string::npos)
      << page;
  EXPECT_NE(page.find("tandem_rpc_server_handling_seconds_count{grpc_method=\"DownloadModel\""),
            std::string::npos)
      << page;
  // One family per name (Prometheus refuses a repeated HELP/TYPE).
  EXPECT_EQ(page.find("# TYPE tandem_coordinator_phase gauge"),
            page.rfind("# TYPE tandem_coordinator_phase gauge"));
  EXPECT_NE(page.find("tandem_coordinator_tasks 1"), std::string::npos) << page;
  EXPECT_NE(HttpGet(metrics->port(), "/other").find("404"), std::string::npos);
  server->Shutdown();
}

}  // namespace
}  // namespace tandem::server

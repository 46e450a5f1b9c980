// The daemon's trust boundaries: the collector channels present the
// coordinator's certificate and pin each aggregator's TLS identity; Start
// refuses a missing ticket key and one address or name for both
// aggregators; over TLS the daemon opens rounds on both (fake) collectors
// and hands out signed tickets with the announced endpoints.
#include "server/service/coordinator_daemon.h"

#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/server_builder.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "base/testing/status_matchers.h"
#include "crypto/sign/upload_ticket.h"
#include "gtest/gtest.h"
#include "proto/coordinator.grpc.pb.h"
#include "server/testing/test_devices.h"

namespace tandem::server {
namespace {

using ::tandem::testing::StatusIs;

std::string ReadFile(const std::filesystem::path& p) {
  std::ifstream in(p);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

// A CA and <role>.pem/.key for leader, helper and coordinator (SAN
// DNS:<role>.tandem, DNS:localhost, IP:127.0.0.1), made with the openssl
// command line tool.
void MakeRoleCertificates(const std::filesystem::path& dir) {
  std::string cmd = absl::StrCat(
      "cd ", dir.string(),
      " && openssl req -x509 -newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes"
      " -keyout ca.key -out ca.pem -days 1 -subj /CN=coordinator-test-ca 2>/dev/null");
  for (const char* role : {"leader", "helper", "coordinator"}) {
    std::ofstream(dir / absl::StrCat(role, ".cnf"))
        << "subjectAltName=DNS:" << role << ".tandem,DNS:localhost,IP:127.0.0.1\n"
        << "extendedKeyUsage=serverAuth,clientAuth\n";
    absl::StrAppend(&cmd, " && openssl req -newkey ec -pkeyopt ec_paramgen_curve:prime256v1",
                    " -nodes -keyout ", role, ".key -out ", role, ".csr -subj /CN=", role,
                    ".tandem 2>/dev/null && openssl x509 -req -in ", role,
                    ".csr -CA ca.pem -CAkey ca.key -CAcreateserial -out ", role,
                    ".pem -days 1 -extfile ", role, ".cnf 2>/dev/null");
  }
  ASSERT_EQ(std::system(cmd.c_str()), 0) << cmd;
}

// A collector listener that requires a client certificate of the CA and
// records who called.
class FakeCollector final : public proto::AggregatorCollector::Service {
 public:
  grpc::Status OpenRound(grpc::ServerContext* ctx, const proto::OpenRoundRequest* req,
                         proto::OpenRoundResponse*) override {
    absl::MutexLock lock(&mu_);
    callers_.push_back(Identity(ctx));
    opened_.push_back(req->parameters());
    return grpc::Status::OK;
  }
  grpc::Status Finalize(grpc::ServerContext*, const proto::FinalizeRequest*,
                        proto::FinalizeResponse*) override {
    return grpc::Status(grpc::StatusCode::UNAVAILABLE, "not in this test");
  }
  grpc::Status Status(grpc::ServerContext* ctx, const proto::AggregatorStatusRequest*,
                      proto::AggregatorStatusResponse* resp) override {
    absl::MutexLock lock(&mu_);
    callers_.push_back(Identity(ctx));
    resp->set_role("fake");
    return grpc::Status::OK;
  }
  std::vector<std::string> callers() {
    absl::MutexLock lock(&mu_);
    return callers_;
  }
  std::vector<proto::RoundParameters> opened() {
    absl::MutexLock lock(&mu_);
    return opened_;
  }

 private:
  static std::string Identity(grpc::ServerContext* ctx) {
    std::vector<std::string> names;
    for (const grpc::string_ref& v :
         ctx->auth_context()->FindPropertyValues("x509_subject_alternative_name")) {
      names.emplace_back(v.data(), v.size());
    }
    return absl::StrJoin(names, ",");
  }
  absl::Mutex mu_;
  std::vector<std::string> callers_ ABSL_GUARDED_BY(mu_);
  std::vector<proto::RoundParameters> opened_ ABSL_GUARDED_BY(mu_);
};

struct RunningCollector {
  FakeCollector service;
  std::unique_ptr<grpc::Server> server;
  int port = 0;
  std::string address() const { return absl::StrCat("127.0.0.1:", port); }
};

void StartCollector(const std::filesystem::path& dir, const std::string& role,
                    RunningCollector* c) {
  grpc::SslServerCredentialsOptions o(GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  o.pem_root_certs = ReadFile(dir / "ca.pem");
  o.pem_key_cert_pairs.push_back({ReadFile(dir / (role + ".key")), ReadFile(dir / (role + ".pem"))});
  grpc::ServerBuilder b;
  b.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(o), &c->port);
  b.RegisterService(&c->service);
  c->server = b.BuildAndStart();
  ASSERT_NE(c->port, 0);
}

ml::Dataset EvalData() {
  ml::Dataset d;
  d.num_classes = 2;
  d.features = ml::Matrix::Zero(2, 4);
  d.shape = {1, 1, 4};
  d.labels = {0, 1};
  return d;
}

class CoordinatorDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = std::filesystem::path(::testing::TempDir()) /
           ("daemon_" + std::string(::testing::UnitTest::GetInstance()->current_test_info()->name()));
    std::filesystem::remove_all(dir_);
    std::filesystem::create_directories(dir_);
    auto random = DeterministicRandom::FromSeed(3);
    auto key = crypto::Ed25519SigningKey::Generate(random.get());
    ASSERT_TRUE(key.ok());
    key_ = std::make_unique<crypto::Ed25519SigningKey>(*key);
    std::ofstream(dir_ / "ticket.key") << *key_->PrivateKeyPem();
    std::filesystem::permissions(dir_ / "ticket.key", std::filesystem::perms::owner_read |
                                                          std::filesystem::perms::owner_write);
  }
  // Plaintext options that Start accepts (the aggregators need not be up).
  CoordinatorDaemonOptions Plaintext() const {
    CoordinatorDaemonOptions d;
    d.tls.insecure_plaintext = true;
    d.leader_address = "127.0.0.1:1";
    d.helper_address = "127.0.0.1:2";
    d.state_dir = (dir_ / "state").string();
    d.ticket_key_path = (dir_ / "ticket.key").string();
    d.coordinator.task_id = "t";
    d.coordinator.model.set_input_dim(4);
    d.coordinator.model.add_hidden(3);
    d.coordinator.model.set_num_classes(2);
    d.coordinator.task.sample_rate = 1.0;
    d.coordinator.task.secure_sum.block_size = 8;
    return d;
  }
  CoordinatorDaemonOptions Tls() const {
    CoordinatorDaemonOptions d = Plaintext();
    d.tls = {false, (dir_ / "coordinator.pem").string(), (dir_ / "coordinator.key").string(),
             (dir_ / "ca.pem").string(), false};
    d.coordinator.leader.set_address("127.0.0.1:7001");
    d.coordinator.helper.set_address("127.0.0.1:7002");
    return d;
  }
  absl::Status StartStatus(CoordinatorDaemonOptions d) {
    absl::StatusOr<std::unique_ptr<CoordinatorDaemon>> s =
        CoordinatorDaemon::Start(std::move(d), EvalData(), RealClock::Default(), random_.get());
    return s.status();
  }

  std::filesystem::path dir_;
  std::unique_ptr<crypto::Ed25519SigningKey> key_;
  std::unique_ptr<DeterministicRandom> random_ = DeterministicRandom::FromSeed(5);
};

TEST_F(CoordinatorDaemonTest, CollectorChannelPresentsTheCertificateAndPinsTheServerName) {
  MakeRoleCertificates(dir_);
  RunningCollector leader;
  StartCollector(dir_, "leader", &leader);
  const TlsFiles tls = Tls().tls;
  TANDEM_ASSERT_OK_AND_ASSIGN(auto channel,
                              MakeCollectorChannel(leader.address(), tls, "leader.tandem"));
  GrpcAggregatorClient client(channel, absl::Seconds(10));
  TANDEM_ASSERT_OK_AND_ASSIGN(proto::AggregatorStatusResponse s, client.Status("t"));
  EXPECT_EQ(s.role(), "fake");
  ASSERT_EQ(leader.service.callers().size(), 1u);
  EXPECT_NE(leader.service.callers()[0].find("coordinator.tandem"), std::string::npos)
      << leader.service.callers()[0];
  // The helper's name pinned on the leader's address: the handshake fails,
  // although the leader's certificate is of the same CA and names 127.0.0.1.
  TANDEM_ASSERT_OK_AND_ASSIGN(auto wrong,
                              MakeCollectorChannel(leader.address(), tls, "helper.tandem"));
  GrpcAggregatorClient impostor(wrong, absl::Seconds(10));
  EXPECT_THAT(impostor.Status("t").status(), StatusIs(absl::StatusCode::kUnavailable));
  EXPECT_EQ(leader.service.callers().size(), 1u);
  TlsFiles no_cert = tls;
  no_cert.cert_chain_path.clear();
  EXPECT_THAT(MakeCollectorChannel(leader.address(), no_cert, "leader.tandem").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(MakeCollectorChannel(leader.address(), tls, "").status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  leader.server->Shutdown();
}

TEST_F(CoordinatorDaemonTest, StartRefusesNoTicketKeyAndOneServerForBothRoles) {
  {
    TANDEM_ASSERT_OK_AND_ASSIGN(auto d, CoordinatorDaemon::Start(Plaintext(), EvalData(),
                                                                 RealClock::Default(),
                                                                 random_.get()));
    d->Shutdown();
  }
  CoordinatorDaemonOptions o = Plaintext();
  o.ticket_key_path.clear();
  const absl::Status no_key = StartStatus(o);
  EXPECT_THAT(no_key, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(no_key.message().find("--ticket_key"), std::string::npos) << no_key;
  o.ticket_key_path = (dir_ / "missing.key").string();
  EXPECT_THAT(StartStatus(o), StatusIs(absl::StatusCode::kNotFound));
  std::ofstream(dir_ / "ec.key") << ReadFile(dir_ / "ticket.key").substr(0, 40) << "\n";
  o.ticket_key_path = (dir_ / "ec.key").string();
  EXPECT_THAT(StartStatus(o), StatusIs(absl::StatusCode::kInvalidArgument));

  o = Plaintext();
  o.helper_address = o.leader_address;
  EXPECT_THAT(StartStatus(o), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Plaintext();
  o.coordinator.helper.set_address("127.0.0.1:1");  // announced: the leader's port
  EXPECT_THAT(StartStatus(o), StatusIs(absl::StatusCode::kInvalidArgument));

  o = Tls();
  o.helper_name = o.leader_name;
  EXPECT_THAT(StartStatus(o), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Tls();
  o.coordinator.leader.clear_address();  // the collector port is no upload endpoint
  const absl::Status no_announce = StartStatus(o);
  EXPECT_THAT(no_announce, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_NE(no_announce.message().find("--announce_leader"), std::string::npos) << no_announce;
  o = Tls();
  o.coordinator.helper.set_address("127.0.0.1:7001");
  EXPECT_THAT(StartStatus(o), StatusIs(absl::StatusCode::kInvalidArgument));
  o = Tls();
  o.tls.private_key_path.clear();
  EXPECT_THAT(StartStatus(o), StatusIs(absl::StatusCode::kInvalidArgument));
  // Plaintext only on loopback: neither the listener nor the aggregators
  // may be elsewhere.
  for (auto change : {+[](CoordinatorDaemonOptions& d) { d.listen_address = "0.0.0.0:7000"; },
                      +[](CoordinatorDaemonOptions& d) { d.leader_address = "10.1.2.3:7011"; },
                      +[](CoordinatorDaemonOptions& d) { d.helper_address = "helper:7012"; }}) {
    o = Plaintext();
    change(o);
    const absl::Status s = StartStatus(o);
    EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
    EXPECT_NE(s.message().find("non-loopback"), std::string::npos) << s;
  }
}

TEST_F(CoordinatorDaemonTest, OverTlsOpensRoundsAsTheCoordinatorAndHandsOutTickets) {
  MakeRoleCertificates(dir_);
  RunningCollector leader, helper;
  StartCollector(dir_, "leader", &leader);
  StartCollector(dir_, "helper", &helper);
  CoordinatorDaemonOptions o = Tls();
  o.leader_address = leader.address();
  o.helper_address = helper.address();
  o.tick = absl::Milliseconds(10);
  TANDEM_ASSERT_OK_AND_ASSIGN(auto d, CoordinatorDaemon::Start(o, EvalData(), RealClock::Default(),
                                                               random_.get()));
  for (int i = 0; i < 500 && d->coordinator()->Status().phase() != "collecting"; ++i) {
    absl::SleepFor(absl::Milliseconds(20));
  }
  ASSERT_EQ(d->coordinator()->Status().phase(), "collecting");
  for (RunningCollector* c : {&leader, &helper}) {
    ASSERT_EQ(c->service.opened().size(), 1u);
    EXPECT_NE(c->service.callers()[0].find("coordinator.tandem"), std::string::npos);
    const proto::RoundParameters p = c->service.opened()[0];
    EXPECT_TRUE(p.has_norm_bound());  // the private defaults
    EXPECT_GT(p.noise_variance(), 0);
    EXPECT_EQ(p.dp().min_batch_size(), 10u);
  }
  // A client over server TLS (no client certificate).
  grpc::SslCredentialsOptions client_tls;
  client_tls.pem_root_certs = ReadFile(dir_ / "ca.pem");
  auto stub = proto::Coordinator::NewStub(grpc::CreateChannel(
      absl::StrCat("127.0.0.1:", d->port()), grpc::SslCredentials(client_tls)));
  const int64_t now_ms = absl::ToUnixMillis(absl::Now());
  {
    // The default policy: a device the operator did not enroll is refused.
    grpc::ClientContext cc;
    proto::CheckInResponse refused;
    EXPECT_EQ(stub->CheckIn(&cc, testing::SignedCheckIn("a", now_ms), &refused).error_code(),
              grpc::StatusCode::PERMISSION_DENIED);
  }
  TANDEM_ASSERT_OK(
      d->devices().EnrollKey(testing::TestDeviceKey("a").PublicKeyRaw(), "ops").status());
  grpc::ClientContext ctx;
  const proto::CheckInRequest in = testing::SignedCheckIn("a", now_ms);
  proto::CheckInResponse r;
  ASSERT_TRUE(stub->CheckIn(&ctx, in, &r).ok());
  ASSERT_EQ(r.outcome(), proto::CheckInResponse::OUTCOME_TASK);
  EXPECT_EQ(r.leader().address(), "127.0.0.1:7001");
  EXPECT_TRUE(r.leader().tls());
  EXPECT_EQ(r.leader().server_name(), "leader.tandem");
  EXPECT_EQ(r.helper().address(), "127.0.0.1:7002");
  EXPECT_EQ(r.helper().server_name(), "helper.tandem");
  TANDEM_ASSERT_OK_AND_ASSIGN(auto verifier,
                              crypto::Ed25519VerifyingKey::FromPem(*key_->PublicKeyPem()));
  TANDEM_ASSERT_OK_AND_ASSIGN(proto::UploadTicket t, crypto::VerifyUploadTicket(verifier, r.ticket()));
  EXPECT_EQ(t.round_id(), r.round_id());
  // UploadDone with and without it.
  proto::UploadDoneRequest done;
  done.set_client_id(in.client_id());
  done.set_task_id("t");
  done.set_round_id(r.round_id());
  done.set_report_id(t.ticket_id());
  proto::UploadDoneResponse resp;
  {
    grpc::ClientContext cc;
    EXPECT_EQ(stub->UploadDone(&cc, done, &resp).error_code(), grpc::StatusCode::UNAUTHENTICATED);
  }
  *done.mutable_ticket() = r.ticket();
  {
    grpc::ClientContext cc;
    EXPECT_TRUE(stub->UploadDone(&cc, done, &resp).ok());
  }
  EXPECT_EQ(d->coordinator()->Status().uploads_done(), 1u);
  d->Shutdown();
  leader.server->Shutdown();
  helper.server->Shutdown();
}

}  // namespace
}  // namespace tandem::server

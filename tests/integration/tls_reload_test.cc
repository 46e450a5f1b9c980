// Certificates, keys and roots reloaded without a restart (issue 34 item 7):
// base/grpc_credentials.h TlsReloader under a real gRPC server, and a real
// tandem-aggregator leader renewing its certificate on SIGHUP while its
// round goes on. A renewal that fails validation keeps the daemon serving
// what it had.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/server_builder.h>
#include <signal.h>

#include <filesystem>
#include <memory>
#include <string>

#include "absl/strings/strip.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "base/grpc_credentials.h"
#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/aggregator.grpc.pb.h"
#include "tests/integration/aggregator_pair_fixture.h"
#include "tests/testing/certificates.h"
#include "tests/testing/daemon_process.h"

namespace tandem::integration {
namespace {

using ::testing::HasSubstr;

// `party`'s certificate of MakeRoleCertificates, verifying servers with ca.pem.
grpc::SslCredentialsOptions Party(const std::string& dir, const std::string& party) {
  grpc::SslCredentialsOptions o;
  o.pem_root_certs = Read(dir + "/ca.pem");
  o.pem_cert_chain = Read(dir + "/" + party + ".pem");
  o.pem_private_key = Read(dir + "/" + party + ".key");
  return o;
}

// The certificate (PEM) `address` presents to a new connection (a channel
// with its own subchannel pool, so no open connection is reused), or ""
// when the handshake is refused.
std::string ServedCertificate(const std::string& address, const std::string& name,
                              const grpc::SslCredentialsOptions& as) {
  grpc::ChannelArguments args;
  args.SetSslTargetNameOverride(name);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  auto stub = proto::AggregatorCollector::NewStub(
      grpc::CreateCustomChannel(address, grpc::SslCredentials(as), args));
  auto ctx = Deadline();
  proto::AggregatorStatusRequest req;
  req.set_task_id("adv-task");
  proto::AggregatorStatusResponse resp;
  const grpc::Status s = stub->Status(ctx.get(), req, &resp);
  if (s.error_code() == grpc::StatusCode::UNAVAILABLE) return "";
  std::shared_ptr<const grpc::AuthContext> auth = ctx->auth_context();
  if (auth == nullptr) return "";
  const auto pem = auth->FindPropertyValues("x509_pem_cert");
  if (pem.empty()) return "";
  return std::string(absl::StripAsciiWhitespace(std::string(pem[0].data(), pem[0].size())));
}

std::string Leaf(const std::string& path) {
  return std::string(absl::StripAsciiWhitespace(Read(path)));
}

// Polls (the provider looks at its files once a second) until `address`
// serves `want` to `as`; false after 6 s.
bool ServesWithin(const std::string& address, const std::string& name,
                  const grpc::SslCredentialsOptions& as, const std::string& want) {
  for (int i = 0; i < 60; ++i) {
    if (ServedCertificate(address, name, as) == want) return true;
    absl::SleepFor(absl::Milliseconds(100));
  }
  return false;
}

void Copy(const std::string& from, const std::string& to) {
  std::filesystem::copy_file(from, to, std::filesystem::copy_options::overwrite_existing);
}

TEST(TlsReloaderTest, ReloadSwapsIdentityAndRootsAndKeepsThemWhenTheNewFilesAreBad) {
  const std::string dir = tandem::testing::MakeTempDir("tandem-tls-reload");
  ASSERT_FALSE(dir.empty());
  TANDEM_ASSERT_OK(tandem::testing::MakeRoleCertificates(dir));
  Copy(dir + "/leader.pem", dir + "/live.pem");
  Copy(dir + "/leader.key", dir + "/live.key");
  Copy(dir + "/ca.pem", dir + "/live-roots.pem");
  TlsReloader reloader;
  const TlsFiles tls{.cert_chain_path = dir + "/live.pem",
                     .private_key_path = dir + "/live.key",
                     .root_ca_path = dir + "/live-roots.pem",
                     .require_client_cert = true,
                     .reloader = &reloader};
  // As a daemon builds them: a channel presenting the identity, a listener
  // without client certificates, a mutual-TLS listener (gRPC 1.51 lost
  // identity updates when these shared one certificate provider).
  TlsFiles channel_tls = tls, public_tls = tls;
  channel_tls.require_client_cert = public_tls.require_client_cert = false;
  auto channel_creds = MakeChannelCredentials(channel_tls);
  ASSERT_THAT(channel_creds, IsOk());
  auto public_creds = MakeServerCredentials(public_tls);
  ASSERT_THAT(public_creds, IsOk());
  auto creds = MakeServerCredentials(tls);
  ASSERT_THAT(creds, IsOk());
  proto::AggregatorCollector::Service unimplemented;  // every call: UNIMPLEMENTED
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", *creds, &port);
  builder.RegisterService(&unimplemented);
  proto::AggregatorCollector::Service unimplemented_too;
  grpc::ServerBuilder public_builder;
  int public_port = 0;
  public_builder.AddListeningPort("127.0.0.1:0", *public_creds, &public_port);
  public_builder.RegisterService(&unimplemented_too);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  std::unique_ptr<grpc::Server> public_server = public_builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  ASSERT_NE(public_server, nullptr);
  const std::string address = tandem::testing::Loopback(port);
  const std::string public_address = tandem::testing::Loopback(public_port);
  EXPECT_EQ(ServedCertificate(address, "localhost", Party(dir, "coordinator")),
            Leaf(dir + "/leader.pem"));
  {  // the channel presents the identity to the mutual listener
    grpc::ChannelArguments args;
    args.SetSslTargetNameOverride("localhost");
    auto stub = proto::AggregatorCollector::NewStub(
        grpc::CreateCustomChannel(address, *channel_creds, args));
    proto::AggregatorStatusRequest req;
    proto::AggregatorStatusResponse resp;
    EXPECT_EQ(stub->Status(Deadline().get(), req, &resp).error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
  }

  // A renewal: a new key and certificate for the same name.
  TANDEM_ASSERT_OK(tandem::testing::ReissueCertificate(dir, "leader", "leader.tandem"));
  Copy(dir + "/leader.pem", dir + "/live.pem");
  Copy(dir + "/leader.key", dir + "/live.key");
  TANDEM_EXPECT_OK(reloader.Reload());
  const std::string renewed = Leaf(dir + "/leader.pem");
  EXPECT_TRUE(ServesWithin(address, "localhost", Party(dir, "coordinator"), renewed));
  EXPECT_TRUE(ServesWithin(public_address, "localhost", Party(dir, "coordinator"), renewed));

  // Another identity, and the roots now another CA's.
  Copy(dir + "/helper.pem", dir + "/live.pem");
  Copy(dir + "/helper.key", dir + "/live.key");
  Copy(dir + "/rogue-ca.pem", dir + "/live-roots.pem");
  TANDEM_EXPECT_OK(reloader.Reload());
  EXPECT_TRUE(ServesWithin(address, "localhost", Party(dir, "rogue"), Leaf(dir + "/helper.pem")));
  EXPECT_EQ(ServedCertificate(address, "localhost", Party(dir, "coordinator")), "")
      << "a client of the old roots is refused at the handshake";

  // A bad renewal (the key of another certificate): refused, nothing swapped.
  Copy(dir + "/leader.key", dir + "/live.key");
  const absl::Status bad = reloader.Reload();
  EXPECT_TRUE(absl::IsInvalidArgument(bad)) << bad;
  EXPECT_THAT(bad.message(), HasSubstr("not the key"));
  absl::SleepFor(absl::Milliseconds(2500));  // two refresh periods
  EXPECT_EQ(ServedCertificate(address, "localhost", Party(dir, "rogue")),
            Leaf(dir + "/helper.pem"));
  EXPECT_EQ(reloader.stats().reloaded, 2u);
  EXPECT_EQ(reloader.stats().failed, 1u);
  EXPECT_EQ(reloader.stats().sets, 1u);
  server->Shutdown();
  public_server->Shutdown();
  std::filesystem::remove_all(dir);
}

TEST(TlsReloaderTest, ValidationNamesWhatIsWrong) {
  const std::string dir = tandem::testing::MakeTempDir("tandem-tls-validate");
  ASSERT_FALSE(dir.empty());
  TANDEM_ASSERT_OK(tandem::testing::MakeRoleCertificates(dir));
  const std::string cert = Read(dir + "/leader.pem"), key = Read(dir + "/leader.key");
  const std::string roots = Read(dir + "/ca.pem");
  const absl::Time now = absl::Now();
  TANDEM_EXPECT_OK(ValidateTlsMaterial(cert, key, roots, now));
  TANDEM_EXPECT_OK(ValidateTlsMaterial("", "", roots, now));  // roots only
  auto message = [](const absl::Status& s) {
    EXPECT_TRUE(absl::IsInvalidArgument(s)) << s;
    return std::string(s.message());
  };
  EXPECT_THAT(message(ValidateTlsMaterial(cert, Read(dir + "/helper.key"), roots, now)),
              HasSubstr("not the key"));
  // The test certificates are valid for two days from now.
  EXPECT_THAT(message(ValidateTlsMaterial(cert, key, roots, now + absl::Hours(24 * 3))),
              HasSubstr("expired"));
  EXPECT_THAT(message(ValidateTlsMaterial(cert, key, roots, now - absl::Hours(1))),
              HasSubstr("not valid yet"));
  EXPECT_THAT(message(ValidateTlsMaterial(key, key, roots, now)), HasSubstr("no PEM certificate"));
  EXPECT_THAT(message(ValidateTlsMaterial(cert, cert, roots, now)), HasSubstr("private key"));
  EXPECT_THAT(message(ValidateTlsMaterial(cert, key, "-----BEGIN junk", now)), HasSubstr("roots"));
  std::filesystem::remove_all(dir);
}

// A real leader renews its certificate on SIGHUP: new connections get the
// new one, the round goes on, and a broken renewal changes nothing.
using TlsReloadDaemonTest = AggregatorPairTest;

TEST_F(TlsReloadDaemonTest, SighupRenewsTheLeadersCertificateWithoutARestart) {
  TANDEM_ASSERT_OK(OpenBoth(params_));
  TestReport r1 = Honest(1);
  TANDEM_ASSERT_OK(Upload(r1.to_leader, false));
  TANDEM_ASSERT_OK(Upload(r1.to_helper, true));
  WaitAccepted(1);
  const std::string collector = pair_.leader_collector_address();
  const std::string old_cert = Leaf(dir_ + "/leader.pem");
  ASSERT_EQ(ServedCertificate(collector, "leader.tandem", Party(dir_, "coordinator")), old_cert);

  TANDEM_ASSERT_OK(tandem::testing::ReissueCertificate(dir_, "leader", "leader.tandem"));
  const std::string renewed = Leaf(dir_ + "/leader.pem");
  ASSERT_NE(renewed, old_cert);
  ASSERT_EQ(kill(pair_.leader->pid(), SIGHUP), 0);
  EXPECT_TRUE(ServesWithin(collector, "leader.tandem", Party(dir_, "coordinator"), renewed));
  EXPECT_EQ(ServedCertificate(pair_.leader_address(), "leader.tandem", Party(dir_, "coordinator")),
            renewed);
  // Same process, same round: reports keep flowing through both servers.
  TestReport r2 = Honest(2);
  TANDEM_ASSERT_OK(Upload(r2.to_leader, false));
  TANDEM_ASSERT_OK(Upload(r2.to_helper, true));
  WaitAccepted(2);

  // A broken renewal (the helper's key beside the leader's certificate).
  Copy(dir_ + "/helper.key", dir_ + "/leader.key");
  ASSERT_EQ(kill(pair_.leader->pid(), SIGHUP), 0);
  absl::SleepFor(absl::Milliseconds(2500));
  EXPECT_EQ(ServedCertificate(collector, "leader.tandem", Party(dir_, "coordinator")), renewed);
  TestReport r3 = Honest(3);
  TANDEM_ASSERT_OK(Upload(r3.to_leader, false));
  TANDEM_ASSERT_OK(Upload(r3.to_helper, true));
  WaitAccepted(3);
}

}  // namespace
}  // namespace tandem::integration

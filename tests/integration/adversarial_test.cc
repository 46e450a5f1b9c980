// The trust boundaries of the aggregators, attacked as an outsider would:
// a real leader/helper pair with TLS, roles checked by certificate identity,
// upload tickets and the servers' own privacy policy, driven by real gRPC
// clients that hold the wrong (or no) identity. Every attack asserts its
// refusal code and that the counts, the aggregate and the spent budget did
// not change.
#include <grpcpp/create_channel.h>
#include <grpcpp/security/credentials.h>
#include <grpcpp/security/server_credentials.h>
#include <grpcpp/server_builder.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <memory>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "aggregator/testing/report_factory.h"
#include "base/grpc_status.h"
#include "base/testing/status_matchers.h"
#include "crypto/dp/accountant.h"
#include "crypto/sign/device_auth.h"
#include "crypto/sign/upload_ticket.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/aggregator.grpc.pb.h"
#include "proto/coordinator.grpc.pb.h"
#include "tests/integration/aggregator_pair_fixture.h"
#include "tests/testing/certificates.h"
#include "tests/testing/daemon_process.h"

namespace tandem::integration {
namespace {

using AdversarialTest = AggregatorPairTest;

// Every internal RPC, by every wrong caller, on every port that could
// answer it.
TEST_F(AdversarialTest, OutsidersCannotCallAnyInternalRpc) {
  TANDEM_ASSERT_OK(OpenBoth(params_));
  TestReport r = Honest(1);
  TANDEM_ASSERT_OK(Upload(r.to_leader, false));
  TANDEM_ASSERT_OK(Upload(r.to_helper, true));
  WaitAccepted(1);
  const std::string before = Counts();

  struct Wrong {
    const char* who;
    Caller caller;
    grpc::StatusCode code;
  };
  grpc::SslCredentialsOptions rogue;  // a certificate of another CA with the coordinator's name
  rogue.pem_root_certs = Read(dir_ + "/ca.pem");
  rogue.pem_cert_chain = Read(dir_ + "/rogue.pem");
  rogue.pem_private_key = Read(dir_ + "/rogue.key");
  const std::vector<Wrong> wrong = {
      {"no certificate", Anonymous(), grpc::StatusCode::UNAVAILABLE},  // handshake refused
      {"rogue CA", {grpc::SslCredentials(rogue)}, grpc::StatusCode::UNAVAILABLE},
      {"outsider of the CA", As("outsider"), grpc::StatusCode::PERMISSION_DENIED},
      {"the leader", As("leader"), grpc::StatusCode::PERMISSION_DENIED},
      {"the helper", As("helper"), grpc::StatusCode::PERMISSION_DENIED},
      // The coordinator's and leader's names as email/URI SANs and CN.
      {"non-DNS SANs naming the roles", As("smuggler"), grpc::StatusCode::PERMISSION_DENIED},
  };
  proto::OpenRoundRequest open;
  *open.mutable_parameters() = params_;
  open.mutable_parameters()->set_round_id(2);
  open.mutable_parameters()->set_noise_variance(0);
  proto::FinalizeRequest fin;
  fin.set_task_id(params_.task_id());
  fin.set_round_id(1);
  proto::AggregatorStatusRequest st;
  st.set_task_id(params_.task_id());
  for (const Wrong& w : wrong) {
    for (bool helper : {false, true}) {
      SCOPED_TRACE(absl::StrCat(w.who, helper ? " -> helper" : " -> leader"));
      auto stub = Collector(w.caller, helper);
      proto::OpenRoundResponse o;
      proto::FinalizeResponse f;
      proto::AggregatorStatusResponse s;
      EXPECT_EQ(stub->OpenRound(Deadline().get(), open, &o).error_code(), w.code);
      EXPECT_EQ(stub->Finalize(Deadline().get(), fin, &f).error_code(), w.code);
      EXPECT_EQ(stub->Status(Deadline().get(), st, &s).error_code(), w.code);
    }
  }
  // The helper's peer API: everyone but the leader, including the
  // coordinator; Verify with a chosen query seed is what would leak the
  // helper's FLP seed.
  proto::VerifyRequest verify;
  verify.set_task_id(params_.task_id());
  verify.set_round_id(1);
  verify.set_proof_query_seed(std::string(32, 'x'));
  proto::ReportCheck* check = verify.add_checks();
  check->set_report_id(r.to_helper.report_id());
  check->set_proof_hash(std::string(32, '\0'));
  proto::AcceptedSet commit;
  commit.set_task_id(params_.task_id());
  commit.set_round_id(1);
  commit.add_report_ids(r.to_helper.report_id());
  std::vector<Wrong> peers = wrong;
  peers.erase(peers.begin() + 3);  // the leader may
  peers.push_back({"the coordinator", As("coordinator"), grpc::StatusCode::PERMISSION_DENIED});
  for (const Wrong& w : peers) {
    SCOPED_TRACE(w.who);
    auto stub = proto::AggregatorPeer::NewStub(w.caller.To(pair_.helper_peer_address(), "helper.tandem"));
    proto::VerifyResponse v;
    proto::AcceptedSetAck a;
    EXPECT_EQ(stub->Verify(Deadline().get(), verify, &v).error_code(), w.code);
    EXPECT_TRUE(v.proof_query_seed().empty());
    EXPECT_EQ(stub->CommitAcceptedSet(Deadline().get(), commit, &a).error_code(), w.code);
  }
  // The public upload port serves no internal API at all, whoever asks.
  for (bool helper : {false, true}) {
    auto ch = As("coordinator").To(helper ? pair_.helper_address() : pair_.leader_address(),
                                   helper ? "helper.tandem" : "leader.tandem");
    proto::AggregatorStatusResponse s;
    proto::VerifyResponse v;
    EXPECT_EQ(proto::AggregatorCollector::NewStub(ch)->Status(Deadline().get(), st, &s).error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
    EXPECT_EQ(proto::AggregatorPeer::NewStub(ch)->Verify(Deadline().get(), verify, &v).error_code(),
              grpc::StatusCode::UNIMPLEMENTED);
  }
  EXPECT_EQ(Counts(), before);
  auto leader = Status(false);
  auto helper = Status(true);
  ASSERT_THAT(leader, IsOk());
  ASSERT_THAT(helper, IsOk());
  // 4 refused identities x 3 RPCs on each collector; 4 x 2 on the peer API.
  EXPECT_EQ(leader->refused_calls().at("collector/identity"), 12u);
  EXPECT_EQ(helper->refused_calls().at("collector/identity"), 12u);
  EXPECT_EQ(helper->refused_calls().at("peer/identity"), 8u);
}

TEST_F(AdversarialTest, CoordinatorCannotTurnPrivacyOff) {
  proto::RoundParameters p = params_;
  p.set_noise_variance(0);
  EXPECT_THAT(OpenBoth(p), StatusIs(absl::StatusCode::kInvalidArgument));
  p.set_noise_variance(1200 * 0.25);  // z = 0.5
  EXPECT_THAT(OpenBoth(p), StatusIs(absl::StatusCode::kInvalidArgument));
  p = params_;
  p.mutable_dp()->set_min_batch_size(1);
  EXPECT_THAT(OpenBoth(p), StatusIs(absl::StatusCode::kInvalidArgument));
  p = params_;
  p.clear_norm_bound();  // no proofs: a client could send anything
  EXPECT_THAT(OpenBoth(p), StatusIs(absl::StatusCode::kInvalidArgument));
  // None of them created the task.
  EXPECT_THAT(Status(false).status(), StatusIs(absl::StatusCode::kNotFound));

  TANDEM_ASSERT_OK(OpenBoth(params_));
  for (uint64_t seed = 1; seed <= 2; ++seed) {
    TestReport r = Honest(seed);
    TANDEM_ASSERT_OK(Upload(r.to_leader, false));
    TANDEM_ASSERT_OK(Upload(r.to_helper, true));
  }
  // Two accepted reports: below both servers' minimum batch of 3.
  EXPECT_THAT(Finalize(false).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Finalize(true).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
  TestReport third = Honest(3);
  TANDEM_ASSERT_OK(Upload(third.to_leader, false));
  TANDEM_ASSERT_OK(Upload(third.to_helper, true));
  auto a = Finalize(false);
  ASSERT_THAT(a, IsOk());
  auto b = Finalize(true);
  ASSERT_THAT(b, IsOk());
  EXPECT_EQ(a->accepted_reports(), 3u);
  EXPECT_EQ(b->accepted_reports(), 3u);

  // Each server charged its own accountant one release at z = 1, q = 1.
  auto accountant = dp::PrivacyAccountant::Create(
      {dp::DefaultOrders(), 1e-5, std::numeric_limits<double>::max()});
  ASSERT_THAT(accountant, IsOk());
  TANDEM_ASSERT_OK(accountant->Charge(1.0, 1.0));
  for (bool helper : {false, true}) {
    auto s = Status(helper);
    ASSERT_THAT(s, IsOk());
    EXPECT_DOUBLE_EQ(s->epsilon_spent(), accountant->SpentEpsilon());
    EXPECT_EQ(s->released_rounds(), 1u);
    EXPECT_EQ(s->epsilon_budget(), 6.0);
  }
  // A second release would spend ~7.1 > 6: refused before anything opens.
  const std::string before = Counts();
  p = params_;
  p.set_round_id(2);
  EXPECT_THAT(Open(p, false), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(Open(p, true), StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_EQ(Counts(), before);
  // The released shares are what every retry returns (one noise draw).
  auto again = Finalize(false);
  ASSERT_THAT(again, IsOk());
  EXPECT_EQ(again->aggregate_share().data(), a->aggregate_share().data());
}

TEST_F(AdversarialTest, UploadsNeedTheirOwnValidTicket) {
  TANDEM_ASSERT_OK(OpenBoth(params_));
  TestReport r = Honest(1);
  const std::string id = r.to_leader.report_id();
  auto with = [&](proto::SignedUploadTicket t) {
    proto::UploadRequest req = r.to_leader;
    *req.mutable_ticket() = std::move(t);
    return req;
  };
  proto::UploadRequest none = r.to_leader;
  none.clear_ticket();
  proto::SignedUploadTicket tampered = r.to_leader.ticket();
  tampered.mutable_ticket()->back() ^= 1;
  std::string other_id = id;
  other_id[0] ^= 1;
  const std::vector<std::pair<const char*, proto::UploadRequest>> forged = {
      {"no ticket", none},
      {"signed by another key", with(Ticket(id, 1, InAMinute(), *other_key_))},
      {"for another report", with(Ticket(other_id, 1, InAMinute(), *ticket_key_))},
      {"for another round", with(Ticket(id, 2, InAMinute(), *ticket_key_))},
      // Expired beyond the 5 minutes of clock skew the aggregator tolerates.
      {"expired",
       with(Ticket(id, 1, absl::ToUnixMillis(absl::Now() - absl::Minutes(6)), *ticket_key_))},
      {"tampered", with(tampered)},
  };
  for (const auto& [what, req] : forged) {
    SCOPED_TRACE(what);
    EXPECT_THAT(Upload(req, false), StatusIs(absl::StatusCode::kUnauthenticated));
    proto::UploadRequest to_helper = req;
    *to_helper.mutable_key_share() = r.to_helper.key_share();
    *to_helper.mutable_norm_proof() = r.to_helper.norm_proof();
    EXPECT_THAT(Upload(to_helper, true), StatusIs(absl::StatusCode::kUnauthenticated));
  }
  EXPECT_EQ(Counts(), "0/0/0/0/0;0/0/0/0/0;");
  TANDEM_ASSERT_OK(Upload(r.to_leader, false));
  TANDEM_ASSERT_OK(Upload(r.to_leader, false));  // an identical retry is fine
  TANDEM_ASSERT_OK(Upload(r.to_helper, true));
  // The ticket replayed with other shares: without the device's signature
  // over them refused outright; signed by the device itself, still one
  // report per ticket.
  TestReport other = Honest(2);
  proto::UploadRequest replay = other.to_leader;
  replay.set_report_id(id);
  *replay.mutable_ticket() = r.to_leader.ticket();
  EXPECT_THAT(Upload(replay, false), StatusIs(absl::StatusCode::kUnauthenticated));
  TANDEM_ASSERT_OK_AND_ASSIGN(const crypto::Ed25519SigningKey device, TestDeviceKey(r));
  TANDEM_ASSERT_OK(crypto::SignUpload(device, crypto::UploadRole::kLeader, &replay));
  EXPECT_THAT(Upload(replay, false), StatusIs(absl::StatusCode::kAlreadyExists));
  // A client with a valid ticket but no certificate cannot reach the peer
  // API (handshake) and the upload port does not serve it.
  proto::VerifyRequest verify;
  verify.set_task_id(params_.task_id());
  verify.set_round_id(1);
  proto::VerifyResponse v;
  auto peer = proto::AggregatorPeer::NewStub(Anonymous().To(pair_.helper_peer_address(), "helper.tandem"));
  EXPECT_EQ(peer->Verify(Deadline().get(), verify, &v).error_code(), grpc::StatusCode::UNAVAILABLE);
  auto via_upload = proto::AggregatorPeer::NewStub(Anonymous().To(pair_.helper_address(), "helper.tandem"));
  EXPECT_EQ(via_upload->Verify(Deadline().get(), verify, &v).error_code(),
            grpc::StatusCode::UNIMPLEMENTED);
  WaitAccepted(1);  // exactly the one ticketed report
  auto leader = Status(false);
  ASSERT_THAT(leader, IsOk());
  EXPECT_EQ(leader->refused_calls().at("upload/ticket"), 7u);
}

// Issue 34: a ticket read off the wire (or obtained by impersonation) cannot
// be spent by anyone but the device it names, at either aggregator, and a
// ticket that names no device is refused by both.
TEST_F(AdversarialTest, AStolenTicketCannotBeSpentFromAnotherKey) {
  TANDEM_ASSERT_OK(OpenBoth(params_));
  TestReport victim = Honest(1);
  const std::string id = victim.to_leader.report_id();
  // The thief's own report under the victim's ticket and report id, signed
  // with the thief's key.
  TestReport thief = Honest(2);
  const crypto::Ed25519SigningKey thief_key =
      *crypto::Ed25519SigningKey::FromSeed(std::string(32, 't'));
  for (proto::UploadRequest* u : {&thief.to_leader, &thief.to_helper}) {
    u->set_report_id(id);
    *u->mutable_ticket() = victim.to_leader.ticket();
  }
  proto::UploadRequest forged_leader = thief.to_leader, forged_helper = thief.to_helper;
  // SignUpload refuses a ticket of another key; a thief signs by hand.
  EXPECT_THAT(crypto::SignUpload(thief_key, crypto::UploadRole::kLeader, &forged_leader),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const std::string td = crypto::TicketDigest(victim.to_leader.ticket());
  forged_leader.set_device_signature(*thief_key.Sign(crypto::UploadSigningInput(
      crypto::UploadRole::kLeader, td,
      crypto::UploadContentDigest(forged_leader.key_share(), &forged_leader.norm_proof(), td))));
  forged_helper.set_device_signature(*thief_key.Sign(crypto::UploadSigningInput(
      crypto::UploadRole::kHelper, td,
      crypto::UploadContentDigest(forged_helper.key_share(), &forged_helper.norm_proof(), td))));
  EXPECT_THAT(Upload(forged_leader, false), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(Upload(forged_helper, true), StatusIs(absl::StatusCode::kUnauthenticated));
  // A leader replaying the victim's signed leader upload to the helper:
  // refused (its keys are the leader's party, INVALID_ARGUMENT, and its
  // signature names the leader's role).
  EXPECT_FALSE(Upload(victim.to_leader, true).ok());
  // The thief's shares with the victim's genuine signatures.
  proto::UploadRequest swapped = thief.to_helper;
  swapped.set_device_signature(victim.to_helper.device_signature());
  EXPECT_THAT(Upload(swapped, true), StatusIs(absl::StatusCode::kUnauthenticated));
  // A genuine coordinator ticket that names no device: refused by both.
  TestReport unbound = Honest(3);
  TANDEM_ASSERT_OK(
      AttachTicket(unbound, params_, *ticket_key_, InAMinute(), /*bind_device=*/false));
  EXPECT_THAT(Upload(unbound.to_leader, false), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_THAT(Upload(unbound.to_helper, true), StatusIs(absl::StatusCode::kUnauthenticated));
  EXPECT_EQ(Counts(), "0/0/0/0/0;0/0/0/0/0;");  // nothing was stored or counted
  // The victim's own uploads still go through: nothing of its was consumed.
  TANDEM_ASSERT_OK(Upload(victim.to_leader, false));
  TANDEM_ASSERT_OK(Upload(victim.to_helper, true));
  WaitAccepted(1);
}

// Issue 34 item 7, through the real daemons: while the coordinator's key is
// rotated both aggregators accept tickets of the new and the old key (chosen
// by the ticket's key id); once the operators drop the old key, its tickets
// are refused by both, naming the key id, and nothing of them is stored.
TEST_F(AdversarialTest, RotatedTicketKeysOverlapUntilTheOldOneIsDropped) {
  KillPair();
  ticket_keys_ = dir_ + "/other_ticket.pub," + dir_ + "/ticket.pub";  // new, old
  TANDEM_ASSERT_OK(StartPair());
  TANDEM_ASSERT_OK(OpenBoth(params_));
  TestReport old_key = Honest(1);  // ticket.pub: the key being rotated out
  TestReport new_key = Honest(2);
  TANDEM_ASSERT_OK(AttachTicket(new_key, params_, *other_key_, InAMinute()));
  for (const TestReport* r : {&old_key, &new_key}) {
    TANDEM_ASSERT_OK(Upload(r->to_leader, false));
    TANDEM_ASSERT_OK(Upload(r->to_helper, true));
  }
  WaitAccepted(2);
  // The old key dropped (a restart with the new key alone): its tickets no
  // longer open the aggregators, the new key's still do.
  KillPair();
  ticket_keys_ = dir_ + "/other_ticket.pub";
  TANDEM_ASSERT_OK(StartPair());
  TestReport late_old = Honest(3);
  const std::string old_id = crypto::TicketKeyId(ticket_key_->PublicKeyRaw());
  EXPECT_THAT(Upload(late_old.to_leader, false),
              StatusIs(absl::StatusCode::kUnauthenticated,
                       ::testing::HasSubstr(absl::BytesToHexString(old_id))));
  EXPECT_THAT(Upload(late_old.to_helper, true), StatusIs(absl::StatusCode::kUnauthenticated,
                                                         ::testing::HasSubstr("does not accept")));
  TestReport late_new = Honest(4);
  TANDEM_ASSERT_OK(AttachTicket(late_new, params_, *other_key_, InAMinute()));
  TANDEM_ASSERT_OK(Upload(late_new.to_leader, false));
  TANDEM_ASSERT_OK(Upload(late_new.to_helper, true));
  WaitAccepted(3);
}

TEST_F(AdversarialTest, OversizedAndRepeatedMessagesAreRefusedBeforeTheMath) {
  TANDEM_ASSERT_OK(OpenBoth(params_));
  TestReport r = Honest(1);
  // 8 MiB in one key: above the upload listener's limit (~5.5 MiB for the
  // default max_sent_values), refused by gRPC before parsing.
  proto::UploadRequest big = r.to_leader;
  big.mutable_key_share()->mutable_keys(0)->set_seed(std::string(8 << 20, 'a'));
  EXPECT_THAT(Upload(big, false), StatusIs(absl::StatusCode::kResourceExhausted));
  // Repeated empty submessages, 2 bytes each on the wire: 4M of them are
  // over the limit; 100k are within it and the validator refuses them.
  proto::UploadRequest repeated = r.to_leader;
  for (int i = 0; i < 100000; ++i) repeated.mutable_key_share()->add_keys();
  EXPECT_THAT(Upload(repeated, false), StatusIs(absl::StatusCode::kInvalidArgument));
  for (int i = 0; i < 4000000; ++i) repeated.mutable_key_share()->add_keys();
  EXPECT_THAT(Upload(repeated, false), StatusIs(absl::StatusCode::kResourceExhausted));
  // Even the leader cannot make the helper walk an unbounded Verify.
  proto::VerifyRequest verify;
  verify.set_task_id(params_.task_id());
  verify.set_round_id(1);
  verify.set_proof_query_seed(std::string(32, 's'));
  for (int i = 0; i < 5000; ++i) verify.add_checks();
  proto::VerifyResponse v;
  auto peer = proto::AggregatorPeer::NewStub(As("leader").To(pair_.helper_peer_address(), "helper.tandem"));
  EXPECT_EQ(peer->Verify(Deadline().get(), verify, &v).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(Counts(), "0/0/0/0/0;0/0/0/0/0;");
  // The honest report still goes through.
  TANDEM_ASSERT_OK(Upload(r.to_leader, false));
  TANDEM_ASSERT_OK(Upload(r.to_helper, true));
}

// A coordinator that tries to route both shares of every client to one
// place: it announces `leader` and `helper` as given (the same server, or a
// server of its own choosing) with a genuine-looking round and ticket.
class RoutingCoordinator final : public proto::Coordinator::Service {
 public:
  RoutingCoordinator(proto::CheckInResponse task) : task_(std::move(task)) {}
  grpc::Status CheckIn(grpc::ServerContext*, const proto::CheckInRequest*,
                       proto::CheckInResponse* response) override {
    *response = task_;
    ++checkins;
    return grpc::Status::OK;
  }
  std::atomic<int> checkins{0};

 private:
  const proto::CheckInResponse task_;
};

TEST_F(AdversarialTest, ClientsRefuseACoordinatorThatRoutesBothSharesToOneServer) {
  TANDEM_ASSERT_OK(OpenBoth(params_));
  proto::CheckInResponse task;
  task.set_outcome(proto::CheckInResponse::OUTCOME_TASK);
  task.set_task_id(params_.task_id());
  task.set_round_id(1);
  task.set_model_version(0);
  *task.mutable_round_parameters() = params_;
  *task.mutable_group_parameters() = params_.group_parameters();
  task.set_num_groups(params_.num_groups());
  task.set_dimension(params_.dimension());
  task.mutable_training()->set_local_steps(1);
  task.mutable_training()->set_batch_size(8);
  task.mutable_training()->set_learning_rate(0.1);
  task.mutable_training()->mutable_model()->set_input_dim(64);
  task.mutable_training()->mutable_model()->set_num_classes(10);
  *task.mutable_ticket() = Honest(1).to_leader.ticket();
  struct Case {
    const char* what;
    std::string helper_address, helper_name;
    bool pinned;
    const char* expect;
  };
  const std::vector<Case> cases = {
      // Over TLS an unpinned client does not even start (issue 34: fail
      // closed), so it never asks this coordinator where to send shares.
      {"one server for both roles, unpinned", pair_.leader_address(), "leader.tandem", false,
       "pin both aggregators' TLS identities"},
      // Pinned clients refuse a helper other than the one they know.
      {"another helper", pair_.leader_address(), "mallory.tandem", true, "pins"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    proto::CheckInResponse t = task;
    t.mutable_leader()->set_address(pair_.leader_address());
    t.mutable_leader()->set_server_name("leader.tandem");
    t.mutable_leader()->set_tls(true);
    t.mutable_helper()->set_address(c.helper_address);
    t.mutable_helper()->set_server_name(c.helper_name);
    t.mutable_helper()->set_tls(true);
    RoutingCoordinator coordinator(t);
    grpc::SslServerCredentialsOptions so;
    so.pem_key_cert_pairs.push_back(
        {Read(dir_ + "/coordinator.key"), Read(dir_ + "/coordinator.pem")});
    grpc::ServerBuilder builder;
    int port = 0;
    builder.AddListeningPort("127.0.0.1:0", grpc::SslServerCredentials(so), &port);
    builder.RegisterService(&coordinator);
    std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
    ASSERT_NE(server, nullptr);
    std::vector<std::string> args = {
        absl::StrCat("--coordinator=127.0.0.1:", port), "--client_id=victim", "--dataset=digits",
        "--tls_ca=" + dir_ + "/ca.pem", "--max_errors=2", "--state_dir=" + dir_ + "/victim"};
    if (c.pinned) {
      for (const std::string& a :
           {"--leader=" + pair_.leader_address(), std::string("--leader_name=leader.tandem"),
            "--helper=" + pair_.helper_address(), std::string("--helper_name=helper.tandem")}) {
        args.push_back(a);
      }
    }
    const std::string log = dir_ + "/victim.log";
    auto client = tandem::testing::ChildProcess::Spawn(TANDEM_CLIENT_BIN, args, log);
    ASSERT_THAT(client, IsOk());
    auto rc = (*client)->Wait(absl::Seconds(60));
    ASSERT_THAT(rc, IsOk());
    EXPECT_NE(*rc, 0);
    EXPECT_EQ(coordinator.checkins.load() >= 1, c.pinned);
    EXPECT_THAT(Read(log), ::testing::HasSubstr(c.expect));
    server->Shutdown();
  }
  // Nothing of the victim reached either aggregator.
  EXPECT_EQ(Counts(), "0/0/0/0/0;0/0/0/0/0;");
}

}  // namespace
}  // namespace tandem::integration

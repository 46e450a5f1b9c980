// The client's checks of a coordinator's assignment: pins, roles, tickets
// and bounds (the runner-level behaviour is in round_runner_test.cc).
#include "client/internal/assignment_checks.h"

#include <cmath>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::client {
namespace {

using ::tandem::testing::IsOk;
using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

proto::Endpoint Ep(const std::string& address, const std::string& name = "") {
  proto::Endpoint e;
  e.set_address(address);
  e.set_server_name(name);
  return e;
}

TEST(AssignmentChecks, AddressesAreComparedNormalized) {
  EXPECT_EQ(NormalizeAddress("Leader.Example:443"), "leader.example:443");
  EXPECT_EQ(NormalizeAddress("dns:///leader:1"), "leader:1");
  EXPECT_EQ(NormalizeAddress("ipv4:127.0.0.1:7"), NormalizeAddress("localhost:7"));
  EXPECT_EQ(NormalizeAddress("[::1]:7"), NormalizeAddress("127.0.0.1:7"));
  EXPECT_NE(NormalizeAddress("127.0.0.1:7"), NormalizeAddress("127.0.0.1:8"));
}

TEST(AssignmentChecks, TrustOptionsComeInPairsAndNameTwoServers) {
  ParticipantOptions o;
  EXPECT_THAT(ValidateTrustOptions(o), IsOk());
  o.leader_address = "a:1";
  EXPECT_THAT(ValidateTrustOptions(o), StatusIs(absl::StatusCode::kInvalidArgument));
  o.helper_address = "b:1";
  EXPECT_THAT(ValidateTrustOptions(o), IsOk());
  o.leader_name = "leader.tandem";
  EXPECT_THAT(ValidateTrustOptions(o), StatusIs(absl::StatusCode::kInvalidArgument));
  o.helper_name = "LEADER.tandem";
  EXPECT_THAT(ValidateTrustOptions(o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("distinct")));
  o.helper_name = "helper.tandem";
  EXPECT_THAT(ValidateTrustOptions(o), IsOk());
  o.helper_address = "A:1";
  EXPECT_THAT(ValidateTrustOptions(o), StatusIs(absl::StatusCode::kInvalidArgument));
  o.helper_address = "b:1";
  o.max_model_bytes = 0;
  EXPECT_THAT(ValidateTrustOptions(o), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(AssignmentChecks, UnpinnedEndpointsAreTrustedButNeverOneServerForBoth) {
  ParticipantOptions o;
  TANDEM_ASSERT_OK_AND_ASSIGN(UploadEndpoints e,
                              ResolveUploadEndpoints(o, Ep("a:1", "x"), Ep("b:1", "y")));
  EXPECT_FALSE(e.pinned);
  EXPECT_EQ(e.leader.server_name(), "x");
  EXPECT_EQ(e.helper.address(), "b:1");
  // Loopback aggregators on two ports are two servers.
  EXPECT_THAT(ResolveUploadEndpoints(o, Ep("127.0.0.1:5"), Ep("127.0.0.1:6")).status(), IsOk());
  EXPECT_THAT(ResolveUploadEndpoints(o, Ep("localhost:5"), Ep("127.0.0.1:5")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("both")));
  EXPECT_THAT(ResolveUploadEndpoints(o, Ep("a:1", "same"), Ep("b:1", "SAME")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(ResolveUploadEndpoints(o, Ep(""), Ep("b:1")).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(AssignmentChecks, PinsAreEnforcedAndTheirNamesUsed) {
  ParticipantOptions o;
  o.leader_address = "leader:1";
  o.helper_address = "helper:1";
  TANDEM_ASSERT_OK_AND_ASSIGN(UploadEndpoints e,
                              ResolveUploadEndpoints(o, Ep("leader:1"), Ep("helper:1")));
  EXPECT_TRUE(e.pinned);
  EXPECT_THAT(ResolveUploadEndpoints(o, Ep("helper:1"), Ep("leader:1")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("pins leader")));
  EXPECT_THAT(ResolveUploadEndpoints(o, Ep("leader:1"), Ep("leader:1")).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition));
  // Names only: any address, but the uploads verify the pinned identities,
  // and a coordinator naming another identity is refused.
  ParticipantOptions n;
  n.leader_name = "leader.tandem";
  n.helper_name = "helper.tandem";
  TANDEM_ASSERT_OK_AND_ASSIGN(e, ResolveUploadEndpoints(n, Ep("10.0.0.1:1"), Ep("10.0.0.2:1")));
  EXPECT_TRUE(e.pinned);
  EXPECT_EQ(e.leader.server_name(), "leader.tandem");
  EXPECT_EQ(e.helper.server_name(), "helper.tandem");
  EXPECT_THAT(ResolveUploadEndpoints(n, Ep("10.0.0.1:1", "leader.tandem"),
                                     Ep("10.0.0.2:1", "helper.tandem"))
                  .status(),
              IsOk());
  EXPECT_THAT(ResolveUploadEndpoints(n, Ep("10.0.0.1:1", "leader.tandem"),
                                     Ep("10.0.0.2:1", "leader.tandem"))
                  .status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, HasSubstr("helper identity")));
}

proto::CheckInResponse Assignment() {
  proto::CheckInResponse t;
  t.set_task_id("t");
  t.set_round_id(3);
  proto::RoundParameters* rp = t.mutable_round_parameters();
  rp->set_task_id("t");
  rp->set_round_id(3);
  rp->set_dimension(64);
  rp->set_num_groups(2);
  rp->mutable_group_parameters()->set_log_num_blocks(2);
  rp->mutable_group_parameters()->set_block_size(8);
  return t;
}

TEST(AssignmentChecks, TicketsAreParsedAndMatchedToTheAssignment) {
  proto::CheckInResponse t = Assignment();
  TANDEM_ASSERT_OK_AND_ASSIGN(std::optional<proto::UploadTicket> none, CheckAssignmentTicket(t));
  EXPECT_FALSE(none.has_value());  // an unticketed deployment
  proto::UploadTicket u;
  u.set_task_id("t");
  u.set_round_id(3);
  u.set_ticket_id(std::string(16, 'i'));
  t.mutable_ticket()->set_ticket(u.SerializeAsString());
  TANDEM_ASSERT_OK_AND_ASSIGN(std::optional<proto::UploadTicket> got, CheckAssignmentTicket(t));
  ASSERT_TRUE(got.has_value());
  EXPECT_EQ(got->ticket_id(), std::string(16, 'i'));
  u.set_ticket_id(std::string(17, 'i'));
  t.mutable_ticket()->set_ticket(u.SerializeAsString());
  EXPECT_THAT(CheckAssignmentTicket(t).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("17 bytes")));
  t.mutable_ticket()->clear_ticket();
  EXPECT_THAT(CheckAssignmentTicket(t).status(), StatusIs(absl::StatusCode::kInvalidArgument));
  u.set_ticket_id(std::string(16, 'i'));
  u.set_round_id(4);
  t.mutable_ticket()->set_ticket(u.SerializeAsString());
  EXPECT_THAT(CheckAssignmentTicket(t).status(), StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(AssignmentChecks, RoundBounds) {
  ParticipantOptions o;
  EXPECT_THAT(CheckRoundBounds(Assignment(), o), IsOk());
  proto::CheckInResponse t = Assignment();
  t.mutable_round_parameters()->set_dimension(0);
  EXPECT_THAT(CheckRoundBounds(t, o), StatusIs(absl::StatusCode::kInvalidArgument));
  // Factors whose 32-bit product would wrap to D are caught (k * B * 2^d is
  // computed from bounded factors).
  t = Assignment();
  t.mutable_round_parameters()->set_num_groups(4097);
  EXPECT_THAT(CheckRoundBounds(t, o), StatusIs(absl::StatusCode::kInvalidArgument));
  t = Assignment();
  t.mutable_round_parameters()->mutable_group_parameters()->set_log_num_blocks(60);
  EXPECT_THAT(CheckRoundBounds(t, o), StatusIs(absl::StatusCode::kInvalidArgument));
  t = Assignment();
  t.mutable_round_parameters()->mutable_group_parameters()->set_block_size(0);
  EXPECT_THAT(CheckRoundBounds(t, o), StatusIs(absl::StatusCode::kInvalidArgument));
  o.max_dimension = 32;
  EXPECT_THAT(CheckRoundBounds(Assignment(), o),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_dimension")));
  // The response's own copies must agree with the round parameters.
  o = ParticipantOptions();
  t = Assignment();
  t.set_dimension(128);
  EXPECT_THAT(CheckRoundBounds(t, o), StatusIs(absl::StatusCode::kInvalidArgument));
  t = Assignment();
  t.set_dimension(64);
  t.set_num_groups(2);
  EXPECT_THAT(CheckRoundBounds(t, o), IsOk());
}

TEST(AssignmentChecks, TrainingBoundsAndModelSize) {
  ParticipantOptions o;
  proto::TrainingConfig tc;
  tc.mutable_model()->set_input_dim(3);
  tc.mutable_model()->add_hidden(4);
  tc.mutable_model()->set_num_classes(2);
  TANDEM_ASSERT_OK_AND_ASSIGN(uint64_t params, CheckTrainingBounds(tc, o));
  EXPECT_EQ(params, 26u);
  auto bad = [&](auto mutate) {
    proto::TrainingConfig c = tc;
    mutate(c);
    return CheckTrainingBounds(c, o).status();
  };
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  EXPECT_THAT(bad([](auto& c) { c.set_local_epochs(kMaxLocalEpochs + 1); }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& c) { c.set_local_steps(kMaxLocalSteps + 1); }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& c) { c.set_batch_size(kMaxBatchSize + 1); }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& c) { c.set_learning_rate(INFINITY); }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& c) { c.set_learning_rate(-1); }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& c) { c.set_momentum(1.0); }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& c) { c.set_coido_fraction(NAN); }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& c) { c.mutable_model()->set_num_classes(1); }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& c) { c.mutable_model()->set_input_dim(0); }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& c) { c.mutable_model()->set_hidden(0, -5); }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& c) {
                for (int i = 0; i < kMaxHiddenLayers; ++i) c.mutable_model()->add_hidden(2);
              }),
              StatusIs(kInvalid));
  // Widest layers allowed, but far more parameters than 256 MiB of floats.
  EXPECT_THAT(bad([](auto& c) {
                c.mutable_model()->set_input_dim(kMaxLayerWidth);
                c.mutable_model()->set_hidden(0, kMaxLayerWidth);
              }),
              StatusIs(kInvalid, HasSubstr("max_model_bytes")));
  o.max_model_bytes = 100;  // 26 floats need 104
  EXPECT_THAT(CheckTrainingBounds(tc, o).status(), StatusIs(kInvalid));
}

// Issue 33: an opaque model (named tensors the app trains) is bounded as
// strictly as an MLP before anything is allocated.
TEST(AssignmentChecks, OpaqueModelBounds) {
  ParticipantOptions o;
  proto::TrainingConfig tc;
  proto::TensorSpec* w = tc.mutable_model()->add_tensors();
  w->set_name("conv.weight");
  for (int64_t d : {8, 1, 3, 3}) w->add_shape(d);
  tc.mutable_model()->add_tensors()->set_name("scale");  // a scalar
  TANDEM_ASSERT_OK_AND_ASSIGN(uint64_t params, CheckTrainingBounds(tc, o));
  EXPECT_EQ(params, 73u);
  const auto kInvalid = absl::StatusCode::kInvalidArgument;
  auto bad = [&](auto mutate) {
    proto::TrainingConfig c = tc;
    mutate(*c.mutable_model());
    return CheckTrainingBounds(c, o).status();
  };
  EXPECT_THAT(bad([](auto& m) { m.mutable_tensors(1)->set_name("conv.weight"); }),
              StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& m) { m.mutable_tensors(1)->set_name(""); }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& m) { m.mutable_tensors(0)->set_shape(0, 0); }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& m) { m.mutable_tensors(0)->set_shape(0, -1); }), StatusIs(kInvalid));
  EXPECT_THAT(bad([](auto& m) { m.set_num_classes(1); }), StatusIs(kInvalid));
  // 2^31 x 2^31 would overflow a careless product.
  EXPECT_THAT(bad([](auto& m) {
                m.mutable_tensors(0)->set_shape(0, int64_t{1} << 31);
                m.mutable_tensors(0)->set_shape(1, int64_t{1} << 31);
              }),
              StatusIs(kInvalid, HasSubstr("max_model_bytes")));
  o.max_model_bytes = 4 * 72;  // one float short
  EXPECT_THAT(CheckTrainingBounds(tc, o).status(), StatusIs(kInvalid));
}

TEST(AssignmentChecks, RecycledLayersInRange) {
  proto::TrainingConfig tc;
  EXPECT_THAT(CheckRecycledLayers(tc, 4), IsOk());
  tc.add_recycled_layers(1);
  tc.add_recycled_layers(3);
  EXPECT_THAT(CheckRecycledLayers(tc, 4), IsOk());
  EXPECT_THAT(CheckRecycledLayers(tc, 3), StatusIs(absl::StatusCode::kInvalidArgument));
  tc.add_recycled_layers(3);
  EXPECT_THAT(CheckRecycledLayers(tc, 4), StatusIs(absl::StatusCode::kInvalidArgument));
}

std::string Blob(std::vector<int64_t> shape, size_t values) {
  proto::Model m;
  proto::Tensor* t = m.add_layers();
  t->set_dtype(proto::DTYPE_FLOAT32);
  for (int64_t d : shape) t->add_shape(d);
  t->set_data(std::string(values * sizeof(float), '\0'));
  return m.SerializeAsString();
}

TEST(AssignmentChecks, ModelBlobsAreCheckedAgainstTheSpec) {
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<float> v, ParseModelBlob(Blob({2, 3}, 6), 6, 1 << 20));
  EXPECT_EQ(v.size(), 6u);
  EXPECT_THAT(ParseModelBlob(Blob({6}, 6), 7, 1 << 20).status(),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ParseModelBlob(Blob({2, 2}, 6), 6, 1 << 20).status(),
              StatusIs(absl::StatusCode::kDataLoss));
  // A shape whose product overflows 64 bits is not mistaken for a match.
  EXPECT_THAT(ParseModelBlob(Blob({int64_t{1} << 32, int64_t{1} << 32, 6}, 6), 6, 1 << 20).status(),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(ParseModelBlob(Blob({-1, -6}, 6), 6, 1 << 20).status(),
              StatusIs(absl::StatusCode::kDataLoss));
  EXPECT_THAT(ParseModelBlob(Blob({6}, 6), 6, 10).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("max_model_bytes")));
  proto::Model two;
  two.add_layers();
  two.add_layers();
  EXPECT_THAT(ParseModelBlob(two.SerializeAsString(), 0, 1 << 20).status(),
              StatusIs(absl::StatusCode::kDataLoss));
}

}  // namespace
}  // namespace tandem::client

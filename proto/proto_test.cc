// Wire messages: round trips and the chunked-download invariant.
#include <string>

#include "google/protobuf/descriptor.h"
#include "gtest/gtest.h"
#include "proto/aggregator.grpc.pb.h"
#include "proto/common.pb.h"
#include "proto/config.pb.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/dpf.pb.h"
#include "proto/worker.grpc.pb.h"

namespace tandem::proto {
namespace {

TEST(Proto, SparseKeySetRoundTrips) {
  SparseKeySet set;
  set.set_num_groups(2);
  set.mutable_group_parameters()->set_log_num_blocks(3);
  set.mutable_group_parameters()->set_block_size(4);
  BlockDpfKey* key = set.add_keys();
  key->set_party(1);
  key->set_seed(std::string(16, '\x07'));
  key->add_value_correction(0xffffffffffffffffULL);
  const std::string wire = set.SerializeAsString();
  SparseKeySet back;
  ASSERT_TRUE(back.ParseFromString(wire));
  EXPECT_EQ(back.keys(0).value_correction(0), 0xffffffffffffffffULL);
  EXPECT_EQ(back.keys(0).seed(), std::string(16, '\x07'));
}

TEST(Proto, TruncatedBytesFailToParse) {
  UploadRequest req;
  req.set_report_id(std::string(16, 'r'));
  req.mutable_key_share()->add_keys()->set_seed(std::string(16, 's'));
  std::string wire = req.SerializeAsString();
  wire.resize(wire.size() - 3);
  UploadRequest back;
  EXPECT_FALSE(back.ParseFromString(wire));
}

TEST(Proto, ServicesDeclareExpectedMethods) {
  // Look services up through a message of the same file, which also makes
  // sure that file's descriptors are linked in.
  const auto* upload = UploadRequest::descriptor()->file()->FindServiceByName("AggregatorUpload");
  ASSERT_NE(upload, nullptr);
  EXPECT_NE(upload->FindMethodByName("Upload"), nullptr);
  const auto* peer = UploadRequest::descriptor()->file()->FindServiceByName("AggregatorPeer");
  ASSERT_NE(peer, nullptr);
  EXPECT_NE(peer->FindMethodByName("Verify"), nullptr);
  const auto* coord = CheckInRequest::descriptor()->file()->FindServiceByName("Coordinator");
  ASSERT_NE(coord, nullptr);
  const auto* download = coord->FindMethodByName("DownloadModel");
  ASSERT_NE(download, nullptr);
  EXPECT_TRUE(download->server_streaming());
  const auto* worker = KernelRequest::descriptor()->file()->FindServiceByName("Worker");
  ASSERT_NE(worker, nullptr);
  EXPECT_NE(worker->FindMethodByName("Run"), nullptr);
}

}  // namespace
}  // namespace tandem::proto

#include "ml/model/checkpoint.h"

#include <cstdio>
#include <string>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "ml/model/model_zoo.h"

namespace tandem::ml {
namespace {

using ::tandem::testing::StatusIs;
using ::testing::HasSubstr;

std::unique_ptr<Model> SmallModel(uint64_t seed) {
  auto m = *MakeMlp(8, {6}, 3);
  m->InitFromSeed(seed);
  return m;
}

TEST(Checkpoint, RoundTripsThroughBytesAndFiles) {
  auto a = SmallModel(1), b = SmallModel(2);
  const std::string bytes = SerializeCheckpoint(*a);
  EXPECT_EQ(bytes.substr(0, 8), "TNDMCKPT");
  TANDEM_ASSERT_OK(DeserializeCheckpoint(bytes, b.get()));
  EXPECT_EQ(a->Flatten(), b->Flatten());
  const std::string path = ::testing::TempDir() + "/ckpt_roundtrip.bin";
  auto c = SmallModel(3);
  TANDEM_ASSERT_OK(SaveCheckpoint(*a, path));
  TANDEM_ASSERT_OK(LoadCheckpoint(path, c.get()));
  EXPECT_EQ(a->Flatten(), c->Flatten());
  std::remove(path.c_str());
}

TEST(Checkpoint, EverySingleByteFlipIsRejected) {
  auto a = SmallModel(1);
  const std::string good = SerializeCheckpoint(*a);
  auto b = SmallModel(2);
  const std::vector<float> before = b->Flatten();
  for (size_t i = 0; i < good.size(); ++i) {
    std::string bad = good;
    bad[i] ^= 0x20;
    EXPECT_FALSE(DeserializeCheckpoint(bad, b.get()).ok()) << "byte " << i;
  }
  EXPECT_EQ(b->Flatten(), before);  // unchanged on error
  std::string payload_flip = good;
  payload_flip[good.size() - 10] ^= 1;
  EXPECT_THAT(DeserializeCheckpoint(payload_flip, b.get()),
              StatusIs(absl::StatusCode::kDataLoss, HasSubstr("CRC")));
}

TEST(Checkpoint, RejectsTruncationWrongArchitectureAndMissingFile) {
  auto a = SmallModel(1);
  const std::string good = SerializeCheckpoint(*a);
  for (size_t len : {size_t{0}, size_t{7}, size_t{30}, good.size() - 1}) {
    EXPECT_THAT(DeserializeCheckpoint(good.substr(0, len), a.get()),
                StatusIs(absl::StatusCode::kInvalidArgument));
  }
  auto other = *MakeMlp(8, {7}, 3);
  EXPECT_THAT(DeserializeCheckpoint(good, other.get()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("fingerprint")));
  EXPECT_THAT(DeserializeCheckpoint(std::string(64, 'x'), a.get()),
              StatusIs(absl::StatusCode::kInvalidArgument, HasSubstr("magic")));
  EXPECT_THAT(LoadCheckpoint("/nonexistent/dir/x.bin", a.get()),
              StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace tandem::ml

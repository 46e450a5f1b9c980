#include "base/grpc_status.h"

#include "gtest/gtest.h"

namespace tandem {
namespace {

TEST(GrpcStatus, RoundTripsEveryCode) {
  for (int c = 1; c <= 16; ++c) {
    const absl::Status s(static_cast<absl::StatusCode>(c), "msg");
    const grpc::Status g = ToGrpcStatus(s);
    EXPECT_EQ(static_cast<int>(g.error_code()), c);
    EXPECT_EQ(g.error_message(), "msg");
    EXPECT_EQ(FromGrpcStatus(g), s);
  }
}

TEST(GrpcStatus, OkMapsToOk) {
  EXPECT_TRUE(ToGrpcStatus(absl::OkStatus()).ok());
  EXPECT_TRUE(FromGrpcStatus(grpc::Status::OK).ok());
}

TEST(GrpcStatus, InvalidArgumentKeepsMeaning) {
  const grpc::Status g = ToGrpcStatus(absl::InvalidArgumentError("truncated key"));
  EXPECT_EQ(g.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

}  // namespace
}  // namespace tandem

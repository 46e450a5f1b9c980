#include "tests/arch/include_rules.h"

#include <set>
#include <string>

#include "base/testing/status_matchers.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tandem::arch {
namespace {

using ::testing::IsEmpty;
using ::testing::SizeIs;

TEST(IncludeRules, SourceTreeFollowsTheArchitecture) {
  TANDEM_ASSERT_OK_AND_ASSIGN(std::vector<Violation> violations,
                              CheckTree(TANDEM_SOURCE_DIR));
  for (const Violation& v : violations) ADD_FAILURE() << FormatViolation(v);
  EXPECT_THAT(violations, IsEmpty());
}

TEST(IncludeRules, CryptoMayNotDependOnAggregator) {
  auto v = CheckFile("crypto/dpf/dpf.cc", "#include \"aggregator/core/round.h\"\n");
  ASSERT_THAT(v, SizeIs(1));
  EXPECT_EQ(v[0].line, 1);
  EXPECT_EQ(v[0].include, "aggregator/core/round.h");
}

TEST(IncludeRules, CryptoMayUseBaseAndProtoMessages) {
  EXPECT_THAT(CheckFile("crypto/dpf/dpf.cc",
                        "#include \"base/status_macros.h\"\n"
                        "#include \"proto/dpf.pb.h\"\n#include <openssl/evp.h>\n"),
              IsEmpty());
}

TEST(IncludeRules, GrpcOnlyInAdapters) {
  EXPECT_THAT(CheckFile("aggregator/core/round.cc", "#include <grpcpp/grpcpp.h>\n"), SizeIs(1));
  EXPECT_THAT(CheckFile("aggregator/core/round.cc", "#include \"proto/aggregator.grpc.pb.h\"\n"),
              SizeIs(1));
  EXPECT_THAT(CheckFile("aggregator/service/upload_service.cc", "#include <grpcpp/grpcpp.h>\n"),
              IsEmpty());
  EXPECT_THAT(CheckFile("client/transport/grpc_transport.cc", "  #  include <grpcpp/grpcpp.h>\n"),
              IsEmpty());
  EXPECT_THAT(CheckFile("ml/worker/worker_main.cc", "#include <grpcpp/grpcpp.h>\n"), IsEmpty());
}

TEST(IncludeRules, PrometheusOnlyInAdaptersAndBaseMetrics) {
  EXPECT_THAT(CheckFile("aggregator/core/a.cc", "#include <prometheus/counter.h>\n"), SizeIs(1));
  EXPECT_THAT(CheckFile("server/core/a.cc", "#include \"base/metrics_server.h\"\n"), SizeIs(1));
  EXPECT_THAT(CheckFile("aggregator/service/m.cc", "#include <prometheus/counter.h>\n"),
              IsEmpty());
  EXPECT_THAT(CheckFile("base/metrics_server.cc", "#include <prometheus/exposer.h>\n"), IsEmpty());
  EXPECT_THAT(CheckFile("base/grpc_metrics.cc", "#include <grpcpp/grpcpp.h>\n"), IsEmpty());
  EXPECT_THAT(CheckFile("ml/model/m.cc", "#include \"base/grpc_metrics.h\"\n"), SizeIs(1));
}

TEST(IncludeRules, MlNeverSeesProtoButWorkerDoes) {
  EXPECT_THAT(CheckFile("ml/model/model.cc", "#include \"proto/common.pb.h\"\n"), SizeIs(1));
  // ml/spec bridges proto to ml; ml itself may not include it.
  EXPECT_THAT(CheckFile("ml/spec/model_from_spec.cc",
                        "#include \"proto/coordinator.pb.h\"\n#include \"ml/model/model.h\"\n"),
              IsEmpty());
  EXPECT_THAT(CheckFile("ml/model/model.cc", "#include \"ml/spec/model_from_spec.h\"\n"),
              SizeIs(1));
  EXPECT_THAT(CheckFile("client/internal/x.cc", "#include \"ml/spec/model_from_spec.h\"\n"),
              IsEmpty());
  EXPECT_THAT(CheckFile("ml/worker/service.cc",
                        "#include \"proto/common.pb.h\"\n#include \"ml/kernels/kernel.h\"\n"),
              IsEmpty());
}

// ARCHITECTURE.md: server/ never links client/ or aggregator/; it may use
// ml/ for FedLUAR's server side and the server optimizers.
TEST(IncludeRules, ServerNeverLinksClientOrAggregator) {
  auto v = CheckFile("server/core/rounds.cc",
                     "#include \"client/include/tandem/client/client.h\"\n"
                     "#include \"aggregator/core/round.h\"\n#include \"ml/fedluar/fedluar.h\"\n"
                     "#include \"crypto/fixed_point.h\"\n");
  EXPECT_THAT(v, SizeIs(2));
}

TEST(IncludeRules, ClientPublicHeadersStayClean) {
  auto v = CheckFile("client/include/tandem/client/client.h",
                     "#include <Eigen/Dense>\n#include \"client/internal/x.h\"\n"
                     "#include <cuda_runtime.h>\n");
  std::set<int> lines;
  for (const Violation& x : v) lines.insert(x.line);
  EXPECT_THAT(lines, ::testing::ElementsAre(1, 2, 3));
}

TEST(IncludeRules, InternalHeadersArePrivate) {
  EXPECT_THAT(CheckFile("aggregator/core/a.cc", "#include \"crypto/internal/v.h\"\n"), SizeIs(1));
  EXPECT_THAT(CheckFile("crypto/dpf/a.cc", "#include \"crypto/internal/v.h\"\n"), IsEmpty());
}

TEST(IncludeRules, CryptoStaysPureAndBaseStaysSmall) {
  EXPECT_THAT(CheckFile("crypto/a.cc", "#include <tbb/parallel_for.h>\n#include <thread>\n"),
              SizeIs(2));
  EXPECT_THAT(CheckFile("base/a.cc", "#include \"crypto/aes.h\"\n"), SizeIs(1));
  EXPECT_THAT(CheckFile("ml/kernels/cat.cc", "#include <cuda_runtime.h>\n"), SizeIs(1));
  EXPECT_THAT(CheckFile("ml/kernels/cat/cuda/cat.cu", "#include <cuda_runtime.h>\n"), IsEmpty());
}

TEST(IncludeRules, TestsMayUseAnything) {
  EXPECT_THAT(CheckFile("tests/integration/x.cc",
                        "#include <grpcpp/grpcpp.h>\n#include \"aggregator/core/r.h\"\n"),
              IsEmpty());
}

// tandem-sim (server/sim) composes every module and the test helpers; the
// rest of server/ still may not include them.
TEST(IncludeRules, SimulatorMayUseWhatTestsMay) {
  const std::string includes =
      "#include <grpcpp/grpcpp.h>\n#include \"client/internal/report_builder.h\"\n"
      "#include \"tests/testing/certificates.h\"\n#include \"aggregator/core/r.h\"\n";
  EXPECT_THAT(CheckFile("server/sim/federation.cc", includes), IsEmpty());
  EXPECT_THAT(CheckFile("server/simulator.cc", includes), SizeIs(5));
  EXPECT_THAT(CheckFile("server/core/a.cc", "#include \"tests/testing/certificates.h\"\n"),
              SizeIs(1));
}

TEST(IncludeRules, MissingRootIsNotFound) {
  EXPECT_THAT(CheckTree("/nonexistent/tandem"),
              ::tandem::testing::StatusIs(absl::StatusCode::kNotFound));
}

}  // namespace
}  // namespace tandem::arch

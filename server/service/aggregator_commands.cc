#include "server/service/aggregator_commands.h"

#include <grpcpp/create_channel.h>

#include <chrono>
#include <cstdio>

#include "absl/strings/str_cat.h"
#include "base/grpc_policy.h"
#include "base/grpc_status.h"
#include "base/status_macros.h"
#include "google/protobuf/text_format.h"
#include "proto/aggregator_admin.grpc.pb.h"

namespace tandem::server {

absl::Status RunAggregatorCommand(const std::string& verb, const AggregatorCommandArgs& args) {
  if (args.admin.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("aggregator ", verb, " needs --admin=HOST:PORT"));
  }
  TANDEM_ASSIGN_OR_RETURN(auto creds, MakeChannelCredentials(args.tls));
  auto stub = proto::AggregatorAdmin::NewStub(
      grpc::CreateCustomChannel(args.admin, creds, rpc::ChannelArgs()));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc::kOperatorCallDeadline));
  if (verb == "provision") {
    proto::ProvisionTaskRequest req;
    req.mutable_task()->set_task_id(args.task);
    req.mutable_task()->set_population(args.population);
    if (!google::protobuf::TextFormat::ParseFromString(args.policy,
                                                       req.mutable_task()->mutable_policy())) {
      return absl::InvalidArgumentError(
          absl::StrCat("--policy is not a PrivacyPolicy textproto: '", args.policy, "'"));
    }
    proto::ProvisionTaskResponse r;
    TANDEM_RETURN_IF_ERROR(FromGrpcStatus(stub->ProvisionTask(&ctx, req, &r)));
    std::printf("task %s %s\n", args.task.c_str(),
                r.created() ? "provisioned" : "already provisioned with these terms");
    return absl::OkStatus();
  }
  if (verb == "list") {
    proto::ListProvisionedTasksResponse r;
    TANDEM_RETURN_IF_ERROR(FromGrpcStatus(stub->ListProvisionedTasks(&ctx, {}, &r)));
    if (r.open()) std::printf("(open: any other task id gets the default policy)\n");
    for (const proto::ProvisionedTask& t : r.tasks()) {
      std::printf(
          "%s population=%s origin=%s%s epsilon_budget=%g delta=%g min_batch=%u "
          "min_noise_multiplier=%g\n",
          t.task_id().c_str(), t.population().c_str(), t.origin().c_str(),
          t.retired() ? " retired" : "", t.policy().epsilon_budget(), t.policy().delta(),
          t.policy().min_batch_size(), t.policy().min_noise_multiplier());
    }
    return absl::OkStatus();
  }
  if (verb == "retire") {
    proto::RetireTaskRequest req;
    req.set_task_id(args.task);
    proto::RetireTaskResponse r;
    TANDEM_RETURN_IF_ERROR(FromGrpcStatus(stub->RetireTask(&ctx, req, &r)));
    std::printf("task %s retired\n", args.task.c_str());
    return absl::OkStatus();
  }
  return absl::InvalidArgumentError("aggregator: provision, list or retire");
}

}  // namespace tandem::server

// tandem-status: prints a coordinator's task status and round history, and
// with --worker the models a tandem-worker holds (name, version, bytes).
//   tandem-status --coordinator=127.0.0.1:7000 --insecure_plaintext [--json]
//   tandem-status --admin=127.0.0.1:7001 --tls_cert=ops.pem --tls_key=ops.key
//                 --tls_ca=coordinator-roots.pem --server_name=coordinator.tandem
//   tandem-status --worker=127.0.0.1:7100 [--tls_cert ... --worker_name=worker.tandem]
// The public listener (--coordinator) answers anyone and omits the open
// round's live counts and the worker's address and errors; the operator's
// admin listener (--admin, mutual TLS) shows them.
#include <grpcpp/create_channel.h>

#include <cstdio>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "base/grpc_credentials.h"
#include "base/grpc_policy.h"
#include "base/grpc_status.h"
#include "google/protobuf/util/json_util.h"
#include "proto/coordinator.grpc.pb.h"
#include "proto/worker.grpc.pb.h"

ABSL_FLAG(std::string, coordinator, "", "coordinator host:port (its public listener)");
ABSL_FLAG(std::string, admin, "",
          "the coordinator's admin listener host:port instead: the full status (operators)");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM certificate chain presented to --admin / --worker (mutual TLS)");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert");
ABSL_FLAG(std::string, worker_name, "worker.tandem",
          "TLS name the worker's certificate must carry (with TLS)");
ABSL_FLAG(std::string, task_id, "", "task (empty = the coordinator's)");
ABSL_FLAG(bool, insecure_plaintext, false, "no TLS (local runs only)");
ABSL_FLAG(std::string, tls_ca, "", "PEM roots verifying the coordinator");
ABSL_FLAG(std::string, server_name, "",
          "TLS name the coordinator's certificate must carry, e.g. coordinator.tandem "
          "(default: the host of --coordinator)");
ABSL_FLAG(bool, json, false, "print the raw status as JSON");
ABSL_FLAG(std::string, worker, "",
          "also list the models this tandem-worker holds (host:port; TLS unless "
          "--insecure_plaintext)");

namespace {

// Prints the worker's ListModels; 0 on success, 1 on an RPC error.
int PrintWorker(const std::string& address, bool json,
                const std::shared_ptr<grpc::ChannelCredentials>& creds, bool tls) {
  grpc::ChannelArguments args = tandem::rpc::ChannelArgs();
  if (tls) args.SetSslTargetNameOverride(absl::GetFlag(FLAGS_worker_name));
  auto stub = tandem::proto::Worker::NewStub(grpc::CreateCustomChannel(address, creds, args));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  tandem::proto::ListModelsResponse r;
  const absl::Status st =
      tandem::FromGrpcStatus(stub->ListModels(&ctx, tandem::proto::ListModelsRequest(), &r));
  if (!st.ok()) {
    std::fprintf(stderr, "tandem-status: worker %s: %s\n", address.c_str(), st.ToString().c_str());
    return 1;
  }
  if (json) {
    std::string out;
    (void)google::protobuf::util::MessageToJsonString(r, &out);
    std::printf("%s\n", out.c_str());
    return 0;
  }
  std::printf("worker %s: %d models, %lld of %lld bytes\n", address.c_str(), r.models_size(),
              static_cast<long long>(r.used_bytes()), static_cast<long long>(r.max_bytes()));
  for (const auto& m : r.models()) {
    std::printf("  %s version %llu (%s, %lld bytes, %lld training steps)\n", m.name().c_str(),
                static_cast<unsigned long long>(m.version()), m.kind().c_str(),
                static_cast<long long>(m.bytes()), static_cast<long long>(m.train_steps()));
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  absl::SetProgramUsageMessage("tandem-status --coordinator=host:port");
  absl::ParseCommandLine(argc, argv);
  const std::string worker = absl::GetFlag(FLAGS_worker);
  const std::string admin = absl::GetFlag(FLAGS_admin);
  const std::string target = admin.empty() ? absl::GetFlag(FLAGS_coordinator) : admin;
  tandem::TlsFiles tls;
  tls.insecure_plaintext = absl::GetFlag(FLAGS_insecure_plaintext);
  tls.root_ca_path = absl::GetFlag(FLAGS_tls_ca);
  tls.cert_chain_path = absl::GetFlag(FLAGS_tls_cert);
  tls.private_key_path = absl::GetFlag(FLAGS_tls_key);
  auto creds = tandem::MakeChannelCredentials(tls);
  if (!creds.ok()) {
    std::fprintf(stderr, "tandem-status: %s\n", creds.status().ToString().c_str());
    return 2;
  }
  if (target.empty() && !worker.empty()) {
    return PrintWorker(worker, absl::GetFlag(FLAGS_json), *creds, !tls.insecure_plaintext);
  }
  if (target.empty()) {
    std::fprintf(stderr, "tandem-status: --coordinator or --admin is required\n");
    return 2;
  }
  grpc::ChannelArguments args = tandem::rpc::ChannelArgs();
  if (!tls.insecure_plaintext && !absl::GetFlag(FLAGS_server_name).empty()) {
    args.SetSslTargetNameOverride(absl::GetFlag(FLAGS_server_name));
  }
  auto channel = grpc::CreateCustomChannel(target, *creds, args);
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  tandem::proto::CoordinatorStatusRequest req;
  req.set_task_id(absl::GetFlag(FLAGS_task_id));
  tandem::proto::CoordinatorStatusResponse s;
  const absl::Status st = tandem::FromGrpcStatus(
      admin.empty() ? tandem::proto::Coordinator::NewStub(channel)->Status(&ctx, req, &s)
                    : tandem::proto::CoordinatorAdmin::NewStub(channel)->Status(&ctx, req, &s));
  if (!st.ok()) {
    std::fprintf(stderr, "tandem-status: %s\n", st.ToString().c_str());
    return 1;
  }
  if (absl::GetFlag(FLAGS_json)) {
    std::string out;
    (void)google::protobuf::util::MessageToJsonString(s, &out);
    std::printf("%s\n", out.c_str());
    return worker.empty() ? 0 : PrintWorker(worker, true, *creds, !tls.insecure_plaintext);
  }
  std::printf("task %s: %s, %llu/%llu rounds released, epsilon %.4g, accuracy %.4f\n",
              s.task_id().c_str(), s.phase().c_str(),
              static_cast<unsigned long long>(s.completed_rounds()),
              static_cast<unsigned long long>(s.total_rounds()), s.epsilon_spent(),
              s.last_accuracy());
  if (s.phase() == "collecting" && !admin.empty()) {
    std::printf("aggregation round %llu: %llu assigned, %llu uploaded\n",
                static_cast<unsigned long long>(s.aggregation_round()),
                static_cast<unsigned long long>(s.assigned()),
                static_cast<unsigned long long>(s.uploads_done()));
  }
  if (!s.done_reason().empty()) std::printf("done: %s\n", s.done_reason().c_str());
  if (s.has_worker()) {
    const auto& w = s.worker();
    std::printf(
        "worker %s%s holds %s version %llu (%llu rounds evaluated there, %llu failed%s%s)\n",
        w.address().empty() ? "(address: --admin)" : "", w.address().c_str(),
        w.model_name().c_str(), static_cast<unsigned long long>(w.model_version()),
        static_cast<unsigned long long>(w.evaluations()),
        static_cast<unsigned long long>(w.failures()), w.last_error().empty() ? "" : ": ",
        w.last_error().c_str());
  }
  if (s.has_last_evaluation()) {
    const auto& e = s.last_evaluation();
    std::printf(
        "federated evaluation of version %llu: accuracy %.4f, loss %.4f over ~%.0f "
        "held-out examples of %llu devices (noise sd %.1f examples)\n",
        static_cast<unsigned long long>(e.model_version()), e.accuracy(), e.loss(), e.examples(),
        static_cast<unsigned long long>(e.reports()), e.count_stddev());
  }
  // An "E" row is a federated evaluation of that version (its accuracy noised).
  // up/dense: the uploads against Prio3-style dense two-server sharing of
  // the same updates (server/core/upload_baselines.h; below 1: smaller).
  // enc: the round's report encoding (preamble or dense, secure_sum.h).
  std::printf("%9s %6s %8s %8s %9s %8s %12s %8s %8s %12s %-8s\n", "version", "agg", "assigned",
              "accepted", "accuracy", "epsilon", "bytes_up", "up/clear", "up/dense", "bytes_down",
              "enc");
  for (const auto& r : s.history()) {
    const auto ratio = [&](uint64_t base) {
      return base > 0 ? static_cast<double>(r.bytes_up()) / base : 0.0;
    };
    std::printf("%8llu%s %6llu %8llu %8llu %9.4f %8.4g %12llu %8.3f %8.3f %12llu %-8s\n",
                static_cast<unsigned long long>(r.model_version()), r.has_evaluation() ? "E" : " ",
                static_cast<unsigned long long>(r.aggregation_round()),
                static_cast<unsigned long long>(r.assigned()),
                static_cast<unsigned long long>(r.accepted_reports()), r.accuracy(), r.epsilon(),
                static_cast<unsigned long long>(r.bytes_up()), ratio(r.clear_bytes_up()),
                ratio(r.dense_bytes_up()), static_cast<unsigned long long>(r.bytes_down()),
                r.encoding().c_str());
  }
  return worker.empty() ? 0 : PrintWorker(worker, false, *creds, !tls.insecure_plaintext);
}

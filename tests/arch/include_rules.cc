#include "tests/arch/include_rules.h"

#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <sstream>

#include "absl/status/status.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace tandem::arch {
namespace {

// Project modules each module may include (itself always allowed).
const std::map<std::string, std::set<std::string>>& AllowedModules() {
  static const auto* rules = new std::map<std::string, std::set<std::string>>{
      {"base", {}},
      {"crypto", {"base", "proto"}},
      {"ml", {"base"}},
      {"ml/worker", {"base", "ml", "proto"}},
      // The bridge from wire descriptions to models (ml/spec/model_from_spec.h).
      {"ml/spec", {"base", "ml", "proto"}},
      {"aggregator", {"base", "proto", "crypto"}},
      {"client", {"base", "proto", "crypto", "ml", "ml/spec"}},
      {"server", {"base", "proto", "crypto", "ml", "ml/spec"}},
  };
  return *rules;
}

const std::set<std::string>& ProjectModules() {
  static const auto* modules = new std::set<std::string>{
      "base", "proto", "crypto", "ml", "aggregator", "client", "server", "tests"};
  return *modules;
}

// server/sim is tandem-sim, a user program that runs a whole federation on
// one machine: the aggregator daemons, the coordinator's task, in-process
// clients built on the client SDK's report builder, gRPC uploads, and the
// test helpers (certificates, daemon processes). It is the composition root
// of every module, so it may include what tests/ may (anything); nothing
// else under server/ may include client/, aggregator/ or tests/.
constexpr absl::string_view kSimulator = "server/sim";

std::string ModuleOf(absl::string_view path) {
  if (absl::StartsWith(path, "ml/worker/")) return "ml/worker";
  if (absl::StartsWith(path, "ml/spec/")) return "ml/spec";
  if (absl::StartsWith(path, "server/sim/")) return std::string(kSimulator);
  return std::string(path.substr(0, path.find('/')));
}

// Module of an included project path, or "" when it is not a project header.
std::string IncludedModule(absl::string_view include) {
  const std::string first(include.substr(0, include.find('/')));
  if (include.find('/') == absl::string_view::npos) return "";
  if (!ProjectModules().count(first)) return "";
  if (absl::StartsWith(include, "ml/worker/")) return "ml/worker";
  if (absl::StartsWith(include, "ml/spec/")) return "ml/spec";
  return first;
}

bool IsGrpcHeader(absl::string_view inc) {
  return absl::StartsWith(inc, "grpcpp/") || absl::StartsWith(inc, "grpc/") ||
         absl::StartsWith(inc, "grpc++/") || absl::EndsWith(inc, ".grpc.pb.h") ||
         inc == "base/grpc_status.h" || inc == "base/grpc_credentials.h" ||
         inc == "base/grpc_metrics.h" || inc == "base/grpc_caller_gate.h" ||
         inc == "base/grpc_policy.h";
}
bool IsPrometheusHeader(absl::string_view inc) {
  return absl::StartsWith(inc, "prometheus/") || inc == "base/metrics_server.h";
}
bool IsEigenHeader(absl::string_view inc) {
  return absl::StartsWith(inc, "Eigen/") || absl::StartsWith(inc, "unsupported/Eigen");
}
bool IsTbbHeader(absl::string_view inc) {
  return absl::StartsWith(inc, "tbb/") || absl::StartsWith(inc, "oneapi/tbb");
}
bool IsCudaHeader(absl::string_view inc) {
  return absl::StartsWith(inc, "cuda") || absl::StartsWith(inc, "cub/") ||
         absl::StartsWith(inc, "thrust/");
}

// gRPC is allowed only in adapters: service/, transport/, the ML worker,
// daemon mains and base's gRPC helpers (status conversion, credentials,
// the listeners' caller gate, the deadlines and reconnect policy).
bool GrpcAllowedIn(absl::string_view path) {
  return absl::StrContains(path, "/service/") || absl::StrContains(path, "/transport/") ||
         absl::StartsWith(path, "ml/worker/") || absl::EndsWith(path, "main.cc") ||
         absl::StartsWith(path, "base/grpc_status") ||
         absl::StartsWith(path, "base/grpc_credentials") ||
         absl::StartsWith(path, "base/grpc_metrics") ||
         absl::StartsWith(path, "base/grpc_caller_gate") ||
         absl::StartsWith(path, "base/grpc_policy");
}

// prometheus-cpp (the daemons' /metrics) only where gRPC is, and in base's
// metrics server and gRPC interceptor: cores stay free of it.
bool PrometheusAllowedIn(absl::string_view path) {
  return GrpcAllowedIn(path) || absl::StartsWith(path, "base/metrics_server");
}

}  // namespace

std::vector<Violation> CheckFile(absl::string_view relative_path,
                                 absl::string_view contents) {
  std::vector<Violation> out;
  const std::string module = ModuleOf(relative_path);
  if (module == "tests" || module == kSimulator || !AllowedModules().count(module)) return out;
  const std::set<std::string>& allowed = AllowedModules().at(module);
  const bool public_client_header =
      absl::StartsWith(relative_path, "client/include/");
  const bool cuda_source = absl::EndsWith(relative_path, ".cu") ||
                           absl::EndsWith(relative_path, ".cuh") ||
                           absl::StrContains(relative_path, "/cuda/");

  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(contents, '\n')) {
    ++line_no;
    absl::string_view s = line;
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    if (!absl::ConsumePrefix(&s, "#")) continue;
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    if (!absl::ConsumePrefix(&s, "include")) continue;
    while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
    if (s.empty() || (s.front() != '"' && s.front() != '<')) continue;
    const char close = s.front() == '"' ? '"' : '>';
    s.remove_prefix(1);
    const size_t end = s.find(close);
    if (end == absl::string_view::npos) continue;
    const absl::string_view inc = s.substr(0, end);
    auto flag = [&](std::string rule) {
      out.push_back({std::string(relative_path), line_no, std::string(inc), std::move(rule)});
    };

    const std::string target = IncludedModule(inc);
    if (!target.empty() && target != module && !allowed.count(target) &&
        !(module == "ml/worker" && target == "ml")) {
      flag(absl::StrCat(module, "/ may not depend on ", target, "/"));
    }
    if (!target.empty() && target != module && absl::StrContains(inc, "/internal/")) {
      flag(absl::StrCat("internal/ headers of ", target, "/ are private to it"));
    }
    if (IsGrpcHeader(inc) && !GrpcAllowedIn(relative_path)) {
      flag("gRPC only in service/, transport/, ml/worker/ and mains");
    }
    if (IsPrometheusHeader(inc) && !PrometheusAllowedIn(relative_path)) {
      flag("prometheus-cpp only in service/, transport/, ml/worker/, mains and base's metrics");
    }
    if ((IsEigenHeader(inc) || IsTbbHeader(inc)) && (module == "base" || module == "crypto")) {
      flag(absl::StrCat(module, "/ may not use Eigen or oneTBB"));
    }
    if (IsCudaHeader(inc) && !cuda_source) {
      flag("CUDA headers only in .cu/.cuh sources under cuda/");
    }
    if (module == "crypto" && (inc == "thread" || inc == "mutex" || inc == "fstream")) {
      flag("crypto/ is pure: no threads or I/O");
    }
    if (public_client_header &&
        (IsEigenHeader(inc) || IsGrpcHeader(inc) || IsCudaHeader(inc) ||
         IsTbbHeader(inc) || absl::StrContains(inc, "internal/") ||
         absl::StartsWith(inc, "proto/"))) {
      flag("client public headers expose no Eigen/gRPC/CUDA/TBB/proto/internal");
    }
  }
  return out;
}

absl::StatusOr<std::vector<Violation>> CheckTree(const std::string& root) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(root, ec)) {
    return absl::NotFoundError(absl::StrCat("not a directory: ", root));
  }
  std::vector<Violation> all;
  fs::recursive_directory_iterator it(root, fs::directory_options::skip_permission_denied, ec);
  if (ec) return absl::InternalError(absl::StrCat("cannot scan ", root, ": ", ec.message()));
  for (; it != fs::recursive_directory_iterator(); it.increment(ec)) {
    if (ec) return absl::InternalError(absl::StrCat("scan failed: ", ec.message()));
    const fs::path& p = it->path();
    const std::string name = p.filename().string();
    if (it->is_directory(ec)) {
      if (name.empty() || name[0] == '.' || absl::StartsWith(name, "build")) {
        it.disable_recursion_pending();
      }
      continue;
    }
    const std::string ext = p.extension().string();
    if (ext != ".h" && ext != ".cc" && ext != ".cu" && ext != ".cuh") continue;
    std::ifstream in(p);
    std::stringstream buf;
    buf << in.rdbuf();
    const std::string rel = fs::relative(p, root, ec).generic_string();
    if (ec) continue;
    std::vector<Violation> v = CheckFile(rel, buf.str());
    all.insert(all.end(), v.begin(), v.end());
  }
  return all;
}

std::string FormatViolation(const Violation& v) {
  return absl::StrCat(v.file, ":", v.line, ": #include \"", v.include, "\": ", v.rule);
}

}  // namespace tandem::arch

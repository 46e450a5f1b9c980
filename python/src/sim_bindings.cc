// tandem.sim (python/tandem/sim.py) over tandem-sim's library (server/sim,
// CMake target tandem_sim): real tandem-aggregator daemons, the model
// federation with Python callables for local training and evaluation, the
// HTML report, the Dirichlet split and the Debian-packaged data sets.
//
// GIL: released for the whole federation (daemon RPCs, encoding, noise,
// decoding) and re-acquired only around the Python callbacks. A callback's
// exception stops the run and is re-raised from run() unchanged.
// Ownership: an Aggregators object owns its two daemon processes (SIGTERM on
// close(), SIGKILL on kill() or when garbage-collected while running) and
// its temporary state directory (removed with the daemons).
#include <pybind11/functional.h>
#include <pybind11/stl.h>

#include <filesystem>
#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"
#include "ml/data/dataset.h"
#include "ml/data/partition.h"
#include "python/src/common.h"
#include "server/sim/model_federation.h"
#include "server/sim/private_mean.h"
#include "server/sim/report.h"
#include "tests/testing/certificates.h"
#include "tests/testing/daemon_process.h"

namespace tandem::python {
namespace {

// Both aggregators on loopback with TLS, roles and ticket checks.
class PyAggregators {
 public:
  PyAggregators(std::string binary, std::string policy, std::string certs_dir) {
    if (binary.empty()) binary = TANDEM_DEFAULT_AGGREGATOR_BIN;
    state_dir_ = testing::MakeTempDir("tandem-py-aggregators");
    if (state_dir_.empty()) ThrowStatus(absl::InternalError("cannot make a temporary directory"));
    if (certs_dir.empty()) {
      certs_dir = state_dir_ + "/certs";
      std::filesystem::create_directories(certs_dir);
      absl::Status made;
      {
        py::gil_scoped_release release;  // openssl runs as child processes (~1 s)
        made = testing::MakeRoleCertificates(certs_dir);
      }
      OkOrThrow(made);
    }
    certs_dir_ = certs_dir;
    testing::AggregatorPairOptions o;
    o.certs_dir = certs_dir_;
    o.ticket_public_key = certs_dir_ + "/ticket.pub";
    o.policy = std::move(policy);
    absl::StatusOr<testing::AggregatorPair> pair;
    {
      py::gil_scoped_release release;
      pair = testing::StartAggregatorPair(binary, state_dir_, o);
    }
    pair_ = ValueOrThrow(std::move(pair));
  }
  ~PyAggregators() { Kill(); }  // not closed: the daemons die with the object

  void Close() {
    if (!pair_.has_value()) return;
    {
      py::gil_scoped_release release;
      (void)pair_->leader->Terminate();
      (void)pair_->helper->Terminate();
    }
    pair_.reset();
    RemoveState();
  }
  // SIGKILL (a crash, as far as the daemons know; they recover from their
  // state files), for tests that need no clean shutdown.
  void Kill() {
    if (!pair_.has_value()) return;
    pair_->leader->Kill();
    pair_->helper->Kill();
    pair_.reset();
    RemoveState();
  }
  sim::AggregatorEndpoints Endpoints() const {
    if (!pair_.has_value()) ThrowStatus(absl::FailedPreconditionError("aggregators are closed"));
    return {pair_->leader_address(), pair_->helper_address(), pair_->leader_collector_address(),
            pair_->helper_collector_address(), certs_dir_};
  }
  // Process ids (tests pause a daemon with SIGSTOP to make an upload fail).
  std::pair<int, int> pids() const {
    if (!pair_.has_value()) return {0, 0};
    return {static_cast<int>(pair_->leader->pid()), static_cast<int>(pair_->helper->pid())};
  }
  const std::string& state_dir() const { return state_dir_; }
  const std::string& certs_dir() const { return certs_dir_; }
  bool running() const { return pair_.has_value(); }

 private:
  // The temporary state (databases, logs and certificates made here).
  void RemoveState() {
    std::error_code ec;
    std::filesystem::remove_all(state_dir_, ec);
  }
  std::string state_dir_, certs_dir_;
  std::optional<testing::AggregatorPair> pair_;
};

template <typename T>
T Get(const py::dict& d, const char* key, T fallback) {
  return d.contains(key) ? d[key].cast<T>() : fallback;
}

sim::FederationOptions OptionsFrom(const py::dict& d) {
  sim::FederationOptions o;
  o.name = Get<std::string>(d, "name", o.name);
  o.fedluar = Get<bool>(d, "fedluar", o.fedluar);
  o.num_recycled = Get<int>(d, "num_recycled", o.num_recycled);
  o.private_aggregation = Get<bool>(d, "private", o.private_aggregation);
  o.rounds = Get<int>(d, "rounds", o.rounds);
  o.clients = Get<int>(d, "clients", o.clients);
  o.sample_rate = Get<double>(d, "sample_rate", o.sample_rate);
  o.server_lr = Get<double>(d, "server_lr", o.server_lr);
  o.block_size = Get<uint32_t>(d, "block_size", o.block_size);
  o.log_blocks_per_group = Get<uint32_t>(d, "log_blocks_per_group", o.log_blocks_per_group);
  o.clip_l2_norm = Get<double>(d, "clip", o.clip_l2_norm);
  o.noise_multiplier = Get<double>(d, "noise_multiplier", o.noise_multiplier);
  o.delta = Get<double>(d, "delta", o.delta);
  o.epsilon_budget = Get<double>(d, "epsilon_budget", o.epsilon_budget);
  o.norm_proofs = Get<bool>(d, "norm_proofs", o.norm_proofs);
  o.min_batch_size = Get<uint32_t>(d, "min_batch_size", o.min_batch_size);
  o.seed = Get<uint64_t>(d, "seed", o.seed);
  o.crypto_seed = Get<uint64_t>(d, "crypto_seed", o.crypto_seed);
  o.encoding =
      ValueOrThrow(server::EncodingChoiceFromName(Get<std::string>(d, "encoding", "auto")));
  return o;
}

py::dict RecordToDict(const sim::RoundRecord& r) {
  py::dict d;
  d["variant"] = r.variant;
  d["round"] = r.round;
  d["participants"] = r.participants;
  d["accepted_reports"] = r.accepted_reports;
  d["test_accuracy"] = r.test_accuracy;
  d["test_loss"] = r.test_loss;
  d["bytes_up"] = r.bytes_up;
  d["clear_bytes_up"] = r.clear_bytes_up;
  d["dense_bytes_up"] = r.dense_bytes_up;
  d["encoding"] = r.encoding;
  d["bytes_down"] = r.bytes_down;
  d["epsilon"] = r.epsilon;
  d["seconds"] = r.seconds;
  return d;
}

sim::RoundRecord RecordFromDict(const py::dict& d) {
  sim::RoundRecord r;
  r.variant = Get<std::string>(d, "variant", "");
  r.round = Get<int>(d, "round", 0);
  r.participants = Get<int>(d, "participants", 0);
  r.accepted_reports = Get<uint64_t>(d, "accepted_reports", 0);
  r.test_accuracy = Get<double>(d, "test_accuracy", 0);
  r.test_loss = Get<double>(d, "test_loss", 0);
  r.bytes_up = Get<uint64_t>(d, "bytes_up", 0);
  r.clear_bytes_up = Get<uint64_t>(d, "clear_bytes_up", 0);
  r.dense_bytes_up = Get<uint64_t>(d, "dense_bytes_up", 0);
  r.encoding = Get<std::string>(d, "encoding", "");
  r.bytes_down = Get<uint64_t>(d, "bytes_down", 0);
  r.epsilon = Get<double>(d, "epsilon", 0);
  r.seconds = Get<double>(d, "seconds", 0);
  return r;
}

// The first Python exception of a callback, kept to re-raise after the run.
// Touched only with the GIL held.
struct CallbackError {
  std::optional<py::error_already_set> error;
  absl::Status Keep(py::error_already_set e) {
    if (!error.has_value()) error = std::move(e);
    return absl::CancelledError("a Python callback raised");
  }
  // For a C++ exception of the bindings (TypeError, ValueError...).
  absl::Status Keep(py::builtin_exception& e) {
    e.set_error();
    return Keep(py::error_already_set());
  }
};

py::tuple RunFederation(const py::dict& options, const std::vector<std::string>& names,
                        const std::vector<std::vector<int64_t>>& shapes, py::handle initial,
                        py::function train, py::object evaluate, py::dict endpoints,
                        py::object progress) {
  if (names.size() != shapes.size() || names.empty()) {
    throw py::value_error("one name per tensor shape, at least one tensor");
  }
  std::vector<TensorShape> tensors;
  sim::ExternalModel model;
  int64_t offset = 0;
  for (size_t i = 0; i < names.size(); ++i) {
    tensors.push_back({names[i], shapes[i]});
    int64_t n = 1;
    for (int64_t d : shapes[i]) n *= d;
    // FedLUAR recycles multi-dimensional weight tensors only.
    model.tensors.push_back({names[i], offset, n, shapes[i].size() > 1});
    offset += n;
  }
  model.initial_params = FlattenUpdate(initial, tensors, /*check_finite=*/true, "initial weights");
  const sim::FederationOptions o = OptionsFrom(options);
  const sim::AggregatorEndpoints ep{Get<std::string>(endpoints, "leader", ""),
                                    Get<std::string>(endpoints, "helper", ""),
                                    Get<std::string>(endpoints, "leader_collector", ""),
                                    Get<std::string>(endpoints, "helper_collector", ""),
                                    Get<std::string>(endpoints, "certs_dir", "")};

  CallbackError failure;
  // Called with the GIL released (inside RunModelFederation).
  const sim::LocalTrainFn train_fn =
      [&](int client, int round,
          absl::Span<const float> params) -> absl::StatusOr<std::vector<float>> {
    py::gil_scoped_acquire acquire;
    if (failure.error.has_value()) return absl::CancelledError("a Python callback raised");
    try {
      py::object update = train(client, SplitToArrays(params, tensors), round);
      return FlattenUpdate(update, tensors, /*check_finite=*/true,
                           absl::StrCat("update of client ", client, " in round ", round));
    } catch (py::error_already_set& e) {
      return failure.Keep(std::move(e));
    } catch (py::builtin_exception& e) {
      return failure.Keep(e);
    }
  };
  sim::EvaluateFn eval_fn;
  if (!evaluate.is_none()) {
    eval_fn = [&](int round, absl::Span<const float> params) -> absl::StatusOr<sim::Evaluation> {
      py::gil_scoped_acquire acquire;
      try {
        py::object r = evaluate(SplitToArrays(params, tensors), round);
        if (!(py::isinstance<py::tuple>(r) || py::isinstance<py::list>(r)) || py::len(r) != 2) {
          throw py::type_error("evaluate must return (accuracy, loss) as two numbers");
        }
        const py::sequence pair = py::reinterpret_borrow<py::sequence>(r);
        return sim::Evaluation{pair[0].cast<double>(), pair[1].cast<double>()};
      } catch (py::error_already_set& e) {
        return failure.Keep(std::move(e));
      } catch (py::cast_error&) {
        py::type_error e("evaluate must return (accuracy, loss) as two numbers");
        return failure.Keep(e);
      } catch (py::builtin_exception& e) {
        return failure.Keep(e);
      }
    };
  }
  std::function<void(const sim::RoundRecord&)> progress_fn;
  if (!progress.is_none()) {
    progress_fn = [&](const sim::RoundRecord& r) {
      py::gil_scoped_acquire acquire;
      if (failure.error.has_value()) return;
      try {
        progress(RecordToDict(r));
      } catch (py::error_already_set& e) {
        (void)failure.Keep(std::move(e));
      }
    };
  }
  absl::StatusOr<sim::ModelFederationResult> result;
  {
    py::gil_scoped_release release;
    result = sim::RunModelFederation(o, model, train_fn, eval_fn, ep, progress_fn);
  }
  if (failure.error.has_value()) throw *failure.error;
  sim::ModelFederationResult r = ValueOrThrow(std::move(result));
  py::list records;
  for (const sim::RoundRecord& rec : r.records) records.append(RecordToDict(rec));
  return py::make_tuple(records, SplitToArrays(r.final_params, tensors));
}

py::tuple LoadDataset(const std::string& name, uint64_t seed, int64_t max_train, int64_t max_test) {
  absl::StatusOr<std::pair<ml::Dataset, ml::Dataset>> data;
  {
    py::gil_scoped_release release;
    data = ml::LoadNamedDataset(name, seed, max_train, max_test);
  }
  auto [train, test] = ValueOrThrow(std::move(data));
  auto images = [](const ml::Dataset& d) {
    const std::vector<int64_t> shape = {d.size(), d.shape.channels, d.shape.height, d.shape.width};
    return ToArray(absl::MakeConstSpan(d.features.data(), d.features.size()), shape);
  };
  auto labels = [](const ml::Dataset& d) {
    py::array_t<int64_t> out(d.size());
    for (int64_t i = 0; i < d.size(); ++i) out.mutable_at(i) = d.labels[i];
    return out;
  };
  return py::make_tuple(images(train), labels(train), images(test), labels(test));
}

py::list DirichletSplit(py::array_t<int64_t, py::array::c_style | py::array::forcecast> labels,
                        int num_classes, int num_clients, double alpha, uint64_t seed,
                        int64_t min_per_client) {
  std::vector<int> l(static_cast<size_t>(labels.size()));
  for (size_t i = 0; i < l.size(); ++i) l[i] = static_cast<int>(labels.data()[i]);
  ml::Partition p = ValueOrThrow(
      ml::PartitionDirichlet(l, num_classes, num_clients, alpha, seed, min_per_client));
  py::list out;
  for (const std::vector<int64_t>& idx : p)
    out.append(py::array_t<int64_t>(idx.size(), idx.data()));
  return out;
}

// tandem.sim.run's max_upload_vs_dense and target_epsilon: the d, noise
// multiplier and budget a private run of `options` over `dimension`
// parameters takes (server/core/task_targets.h).
py::dict ApplyTargets(const py::dict& options, uint64_t dimension, double max_upload_vs_dense,
                      double target_epsilon) {
  sim::FederationOptions o = OptionsFrom(options);
  OkOrThrow(sim::ApplySimTargets(max_upload_vs_dense, target_epsilon, dimension, &o));
  py::dict d;
  d["log_blocks_per_group"] = o.log_blocks_per_group;
  d["noise_multiplier"] = o.noise_multiplier;
  d["epsilon_budget"] = o.epsilon_budget;
  return d;
}

}  // namespace

void RegisterSim(py::module_& m) {
  py::class_<PyAggregators>(m, "_Aggregators")
      .def(py::init<std::string, std::string, std::string>(), py::arg("binary"), py::arg("policy"),
           py::arg("certs_dir"))
      .def("close", &PyAggregators::Close)
      .def("kill", &PyAggregators::Kill)
      .def("endpoints",
           [](const PyAggregators& a) {
             const sim::AggregatorEndpoints e = a.Endpoints();
             py::dict d;
             d["leader"] = e.leader;
             d["helper"] = e.helper;
             d["leader_collector"] = e.leader_collector;
             d["helper_collector"] = e.helper_collector;
             d["certs_dir"] = e.certs_dir;
             return d;
           })
      .def_property_readonly("pids", &PyAggregators::pids)
      .def_property_readonly("state_dir", &PyAggregators::state_dir)
      .def_property_readonly("certs_dir", &PyAggregators::certs_dir)
      .def_property_readonly("running", &PyAggregators::running);
  m.def("_run_federation", &RunFederation);
  m.def("_apply_targets", &ApplyTargets);
  m.def("_write_report",
        [](const std::string& dir, const std::string& title, const std::vector<py::dict>& records) {
          std::vector<sim::RoundRecord> r;
          for (const py::dict& d : records) r.push_back(RecordFromDict(d));
          OkOrThrow(sim::WriteReport(dir, title, r));
        });
  m.def("_load_dataset", &LoadDataset);
  m.def("_dirichlet_split", &DirichletSplit);
  // The daemons of the build tree this module was built in.
  m.def("_default_binaries", [] {
    py::dict d;
    d["aggregator"] = std::string(TANDEM_DEFAULT_AGGREGATOR_BIN);
    d["coordinator"] = std::string(TANDEM_DEFAULT_COORDINATOR_BIN);
    d["worker"] = std::string(TANDEM_DEFAULT_WORKER_BIN);
    d["admin"] = std::string(TANDEM_DEFAULT_ADMIN_BIN);
    d["client"] = std::string(TANDEM_DEFAULT_CLIENT_BIN);
    return d;
  });
}

}  // namespace tandem::python

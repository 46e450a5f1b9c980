#include "server/core/task_spec.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "base/ids.h"
#include "base/status_macros.h"
#include "google/protobuf/io/tokenizer.h"
#include "google/protobuf/text_format.h"
#include "ml/spec/model_from_spec.h"
#include "server/core/released_models.h"
#include "server/core/yaml_message.h"

namespace tandem::server {
namespace {

absl::Status Field(absl::string_view field, absl::string_view rule) {
  return absl::InvalidArgumentError(absl::StrCat("task_spec.", field, ": ", rule));
}

// The first parse error, with its position.
class FirstError : public google::protobuf::io::ErrorCollector {
 public:
  void AddError(int line, google::protobuf::io::ColumnNumber column,
                const std::string& message) override {
    if (error.empty()) error = absl::StrCat(line + 1, ":", column + 1, ": ", message);
  }
  std::string error;
};

bool Finite(double v) { return std::isfinite(v); }

absl::Status ModelOptions(const proto::TaskModelSpec& m, const std::string& base_dir,
                          TaskFromSpec* out) {
  CoordinatorOptions& o = out->options;
  const bool mlp = m.mlp_hidden_size() > 0;
  const bool layered = m.layers_size() > 0;
  if (int{mlp} + int{layered} + int{!m.weights_file().empty()} != 1) {
    return Field("model",
                 "set one of mlp_hidden (a tandem-native MLP), layers (a tandem-native layer "
                 "list, e.g. a CNN) or weights_file (any model, as safetensors)");
  }
  if (layered) {
    // Checked against the dataset's input shape once the daemon loads it
    // (ml/spec/model_from_spec.h names the layer that does not fit).
    for (const proto::LayerSpec& l : m.layers()) *o.model.add_layers() = l;
  }
  if (mlp || layered) {
    for (int i = 0; i < m.mlp_hidden_size(); ++i) {
      if (m.mlp_hidden(i) < 1 || m.mlp_hidden(i) > (int64_t{1} << 24)) {
        return Field(absl::StrCat("model.mlp_hidden[", i, "]"), "must be in [1, 2^24]");
      }
      o.model.add_hidden(m.mlp_hidden(i));
    }
    if (m.dataset() != "digits" && m.dataset() != "fmnist") {
      return Field("model.dataset", "a native model needs its dataset: \"digits\" or \"fmnist\"");
    }
    if (m.num_classes() != 0) {
      return Field("model.num_classes", "a native model has its dataset's classes; leave it unset");
    }
    if (m.input_shape_size() != 0) {
      return Field("model.input_shape",
                   "a native model takes its dataset's example shape; leave it unset");
    }
    out->dataset = m.dataset();
    o.init_seed = m.has_init_seed() ? m.init_seed() : 1;
    return absl::OkStatus();
  }
  if (!m.dataset().empty() || m.has_init_seed()) {
    return Field("model",
                 "dataset and init_seed are a native model's; a weights_file holds the weights");
  }
  if (m.num_classes() < 0 || m.num_classes() == 1) {
    return Field("model.num_classes", "must be 0 (unknown) or >= 2");
  }
  std::filesystem::path path(m.weights_file());
  if (path.is_relative()) path = std::filesystem::path(base_dir) / path;
  absl::StatusOr<OpaqueModel> model = OpaqueModelFromFile(path.string(), kMaxOpaqueParams);
  if (!model.ok()) return Field("model.weights_file", model.status().message());
  o.model = std::move(model->spec);
  o.model.set_num_classes(m.num_classes());
  // The data schema of the clients' examples, checked on the device.
  if (absl::Status s = ml::CheckOpaqueInputShape(m.input_shape()); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("task_spec.", s.message()));
  }
  *o.model.mutable_input_shape() = m.input_shape();
  o.initial_params = std::move(model->params);
  return absl::OkStatus();
}

absl::Status TrainingOptions(const proto::TaskTrainingSpec& t, CoordinatorOptions* o) {
  const uint32_t steps = t.has_local_steps() ? t.local_steps() : 20;
  const uint32_t batch = t.has_batch_size() ? t.batch_size() : 32;
  const double lr = t.has_learning_rate() ? t.learning_rate() : 0.05;
  const double momentum = t.has_momentum() ? t.momentum() : 0.9;
  const double coido = t.has_coido_fraction() ? t.coido_fraction() : 1.0;
  if (steps < 1 || steps > 1000000) return Field("training.local_steps", "must be in [1, 10^6]");
  if (batch < 1 || batch > (1u << 16)) return Field("training.batch_size", "must be in [1, 65536]");
  if (!(lr > 0 && lr <= 1000)) return Field("training.learning_rate", "must be in (0, 1000]");
  if (!(momentum >= 0 && momentum < 1)) return Field("training.momentum", "must be in [0, 1)");
  if (!(coido > 0 && coido <= 1)) return Field("training.coido_fraction", "must be in (0, 1]");
  o->training.set_local_steps(steps);
  o->training.set_batch_size(batch);
  o->training.set_learning_rate(lr);
  o->training.set_momentum(momentum);
  o->training.set_coido_fraction(coido);
  const std::string opt = t.has_server_optimizer() ? t.server_optimizer() : "fedavg";
  if (opt == "fedavg") {
    o->task.optimizer = ServerOptimizer::kFedAvg;
  } else if (opt == "fedadam") {
    o->task.optimizer = ServerOptimizer::kFedAdam;
  } else if (opt == "dana") {
    o->task.optimizer = ServerOptimizer::kDana;
  } else {
    return Field("training.server_optimizer", "must be fedavg, fedadam or dana");
  }
  o->task.server_lr = t.has_server_lr() ? t.server_lr() : 1.0;
  if (!(o->task.server_lr > 0) || !Finite(o->task.server_lr)) {
    return Field("training.server_lr", "must be finite and > 0");
  }
  o->task.num_recycled = t.has_fedluar_recycled() ? t.fedluar_recycled() : 0;
  if (o->task.num_recycled < 0) return Field("training.fedluar_recycled", "must be >= 0");
  o->task.seed = t.has_fedluar_seed() ? t.fedluar_seed() : 1;
  return absl::OkStatus();
}

absl::Status PrivacyAndEncodingOptions(const proto::TaskSpec& s, CoordinatorOptions* o) {
  const proto::TaskEncodingSpec& e = s.encoding();
  SecureSumConfig& sum = o->task.secure_sum;
  sum.block_size = e.has_block_size() ? e.block_size() : 64;
  sum.log_blocks_per_group = e.has_log_blocks_per_group() ? e.log_blocks_per_group() : 1;
  if (sum.block_size < 1 || sum.block_size > (1u << 20)) {
    return Field("encoding.block_size", "must be in [1, 2^20]");
  }
  if (sum.log_blocks_per_group > 24) return Field("encoding.log_blocks_per_group", "must be <= 24");
  sum.value_bits = e.has_value_bits() ? e.value_bits() : 0;
  if (e.has_max_upload_vs_dense()) {
    if (e.has_log_blocks_per_group()) {
      return Field("encoding.max_upload_vs_dense",
                   "excludes encoding.log_blocks_per_group (it sets it)");
    }
    if (!(e.max_upload_vs_dense() > 0) || !Finite(e.max_upload_vs_dense())) {
      return Field("encoding.max_upload_vs_dense", "must be finite and > 0");
    }
    o->max_upload_vs_dense = e.max_upload_vs_dense();
  }
  if (sum.value_bits != 0 && sum.value_bits != 32 && sum.value_bits != 64) {
    return Field("encoding.value_bits", "must be 32 or 64");
  }
  const std::string sel = e.has_block_selection() ? e.block_selection() : "random";
  if (sel == "topk") {
    sum.block_selection = proto::BLOCK_SELECTION_TOP_NORM;
  } else if (sel != "random") {
    return Field("encoding.block_selection", "must be random or topk");
  }
  if (e.has_encoding()) {
    absl::StatusOr<EncodingChoice> choice = EncodingChoiceFromName(e.encoding());
    if (!choice.ok()) return Field("encoding.encoding", "must be auto, preamble or dense");
    sum.encoding = *choice;
  } else {
    sum.encoding = EncodingChoice::kAuto;
  }
  const proto::TaskPrivacySpec& p = s.privacy();
  sum.clip_l2_norm = p.has_clip() ? p.clip() : 2.0;
  sum.noise_multiplier = p.has_noise_multiplier() ? p.noise_multiplier() : 1.0;
  sum.norm_proofs = p.has_norm_proofs() ? p.norm_proofs() : true;
  sum.min_batch_size = p.has_min_batch_size() ? p.min_batch_size() : 10;
  o->task.delta = p.has_delta() ? p.delta() : 1e-5;
  o->task.epsilon_budget = p.has_epsilon_budget() ? p.epsilon_budget() : 0;
  o->task.sample_rate = p.has_sample_rate() ? p.sample_rate() : 0.5;
  if (p.has_target_epsilon()) {
    if (p.has_noise_multiplier()) {
      return Field("privacy.target_epsilon", "excludes privacy.noise_multiplier (it sets it)");
    }
    if (!(p.target_epsilon() > 0) || !Finite(p.target_epsilon())) {
      return Field("privacy.target_epsilon", "must be finite and > 0");
    }
    o->target_epsilon = p.target_epsilon();
  }
  if (!(sum.clip_l2_norm > 0) || !Finite(sum.clip_l2_norm)) {
    return Field("privacy.clip", "must be finite and > 0");
  }
  if (!(sum.noise_multiplier >= 0) || !Finite(sum.noise_multiplier)) {
    return Field("privacy.noise_multiplier",
                 "must be finite and >= 0 (the aggregators' policy "
                 "sets the floor they accept)");
  }
  if (sum.min_batch_size < 1) return Field("privacy.min_batch_size", "must be >= 1");
  if (!(o->task.delta > 0 && o->task.delta < 1)) return Field("privacy.delta", "must be in (0, 1)");
  if (!(o->task.epsilon_budget >= 0) || !Finite(o->task.epsilon_budget)) {
    return Field("privacy.epsilon_budget", "must be finite and >= 0 (0: none)");
  }
  if (!(o->task.sample_rate > 0 && o->task.sample_rate <= 1)) {
    return Field("privacy.sample_rate", "must be in (0, 1]");
  }
  return absl::OkStatus();
}

absl::Status RoundOptions(const proto::TaskSpec& s, CoordinatorOptions* o) {
  const proto::TaskRoundsSpec& r = s.rounds();
  o->rounds = r.has_rounds() ? r.rounds() : 5;
  o->min_reports = r.has_min_reports() ? r.min_reports() : 10;
  o->target_reports = r.has_target_reports() ? r.target_reports() : 0;
  o->task.secure_sum.max_reports = r.has_max_reports() ? r.max_reports() : 1000;
  const double timeout = r.has_round_timeout_s() ? r.round_timeout_s() : 30;
  const double enrollment = r.has_enrollment_s() ? r.enrollment_s() : 0;
  if (o->rounds < 1) return Field("rounds.rounds", "must be >= 1");
  if (o->min_reports < o->task.secure_sum.min_batch_size) {
    return Field("rounds.min_reports",
                 "must be >= privacy.min_batch_size (the aggregators "
                 "release no smaller batch)");
  }
  if (o->target_reports != 0 && o->target_reports < o->min_reports) {
    return Field("rounds.target_reports", "must be 0 or >= rounds.min_reports");
  }
  if (o->task.secure_sum.max_reports < o->min_reports) {
    return Field("rounds.max_reports", "must be >= rounds.min_reports");
  }
  if (!(timeout > 0 && timeout <= 86400)) {
    return Field("rounds.round_timeout_s", "must be in (0, 86400]");
  }
  if (!(enrollment >= 0 && enrollment < timeout)) {
    return Field("rounds.enrollment_s", "must be in [0, round_timeout_s)");
  }
  o->round_timeout = absl::Seconds(timeout);
  o->enrollment_window = absl::Seconds(enrollment);
  const proto::TaskEvaluationSpec& e = s.evaluation();
  FederatedEvaluationOptions& ev = o->evaluation;
  ev.every = e.has_every() ? e.every() : 0;
  ev.max_examples = e.has_max_examples() ? e.max_examples() : 100;
  ev.loss_clip = e.has_loss_clip() ? e.loss_clip() : 10;
  ev.noise_multiplier = e.has_noise_multiplier() ? e.noise_multiplier() : -1;
  if (e.has_noise_multiplier() && !(e.noise_multiplier() >= 0 && Finite(e.noise_multiplier()))) {
    return Field("evaluation.noise_multiplier", "must be finite and >= 0");
  }
  // An MLP's classes are known only once its dataset loads (0 here): its
  // evaluation is checked by the coordinator against them.
  const int32_t classes = o->model.tensors_size() > 0 ? o->model.num_classes() : 10;
  if (ev.every > 0 && o->model.tensors_size() > 0 && classes < 2) {
    return Field("evaluation.every", "federated evaluation needs model.num_classes >= 2");
  }
  if (absl::Status v = ValidateEvaluationOptions(ev, static_cast<uint32_t>(std::max(classes, 2)));
      !v.ok()) {
    return Field("evaluation", v.message());
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<proto::TaskSpec> ReadTaskSpec(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot read the task spec ", path));
  std::stringstream text;
  text << in.rdbuf();
  if (absl::EndsWith(path, ".yaml") || absl::EndsWith(path, ".yml")) {
    proto::TaskSpec spec;
    if (absl::Status s = ParseYamlMessage(text.str(), &spec); !s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": task_spec.", s.message()));
    }
    return spec;
  }
  google::protobuf::TextFormat::Parser parser;
  FirstError errors;
  parser.RecordErrorsTo(&errors);
  proto::TaskSpec spec;
  if (!parser.ParseFromString(text.str(), &spec)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ":", errors.error));
  }
  return spec;
}

absl::StatusOr<TaskFromSpec> TaskOptionsFromSpec(const proto::TaskSpec& spec,
                                                 const std::string& base_dir) {
  TaskFromSpec out;
  CoordinatorOptions& o = out.options;
  if (absl::Status s = ValidateId(spec.task_id(), "task_id"); !s.ok()) {
    return Field("task_id", s.message());
  }
  o.task_id = spec.task_id();
  out.population = spec.population().empty() ? spec.task_id() : spec.population();
  if (absl::Status s = ValidateId(out.population, "population"); !s.ok()) {
    return Field("population", s.message());
  }
  if (!spec.has_model()) return Field("model", "required (mlp_hidden or weights_file)");
  TANDEM_RETURN_IF_ERROR(ModelOptions(spec.model(), base_dir, &out));
  TANDEM_RETURN_IF_ERROR(TrainingOptions(spec.training(), &o));
  TANDEM_RETURN_IF_ERROR(PrivacyAndEncodingOptions(spec, &o));
  TANDEM_RETURN_IF_ERROR(RoundOptions(spec, &o));
  return out;
}

absl::Status FitModelToDataset(const ml::Dataset& data, proto::ModelSpec* model) {
  model->set_input_dim(data.features.cols());
  model->set_num_classes(data.num_classes);
  if (!ml::IsLayered(*model)) return absl::OkStatus();
  model->clear_input_shape();
  if (data.shape.size() == data.features.cols()) {
    for (int64_t d : {data.shape.channels, data.shape.height, data.shape.width}) {
      model->add_input_shape(d);
    }
  } else {
    model->add_input_shape(data.features.cols());
  }
  absl::StatusOr<int64_t> params = ml::NativeParamCount(*model);
  if (!params.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("task_spec.", params.status().message()));
  }
  return absl::OkStatus();
}

}  // namespace tandem::server

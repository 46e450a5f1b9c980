// tandem.Participant and tandem.ReportEncoder over the client SDK's public
// C++ API (tandem/client/stepwise_participant.h, report_encoder.h).
//
// GIL: released for every call into the SDK (encoding, network waits,
// state-store I/O) and held only to read the NumPy input and build the
// Python results. The input is copied (or, for ReportEncoder.encode of a
// C-contiguous float32 array, viewed: the array must not be written by
// another thread during the call) before the GIL is released.
// Thread safety: a Participant runs one call at a time (a concurrent one
// raises FailedPreconditionError); cancel() may be called from any thread.
// A ReportEncoder may encode from several threads at once.
#include <pybind11/stl.h>

#include <memory>
#include <optional>
#include <string>

#include "absl/strings/str_cat.h"
#include "python/src/common.h"
#include "server/core/secure_sum.h"
#include "tandem/client/participant.h"
#include "tandem/client/report_encoder.h"
#include "tandem/client/stepwise_participant.h"

namespace tandem::python {
namespace {

using client::Assignment;
using client::CheckInOutcome;
using client::CheckInResult;
using client::EncodedReport;
using client::ModelTensor;
using client::ParticipantOptions;
using client::ReportEncoder;
using client::StepwiseParticipant;
using client::UploadResult;

std::vector<TensorShape> ShapesOf(const Assignment& a) {
  std::vector<TensorShape> out;
  for (const ModelTensor& t : a.tensors) out.push_back({t.name, t.shape});
  return out;
}

const char* OutcomeName(CheckInOutcome o) {
  switch (o) {
    case CheckInOutcome::kAssigned:
      return "assigned";
    case CheckInOutcome::kResent:
      return "resent";
    case CheckInOutcome::kNotSelected:
      return "not_selected";
    case CheckInOutcome::kTaskDone:
      return "done";
  }
  return "unknown";
}

class PyParticipant {
 public:
  explicit PyParticipant(const ParticipantOptions& options, const std::string& state_dir) {
    if (!state_dir.empty()) store_ = ValueOrThrow(client::MakeFileStateStore(state_dir));
    client::StepwiseEnvironment env;
    env.storage = store_.get();
    participant_ = ValueOrThrow(StepwiseParticipant::Create(options, env));
  }

  CheckInResult CheckIn() {
    absl::StatusOr<CheckInResult> r;
    {
      py::gil_scoped_release release;
      r = participant_->CheckIn();
    }
    return ValueOrThrow(std::move(r));
  }

  std::optional<Assignment> Current() {
    absl::StatusOr<std::optional<Assignment>> a;
    {
      py::gil_scoped_release release;
      a = participant_->CurrentAssignment();
    }
    return ValueOrThrow(std::move(a));
  }

  py::list DownloadModel() {
    const std::optional<Assignment> a = Current();
    absl::StatusOr<client::ModelDownload> m;
    {
      py::gil_scoped_release release;
      m = participant_->DownloadModel();
    }
    client::ModelDownload model = ValueOrThrow(std::move(m));
    if (!a.has_value()) ThrowStatus(absl::InternalError("assignment vanished during download"));
    return SplitToArrays(model.values, ShapesOf(*a));
  }

  UploadResult Upload(py::handle update, uint64_t num_examples) {
    const std::optional<Assignment> a = Current();
    if (!a.has_value()) {
      ThrowStatus(absl::FailedPreconditionError(
          "no current assignment: check_in() first (an assignment ends with its delivered "
          "report)"));
    }
    // Dtype, count, shapes and finiteness, before the SDK sees anything.
    const std::vector<float> flat = FlattenUpdate(update, ShapesOf(*a), /*check_finite=*/true);
    absl::StatusOr<UploadResult> r;
    {
      py::gil_scoped_release release;
      r = participant_->Upload(flat, num_examples);
    }
    return ValueOrThrow(std::move(r));
  }

  UploadResult UploadEvaluation(int64_t examples, int64_t correct, double loss_sum,
                                std::vector<int64_t> class_examples,
                                std::vector<int64_t> class_correct) {
    client::EvaluationCounts counts;
    counts.examples = examples;
    counts.correct = correct;
    counts.loss_sum = loss_sum;
    counts.class_examples = std::move(class_examples);
    counts.class_correct = std::move(class_correct);
    absl::StatusOr<UploadResult> r;
    {
      py::gil_scoped_release release;
      r = participant_->UploadEvaluation(counts);
    }
    return ValueOrThrow(std::move(r));
  }

  py::object Pending() {
    absl::StatusOr<std::optional<client::PendingReportInfo>> p;
    {
      py::gil_scoped_release release;
      p = participant_->Pending();
    }
    const std::optional<client::PendingReportInfo> info = ValueOrThrow(std::move(p));
    if (!info.has_value()) return py::none();
    py::dict d;
    d["task_id"] = info->task_id;
    d["round_id"] = info->round_id;
    d["report_id"] = py::bytes(info->report_id);
    d["stored"] = info->stored;
    return std::move(d);
  }

  void Cancel() { participant_->Cancel(); }  // thread-safe, no GIL needed

 private:
  std::unique_ptr<client::StateStore> store_;  // outlives participant_ (declared first)
  std::unique_ptr<StepwiseParticipant> participant_;
};

// The update as a span for Encode: a view of a C-contiguous float32 array,
// or the float32 concatenation of a list of arrays / another dtype.
struct EncoderInput {
  py::array keep;  // owner of the viewed buffer
  std::vector<float> copy;
  absl::Span<const float> span;
};

EncoderInput ReadEncoderInput(py::handle update) {
  EncoderInput in;
  if (py::isinstance<py::list>(update) || py::isinstance<py::tuple>(update)) {
    const py::sequence seq = py::reinterpret_borrow<py::sequence>(update);
    for (size_t i = 0; i < seq.size(); ++i) {
      py::object item = seq[i];
      const std::string what = absl::StrCat("update[", i, "]");
      AppendFloats(AsFloatArray(item, what), what, /*check_finite=*/false, &in.copy);
    }
    in.span = in.copy;
    return in;
  }
  py::array a = AsFloatArray(update, "update");
  if (a.dtype().is(py::dtype::of<float>()) &&
      (a.flags() & py::array::c_style) == py::array::c_style) {
    in.keep = a;
    in.span =
        absl::Span<const float>(static_cast<const float*>(a.data()), static_cast<size_t>(a.size()));
    return in;
  }
  AppendFloats(a, "update", /*check_finite=*/false, &in.copy);
  in.span = in.copy;
  return in;
}

// EncodedReport with its requests turned into bytes on first access.
class PyEncodedReport {
 public:
  explicit PyEncodedReport(EncodedReport r) : r_(std::move(r)) {}
  py::bytes report_id() const { return py::bytes(r_.report_id); }
  py::bytes to_leader() {
    if (!leader_) leader_ = py::bytes(r_.to_leader);
    return *leader_;
  }
  py::bytes to_helper() {
    if (!helper_) helper_ = py::bytes(r_.to_helper);
    return *helper_;
  }
  double clip_factor() const { return r_.clip_factor; }
  size_t upload_bytes() const { return r_.to_leader.size() + r_.to_helper.size(); }

 private:
  EncodedReport r_;
  std::optional<py::bytes> leader_, helper_;
};

class PyEncoder {
 public:
  explicit PyEncoder(std::unique_ptr<ReportEncoder> e, uint64_t dimension)
      : encoder_(std::move(e)), dimension_(dimension) {}

  PyEncodedReport Encode(py::handle update, std::optional<std::string> ticket) const {
    EncoderInput in = ReadEncoderInput(update);
    absl::StatusOr<EncodedReport> r;
    {
      py::gil_scoped_release release;
      r = ticket.has_value() ? encoder_->EncodeWithTicket(in.span, *ticket)
                             : encoder_->Encode(in.span);
    }
    return PyEncodedReport(ValueOrThrow(std::move(r)));
  }
  uint64_t dimension() const { return dimension_; }

 private:
  std::unique_ptr<ReportEncoder> encoder_;  // const and thread-safe
  uint64_t dimension_;
};

PyEncoder FromRoundParameters(const std::string& round_parameters, uint64_t max_dimension) {
  proto::RoundParameters rp;
  if (!rp.ParseFromString(round_parameters)) {
    ThrowStatus(absl::InvalidArgumentError("round_parameters do not parse"));
  }
  return PyEncoder(ValueOrThrow(ReportEncoder::CreateForRound(round_parameters, max_dimension)),
                   rp.dimension());
}

}  // namespace

void RegisterClient(py::module_& m) {
  py::class_<ModelTensor>(m, "ModelTensor", "One tensor of the task's flat model vector.")
      .def_readonly("name", &ModelTensor::name)
      .def_property_readonly("shape",
                             [](const ModelTensor& t) { return py::tuple(py::cast(t.shape)); })
      .def_readonly("offset", &ModelTensor::offset)
      .def_readonly("size", &ModelTensor::size)
      .def_readonly("recycled", &ModelTensor::recycled)
      .def("__repr__", [](const ModelTensor& t) {
        return absl::StrCat("ModelTensor(", t.name, ", shape=", ShapeString(t.shape),
                            t.recycled ? ", recycled" : "", ")");
      });
  py::class_<client::TrainingSettings>(m, "TrainingSettings")
      .def_readonly("local_epochs", &client::TrainingSettings::local_epochs)
      .def_readonly("local_steps", &client::TrainingSettings::local_steps)
      .def_readonly("batch_size", &client::TrainingSettings::batch_size)
      .def_readonly("learning_rate", &client::TrainingSettings::learning_rate)
      .def_readonly("momentum", &client::TrainingSettings::momentum)
      .def_readonly("coido_fraction", &client::TrainingSettings::coido_fraction);
  py::class_<client::EvaluationSettings>(
      m, "EvaluationSettings",
      "A federated evaluation assignment: count at most max_examples held-out examples, "
      "clip each loss to loss_clip (tandem.evaluation_counts), then upload_evaluation.")
      .def_readonly("max_examples", &client::EvaluationSettings::max_examples)
      .def_readonly("loss_clip", &client::EvaluationSettings::loss_clip)
      .def_readonly("num_classes", &client::EvaluationSettings::num_classes);
  py::class_<Assignment>(m, "Assignment", "A round this client was assigned.")
      .def_readonly("evaluation", &Assignment::evaluation)
      .def_readonly("task_id", &Assignment::task_id)
      .def_readonly("round_id", &Assignment::round_id)
      .def_readonly("model_version", &Assignment::model_version)
      .def_readonly("deadline_unix_ms", &Assignment::deadline_unix_ms)
      .def_readonly("tensors", &Assignment::tensors)
      .def_readonly("num_params", &Assignment::num_params)
      .def_property_readonly("input_shape",
                             [](const Assignment& a) { return py::tuple(py::cast(a.input_shape)); })
      .def_readonly("training", &Assignment::training)
      .def_readonly("clip_l2_norm", &Assignment::clip_l2_norm)
      .def_readonly("frac_bits", &Assignment::frac_bits)
      .def_readonly("dimension", &Assignment::dimension)
      .def_readonly("norm_proofs", &Assignment::norm_proofs)
      .def_readonly("ticketed", &Assignment::ticketed)
      .def_property_readonly("round_parameters",
                             [](const Assignment& a) { return py::bytes(a.round_parameters); })
      .def("__repr__", [](const Assignment& a) {
        return absl::StrCat("Assignment(task=", a.task_id, ", round=", a.round_id, ", ",
                            a.tensors.size(), " tensors, ", a.num_params, " params)");
      });
  py::class_<CheckInResult>(m, "CheckInResult")
      .def_property_readonly("outcome",
                             [](const CheckInResult& r) { return OutcomeName(r.outcome); })
      .def_readonly("retry_after_ms", &CheckInResult::retry_after_ms)
      .def_readonly("round_id", &CheckInResult::round_id)
      .def_readonly("bytes_up", &CheckInResult::bytes_up)
      .def_readonly("assignment", &CheckInResult::assignment)
      .def("__repr__", [](const CheckInResult& r) {
        return absl::StrCat("CheckInResult(", OutcomeName(r.outcome), ", round=", r.round_id, ")");
      });
  py::class_<UploadResult>(m, "UploadResult")
      .def_readonly("round_id", &UploadResult::round_id)
      .def_property_readonly("report_id",
                             [](const UploadResult& r) { return py::bytes(r.report_id); })
      .def_readonly("bytes_up", &UploadResult::bytes_up)
      .def_readonly("clip_factor", &UploadResult::clip_factor)
      .def_readonly("resent", &UploadResult::resent)
      .def("__repr__", [](const UploadResult& r) {
        return absl::StrCat("UploadResult(round=", r.round_id, ", bytes_up=", r.bytes_up,
                            ", clip_factor=", r.clip_factor, r.resent ? ", resent" : "", ")");
      });

  py::class_<PyParticipant>(m, "_Participant")
      .def(py::init([](const std::string& coordinator, const std::string& client_id,
                       const std::string& task_id, bool insecure_plaintext,
                       const std::string& tls_root_ca, const std::string& leader,
                       const std::string& leader_name, const std::string& helper,
                       const std::string& helper_name, const std::string& state_dir,
                       int upload_attempts, int64_t rpc_timeout_ms, uint64_t max_model_bytes,
                       uint64_t max_dimension, const std::string& enrollment_token,
                       const std::string& coordinator_name) {
             ParticipantOptions o;
             o.coordinator_name = coordinator_name;
             o.enrollment_token = enrollment_token;
             o.coordinator = coordinator;
             o.client_id = client_id;
             o.task_id = task_id;
             o.insecure_plaintext = insecure_plaintext;
             o.tls_root_ca = tls_root_ca;
             o.leader_address = leader;
             o.leader_name = leader_name;
             o.helper_address = helper;
             o.helper_name = helper_name;
             o.upload_attempts = upload_attempts;
             o.rpc_timeout_ms = rpc_timeout_ms;
             o.max_model_bytes = max_model_bytes;
             o.max_dimension = max_dimension;
             return std::make_unique<PyParticipant>(o, state_dir);
           }),
           py::arg("coordinator"), py::arg("client_id"), py::arg("task_id"),
           py::arg("insecure_plaintext"), py::arg("tls_root_ca"), py::arg("leader"),
           py::arg("leader_name"), py::arg("helper"), py::arg("helper_name"), py::arg("state_dir"),
           py::arg("upload_attempts"), py::arg("rpc_timeout_ms"), py::arg("max_model_bytes"),
           py::arg("max_dimension"), py::arg("enrollment_token") = "",
           py::arg("coordinator_name") = "")
      .def("check_in", &PyParticipant::CheckIn)
      .def("current_assignment", &PyParticipant::Current)
      .def("download_model", &PyParticipant::DownloadModel)
      .def("upload", &PyParticipant::Upload, py::arg("update"), py::arg("num_examples") = 0)
      .def("upload_evaluation", &PyParticipant::UploadEvaluation)
      .def("pending_report", &PyParticipant::Pending)
      .def("cancel", &PyParticipant::Cancel);

  py::class_<PyEncodedReport>(m, "EncodedReport",
                              "The two servers' upload requests (serialized "
                              "tandem.proto.UploadRequest) of one report.")
      .def_property_readonly("report_id", &PyEncodedReport::report_id)
      .def_property_readonly("to_leader", &PyEncodedReport::to_leader)
      .def_property_readonly("to_helper", &PyEncodedReport::to_helper)
      .def_property_readonly("clip_factor", &PyEncodedReport::clip_factor)
      .def_property_readonly("upload_bytes", &PyEncodedReport::upload_bytes);
  py::class_<PyEncoder>(m, "_ReportEncoder")
      .def_static(
          "from_spec",
          [](const std::string& task_id, uint64_t round_id, uint64_t dimension, uint32_t block_size,
             uint32_t num_groups, uint32_t log_num_blocks, int frac_bits, double clip_l2_norm,
             uint64_t max_summands, uint64_t max_dimension) {
            client::RoundSpec s;
            s.task_id = task_id;
            s.round_id = round_id;
            s.dimension = dimension;
            s.block_size = block_size;
            s.num_groups = num_groups;
            s.log_num_blocks = log_num_blocks;
            s.frac_bits = frac_bits;
            s.clip_l2_norm = clip_l2_norm;
            s.max_summands = max_summands;
            s.max_dimension = max_dimension;
            return PyEncoder(ValueOrThrow(ReportEncoder::Create(s)), dimension);
          })
      .def_static("from_round_parameters",
                  [](py::bytes rp, uint64_t max_dimension) {
                    return FromRoundParameters(std::string(rp), max_dimension);
                  })
      .def_static("round_parameters_for_model",
                  [](uint64_t num_params, const std::string& task_id, uint64_t round_id,
                     uint32_t block_size, uint32_t log_blocks_per_group, double clip_l2_norm,
                     int frac_bits, uint32_t max_reports, bool norm_proofs, double noise_multiplier,
                     const std::string& encoding) {
                    // The round tandem-coordinator would announce for this model.
                    server::SecureSumConfig c;
                    c.task_id = task_id;
                    c.model_dimension = num_params;
                    c.block_size = block_size;
                    c.log_blocks_per_group = log_blocks_per_group;
                    c.clip_l2_norm = clip_l2_norm;
                    c.frac_bits = frac_bits;
                    c.max_reports = max_reports;
                    c.norm_proofs = norm_proofs;
                    c.noise_multiplier = noise_multiplier;
                    c.encoding = ValueOrThrow(server::EncodingChoiceFromName(encoding));
                    server::SecureSum sum = ValueOrThrow(server::SecureSum::Create(c));
                    return py::bytes(sum.RoundParameters(round_id).SerializeAsString());
                  })
      .def(
          "encode",
          [](const PyEncoder& e, py::handle update) { return e.Encode(update, std::nullopt); },
          py::arg("update"))
      .def(
          "encode_with_ticket",
          [](const PyEncoder& e, py::handle update, py::bytes ticket) {
            return e.Encode(update, std::string(ticket));
          },
          py::arg("update"), py::arg("signed_ticket"))
      .def_property_readonly("dimension", &PyEncoder::dimension);
}

}  // namespace tandem::python

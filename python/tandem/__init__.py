"""tandem: bring your own PyTorch/NumPy model to private aggregation.

Your training stays in Python; tandem's C++ core does everything between
the update and the servers: L2 clipping, fixed point, PREAMBLE block
sampling and block-sparse DPF key shares for the two non-colluding
aggregators, norm-bound proofs, upload tickets, retries, and the pending
report kept across crashes.

    tandem.Participant   the client SDK against a real tandem-coordinator
    tandem.ReportEncoder an update -> the two servers' upload requests, offline
    tandem.sim           an in-process federation whose local training is a
                         Python callable, through the real aggregator daemons
    tandem.worker        any tandem-worker kernel with NumPy arrays
    tandem.datasets      the Debian-packaged data sets (Fashion-MNIST, digits)
    tandem.load_safetensors / save_safetensors
                         model files as {name: ndarray} (released models:
                         tandem-admin task export; a PyTorch state_dict)

Errors of the C++ core raise tandem.Error (`.code` = status code; one
subclass per code). Updates must be float32/float64 arrays (TypeError
otherwise) of the model's shapes, finite (ValueError otherwise). The GIL is
released while tandem encodes, waits on the network or runs a kernel.
The NumPy package is the only Python dependency; PyTorch is not needed.
"""

import os as _os

from ._errors import (  # noqa: F401
    CODE_NAMES, AbortedError, AlreadyExistsError, CancelledError, DataLossError,
    DeadlineExceededError, Error, FailedPreconditionError, InternalError,
    InvalidArgumentError, NotFoundError, OutOfRangeError, PermissionDeniedError,
    ResourceExhaustedError, UnauthenticatedError, UnavailableError, UnimplementedError,
    UnknownError)
from . import _tandem
from ._tandem import (  # noqa: F401
    Assignment, CheckInResult, EncodedReport, EvaluationSettings, ModelTensor, TrainingSettings,
    UploadResult)
from .safetensors import load_safetensors, save_safetensors  # noqa: F401

__all__ = [
    "Participant", "ReportEncoder", "Assignment", "CheckInResult", "EncodedReport",
    "ModelTensor", "TrainingSettings", "UploadResult", "sim", "worker", "datasets", "Error",
    "load_safetensors", "save_safetensors", "evaluation_counts", "EvaluationSettings",
    "CODE_NAMES", "AbortedError", "AlreadyExistsError", "CancelledError", "DataLossError",
    "DeadlineExceededError", "FailedPreconditionError", "InternalError", "InvalidArgumentError",
    "NotFoundError", "OutOfRangeError", "PermissionDeniedError", "ResourceExhaustedError",
    "UnauthenticatedError", "UnavailableError", "UnimplementedError", "UnknownError",
]


class Participant:
    """One client of a tandem task whose app trains the model itself.

    Options mirror tandem::client::ParticipantOptions (and tandem-client's
    flags): `coordinator` host:port, `client_id` (the app's label for logs;
    the servers know the device by the id of its own Ed25519 key, kept in
    `state_dir`), `enrollment_token` (the operator's permission for this
    device to enroll, as `tandem-admin token mint` prints it; until the key
    is enrolled check_in raises PermissionDeniedError),
    `tls_root_ca` (PEM roots verifying the servers; or insecure_plaintext on
    loopback), `coordinator_name` (the coordinator's TLS identity, checked
    instead of the host of `coordinator`), the aggregators pinned by address (`leader`, `helper`) and TLS
    identity (`leader_name`, `helper_name`) -- an assignment naming other
    servers, or one server for both roles, is refused -- and `state_dir`,
    where the pending report survives a crash (without it, memory only).

    One round::

        r = p.check_in()
        if r.outcome == "assigned":
            weights = p.download_model()          # list of float32 arrays
            update = train(weights, r.assignment)  # same shapes: trained - weights
            p.upload(update, num_examples=n)

    Outcomes: "assigned", "resent" (a stored report of this round was
    delivered; nothing to train), "not_selected" (retry after
    `retry_after_ms`), "done". An update is a list of arrays in the order
    and shapes of `assignment.tensors` (FedLUAR's recycled tensors are
    dropped by the SDK) or one flat array of `assignment.num_params`. A bad
    update raises TypeError/ValueError and leaves any pending report as it
    was; after a failed upload (e.g. UnavailableError) upload() again resends
    the very same report.

    Thread safety: one call at a time (a concurrent one raises
    FailedPreconditionError); cancel() may be called from any thread.
    """

    def __init__(self, coordinator, client_id, *, task_id="", tls_root_ca=None,
                 insecure_plaintext=False, leader=None, leader_name=None, helper=None,
                 helper_name=None, state_dir=None, upload_attempts=5, rpc_timeout_ms=30000,
                 max_model_bytes=256 << 20, max_dimension=1 << 24, enrollment_token=None,
                 coordinator_name=None):
        self._p = _tandem._Participant(
            coordinator, client_id, task_id, bool(insecure_plaintext),
            _os.fspath(tls_root_ca) if tls_root_ca else "", leader or "", leader_name or "",
            helper or "", helper_name or "", _os.fspath(state_dir) if state_dir else "",
            upload_attempts, rpc_timeout_ms, max_model_bytes, max_dimension,
            enrollment_token or "", coordinator_name or "")

    def check_in(self):
        """Checks in with the coordinator; returns a tandem.CheckInResult."""
        return self._p.check_in()

    @property
    def assignment(self):
        """The current tandem.Assignment, or None."""
        return self._p.current_assignment()

    def download_model(self):
        """The assignment's global model: one float32 array per tensor."""
        return self._p.download_model()

    def download_state_dict(self):
        """The assignment's global model as {tensor name: float32 array}, in
        the task's order: for an opaque model (a task created from a
        PyTorch state_dict) the names of that state_dict, so
        `model.load_state_dict({k: torch.from_numpy(v) for k, v in ...})`."""
        a = self._p.current_assignment()
        if a is None:
            raise FailedPreconditionError("no current assignment: check_in() first")
        return dict(zip([t.name for t in a.tensors], self._p.download_model()))

    def upload(self, update, num_examples=0):
        """Clips, encodes and uploads `update`; returns a tandem.UploadResult.
        `update` is a list of arrays in the assignment's order, one flat
        array, or a dict by tensor name (e.g. trained minus downloaded
        state_dict): a missing or extra name raises ValueError before
        anything is encoded."""
        if isinstance(update, dict):
            update = self._by_name(update)
        return self._p.upload(update, num_examples)

    def _by_name(self, update):
        a = self._p.current_assignment()
        if a is None:
            raise FailedPreconditionError("no current assignment: check_in() first")
        names = [t.name for t in a.tensors]
        missing = [n for n in names if n not in update]
        extra = sorted(set(update) - set(names))
        if missing or extra:
            raise ValueError("the update's tensors do not match the task's model: missing %s, "
                             "extra %s" % (missing, extra))
        return [update[n] for n in names]

    def upload_evaluation(self, counts):
        """A federated evaluation assignment (`assignment.evaluation` is set):
        uploads `counts` (a dict as tandem.evaluation_counts returns) through
        both aggregators like an update; returns a tandem.UploadResult.
        Inconsistent counts raise InvalidArgumentError before anything is
        sent."""
        return self._p.upload_evaluation(
            int(counts["examples"]), int(counts["correct"]), float(counts["loss_sum"]),
            [int(x) for x in counts["class_examples"]], [int(x) for x in counts["class_correct"]])

    def pending_report(self):
        """The report encoded and not yet delivered (a dict), or None."""
        return self._p.pending_report()

    def cancel(self):
        """Makes the running and every later call raise CancelledError."""
        self._p.cancel()

    def participate(self, train, evaluate=None):
        """One check-in; when assigned, `train(weights, assignment)` returns the
        update (or (update, num_examples)) and it is uploaded. For a federated
        evaluation assignment `evaluate(weights, assignment)` returns the
        logits and labels of held-out examples (tandem.evaluation_counts
        clips and counts them); without `evaluate` it is left unreported.
        Returns the CheckInResult, or the UploadResult of what was uploaded."""
        r = self.check_in()
        if r.outcome != "assigned":
            return r
        settings = r.assignment.evaluation
        if settings is not None:
            if evaluate is None:
                return r
            logits, labels = evaluate(self.download_model(), r.assignment)
            return self.upload_evaluation(evaluation_counts(logits, labels, settings))
        out = train(self.download_model(), r.assignment)
        update, examples = out if isinstance(out, tuple) else (out, 0)
        return self.upload(update, examples)


def evaluation_counts(logits, labels, settings):
    """What a client reports in a federated evaluation round, from its model's
    logits (n x classes) and the labels of its held-out examples: the first
    `settings.max_examples` examples, each cross-entropy clipped to
    [0, settings.loss_clip] (the bounds that keep a client's influence on the
    noised sums within the aggregators' noise; server/core/
    federated_evaluation.h). A dict for Participant.upload_evaluation."""
    import numpy as np
    logits = np.asarray(logits, dtype=np.float64)
    labels = np.asarray(labels).astype(np.int64).ravel()
    c = int(settings.num_classes)
    if logits.ndim != 2 or logits.shape[1] != c or logits.shape[0] != labels.shape[0]:
        raise ValueError("logits must be n x %d with one label per row" % c)
    if labels.size and (labels.min() < 0 or labels.max() >= c):
        raise ValueError("labels must be in [0, %d)" % c)
    n = min(labels.shape[0], int(settings.max_examples))
    logits, labels = logits[:n], labels[:n]
    top = logits.max(axis=1, keepdims=True)
    loss = (top[:, 0] + np.log(np.exp(logits - top).sum(axis=1))
            - logits[np.arange(n), labels])
    if not np.all(np.isfinite(loss)):
        raise ValueError("the logits give a non-finite loss")
    hit = logits.argmax(axis=1) == labels
    return {"examples": n, "correct": int(hit.sum()),
            "loss_sum": float(np.clip(loss, 0.0, float(settings.loss_clip)).sum()),
            "class_examples": np.bincount(labels, minlength=c).tolist(),
            "class_correct": np.bincount(labels[hit], minlength=c).tolist()}


class ReportEncoder:
    """Offline encoding of an update into the two servers' upload requests
    (serialized tandem.proto.UploadRequest, `to_leader` and `to_helper`).

    Build it from a round spec (the arguments), from the round parameters a
    coordinator announced (`from_round_parameters`, e.g.
    Participant.assignment.round_parameters; norm proofs included when the
    round has a norm bound), or for a model size as tandem-coordinator would
    announce it (`for_model`). encode() takes a float32/float64 array (any
    shape, flattened, at most `dimension` values, zero-padded) or a list of
    arrays (concatenated); a C-contiguous float32 array is read in place.
    Several threads may encode with one encoder at once.
    """

    def __init__(self, task_id, round_id, dimension, block_size, num_groups, log_num_blocks, *,
                 frac_bits=16, clip_l2_norm=1.0, max_summands=1, max_dimension=1 << 24):
        self._e = _tandem._ReportEncoder.from_spec(
            task_id, round_id, dimension, block_size, num_groups,
            log_num_blocks, frac_bits, clip_l2_norm, max_summands,
            max_dimension)

    @classmethod
    def _wrap(cls, e):
        self = cls.__new__(cls)
        self._e = e
        return self

    @classmethod
    def from_round_parameters(cls, round_parameters, max_dimension=1 << 24):
        if not isinstance(round_parameters, (bytes, bytearray, memoryview)):
            raise TypeError("round_parameters must be bytes (a serialized RoundParameters)")
        return cls._wrap(_tandem._ReportEncoder.from_round_parameters(
            bytes(round_parameters), max_dimension))

    @classmethod
    def for_model(cls, num_params, *, task_id="offline", round_id=1, block_size=256,
                  log_blocks_per_group=1, clip_l2_norm=1.0, frac_bits=16, max_reports=1000,
                  norm_proofs=False, noise_multiplier=0.0, max_dimension=1 << 24,
                  encoding="preamble"):
        rp = cls.round_parameters_for_model(
            num_params, task_id=task_id, round_id=round_id, block_size=block_size,
            log_blocks_per_group=log_blocks_per_group, clip_l2_norm=clip_l2_norm,
            frac_bits=frac_bits, max_reports=max_reports, norm_proofs=norm_proofs,
            noise_multiplier=noise_multiplier, encoding=encoding)
        return cls.from_round_parameters(rp, max_dimension)

    @staticmethod
    def round_parameters_for_model(num_params, *, task_id="offline", round_id=1,
                                   block_size=256, log_blocks_per_group=1, clip_l2_norm=1.0,
                                   frac_bits=16, max_reports=1000, norm_proofs=False,
                                   noise_multiplier=0.0, encoding="preamble"):
        """The serialized RoundParameters tandem-coordinator announces for a
        model of `num_params` parameters (k groups of 2^d blocks of B).
        encoding: "preamble", "dense" (additive shares of all values) or
        "auto" (the smaller upload, tandem-coordinator's default)."""
        return _tandem._ReportEncoder.round_parameters_for_model(
            num_params, task_id, round_id, block_size, log_blocks_per_group,
            clip_l2_norm, frac_bits, max_reports, bool(norm_proofs),
            noise_multiplier, str(encoding))

    @property
    def dimension(self):
        return self._e.dimension

    def encode(self, update):
        """Returns a tandem.EncodedReport (report_id, to_leader, to_helper, clip_factor)."""
        return self._e.encode(update)

    def encode_with_ticket(self, update, signed_ticket):
        """As encode, under a coordinator-signed upload ticket (bytes of a
        SignedUploadTicket): the report id is the ticket's."""
        return self._e.encode_with_ticket(update, bytes(signed_ticket))


from . import datasets, sim, worker  # noqa: E402,F401

"""Call any tandem-worker kernel with NumPy arrays.

    with tandem.worker.LocalWorker() as w, tandem.worker.Client(w.address) as c:
        [k["name"] for k in c.capabilities()]       # or Client("host:port") of a running worker
        out = c.run("attention.dense", [q, k, v], {"causal": 1})
        out.outputs[0]                              # a NumPy array

Inputs are a list of arrays in the kernel's order (capabilities() lists
each kernel's inputs, dtypes and ranks) or a dict name -> array in that
order; dtypes float32, float64, int32, int64, uint64, uint8 (TypeError
otherwise; NaN/Inf in a float input: ValueError, before anything is sent).
The worker's own refusals (wrong rank, shape, parameter) raise
tandem.InvalidArgumentError, an unknown kernel tandem.UnimplementedError.
The GIL is released while the kernel runs; a Client is thread-safe.

Models as resources: load weights once, then name them in run():

    info = c.load_model("hash", "spotlight.hash", {"w1": w1, "b1": b1, "w2": w2, "b2": b2},
                        {"dim": 64})
    h = c.run("spotlight.hash", [x], model="hash").outputs[0]   # w1..b2 omitted
    r = c.run("spotlight.train_step", [q, k], {"lr": 1e-2}, model="hash")
    r.model_version                                            # bumped by the step
    header, weights = c.read_model("hash")                     # the trained weights
    c.list_models(); c.unload_model("hash")

Kinds and their config keys: "ren" {dim, heads, layers}, "trajmamba.encoder",
"trajmamba.mask" {dim, hidden}, "spotlight.hash" {dim}, "mlp" {in, classes,
hidden_layers, hidden0, ...}, "cnn", "tensors" (any names). capabilities()
marks the inputs a model supplies ("from_model") and each kernel's
"model_kinds". Errors: unknown name tandem.NotFoundError, a version that is
not the one held or a name loaded twice without replace
tandem.FailedPreconditionError, a wrong kind/config/name/shape
tandem.InvalidArgumentError, over the worker's --max_model_mb
tandem.ResourceExhaustedError, a checkpoint_path outside its --model_dir
tandem.PermissionDeniedError.

KV caches as resources, one per sequence (keys, values and the Spotlight
codes of each token, held by the worker under its --max_gpu_mb: device
memory on a CUDA worker, host memory otherwise), named in run():

    c.create_kv_cache("seq", heads=1, head_dim=128, code_bits=128)
    c.append_kv_cache("seq", keys, values, codes)   # (heads, n, d) x2, (heads, n, 16) uint8
    r = c.run("spotlight.topk", [query_codes], {"k": 64, "selected_scores": 1},
              kv_cache="seq")                           # 64 indices and their scores
    r = c.run("attention.dense", [q], kv_cache="seq")          # k, v from the cache
    r = c.run("adakv.compress", [q_window], {"window": 32, "budget": 2048},
              kv_cache="seq")                           # q: (H, 32, d), the window alone
    c.list_kv_caches(); c.drop_kv_cache("seq")

capabilities() marks the inputs a cache supplies ("from_cache": "keys",
"values" or "codes") and the kernels that take one ("accepts_kv_cache").
Codes are the client's: spotlight.hash's `codes` output of each head's keys.
A cache belongs to the TLS identity that created it (tls_cert): other
callers cannot see, run on, append to or drop it (NotFoundError).
Errors: unknown cache tandem.NotFoundError, a name created twice without
replace tandem.FailedPreconditionError, a wrong shape or dtype
tandem.InvalidArgumentError (TypeError / ValueError for a wrong dtype or
NaN before anything is sent), over --max_gpu_mb tandem.ResourceExhaustedError
(nothing appended).
"""

import collections
import os
import subprocess
import threading

from . import _binaries, _tandem

# model_version: the model's version after the call (None without a model).
RunResult = collections.namedtuple("RunResult", ["outputs", "backend", "elapsed_us",
                                                 "model_version"], defaults=(None,))


def _cache_ref(kv_cache):
    """kv_cache: None, a name, or a dict {"name", "head", "tokens"} -> (name, head, tokens)."""
    if kv_cache is None:
        return "", 0, 0
    if isinstance(kv_cache, str):
        return kv_cache, 0, 0
    if isinstance(kv_cache, dict) and isinstance(kv_cache.get("name"), str):
        return kv_cache["name"], int(kv_cache.get("head", 0)), int(kv_cache.get("tokens", 0))
    raise TypeError("kv_cache must be a name or a dict with name, head, tokens")


def _model_ref(model):
    """model: None, a name, or (name, version) -> (name, version)."""
    if model is None:
        return "", 0
    if isinstance(model, str):
        return model, 0
    if isinstance(model, (tuple, list)) and len(model) == 2 and isinstance(model[0], str):
        return model[0], int(model[1])
    raise TypeError("model must be a name or a (name, version) pair")


class Client:
    """A tandem-worker at `address` (host:port). Plaintext (a loopback
    worker) unless `tls_root_ca` (PEM roots) is given; `server_name`
    overrides the TLS name. A TLS worker admits only the identities in its
    --callers / --model_writers: present one with `tls_cert` and `tls_key`
    (PEM files of a certificate its CA issued)."""

    def __init__(self, address, *, tls_root_ca=None, server_name=None, timeout_s=60.0,
                 tls_cert=None, tls_key=None):
        # One channel for both binding objects: one TLS session, one identity.
        self._channel = _tandem._WorkerChannel(
            address, os.fspath(tls_root_ca or ""), server_name or "", float(timeout_s),
            os.fspath(tls_cert or ""), os.fspath(tls_key or ""))
        self._c = _tandem._WorkerClient(self._channel)
        self._kv = _tandem._WorkerKvClient(self._channel)

    def close(self):
        """Closes the channel (not while calls are in flight); later calls
        raise FailedPreconditionError. A worker's clean shutdown waits for
        open channels, so close clients first."""
        self._channel.close()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

    def health(self):
        """{"serving": bool, "backend": str}."""
        return self._c.health()

    def capabilities(self):
        """Every kernel: name, backends, inputs/outputs (name, dtype, rank),
        params, description."""
        return self._c.capabilities()

    def run(self, kernel, inputs, params=None, backend="", model=None, kv_cache=None):
        """Runs `kernel`; returns RunResult(outputs: list of arrays, backend,
        elapsed_us, model_version). backend "" = the worker's best, "cpu" or
        "cuda". `model`: a loaded model's name, or (name, version) to insist
        on that version (FailedPreconditionError otherwise); its weights
        replace the kernel's from_model inputs (leave them out), a training
        kernel updates it in place, and model_version is its version after
        the call (None without a model). `kv_cache`: a KV cache's name, or
        {"name", "head", "tokens"} (head: whose codes spotlight.topk scores;
        tokens: the first tokens only, 0 = all held); the kernel's
        from_cache inputs come from it (leave them out)."""
        name, version = _model_ref(model)
        cache, head, tokens = _cache_ref(kv_cache)
        outputs, used, elapsed, model_version = self._c.run(
            kernel, inputs, dict(params or {}), backend, name, version, cache, head, tokens)
        return RunResult(outputs, used, elapsed, model_version)

    def load_model(self, name, kind, tensors=None, config=None, version=0, replace=False,
                   checkpoint_path=""):
        """Loads a model into the worker's memory; returns its description
        (as list_models() entries): {"name", "version", "kind", "config",
        "bytes", "optimizer_bytes", "train_steps", "tensors": [(name, shape)]}.

        `tensors`: dict name -> float32/float64 array (TypeError otherwise,
        ValueError for NaN/Inf), names and shapes as the kind's layout wants;
        sent in chunks of at most 1 MiB, stored as float32. `config`: dict
        str -> int, the kind's sizes (e.g. {"dim": 64}). `version` 0 = 1 for
        a new name, held + 1 with `replace=True` (which replaces a model of
        the same name; without it loading a held name raises
        FailedPreconditionError). `checkpoint_path` (kinds "mlp", "cnn";
        instead of tensors): a tandem checkpoint relative to the worker's
        --model_dir."""
        return self._c.load_model(name, kind, None if tensors is None else dict(tensors),
                                  {str(k): int(v) for k, v in (config or {}).items()},
                                  int(version), bool(replace), os.fspath(checkpoint_path))

    def read_model(self, name, version=0):
        """The model's current weights (after any training): (header, tensors)
        with header {"name", "version", "kind", "config", "tensors": [(name,
        shape)]} and tensors a dict name -> float32 array, in layout order.
        version 0 = the one held now."""
        return self._c.read_model(name, int(version))

    def unload_model(self, name, version=0):
        """Frees the model (version 0 = whichever is held); returns the bytes
        freed (weights plus optimizer state)."""
        return self._c.unload_model(name, int(version))

    def create_kv_cache(self, name, heads, head_dim, code_bits=0, replace=False):
        """An empty KV cache; returns its description {"name", "heads",
        "head_dim", "code_bits", "tokens", "capacity_tokens", "bytes",
        "backend"}. code_bits: bits of each token's Spotlight code per head
        (a multiple of 32; 0 = no codes). replace=True empties a cache of
        the same name (else FailedPreconditionError)."""
        return self._kv.create(name, int(heads), int(head_dim), int(code_bits), bool(replace))

    def append_kv_cache(self, name, keys, values, codes=None):
        """Appends n tokens: keys and values (heads, n, head_dim) float32 or
        float64 (stored as float32), codes (heads, n, code_bits // 8) uint8
        when the cache holds codes. Streamed in 1 MiB chunks; returns the
        cache's description after the append."""
        return self._kv.append(name, keys, values, codes)

    def drop_kv_cache(self, name):
        """Frees the cache; returns the bytes freed."""
        return self._kv.drop(name)

    def list_kv_caches(self):
        """{"caches": [descriptions, sorted by name], "used_bytes",
        "max_bytes" (the worker's --max_gpu_mb budget), "backend"}."""
        return self._kv.list()

    def list_models(self):
        """{"models": [descriptions as load_model returns, sorted by name],
        "used_bytes", "max_bytes" (the worker's --max_model_mb budget)}."""
        return self._c.list_models()


class LocalWorker:
    """A tandem-worker process on 127.0.0.1 (any free port), stopped by
    close() or at the end of a `with` block. `binary` defaults to
    $TANDEM_WORKER_BIN, else the build tree's, else PATH's (tandem._binaries)."""

    def __init__(self, binary=None, args=()):
        binary = binary or _binaries.binary("worker")
        self._p = subprocess.Popen([binary, "--listen=127.0.0.1:0", *args],
                                   stdout=subprocess.PIPE, text=True)
        self.address = None
        for line in self._p.stdout:
            if "listening on " in line:
                self.address = "127.0.0.1:" + line.split("listening on ")[1].split()[0] \
                    .rsplit(":", 1)[-1]
                break
        if self.address is None:
            self.close()
            raise RuntimeError(f"{binary} did not start (no 'listening on' line)")
        # Keep draining its stdout so that the worker never blocks on a full pipe.
        threading.Thread(target=self._p.stdout.read, daemon=True).start()

    def close(self):
        if self._p.poll() is None:
            self._p.terminate()
            try:
                self._p.wait(timeout=20)
            except subprocess.TimeoutExpired:
                self._p.kill()
                self._p.wait()

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()

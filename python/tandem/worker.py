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
"""

import collections
import os
import subprocess
import threading

from . import _tandem

RunResult = collections.namedtuple("RunResult", ["outputs", "backend", "elapsed_us"])


class Client:
    """A tandem-worker at `address` (host:port). Plaintext unless
    `tls_root_ca` (PEM roots) is given; `server_name` overrides the TLS name."""

    def __init__(self, address, *, tls_root_ca=None, server_name=None, timeout_s=60.0):
        self._c = _tandem._WorkerClient(address, os.fspath(tls_root_ca or ""),
                                        server_name or "", float(timeout_s))

    def close(self):
        """Closes the channel (not while calls are in flight); later calls
        raise FailedPreconditionError. A worker's clean shutdown waits for
        open channels, so close clients first."""
        self._c.close()

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

    def run(self, kernel, inputs, params=None, backend=""):
        """Runs `kernel`; returns RunResult(outputs: list of arrays, backend,
        elapsed_us). backend "" = the worker's best, "cpu" or "cuda"."""
        outputs, used, elapsed = self._c.run(kernel, inputs, dict(params or {}), backend)
        return RunResult(outputs, used, elapsed)


class LocalWorker:
    """A tandem-worker process on 127.0.0.1 (any free port), stopped by
    close() or at the end of a `with` block. `binary` defaults to
    $TANDEM_WORKER_BIN, else the build tree's."""

    def __init__(self, binary=None, args=()):
        binary = (binary or os.environ.get("TANDEM_WORKER_BIN")
                  or _tandem._default_binaries()["worker"])
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

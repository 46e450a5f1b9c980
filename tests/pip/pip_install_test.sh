#!/usr/bin/env bash
# pip install of the tandem package (python/pyproject.toml, python/setup.py):
# in a fresh venv (--system-site-packages: Debian's numpy), offline
# (--no-build-isolation --no-index), `pip wheel ./python` builds a wheel from
# BUILD_DIR's _tandem (TANDEM_CMAKE_BUILD_DIR: no second compile), `pip
# install` installs it, and outside the source tree (another working
# directory, no PYTHONPATH) `import tandem` loads the venv's copy and
# encodes a report.
# Usage: tests/pip/pip_install_test.sh BUILD_DIR [MODULE]
#   BUILD_DIR configured with -DTANDEM_BUILD_PYTHON=ON, its _tandem built
#   (ctest: pip_install_test, label python; MODULE = $<TARGET_FILE:_tandem>).
set -euo pipefail

if [ $# -lt 1 ] || [ $# -gt 2 ]; then
  echo "usage: $0 BUILD_DIR [MODULE]" >&2
  exit 2
fi
build_dir=$(cd "$1" && pwd)
# Tests do not build: without the module, `pip wheel` would compile it (and
# the daemons) under the test's timeout.
module=${2:-}
if [ -z "$module" ]; then
  module=$(find "$build_dir/python/tandem" -maxdepth 1 -name '_tandem*.so' 2>/dev/null \
             | head -n 1 || true)
fi
if [ -z "$module" ] || [ ! -f "$module" ]; then
  echo "pip_install_test: FAIL: no _tandem module in $build_dir:" \
       "cmake --build $build_dir --target _tandem first" >&2
  exit 1
fi
source_dir=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
# Debian's interpreter (its numpy, setuptools, wheel, pip), the one the build
# tree's module is built for (python/CMakeLists.txt), not a PATH shim.
python=/usr/bin/python3
[ -x "$python" ] || python=python3

tmp=$(mktemp -d "${TMPDIR:-/tmp}/tandem-pip-test.XXXXXX")
trap 'rm -rf "$tmp"' EXIT

echo "pip_install_test: venv in $tmp/venv"
"$python" -m venv --system-site-packages "$tmp/venv"
venv_python=$tmp/venv/bin/python
unset PYTHONPATH PYTHONHOME
# Nothing from an index, a user site or a pip configuration's find-links.
for v in $(compgen -e); do
  case $v in PIP_*) unset "$v" ;; esac
done
export PIP_CONFIG_FILE=/dev/null PIP_NO_INPUT=1 PIP_DISABLE_PIP_VERSION_CHECK=1
export PYTHONNOUSERSITE=1

echo "pip_install_test: pip wheel ./python (TANDEM_CMAKE_BUILD_DIR=$build_dir)"
(cd "$source_dir" && TANDEM_CMAKE_BUILD_DIR=$build_dir "$venv_python" -m pip wheel -v \
   --no-build-isolation --no-index --no-deps -w "$tmp/wheels" ./python)
wheels=("$tmp"/wheels/tandem-*.whl)
if [ ${#wheels[@]} -ne 1 ] || [ ! -f "${wheels[0]}" ]; then
  echo "pip_install_test: FAIL: expected one tandem wheel, got: ${wheels[*]}" >&2
  exit 1
fi
wheel=${wheels[0]}
echo "pip_install_test: built $(basename "$wheel")"
case "$(basename "$wheel")" in
  *-cp3*-linux_*.whl) ;;
  *) echo "pip_install_test: FAIL: not a platform wheel: $wheel" >&2; exit 1 ;;
esac
"$venv_python" -m zipfile -l "$wheel"

"$venv_python" -m pip install --no-index --no-deps "$wheel"

# Outside the source tree: a directory of its own, no PYTHONPATH.
mkdir "$tmp/elsewhere"
cd "$tmp/elsewhere"
"$venv_python" - "$tmp/venv" "$source_dir" <<'EOF'
import os
import sys

import numpy as np

import tandem

venv, source = (os.path.realpath(p) for p in sys.argv[1:3])
where = os.path.realpath(tandem.__file__)
assert where.startswith(venv + os.sep), f"tandem from {where}, not from the venv {venv}"
assert not where.startswith(source + os.sep), where
assert os.path.realpath(tandem._tandem.__file__).startswith(venv + os.sep), tandem._tandem.__file__

# An offline report: D = 2 groups x 4 blocks x 8 = 64 (python/tests/test_encoder.py).
e = tandem.ReportEncoder("app-task", 3, 64, 8, 2, 2, clip_l2_norm=1.0, max_summands=10)
assert e.dimension == 64
r = e.encode(np.ones(64, dtype=np.float32))        # norm 8: clipped to 1
assert isinstance(r, tandem.EncodedReport)
assert len(r.report_id) == 16
assert r.to_leader and r.to_helper and r.to_leader != r.to_helper
assert r.upload_bytes == len(r.to_leader) + len(r.to_helper)
assert abs(r.clip_factor - 1 / 8) < 1e-6, r.clip_factor
try:
    e.encode(np.zeros(64, np.int32))
except TypeError as err:
    assert "float32 or float64" in str(err), err
else:
    raise AssertionError("an int32 update was accepted")

# The pure-Python modules came along: a safetensors round trip.
t = {"w": np.arange(6, dtype=np.float32).reshape(2, 3)}
back = tandem.safetensors.loads(tandem.safetensors.dumps(t))
assert np.array_equal(back["w"], t["w"]) and back["w"].dtype == np.float32
print(f"pip_install_test: import tandem from {where}: encoded {r.upload_bytes} bytes, "
      f"clip factor {r.clip_factor:.4f}")
EOF
"$venv_python" -m pip show tandem
echo "pip_install_test: OK"

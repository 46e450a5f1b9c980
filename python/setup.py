"""Builds the tandem wheel: the extension module comes from the repository's
CMake project (target _tandem), the pure-Python modules from python/tandem.

    python3 -m pip install --no-build-isolation --no-index ./python
    python3 -m pip wheel --no-build-isolation --no-index --no-deps -w dist ./python

Metadata: pyproject.toml; the version: the top-level CMakeLists.txt's
project(tandem VERSION x.y.z).

Where the sources are: pip (21.3 and later, Debian 12's 23.0 included) builds
a local directory in place, so this file's folder is python/ of the checkout
and the repository root is its parent. A build that copies python/ elsewhere
(an sdist, `python -m build` without --wheel) loses the C++ sources: point
TANDEM_SOURCE_DIR at the checkout's root then, or build from the checkout.

Where CMake builds (build_ext):
  * TANDEM_CMAKE_BUILD_DIR=<dir>: an existing, configured build tree with
    TANDEM_BUILD_PYTHON=ON (e.g. build/), named by an absolute path (pip runs
    this file in python/, not in the caller's directory); only `cmake --build
    <dir> --target _tandem` runs there (a no-op when it is up to date),
    nothing is reconfigured. The tests and developers reuse the tree they
    already built. Anything else there is an error, never a fresh build.
  * otherwise the checkout's build-pip/ (ignored by git like every /build*/
    folder), configured with Release, TANDEM_BUILD_PYTHON=ON, no tests,
    benchmarks or CUDA, for the interpreter running this build; the first
    build compiles the libraries and the daemons (`pip install -v` shows
    it). Extra configure arguments: TANDEM_CMAKE_ARGS (shell words), e.g.
    "-DTANDEM_MARCH=x86-64-v2" for a module that runs on older x86-64 CPUs
    than the building one. The tree persists (not setuptools' build_temp,
    removed with the rest below): a second `pip install` recompiles only what
    changed (ccache helps too), and the daemons the module names stay.
setuptools' own build folder (build/lib, the .egg-info) is a temporary
folder removed at exit, not python/build and python/tandem.egg-info: in
place they would litter the sources, and a stale build/lib would put
removed modules into the next wheel.

The module keeps the paths of the daemons of the tree it was built in
(tandem.sim, tandem.worker: tandem-aggregator, tandem-worker, ...); without
that tree, name them with TANDEM_AGGREGATOR_BIN, TANDEM_WORKER_BIN, ...
ReportEncoder and Participant need no daemon.
"""

import atexit
import os
import re
import shlex
import shutil
import subprocess
import sys
import sysconfig
import tempfile
from pathlib import Path

from setuptools import Extension, setup
from setuptools.command.build_ext import build_ext

HERE = Path(__file__).resolve().parent


def source_root():
    """The repository root (holds CMakeLists.txt and python/CMakeLists.txt)."""
    env = os.environ.get("TANDEM_SOURCE_DIR")
    root = Path(env).resolve() if env else HERE.parent
    if not (root / "CMakeLists.txt").is_file() or not (root / "python" / "CMakeLists.txt").is_file():
        raise SystemExit(
            f"tandem setup.py: no tandem checkout at {root} (CMakeLists.txt and "
            "python/CMakeLists.txt): build from python/ of the repository, or set "
            "TANDEM_SOURCE_DIR to its root")
    return root


def cmake_version(root):
    text = (root / "CMakeLists.txt").read_text()
    m = re.search(r"project\(\s*tandem\s+VERSION\s+([0-9]+(?:\.[0-9]+)*)", text)
    if not m:
        raise SystemExit(f"tandem setup.py: no project(tandem VERSION ...) in {root}/CMakeLists.txt")
    return m.group(1)


# The configuration of a fresh tree: the extension and the daemons it runs,
# nothing else. The option names are the top-level CMakeLists.txt's.
CMAKE_OPTIONS = [
    "-DCMAKE_BUILD_TYPE=Release",
    "-DTANDEM_BUILD_PYTHON=ON",
    "-DTANDEM_BUILD_TESTS=OFF",
    "-DTANDEM_BUILD_BENCHMARKS=OFF",
    "-DTANDEM_ENABLE_CUDA=OFF",
]


def configure_args(root, build_dir):
    """The `cmake` command line configuring a fresh tree in build_dir."""
    args = ["cmake", "-S", str(root), "-B", str(build_dir), *CMAKE_OPTIONS,
            # The module is built for the interpreter that builds the wheel
            # (python/CMakeLists.txt defaults to /usr/bin/python3).
            f"-DPython_EXECUTABLE={sys.executable}"]
    if not (Path(build_dir) / "CMakeCache.txt").exists():
        if "CMAKE_GENERATOR" not in os.environ and shutil.which("ninja"):
            args += ["-G", "Ninja"]
    args += shlex.split(os.environ.get("TANDEM_CMAKE_ARGS", ""))
    return args


def run(cmd, **kw):
    print("tandem setup.py:", " ".join(shlex.quote(str(c)) for c in cmd), flush=True)
    subprocess.run([str(c) for c in cmd], check=True, **kw)


class CMakeBuild(build_ext):
    """build_ext for tandem._tandem: CMake builds it, this copies it."""

    def build_extension(self, ext):
        root = source_root()
        named = os.environ.get("TANDEM_CMAKE_BUILD_DIR")
        if named:
            build_dir = Path(named)
            cache = build_dir / "CMakeCache.txt"
            if not build_dir.is_absolute():
                raise SystemExit(f"tandem setup.py: TANDEM_CMAKE_BUILD_DIR={named}: name the "
                                 "build tree by an absolute path (pip runs this in python/)")
            if not cache.is_file():
                raise SystemExit(f"tandem setup.py: TANDEM_CMAKE_BUILD_DIR={named} is not a "
                                 "configured CMake build tree (no CMakeCache.txt)")
            if not re.search(r"^TANDEM_BUILD_PYTHON:BOOL=(ON|TRUE|1|YES)$", cache.read_text(),
                             re.M | re.I):
                raise SystemExit(f"tandem setup.py: {build_dir} was configured without "
                                 "-DTANDEM_BUILD_PYTHON=ON")
        else:
            build_dir = root / "build-pip"
            build_dir.mkdir(exist_ok=True)
            run(configure_args(root, build_dir))

        cmd = ["cmake", "--build", build_dir, "--target", "_tandem"]
        if "CMAKE_BUILD_PARALLEL_LEVEL" not in os.environ:
            cmd += ["-j", str(self.parallel or os.cpu_count() or 1)]
        run(cmd)

        # python/CMakeLists.txt: LIBRARY_OUTPUT_DIRECTORY <build>/python/tandem.
        suffix = sysconfig.get_config_var("EXT_SUFFIX")
        built = build_dir / "python" / "tandem" / ("_tandem" + suffix)
        if not built.is_file():
            found = sorted(p.name for p in (build_dir / "python" / "tandem").glob("_tandem*.so"))
            raise SystemExit(
                f"tandem setup.py: {built} was not built"
                + (f" (found {', '.join(found)}: that tree was configured for another "
                   f"Python than {sys.executable})" if found else ""))
        dest = Path(self.get_ext_fullpath(ext.name))
        dest.parent.mkdir(parents=True, exist_ok=True)
        print(f"tandem setup.py: copying {built} -> {dest}", flush=True)
        shutil.copy2(built, dest)


if __name__ == "__main__":
    ROOT = source_root()
    # setuptools' build and egg-info folders: temporary (see above).
    BUILD_BASE = tempfile.mkdtemp(prefix="tandem-setup-")
    atexit.register(shutil.rmtree, BUILD_BASE, ignore_errors=True)
    setup(
        version=cmake_version(ROOT),
        # python/ also holds src/ (the C++ bindings) and tests/: no
        # auto-discovery (a src/ folder would make setuptools look inside it).
        packages=["tandem"],
        # No sources: CMakeBuild builds it; its presence makes the wheel
        # platform-specific (cp311-cp311-linux_x86_64).
        ext_modules=[Extension("tandem._tandem", sources=[])],
        cmdclass={"build_ext": CMakeBuild},
        options={"build": {"build_base": BUILD_BASE},
                 "egg_info": {"egg_base": BUILD_BASE}},
        zip_safe=False,
    )

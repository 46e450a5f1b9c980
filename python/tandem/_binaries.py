"""Where the tandem daemons are, for tandem.sim and tandem.worker:
$TANDEM_<NAME>_BIN when set, else those of the build tree this module was
built in (a developer's checkout, a pip install from it), else the ones on
PATH (the Debian packages tandem-aggregator, tandem-worker, ... install
them in /usr/bin)."""

import os
import shutil

from . import _tandem


def binary(name):
    """The path of tandem-<name> (name: aggregator, coordinator, worker,
    admin, client); the build tree's path when none is found (the error
    then names it)."""
    env = os.environ.get("TANDEM_%s_BIN" % name.upper())
    if env:
        return env
    built = _tandem._default_binaries()[name]
    if os.path.exists(built):
        return built
    return shutil.which("tandem-" + name) or built

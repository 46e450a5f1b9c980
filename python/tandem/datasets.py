"""The data sets tandem's C++ side reads, as NumPy arrays.

load("fmnist") reads Debian's dataset-fashion-mnist (IDX files under
/usr/share/datasets), load("digits") the sklearn digits CSV of
python3-sklearn, both installed by deploy/install-deps.sh; nothing is
downloaded. Images are float32 in [0, 1], shape (N, C, H, W); labels int64.
A missing package raises tandem.NotFoundError with the install hint.
"""

from . import _tandem


def load(name="fmnist", seed=1, max_train=0, max_test=0):
    """(x_train, y_train, x_test, y_test) of data set `name` ("fmnist" or
    "digits"), as every tandem party splits it for `seed`; max_* > 0 truncate."""
    return _tandem._load_dataset(name, int(seed), int(max_train), int(max_test))

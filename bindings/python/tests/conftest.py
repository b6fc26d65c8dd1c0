import os
import sys

import pytest

# The tests run against the installed package (`make python-test` installs it), never the
# source folder: fail loudly if it is missing instead of skipping.
try:
    import sprig  # noqa: F401
except ImportError as e:  # pragma: no cover
    sys.exit(f"the sprig package is not installed ({e}): run `make python-test`")


@pytest.fixture
def db(tmp_path):
    d = sprig.Db(str(tmp_path / "db"), io_backend="posix")
    yield d
    d.close()


def key(i: int) -> bytes:
    return sprig.key_path(i.to_bytes(4, "little"))

"""Sprig: an SSD-optimized, merklized key-value store for blockchain state.

    import sprig
    with sprig.Db("./state") as db:
        alice = db.key_path(b"alice")          # byte keys hash to 32-byte key paths
        with db.batch() as b:                  # committed (durably) when the block ends
            b.put(alice, b"100")
        assert db.get(alice) == b"100"
        proof = db.view().prove(alice)
        assert sprig.verify(proof, db.root, alice, b"100")

Keys are 32-byte key paths (`bytes` of length 32); `Db.key_path` (or `sprig.key_path`)
hashes any byte string to one. Values are `bytes`. Every error is a `sprig.SprigError`.
"""

from .errors import (
    AlreadyExistsError,
    ClosedError,
    CorruptionError,
    InvalidArgumentError,
    IoError,
    LockedError,
    NotFoundError,
    ProofError,
    ReadOnlyError,
    SprigError,
    StaleError,
)
from ._sprig import (
    Batch,
    CommitInfo,
    Cursor,
    Db,
    Pending,
    Pipeline,
    View,
    key_path,
    verify,
    verify_witness,
)

__all__ = [
    "AlreadyExistsError",
    "Batch",
    "ClosedError",
    "CommitInfo",
    "CorruptionError",
    "Cursor",
    "Db",
    "InvalidArgumentError",
    "IoError",
    "LockedError",
    "NotFoundError",
    "Pending",
    "Pipeline",
    "ProofError",
    "ReadOnlyError",
    "SprigError",
    "StaleError",
    "View",
    "key_path",
    "verify",
    "verify_witness",
]

"""The exceptions Sprig raises: every one is a `SprigError`."""


class SprigError(Exception):
    """Any error from Sprig."""


class IoError(SprigError, OSError):
    """A file could not be read, written or synced."""


class CorruptionError(SprigError):
    """Data on disk failed its checks; nothing damaged was returned."""


class InvalidArgumentError(SprigError, ValueError):
    """An argument is malformed or out of range (a key of the wrong length, a bad option)."""


class NotFoundError(SprigError, LookupError):
    """No database, table or snapshot of that name."""


class AlreadyExistsError(SprigError):
    """A database, table or snapshot of that name exists already."""


class LockedError(SprigError):
    """Another process (or handle) has the database open for writing."""


class ReadOnlyError(SprigError):
    """The database was opened read-only."""


class ProofError(SprigError):
    """A proof or witness does not verify, or does not decode."""


class StaleError(SprigError):
    """A pending batch can no longer commit (another commit happened, it was discarded,
    superseded, or committed already)."""


class ClosedError(SprigError):
    """The database was closed, or the batch or pending batch was used up."""

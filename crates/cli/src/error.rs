//! The CLI's error type and its exit codes. Every failure a command can meet maps to exactly
//! one exit code, so scripts can tell bad usage, a missing key, corruption, I/O failure, bad
//! input and a missing (or already existing) database apart.

use std::path::PathBuf;

/// Exit codes of `sprig`, as documented in `--help` and docs/CLI.md.
pub mod exit {
    /// Success.
    pub const OK: u8 = 0;
    /// `get` of a key that is not in the database.
    pub const NOT_FOUND: u8 = 1;
    /// Bad usage: unknown command or option, missing argument, conflicting options.
    pub const USAGE: u8 = 2;
    /// The database is corrupt (`check` found problems, or a read failed its checks).
    pub const CORRUPTION: u8 = 3;
    /// An I/O call failed, or the database is locked or refuses writes.
    pub const IO: u8 = 4;
    /// An input file, key, value or proof is malformed, or a proof does not verify.
    pub const INVALID_INPUT: u8 = 5;
    /// No database at the path, or one already exists where a new one was asked for.
    pub const DATABASE: u8 = 6;
}

/// Everything a command can fail with.
#[derive(Debug, thiserror::Error)]
pub enum CliError {
    /// Bad usage that clap cannot see (e.g. `--db` missing for a command that needs it).
    #[error("{0}")]
    Usage(String),
    /// An error from the engine.
    #[error(transparent)]
    Db(#[from] sprig::Error),
    /// A malformed input: a key, a value, a line of a file, a record.
    #[error("{source_name}: {what}")]
    Input {
        /// The file (or argument) holding the bad input.
        source_name: String,
        /// What is wrong, with the line or byte offset where it helps.
        what: String,
    },
    /// A proof or witness was rejected.
    #[error("verification failed: {0}")]
    Verify(String),
    /// A directory that is not a Sprig database stands where one would be created or removed.
    #[error("{0} exists and is not a Sprig database; refusing to touch it")]
    NotADatabase(PathBuf),
}

impl CliError {
    /// A bad-input error.
    pub fn input(source_name: impl Into<String>, what: impl Into<String>) -> CliError {
        CliError::Input {
            source_name: source_name.into(),
            what: what.into(),
        }
    }

    /// An I/O error of the CLI itself, reported like the engine's.
    pub fn io(op: &'static str, file: impl Into<String>, source: std::io::Error) -> CliError {
        CliError::Db(sprig::Error::io(op, file, source))
    }

    /// The exit code for this error.
    pub fn exit_code(&self) -> u8 {
        match self {
            CliError::Usage(_) => exit::USAGE,
            CliError::Input { .. } | CliError::Verify(_) => exit::INVALID_INPUT,
            CliError::NotADatabase(_) => exit::DATABASE,
            CliError::Db(e) => match e {
                sprig::Error::Corruption { .. } => exit::CORRUPTION,
                sprig::Error::InvalidArgument(_)
                | sprig::Error::ValueTooLarge { .. }
                | sprig::Error::Proof(_)
                | sprig::Error::NoResolver(_) => exit::INVALID_INPUT,
                sprig::Error::NoSuchTable(_)
                | sprig::Error::TableExists(_)
                | sprig::Error::SnapshotExists(_)
                | sprig::Error::NotEmpty(_)
                | sprig::Error::UnionInProgress { .. }
                | sprig::Error::DefaultTable
                | sprig::Error::ResolverMissing { .. } => exit::USAGE,
                sprig::Error::NoSuchSnapshot(_) => exit::NOT_FOUND,
                sprig::Error::HasherMismatch { .. } | sprig::Error::NotRetained { .. } => {
                    exit::USAGE
                }
                sprig::Error::NotFound(_) | sprig::Error::AlreadyExists(_) => exit::DATABASE,
                _ => exit::IO,
            },
        }
    }

    /// A one-word name of the kind of failure, for `--json` output.
    pub fn kind(&self) -> &'static str {
        match self.exit_code() {
            exit::USAGE => "usage",
            exit::CORRUPTION => "corruption",
            exit::INVALID_INPUT => "invalid_input",
            exit::DATABASE => "database",
            _ => "io",
        }
    }

    /// A suggestion of what to do next, where there is an obvious one.
    pub fn hint(&self) -> Option<String> {
        match self {
            CliError::Db(sprig::Error::NotFound(p)) => Some(format!(
                "create one with `sprig init --db {}`, or pass --db with the right path",
                p.display()
            )),
            CliError::Db(sprig::Error::AlreadyExists(_)) => {
                Some("use the existing database, or pick another --db path".into())
            }
            CliError::Db(sprig::Error::Corruption { file, .. }) if file == "MANIFEST" => Some(
                "the database's MANIFEST file is missing or damaged: restore it from a backup of \
                 this database (its data files are still there); do not run `sprig init` here"
                    .into(),
            ),
            CliError::Db(sprig::Error::Corruption { .. }) => {
                Some("run `sprig check` to list every damaged page".into())
            }
            _ => None,
        }
    }
}

/// The result of a command.
pub type CliResult<T> = std::result::Result<T, CliError>;

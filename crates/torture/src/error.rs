//! The tool's error type: the engine's errors, the tool's own I/O, a bad acknowledgement log
//! and bad arguments. A failed check is not an error: it is counted and reported in the
//! summary.

/// Everything that stops a torture run before it can report.
#[derive(Debug, thiserror::Error)]
pub enum TortureError {
    /// The engine refused something the tool needed (creating or reading the database).
    #[error(transparent)]
    Db(#[from] sprig::Error),
    /// The tool's own file or process handling failed.
    #[error("{what}: {source}")]
    Io {
        /// What was being done.
        what: String,
        /// The OS error.
        #[source]
        source: std::io::Error,
    },
    /// The acknowledgement log is malformed (the child and parent disagree on its format).
    #[error("acknowledgement log: {0}")]
    Log(String),
    /// The arguments cannot be run.
    #[error("{0}")]
    Usage(String),
}

impl TortureError {
    /// Wrap an I/O error with what was being done.
    pub fn io(what: impl Into<String>, source: std::io::Error) -> TortureError {
        TortureError::Io {
            what: what.into(),
            source,
        }
    }
}

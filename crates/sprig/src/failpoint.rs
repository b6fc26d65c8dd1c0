//! Failpoints: named places inside commit, checkpoint, cleaning and file rotation where the
//! torture tool can make the process abort, to test recovery from a crash at an exact step.
//!
//! Only with the cargo feature `failpoints`; without it the `failpoint!` hooks expand to
//! nothing and this module holds no code. A failpoint is armed by the environment variable
//! `SPRIG_FAILPOINT=name[:count]` (read on the first hook reached) or by `arm`; the
//! `count`-th time the named hook is reached (default the first), the process calls
//! [`std::process::abort`]: it never changes what is written, it only stops the process, as a
//! kill at that moment would. A failpoint armed with `arm_error` instead makes the function
//! holding the hook fail with [`crate::Error::Internal`] there (for in-process tests of what a
//! failure at that step leaves behind).
//!
//! Pause points (`pausepoint!`, same feature) are the other kind of hook: places inside a
//! race window where a test can make one thread of its own sleep (`pause_here`), so that a
//! race the window allows shows up reliably. A pause only delays the thread that asked for it.

/// Abort the process (or fail the enclosing function) here if the failpoint of this name is
/// armed and its count is reached.
#[cfg(feature = "failpoints")]
macro_rules! failpoint {
    ($name:expr) => {
        $crate::failpoint::hit($name).map_err($crate::Error::Internal)?
    };
}

/// Without the `failpoints` feature a hook is nothing.
#[cfg(not(feature = "failpoints"))]
macro_rules! failpoint {
    ($name:expr) => {};
}

/// Sleep here if this thread asked to be paused at the pause point of this name.
#[cfg(feature = "failpoints")]
macro_rules! pausepoint {
    ($name:expr) => {
        $crate::failpoint::pause_point($name)
    };
}

/// Without the `failpoints` feature a pause point is nothing.
#[cfg(not(feature = "failpoints"))]
macro_rules! pausepoint {
    ($name:expr) => {};
}

#[cfg(feature = "failpoints")]
pub use armed::*;

#[cfg(feature = "failpoints")]
mod armed {
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::{Mutex, OnceLock};

    /// The environment variable that arms a failpoint: `name` or `name:count`.
    pub const FAILPOINT_ENV: &str = "SPRIG_FAILPOINT";

    /// Every failpoint, in the order a commit reaches them.
    pub const FAILPOINTS: &[&str] = &[
        // Segment writes issued, not yet synced.
        "commit.pages_written",
        // A segment file was created by this commit and written, before the directory sync.
        "commit.segment_created",
        // Segments synced, the commit record not yet written.
        "commit.pages_synced",
        // The commit record written to the log, not yet synced.
        "wal.record_written",
        // The commit record synced (durable), the new version not yet published.
        "commit.record_synced",
        // The cleaner chose and read what to relocate, nothing written yet.
        "cleaner.planned",
        // A checkpoint: the new log file created, the checkpoint not yet written.
        "checkpoint.wal_rotated",
        // A checkpoint: its temporary file written, not yet synced or renamed.
        "checkpoint.tmp_written",
        // A checkpoint: renamed into place, the directory not yet synced.
        "checkpoint.renamed",
        // A checkpoint: old logs and checkpoints being deleted.
        "checkpoint.deleting_old",
        // The cleaner: emptied segments being deleted.
        "cleaner.deleting_segment",
        // A named snapshot: its temporary file written, not yet synced or renamed.
        "snapshot.tmp_written",
        // A named snapshot: renamed into place, the directory not yet synced.
        "snapshot.renamed",
        // A named snapshot about to be deleted.
        "snapshot.deleting",
    ];

    /// Every pause point.
    pub const PAUSE_POINTS: &[&str] = &[
        // A view or batch of the latest version: the head read, its pin not yet registered.
        "view.pinning",
    ];

    std::thread_local! {
        static PAUSES: std::cell::RefCell<Vec<(&'static str, std::time::Duration)>> =
            const { std::cell::RefCell::new(Vec::new()) };
    }

    /// From now on the calling thread sleeps `pause` each time it reaches the pause point
    /// `name` (a zero pause removes it). Other threads are not affected.
    pub fn pause_here(name: &str, pause: std::time::Duration) -> Result<(), FailpointError> {
        let name = PAUSE_POINTS
            .iter()
            .copied()
            .find(|p| *p == name)
            .ok_or_else(|| FailpointError::UnknownPausePoint(name.to_string()))?;
        PAUSES.with(|p| {
            let mut p = p.borrow_mut();
            p.retain(|(n, _)| *n != name);
            if !pause.is_zero() {
                p.push((name, pause));
            }
        });
        Ok(())
    }

    /// A pause point: sleep if this thread asked to be paused here.
    pub fn pause_point(name: &'static str) {
        let pause = PAUSES.with(|p| p.borrow().iter().find(|(n, _)| *n == name).map(|(_, d)| *d));
        if let Some(d) = pause {
            std::thread::sleep(d);
        }
    }

    struct Armed {
        name: String,
        remaining: u64,
        /// Fail the enclosing function instead of aborting the process.
        error: bool,
    }

    static ARMED: Mutex<Option<Armed>> = Mutex::new(None);
    static ANY: AtomicBool = AtomicBool::new(false);
    static FROM_ENV: OnceLock<()> = OnceLock::new();

    /// Why a failpoint setting was refused.
    #[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
    #[non_exhaustive]
    pub enum FailpointError {
        /// No failpoint has this name.
        #[error("no failpoint is named {0:?}; known: {known}", known = FAILPOINTS.join(", "))]
        Unknown(String),
        /// No pause point has this name.
        #[error("no pause point is named {0:?}; known: {known}", known = PAUSE_POINTS.join(", "))]
        UnknownPausePoint(String),
        /// The count is not a positive integer.
        #[error("failpoint count {0:?} is not a positive integer")]
        BadCount(String),
    }

    /// Parse `name[:count]`.
    pub fn parse(spec: &str) -> Result<(String, u64), FailpointError> {
        let (name, count) = match spec.split_once(':') {
            Some((name, count)) => {
                let n = count
                    .parse::<u64>()
                    .ok()
                    .filter(|n| *n > 0)
                    .ok_or_else(|| FailpointError::BadCount(count.to_string()))?;
                (name, n)
            }
            None => (spec, 1),
        };
        if !FAILPOINTS.contains(&name) {
            return Err(FailpointError::Unknown(name.to_string()));
        }
        Ok((name.to_string(), count))
    }

    /// Arm failpoint `name`: the process aborts the `count`-th time it is reached.
    pub fn arm(name: &str, count: u64) -> Result<(), FailpointError> {
        let (name, count) = parse(&format!("{name}:{count}"))?;
        FROM_ENV.get_or_init(|| ());
        set(Some(Armed {
            name,
            remaining: count,
            error: false,
        }));
        Ok(())
    }

    /// Arm failpoint `name` to fail the function holding it (with an internal error) the
    /// `count`-th time it is reached, once; the process goes on.
    pub fn arm_error(name: &str, count: u64) -> Result<(), FailpointError> {
        let (name, count) = parse(&format!("{name}:{count}"))?;
        FROM_ENV.get_or_init(|| ());
        set(Some(Armed {
            name,
            remaining: count,
            error: true,
        }));
        Ok(())
    }

    /// Disarm any failpoint.
    pub fn disarm() {
        FROM_ENV.get_or_init(|| ());
        set(None);
    }

    fn set(armed: Option<Armed>) {
        let mut slot = ARMED.lock().unwrap_or_else(|e| e.into_inner());
        ANY.store(armed.is_some(), Ordering::SeqCst);
        *slot = armed;
    }

    /// Arm from [`FAILPOINT_ENV`] once. A bad setting aborts too: a torture run with a
    /// misspelt failpoint must not pass silently.
    fn init_from_env() {
        FROM_ENV.get_or_init(|| {
            if let Ok(spec) = std::env::var(FAILPOINT_ENV) {
                match parse(&spec) {
                    Ok((name, remaining)) => set(Some(Armed {
                        name,
                        remaining,
                        error: false,
                    })),
                    Err(e) => {
                        eprintln!("{FAILPOINT_ENV}: {e}");
                        std::process::abort();
                    }
                }
            }
        });
    }

    /// A hook: abort (or fail, see `arm_error`) if `name` is armed and this is the hit it
    /// waits for.
    pub fn hit(name: &'static str) -> Result<(), String> {
        init_from_env();
        if !ANY.load(Ordering::SeqCst) {
            return Ok(());
        }
        let mut slot = ARMED.lock().unwrap_or_else(|e| e.into_inner());
        if let Some(armed) = slot.as_mut() {
            if armed.name == name {
                armed.remaining = armed.remaining.saturating_sub(1);
                if armed.remaining == 0 {
                    if armed.error {
                        *slot = None;
                        ANY.store(false, Ordering::SeqCst);
                        return Err(format!("failpoint {name} injected a failure"));
                    }
                    eprintln!("failpoint {name} reached: aborting");
                    std::process::abort();
                }
            }
        }
        Ok(())
    }

    #[cfg(test)]
    mod tests {
        use super::*;

        #[test]
        fn specs_parse_and_bad_ones_are_named() {
            assert_eq!(
                parse("commit.pages_synced:3").unwrap(),
                ("commit.pages_synced".to_string(), 3)
            );
            assert_eq!(parse("wal.record_written").unwrap().1, 1);
            assert!(matches!(parse("nope"), Err(FailpointError::Unknown(_))));
            assert!(matches!(
                parse("wal.record_written:0"),
                Err(FailpointError::BadCount(_))
            ));
            // Other tests in this process commit concurrently: a count never reached keeps
            // them alive while the armed path runs.
            assert!(arm("commit.pages_written", u64::MAX).is_ok());
            assert!(hit("wal.record_written").is_ok());
            assert!(hit("commit.pages_written").is_ok());
            assert!(matches!(arm("nope", 1), Err(FailpointError::Unknown(_))));
            disarm();
            // Pauses are per thread and only at pause points.
            assert!(matches!(
                pause_here("commit.pages_written", std::time::Duration::from_millis(1)),
                Err(FailpointError::UnknownPausePoint(_))
            ));
            pause_here("view.pinning", std::time::Duration::from_millis(1)).unwrap();
            let started = std::time::Instant::now();
            pause_point("view.pinning");
            assert!(started.elapsed() >= std::time::Duration::from_millis(1));
            pause_here("view.pinning", std::time::Duration::ZERO).unwrap();
        }
    }
}

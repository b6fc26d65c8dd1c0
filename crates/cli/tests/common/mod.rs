//! Helpers of the integration tests: run the `sprig` binary in a scratch directory and read
//! its exit code, output and JSON.
#![allow(dead_code)]

use std::io::Write;
use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// How long a test waits for one run of the binary before it kills it and fails: a run that
/// blocks (on a pipe, say) fails the test instead of hanging it.
pub const RUN_TIMEOUT: Duration = Duration::from_secs(60);

/// What one run of the binary did.
pub struct Run {
    /// The exit code (`None` if a signal ended the process).
    pub code: Option<i32>,
    pub stdout: String,
    pub stderr: String,
}

impl Run {
    /// The stdout as a JSON document.
    pub fn json(&self) -> serde_json::Value {
        serde_json::from_str(self.stdout.trim())
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}\nstderr: {}", self.stdout, self.stderr))
    }

    /// Assert the exit code, showing the output if it differs.
    pub fn expect(self, code: i32) -> Run {
        assert_eq!(
            self.code,
            Some(code),
            "stdout: {}\nstderr: {}",
            self.stdout,
            self.stderr
        );
        self
    }
}

/// The command `sprig args...` in `dir` with extra environment variables.
pub fn command(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Command {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sprig"));
    cmd.current_dir(dir).args(args).env_remove("SPRIG_DB");
    for (k, v) in env {
        cmd.env(k, v);
    }
    cmd
}

/// Run `sprig args...` in `dir` with extra environment variables.
pub fn sprig_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let out = command(dir, args, env).output().expect("the binary runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Wait for `child` (spawned with piped stdout and stderr) at most [`RUN_TIMEOUT`]; kill it
/// and panic naming `what` if it takes longer.
pub fn wait_with_timeout(mut child: Child, what: &str) -> Run {
    let start = Instant::now();
    while child.try_wait().expect("waiting for the binary").is_none() {
        if start.elapsed() > RUN_TIMEOUT {
            let _ = child.kill();
            let out = child.wait_with_output().expect("collecting the output");
            panic!(
                "{what}: still running after {RUN_TIMEOUT:?}, killed\nstderr: {}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        std::thread::sleep(Duration::from_millis(20));
    }
    let out = child.wait_with_output().expect("collecting the output");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Run `cmd` with `input` written to its stdin (from another thread, then closed), killing it
/// after [`RUN_TIMEOUT`].
pub fn run_with_stdin(mut cmd: Command, input: Vec<u8>, what: &str) -> Run {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("the binary runs");
    let mut stdin = child.stdin.take().expect("a piped stdin");
    // A reader that stops early closes the pipe: the write error is not the test's concern.
    std::thread::spawn(move || {
        let _ = stdin.write_all(&input);
    });
    wait_with_timeout(child, what)
}

/// Run `sprig args...` in `dir` with `input` on its stdin.
pub fn sprig_stdin(dir: &Path, args: &[&str], input: Vec<u8>) -> Run {
    run_with_stdin(command(dir, args, &[]), input, &args.join(" "))
}

/// Run `sprig args...` in `dir`.
pub fn sprig(dir: &Path, args: &[&str]) -> Run {
    sprig_env(dir, args, &[])
}

/// The hex of a byte string, as the engine writes it.
pub use sprig::hex;

/// Write a JSON Lines file of `n` records with text keys `key-<i>` and hex values.
pub fn write_text_keys(path: &Path, n: u32) {
    let mut text = String::new();
    for i in 0..n {
        text.push_str(&format!(
            "{{\"key\":\"key-{i}\",\"value\":\"{}\"}}\n",
            hex(&i.to_le_bytes())
        ));
    }
    std::fs::write(path, text).unwrap();
}

/// The latest root of the database `db` in `dir`.
pub fn root(dir: &Path, db: &str) -> String {
    let run = sprig(dir, &["--db", db, "--json", "root"]).expect(0);
    run.json()["root"].as_str().unwrap().to_string()
}

/// A new database `db` in `dir` holding `n` text keys, imported by bulk load.
pub fn loaded_db(dir: &Path, db: &str, n: u32) {
    sprig(dir, &["--db", db, "init"]).expect(0);
    let input = dir.join(format!("{db}-input.jsonl"));
    write_text_keys(&input, n);
    sprig(
        dir,
        &[
            "--db",
            db,
            "import",
            "--key-format",
            "text",
            input.to_str().unwrap(),
        ],
    )
    .expect(0);
}

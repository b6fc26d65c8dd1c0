//! Helpers of the integration tests: run the `sprig` binary in a scratch directory and read
//! its exit code, output and JSON.
#![allow(dead_code)]

use std::path::Path;
use std::process::Command;

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

/// Run `sprig args...` in `dir` with extra environment variables.
pub fn sprig_env(dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Run {
    let mut cmd = Command::new(env!("CARGO_BIN_EXE_sprig"));
    cmd.current_dir(dir).args(args).env_remove("SPRIG_DB");
    for (k, v) in env {
        cmd.env(k, v);
    }
    let out = cmd.output().expect("the binary runs");
    Run {
        code: out.status.code(),
        stdout: String::from_utf8_lossy(&out.stdout).into_owned(),
        stderr: String::from_utf8_lossy(&out.stderr).into_owned(),
    }
}

/// Run `sprig args...` in `dir`.
pub fn sprig(dir: &Path, args: &[&str]) -> Run {
    sprig_env(dir, args, &[])
}

/// The hex of a byte string, as the engine writes it.
pub use sprig::log::record::hex;

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

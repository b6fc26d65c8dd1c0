//! The CI smoke run: every workload created and run for a few batches at a tiny size with
//! `--check` (lookups and roots against the reference model), through `run` and through
//! `compare` (child processes, medians, JSON and Markdown output). Seconds, not minutes.

use std::path::Path;
use std::process::Command;

const BIN: &str = env!("CARGO_BIN_EXE_sprig-bench");

fn sprig_bench(args: &[&str]) -> String {
    let out = Command::new(BIN).args(args).output().unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout).to_string();
    assert!(
        out.status.success(),
        "sprig-bench {args:?} failed:\n{stdout}\n{}",
        String::from_utf8_lossy(&out.stderr)
    );
    stdout
}

fn dir_arg(p: &Path) -> &str {
    p.to_str().unwrap()
}

#[test]
fn every_workload_runs_and_matches_the_reference_model() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    for (workload, batch) in [("transfer", "500"), ("utxo", "256"), ("mixed", "50")] {
        let dir = tmp.path().join(workload);
        let dir = dir_arg(&dir);
        sprig_bench(&[
            "create",
            "--workload",
            workload,
            "--entries",
            "2^12",
            "--dir",
            dir,
        ]);
        let json = tmp.path().join(format!("{workload}.json"));
        let md = tmp.path().join(format!("{workload}.md"));
        let out = sprig_bench(&[
            "run",
            "--dir",
            dir,
            "--batches",
            "3",
            "--batch-size",
            batch,
            "--fresh",
            "50",
            "--check",
            "--quiet",
            "--json",
            dir_arg(&json),
            "--markdown",
            dir_arg(&md),
        ]);
        assert!(out.contains("equal the reference model"), "{out}");
        let result: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
        assert!(result["units_per_sec"].as_f64().unwrap() > 0.0);
        let markdown = std::fs::read_to_string(&md).unwrap();
        assert!(markdown.contains("| sprig |"));
        // The backend Sprig really used is in the result and the report.
        let io = result["io_backend"]
            .as_str()
            .expect("io_backend in the result");
        assert!(
            io.starts_with("io_uring") || io.starts_with("posix"),
            "{io}"
        );
        assert!(
            markdown.contains(&format!("I/O backend: {io}")),
            "{markdown}"
        );
        // A second run continues the sequence; the model check refuses it by name.
        let again = Command::new(BIN)
            .args(["run", "--dir", dir, "--batches", "1", "--check", "--quiet"])
            .output()
            .unwrap();
        assert!(!again.status.success());
        assert!(String::from_utf8_lossy(&again.stderr).contains("fresh from `create`"));
    }
}

#[test]
fn pipelined_utxo_gives_the_serial_roots() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let dir = dir_arg(tmp.path());
    sprig_bench(&[
        "create",
        "--workload",
        "utxo",
        "--entries",
        "3000",
        "--dir",
        dir,
    ]);
    let out = sprig_bench(&[
        "run",
        "--dir",
        dir,
        "--batches",
        "6",
        "--pipelined",
        "--check",
        "--quiet",
    ]);
    assert!(out.contains("equal the reference model"), "{out}");
}

#[test]
fn compare_runs_rounds_in_child_processes() {
    let tmp = tempfile::tempdir_in(env!("CARGO_TARGET_TMPDIR")).unwrap();
    let json = tmp.path().join("c.json");
    let md = tmp.path().join("c.md");
    let out = sprig_bench(&[
        "compare",
        "--workload",
        "mixed",
        "--entries",
        "2000",
        "--engines",
        "sprig",
        "--dir",
        dir_arg(tmp.path()),
        "--create",
        "--repeat",
        "2",
        "--batches",
        "2",
        "--batch-size",
        "20",
        "--check",
        "--json",
        dir_arg(&json),
        "--markdown",
        dir_arg(&md),
    ]);
    assert!(out.contains("every lookup equal"), "{out}");
    let c: serde_json::Value =
        serde_json::from_str(&std::fs::read_to_string(&json).unwrap()).unwrap();
    assert_eq!(c["runs"].as_array().unwrap().len(), 2);
    assert!(std::fs::read_to_string(&md)
        .unwrap()
        .contains("Medians over 2 rounds"));
}

//! A short kill torture as CI runs it: a few dozen SIGKILLs and failpoint aborts of a writer
//! child; every recovery must be the acknowledged commit or the one in flight, nothing lost.

use std::process::Command;

#[test]
fn a_short_kill_torture_loses_nothing() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sprig-torture"))
        .args([
            "kill",
            "--kills",
            "30",
            "--seed",
            "7",
            "--max-run-ms",
            "250",
        ])
        .args(["--keys", "2000", "--failpoint-percent", "40", "--db"])
        .arg(dir.path().join("kill"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the torture failed");
    assert!(stdout.contains("lost 0, mismatches 0"));
    assert!(stdout.contains("kills 30 "));
}

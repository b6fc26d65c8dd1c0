//! A short bit-flip torture as CI runs it: a few hundred single-bit flips across every kind of
//! file of a real database; each must be detected as corruption or harmless, never served.

use std::process::Command;

#[test]
fn a_short_bit_flip_torture_serves_no_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let out = Command::new(env!("CARGO_BIN_EXE_sprig-torture"))
        .args([
            "flip", "--flips", "300", "--seed", "11", "--keys", "800", "--db",
        ])
        .arg(dir.path().join("flip"))
        .output()
        .unwrap();
    let stdout = String::from_utf8_lossy(&out.stdout);
    println!("{stdout}{}", String::from_utf8_lossy(&out.stderr));
    assert!(out.status.success(), "the torture failed");
    assert!(stdout.contains("flips 300:"));
    assert!(stdout.contains("undetected 0, panics 0, untyped errors 0"));
}

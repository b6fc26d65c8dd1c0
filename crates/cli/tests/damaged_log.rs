//! The commit log damaged as an outside tester damaged it, through the command line: both
//! header copies of a record in the middle overwritten, the log cut by 5 bytes, the log cut
//! to nothing, the manifest deleted. Each used to answer an older version with exit 0 (and
//! `check` said "no problems found"); now a loss is either corruption (exit 3, nothing cut)
//! or, for a torn last record, reported on stderr and by `check`.

mod common;
use common::sprig;
use std::path::Path;

const SECTOR: u64 = 4096;

/// `init` and ten `put`s: ten acknowledged commits, each record two sectors.
fn ten_commits(d: &Path) {
    sprig(d, &["--db", "db", "init"]).expect(0);
    for i in 1..=10 {
        sprig(
            d,
            &["--db", "db", "put", "-k", "text", &format!("key-{i}"), "v"],
        )
        .expect(0);
    }
}

fn wal(d: &Path) -> std::path::PathBuf {
    d.join("db").join("wal-0000000001.log")
}

fn overwrite(path: &Path, offset: u64, bytes: &[u8]) {
    use std::os::unix::fs::FileExt;
    let f = std::fs::OpenOptions::new().write(true).open(path).unwrap();
    f.write_all_at(bytes, offset).unwrap();
}

#[test]
fn both_header_copies_of_a_middle_record_overwritten_is_corruption_and_nothing_is_cut() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ten_commits(d);
    let len = std::fs::metadata(wal(d)).unwrap().len();
    assert_eq!(len, 10 * 2 * SECTOR);
    // Record 5: its two copies start at sectors 8 and 9.
    overwrite(&wal(d), 8 * SECTOR, &[0xee; 80]);
    overwrite(&wal(d), 9 * SECTOR, &[0xee; 80]);
    let run = sprig(d, &["--db", "db", "root"]).expect(3);
    assert!(
        run.stderr.contains("wal-0000000001.log") && run.stderr.contains("offset 32768"),
        "{}",
        run.stderr
    );
    sprig(d, &["--db", "db", "get", "-k", "text", "key-10"]).expect(3);
    sprig(d, &["--db", "db", "put", "-k", "text", "key-11", "v"]).expect(3);
    sprig(d, &["--db", "db", "check"]).expect(3);
    assert_eq!(
        std::fs::metadata(wal(d)).unwrap().len(),
        len,
        "the log was cut"
    );
}

#[test]
fn a_log_cut_by_five_bytes_is_reported_by_every_command_and_by_check() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ten_commits(d);
    let len = std::fs::metadata(wal(d)).unwrap().len();
    std::fs::OpenOptions::new()
        .write(true)
        .open(wal(d))
        .unwrap()
        .set_len(len - 5)
        .unwrap();
    let run = sprig(d, &["--db", "db", "--json", "root"]).expect(0);
    assert_eq!(run.json()["seq"], 9);
    assert!(
        run.stderr.contains("warning") && run.stderr.contains("commit record 10"),
        "{}",
        run.stderr
    );
    let run = sprig(d, &["--db", "db", "--json", "check"]).expect(0);
    let doc = run.json();
    assert_eq!(doc["log"]["lost_tail"]["seq"], 10);
    assert_eq!(doc["log"]["lost_tail"]["bytes"], 2 * SECTOR - 5);
    let run = sprig(d, &["--db", "db", "check"]).expect(0);
    assert!(run.stdout.contains("warning"), "{}", run.stdout);
    // Reading changed nothing; the first write cuts the torn record and says so.
    assert_eq!(std::fs::metadata(wal(d)).unwrap().len(), len - 5);
    let run = sprig(d, &["--db", "db", "put", "-k", "text", "key-11", "v"]).expect(0);
    assert!(run.stderr.contains("discarded"), "{}", run.stderr);
    let run = sprig(d, &["--db", "db", "--json", "check"]).expect(0);
    assert_eq!(run.json()["log"]["lost_tail"], serde_json::Value::Null);
    assert_eq!(run.json()["seq"], 10);
}

#[test]
fn a_log_cut_to_nothing_is_corruption() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ten_commits(d);
    std::fs::write(wal(d), b"").unwrap();
    let run = sprig(d, &["--db", "db", "root"]).expect(3);
    assert!(run.stderr.contains("corruption"), "{}", run.stderr);
    sprig(d, &["--db", "db", "check"]).expect(3);
}

#[test]
fn a_deleted_manifest_is_corruption_with_a_hint() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ten_commits(d);
    std::fs::remove_file(d.join("db").join("MANIFEST")).unwrap();
    for args in [
        &["--db", "db", "root"][..],
        &["--db", "db", "put", "-k", "text", "a", "b"],
    ] {
        let run = sprig(d, args).expect(3);
        assert!(
            run.stderr.contains("MANIFEST") && run.stderr.contains("hint"),
            "{}",
            run.stderr
        );
    }
    let run = sprig(d, &["--db", "db", "--json", "root"]).expect(3);
    assert_eq!(run.json()["error"]["kind"], "corruption");
}

/// Makes files immutable (even for root) while alive; undoes it on drop.
struct Immutable(Vec<std::path::PathBuf>);

impl Immutable {
    fn set(paths: Vec<std::path::PathBuf>) -> Immutable {
        for p in &paths {
            let ok = std::process::Command::new("chattr")
                .arg("+i")
                .arg(p)
                .status()
                .expect("chattr runs (package e2fsprogs)")
                .success();
            assert!(
                ok,
                "chattr +i {} failed: the test needs ext4-like attributes",
                p.display()
            );
        }
        Immutable(paths)
    }
}

impl Drop for Immutable {
    fn drop(&mut self) {
        for p in &self.0 {
            let _ = std::process::Command::new("chattr")
                .arg("-i")
                .arg(p)
                .status();
        }
    }
}

/// Read commands work on read-only media (simulated with immutable files and directory,
/// which even root cannot write) and beside a process holding the database for writing.
#[test]
fn read_commands_work_read_only_and_beside_a_writer() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    ten_commits(d);
    let root = sprig(d, &["--db", "db", "--json", "root"]).expect(0).json()["root"].clone();

    // Beside a writer in another process (this one).
    let writer = sprig::Db::open(d.join("db"), sprig::Options::default()).unwrap();
    let run = sprig(d, &["--db", "db", "--json", "root"]).expect(0);
    assert_eq!(run.json()["root"], root);
    sprig(d, &["--db", "db", "put", "-k", "text", "x", "y"]).expect(4);
    drop(writer);

    std::fs::remove_file(d.join("db").join("LOCK")).unwrap();
    let mut paths: Vec<_> = std::fs::read_dir(d.join("db"))
        .unwrap()
        .map(|e| e.unwrap().path())
        .collect();
    paths.push(d.join("db"));
    let _guard = Immutable::set(paths);
    let run = sprig(d, &["--db", "db", "--json", "root"]).expect(0);
    assert_eq!(run.json()["root"], root);
    sprig(d, &["--db", "db", "get", "-k", "text", "key-3"]).expect(0);
    sprig(d, &["--db", "db", "stats"]).expect(0);
    sprig(d, &["--db", "db", "check"]).expect(0);
    sprig(d, &["--db", "db", "export", "-"]).expect(0);
    sprig(d, &["--db", "db", "prove", "-k", "text", "key-3"]).expect(0);
    // A write fails with an I/O error, not a panic.
    sprig(d, &["--db", "db", "put", "-k", "text", "x", "y"]).expect(4);
}

//! A named FIFO as the input of `import` imports every record and returns, in both formats and
//! into an empty or a populated database, even when the writer delivers the first bytes
//! (the binary magic) in pieces. It used to hang: the input was opened a second time, and a
//! FIFO's second open waits for a writer that never comes.

mod common;
use common::{command, root, sprig, wait_with_timeout, write_text_keys};
use std::io::Write;
use std::process::Stdio;
use std::time::Duration;

const RECORDS: u32 = 2000;

#[test]
fn a_named_fifo_imports_every_record_and_does_not_hang() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_text_keys(&d.join("in.jsonl"), RECORDS);
    sprig(d, &["--db", "ref", "init"]).expect(0);
    sprig(d, &["--db", "ref", "import", "-k", "text", "in.jsonl"]).expect(0);
    let want_fresh = root(d, "ref");
    sprig(
        d,
        &["--db", "ref", "export", "--format", "binary", "in.bin"],
    )
    .expect(0);
    let fifo = d.join("fifo");
    let made = std::process::Command::new("mkfifo")
        .arg(&fifo)
        .status()
        .expect("mkfifo runs");
    assert!(made.success(), "mkfifo failed");
    for format in ["jsonl", "bin"] {
        for populated in [false, true] {
            let db = format!("{format}-{populated}");
            sprig(d, &["--db", &db, "init"]).expect(0);
            if populated {
                sprig(d, &["--db", &db, "put", "-k", "text", "key-1", "old"]).expect(0);
            }
            let mut args = vec!["--db", &db, "--json", "import"];
            if format == "jsonl" {
                args.extend(["-k", "text"]);
            }
            args.push("fifo");
            let child = command(d, &args, &[])
                .stdout(Stdio::piped())
                .stderr(Stdio::piped())
                .spawn()
                .expect("the binary runs");
            // The writer: opening blocks until the import opens the FIFO; the first bytes come
            // alone, so a reader that detects the format from one short read gets it wrong.
            let bytes = std::fs::read(d.join(format!("in.{format}"))).unwrap();
            let path = fifo.clone();
            std::thread::spawn(move || {
                let mut w = std::fs::OpenOptions::new().write(true).open(path)?;
                w.write_all(&bytes[..2])?;
                w.flush()?;
                std::thread::sleep(Duration::from_millis(100));
                w.write_all(&bytes[2..])
            });
            let what = format!("{format} through a FIFO, populated: {populated}");
            let run = wait_with_timeout(child, &what).expect(0);
            let out = run.json();
            assert_eq!(out["records"], RECORDS, "{what}: {out}");
            assert_eq!(out["entries"], RECORDS, "{what}: {out}");
            if !populated {
                assert_eq!(root(d, &db), want_fresh, "{what}");
            }
            // key-1 was overwritten by the import.
            let got = sprig(d, &["--db", &db, "get", "-k", "text", "key-1"]).expect(0);
            assert_ne!(got.stdout.trim(), "old", "{what}");
        }
    }
}

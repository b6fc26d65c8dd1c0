//! `import` reads its input once, so a pipe works like a file: `-` (stdin), `/dev/stdin` and a
//! process substitution (`<(...)`) import every record, in both file formats, into an empty
//! database (the bulk-load path) and into a populated one (the one-commit path), and give the
//! same root as the same file imported from disk. They used to import nothing and exit 0 (the
//! input was read twice, and a pipe is empty the second time), or fail to open `-`.

mod common;
use common::{root, run_with_stdin, sprig, sprig_stdin, write_text_keys, Run};
use std::path::Path;

const RECORDS: u32 = 3000;

/// A new database `db` in `dir`: empty, or holding one key that the input does not have.
fn new_db(dir: &Path, db: &str, populated: bool) {
    sprig(dir, &["--db", db, "init"]).expect(0);
    if populated {
        sprig(dir, &["--db", db, "put", "-k", "text", "other", "x"]).expect(0);
    }
}

/// The import arguments for `input` in `format` ("jsonl" holds text keys, "bin" key paths).
fn import_args<'a>(db: &'a str, format: &str, input: &'a str) -> Vec<&'a str> {
    let mut args = vec!["--db", db, "--json", "import"];
    if format == "jsonl" {
        args.extend(["-k", "text"]);
    }
    args.push(input);
    args
}

/// The run imported every record into `db` and gave `want_root`.
fn check(run: Run, dir: &Path, db: &str, populated: bool, want_root: &str, what: &str) {
    let run = run.expect(0);
    let out = run.json();
    assert_eq!(out["records"], RECORDS, "{what}: {out}");
    let want_entries = u64::from(RECORDS) + u64::from(populated);
    assert_eq!(out["entries"], want_entries, "{what}: {out}");
    assert_eq!(
        root(dir, db),
        want_root,
        "{what}: another root than from a file"
    );
}

#[test]
fn stdin_dev_stdin_and_process_substitution_import_every_record() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    write_text_keys(&d.join("in.jsonl"), RECORDS);
    // The reference: the same records imported from regular files.
    let mut want = Vec::new();
    for populated in [false, true] {
        let db = format!("ref-{populated}");
        new_db(d, &db, populated);
        let run = sprig(d, &import_args(&db, "jsonl", "in.jsonl")).expect(0);
        assert_eq!(run.json()["records"], RECORDS);
        want.push(root(d, &db));
    }
    sprig(
        d,
        &[
            "--db",
            "ref-false",
            "export",
            "--format",
            "binary",
            "in.bin",
        ],
    )
    .expect(0);
    let sprig_bin = env!("CARGO_BIN_EXE_sprig");
    let mut n = 0;
    for format in ["jsonl", "bin"] {
        let bytes = std::fs::read(d.join(format!("in.{format}"))).unwrap();
        for (populated, want_root) in [false, true].into_iter().zip(&want) {
            for input in ["-", "/dev/stdin"] {
                n += 1;
                let db = format!("db-{n}");
                new_db(d, &db, populated);
                let what = format!("{format} on {input}, populated: {populated}");
                let run = sprig_stdin(d, &import_args(&db, format, input), bytes.clone());
                check(run, d, &db, populated, want_root, &what);
            }
            n += 1;
            let db = format!("db-{n}");
            new_db(d, &db, populated);
            let what = format!("{format} from <(cat), populated: {populated}");
            let script = format!(
                "exec \"$0\" {} <(cat in.{format})",
                import_args(&db, format, "").join(" ")
            );
            let mut bash = std::process::Command::new("bash");
            bash.current_dir(d).args(["-c", &script, sprig_bin]);
            let run = run_with_stdin(bash, Vec::new(), &what);
            check(run, d, &db, populated, want_root, &what);
        }
    }
    // An empty pipe is an empty input, not an error.
    new_db(d, "nothing", false);
    let run = sprig_stdin(d, &import_args("nothing", "jsonl", "-"), Vec::new()).expect(0);
    assert_eq!(run.json()["records"], 0);
}

//! `sprig stats` names the I/O backend the database really uses, in text and in JSON, with
//! the reason where io_uring or direct I/O was refused; it agrees with what the engine gets on
//! the same machine when io_uring is required.
//!
//! CI's log names the backend too: `make io-backend` prints what `sprig stats` says.

mod common;
use common::sprig;

#[test]
fn stats_name_the_backend_in_use() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(d, &["--db", "db", "init"]).expect(0);
    let json = sprig(d, &["--db", "db", "--json", "stats"])
        .expect(0)
        .json();

    // What this machine gives a database that insists on io_uring.
    let probe = tempfile::tempdir().unwrap();
    let required = sprig::Db::open(
        probe.path(),
        sprig::Options {
            io_backend: sprig::IoBackend::IoUringRequired,
            ..sprig::Options::default()
        },
    );
    match required {
        Ok(_) => {
            assert_eq!(json["io_backend"], "io_uring", "{json}");
            assert_eq!(json["io_uring_refused"], serde_json::Value::Null, "{json}");
        }
        Err(sprig::Error::IoUringUnavailable { source }) => {
            assert_eq!(json["io_backend"], "posix", "{json}");
            assert_eq!(json["io_uring_refused"], source.to_string(), "{json}");
        }
        Err(e) => panic!("unexpected error: {e}"),
    }
    // Direct I/O: on, or refused with a reason.
    let direct = json["direct_io"].as_bool().expect("direct_io is a boolean");
    assert_eq!(json["direct_io_refused"].is_string(), !direct, "{json}");

    let text = sprig(d, &["--db", "db", "stats"]).expect(0).stdout;
    let line = text
        .lines()
        .find(|l| l.starts_with("I/O backend"))
        .unwrap_or_else(|| panic!("no I/O backend line in:\n{text}"));
    let described = json["io"].as_str().expect("io is a string");
    assert!(
        line.ends_with(described) && described.starts_with(json["io_backend"].as_str().unwrap()),
        "{line:?} / {json}"
    );
}

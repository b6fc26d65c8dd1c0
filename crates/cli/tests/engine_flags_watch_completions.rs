//! The engine flags (`--cache-mib`, `--sync`, `--io`, `--buffered-io`) reach the database,
//! bad values are usage errors; `stats --watch` prints one reading per interval (JSON Lines
//! with `--json`) and sees another process's commits; `completions` prints a script.

mod common;
use common::*;

#[test]
fn engine_flags_open_the_database_with_those_options_and_bad_values_are_usage_errors() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(
        d,
        &["init", "--db", "db", "--sync", "never", "--io", "posix"],
    )
    .expect(0);
    let stats = sprig(
        d,
        &[
            "--db",
            "db",
            "--io",
            "posix",
            "--buffered-io",
            "--cache-mib",
            "1",
            "stats",
            "--json",
        ],
    )
    .expect(0)
    .json();
    assert_eq!(stats["io_backend"], "posix");
    assert_eq!(stats["direct_io"], false);
    sprig(
        d,
        &[
            "--db",
            "db",
            "--sync",
            "never",
            "put",
            "--key-format",
            "text",
            "a",
            "1",
        ],
    )
    .expect(0);
    sprig_env(
        d,
        &["--db", "db", "get", "--key-format", "text", "a"],
        &[("SPRIG_IO", "posix"), ("SPRIG_CACHE_MIB", "0")],
    )
    .expect(0);
    for bad in [
        &["--db", "db", "--io", "bogus", "root"][..],
        &["--db", "db", "--sync", "sometimes", "root"],
        &["--db", "db", "--cache-mib", "lots", "root"],
    ] {
        let run = sprig(d, bad).expect(2);
        assert!(run.stderr.contains("invalid value"), "{}", run.stderr);
    }
}

#[test]
fn stats_watch_prints_a_reading_per_interval_and_sees_other_processes_commits() {
    let dir = tempfile::tempdir().unwrap();
    let d = dir.path();
    sprig(d, &["init", "--db", "db"]).expect(0);
    let watch = command(
        d,
        &[
            "--db",
            "db",
            "--json",
            "stats",
            "--watch",
            "--interval",
            "0.3",
            "--count",
            "4",
        ],
        &[],
    )
    .stdout(std::process::Stdio::piped())
    .stderr(std::process::Stdio::piped())
    .spawn()
    .unwrap();
    for i in 0..3 {
        sprig(
            d,
            &[
                "--db",
                "db",
                "put",
                "--key-format",
                "text",
                &format!("k{i}"),
                "1",
            ],
        )
        .expect(0);
        std::thread::sleep(std::time::Duration::from_millis(150));
    }
    let run = wait_with_timeout(watch, "stats --watch").expect(0);
    let readings: Vec<serde_json::Value> = run
        .stdout
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(readings.len(), 4, "{}", run.stdout);
    assert!(readings[0]["commits_per_second"].is_null());
    assert!(readings[1]["commits_per_second"].is_number());
    let seqs: Vec<u64> = readings
        .iter()
        .map(|r| r["seq"].as_u64().unwrap())
        .collect();
    assert!(seqs.windows(2).all(|w| w[0] <= w[1]), "{seqs:?}");
    assert_eq!(
        sprig(d, &["--db", "db", "root", "--json"]).expect(0).json()["seq"],
        3
    );
    assert!(seqs[3] > seqs[0], "the watch saw no commit: {seqs:?}");

    let human = sprig(
        d,
        &[
            "--db",
            "db",
            "stats",
            "--watch",
            "--count",
            "2",
            "--interval",
            "0.05",
        ],
    );
    let human = human.expect(0);
    assert_eq!(
        human.stdout.lines().count(),
        3,
        "a header and two readings: {}",
        human.stdout
    );
    let bad = sprig(d, &["--db", "db", "stats", "--watch", "--interval", "0"]).expect(2);
    assert!(bad.stderr.contains("--interval"), "{}", bad.stderr);
}

#[test]
fn completions_print_a_script_for_each_shell() {
    let dir = tempfile::tempdir().unwrap();
    for (shell, marker) in [
        ("bash", "complete"),
        ("zsh", "#compdef sprig"),
        ("fish", "complete -c sprig"),
    ] {
        let run = sprig(dir.path(), &["completions", shell]).expect(0);
        assert!(
            run.stdout.contains(marker),
            "{shell}: {}",
            &run.stdout[..run.stdout.len().min(300)]
        );
        assert!(
            run.stdout.contains("snapshot"),
            "{shell} completes subcommands"
        );
    }
    sprig(dir.path(), &["completions", "tcsh"]).expect(2);
}

//! Metrics through the `metrics` facade: a database opened under a recorder reports every
//! metric of `sprig::telemetry::CATALOG` with its `db` label, and the values follow what the
//! engine did (commits, page reads by kind, bytes written, finish and commit phases, size
//! gauges).

use metrics_util::debugging::{DebugValue, DebuggingRecorder, Snapshotter};
use sprig::telemetry::{names, MetricKind as Kind, CATALOG};
use sprig::{Db, Options};
use std::collections::HashMap;

/// Every metric in a snapshot, as (name, sorted labels) → value.
type Values = HashMap<(String, Vec<(String, String)>), DebugValue>;

fn values(snapshotter: &Snapshotter) -> Values {
    snapshotter
        .snapshot()
        .into_vec()
        .into_iter()
        .map(|(key, _, _, value)| {
            let (_, key) = key.into_parts();
            let mut labels: Vec<(String, String)> = key
                .labels()
                .map(|l| (l.key().to_string(), l.value().to_string()))
                .collect();
            labels.sort();
            ((key.name().to_string(), labels), value)
        })
        .collect()
}

fn labels(db: &str, extra: &[(&str, &str)]) -> Vec<(String, String)> {
    let mut l: Vec<(String, String)> = extra
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .chain([("db".to_string(), db.to_string())])
        .collect();
    l.sort();
    l
}

fn counter(v: &Values, name: &str, labels: Vec<(String, String)>) -> u64 {
    match v.get(&(name.to_string(), labels.clone())) {
        Some(DebugValue::Counter(n)) => *n,
        other => panic!("{name} {labels:?} is not a counter: {other:?}"),
    }
}

fn gauge(v: &Values, name: &str, db: &str) -> f64 {
    match v.get(&(name.to_string(), labels(db, &[]))) {
        Some(DebugValue::Gauge(g)) => g.into_inner(),
        other => panic!("{name} is not a gauge: {other:?}"),
    }
}

fn observations(v: &Values, name: &str, labels: Vec<(String, String)>) -> usize {
    match v.get(&(name.to_string(), labels.clone())) {
        Some(DebugValue::Histogram(h)) => h.len(),
        other => panic!("{name} {labels:?} is not a histogram: {other:?}"),
    }
}

#[test]
fn a_database_reports_every_catalogued_metric_with_values_that_follow_its_work() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    let dir = tempfile::tempdir().unwrap();
    let options = Options {
        metrics_name: "node-a".into(),
        page_cache_bytes: 0,
        ..Options::default()
    };
    // Handles bind to the recorder installed when the database opens.
    let db = metrics::with_local_recorder(&recorder, || {
        sprig::describe_metrics();
        Db::open(dir.path(), options).unwrap()
    });

    let keys: Vec<_> = (0u32..2000)
        .map(|i| db.key_path(&i.to_le_bytes()))
        .collect();
    for chunk in keys.chunks(500) {
        let mut batch = db.begin();
        for k in chunk {
            batch.put(*k, vec![7u8; 40]).unwrap();
        }
        db.commit(batch.finish().unwrap()).unwrap();
    }
    // Page cache off: these lookups read the SSD.
    for k in &keys[..10] {
        assert!(db.view().get(k).unwrap().is_some());
    }

    let v = values(&snapshotter);
    // Every catalogued metric is registered under this database's label, with its kind.
    for (name, kind, _, _) in CATALOG {
        let found: Vec<_> = v
            .keys()
            .filter(|(n, l)| n == name && l.contains(&("db".into(), "node-a".into())))
            .collect();
        assert!(!found.is_empty(), "{name} was not registered");
        for key in found {
            let matches = matches!(
                (kind, &v[key]),
                (Kind::Counter, DebugValue::Counter(_))
                    | (Kind::Gauge, DebugValue::Gauge(_))
                    | (Kind::Histogram, DebugValue::Histogram(_))
            );
            assert!(matches, "{name} has the wrong kind");
        }
    }
    let db_label = || labels("node-a", &[]);
    assert_eq!(counter(&v, names::COMMITS, db_label()), 4);
    assert!(counter(&v, names::BYTES_WRITTEN, db_label()) > 0);
    assert!(counter(&v, names::PAGES_WRITTEN, db_label()) >= 4);
    assert!(counter(&v, names::HASHES_NEEDED, db_label()) >= 2000);
    let lookups = counter(
        &v,
        names::PAGE_READS,
        labels("node-a", &[("kind", "lookup")]),
    );
    assert_eq!(lookups, 10, "one SSD read per lookup without a cache");
    assert_eq!(observations(&v, names::COMMIT_SECONDS, db_label()), 4);
    assert_eq!(observations(&v, names::FINISH_SECONDS, db_label()), 4);
    for phase in ["write", "sync", "log", "housekeeping"] {
        let n = observations(
            &v,
            names::COMMIT_PHASE_SECONDS,
            labels("node-a", &[("phase", phase)]),
        );
        assert_eq!(n, 4, "phase {phase}");
    }
    // Finishing's steps, once a batch (one table); pages loaded from the SSD by the three
    // batches after the first (no page cache), none by the first (an empty database).
    for (phase, n) in [("locate", 4), ("rewrite", 4), ("witness", 4), ("load", 3)] {
        let got = observations(
            &v,
            names::FINISH_PHASE_SECONDS,
            labels("node-a", &[("phase", phase)]),
        );
        assert_eq!(got, n, "finish phase {phase}");
    }
    assert_eq!(gauge(&v, names::SEQ, "node-a"), 4.0);
    assert_eq!(gauge(&v, names::ENTRIES, "node-a"), 2000.0);
    assert!(gauge(&v, names::DISK_BYTES, "node-a") > 0.0);
    assert!(gauge(&v, names::SPACE_AMPLIFICATION, "node-a") >= 1.0);
    assert_eq!(gauge(&v, names::OVERLAYS, "node-a"), 0.0);
    // The facade agrees with the engine's own counters.
    let stats = db.stats();
    assert_eq!(stats.lookup_page_reads, 10);
    assert_eq!(stats.commits, 4);
    // Every step took some time, and the loads happen within the rewrite.
    let t = stats.phase_times;
    for (phase, took) in t.iter() {
        assert!(took > std::time::Duration::ZERO, "{phase:?} took no time");
    }
    use sprig::telemetry::Phase;
    assert!(t.of(Phase::Load) <= t.of(Phase::Rewrite), "{t:?}");
    assert!(v.keys().all(|(_, l)| l.iter().any(|(k, _)| k == "db")));
}

#[test]
fn without_a_recorder_a_database_works_and_records_nothing() {
    let recorder = DebuggingRecorder::new();
    let snapshotter = recorder.snapshotter();
    // Opened with no recorder installed: its handles are no-ops.
    let db = Db::open_in_memory(Options::default()).unwrap();
    metrics::with_local_recorder(&recorder, || {
        let mut batch = db.begin();
        batch.put([1u8; 32], b"v".to_vec()).unwrap();
        db.commit(batch.finish().unwrap()).unwrap();
    });
    assert!(values(&snapshotter).is_empty());
    assert_eq!(db.stats().commits, 1);
}

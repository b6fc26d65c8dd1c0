//! Spans through the `tracing` facade: under a subscriber, opening, finishing, committing,
//! checkpointing, rolling back and saving a snapshot each open their documented span.

use std::sync::{Arc, Mutex};
use tracing::span::{Attributes, Id, Record};
use tracing::{Event, Metadata, Subscriber};

/// A subscriber that writes down the name of every span created.
struct Names(Arc<Mutex<Vec<String>>>);

impl Subscriber for Names {
    fn enabled(&self, _: &Metadata<'_>) -> bool {
        true
    }
    fn new_span(&self, span: &Attributes<'_>) -> Id {
        let mut names = self.0.lock().unwrap();
        names.push(span.metadata().name().to_string());
        Id::from_u64(names.len() as u64)
    }
    fn record(&self, _: &Id, _: &Record<'_>) {}
    fn record_follows_from(&self, _: &Id, _: &Id) {}
    fn event(&self, _: &Event<'_>) {}
    fn enter(&self, _: &Id) {}
    fn exit(&self, _: &Id) {}
}

#[test]
fn engine_work_opens_its_documented_spans() {
    let names = Arc::new(Mutex::new(Vec::new()));
    let dir = tempfile::tempdir().unwrap();
    tracing::subscriber::with_default(Names(names.clone()), || {
        let db = sprig::Db::open(dir.path(), sprig::Options::default()).unwrap();
        let mut batch = db.begin();
        batch.put([1u8; 32], b"v".to_vec()).unwrap();
        db.commit(batch.finish().unwrap()).unwrap();
        db.checkpoint().unwrap();
        db.save_snapshot("s").unwrap();
        db.rollback_to(1).unwrap();
    });
    let names = names.lock().unwrap();
    for span in [
        "sprig.open",
        "sprig.finish",
        "sprig.commit",
        "sprig.checkpoint",
        "sprig.snapshot.save",
        "sprig.rollback",
    ] {
        assert!(
            names.iter().any(|n| n == span),
            "no {span} span in {names:?}"
        );
    }
}

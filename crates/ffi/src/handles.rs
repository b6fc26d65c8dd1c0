//! The handle registry: every database, view, batch, pending batch and pipeline the caller
//! holds is an entry here under a 64-bit id that is never reused, so a closed, freed, consumed
//! or forged handle is found out (`SPRIG_STATUS_INVALID_HANDLE`) instead of dereferenced.

use crate::error::{lock, Fail, SprigStatus};
use sprig::{Db, Pending, Pipeline, ReadView, WriteBatch};
use std::collections::HashMap;
use std::sync::{Arc, LazyLock, Mutex};

/// An open database (from `sprig_open` or `sprig_open_in_memory`).
pub type SprigDb = u64;
/// A read view of one committed version.
pub type SprigView = u64;
/// A write batch being filled.
pub type SprigBatch = u64;
/// A finished batch: its root and witness are known; commit or free it.
pub type SprigPending = u64;
/// A commit pipeline (from `sprig_pipeline`).
pub type SprigPipeline = u64;

/// What a handle stands for.
pub(crate) enum Object {
    Db(Db),
    View(ReadView),
    /// `None` once finished (the handle is gone by then too); with its database, which
    /// names its tables.
    Batch(Arc<Mutex<Option<WriteBatch>>>, Db),
    Pending(Pending, Db),
    /// Locked while a call uses it (a submit or a wait may block).
    Pipeline(Arc<Mutex<Pipeline>>, Db),
}

impl Object {
    fn kind(&self) -> &'static str {
        match self {
            Object::Db(_) => "a database",
            Object::View(_) => "a view",
            Object::Batch(..) => "a batch",
            Object::Pending(..) => "a pending batch",
            Object::Pipeline(..) => "a pipeline",
        }
    }
}

#[derive(Default)]
struct Registry {
    /// The last id handed out (ids start at 1; 0 is never valid).
    last: u64,
    objects: HashMap<u64, Object>,
}

static REGISTRY: LazyLock<Mutex<Registry>> = LazyLock::new(Default::default);

/// Register `object`; its new handle.
pub(crate) fn insert(object: Object) -> u64 {
    let mut r = lock(&REGISTRY);
    r.last += 1;
    let id = r.last;
    r.objects.insert(id, object);
    id
}

fn invalid(id: u64, want: &str, found: Option<&Object>) -> Fail {
    let why = match found {
        Some(o) => format!("handle {id} is {}, not {want}", o.kind()),
        None => format!(
            "handle {id} is not {want} that is open (closed, freed, consumed or never valid)"
        ),
    };
    Fail::new(SprigStatus::InvalidHandle, why)
}

/// Look at the object of `id` (under the registry's lock) through `f`, which returns what
/// the caller needs (a cheap clone) or `None` if the object is of the wrong kind.
fn with<T>(id: u64, want: &str, f: impl FnOnce(&Object) -> Option<T>) -> Result<T, Fail> {
    let r = lock(&REGISTRY);
    let found = r.objects.get(&id);
    match found.and_then(f) {
        Some(t) => Ok(t),
        None => Err(invalid(id, want, found)),
    }
}

/// The database of `id`.
pub(crate) fn db(id: SprigDb) -> Result<Db, Fail> {
    with(id, "a database", |o| match o {
        Object::Db(d) => Some(d.clone()),
        _ => None,
    })
}

/// The view of `id`.
pub(crate) fn view(id: SprigView) -> Result<ReadView, Fail> {
    with(id, "a view", |o| match o {
        Object::View(v) => Some(v.clone()),
        _ => None,
    })
}

/// The batch of `id` (lock it to use it) and its database.
pub(crate) type BatchCell = Arc<Mutex<Option<WriteBatch>>>;

/// The batch of `id` and its database.
pub(crate) fn batch(id: SprigBatch) -> Result<(BatchCell, Db), Fail> {
    with(id, "a batch", |o| match o {
        Object::Batch(b, d) => Some((b.clone(), d.clone())),
        _ => None,
    })
}

/// The pending batch of `id` and its database.
pub(crate) fn pending(id: SprigPending) -> Result<(Pending, Db), Fail> {
    with(id, "a pending batch", |o| match o {
        Object::Pending(p, d) => Some((p.clone(), d.clone())),
        _ => None,
    })
}

/// The pipeline of `id` (lock it to use it) and its database.
pub(crate) fn pipeline(id: SprigPipeline) -> Result<(Arc<Mutex<Pipeline>>, Db), Fail> {
    with(id, "a pipeline", |o| match o {
        Object::Pipeline(p, d) => Some((p.clone(), d.clone())),
        _ => None,
    })
}

/// How many handles are open now.
pub(crate) fn open_count() -> usize {
    lock(&REGISTRY).objects.len()
}

/// Remove `id`, which must be of the kind `is` accepts (named `want`); the object is dropped
/// by the caller, outside the registry's lock.
pub(crate) fn remove(id: u64, want: &str, is: fn(&Object) -> bool) -> Result<Object, Fail> {
    let mut r = lock(&REGISTRY);
    match r.objects.get(&id) {
        Some(o) if is(o) => r.objects.remove(&id).ok_or_else(|| invalid(id, want, None)),
        found => Err(invalid(id, want, found)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_never_reused_and_stale_or_wrong_kind_handles_are_refused() {
        let db = sprig::Db::open_in_memory(sprig::Options::default()).unwrap();
        let a = insert(Object::Db(db.clone()));
        let v = insert(Object::View(db.view()));
        assert!(self::db(a).is_ok());
        assert_eq!(
            self::view(a).err().map(|f| f.status),
            Some(SprigStatus::InvalidHandle)
        );
        assert!(self::db(v).err().unwrap().message.contains("is a view"));
        let removed = remove(a, "a database", |o| matches!(o, Object::Db(_)));
        assert!(removed.is_ok());
        assert_eq!(
            self::db(a).err().map(|f| f.status),
            Some(SprigStatus::InvalidHandle)
        );
        assert!(
            remove(a, "a database", |o| matches!(o, Object::Db(_))).is_err(),
            "double free"
        );
        let b = insert(Object::Db(db));
        assert!(b > v, "a new handle never takes an old id");
        assert!(self::db(0).is_err());
        assert!(remove(v, "a view", |o| matches!(o, Object::View(_))).is_ok());
        assert!(remove(b, "a database", |o| matches!(o, Object::Db(_))).is_ok());
    }
}

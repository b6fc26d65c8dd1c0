//! Dropping off the commit path: values whose drop is expensive (a version no longer retained,
//! whose directory nodes only it still held) are handed to a background thread that drops
//! them, so a commit never pays for freeing the state it replaced.
//!
//! The thread ends once the last handle is gone and everything handed to it is dropped.

use std::sync::mpsc::{channel, Sender};

/// A value handed over to be dropped.
type Garbage = Box<dyn Send>;

/// The sending end to the background dropper.
pub(crate) struct Reclaimer {
    queue: Option<Sender<Garbage>>,
}

impl Reclaimer {
    /// A reclaimer with its own thread; if the thread cannot be started, values are dropped
    /// where they are handed over (correct, only slower).
    pub fn new() -> Reclaimer {
        let (queue, garbage) = channel::<Garbage>();
        let started = std::thread::Builder::new()
            .name("sprig-reclaim".into())
            .spawn(move || for item in garbage {
                drop(item);
            })
            .is_ok();
        Reclaimer {
            queue: started.then_some(queue),
        }
    }

    /// Drop `value` on the background thread.
    pub fn defer<T: Send + 'static>(&self, value: T) {
        match &self.queue {
            Some(queue) => {
                // The thread only ends when the queue does: a send cannot fail while it lives.
                if let Err(returned) = queue.send(Box::new(value)) {
                    drop(returned);
                }
            }
            None => drop(value),
        }
    }
}

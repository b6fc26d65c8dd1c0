//! Dropping off the commit path: values whose drop is expensive (a version no longer retained,
//! whose directory nodes only it still held) are handed to a background thread that drops
//! them, so a commit never pays for freeing the state it replaced.
//!
//! The thread ends once the last handle is gone and everything handed to it is dropped.

use std::sync::mpsc::{channel, sync_channel, Receiver, Sender, SyncSender};

/// A value handed over to be dropped.
type Garbage = Box<dyn Send>;

/// How values reach the thread.
enum Queue {
    /// As many as are handed over: the caller never waits.
    Unbounded(Sender<Garbage>),
    /// One at a time: a handover waits until the thread has dropped the value before it, so
    /// what it frees is free again by the time the caller makes the next value.
    InStep(SyncSender<Garbage>),
}

/// The sending end to the background dropper.
pub(crate) struct Reclaimer {
    queue: Option<Queue>,
}

impl Reclaimer {
    /// A reclaimer with its own thread; if the thread cannot be started, values are dropped
    /// where they are handed over (correct, only slower).
    pub fn new() -> Reclaimer {
        let (queue, garbage) = channel::<Garbage>();
        Reclaimer::started(Queue::Unbounded(queue), garbage)
    }

    /// A reclaimer whose handovers wait for the value handed over before to be dropped: for a
    /// caller that makes garbage faster than it is dropped and reuses what dropping frees
    /// (recovery's replay, whose records take the directory slots the versions it passes
    /// release), so that at most one value is dropped behind it.
    pub fn in_step() -> Reclaimer {
        let (queue, garbage) = sync_channel::<Garbage>(0);
        Reclaimer::started(Queue::InStep(queue), garbage)
    }

    fn started(queue: Queue, garbage: Receiver<Garbage>) -> Reclaimer {
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
        // The thread only ends when the queue does: a send cannot fail while it lives.
        let returned = match &self.queue {
            Some(Queue::Unbounded(queue)) => queue.send(Box::new(value)).err().map(|e| e.0),
            Some(Queue::InStep(queue)) => queue.send(Box::new(value)).err().map(|e| e.0),
            None => Some(Box::new(value) as Garbage),
        };
        drop(returned);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::sync::atomic::{AtomicUsize, Ordering};
    use std::sync::Arc;
    use std::time::Duration;

    /// Counts its drops, slowly.
    struct Slow(Arc<AtomicUsize>);

    impl Drop for Slow {
        fn drop(&mut self) {
            std::thread::sleep(Duration::from_millis(50));
            self.0.fetch_add(1, Ordering::SeqCst);
        }
    }

    #[test]
    fn in_step_handovers_wait_for_the_value_before_to_be_dropped() {
        let dropped = Arc::new(AtomicUsize::new(0));
        let r = Reclaimer::in_step();
        for handed in 0..4 {
            r.defer(Slow(dropped.clone()));
            // The value before this one has been dropped (the thread took this one only
            // after); this one may still be dropping.
            assert!(dropped.load(Ordering::SeqCst) >= handed, "{handed}");
        }
        drop(r);
    }
}

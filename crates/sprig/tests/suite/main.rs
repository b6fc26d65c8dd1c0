//! The engine's integration suites, one module each, in one test binary: one build and link
//! instead of one per suite (under `cargo nextest`, as `make test` runs them, each test still
//! runs in a process of its own). The suites that measure the process's heap or arm a
//! failpoint for the whole process keep a binary of their own beside this one (`tests/*.rs`).

#[path = "../common/mod.rs"]
mod common;

mod background_checkpoints;
mod bit_flips;
mod blobs;
mod block_witness;
mod bulk_load;
mod chain_crash_points;
mod cleaner;
mod concurrent_readers;
mod crash_points;
mod cursors;
mod deep_tries;
mod directory_lock;
mod handles;
mod hashing_floor;
mod import_crash_points;
mod import_sorted;
mod io_backends;
mod io_counts;
mod io_errors;
mod layering;
mod log_damage;
mod metrics;
mod model;
mod never_sync_power_loss;
mod overlays;
mod page_merges;
mod parallel_loads;
mod pipeline;
mod read_only;
mod recovery_memory;
mod recycled_segments;
mod segment_size_mismatch;
mod snapshots;
mod stats_pages;
mod sync;
mod table_crash_points;
mod tables;
mod tracing_spans;
mod versions;
mod view_pin_race;
mod witness_buffer;

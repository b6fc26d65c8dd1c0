//! Progress bars on stderr (indicatif) with position, throughput and ETA. Bars are hidden
//! with `--json` or when stderr is not a terminal, so scripts and logs stay clean.

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use sprig::{BulkPhase, BulkProgress};
use std::time::Duration;

/// How often a bar redraws.
const TICK_MS: u64 = 100;

/// A bar of `len` steps (items or bytes) labelled `message`; hidden unless `visible`.
pub fn bar(visible: bool, len: u64, message: &str, bytes: bool) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), target(visible));
    let counts = if bytes {
        "{bytes}/{total_bytes} {bytes_per_sec}"
    } else {
        "{human_pos}/{human_len} {per_sec}"
    };
    let template = format!("{{msg:>10}} [{{bar:36.cyan/blue}}] {counts} ETA {{eta}}");
    if let Ok(style) = ProgressStyle::with_template(&template) {
        bar.set_style(style.progress_chars("=> "));
    }
    bar.set_message(message.to_string());
    bar
}

/// A spinner for work of unknown length; hidden unless `visible`.
pub fn spinner(visible: bool, message: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(None, target(visible));
    if let Ok(style) = ProgressStyle::with_template("{spinner} {msg} {human_pos} {per_sec}") {
        bar.set_style(style);
    }
    bar.set_message(message.to_string());
    bar.enable_steady_tick(Duration::from_millis(TICK_MS));
    bar
}

fn target(visible: bool) -> ProgressDrawTarget {
    if visible {
        ProgressDrawTarget::stderr()
    } else {
        ProgressDrawTarget::hidden()
    }
}

/// A bulk-load progress callback that moves `bar` through the build phase (the caller moves
/// it while feeding input).
pub fn follow_bulk(bar: &ProgressBar) -> impl FnMut(BulkProgress) {
    let bar = bar.clone();
    move |p| {
        if p.phase == BulkPhase::Build {
            bar.set_message("building");
            bar.set_length(p.total);
            bar.set_position(p.done);
        }
    }
}

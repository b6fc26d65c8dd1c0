//! Embedding Sprig in a Prometheus-scraped service.
//!
//! The service installs a metrics recorder (here `metrics-exporter-prometheus`) *before*
//! opening the database, then serves the recorder's text on `/metrics`. Sprig records commit
//! latency and phases, page reads by kind, cache hits, bytes written, cleaner work, overlay
//! memory and space amplification, each labelled `db = Options::metrics_name`.
//!
//! ```sh
//! # print the metrics after a short workload (what CI runs)
//! cargo run -p sprig --example prometheus
//! # keep committing and serve http://127.0.0.1:9898/metrics until stopped
//! cargo run -p sprig --example prometheus -- --serve 127.0.0.1:9898
//! ```
//!
//! Scrape config: `scrape_configs: [{job_name: sprig, static_configs: [{targets: ["127.0.0.1:9898"]}]}]`.

use metrics_exporter_prometheus::{PrometheusBuilder, PrometheusHandle};
use std::io::{BufRead, BufReader, Write};
use std::net::TcpListener;
use std::time::Duration;

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let serve = match std::env::args().nth(1).as_deref() {
        Some("--serve") => Some(std::env::args().nth(2).ok_or("--serve needs an address")?),
        Some(other) => return Err(format!("unknown argument {other}").into()),
        None => None,
    };

    // 1. The recorder first: handles bind to the recorder installed when the database opens.
    let handle: PrometheusHandle = PrometheusBuilder::new().install_recorder()?;
    sprig::describe_metrics();

    // 2. The database, named for its `db` label.
    let dir = tempfile::tempdir()?;
    let db = sprig::Db::open(
        dir.path(),
        sprig::Options {
            metrics_name: "state".into(),
            ..sprig::Options::default()
        },
    )?;

    // 3. The node's work: blocks of writes and reads.
    let mut block = 0u64;
    let mut run_block = |db: &sprig::Db| -> sprig::Result<()> {
        let mut batch = db.begin();
        for i in 0..1000u64 {
            let key = db.key_path(&(block * 1000 + i % 5000).to_le_bytes());
            batch.put(key, block.to_le_bytes())?;
        }
        db.commit(batch.finish()?)?;
        let view = db.view();
        for i in 0..100u64 {
            view.get(&db.key_path(&i.to_le_bytes()))?;
        }
        block += 1;
        Ok(())
    };

    match serve {
        None => {
            for _ in 0..20 {
                run_block(&db)?;
            }
            let text = handle.render();
            print!("{text}");
            // What a scrape of this service shows (the example checks itself in CI).
            for line in [
                "sprig_commits_total{db=\"state\"} 20",
                "sprig_seq{db=\"state\"} 20",
            ] {
                if !text.lines().any(|l| l == line) {
                    return Err(format!("the metrics text lacks `{line}`").into());
                }
            }
        }
        Some(addr) => {
            let listener = TcpListener::bind(&addr)?;
            listener.set_nonblocking(true)?;
            eprintln!("serving http://{addr}/metrics (Ctrl-C stops)");
            loop {
                run_block(&db)?;
                while let Ok((mut stream, _)) = listener.accept() {
                    stream.set_nonblocking(false)?;
                    let mut request_line = String::new();
                    BufReader::new(&stream).read_line(&mut request_line)?;
                    let (status, body) = if request_line.starts_with("GET /metrics") {
                        ("200 OK", handle.render())
                    } else {
                        ("404 Not Found", "try /metrics\n".to_string())
                    };
                    write!(
                        stream,
                        "HTTP/1.1 {status}\r\nContent-Type: text/plain; version=0.0.4\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
                        body.len()
                    )?;
                }
                std::thread::sleep(Duration::from_millis(500));
            }
        }
    }
    Ok(())
}

//! The comparison mode: every engine runs the same generated batches, alternately, each run in
//! a child process of its own (so peak RSS and I/O counters belong to one engine, and a memory
//! cgroup can cap it), for several rounds; then medians, ratios first engine ÷ peer, and with
//! `--check` a cross-check of every root with NOMT's and of every lookup across engines.

use crate::cli::{CompareArgs, EngineArgs, EngineKind, OutputArgs, RunShapeArgs};
use crate::engine::Layout;
use crate::report::{self, Comparison, FioIops, RunResult};
use crate::runner::{self, MODEL_MAX_ENTRIES};
use crate::sys::MemoryCap;
use anyhow::{bail, ensure, Context, Result};
use std::path::{Path, PathBuf};
use std::process::Command;

/// The fio script shipped with this crate.
const FIO_SCRIPT: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/fio-randread.sh");

fn engine_flags(args: &EngineArgs, engine: EngineKind) -> Vec<String> {
    let mut v = vec![
        "--cache-mb".to_string(),
        args.cache_mb.to_string(),
        "--direct-io".to_string(),
        args.direct_io.to_string(),
        "--threads".to_string(),
        args.threads.to_string(),
    ];
    if args.pipelined && engine == EngineKind::Sprig {
        v.push("--pipelined".into());
    }
    if args.serial_reads {
        v.push("--serial-reads".into());
    }
    if engine == EngineKind::Sprig && args.sprig_background_checkpoints {
        v.push("--sprig-background-checkpoints".into());
    }
    if engine == EngineKind::Sprig {
        for (flag, value) in [
            (
                "--sprig-sync",
                format!("{:?}", args.sprig_sync).to_lowercase(),
            ),
            ("--sprig-retained", args.sprig_retained.to_string()),
            ("--sprig-segment-mb", args.sprig_segment_mb.to_string()),
            (
                "--sprig-io",
                match args.sprig_io {
                    crate::cli::SprigIo::IoUring => "io-uring".to_string(),
                    crate::cli::SprigIo::Posix => "posix".to_string(),
                },
            ),
        ] {
            v.push(flag.to_string());
            v.push(value);
        }
    }
    v
}

fn shape_flags(shape: &RunShapeArgs, check: bool) -> Vec<String> {
    let mut v = vec![
        "--batches".to_string(),
        shape.batches.to_string(),
        "--fresh".to_string(),
        shape.fresh.to_string(),
    ];
    if let Some(b) = shape.batch_size {
        v.push("--batch-size".into());
        v.push(b.to_string());
    }
    if check {
        v.push("--check".into());
    }
    v
}

/// Run this program with `args`, inside `cap` if given; fail unless it succeeds.
fn child(args: &[String], cap: Option<&MemoryCap>) -> Result<()> {
    let exe = std::env::current_exe().context("locating this program")?;
    let mut cmd = match cap {
        // The shell moves itself into the group, then becomes the benchmark.
        Some(cap) => {
            let mut c = Command::new("sh");
            c.arg("-c")
                .arg("echo $$ > \"$0\" && exec \"$@\"")
                .arg(&cap.procs)
                .arg(&exe);
            c
        }
        None => Command::new(&exe),
    };
    let status = cmd
        .args(args)
        .status()
        .context("starting a benchmark process")?;
    ensure!(
        status.success(),
        "`sprig-bench {}` failed: {status}",
        args.join(" ")
    );
    Ok(())
}

/// Run fio's random-read test on the disk holding `dir`.
fn fio(dir: &Path) -> Result<FioIops> {
    let out = Command::new("sh")
        .arg(FIO_SCRIPT)
        .arg(dir)
        .output()
        .with_context(|| format!("running {FIO_SCRIPT}"))?;
    let text = String::from_utf8_lossy(&out.stdout);
    ensure!(
        out.status.success(),
        "{FIO_SCRIPT} failed: {}{}",
        text,
        String::from_utf8_lossy(&out.stderr)
    );
    let field = |name: &str| -> Result<f64> {
        text.lines()
            .find_map(|l| l.strip_prefix(name))
            .and_then(|v| v.trim().parse().ok())
            .with_context(|| format!("no {name} in the fio script's output: {text}"))
    };
    Ok(FioIops {
        qd32: field("iops_qd32=")?,
        qd1: field("iops_qd1=")?,
    })
}

fn tmp_result(dir: &Path, engine: EngineKind, round: usize) -> PathBuf {
    dir.join(format!(".result-{}-{round}.json", engine.name()))
}

/// Run the comparison.
pub fn compare(args: &CompareArgs) -> Result<Comparison> {
    ensure!(!args.engines.is_empty(), "--engines names no engine");
    ensure!(args.repeat > 0, "--repeat must be positive");
    std::fs::create_dir_all(&args.dir)
        .with_context(|| format!("creating {}", args.dir.display()))?;
    let dir = args.dir.display().to_string();
    if args.create {
        for &engine in &args.engines {
            let mut a = vec![
                "create".to_string(),
                "--workload".into(),
                args.workload.name().into(),
                "--entries".into(),
                args.entries.to_string(),
                "--engine".into(),
                engine.name().into(),
                "--dir".into(),
                dir.clone(),
                "--seed".into(),
                args.seed.to_string(),
            ];
            a.extend(engine_flags(&args.common.engine_args, engine));
            child(&a, None)?;
        }
    }
    let mut states = Vec::new();
    for &engine in &args.engines {
        let s = runner::load_state(&Layout::new(&args.dir, engine))?;
        if s.workload != args.workload || s.entries != args.entries || s.seed != args.seed {
            bail!(
                "the {} database holds {} at {} entries (seed {}), not {} at {} (seed {}); \
                 add --create",
                engine.name(),
                s.workload.name(),
                s.entries,
                s.seed,
                args.workload.name(),
                args.entries,
                args.seed
            );
        }
        states.push(s);
    }
    if states
        .windows(2)
        .any(|w| w[0].batches_done != w[1].batches_done)
    {
        bail!("the engines' databases have run different numbers of batches; add --create");
    }
    let fresh = states.first().is_some_and(|s| s.batches_done == 0);
    let fio_iops = if args.fio {
        Some(fio(&args.dir)?)
    } else {
        None
    };

    let mut runs: Vec<RunResult> = Vec::new();
    for round in 0..args.repeat {
        let n = args.engines.len();
        for i in 0..n {
            let engine = args.engines[(i + round) % n];
            let out = tmp_result(&args.dir, engine, round);
            let model_check =
                args.common.shape.check && round == 0 && fresh && args.entries <= MODEL_MAX_ENTRIES;
            let mut a = vec![
                "run".to_string(),
                "--engine".into(),
                engine.name().into(),
                "--dir".into(),
                dir.clone(),
                "--json".into(),
                out.display().to_string(),
            ];
            a.extend(shape_flags(&args.common.shape, model_check));
            a.extend(engine_flags(&args.common.engine_args, engine));
            let cap = match args.mem_cap_mb {
                Some(mb) => Some(MemoryCap::new(
                    &format!("sprig-bench-{}-{}", std::process::id(), engine.name()),
                    mb << 20,
                )?),
                None => None,
            };
            eprintln!("round {}/{}: {}", round + 1, args.repeat, engine.name());
            if args.warm_disk {
                let db = Layout::new(&args.dir, engine).db();
                let w =
                    crate::warm::warm(&db).with_context(|| format!("warming {}", db.display()))?;
                eprintln!(
                    "  disk warmed: {} files, {:.2} GiB read in {:.1} s",
                    w.files,
                    w.bytes as f64 / f64::from(1u32 << 30),
                    w.took.as_secs_f64()
                );
            }
            child(&a, cap.as_ref())?;
            let text = std::fs::read_to_string(&out)
                .with_context(|| format!("reading {}", out.display()))?;
            let _ = std::fs::remove_file(&out);
            let mut r: RunResult = serde_json::from_str(&text)?;
            r.mem_cap_mb = args.mem_cap_mb;
            r.cgroup_peak_bytes = cap.as_ref().and_then(MemoryCap::peak_bytes);
            if let Some(cap) = &cap {
                eprintln!("  (memory capped by {})", cap.kind);
            }
            runs.push(r);
        }
    }
    let root_check = if args.common.shape.check {
        Some(cross_check(&args.engines, &states, &runs)?)
    } else {
        None
    };
    let medians: Vec<RunResult> = args
        .engines
        .iter()
        .filter_map(|e| {
            let mine: Vec<RunResult> = runs.iter().filter(|r| r.engine == *e).cloned().collect();
            report::median_by(&mine, |r| r.units_per_sec)
        })
        .collect();
    let ratios = match medians.split_first() {
        Some((first, peers)) => peers
            .iter()
            .map(|p| {
                (
                    p.engine,
                    first.units_per_sec / p.units_per_sec.max(f64::MIN_POSITIVE),
                )
            })
            .collect(),
        None => Vec::new(),
    };
    Ok(Comparison {
        command: std::env::args().collect::<Vec<_>>().join(" "),
        fio_iops,
        disk_warmed: args.warm_disk,
        runs,
        medians,
        ratios,
        root_check,
    })
}

/// Every engine with roots must agree on the root after create and on every batch's root;
/// every engine must agree on every lookup.
fn cross_check(
    engines: &[EngineKind],
    states: &[crate::workload::WorkloadState],
    runs: &[RunResult],
) -> Result<String> {
    let created: Vec<&String> = states
        .iter()
        .filter_map(|s| s.created_root.as_ref())
        .collect();
    ensure!(
        created.windows(2).all(|w| w[0] == w[1]),
        "the roots after create differ between engines"
    );
    let mut compared = 0;
    let per_round = engines.len();
    for (round, chunk) in runs.chunks(per_round).enumerate() {
        let with_roots: Vec<&RunResult> =
            chunk.iter().filter(|r| r.roots_digest.is_some()).collect();
        for w in with_roots.windows(2) {
            ensure!(
                w[0].roots_digest == w[1].roots_digest && w[0].final_root == w[1].final_root,
                "round {}: the roots of {} and {} differ",
                round + 1,
                w[0].engine.name(),
                w[1].engine.name()
            );
            compared += 1;
        }
        for w in chunk.windows(2) {
            ensure!(
                w[0].reads_digest == w[1].reads_digest,
                "round {}: the lookups of {} and {} differ",
                round + 1,
                w[0].engine.name(),
                w[1].engine.name()
            );
        }
    }
    let model = runs.iter().filter_map(|r| r.checked.as_ref()).count();
    Ok(format!(
        "roots after create equal across engines; every batch root equal across engines with \
         roots ({compared} pairs of runs); every lookup equal across engines; {model} runs also \
         replayed on the reference model"
    ))
}

/// Print and write a comparison.
pub fn output(c: &Comparison, files: &OutputArgs) -> Result<()> {
    if let Some(f) = c.fio_iops {
        println!(
            "fio 4 KiB random reads: {:.0} IOPS at QD32, {:.0} at QD1",
            f.qd32, f.qd1
        );
    }
    if let Some(first) = c.medians.first() {
        println!("{}", report::describe(first));
    }
    if c.disk_warmed {
        println!("each engine's files read once right before each of its runs (equal disk warmth)");
    }
    println!("medians (ratio = first engine ÷ this one):");
    print!(
        "{}",
        report::table(&c.medians, c.medians.first(), c.fio_iops)
    );
    if let Some(check) = &c.root_check {
        println!("check: {check}");
    }
    if let Some(p) = &files.json {
        report::write_json(p, c)?;
    }
    if let Some(p) = &files.markdown {
        report::write_text(p, &report::comparison_markdown(c))?;
    }
    Ok(())
}

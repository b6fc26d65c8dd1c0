//! The commands. Each takes its parsed arguments and returns an [`Outcome`] or a
//! [`CliError`]; none prints results or exits (see `output`). Only progress bars draw, on
//! stderr.

mod basic;
mod demo;
mod history;
mod inspect;
mod prove;
mod scan;
mod sync;
mod tables;
mod transfer;
mod verify;

use crate::cli::{Cli, Command};
use crate::error::{CliError, CliResult};
use crate::output::{progress_allowed, Outcome};
use sprig::{Db, Options};
use std::path::{Path, PathBuf};

/// What every command may need besides its own arguments.
pub struct Ctx {
    /// `--db`, if given.
    pub db: Option<PathBuf>,
    /// Whether progress bars draw.
    pub progress: bool,
    /// `--json`.
    pub json: bool,
    /// `--table`.
    pub table: String,
    /// `--snapshot`.
    pub snapshot: Option<String>,
    /// The engine options `--cache-mib`, `--sync`, `--io` and `--buffered-io` give.
    pub options: Options,
}

impl Ctx {
    /// The `--db` path, or a usage error naming the command.
    pub fn db_path(&self, command: &str) -> CliResult<&Path> {
        self.db.as_deref().ok_or_else(|| {
            CliError::Usage(format!(
                "`sprig {command}` needs a database: pass --db DIR or set SPRIG_DB"
            ))
        })
    }

    /// Open the existing database at `--db` for writing (it takes the database's lock).
    pub fn open(&self, command: &str) -> CliResult<Db> {
        let path = self.db_path(command)?;
        let db = Db::open(path, self.open_options())?;
        warn_about_recovery(&db);
        Ok(db)
    }

    /// The table `--table` names in `db`.
    pub fn table(&self, db: &Db) -> CliResult<sprig::Table> {
        Ok(db.table(&self.table)?)
    }

    /// What read commands read: the named snapshot `--snapshot` gives, or the latest
    /// version; and `--table` in it.
    pub fn view(&self, db: &Db) -> CliResult<(sprig::ReadView, sprig::Table)> {
        let view = match &self.snapshot {
            Some(name) => db.open_snapshot(name)?,
            None => db.view(),
        };
        let table = view.table(&self.table)?;
        Ok((view, table))
    }

    /// Open the existing database at `--db` for reading only: no lock, nothing written, so it
    /// works on read-only media and beside a process writing the database.
    pub fn open_read_only(&self, command: &str) -> CliResult<Db> {
        let path = self.db_path(command)?;
        let db = Db::open_read_only(path, self.open_options())?;
        warn_about_recovery(&db);
        Ok(db)
    }

    /// The options to open an existing database with.
    fn open_options(&self) -> Options {
        Options {
            create_if_missing: false,
            ..self.options.clone()
        }
    }
}

/// What opening found (a lost log tail, a repaired record) goes to stderr, never silent.
fn warn_about_recovery(db: &Db) {
    for finding in db.recovery().findings() {
        eprintln!("warning: {finding}");
    }
}

/// Run the command `cli` names.
pub fn run(cli: Cli) -> CliResult<Outcome> {
    let ctx = Ctx {
        db: cli.db,
        progress: progress_allowed(cli.json),
        json: cli.json,
        table: cli.table,
        snapshot: cli.snapshot,
        options: cli.engine.options(),
    };
    match cli.command {
        Command::Init(a) => basic::init(&ctx, &a),
        Command::Put(a) => basic::put(&ctx, &a),
        Command::Upsert(a) => basic::upsert(&ctx, &a),
        Command::Table(c) => tables::run(&ctx, &c),
        Command::Get(a) => basic::get(&ctx, &a),
        Command::Delete(a) => basic::delete(&ctx, &a),
        Command::Root => basic::root(&ctx),
        Command::Import(a) => transfer::import(&ctx, &a),
        Command::Export(a) => transfer::export(&ctx, &a),
        Command::Prove(a) => prove::prove(&ctx, &a),
        Command::Verify(a) => verify::verify(&a),
        Command::Stats(a) => inspect::stats(&ctx, &a),
        Command::Check => inspect::check(&ctx),
        Command::Demo(a) => demo::demo(&ctx, &a),
        Command::Scan(a) => scan::scan(&ctx, &a),
        Command::Versions => history::versions(&ctx),
        Command::Rollback { seq } => history::rollback(&ctx, seq),
        Command::Snapshot(c) => history::snapshot(&ctx, &c),
        Command::Sync(c) => sync::sync(&ctx, &c),
        Command::Completions { shell } => Ok(completions(shell)),
    }
}

/// `completions`: the script for `shell`, on stdout.
fn completions(shell: clap_complete::Shell) -> Outcome {
    use clap::CommandFactory;
    let mut cmd = Cli::command();
    let mut script = Vec::new();
    clap_complete::generate(shell, &mut cmd, "sprig", &mut script);
    // A closed pipe (`sprig completions bash | head`) is not worth an error.
    let _ = std::io::Write::write_all(&mut std::io::stdout().lock(), &script);
    Outcome::silent()
}

/// The keys named on the command line and, with `from`, in a file (one per line; blank lines
/// and `#` comments skipped), parsed with `parse`.
pub fn gather_keys(
    args: &[String],
    from: Option<&str>,
    parse: impl Fn(&str) -> Result<sprig::KeyPath, String>,
) -> CliResult<Vec<sprig::KeyPath>> {
    let mut keys = Vec::with_capacity(args.len());
    for (i, text) in args.iter().enumerate() {
        let key = parse(text).map_err(|e| CliError::input(format!("key {}", i + 1), e))?;
        keys.push(key);
    }
    if let Some(path) = from {
        let text = std::fs::read_to_string(path).map_err(|e| CliError::io("reading", path, e))?;
        for (n, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let key =
                parse(line).map_err(|e| CliError::input(path, format!("line {}: {e}", n + 1)))?;
            keys.push(key);
        }
    }
    Ok(keys)
}

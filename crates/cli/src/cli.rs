//! The command line: every command, option and default, with the help texts and examples
//! that `--help` prints. Parsing only; the commands live in `commands`.

use crate::keys::{KeyFormat, ValueFormat};
use crate::records::FileFormat;
use clap::{Args, Parser, Subcommand, ValueEnum};
use std::path::PathBuf;

const EXIT_CODES: &str = "\
Exit codes:
  0  success
  1  not found (get of a key that is not in the database)
  2  bad usage (unknown command or option, missing argument)
  3  corruption (check found damaged pages, or a read failed its checks)
  4  I/O failure (or the database is locked by another process)
  5  invalid input (malformed key, value, file or proof) or a proof that does not verify
  6  no database at --db, or one already exists where init would create one

Examples:
  sprig demo                                  # 1,000,000 keys, batches, proofs, stats
  sprig init --db ./state --hasher sha256
  sprig --db ./state put --key-format text alice 100
  sprig --db ./state get --key-format text alice
  sprig --db ./state import state.jsonl       # atomic: all of it or nothing
  sprig --db ./state prove --key-format text alice --out alice.proof.json
  sprig verify alice.proof.json --root <ROOT> # offline, no database needed
  sprig --db ./state check --json

The database directory comes from --db or the SPRIG_DB environment variable.
Every write command (put, delete, import) is one atomic, durable commit: when it
returns, the change is on disk and the new root is printed. There is no separate
commit step and nothing to roll back after an error.";

/// Operate and inspect a Sprig database: keys, import/export, proofs, stats, checks.
#[derive(Debug, Parser)]
#[command(name = "sprig", version, after_help = EXIT_CODES)]
pub struct Cli {
    /// The database directory.
    #[arg(long, short = 'd', global = true, env = "SPRIG_DB", value_name = "DIR")]
    pub db: Option<PathBuf>,
    /// Print one JSON document on stdout instead of text (errors too); no progress bars.
    #[arg(long, global = true)]
    pub json: bool,
    /// The table put, upsert, get, delete, root, import, export and prove work on.
    #[arg(
        long,
        short = 't',
        global = true,
        default_value = "default",
        value_name = "NAME"
    )]
    pub table: String,
    /// Read from this named snapshot instead of the latest version (get, scan, export, prove).
    #[arg(long, global = true, value_name = "NAME")]
    pub snapshot: Option<String>,
    /// How the database is opened: cache, sync policy, I/O backend.
    #[command(flatten)]
    pub engine: EngineArgs,
    /// The command.
    #[command(subcommand)]
    pub command: Command,
}

/// Options of the engine, for every command that opens a database (see docs/CLI.md,
/// "Choosing options").
#[derive(Debug, Args)]
pub struct EngineArgs {
    /// Page cache in MiB [default: 64].
    #[arg(long, global = true, env = "SPRIG_CACHE_MIB", value_name = "MIB")]
    pub cache_mib: Option<u64>,
    /// When commits reach the disk: `always` (durable when the command returns) or `never`
    /// (a crash of the machine may lose the latest commits, never corrupts) [default: always].
    #[arg(
        long,
        global = true,
        env = "SPRIG_SYNC",
        value_enum,
        value_name = "POLICY"
    )]
    pub sync: Option<SyncArg>,
    /// How reads are issued: `io-uring` (falls back to posix where the kernel refuses it),
    /// `io-uring-required` (an error instead) or `posix` [default: io-uring].
    #[arg(
        long,
        global = true,
        env = "SPRIG_IO",
        value_enum,
        value_name = "BACKEND"
    )]
    pub io: Option<IoArg>,
    /// Read segment files through the OS page cache instead of O_DIRECT.
    #[arg(long, global = true)]
    pub buffered_io: bool,
}

/// A sync policy on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum SyncArg {
    /// Every commit is durable when it returns.
    Always,
    /// Commit records are not synced (survives a process crash, not a power loss).
    Never,
}

/// An I/O backend on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum IoArg {
    /// io_uring where the kernel allows it, else posix.
    IoUring,
    /// io_uring or an error.
    IoUringRequired,
    /// Plain positioned reads and writes.
    Posix,
}

impl EngineArgs {
    /// The engine options these flags give (everything else default).
    pub fn options(&self) -> sprig::Options {
        let mut o = sprig::Options::default();
        if let Some(mib) = self.cache_mib {
            o.page_cache_bytes = mib.saturating_mul(1 << 20);
        }
        if let Some(sync) = self.sync {
            o.sync = match sync {
                SyncArg::Always => sprig::SyncPolicy::Always,
                SyncArg::Never => sprig::SyncPolicy::Never,
            };
        }
        if let Some(io) = self.io {
            o.io_backend = match io {
                IoArg::IoUring => sprig::IoBackend::IoUring,
                IoArg::IoUringRequired => sprig::IoBackend::IoUringRequired,
                IoArg::Posix => sprig::IoBackend::Posix,
            };
        }
        o.direct_io = !self.buffered_io;
        o
    }
}

/// The commands.
#[derive(Debug, Subcommand)]
pub enum Command {
    /// Create a new, empty database.
    #[command(after_help = "Example:\n  sprig init --db ./state --hasher keccak256")]
    Init(InitArgs),
    /// Set one key to a value (one durable commit); prints the new root.
    #[command(
        after_help = "Examples:\n  sprig --db ./state put --key-format text alice 100\n  \
        sprig --db ./state put --value-format hex <64-hex-digit key path> 0x0a0b"
    )]
    Put(PutArgs),
    /// Upsert one key in a table with a resolver (one durable commit); prints the new roots.
    #[command(
        after_help = "Example:\n  sprig --db ./state table create balances --resolver add-u64\n  \
        sprig --db ./state --table balances upsert --key-format text alice --value-format hex 0x0500000000000000"
    )]
    Upsert(PutArgs),
    /// Create, list, drop and describe tables.
    #[command(subcommand)]
    Table(TableCommand),
    /// Print the values of keys (exit code 1 if any is missing).
    #[command(after_help = "Example:\n  sprig --db ./state get --key-format text alice bob")]
    Get(GetArgs),
    /// Delete keys, given as arguments or one per line in a file (one durable commit).
    #[command(
        after_help = "Examples:\n  sprig --db ./state delete --key-format text alice\n  \
        sprig --db ./state delete --from stale-keys.txt"
    )]
    Delete(DeleteArgs),
    /// Print the latest state root and commit sequence number.
    #[command(after_help = "Example:\n  sprig --db ./state root --json")]
    Root,
    /// Load key-values from a JSON Lines or binary file, atomically.
    #[command(after_help = "\
An import is all or nothing: into an empty database it is a bulk load published at the
end; otherwise it is one commit of every record. The input is read once (a pipe, a FIFO or
`-` for stdin work) and its records held in at most --memory-mib of RAM, the rest sorted
into temporary files in the database directory. An import that is interrupted or meets a
bad record leaves the database exactly as it was.

JSON Lines: {\"key\": \"<key>\", \"value\": \"<value>\"} per line; \"value\": null deletes,
a record without \"value\" is an error.
Binary: the format `export --format binary` writes (see docs/CLI.md).

Examples:
  sprig --db ./state import state.jsonl
  gunzip -c state.jsonl.gz | sprig --db ./state import -
  sprig --db ./state import --key-format text --value-format text accounts.jsonl
  sprig --db ./copy import state.bin")]
    Import(ImportArgs),
    /// Write every key-value to a JSON Lines or binary file, in key-path order.
    #[command(after_help = "\
Sprig stores key paths (the 32-byte hashes of byte keys), not the original byte keys, so
export writes key paths; import them back with the default --key-format path.

Examples:
  sprig --db ./state export state.jsonl
  sprig --db ./state export --format binary state.bin")]
    Export(ExportArgs),
    /// Prove the values (or absence) of keys against the latest root.
    #[command(after_help = "\
One key gives a path proof, several a multi-proof, --witness a block witness. The JSON
document carries the root, the claimed values and the proof; binary is the bare encoding
of docs/PROOF_FORMAT.md.

Examples:
  sprig --db ./state prove --key-format text alice --out alice.json
  sprig --db ./state prove --from keys.txt --witness --format binary --out block.wit")]
    Prove(ProveArgs),
    /// Check a proof or witness against a root, offline (no database needed).
    #[command(after_help = "\
A JSON proof is checked against --root (or, with a warning, the root it names) and every
value it claims is checked. A binary proof needs --root, and --key for path and multi-proofs;
--value (one per --key) checks values.

Examples:
  sprig verify alice.json --root 5f3a...e1
  sprig verify block.wit --root 5f3a...e1
  sprig verify alice.bin --root 5f3a...e1 --key-format text --key alice --value-format text --value 100")]
    Verify(VerifyArgs),
    /// Entries, pages, disk use, space amplification, RAM (directory and cache), version, hasher.
    #[command(after_help = "\
With --watch, the figures are read again every --interval seconds (read-only, beside a
process writing the database) and printed with the commit rate and growth since the last
reading; --json prints one JSON document per reading (JSON Lines). The engine's live counters
(reads, cache hits, commit latency) of a running node are exported through the `metrics`
facade instead: see crates/sprig/examples/prometheus.rs.

Examples:
  sprig --db ./state stats --json
  sprig --db ./state stats --watch --interval 5")]
    Stats(StatsArgs),
    /// Read every page and value and verify it against the directory (exit code 3 if damaged).
    #[command(after_help = "Example:\n  sprig --db ./state check")]
    Check,
    /// Create a demo database, load keys, commit batches, prove, verify, print stats.
    #[command(after_help = "\
The demo removes and recreates its directory (only if it holds a Sprig database).

Examples:
  sprig demo
  sprig demo --keys 100000 --path /tmp/sprig-demo")]
    Demo(DemoArgs),
    /// Print the entries of a key range in key-path order (or reverse), up to a limit.
    #[command(after_help = "\
Keys are key paths (64 hex digits) unless --key-format says otherwise. The last line (or
`next` in --json) says where to continue: pass it as --from to read the next page.

Examples:
  sprig --db ./state scan --limit 10
  sprig --db ./state scan --from 80 --to c0 --reverse --limit 100
  sprig --db ./state --snapshot block-100 --table utxo scan --json")]
    Scan(ScanArgs),
    /// List the retained versions (sequence number and root) that reads and rollback can use.
    #[command(after_help = "Example:\n  sprig --db ./state versions")]
    Versions,
    /// Make a retained version the latest again (one durable commit).
    #[command(
        after_help = "Example:\n  sprig --db ./state versions\n  sprig --db ./state rollback 41"
    )]
    Rollback {
        /// The version's sequence number (see `sprig versions`).
        seq: u64,
    },
    /// Save, list, check, restore and delete named snapshots.
    #[command(subcommand)]
    Snapshot(SnapshotCommand),
    /// State sync: export a table as verifiable chunks, verify them, import them.
    #[command(subcommand)]
    Sync(SyncCommand),
    /// Print a shell completion script.
    #[command(after_help = "\
Examples:
  sprig completions bash > ~/.local/share/bash-completion/completions/sprig
  sprig completions zsh > ~/.zfunc/_sprig
  sprig completions fish > ~/.config/fish/completions/sprig.fish")]
    Completions {
        /// The shell.
        shell: clap_complete::Shell,
    },
}

/// `stats`.
#[derive(Debug, Args)]
pub struct StatsArgs {
    /// Read and print the figures again every --interval seconds until stopped.
    #[arg(long)]
    pub watch: bool,
    /// Seconds between readings with --watch.
    #[arg(long, default_value_t = 2.0, value_name = "SECONDS")]
    pub interval: f64,
    /// Stop after this many readings with --watch (default: until stopped).
    #[arg(long, value_name = "N")]
    pub count: Option<u64>,
}

/// `scan`.
#[derive(Debug, Args)]
pub struct ScanArgs {
    #[command(flatten)]
    pub keys: KeyArgs,
    /// The first key (inclusive); a key path may be given as a shorter hex prefix, padded
    /// with zeros.
    #[arg(long, value_name = "KEY")]
    pub from: Option<String>,
    /// The end key (exclusive); a shorter hex prefix is padded with zeros.
    #[arg(long, value_name = "KEY")]
    pub to: Option<String>,
    /// Descending key order (from the end of the range).
    #[arg(long)]
    pub reverse: bool,
    /// The most entries to print.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub limit: usize,
}

/// `snapshot` subcommands.
#[derive(Debug, Subcommand)]
pub enum SnapshotCommand {
    /// Save the latest version of every table under a name (durable; copies no data).
    #[command(after_help = "Example:\n  sprig --db ./state snapshot save block-100")]
    Save {
        /// The name: 1 to 64 ASCII letters, digits, '.', '_' or '-'.
        name: String,
    },
    /// List the snapshots.
    List,
    /// Open a snapshot: its tables and roots; with --check, read and verify every page.
    #[command(
        after_help = "Read a snapshot's keys with the global --snapshot option:\n  \
        sprig --db ./state --snapshot block-100 get --key-format text alice\n\nExample:\n  \
        sprig --db ./state snapshot open block-100 --check"
    )]
    Open {
        /// The snapshot.
        name: String,
        /// Read and verify every page and value it holds.
        #[arg(long)]
        check: bool,
    },
    /// Make a snapshot the latest version again (one durable commit; copies no data).
    Restore {
        /// The snapshot.
        name: String,
    },
    /// Delete a snapshot; the space only it held is freed by the cleaner.
    Delete {
        /// The snapshot.
        name: String,
    },
    /// Write a snapshot (every table) to one portable, checksummed file of verifiable chunks.
    #[command(
        after_help = "Example:\n  sprig --db ./state snapshot export block-100 block-100.spst"
    )]
    Export {
        /// The snapshot.
        name: String,
        /// The file to write.
        file: String,
        /// Entries per chunk.
        #[arg(long, default_value_t = 100_000, value_name = "N")]
        chunk_entries: usize,
    },
    /// Fill an empty database from a snapshot file: every chunk is verified first (nothing is
    /// imported from a damaged or truncated file), then each table is one commit.
    #[command(
        after_help = "Example:\n  sprig init --db ./copy\n  sprig --db ./copy snapshot import block-100.spst --root <database root>"
    )]
    Import {
        /// The file.
        file: String,
        /// The database root you trust (from a block header, say); without it the file is
        /// checked against the root it states.
        #[arg(long, value_name = "HEX")]
        root: Option<String>,
    },
}

/// `sync` subcommands.
#[derive(Debug, Subcommand)]
pub enum SyncCommand {
    /// Write a table (of the latest version, or --snapshot's) as verifiable chunks.
    #[command(
        after_help = "Example:\n  sprig --db ./state --table utxo sync export --out utxo.spst"
    )]
    Export {
        /// The file to write.
        #[arg(long, value_name = "FILE")]
        out: String,
        /// Entries per chunk.
        #[arg(long, default_value_t = 100_000, value_name = "N")]
        chunk_entries: usize,
    },
    /// Check every chunk of a sync file against a trusted table root (exit 5 if any fails or
    /// some are missing).
    #[command(
        after_help = "Example:\n  sprig --db ./copy sync verify utxo.spst --root <table root>"
    )]
    Verify {
        /// The file.
        file: String,
        /// The table root you trust.
        #[arg(long, value_name = "HEX")]
        root: String,
    },
    /// Fill the empty --table from a sync file, verified first against a trusted root.
    #[command(
        after_help = "Example:\n  sprig --db ./copy --table utxo sync import utxo.spst --root <table root>"
    )]
    Import {
        /// The file.
        file: String,
        /// The table root you trust.
        #[arg(long, value_name = "HEX")]
        root: String,
    },
}

/// `table` subcommands.
#[derive(Debug, Subcommand)]
pub enum TableCommand {
    /// Create an empty table (one durable commit).
    #[command(after_help = "\
Built-in resolvers: replace, add-u64, add-u128 (little-endian sums, saturating), max, min
(byte-wise), concat.

Example:\n  sprig --db ./state table create balances --resolver add-u64")]
    Create {
        /// The table's name.
        name: String,
        /// The resolver that combines upserted values with stored ones.
        #[arg(long, value_name = "NAME")]
        resolver: Option<String>,
    },
    /// List every table with its entries, resolver and root, and the database root.
    List,
    /// Drop a table and its entries (one durable commit).
    Drop {
        /// The table's name.
        name: String,
    },
    /// Create a table as the union of others (one durable commit): equal keys combined in
    /// input order by --resolver, or the first input's value without one.
    #[command(
        after_help = "Example:\n  sprig --db ./state table union all-rewards epoch-1 epoch-2 --resolver add-u64"
    )]
    Union {
        /// The new table's name.
        name: String,
        /// The input tables, in order.
        #[arg(required = true)]
        inputs: Vec<String>,
        /// The new table's resolver, which also combines equal keys.
        #[arg(long, value_name = "NAME")]
        resolver: Option<String>,
        /// Start an incremental union instead: it reads nothing now, serves lookups at once,
        /// and is completed by `table supply`.
        #[arg(long)]
        incremental: bool,
    },
    /// Do work of an incremental union: merge input entries into its table, in durable steps.
    #[command(
        after_help = "Each step is one commit; an interrupted run leaves the union at its last step.

Examples:
  sprig --db ./state table supply all-rewards --work 100000
  sprig --db ./state table supply all-rewards"
    )]
    Supply {
        /// The union's table.
        name: String,
        /// Input entries to merge (default: all that remain).
        #[arg(long, value_name = "N")]
        work: Option<u64>,
        /// Input entries merged per commit.
        #[arg(long, value_name = "N", default_value_t = 65536)]
        step: u64,
    },
    /// Describe one table.
    Stat {
        /// The table's name.
        name: String,
    },
}

/// A hasher name on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum HasherArg {
    /// BLAKE3 (the default).
    Blake3,
    /// SHA-256.
    Sha256,
    /// Keccak-256 (Ethereum's).
    Keccak256,
}

impl From<HasherArg> for sprig_core::Hasher {
    fn from(h: HasherArg) -> Self {
        match h {
            HasherArg::Blake3 => sprig_core::Hasher::Blake3,
            HasherArg::Sha256 => sprig_core::Hasher::Sha256,
            HasherArg::Keccak256 => sprig_core::Hasher::Keccak256,
        }
    }
}

/// How keys on the command line or in a file are written.
#[derive(Debug, Args)]
pub struct KeyArgs {
    /// How keys are written: 64-hex-digit key paths, or byte keys (hex or text) to hash.
    #[arg(long, short = 'k', value_enum, default_value_t = KeyFormat::Path)]
    pub key_format: KeyFormat,
}

/// `init`.
#[derive(Debug, Args)]
pub struct InitArgs {
    /// The hash function of the trie (fixed for the database's life).
    #[arg(long, value_enum, default_value_t = HasherArg::Blake3)]
    pub hasher: HasherArg,
    /// Size of each segment file in MiB (1 to 16384).
    #[arg(long, default_value_t = 64, value_name = "MIB")]
    pub segment_mib: u64,
}

/// `put`.
#[derive(Debug, Args)]
pub struct PutArgs {
    #[command(flatten)]
    pub keys: KeyArgs,
    /// How the value is written.
    #[arg(long, short = 'v', value_enum, default_value_t = ValueFormat::Text)]
    pub value_format: ValueFormat,
    /// The key.
    pub key: String,
    /// The value.
    pub value: String,
}

/// `get`.
#[derive(Debug, Args)]
pub struct GetArgs {
    #[command(flatten)]
    pub keys: KeyArgs,
    /// The keys.
    #[arg(required = true)]
    pub key: Vec<String>,
}

/// `delete`.
#[derive(Debug, Args)]
pub struct DeleteArgs {
    #[command(flatten)]
    pub keys: KeyArgs,
    /// A file with one key per line (blank lines and lines starting with # are skipped).
    #[arg(long, value_name = "FILE", required_unless_present = "key")]
    pub from: Option<String>,
    /// The keys.
    pub key: Vec<String>,
}

/// The default memory budget of `import`, in MiB.
pub const DEFAULT_IMPORT_MEMORY_MIB: u64 = 256;

/// `import`.
#[derive(Debug, Args)]
pub struct ImportArgs {
    /// The input file (`-`: stdin; pipes and FIFOs work, the input is read once).
    pub file: String,
    /// The file format (detected from the file's first bytes if not given).
    #[arg(long, value_enum)]
    pub format: Option<FileFormat>,
    #[command(flatten)]
    pub keys: KeyArgs,
    /// How JSON Lines values are written.
    #[arg(long, short = 'v', value_enum, default_value_t = ValueFormat::Hex)]
    pub value_format: ValueFormat,
    /// Memory for records and pages in flight, in MiB (8 to 1048576): half holds the records
    /// read (sorted runs past it go to temporary files in the database directory), half the
    /// engine's pages; the import's size does not change it.
    #[arg(
        long,
        value_name = "MIB",
        default_value_t = DEFAULT_IMPORT_MEMORY_MIB,
        value_parser = clap::value_parser!(u64).range(8..=1 << 20)
    )]
    pub memory_mib: u64,
}

/// `export`.
#[derive(Debug, Args)]
pub struct ExportArgs {
    /// The output file (`-`: stdout).
    pub file: String,
    /// The file format.
    #[arg(long, value_enum, default_value_t = FileFormat::Jsonl)]
    pub format: FileFormat,
}

/// The encoding of a proof file.
#[derive(Debug, Clone, Copy, PartialEq, Eq, ValueEnum)]
pub enum ProofFormat {
    /// A JSON document with the root, the claimed values and the proof.
    Json,
    /// The bare binary encoding (docs/PROOF_FORMAT.md).
    Binary,
}

/// `prove`.
#[derive(Debug, Args)]
pub struct ProveArgs {
    #[command(flatten)]
    pub keys: KeyArgs,
    /// A file with one key per line (blank lines and lines starting with # are skipped).
    #[arg(long, value_name = "FILE", required_unless_present = "key")]
    pub from: Option<String>,
    /// Produce a block witness (keys and a multi-proof) instead of a proof.
    #[arg(long)]
    pub witness: bool,
    /// The proof's encoding.
    #[arg(long, value_enum, default_value_t = ProofFormat::Json)]
    pub format: ProofFormat,
    /// Write the proof here and print a summary (default: the proof goes to stdout).
    #[arg(long, short = 'o', value_name = "FILE")]
    pub out: Option<String>,
    /// The keys.
    pub key: Vec<String>,
}

/// `verify`.
#[derive(Debug, Args)]
pub struct VerifyArgs {
    /// The proof file (JSON or binary, detected).
    pub file: String,
    /// The trusted state root, 64 hex digits.
    #[arg(long, value_name = "HEX")]
    pub root: Option<String>,
    /// For binary proofs: a key to look up (repeat for a multi-proof).
    #[arg(long = "key", value_name = "KEY")]
    pub key: Vec<String>,
    /// For binary proofs: the value each --key must have, in order.
    #[arg(long = "value", value_name = "VALUE")]
    pub value: Vec<String>,
    #[command(flatten)]
    pub keys: KeyArgs,
    /// How --value is written.
    #[arg(long, short = 'v', value_enum, default_value_t = ValueFormat::Hex)]
    pub value_format: ValueFormat,
}

/// `demo`.
#[derive(Debug, Args)]
pub struct DemoArgs {
    /// The demo database directory (removed and recreated).
    #[arg(long, default_value = "sprig-demo-db", value_name = "DIR")]
    pub path: PathBuf,
    /// Keys to bulk load.
    #[arg(long, default_value_t = 1_000_000)]
    pub keys: u64,
    /// Committed batches after the load.
    #[arg(long, default_value_t = 5)]
    pub batches: u64,
    /// Changes per batch (updates, inserts and deletes).
    #[arg(long, default_value_t = 10_000)]
    pub batch_size: u64,
    /// Keys to prove and verify.
    #[arg(long, default_value_t = 100)]
    pub samples: u64,
    /// The hash function.
    #[arg(long, value_enum, default_value_t = HasherArg::Blake3)]
    pub hasher: HasherArg,
}

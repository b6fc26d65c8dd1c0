//! What a command hands back, and how it reaches the user: human text or one JSON document on
//! stdout, errors on stderr (or as a JSON document on stdout with `--json`), and the exit code.

use crate::error::{exit, CliResult};
use serde_json::{json, Value};
use std::io::Write as _;

/// The outcome of a successful command: the same facts for people and for programs.
pub struct Outcome {
    /// The `--json` document.
    pub json: Value,
    /// The human text (printed as is, with a final newline added if missing).
    pub human: String,
    /// The exit code: [`exit::OK`], or another code for a result that is not a success
    /// (a missing key, a damaged database, a claim a proof refutes) but still a report.
    pub code: u8,
}

impl Outcome {
    /// A successful outcome.
    pub fn ok(json: Value, human: impl Into<String>) -> Outcome {
        Outcome {
            json,
            human: human.into(),
            code: exit::OK,
        }
    }

    /// An outcome that printed its result already (raw bytes on stdout): nothing more to say.
    pub fn silent() -> Outcome {
        Outcome {
            json: Value::Null,
            human: String::new(),
            code: exit::OK,
        }
    }
}

/// Print the outcome or the error and return the process exit code.
pub fn finish(result: CliResult<Outcome>, json: bool) -> u8 {
    match result {
        Ok(outcome) => {
            let text = if json {
                if outcome.json.is_null() {
                    String::new()
                } else {
                    outcome.json.to_string()
                }
            } else {
                outcome.human
            };
            if !text.is_empty() {
                let mut stdout = std::io::stdout().lock();
                let newline = if text.ends_with('\n') { "" } else { "\n" };
                // A closed pipe (`sprig ... | head`) is not worth a second error.
                let _ = write!(stdout, "{text}{newline}");
                let _ = stdout.flush();
            }
            outcome.code
        }
        Err(e) => {
            let code = e.exit_code();
            if json {
                let doc = json!({"error": {
                    "kind": e.kind(),
                    "exit_code": code,
                    "message": e.to_string(),
                    "hint": e.hint(),
                }});
                println!("{doc}");
            } else {
                eprintln!("error: {e}");
                if let Some(hint) = e.hint() {
                    eprintln!("hint: {hint}");
                }
            }
            code
        }
    }
}

/// Whether progress bars may be drawn: not with `--json`, and only on a terminal.
pub fn progress_allowed(json: bool) -> bool {
    use std::io::IsTerminal as _;
    !json && std::io::stderr().is_terminal()
}

//! The engine's layout is enforced, not just described: data flows one way,
//! api → write → state + log → io, and no module imports another that imports it back.
//!
//! This test reads `crates/sprig/src`, finds every `crate::…` and `super::…` path in each
//! module's code (outside its `#[cfg(test)]` tests, which may look anywhere) and checks:
//! - each layer uses only the layers below it (`log` may use `state`, not the reverse), and the
//!   shared leaf modules (`codec`, `error`, `options`, `resolve`, `stats`, `telemetry`,
//!   `failpoint`) use nothing but `io`;
//! - the graph of modules (files) has no cycle.
//!
//! Run it with `cargo test -p sprig --test suite layering:: -- --nocapture` to see the graph.

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

/// The layer of a module path like `write::commit` or `codec`.
fn layer(module: &str) -> &str {
    let top = module.split("::").next().unwrap_or(module);
    match top {
        "codec" | "error" | "options" | "resolve" | "stats" | "telemetry" | "failpoint" => "shared",
        other => other,
    }
}

/// Which layers a layer may use (besides itself).
fn allowed(from: &str) -> &'static [&'static str] {
    match from {
        "api" => &["write", "state", "log", "io", "shared"],
        "write" => &["state", "log", "io", "shared"],
        "log" => &["state", "io", "shared"],
        "state" => &["io", "shared"],
        "io" => &["shared"],
        "shared" => &["io", "shared"],
        _ => &[],
    }
}

/// Every module file under `src`, as (module path, file).
fn modules(src: &Path) -> Vec<(String, PathBuf)> {
    let mut out = Vec::new();
    let mut stack = vec![src.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).expect("src is readable") {
            let path = entry.expect("a directory entry").path();
            if path.is_dir() {
                stack.push(path);
                continue;
            }
            if path.extension().and_then(|e| e.to_str()) != Some("rs") {
                continue;
            }
            let rel = path.strip_prefix(src).expect("under src");
            let mut parts: Vec<String> = rel
                .iter()
                .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
                .collect();
            if parts.last().is_some_and(|p| p == "mod") {
                parts.pop();
            }
            if parts == ["lib"] {
                continue; // The crate root declares and re-exports everything.
            }
            out.push((parts.join("::"), path));
        }
    }
    out.sort();
    out
}

/// The code of a file before its tests, without comments (a doc link is not an import).
fn code(path: &Path) -> String {
    let text = std::fs::read_to_string(path).expect("a source file is readable");
    let text = match text.find("#[cfg(test)]") {
        Some(at) => &text[..at],
        None => &text[..],
    };
    text.lines()
        .map(|line| match line.find("//") {
            Some(at) => &line[..at],
            None => line,
        })
        .collect::<Vec<_>>()
        .join("\n")
}

/// The modules (among `known`) that `text`, the code of `module`, refers to with `crate::` and
/// `super::` paths, including those in `use crate::{a::b, c}` groups.
fn references(text: &str, module: &str, known: &BTreeSet<String>) -> BTreeSet<String> {
    // `super` of `a::b` (a file `a/b.rs`, or a directory `a/b/mod.rs`) is `a`.
    let parent: Vec<&str> = {
        let mut p: Vec<&str> = module.split("::").collect();
        p.pop();
        p
    };
    let mut out = BTreeSet::new();
    for (prefix, base) in [("crate::", Vec::new()), ("super::", parent)] {
        let mut rest = text;
        while let Some(at) = rest.find(prefix) {
            let before = rest[..at].chars().next_back();
            rest = &rest[at + prefix.len()..];
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue; // `super::super::…` or part of another path
            }
            let path: String = rest
                .chars()
                .take_while(|c| c.is_alphanumeric() || *c == '_' || *c == ':')
                .collect();
            let mut segments: Vec<&str> = base.clone();
            segments.extend(path.split("::").filter(|s| !s.is_empty()));
            // The longest known module that prefixes the path.
            for n in (1..=segments.len()).rev() {
                let candidate = segments[..n].join("::");
                if known.contains(&candidate) {
                    out.insert(candidate);
                    break;
                }
            }
        }
    }
    out
}

#[test]
fn super_paths_count_as_references() {
    let known: BTreeSet<String> = ["write", "write::engine", "write::commit", "io"]
        .iter()
        .map(|s| s.to_string())
        .collect();
    let refs = references(
        "use super::engine::Inner;\nuse crate::io::Storage;",
        "write::commit",
        &known,
    );
    assert_eq!(
        refs,
        ["io", "write::engine"]
            .iter()
            .map(|s| s.to_string())
            .collect()
    );
}

#[test]
fn layers_only_use_the_layers_below_and_modules_form_no_cycle() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mods = modules(&src);
    assert!(mods.len() > 30, "found only {} modules", mods.len());
    let known: BTreeSet<String> = mods.iter().map(|(m, _)| m.clone()).collect();
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut violations = Vec::new();
    for (module, path) in &mods {
        let refs: BTreeSet<String> = references(&code(path), module, &known)
            .into_iter()
            .filter(|r| r != module && !module.starts_with(&format!("{r}::")))
            .collect();
        let from = layer(module);
        for r in &refs {
            let to = layer(r);
            if to != from && !allowed(from).contains(&to) {
                violations.push(format!("{module} ({from}) uses {r} ({to})"));
            }
        }
        println!(
            "{module} -> {}",
            refs.iter().cloned().collect::<Vec<_>>().join(", ")
        );
        graph.insert(module.clone(), refs);
    }
    assert!(
        violations.is_empty(),
        "layering violations:\n{}",
        violations.join("\n")
    );

    // No cycle: every strongly connected component (Tarjan) is a single module.
    let cycles = strongly_connected(&graph)
        .into_iter()
        .filter(|c| c.len() > 1)
        .map(|c| c.join(" <-> "))
        .collect::<Vec<_>>();
    assert!(cycles.is_empty(), "import cycles:\n{}", cycles.join("\n"));
}

/// The strongly connected components of `graph` (Tarjan's algorithm).
fn strongly_connected(graph: &BTreeMap<String, BTreeSet<String>>) -> Vec<Vec<String>> {
    struct Tarjan<'g> {
        graph: &'g BTreeMap<String, BTreeSet<String>>,
        index: BTreeMap<&'g str, usize>,
        low: BTreeMap<&'g str, usize>,
        on_stack: BTreeSet<&'g str>,
        stack: Vec<&'g str>,
        next: usize,
        out: Vec<Vec<String>>,
    }
    impl<'g> Tarjan<'g> {
        fn visit(&mut self, v: &'g str) {
            self.index.insert(v, self.next);
            self.low.insert(v, self.next);
            self.next += 1;
            self.stack.push(v);
            self.on_stack.insert(v);
            for w in self.graph.get(v).into_iter().flatten() {
                let w = w.as_str();
                if !self.index.contains_key(w) {
                    self.visit(w);
                    let lw = self.low[w];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(lw));
                } else if self.on_stack.contains(w) {
                    let iw = self.index[w];
                    let lv = self.low[v];
                    self.low.insert(v, lv.min(iw));
                }
            }
            if self.low[v] == self.index[v] {
                let mut component = Vec::new();
                while let Some(w) = self.stack.pop() {
                    self.on_stack.remove(w);
                    component.push(w.to_string());
                    if w == v {
                        break;
                    }
                }
                component.sort();
                self.out.push(component);
            }
        }
    }
    let mut t = Tarjan {
        graph,
        index: BTreeMap::new(),
        low: BTreeMap::new(),
        on_stack: BTreeSet::new(),
        stack: Vec::new(),
        next: 0,
        out: Vec::new(),
    };
    for v in graph.keys() {
        if !t.index.contains_key(v.as_str()) {
            t.visit(v);
        }
    }
    t.out
}

//! The facade's layers, kept: every `crate::…` and `super::…` path in
//! `src/` is read against the layer table in `src/lib.rs`
//! ([`mcp_warden_sidecar::LAYERS`]), and a path that climbs a layer fails
//! the test with the file, the line and both layers. The protocol layer is a
//! crate of its own (`mcp-warden-protocol`): the compiler keeps that
//! boundary, this test keeps the others.
//!
//! It also checks that every module `lib.rs` declares has a layer (a new
//! module cannot dodge the table), and that no import cycle spans two
//! top-level modules (cycles inside one module, between its own files, are
//! that module's business).
//!
//! How paths are read: comments are skipped; a `use` is read whole (braces
//! included, across lines); `super::` is resolved against the file's module,
//! one level deeper inside an inline `mod … {` (a file's `mod tests`).

use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};

use mcp_warden_sidecar::LAYERS;

/// One import of one module by another.
#[derive(Debug)]
struct Import {
    file: String,
    line: usize,
    path: String,
    from: String,
    to: String,
}

fn src() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("src")
}

fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

/// `session/steps/call.rs` → `["session", "steps", "call"]`; `mod.rs` is its
/// directory; `lib.rs` and `main.rs` are the crate root (`[]`).
fn module_of(rel: &Path) -> Vec<String> {
    let mut parts: Vec<String> = rel
        .iter()
        .map(|p| p.to_string_lossy().trim_end_matches(".rs").to_string())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    if parts.len() == 1 && (parts[0] == "lib" || parts[0] == "main") {
        parts.clear();
    }
    parts
}

/// The layer index of a top-level module (0: the bottom).
fn layer_index() -> BTreeMap<&'static str, usize> {
    let mut index = BTreeMap::new();
    for (i, (_, modules)) in LAYERS.iter().enumerate() {
        for m in *modules {
            assert!(
                index.insert(*m, i).is_none(),
                "`{m}` is in two layers of LAYERS"
            );
        }
    }
    index
}

/// The code of a line, without its comment (`//` outside a string).
fn code_of(line: &str) -> &str {
    let trimmed = line.trim_start();
    if trimmed.starts_with("//") {
        return "";
    }
    let mut in_str = false;
    let bytes = line.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'\\' if in_str => i += 1,
            b'"' => in_str = !in_str,
            b'/' if !in_str && bytes.get(i + 1) == Some(&b'/') => return &line[..i],
            _ => {}
        }
        i += 1;
    }
    line
}

/// The first-level names a `use` tree starting after `crate::` (or
/// `super::`) names: `a::B` → `[a]`, `{a::B, b, c::{D}}` → `[a, b, c]`.
fn heads(tree: &str) -> Vec<String> {
    let tree = tree.trim();
    let Some(inner) = tree.strip_prefix('{') else {
        return vec![ident_at(tree)];
    };
    let mut out = Vec::new();
    let (mut depth, mut start) = (0, 0);
    for (i, c) in inner.char_indices() {
        match c {
            '{' => depth += 1,
            '}' if depth == 0 => {
                out.push(ident_at(&inner[start..i]));
                break;
            }
            '}' => depth -= 1,
            ',' if depth == 0 => {
                out.push(ident_at(&inner[start..i]));
                start = i + 1;
            }
            _ => {}
        }
    }
    out.retain(|h| !h.is_empty());
    out
}

fn ident_at(s: &str) -> String {
    s.trim()
        .chars()
        .take_while(|c| c.is_ascii_alphanumeric() || *c == '_')
        .collect()
}

/// Every `crate::`/`super::` path of one file, resolved to the top-level
/// module it names (`None` for the crate root's own items).
fn imports_of(rel: &Path, text: &str) -> Vec<(usize, String, Option<String>)> {
    let module = module_of(rel);
    let mut out = Vec::new();
    let mut nested = 0usize;
    let lines: Vec<&str> = text.lines().collect();
    let mut i = 0;
    while i < lines.len() {
        let code = code_of(lines[i]);
        let trimmed = code.trim();
        if (trimmed.starts_with("mod ") || trimmed.starts_with("pub mod "))
            && trimmed.ends_with('{')
        {
            nested += 1;
        }
        // A `use` is read whole, however many lines it takes.
        let mut stmt = code.to_string();
        let start = i;
        if (trimmed.starts_with("use ")
            || trimmed.starts_with("pub use ")
            || trimmed.starts_with("pub(crate) use "))
            && !trimmed.contains(';')
        {
            while i + 1 < lines.len() && !stmt.contains(';') {
                i += 1;
                stmt.push(' ');
                stmt.push_str(code_of(lines[i]));
            }
        }
        for (pos, _) in stmt.match_indices("crate::") {
            if pos > 0 && stmt[..pos].ends_with('$') {
                continue;
            }
            for head in heads(&stmt[pos + "crate::".len()..]) {
                out.push((start + 1, format!("crate::{head}"), Some(head)));
            }
        }
        let mut rest = stmt.as_str();
        let mut offset = 0;
        while let Some(pos) = rest.find("super::") {
            let abs = offset + pos;
            let before = &stmt[..abs];
            let is_word_start = !before
                .chars()
                .last()
                .is_some_and(|c| c.is_ascii_alphanumeric() || c == '_');
            // `super::super::x` is counted once, at its first `super`.
            if is_word_start && !before.ends_with("super::") {
                let mut ups = 0usize;
                let mut tail = &stmt[abs..];
                while let Some(t) = tail.strip_prefix("super::") {
                    ups += 1;
                    tail = t;
                }
                // Inside an inline module, `super` is the file's module.
                let mut base = module.clone();
                let levels = ups.saturating_sub(nested.min(1));
                for _ in 0..levels {
                    base.pop();
                }
                let heads = heads(tail);
                let resolved = if base.is_empty() {
                    heads.into_iter().map(Some).collect::<Vec<_>>()
                } else {
                    vec![Some(base[0].clone())]
                };
                for r in resolved {
                    out.push((start + 1, format!("super::{}", tail.trim()), r));
                }
            }
            offset = abs + "super::".len();
            rest = &stmt[offset..];
        }
        i += 1;
    }
    out
}

/// Every cross-module import in `src/`.
fn all_imports() -> Vec<Import> {
    let root = src();
    let mut files = Vec::new();
    rust_files(&root, &mut files);
    files.sort();
    let mut out = Vec::new();
    for file in files {
        let rel = file.strip_prefix(&root).unwrap().to_path_buf();
        let module = module_of(&rel);
        let Some(from) = module.first() else { continue };
        let text = std::fs::read_to_string(&file).unwrap();
        for (line, path, to) in imports_of(&rel, &text) {
            let Some(to) = to else { continue };
            if &to != from {
                out.push(Import {
                    file: format!("src/{}", rel.display()),
                    line,
                    path: path.chars().take(60).collect(),
                    from: from.clone(),
                    to,
                });
            }
        }
    }
    out
}

/// The modules `lib.rs` declares or re-exports from the protocol crate.
fn declared_modules() -> BTreeSet<String> {
    let lib = std::fs::read_to_string(src().join("lib.rs")).unwrap();
    let mut out = BTreeSet::new();
    for line in lib.lines().map(code_of) {
        let line = line.trim();
        if let Some(name) = line
            .strip_prefix("pub mod ")
            .or_else(|| line.strip_prefix("mod "))
        {
            out.insert(name.trim_end_matches(';').to_string());
        }
    }
    // The re-export of the protocol crate's modules, however rustfmt wraps it.
    let code: String = lib.lines().map(code_of).collect::<Vec<_>>().join(" ");
    if let Some(at) = code.find("pub use mcp_warden_protocol::") {
        let tree = &code[at + "pub use mcp_warden_protocol::".len()..];
        let tree = &tree[..tree.find(';').expect("the use statement ends")];
        out.extend(heads(tree));
    }
    out
}

#[test]
fn every_module_has_a_layer() {
    let index = layer_index();
    let declared = declared_modules();
    let missing: Vec<_> = declared
        .iter()
        .filter(|m| !index.contains_key(m.as_str()))
        .collect();
    assert!(
        missing.is_empty(),
        "modules without a layer in LAYERS (src/lib.rs): {missing:?}"
    );
    let stale: Vec<_> = index.keys().filter(|m| !declared.contains(**m)).collect();
    assert!(
        stale.is_empty(),
        "LAYERS names modules lib.rs does not declare: {stale:?}"
    );
}

#[test]
fn no_import_climbs_a_layer() {
    let index = layer_index();
    let name = |i: usize| LAYERS[i].0;
    let mut upward = Vec::new();
    for import in all_imports() {
        let (Some(&from), Some(&to)) = (
            index.get(import.from.as_str()),
            index.get(import.to.as_str()),
        ) else {
            continue;
        };
        if to > from {
            upward.push(format!(
                "{}:{}: `{}` — `{}` (layer {}) imports `{}` (layer {}), which sits above it",
                import.file,
                import.line,
                import.path,
                import.from,
                name(from),
                import.to,
                name(to),
            ));
        }
    }
    assert!(
        upward.is_empty(),
        "{} import(s) point up the layers (a lower layer takes what it needs \
         from above as a trait or a struct handed down):\n{}",
        upward.len(),
        upward.join("\n")
    );
}

#[test]
fn no_import_cycle_spans_two_modules() {
    let mut graph: BTreeMap<String, BTreeSet<String>> = BTreeMap::new();
    let mut witness: BTreeMap<(String, String), String> = BTreeMap::new();
    for import in all_imports() {
        witness
            .entry((import.from.clone(), import.to.clone()))
            .or_insert_with(|| format!("{}:{}", import.file, import.line));
        graph.entry(import.from).or_default().insert(import.to);
    }
    // Depth-first search; a back edge closes a cycle.
    fn visit(
        node: &str,
        graph: &BTreeMap<String, BTreeSet<String>>,
        state: &mut BTreeMap<String, u8>,
        stack: &mut Vec<String>,
    ) -> Option<Vec<String>> {
        state.insert(node.to_string(), 1);
        stack.push(node.to_string());
        for next in graph.get(node).into_iter().flatten() {
            match state.get(next.as_str()) {
                Some(1) => {
                    let at = stack.iter().position(|n| n == next).unwrap();
                    let mut cycle = stack[at..].to_vec();
                    cycle.push(next.clone());
                    return Some(cycle);
                }
                Some(_) => {}
                None => {
                    if let Some(cycle) = visit(next, graph, state, stack) {
                        return Some(cycle);
                    }
                }
            }
        }
        stack.pop();
        state.insert(node.to_string(), 2);
        None
    }
    let mut state = BTreeMap::new();
    for node in graph.keys() {
        if state.contains_key(node) {
            continue;
        }
        if let Some(cycle) = visit(node, &graph, &mut state, &mut Vec::new()) {
            let edges: Vec<String> = cycle
                .windows(2)
                .map(|w| {
                    format!(
                        "{} -> {} ({})",
                        w[0],
                        w[1],
                        witness[&(w[0].clone(), w[1].clone())]
                    )
                })
                .collect();
            panic!("an import cycle spans modules:\n{}", edges.join("\n"));
        }
    }
}

/// The reader itself: a grouped `use`, a multi-line one, `super` from a
/// nested file and from a test module, and comments, which never count.
#[test]
fn the_reader_resolves_paths_as_rustc_does() {
    let text = "use crate::{app::App, gates::{audit, Request}};\n\
                // use crate::cli::Args;\n\
                use super::channel::Era;\n\
                use crate::router::{\n    probe,\n    sessions::Sessions,\n};\n\
                fn f() { crate::spans::enabled(); } // crate::admin::x\n\
                mod tests {\n    use super::*;\n}\n";
    let got: Vec<(usize, Option<String>)> = imports_of(Path::new("session/steps/call.rs"), text)
        .into_iter()
        .map(|(line, _, to)| (line, to))
        .collect();
    let want = vec![
        (1, Some("app".to_string())),
        (1, Some("gates".to_string())),
        (3, Some("session".to_string())),
        (4, Some("router".to_string())),
        (8, Some("spans".to_string())),
        (10, Some("session".to_string())),
    ];
    assert_eq!(got, want);
    let top: Vec<Option<String>> = imports_of(Path::new("spans.rs"), "use super::metrics::M;\n")
        .into_iter()
        .map(|(_, _, to)| to)
        .collect();
    assert_eq!(top, vec![Some("metrics".to_string())]);
}

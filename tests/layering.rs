//! The layering of docs/ARCHITECTURE.md, enforced: every `crate::` (and `super::`) path in a
//! module's code must point to its own unit or to one listed before it in [`UNITS`].
//!
//! A unit is a module path; a file belongs to the longest unit that prefixes its module path
//! (`src/backend/check/probe.rs` is `backend::check::probe`, unit `backend::check`). The order
//! is the table of layers in docs/ARCHITECTURE.md, and within a layer the order in which
//! modules may import each other, so an import circle always fails here. Comments and the
//! unit tests at the bottom of a file (from `#[cfg(test)] mod ...` on) are not read; a folder's `mod.rs`
//! may re-export its children with relative paths (`pub use connect::...`), which are not read
//! either.

use std::path::{Path, PathBuf};

/// Units from the bottom up: (module path prefix, layer).
const UNITS: &[(&str, u8)] = &[
    // 0. Vocabulary: imports nothing above it.
    ("sys", 0),
    ("compat", 0),
    ("base", 0),
    // Positions and messages of the configuration, and the syntax of its values: pure
    // functions that the rules engine and the model share.
    ("config::rawbytes", 0),
    ("config::diag", 0),
    ("config::values", 0),
    // 1. Pure logic (no sockets, threads or clock). The rules engine comes first, then the
    // log formats (their `%[...]` are rule expressions): the configuration model holds both,
    // compiled.
    ("stick", 1),
    // A wire parser that imports nothing: the `req.ssl_*` fetches of the rules engine read it.
    ("proto::tls_hello", 1),
    ("rules", 1),
    // The PROXY protocol header (its checksum is the rules engine's CRC32C): the model holds
    // a server's `proxy-v2-options`.
    ("proto::proxy", 1),
    ("tls", 1),
    ("log::record", 1),
    ("log::format", 1),
    ("config::model", 1),
    ("lb", 1),
    ("proto", 1),
    ("config", 1),
    // 2. I/O mechanics.
    ("log", 2),
    // TLS over a TCP socket, then a connected stream socket (TCP, UNIX or TLS): below `net`
    // itself, whose `drained` takes one.
    ("net::tls", 2),
    ("net::stream", 2),
    ("net", 2),
    ("net::deadline", 2),
    ("net::lazy", 2),
    ("net::pipe", 2),
    ("net::forward", 2),
    ("net::idle", 2),
    ("net::listener", 2),
    ("backend::server", 2),
    ("backend", 2),
    ("backend::health", 2),
    ("backend::track", 2),
    ("backend::passive", 2),
    ("backend::picker", 2),
    ("backend::connect", 2),
    ("backend::check", 2),
    // Stick-table replication: tables and sockets, below the process that starts it.
    ("peers", 2),
    // 3. Orchestration.
    ("state", 3),
    // What the stats socket and the statistics page both show and change.
    ("stats", 3),
    ("session", 3),
    ("session::tcp", 3),
    ("http", 3),
    // 4. Process.
    ("cli", 4),
    ("runtime", 4),
    ("runtime::reclaim", 4),
    ("runtime::stats", 4),
    ("runtime::worker", 4),
    ("runtime::process", 4),
];

/// The rank in [`UNITS`] of the unit a module path belongs to.
fn unit_of(path: &str) -> Option<usize> {
    UNITS
        .iter()
        .enumerate()
        .filter(|(_, (u, _))| path == *u || path.starts_with(&format!("{u}::")))
        .max_by_key(|(_, (u, _))| u.len())
        .map(|(i, _)| i)
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

/// `src/a/b/mod.rs` is `a::b`, `src/a/c.rs` is `a::c`.
fn module_path(src: &Path, file: &Path) -> String {
    let rel = file.strip_prefix(src).unwrap().with_extension("");
    let mut parts: Vec<String> = rel
        .components()
        .map(|c| c.as_os_str().to_string_lossy().into_owned())
        .collect();
    if parts.last().is_some_and(|p| p == "mod") {
        parts.pop();
    }
    parts.join("::")
}

/// The module paths a `crate::` or `super::` path starting at `rest` names: leading lowercase
/// segments, with `{...}` groups expanded (`crate::a::{b::C, d}` names `a::b` and `a::d`).
fn paths_at(prefix: &str, rest: &str, out: &mut Vec<String>) {
    let mut path = prefix.to_string();
    let mut rest = rest;
    loop {
        if let Some(group) = rest.strip_prefix('{') {
            let mut depth = 0;
            let mut start = 0;
            for (i, ch) in group.char_indices() {
                match ch {
                    '{' => depth += 1,
                    '}' if depth == 0 => {
                        paths_at(&path, group[start..i].trim(), out);
                        return;
                    }
                    '}' => depth -= 1,
                    ',' if depth == 0 => {
                        paths_at(&path, group[start..i].trim(), out);
                        start = i + 1;
                    }
                    _ => {}
                }
            }
            return;
        }
        let len = rest
            .find(|c: char| !(c.is_ascii_lowercase() || c.is_ascii_digit() || c == '_'))
            .unwrap_or(rest.len());
        let seg = &rest[..len];
        if seg.is_empty() || seg == "self" {
            break;
        }
        if !path.is_empty() {
            path.push_str("::");
        }
        path.push_str(seg);
        match rest[len..].strip_prefix("::") {
            Some(r) => rest = r,
            None => break,
        }
    }
    out.push(path);
}

#[test]
fn imports_point_down_only() {
    let src = Path::new(env!("CARGO_MANIFEST_DIR")).join("src");
    let mut files = Vec::new();
    rust_files(&src, &mut files);
    files.sort();
    let mut problems = Vec::new();
    for file in &files {
        let module = module_path(&src, file);
        if module == "lib" || module == "main" {
            continue;
        }
        let Some(own) = unit_of(&module) else {
            problems.push(format!(
                "{}: module `{module}` is in no unit: add it to UNITS",
                file.display()
            ));
            continue;
        };
        let text = std::fs::read_to_string(file).unwrap();
        // Code only: comments out, and the unit tests at the bottom of the file.
        let lines: Vec<&str> = text.lines().collect();
        let tests_at = (0..lines.len())
            .find(|&i| {
                lines[i].trim() == "#[cfg(test)]"
                    && lines
                        .get(i + 1)
                        .is_some_and(|l| l.trim_start().starts_with("mod "))
            })
            .unwrap_or(lines.len());
        let code: Vec<(usize, &str)> = lines[..tests_at]
            .iter()
            .copied()
            .enumerate()
            .filter(|(_, l)| !l.trim_start().starts_with("//"))
            .collect();
        let joined: String = code.iter().map(|(_, l)| format!("{l}\n")).collect();
        let line_of = |offset: usize| {
            let k = joined[..offset].matches('\n').count();
            code[k].0 + 1
        };
        let parent = |m: &str, up: usize| {
            let mut parts: Vec<&str> = m.split("::").collect();
            for _ in 0..up {
                parts.pop();
            }
            parts.join("::")
        };
        let mut refs = Vec::new();
        for (at, _) in joined.match_indices("crate::") {
            let before = joined[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_') {
                continue;
            }
            let mut out = Vec::new();
            paths_at("", &joined[at + "crate::".len()..], &mut out);
            refs.extend(out.into_iter().map(|p| (at, p)));
        }
        for (at, _) in joined.match_indices("super::") {
            let before = joined[..at].chars().last();
            if before.is_some_and(|c| c.is_alphanumeric() || c == '_' || c == ':') {
                continue;
            }
            let mut rest = &joined[at..];
            let mut up = 0;
            while let Some(r) = rest.strip_prefix("super::") {
                up += 1;
                rest = r;
            }
            let mut out = Vec::new();
            paths_at(&parent(&module, up), rest, &mut out);
            refs.extend(out.into_iter().map(|p| (at, p)));
        }
        for (at, path) in refs {
            let Some(target) = unit_of(&path) else {
                continue;
            };
            if target > own {
                let (t, tl) = UNITS[target];
                let (o, ol) = UNITS[own];
                problems.push(format!(
                    "{}:{}: `{module}` (unit `{o}`, layer {ol}) uses `crate::{path}` \
                     (unit `{t}`, layer {tl}), which is above it",
                    file.strip_prefix(src.parent().unwrap()).unwrap().display(),
                    line_of(at),
                ));
            }
        }
    }
    assert!(
        problems.is_empty(),
        "imports must point down (docs/ARCHITECTURE.md, Layers):\n{}\n",
        problems.join("\n")
    );
}

#[test]
fn paths_are_read_like_rust() {
    let mut out = Vec::new();
    paths_at(
        "",
        "backend::{self, server::{admin, ServerState}, ClientAddrs};",
        &mut out,
    );
    assert_eq!(
        out,
        [
            "backend",
            "backend::server::admin",
            "backend::server",
            "backend"
        ]
    );
    assert_eq!(unit_of("backend::check::probe"), unit_of("backend::check"));
    assert!(unit_of("net::forward") > unit_of("net::pipe"));
    assert!(unit_of("config::model") < unit_of("config::parser"));
}

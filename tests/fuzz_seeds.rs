//! Replays the committed fuzz seeds (`fuzz/seeds/TARGET/*`) through the same property checks as
//! the fuzz targets (`fuzz/checks.rs`, included here by path), on stable with `cargo test`. A
//! crash the fuzzers found is kept as a seed, so it stays a regression test here as well as in
//! the unit tests next to the code. See docs/RELIABILITY.md.

#[path = "../fuzz/checks.rs"]
mod checks;

use std::path::Path;

/// Runs `check` on every file of `fuzz/seeds/TARGET/`, naming the file that fails.
fn replay(target: &str, check: fn(&[u8])) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("fuzz/seeds")
        .join(target);
    let mut files: Vec<_> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("{}: {e}", dir.display()))
        .map(|e| e.expect("directory entry").path())
        .collect();
    files.sort();
    assert!(
        files.len() >= 10,
        "expected the seed corpus in {}",
        dir.display()
    );
    let mut failed = Vec::new();
    for file in &files {
        let data = std::fs::read(file).unwrap_or_else(|e| panic!("{}: {e}", file.display()));
        if let Err(panic) = std::panic::catch_unwind(|| check(&data)) {
            let msg = panic
                .downcast_ref::<String>()
                .cloned()
                .or_else(|| panic.downcast_ref::<&str>().map(|s| s.to_string()))
                .unwrap_or_default();
            failed.push(format!("{}: {msg}", file.display()));
        }
    }
    assert!(
        failed.is_empty(),
        "seeds failing their properties:\n{}",
        failed.join("\n")
    );
}

#[test]
fn request_head_seeds() {
    replay("request_head", checks::request_head);
}

#[test]
fn response_head_seeds() {
    replay("response_head", checks::response_head);
}

#[test]
fn chunked_seeds() {
    replay("chunked", checks::chunked);
}

#[test]
fn config_seeds() {
    replay("config", checks::config);
}

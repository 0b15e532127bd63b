//! Golden tests of configuration diagnostics: every `tests/configs/NAME.cfg` (or directory
//! `tests/configs/NAME/`) is checked with the real binary (`bascule -c -f tests/configs/NAME...`),
//! and its stderr must equal `tests/configs/NAME.stderr`. The exit code must be 1 when the golden
//! file holds an `[ALERT]`, else 0 with `Configuration file is valid` on stdout.
//!
//! Run with `BLESS=1` to rewrite the golden files from the current output (then review the diff).

use std::path::{Path, PathBuf};
use std::process::Command;

/// One case: the `-f` argument (relative to the repository root) and its golden file.
struct Case {
    input: String,
    golden: PathBuf,
}

fn cases() -> Vec<Case> {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let dir = root.join("tests/configs");
    let mut cases = Vec::new();
    let entries = std::fs::read_dir(&dir).unwrap_or_else(|e| panic!("{}: {e}", dir.display()));
    for entry in entries.flatten() {
        let path = entry.path();
        let name = entry.file_name().to_string_lossy().into_owned();
        let stem = if path.is_dir() {
            name.clone()
        } else if let Some(stem) = name.strip_suffix(".cfg") {
            stem.to_string()
        } else {
            continue;
        };
        cases.push(Case {
            input: format!("tests/configs/{name}"),
            golden: dir.join(format!("{stem}.stderr")),
        });
    }
    cases.sort_by(|a, b| a.input.cmp(&b.input));
    cases
}

#[test]
fn golden_diagnostics() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"));
    let bless = std::env::var_os("BLESS").is_some_and(|v| v == "1");
    let mut failures = Vec::new();
    let cases = cases();
    assert!(
        cases.len() >= 10,
        "expected the golden cases in tests/configs"
    );
    for case in &cases {
        let out = Command::new(env!("CARGO_BIN_EXE_bascule"))
            .current_dir(root)
            .args(["-c", "-f", &case.input])
            .env_remove("BASCULE_TEST_UNSET")
            .output()
            .unwrap_or_else(|e| panic!("cannot run bascule: {e}"));
        let got = String::from_utf8_lossy(&out.stderr).into_owned();
        let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
        if bless {
            std::fs::write(&case.golden, &got)
                .unwrap_or_else(|e| panic!("{}: {e}", case.golden.display()));
            continue;
        }
        let expected = std::fs::read_to_string(&case.golden).unwrap_or_default();
        if got != expected {
            failures.push(format!(
                "{}: stderr differs\n--- expected ---\n{expected}--- got ---\n{got}----------------",
                case.input
            ));
            continue;
        }
        let has_error = expected.lines().any(|l| l.starts_with("[ALERT]"));
        let code = out.status.code();
        if has_error && code != Some(1) {
            failures.push(format!(
                "{}: expected exit code 1, got {code:?}",
                case.input
            ));
        }
        if !has_error && (code != Some(0) || stdout != "Configuration file is valid\n") {
            failures.push(format!(
                "{}: expected exit code 0 and 'Configuration file is valid', got {code:?} and {stdout:?}",
                case.input
            ));
        }
    }
    assert!(failures.is_empty(), "\n{}", failures.join("\n\n"));
}

//! Configuration diagnostics: where a problem is (file:line, section), what it is, and a hint.
//!
//! Every stage of the loader pushes [`Diagnostic`]s into one list instead of stopping at the first
//! problem, so that a single `bascule -c` run shows every error of every file. This file also owns
//! the "did you mean" search ([`suggest`]) so that every unknown name is answered the same way.

use std::fmt;
use std::sync::Arc;

/// A position in the configuration: which file (and its rank among the loaded files) and line.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Span {
    /// Rank of the file among the loaded files: diagnostics sort by it, then by line.
    pub file_index: usize,
    /// The file name as given on the command line (or to [`crate::config::load_str`]).
    pub file: Arc<str>,
    /// 1-based line number.
    pub line: u32,
}

impl fmt::Display for Span {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

/// How serious a diagnostic is: an alert stops the load, a warning does not (except under
/// `-dW`), a notice is information (`.notice` lines).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Severity {
    Alert,
    Warning,
    Notice,
}

/// One message about the configuration.
///
/// Rendered as `[ALERT] file:line: section: message; hint` (parts that are absent are left out).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Diagnostic {
    pub severity: Severity,
    /// Where the problem is; `None` for problems with no line (a file that cannot be read).
    pub span: Option<Span>,
    /// The section, as `global`, `defaults 'name'`, `frontend 'web'`.
    pub section: Option<String>,
    /// What is wrong, naming the keyword and what was expected.
    pub message: String,
    /// A suggestion such as `did you mean 'timeout'?`.
    pub hint: Option<String>,
}

impl Diagnostic {
    /// An error at `span` in `section`.
    pub fn alert(span: Option<&Span>, section: Option<&str>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Alert,
            span: span.cloned(),
            section: section.map(str::to_owned),
            message: message.into(),
            hint: None,
        }
    }

    /// A warning at `span` in `section`.
    pub fn warning(span: Option<&Span>, section: Option<&str>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Warning,
            ..Diagnostic::alert(span, section, message)
        }
    }

    /// A notice (information, never a failure) at `span` in `section`.
    pub fn notice(span: Option<&Span>, section: Option<&str>, message: impl Into<String>) -> Self {
        Diagnostic {
            severity: Severity::Notice,
            ..Diagnostic::alert(span, section, message)
        }
    }

    /// True for a warning (what `-dW` turns into a failure).
    pub fn is_warning(&self) -> bool {
        self.severity == Severity::Warning
    }

    /// The same diagnostic with a hint appended.
    pub fn with_hint(mut self, hint: Option<String>) -> Self {
        self.hint = hint;
        self
    }

    /// True for an alert (the configuration does not load).
    pub fn is_error(&self) -> bool {
        self.severity == Severity::Alert
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.severity {
            Severity::Alert => f.write_str("[ALERT] ")?,
            Severity::Warning => f.write_str("[WARNING] ")?,
            Severity::Notice => f.write_str("[NOTICE] ")?,
        }
        if let Some(span) = &self.span {
            write!(f, "{span}: ")?;
        }
        if let Some(section) = &self.section {
            write!(f, "{section}: ")?;
        }
        // A word's encoded bytes (`\xE0`) show as they were written.
        f.write_str(&super::rawbytes::display(&self.message))?;
        if let Some(hint) = &self.hint {
            write!(f, "; {hint}")?;
        }
        Ok(())
    }
}

/// Sorts diagnostics into file order (file rank, then line), keeping the order of those on the
/// same line; diagnostics without a line come first.
pub fn sort(diags: &mut [Diagnostic]) {
    diags.sort_by(|a, b| {
        let ka = a.span.as_ref().map(|s| (s.file_index, s.line));
        let kb = b.span.as_ref().map(|s| (s.file_index, s.line));
        ka.cmp(&kb)
    });
}

/// Edit distance between two words, counted in characters: insertions, deletions, substitutions
/// and swaps of two neighbours ("optimal string alignment"), so that `bsae` is one edit from `base`.
/// Once every alignment costs more than `limit` it stops and returns `limit + 1`: the smallest
/// value of a row of the table never decreases in the rows below it.
fn distance(a: &[char], b: &[char], limit: usize) -> usize {
    let w = b.len() + 1;
    let mut d = vec![0usize; (a.len() + 1) * w];
    for (i, row) in d.chunks_mut(w).enumerate() {
        row[0] = i;
    }
    for (j, cell) in d.iter_mut().take(w).enumerate() {
        *cell = j;
    }
    for i in 1..=a.len() {
        let mut row_min = d[i * w];
        for j in 1..=b.len() {
            let cost = usize::from(a[i - 1] != b[j - 1]);
            let mut v = (d[(i - 1) * w + j - 1] + cost)
                .min(d[(i - 1) * w + j] + 1)
                .min(d[i * w + j - 1] + 1);
            if i > 1 && j > 1 && a[i - 1] == b[j - 2] && a[i - 2] == b[j - 1] {
                v = v.min(d[(i - 2) * w + j - 2] + 1);
            }
            d[i * w + j] = v;
            row_min = row_min.min(v);
        }
        if row_min > limit {
            return limit.saturating_add(1);
        }
    }
    d[a.len() * w + b.len()]
}

/// The candidate closest to `word` by edit distance, as a hint `did you mean 'x'?`, when it is
/// close enough to be a plausible typo (at most a third of the word, at least one edit allowed).
/// Ties go to the first candidate in byte order, so the hint does not depend on the order the
/// candidates come in (some come from a `HashMap`).
pub fn suggest<'a>(word: &str, candidates: impl IntoIterator<Item = &'a str>) -> Option<String> {
    let word: Vec<char> = word.chars().collect();
    let len = word.len();
    let limit = (len / 3).max(1);
    let mut best: Option<(usize, &str)> = None;
    let mut chars = Vec::new();
    for c in candidates {
        // The distance is at least the difference in length: skip the count.
        let c_len = if c.is_ascii() {
            c.len()
        } else {
            c.chars().count()
        };
        if c_len.abs_diff(len) > limit {
            continue;
        }
        chars.clear();
        chars.extend(c.chars());
        let d = distance(&word, &chars, limit);
        if d <= limit && d < len && best.is_none_or(|b| (d, c) < b) {
            best = Some((d, c));
        }
    }
    best.map(|(_, c)| format!("did you mean '{c}'?"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn distance_counts_edits() {
        let chars = |s: &str| s.chars().collect::<Vec<_>>();
        let d = |a: &str, b: &str, limit| distance(&chars(a), &chars(b), limit);
        assert_eq!(d("timout", "timeout", usize::MAX), 1);
        assert_eq!(d("", "abc", usize::MAX), 3);
        assert_eq!(d("kitten", "sitting", usize::MAX), 3);
        assert_eq!(d("bsae", "base", usize::MAX), 1);
        assert_eq!(d("kitten", "sitting", 3), 3);
        // Beyond the limit, the count stops at limit + 1.
        assert_eq!(d("kitten", "sitting", 1), 2);
        assert_eq!(d("abcdef", "uvwxyz", 2), 3);
    }

    #[test]
    fn suggest_picks_the_closest_plausible_word() {
        let words = ["timeout", "mode", "maxconn"];
        assert_eq!(
            suggest("timout", words).as_deref(),
            Some("did you mean 'timeout'?")
        );
        assert_eq!(suggest("zzzzzz", words), None);
        assert_eq!(suggest("x", ["y"]), None);
    }

    /// Fuzzing regression (fuzz/seeds/config/regress_hint_tie): a tie went to whichever
    /// candidate came first, and some candidates come from a `HashMap`, so `bascule -c` gave a
    /// different hint from run to run.
    #[test]
    fn fuzz_regress_hint_ties_do_not_depend_on_candidate_order() {
        for words in [["api", "app"], ["app", "api"]] {
            assert_eq!(suggest("ap", words).as_deref(), Some("did you mean 'api'?"));
        }
        let names: std::collections::HashSet<&str> = ["bpp", "app", "api", "apx"].into();
        assert_eq!(suggest("ap", names).as_deref(), Some("did you mean 'api'?"));
    }

    #[test]
    fn renders_every_part() {
        let span = Span {
            file_index: 0,
            file: "a.cfg".into(),
            line: 3,
        };
        let d = Diagnostic::alert(
            Some(&span),
            Some("frontend 'web'"),
            "unknown keyword 'timout'",
        )
        .with_hint(Some("did you mean 'timeout'?".into()));
        assert_eq!(
            d.to_string(),
            "[ALERT] a.cfg:3: frontend 'web': unknown keyword 'timout'; did you mean 'timeout'?"
        );
        assert!(d.is_error());
        assert_eq!(
            Diagnostic::warning(None, None, "x").to_string(),
            "[WARNING] x"
        );
    }
}

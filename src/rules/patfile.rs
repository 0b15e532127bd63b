//! Map and ACL pattern files as the runtime API changes them: HAProxy's pattern references.
//!
//! Why: operators keep block lists, redirect tables and backend routing in map and pattern
//! files and edit them live on the stats socket (`add map`, `set map`, `del map`, `clear map`;
//! `add acl`, `del acl`, `clear acl`); files loaded once at start would make those commands
//! impossible. Each file is read once, however many converters and ACL lines use it
//! ([`PatFiles::open`]): its entries, in file order, are the reference. Every user of a file
//! (a map converter's [`LiveMap`], an ACL line's patterns) holds what it built from the
//! entries; a change rebuilds each user from the new entries and swaps the result in
//! (`arc_swap`): a worker's lookup reads whichever is current, without a lock. A change that
//! one user cannot take (`add map` of a value that is not an integer to a map read as
//! integers) is refused whole, as HAProxy refuses it.
//!
//! The commands run one at a time on the process thread (the stats sockets are served there),
//! so a change reads and replaces the entries without racing another change.
//!
//! Differences from HAProxy 2.6: ids count pattern files only (HAProxy also numbers each ACL
//! line's inline patterns); an entry's `0x...` identifier is a serial number, not an address;
//! `prepare`/`commit` (versions) are not supported.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::pattern::{read_lines, split_map_line, Map, Method};
use super::sample::{to_bytes, Bytes, Eval, Sample, SmpType};
use super::RuleError;

/// One entry of a pattern file: a map's key and value, or an ACL file's pattern (`key`, the
/// whole line; `value` empty), and the identifier `show map|acl` prints for it.
#[derive(Debug, Clone)]
pub struct PatEntry {
    pub id: u64,
    /// Its line in the file, for messages (0: added by the runtime API).
    pub line: usize,
    pub key: Box<str>,
    pub value: Box<str>,
}

/// The entries of a file, shared by its users.
pub type Entries = Arc<Vec<PatEntry>>;

/// The entry identifiers of the process (`0x...` in `show map`, `#0x...` in `del map`).
static NEXT_ENTRY: AtomicU64 = AtomicU64::new(0x1000);

fn entry(line: usize, key: &str, value: &str) -> PatEntry {
    PatEntry {
        id: NEXT_ENTRY.fetch_add(0x10, Ordering::Relaxed),
        line,
        key: key.into(),
        value: value.into(),
    }
}

/// Reads a pattern file: `two_columns` (a map, or an ACL's `-M`): key and value per line;
/// otherwise each line is one pattern.
pub fn read(path: &str, two_columns: bool) -> Result<Vec<PatEntry>, RuleError> {
    Ok(read_lines(path)?
        .iter()
        .map(|(n, l)| {
            if two_columns {
                let (k, v) = split_map_line(l);
                entry(*n, k, v)
            } else {
                entry(*n, l, "")
            }
        })
        .collect())
}

/// Something built from the entries of pattern files: rebuilt when one of them changes.
pub trait FileUser: Send + Sync + std::fmt::Debug {
    /// Builds from the files' entries (`entries(i)`: file `i`'s, as the registry numbers
    /// them) and gives the step that makes the result current, or what is wrong.
    fn rebuild<'a>(
        &'a self,
        entries: &dyn Fn(usize) -> Entries,
    ) -> Result<Box<dyn FnOnce() + 'a>, String>;
    /// `get map` / `get acl`: how this user answers for `value`, one line.
    fn get(&self, value: &str, entries: &dyn Fn(usize) -> Entries) -> Option<String>;
    /// Users with the same key answer alike: `get` shows one of them (HAProxy shares one
    /// pattern expression between them: the same match method and flags, and for maps the
    /// same output type).
    fn expr_key(&self) -> String;
}

/// What a map converter needs to build its map from a file's entries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct MapKind {
    pub method: Method,
    pub out: SmpType,
    pub default: Option<String>,
    /// `map_regm`: the key regexes' groups stand for `\1`..`\9` in the values.
    pub backrefs: bool,
}

/// A map converter's map: built from its file's current entries, replaced when they change.
#[derive(Debug)]
pub struct LiveMap {
    file: usize,
    path: String,
    kind: MapKind,
    current: ArcSwap<Map>,
}

impl LiveMap {
    fn build(kind: &MapKind, path: &str, entries: &[PatEntry]) -> Result<Map, RuleError> {
        let pairs: Vec<(usize, &str, &str)> = entries
            .iter()
            .map(|e| (e.line, &*e.key, &*e.value))
            .collect();
        let map = Map::from_pairs(path, &pairs, kind.method, kind.out, kind.default.as_deref())?;
        if kind.backrefs {
            map.with_backrefs()
        } else {
            Ok(map)
        }
    }

    /// The map of a converter over `path` (file `file` of the registry), built from
    /// `entries`.
    pub fn new(
        file: usize,
        path: &str,
        kind: MapKind,
        entries: &[PatEntry],
    ) -> Result<LiveMap, RuleError> {
        let map = Self::build(&kind, path, entries)?;
        Ok(LiveMap {
            file,
            path: path.to_string(),
            kind,
            current: ArcSwap::from_pointee(map),
        })
    }

    /// The value `s` maps to (or the default), written to `ev`'s buffers when it is a string:
    /// the map may be replaced once this returns.
    pub fn lookup<'x>(&self, s: Sample<'_>, ev: &mut Eval) -> Option<Sample<'x>> {
        let map = self.current.load();
        let b = match s {
            Sample::Sint(_) | Sample::Ipv4(_) | Sample::Ipv6(_) | Sample::Bool(_) => None,
            _ => to_bytes(s, ev),
        };
        let v = map.lookup(s, ev)?;
        Some(match v {
            Sample::Sint(i) => Sample::Sint(i),
            Sample::Ipv4(a) => Sample::Ipv4(a),
            Sample::Ipv6(a) => Sample::Ipv6(a),
            Sample::Bool(x) => Sample::Bool(x),
            // A value in the map: copied next to the input.
            Sample::Str(Bytes::Ext(v)) => {
                let input = b.unwrap_or(Bytes::Ext(b""));
                let (_, out, n) = ev.io(input);
                out.extend_from_slice(v);
                Sample::Str(Bytes::Buf(n))
            }
            // A value the lookup wrote (`map_regm`): already in the buffers.
            Sample::Str(Bytes::Buf(n)) => Sample::Str(Bytes::Buf(n)),
            _ => return None,
        })
    }
}

impl FileUser for LiveMap {
    fn rebuild<'a>(
        &'a self,
        entries: &dyn Fn(usize) -> Entries,
    ) -> Result<Box<dyn FnOnce() + 'a>, String> {
        let map =
            Self::build(&self.kind, &self.path, &entries(self.file)).map_err(|e| e.message)?;
        Ok(Box::new(move || self.current.store(Arc::new(map))))
    }

    fn expr_key(&self) -> String {
        format!("map {:?} {:?}", self.kind.method, self.kind.out)
    }

    fn get(&self, value: &str, entries: &dyn Fn(usize) -> Entries) -> Option<String> {
        let map = self.current.load();
        let mut ev = Eval::new();
        let hit = map.keys.lookup(Sample::str(value.as_bytes()), &mut ev);
        let mut out = format!("type={}, case=sensitive", self.kind.method.name());
        let entries = entries(self.file);
        match hit.and_then(|i| entries.get(i as usize)) {
            None => out.push_str(", found=no"),
            Some(e) => {
                let _ = write!(
                    out,
                    ", found=yes, idx={}, key=\"{}\", value=\"{}\", type=\"{}\"",
                    index_kind(self.kind.method, false),
                    e.key,
                    e.value,
                    type_name(self.kind.out)
                );
            }
        }
        Some(out)
    }
}

/// How HAProxy indexes patterns of a match method (`get map|acl`'s `idx=`): exact strings
/// and addresses in trees, except strings compared ignoring case, which stay in a list.
pub fn index_kind(m: Method, icase: bool) -> &'static str {
    match m {
        Method::Str if icase => "list",
        Method::Str | Method::Ip | Method::Bin => "tree",
        _ => "list",
    }
}

/// A pattern file: its entries and what was built from them.
#[derive(Debug)]
struct PatFile {
    /// `#ID` on the stats socket.
    id: u32,
    path: String,
    two_columns: bool,
    /// Read by a map converter (`* map` commands), by an ACL line (`* acl` commands).
    as_map: bool,
    as_acl: bool,
    entries: ArcSwap<Vec<PatEntry>>,
    users: Vec<Arc<dyn FileUser>>,
}

/// The pattern files of a configuration.
#[derive(Debug, Default)]
pub struct PatFiles {
    files: Vec<PatFile>,
}

/// `map` or `acl`: the commands' family, and the words of its messages.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Family {
    Map,
    Acl,
}

impl Family {
    fn word(self) -> &'static str {
        match self {
            Family::Map => "map",
            Family::Acl => "ACL",
        }
    }
}

impl PatFiles {
    /// File `path`, read now if nothing read it before; `two_columns`: key and value per
    /// line (maps, `-M`); `as_map`: for a map converter (else an ACL). Its index and entries.
    pub fn open(
        &mut self,
        path: &str,
        two_columns: bool,
        as_map: bool,
    ) -> Result<(usize, Entries), RuleError> {
        let i = match self.files.iter().position(|f| f.path == path) {
            Some(i) => {
                let f = &self.files[i];
                if f.two_columns != two_columns {
                    let (was, now) = if f.two_columns {
                        ("two", "one")
                    } else {
                        ("one", "two")
                    };
                    return Err(RuleError::new(format!(
                        "pattern file <{path}> is already used as a {was}-column file and cannot be used as a {now}-column file"
                    )));
                }
                i
            }
            None => {
                let entries = read(path, two_columns)?;
                self.files.push(PatFile {
                    id: self.files.len() as u32,
                    path: path.to_string(),
                    two_columns,
                    as_map: false,
                    as_acl: false,
                    entries: ArcSwap::from_pointee(entries),
                    users: Vec::new(),
                });
                self.files.len() - 1
            }
        };
        let f = &mut self.files[i];
        if as_map {
            f.as_map = true;
        } else {
            f.as_acl = true;
        }
        Ok((i, f.entries.load_full()))
    }

    /// Registers `user`, built from `files`: rebuilt when one of them changes.
    pub fn add_user(&mut self, files: &[usize], user: Arc<dyn FileUser>) {
        for &i in files {
            if let Some(f) = self.files.get_mut(i) {
                f.users.push(user.clone());
            }
        }
    }

    /// A file by `#ID` or path, as the commands name it, among the family's files.
    fn find(&self, ident: &str, fam: Family) -> Result<usize, String> {
        let of = |f: &PatFile| match fam {
            Family::Map => f.as_map,
            Family::Acl => f.as_acl,
        };
        let found = match ident.strip_prefix('#') {
            Some(id) => id
                .parse::<u32>()
                .ok()
                .and_then(|id| self.files.iter().position(|f| f.id == id && of(f))),
            None => self.files.iter().position(|f| f.path == ident && of(f)),
        };
        found.ok_or_else(|| {
            format!(
                "Unknown {} identifier. Please use #<id> or <file>.\n",
                fam.word()
            )
        })
    }

    /// Makes `entries` file `i`'s, once every user of the file has rebuilt from them.
    fn replace(&self, i: usize, entries: Vec<PatEntry>) -> Result<(), String> {
        let new = Arc::new(entries);
        let of = |k: usize| {
            if k == i {
                new.clone()
            } else {
                self.files[k].entries.load_full()
            }
        };
        let f = &self.files[i];
        let mut commits = Vec::with_capacity(f.users.len());
        for u in &f.users {
            commits.push(u.rebuild(&of)?);
        }
        for c in commits {
            c();
        }
        f.entries.store(new.clone());
        Ok(())
    }

    /// Runs a `map` or `acl` command of the stats socket (`words[0]` the verb, `words[1]`
    /// `map` or `acl`) and answers with HAProxy's texts; `payload`: the lines after a
    /// command ending with `<<`.
    pub fn command(&self, words: &[&str], payload: Option<&str>) -> String {
        let fam = if words.get(1) == Some(&"acl") {
            Family::Acl
        } else {
            Family::Map
        };
        let w = fam.word();
        let args = &words[2.min(words.len())..];
        let r = match (words.first().copied(), args) {
            (Some("show"), []) => Ok(self.list(fam)),
            (Some("show"), [ident, ..]) => self.find(ident, fam).map(|i| self.show(i)),
            (Some("get"), [ident, value, ..]) => self.find(ident, fam).map(|i| self.get(i, value)),
            (Some("get"), _) => Err(format!("Missing {w} identifier and/or key.\n")),
            (Some("add"), [ident, rest @ ..]) => self
                .find(ident, fam)
                .and_then(|i| self.add(i, fam, rest, payload)),
            (Some("add"), []) if fam == Family::Map => {
                Err("'add map' expects three parameters (map identifier, key and value) or one parameter (map identifier) and a payload.\n".into())
            }
            (Some("add"), []) => {
                Err("'add acl' expects two parameters: ACL identifier and pattern.\n".into())
            }
            (Some("set"), [ident, key, value, ..]) if fam == Family::Map => {
                self.find(ident, fam).and_then(|i| self.set(i, key, value))
            }
            (Some("set"), _) => {
                Err("'set map' expects three parameters: map identifier, key and value.\n".into())
            }
            (Some("del"), [ident, key, ..]) => {
                self.find(ident, fam).and_then(|i| self.del(i, key))
            }
            (Some("del"), _) => Err(format!(
                "This command expects two parameters: {w} identifier and key.\n"
            )),
            (Some("clear"), [ident, ..]) => self
                .find(ident, fam)
                .and_then(|i| self.replace(i, Vec::new()).map(|()| String::new())),
            (Some("clear"), []) => Err(format!("Missing {w} identifier.\n")),
            (Some(v @ ("prepare" | "commit")), _) => Err(format!(
                "'{v} {}' (versions) is not supported by Bascule: change the current version with 'add', 'del' and 'clear'.\n",
                words.get(1).unwrap_or(&"")
            )),
            _ => Err(format!("Unknown {w} command.\n")),
        };
        r.unwrap_or_else(|e| e)
    }

    /// `show map` / `show acl`: the family's files.
    fn list(&self, fam: Family) -> String {
        let mut out = String::from("# id (file) description\n");
        for f in &self.files {
            let used = match fam {
                Family::Map => f.as_map,
                Family::Acl => f.as_acl,
            };
            if !used {
                continue;
            }
            let _ = writeln!(
                out,
                "{} ({}) pattern loaded from file '{}' used by {}. curr_ver=0 next_ver=0 entry_cnt={}",
                f.id,
                f.path,
                f.path,
                if fam == Family::Map { "map" } else { "acl" },
                f.entries.load().len()
            );
        }
        out
    }

    /// `show map FILE` / `show acl FILE`: the entries, in order.
    fn show(&self, i: usize) -> String {
        let f = &self.files[i];
        let mut out = String::new();
        for e in f.entries.load().iter() {
            if f.two_columns {
                let _ = writeln!(out, "{:#x} {} {}", e.id, e.key, e.value);
            } else {
                let _ = writeln!(out, "{:#x} {}", e.id, e.key);
            }
        }
        out
    }

    /// `get map|acl FILE VALUE`: how each distinct user of the file answers for `value`.
    fn get(&self, i: usize, value: &str) -> String {
        let of = |k: usize| self.files[k].entries.load_full();
        let mut lines: Vec<String> = Vec::new();
        let mut keys: Vec<String> = Vec::new();
        for u in &self.files[i].users {
            let key = u.expr_key();
            if keys.contains(&key) {
                continue;
            }
            keys.push(key);
            if let Some(l) = u.get(value, &of) {
                lines.push(l);
            }
        }
        let mut out = String::new();
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
        out
    }

    /// `add map FILE KEY VALUE` / `add acl FILE PATTERN`, or a payload of such lines.
    fn add(
        &self,
        i: usize,
        fam: Family,
        args: &[&str],
        payload: Option<&str>,
    ) -> Result<String, String> {
        let f = &self.files[i];
        let mut entries: Vec<PatEntry> = f.entries.load().as_ref().clone();
        match (args, payload) {
            (_, Some(p)) => {
                for line in p.lines() {
                    let line = line.trim_matches([' ', '\t', '\r']);
                    if line.is_empty() {
                        continue;
                    }
                    if f.two_columns {
                        let (k, v) = split_map_line(line);
                        if v.is_empty() && fam == Family::Map {
                            return Err(format!("Missing value for key '{k}'.\n"));
                        }
                        entries.push(entry(0, k, v));
                    } else {
                        entries.push(entry(0, line, ""));
                    }
                }
            }
            ([key, value, ..], None) if f.two_columns => entries.push(entry(0, key, value)),
            ([pattern], None) if !f.two_columns => entries.push(entry(0, pattern, "")),
            _ if fam == Family::Map => {
                return Err("'add map' expects three parameters (map identifier, key and value) or one parameter (map identifier) and a payload.\n".into())
            }
            _ => return Err("'add acl' expects two parameters: ACL identifier and pattern.\n".into()),
        }
        self.replace(i, entries)
            .map(|()| String::new())
            .map_err(|e| format!("{e}.\n"))
    }

    /// `set map FILE KEY|#ID VALUE`: every entry of that key takes the value.
    fn set(&self, i: usize, key: &str, value: &str) -> Result<String, String> {
        let mut entries: Vec<PatEntry> = self.files[i].entries.load().as_ref().clone();
        let mut found = false;
        for e in &mut entries {
            if names(key, e)? {
                e.value = value.into();
                found = true;
            }
        }
        if !found {
            return Err("entry not found.\n".into());
        }
        self.replace(i, entries)
            .map(|()| String::new())
            .map_err(|e| format!("{e}.\n"))
    }

    /// `del map|acl FILE KEY|#ID`: every entry of that key goes.
    fn del(&self, i: usize, key: &str) -> Result<String, String> {
        let mut entries: Vec<PatEntry> = self.files[i].entries.load().as_ref().clone();
        let before = entries.len();
        let mut bad = None;
        entries.retain(|e| match names(key, e) {
            Ok(hit) => !hit,
            Err(m) => {
                bad = Some(m);
                true
            }
        });
        if let Some(m) = bad {
            return Err(m);
        }
        if entries.len() == before {
            return Err("Key not found.\n".into());
        }
        self.replace(i, entries)
            .map(|()| String::new())
            .map_err(|e| format!("{e}.\n"))
    }
}

/// HAProxy's short name of a sample type (`smp_to_type`), as `get map` prints it.
fn type_name(t: SmpType) -> &'static str {
    match t {
        SmpType::Any => "any",
        SmpType::Bool => "bool",
        SmpType::Sint => "sint",
        SmpType::Addr => "addr",
        SmpType::Ipv4 => "ipv4",
        SmpType::Ipv6 => "ipv6",
        SmpType::Str => "str",
        SmpType::Bin => "bin",
        SmpType::Meth => "meth",
    }
}

/// Whether `e` is the entry `key` names: `#0x...` its identifier, otherwise its key.
fn names(key: &str, e: &PatEntry) -> Result<bool, String> {
    match key.strip_prefix("#0x") {
        Some(hex) => u64::from_str_radix(hex, 16)
            .map(|id| e.id == id)
            .map_err(|_| "Malformed identifier. Please use #<id> or <file>.\n".to_string()),
        None => Ok(*e.key == *key),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn file(text: &str) -> (tempdir::Dir, String) {
        let d = tempdir::Dir::new();
        let p = d.path("m.map");
        std::fs::write(&p, text).unwrap();
        (d, p)
    }

    /// A minimal temporary directory (removed when dropped).
    mod tempdir {
        pub struct Dir(std::path::PathBuf);
        impl Dir {
            pub fn new() -> Dir {
                static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
                let p = std::env::temp_dir().join(format!(
                    "bascule-mapfile-{}-{}",
                    std::process::id(),
                    N.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
                ));
                std::fs::create_dir_all(&p).unwrap();
                Dir(p)
            }
            pub fn path(&self, name: &str) -> String {
                self.0.join(name).to_string_lossy().into_owned()
            }
        }
        impl Drop for Dir {
            fn drop(&mut self) {
                let _ = std::fs::remove_dir_all(&self.0);
            }
        }
    }

    fn kind(method: Method, out: SmpType) -> MapKind {
        MapKind {
            method,
            out,
            default: None,
            backrefs: false,
        }
    }

    fn look(m: &LiveMap, key: &str) -> Option<String> {
        let mut ev = Eval::new();
        let s = m.lookup(Sample::str(key.as_bytes()), &mut ev)?;
        Some(format!("{:?}", ev.value(s)))
    }

    fn map_user(files: &mut PatFiles, p: &str, k: MapKind) -> Arc<LiveMap> {
        let (i, e) = files.open(p, true, true).unwrap();
        let m = Arc::new(LiveMap::new(i, p, k, &e).unwrap());
        files.add_user(&[i], m.clone());
        m
    }

    #[test]
    fn commands_change_what_every_converter_sees() {
        let (_d, p) = file("# comment\na.example 1\nb.example 2\n");
        let mut files = PatFiles::default();
        let str_map = map_user(&mut files, &p, kind(Method::Str, SmpType::Str));
        let int_map = map_user(&mut files, &p, kind(Method::Str, SmpType::Sint));
        assert_eq!(files.files.len(), 1, "one file, read once");
        assert_eq!(look(&str_map, "a.example").as_deref(), Some("Str([49])"));
        assert_eq!(look(&int_map, "b.example").as_deref(), Some("Sint(2)"));

        assert_eq!(
            files.command(&["add", "map", &p, "c.example", "3"], None),
            ""
        );
        assert_eq!(look(&int_map, "c.example").as_deref(), Some("Sint(3)"));
        // A value the integer converter cannot read is refused for both.
        let r = files.command(&["add", "map", &p, "d.example", "x"], None);
        assert!(r.contains("not an integer"), "{r}");
        assert_eq!(look(&str_map, "d.example"), None);

        assert_eq!(
            files.command(&["set", "map", &p, "a.example", "7"], None),
            ""
        );
        assert_eq!(look(&int_map, "a.example").as_deref(), Some("Sint(7)"));
        assert_eq!(files.command(&["del", "map", &p, "b.example"], None), "");
        assert_eq!(look(&str_map, "b.example"), None);
        assert_eq!(
            files.command(&["del", "map", &p, "b.example"], None),
            "Key not found.\n"
        );

        let shown = files.command(&["show", "map", &p], None);
        let lines: Vec<&str> = shown.lines().collect();
        assert_eq!(lines.len(), 2, "{shown}");
        assert!(lines[0].starts_with("0x") && lines[0].ends_with(" a.example 7"));
        assert!(lines[1].ends_with(" c.example 3"));
        // By the identifier `show map` printed.
        let id = lines[1].split(' ').next().unwrap();
        assert_eq!(
            files.command(&["del", "map", "#0", &format!("#{id}")], None),
            ""
        );

        assert_eq!(
            files.command(
                &["add", "map", &p, "<<"][..3],
                Some("e.example 5\nf.example 6\n")
            ),
            ""
        );
        assert_eq!(look(&int_map, "f.example").as_deref(), Some("Sint(6)"));
        assert_eq!(
            files.command(&["get", "map", &p, "f.example"], None),
            "type=str, case=sensitive, found=yes, idx=tree, key=\"f.example\", value=\"6\", type=\"str\"\n\
             type=str, case=sensitive, found=yes, idx=tree, key=\"f.example\", value=\"6\", type=\"sint\"\n"
        );
        assert_eq!(files.command(&["clear", "map", &p], None), "");
        assert_eq!(files.command(&["show", "map", &p], None), "");
        assert_eq!(
            files.command(&["show", "map", "/nonexistent"], None),
            "Unknown map identifier. Please use #<id> or <file>.\n"
        );
        assert!(files
            .command(&["show", "map"], None)
            .starts_with("# id (file) description\n0 ("));
        // A map file is not an ACL file.
        assert_eq!(
            files.command(&["show", "acl", &p], None),
            "Unknown ACL identifier. Please use #<id> or <file>.\n"
        );
        // Nor a one-column file.
        assert!(files.open(&p, false, false).is_err());
    }
}

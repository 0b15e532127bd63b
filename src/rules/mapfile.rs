//! Map files as the runtime API changes them: HAProxy's pattern references.
//!
//! Why: operators keep block lists, redirect tables and backend routing in map files and edit
//! them live with `add map`, `set map`, `del map` and `clear map` on the stats socket; a map
//! loaded once at start would make those commands impossible. Each file is read once, however
//! many converters use it ([`MapFiles::open`]): its entries, in file order, are the reference;
//! every converter over it holds a [`LiveMap`], the map built from the entries for its match
//! method and output type. A change rebuilds each converter's map from the new entries and
//! swaps it in (`arc_swap`): a worker's lookup reads whichever map is current, without a lock.
//! A change that one converter cannot take (`add map` of a value that is not an integer to a
//! map read as integers) is refused whole, as HAProxy refuses it.
//!
//! The commands run one at a time on the process thread (the stats sockets are served there),
//! so a change reads and replaces the entries without racing another change.
//!
//! Differences from HAProxy 2.6: map ids count map files only (HAProxy numbers every pattern
//! reference, ACL files and inline ACL patterns included); an entry's `0x...` identifier is a
//! serial number, not an address; `prepare map`/`commit map` (versions) are not supported.

use std::fmt::Write as _;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::pattern::{read_lines, split_map_line, Map, Method};
use super::sample::{to_bytes, Bytes, Eval, Sample, SmpType};
use super::RuleError;

/// One line of a map file: its key and value, and the identifier `show map` prints for it.
#[derive(Debug, Clone)]
pub struct MapEntry {
    pub id: u64,
    /// Its line in the file, for messages (0: added by the runtime API).
    pub line: usize,
    pub key: Box<str>,
    pub value: Box<str>,
}

/// The entry identifiers of the process (`0x...` in `show map`, `#0x...` in `del map`).
static NEXT_ENTRY: AtomicU64 = AtomicU64::new(0x1000);

fn entry(line: usize, key: &str, value: &str) -> MapEntry {
    MapEntry {
        id: NEXT_ENTRY.fetch_add(0x10, Ordering::Relaxed),
        line,
        key: key.into(),
        value: value.into(),
    }
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
    kind: MapKind,
    current: ArcSwap<Map>,
}

impl LiveMap {
    fn build(kind: &MapKind, path: &str, entries: &[MapEntry]) -> Result<Map, RuleError> {
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

/// A map file: its entries and the converters that use it.
#[derive(Debug)]
pub struct MapFile {
    /// `#ID` on the stats socket.
    pub id: u32,
    pub path: String,
    entries: ArcSwap<Vec<MapEntry>>,
    users: Vec<Arc<LiveMap>>,
}

impl MapFile {
    /// Builds every user's map from `entries` and, when all succeed, makes them current.
    fn replace(&self, entries: Vec<MapEntry>) -> Result<(), String> {
        let mut maps = Vec::with_capacity(self.users.len());
        for u in &self.users {
            maps.push(LiveMap::build(&u.kind, &self.path, &entries).map_err(|e| e.message)?);
        }
        for (u, m) in self.users.iter().zip(maps) {
            u.current.store(Arc::new(m));
        }
        self.entries.store(Arc::new(entries));
        Ok(())
    }
}

/// The map files of a configuration.
#[derive(Debug, Default)]
pub struct MapFiles {
    files: Vec<MapFile>,
}

impl MapFiles {
    /// The map of a converter over `path` (read now if no converter read it before).
    pub fn open(&mut self, path: &str, kind: MapKind) -> Result<Arc<LiveMap>, RuleError> {
        let i = match self.files.iter().position(|f| f.path == path) {
            Some(i) => i,
            None => {
                let entries = read_lines(path)?
                    .iter()
                    .map(|(n, l)| {
                        let (k, v) = split_map_line(l);
                        entry(*n, k, v)
                    })
                    .collect();
                self.files.push(MapFile {
                    id: self.files.len() as u32,
                    path: path.to_string(),
                    entries: ArcSwap::from_pointee(entries),
                    users: Vec::new(),
                });
                self.files.len() - 1
            }
        };
        let file = &mut self.files[i];
        let map = LiveMap::build(&kind, path, &file.entries.load())?;
        let live = Arc::new(LiveMap {
            kind,
            current: ArcSwap::from_pointee(map),
        });
        file.users.push(live.clone());
        Ok(live)
    }

    /// A map by `#ID` or path, as the commands name it.
    fn find(&self, ident: &str) -> Result<&MapFile, String> {
        let found = match ident.strip_prefix('#') {
            Some(id) => id
                .parse::<u32>()
                .ok()
                .and_then(|id| self.files.iter().find(|f| f.id == id)),
            None => self.files.iter().find(|f| f.path == ident),
        };
        found.ok_or_else(|| "Unknown map identifier. Please use #<id> or <file>.\n".to_string())
    }

    /// Runs a map command of the stats socket (`words[0]` the verb, `words[1]` `map`) and
    /// answers with HAProxy's texts; `payload`: the lines after a command ending with `<<`.
    pub fn command(&self, words: &[&str], payload: Option<&str>) -> String {
        let r = match (words.first().copied(), &words[2.min(words.len())..]) {
            (Some("show"), []) => Ok(self.list()),
            (Some("show"), [ident, ..]) => self.find(ident).map(show),
            (Some("get"), [ident, value, ..]) => self.find(ident).map(|f| get(f, value)),
            (Some("get"), _) => Err("Missing map identifier and/or key.\n".into()),
            (Some("add"), [ident, rest @ ..]) => self.find(ident).and_then(|f| add(f, rest, payload)),
            (Some("add"), []) => {
                Err("'add map' expects three parameters (map identifier, key and value) or one parameter (map identifier) and a payload.\n".into())
            }
            (Some("set"), [ident, key, value, ..]) => {
                self.find(ident).and_then(|f| set(f, key, value))
            }
            (Some("set"), _) => {
                Err("'set map' expects three parameters: map identifier, key and value.\n".into())
            }
            (Some("del"), [ident, key, ..]) => self.find(ident).and_then(|f| del(f, key)),
            (Some("del"), _) => {
                Err("This command expects two parameters: map identifier and key.\n".into())
            }
            (Some("clear"), [ident, ..]) => self
                .find(ident)
                .and_then(|f| f.replace(Vec::new()).map(|()| String::new())),
            (Some("clear"), []) => Err("Missing map identifier.\n".into()),
            (Some(v @ ("prepare" | "commit")), _) => Err(format!(
                "'{v} map' (map versions) is not supported by Bascule: change the current version with 'add map', 'set map', 'del map' and 'clear map'.\n"
            )),
            _ => Err("Unknown map command.\n".into()),
        };
        r.unwrap_or_else(|e| e)
    }

    /// `show map`: every map file.
    fn list(&self) -> String {
        let mut out = String::from("# id (file) description\n");
        for f in &self.files {
            let _ = writeln!(
                out,
                "{} ({}) pattern loaded from file '{}' used by map. curr_ver=0 next_ver=0 entry_cnt={}",
                f.id,
                f.path,
                f.path,
                f.entries.load().len()
            );
        }
        out
    }
}

/// `show map FILE`: the entries, in order.
fn show(f: &MapFile) -> String {
    let mut out = String::new();
    for e in f.entries.load().iter() {
        let _ = writeln!(out, "{:#x} {} {}", e.id, e.key, e.value);
    }
    out
}

/// `get map FILE VALUE`: what each distinct converter of the file answers for `value`.
fn get(f: &MapFile, value: &str) -> String {
    let mut out = String::new();
    let mut seen: Vec<&MapKind> = Vec::new();
    let entries = f.entries.load();
    for u in &f.users {
        if seen
            .iter()
            .any(|k| k.method == u.kind.method && k.out == u.kind.out)
        {
            continue;
        }
        seen.push(&u.kind);
        let map = u.current.load();
        let mut ev = Eval::new();
        let hit = map.keys.lookup(Sample::str(value.as_bytes()), &mut ev);
        let _ = write!(out, "type={}, case=sensitive", u.kind.method.name());
        match hit.and_then(|i| entries.get(i as usize)) {
            None => out.push_str(", found=no"),
            Some(e) => {
                let idx = match u.kind.method {
                    Method::Str | Method::Ip | Method::Bin => "tree",
                    _ => "list",
                };
                let _ = write!(
                    out,
                    ", found=yes, idx={idx}, key=\"{}\", value=\"{}\", type=\"{}\"",
                    e.key,
                    e.value,
                    type_name(u.kind.out)
                );
            }
        }
        out.push('\n');
    }
    out
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

/// `add map FILE KEY VALUE`, or one `KEY VALUE` per line of the payload.
fn add(f: &MapFile, args: &[&str], payload: Option<&str>) -> Result<String, String> {
    let mut entries: Vec<MapEntry> = f.entries.load().as_ref().clone();
    match (args, payload) {
        (_, Some(p)) => {
            for line in p.lines() {
                let line = line.trim_matches([' ', '\t', '\r']);
                if line.is_empty() {
                    continue;
                }
                let (k, v) = split_map_line(line);
                if v.is_empty() {
                    return Err(format!("Missing value for key '{k}'.\n"));
                }
                entries.push(entry(0, k, v));
            }
        }
        ([key, value, ..], None) => entries.push(entry(0, key, value)),
        _ => {
            return Err("'add map' expects three parameters (map identifier, key and value) or one parameter (map identifier) and a payload.\n".into())
        }
    }
    f.replace(entries)
        .map(|()| String::new())
        .map_err(|e| format!("{e}.\n"))
}

/// Whether `e` is the entry `key` names: `#0x...` its identifier, otherwise its key.
fn names(key: &str, e: &MapEntry) -> Result<bool, String> {
    match key.strip_prefix("#0x") {
        Some(hex) => u64::from_str_radix(hex, 16)
            .map(|id| e.id == id)
            .map_err(|_| "Malformed identifier. Please use #<id> or <file>.\n".to_string()),
        None => Ok(*e.key == *key),
    }
}

/// `set map FILE KEY|#ID VALUE`: every entry of that key takes the value.
fn set(f: &MapFile, key: &str, value: &str) -> Result<String, String> {
    let mut entries: Vec<MapEntry> = f.entries.load().as_ref().clone();
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
    f.replace(entries)
        .map(|()| String::new())
        .map_err(|e| format!("{e}.\n"))
}

/// `del map FILE KEY|#ID`: every entry of that key goes.
fn del(f: &MapFile, key: &str) -> Result<String, String> {
    let mut entries: Vec<MapEntry> = f.entries.load().as_ref().clone();
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
    f.replace(entries)
        .map(|()| String::new())
        .map_err(|e| format!("{e}.\n"))
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

    #[test]
    fn commands_change_what_every_converter_sees() {
        let (_d, p) = file("# comment\na.example 1\nb.example 2\n");
        let mut files = MapFiles::default();
        let str_map = files.open(&p, kind(Method::Str, SmpType::Str)).unwrap();
        let int_map = files.open(&p, kind(Method::Str, SmpType::Sint)).unwrap();
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
    }
}

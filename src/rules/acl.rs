//! ACLs: `acl NAME FETCH[,CONV...] [FLAGS] [OPERATOR] VALUE...` compiled into matchers, the
//! per-proxy table of declared ACLs, HAProxy's predefined ACLs and its legacy derived keywords.
//!
//! Why a table with frozen slots: HAProxy resolves an ACL name when a condition is parsed (an
//! ACL used before its first declaration is "no such ACL"), yet every line declaring the name,
//! even one after the condition, adds to what that condition tests (checked with haproxy
//! 2.6: `acl a path /x`, `http-request deny if a`, `acl a path /y` denies `/y`). So a
//! condition holds a shared slot, and [`Acls::finish`], called at the end of the proxy
//! section, freezes each slot's lines; evaluation then reads them with one atomic load.
//!
//! Legacy spellings: the derived keywords (`path_beg`, `hdr_dom(host)`, `url_reg`...) are
//! rewritten to their fetch and match method. The 1.x integer operators `-lt -le -gt -ge
//! -eq` (haproxy 2.6 rejects them: "'-lt' is not a valid ACL option") are accepted with a
//! warning showing the modern form.

use std::sync::{Arc, OnceLock};

use arc_swap::ArcSwap;

use super::expr::{split_call, split_chain, Expr};
use super::fetch::{self, Fetch, FETCHES};
use super::patfile::{Entries, FileUser};
use super::pattern::{IntOp, Method, Patterns};
use super::sample::{can_cast, Eval, SmpType};
use super::source::Source;
use super::{did_you_mean, err, Names, Phases, RuleError, Warning};

/// HAProxy's three-valued match result: `Miss` when the data needed is not there yet and
/// may arrive (content inspection before `WAIT_END`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Match {
    Yes,
    No,
    Miss,
}

impl Match {
    /// Negation (`!`): a miss stays a miss.
    pub fn negate(self) -> Match {
        match self {
            Match::Yes => Match::No,
            Match::No => Match::Yes,
            Match::Miss => Match::Miss,
        }
    }
}

/// Group names of an `http_auth_group` ACL.
type Groups = Box<[Box<[u8]>]>;

/// One ACL line: an expression and its patterns.
#[derive(Debug)]
pub struct AclTerm {
    pub expr: Expr,
    pats: Pats,
    /// `http_auth_group(userlist)`: patterns are group names checked through the source.
    groups: Option<(usize, Groups)>,
}

/// An ACL line's patterns: fixed at load, or (with `-f` files) rebuilt when the runtime API
/// changes a file (`add acl`...).
#[derive(Debug)]
enum Pats {
    Fixed(Patterns),
    Live(Arc<LiveAcl>),
}

/// The patterns of an ACL line that reads pattern files, and how to build them again.
#[derive(Debug)]
pub struct LiveAcl {
    spec: AclSpec,
    current: ArcSwap<Patterns>,
}

/// What an ACL line's patterns are built from: its files' entries, then its own patterns.
#[derive(Debug)]
struct AclSpec {
    method: Method,
    icase: bool,
    /// The integer operator in force when the files are read (`-lt`, `gt`... before them).
    file_op: Option<IntOp>,
    /// `req.ssl_ver` patterns written as dotted versions.
    dotted: bool,
    /// The files (index in the configuration's pattern files, and path), in order.
    files: Vec<(usize, String)>,
    /// The patterns written on the line, each with the integer operator in force.
    inline: Vec<(String, Option<IntOp>)>,
}

impl AclSpec {
    /// The patterns, from the files' entries (`entries(i)`: file `i`'s) and the line's own.
    fn build(&self, entries: &dyn Fn(usize) -> Entries) -> Result<Patterns, RuleError> {
        let mut pats = Patterns::new(self.method, self.icase);
        let mut n = 0u32;
        for (i, path) in &self.files {
            for e in entries(*i).iter() {
                let at = |er: RuleError| match e.line {
                    0 => RuleError::new(format!("{path}: {}", er.message)),
                    l => RuleError::new(format!("{path}:{l}: {}", er.message)),
                };
                let pat = if self.dotted {
                    dotted_version(&e.key, self.file_op).map_err(at)?
                } else {
                    e.key.to_string()
                };
                pats.add(&pat, self.file_op, n).map_err(at)?;
                n += 1;
            }
        }
        for (v, op) in &self.inline {
            if self.dotted {
                pats.add(&dotted_version(v, *op)?, *op, n)?;
            } else {
                pats.add(v, *op, n)?;
            }
            n += 1;
        }
        pats.finish()?;
        Ok(pats)
    }

    /// Each pattern's text, in the order of [`AclSpec::build`]'s indices.
    fn texts(&self, entries: &dyn Fn(usize) -> Entries) -> Vec<String> {
        let mut out = Vec::new();
        for (i, _) in &self.files {
            out.extend(entries(*i).iter().map(|e| e.key.to_string()));
        }
        out.extend(self.inline.iter().map(|(v, _)| v.clone()));
        out
    }
}

impl FileUser for LiveAcl {
    fn rebuild<'a>(
        &'a self,
        entries: &dyn Fn(usize) -> Entries,
    ) -> Result<Box<dyn FnOnce() + 'a>, String> {
        let pats = self.spec.build(entries).map_err(|e| e.message)?;
        Ok(Box::new(move || self.current.store(Arc::new(pats))))
    }

    fn expr_key(&self) -> String {
        format!("acl {:?} {}", self.spec.method, self.spec.icase)
    }

    fn get(&self, value: &str, entries: &dyn Fn(usize) -> Entries) -> Option<String> {
        let pats = self.current.load();
        let mut ev = Eval::new();
        let hit = pats.lookup(super::sample::Sample::str(value.as_bytes()), &mut ev);
        let case = if self.spec.icase {
            "insensitive"
        } else {
            "sensitive"
        };
        let mut out = format!("type={}, case={case}", self.spec.method.name());
        match hit {
            None => out.push_str(", match=no"),
            Some(i) => {
                let texts = self.spec.texts(entries);
                let text = texts.get(i as usize).map_or("unknown", String::as_str);
                out.push_str(&format!(
                    ", match=yes, idx={}, pattern=\"{text}\"",
                    super::patfile::index_kind(self.spec.method, self.spec.icase)
                ));
            }
        }
        Some(out)
    }
}

impl AclTerm {
    /// Tests every value of the expression against the patterns.
    pub fn eval<S: Source + ?Sized>(&self, src: &S, ev: &mut Eval) -> Match {
        match &self.pats {
            Pats::Fixed(p) => self.eval_with(p, src, ev),
            Pats::Live(l) => self.eval_live(l, src, ev),
        }
    }

    /// [`AclTerm::eval`] over patterns the runtime API may replace: the current ones.
    #[inline(never)]
    fn eval_live<S: Source + ?Sized>(&self, l: &LiveAcl, src: &S, ev: &mut Eval) -> Match {
        let pats = l.current.load();
        self.eval_with(&pats, src, ev)
    }

    #[inline]
    fn eval_with<S: Source + ?Sized>(&self, pats: &Patterns, src: &S, ev: &mut Eval) -> Match {
        if self.groups.is_some() {
            return self.eval_groups(src, ev);
        }
        let mut converted = false;
        ev.need_more = false;
        let (hit, any) = self.expr.eval_each(src, ev, |s, ev| {
            converted = true;
            pats.matches(s, ev)
        });
        if hit {
            Match::Yes
        } else if src.wait_end() {
            // Nothing more will come (HTTP rules run on a complete head): a final no.
            Match::No
        } else {
            self.undecided(any, converted, src, ev)
        }
    }

    /// A line that did not match while more data may come (content inspection): `Miss` when
    /// what it read may still change. A protocol converter over the buffered bytes
    /// (`req.payload(0,0),fix_is_valid`) gives no value while the message is incomplete (a
    /// value fetched but none `converted`, and the converter says `need_more`: haproxy's
    /// SMP_F_MAY_CHANGE); otherwise the fetch knows.
    #[inline(never)]
    fn undecided<S: Source + ?Sized>(
        &self,
        any: bool,
        converted: bool,
        src: &S,
        ev: &Eval,
    ) -> Match {
        if (any && !converted && ev.need_more) || self.expr.fetch.may_change(src, any) {
            Match::Miss
        } else {
            Match::No
        }
    }

    /// [`AclTerm::eval_with`] for `http_auth_group(userlist)`: each value is a user name,
    /// checked for the line's groups through the source.
    #[inline(never)]
    fn eval_groups<S: Source + ?Sized>(&self, src: &S, ev: &mut Eval) -> Match {
        let Some((ul, groups)) = &self.groups else {
            return Match::No;
        };
        let (hit, any) = self.expr.eval_each(src, ev, |s, ev| {
            let user = match s {
                super::sample::Sample::Str(b) => ev.get(b),
                _ => return false,
            };
            groups.iter().any(|g| src.user_in_group(*ul, user, g))
        });
        if hit {
            Match::Yes
        } else if src.wait_end() {
            Match::No
        } else {
            // No converter state to ask: `converted` as if every value went through.
            self.undecided(any, true, src, ev)
        }
    }
}

/// An ACL: its lines, OR'ed in declaration order.
#[derive(Debug, Default)]
pub struct Acl {
    pub terms: Box<[AclTerm]>,
}

impl Acl {
    pub fn eval<S: Source + ?Sized>(&self, src: &S, ev: &mut Eval) -> Match {
        let mut r = Match::No;
        for t in self.terms.iter() {
            match t.eval(src, ev) {
                Match::Yes => return Match::Yes,
                Match::Miss => r = Match::Miss,
                Match::No => {}
            }
        }
        r
    }

    /// Where every line can be evaluated (intersection of their fetches' phases); an ACL
    /// whose phases miss the rule's phase "will never match".
    pub fn phases(&self) -> Phases {
        self.terms
            .iter()
            .fold(Phases::ALL, |p, t| p.and(t.expr.phases()))
    }
}

/// A condition's reference to an ACL: filled once its proxy section is complete.
pub type AclSlot = Arc<OnceLock<Acl>>;

/// The ACLs declared so far in one proxy.
#[derive(Debug, Default)]
pub struct Acls {
    entries: Vec<Entry>,
    finished: bool,
}

#[derive(Debug)]
struct Entry {
    name: String,
    terms: Vec<AclTerm>,
    slot: AclSlot,
}

impl Acls {
    pub fn new() -> Self {
        Self::default()
    }

    /// The slot of a declared ACL.
    pub fn get(&self, name: &str) -> Option<AclSlot> {
        self.entries
            .iter()
            .find(|e| e.name == name)
            .map(|e| e.slot.clone())
    }

    /// Declared names, for "did you mean".
    pub fn names(&self) -> impl Iterator<Item = &str> {
        self.entries.iter().map(|e| e.name.as_str())
    }

    /// Freezes every ACL with all its lines; conditions compiled earlier now see them. Call
    /// once at the end of the proxy section.
    pub fn finish(&mut self) {
        for e in &mut self.entries {
            let terms = std::mem::take(&mut e.terms);
            let _ = e.slot.set(Acl {
                terms: terms.into(),
            });
        }
        self.finished = true;
    }

    fn push(&mut self, name: &str, term: AclTerm) -> Result<(), RuleError> {
        if self.finished {
            return err(format!(
                "ACL '{name}' declared after its proxy section was finished"
            ));
        }
        match self.entries.iter_mut().find(|e| e.name == name) {
            Some(e) => e.terms.push(term),
            None => self.entries.push(Entry {
                name: name.to_string(),
                terms: vec![term],
                slot: Arc::new(OnceLock::new()),
            }),
        }
        Ok(())
    }
}

/// Legacy derived keywords: prefix to the fetch it derives from.
const DERIVED_BASES: &[(&str, &str)] = &[
    ("path", "path"),
    ("url", "url"),
    ("hdr", "req.hdr"),
    ("shdr", "res.hdr"),
    ("cook", "req.cook"),
    ("scook", "res.cook"),
    ("urlp", "url_param"),
    ("base", "base"),
    ("req.hdr", "req.hdr"),
    ("res.hdr", "res.hdr"),
    ("req.cook", "req.cook"),
    ("res.cook", "res.cook"),
    ("req.ssl_sni", "req.ssl_sni"),
    ("ssl_fc_sni", "ssl_fc_sni"),
    ("capture.req.hdr", "capture.req.hdr"),
];

const DERIVED_SUFFIXES: &[(&str, Method)] = &[
    ("beg", Method::Beg),
    ("dir", Method::Dir),
    ("dom", Method::Dom),
    ("end", Method::End),
    ("len", Method::Len),
    ("reg", Method::Reg),
    ("sub", Method::Sub),
    ("ip", Method::Ip),
    ("val", Method::Int),
    ("found", Method::Found),
];

/// Resolves a fetch name that is a legacy derived keyword (`path_beg`, `hdr_dom`) into its
/// fetch definition and match method.
pub fn derived(name: &str) -> Option<(&'static fetch::FetchDef, Method)> {
    let (base, suffix) = name.rsplit_once('_')?;
    let method = DERIVED_SUFFIXES.iter().find(|s| s.0 == suffix)?.1;
    let target = DERIVED_BASES.iter().find(|b| b.0 == base)?.1;
    let def = match (target, method) {
        // `hdr_ip` and `hdr_val` parse the value; they exist as fetches.
        ("req.hdr", Method::Ip) => fetch::lookup("req.hdr_ip")?,
        ("req.hdr", Method::Int) => fetch::lookup("req.hdr_val")?,
        ("req.cook", Method::Int) => fetch::lookup("req.cook_val")?,
        _ => fetch::lookup(target)?,
    };
    Some((def, method))
}

fn all_keyword_names() -> impl Iterator<Item = String> {
    FETCHES.iter().map(|d| d.name.to_string()).chain(
        ["path", "url", "hdr", "cook", "urlp", "base"]
            .iter()
            .flat_map(|b| {
                ["beg", "end", "sub", "reg", "dom", "dir", "len"].map(|s| format!("{b}_{s}"))
            }),
    )
}

/// The type a match method needs from the sample.
fn method_input(m: Method) -> SmpType {
    match m {
        Method::Found => SmpType::Any,
        Method::Bool => SmpType::Bool,
        Method::Int => SmpType::Sint,
        Method::Ip => SmpType::Addr,
        Method::Bin => SmpType::Bin,
        _ => SmpType::Str,
    }
}

/// Compiles an ACL body (the words after `acl NAME`, or inside `{ }`) into one term; warnings
/// are appended to `warnings`.
pub fn compile_term(
    words: &[String],
    names: &dyn Names,
    warnings: &mut Vec<Warning>,
) -> Result<AclTerm, RuleError> {
    let Some(first) = words.first() else {
        return err("missing fetch method in ACL expression");
    };
    let chain = split_chain(first);
    let (fname, fargs) = split_call(chain[0])?;
    let (fetch, mut method) = match fetch::lookup(fname) {
        Some(def) => (Fetch::with_def(def, &fargs, names)?, None),
        None => match derived(fname) {
            Some((def, m)) => (Fetch::with_def(def, &fargs, names)?, Some(m)),
            None => {
                let all: Vec<String> = all_keyword_names().collect();
                return err(format!(
                    "unknown fetch method '{fname}' in ACL expression '{first}'{}",
                    did_you_mean(fname, all.iter().map(|s| s.as_str()))
                ));
            }
        },
    };
    let kw = fetch.def.name;
    let userlist = (fetch.def.id == fetch::F::HttpAuthGroup)
        .then(|| fetch.userlist())
        .flatten();
    let expr = Expr::with_fetch(fetch, &chain[1..], names)
        .map_err(|e| RuleError::new(format!("ACL keyword '{kw}' : {}", e.message)))?;

    let mut icase = false;
    let mut files: Vec<(String, bool)> = Vec::new();
    let mut op: Option<IntOp> = None;
    let mut i = 1;
    while i < words.len() {
        let w = words[i].as_str();
        if !w.starts_with('-') || w == "-" {
            break;
        }
        let arg = |i: usize, what: &str| -> Result<&String, RuleError> {
            words
                .get(i + 1)
                .ok_or_else(|| RuleError::new(format!("'{w}' expects {what}")))
        };
        match w {
            "--" => {
                i += 1;
                break;
            }
            "-i" => icase = true,
            "-n" => {}
            // `-u ID`: the ACL's unique id for the runtime API (accepted, unused).
            "-u" => {
                let id = arg(i, "an integer")?;
                if id.parse::<i64>().is_err() {
                    return err("the argument of -u must be an integer.");
                }
                i += 1;
            }
            "-m" => {
                let m = words.get(i + 1).map_or("", |s| s.as_str());
                method = Some(Method::parse(m).ok_or_else(|| {
                    RuleError::new(format!(
                        "unknown matching method '{m}' when parsing ACL expression{} (expected one of {})",
                        did_you_mean(m, Method::NAMES),
                        Method::NAMES.join(", ")
                    ))
                })?);
                i += 1;
            }
            "-f" => {
                files.push((arg(i, "a file name")?.clone(), false));
                i += 1;
            }
            "-M" => {
                for f in &mut files {
                    f.1 = true;
                }
            }
            "-lt" | "-le" | "-gt" | "-ge" | "-eq" => {
                let m = method.unwrap_or_else(|| Method::default_for(expr.out_type()));
                if !m.is_int() {
                    return err(format!(
                        "'{w}' is not a valid ACL option. Please use '--' before any pattern beginning with a '-'."
                    ));
                }
                op = IntOp::parse(&w[1..]);
                let rest: Vec<&str> = words[i + 1..].iter().map(|s| s.as_str()).collect();
                warnings.push(Warning {
                    message: format!(
                        "'{w}' is a HAProxy 1.x operator that haproxy 2.6 rejects; write '{} {} {}'",
                        first,
                        &w[1..],
                        rest.join(" ")
                    ),
                });
                i += 1;
                break;
            }
            _ => {
                return err(format!(
                    "'{w}' is not a valid ACL option. Please use '--' before any pattern beginning with a '-'."
                ))
            }
        }
        i += 1;
    }
    // `-M` may come before `-f` too.
    if words[1..i].iter().any(|w| w == "-M") {
        for f in &mut files {
            f.1 = true;
        }
    }
    // A method sample is compared exactly (haproxy 2.6: `method -i get` does not match GET).
    if expr.out_type() == SmpType::Meth {
        icase = false;
    }
    // `req.ssl_ver 3.1` (3 × 65536 + 1): HAProxy's ACL keyword parses dotted versions, unless
    // a converter or `-m` says otherwise.
    let dotted = method.is_none() && chain.len() == 1 && kw.ends_with("ssl_ver");
    let method = method.unwrap_or_else(|| {
        if userlist.is_some() {
            Method::Str
        } else {
            Method::default_for(expr.out_type())
        }
    });
    let need = method_input(method);
    if expr.out_type() != SmpType::Any && !can_cast(expr.out_type(), need) {
        return err(format!(
            "matching method '{}' cannot be used with fetch keyword '{kw}' (its value is of type {})",
            Method::NAMES
                .iter()
                .find(|n| Method::parse(n) == Some(method))
                .unwrap_or(&"?"),
            expr.out_type().name()
        ));
    }
    if op.is_none() && method.is_int() {
        if let Some(o) = words.get(i).and_then(|w| IntOp::parse(w)) {
            op = Some(o);
            i += 1;
        }
    }
    let mut spec = AclSpec {
        method,
        icase,
        file_op: op,
        dotted,
        files: Vec::new(),
        inline: Vec::new(),
    };
    // The files' entries as read now, and each file's index among the configuration's.
    let mut read: Vec<Entries> = Vec::new();
    let mut registered: Vec<usize> = Vec::new();
    let mut group_names: Vec<Box<[u8]>> = Vec::new();
    for (path, is_map) in &files {
        let (idx, entries) = names.pat_file(path, *is_map, false)?;
        if userlist.is_some() {
            group_names.extend(entries.iter().map(|e| e.key.as_bytes().into()));
            continue;
        }
        spec.files.push((read.len(), path.clone()));
        read.push(entries);
        registered.push(idx);
    }
    for v in &words[i..] {
        if userlist.is_some() {
            group_names.push(v.as_bytes().into());
            continue;
        }
        if method.is_int() && op.is_none() {
            if let Some(o) = IntOp::parse(v) {
                op = Some(o);
                continue;
            }
        }
        spec.inline.push((v.clone(), op));
    }
    // Built from the entries read now (files numbered in `read`), then renumbered as the
    // configuration's pattern files number them, for the rebuilds.
    let pats = spec.build(&|k| read[k].clone())?;
    let n = spec
        .files
        .iter()
        .map(|(k, _)| read[*k].len())
        .sum::<usize>()
        + spec.inline.len();
    let dashdash = words[1..i].iter().any(|w| w == "--");
    if n == 0
        && files.is_empty()
        && userlist.is_none()
        && !dashdash
        && !matches!(method, Method::Found | Method::Bool)
    {
        warnings.push(Warning {
            message: format!(
                "acl keyword '{kw}': no pattern to match against were provided, so this ACL will never match; add '--' if this is intended, use '-m found' to match on existence, or '-m bool' to test an integer as a boolean"
            ),
        });
    }
    let pats = if spec.files.is_empty() {
        Pats::Fixed(pats)
    } else {
        for (k, f) in spec.files.iter_mut().enumerate() {
            f.0 = registered[k];
        }
        let live = Arc::new(LiveAcl {
            spec,
            current: ArcSwap::from_pointee(pats),
        });
        names.pat_user(&registered, live.clone());
        Pats::Live(live)
    };
    Ok(AclTerm {
        expr,
        pats,
        groups: userlist.map(|u| (u, group_names.into())),
    })
}

/// A `req.ssl_ver` pattern, `MAJOR[.MINOR]` or a range of them (`3:3.1`, `3.1-`, `:3`), as
/// the integer pattern it stands for (major × 65536 + minor), with HAProxy's messages.
fn dotted_version(pat: &str, op: Option<IntOp>) -> Result<String, RuleError> {
    let one = |t: &str| -> Option<i64> {
        let (major, minor) = t.split_once('.').unwrap_or((t, "0"));
        let num = |d: &str| {
            (!d.is_empty() && d.bytes().all(|c| c.is_ascii_digit()))
                .then(|| d.parse::<i64>().ok())
                .flatten()
                .filter(|&v| v < 65536)
        };
        Some(num(major)? << 16 | num(minor)?)
    };
    let Some(sep) = pat.find([':', '-']) else {
        let what = if op.is_some() {
            "is neither a number nor a supported operator"
        } else {
            "is not a dotted number"
        };
        return match one(pat) {
            Some(v) => Ok(v.to_string()),
            None => err(format!("'{pat}' {what}")),
        };
    };
    let bad = || RuleError::new(format!("'{pat}' is not a valid dotted number range"));
    let (lo, hi) = (&pat[..sep], &pat[sep + 1..]);
    let side = |t: &str| -> Result<String, RuleError> {
        if t.is_empty() {
            return Ok(String::new());
        }
        one(t).map(|v| v.to_string()).ok_or_else(bad)
    };
    let (lo, hi) = (side(lo)?, side(hi)?);
    if lo.is_empty() && hi.is_empty() {
        return Err(bad());
    }
    if let (Ok(a), Ok(b)) = (lo.parse::<i64>(), hi.parse::<i64>()) {
        if a > b {
            return Err(bad());
        }
    }
    Ok(format!("{lo}:{hi}"))
}

/// Compiles one `acl NAME ...` line (`words` are the words after the name) into `acls`.
/// Returns the warnings (legacy spellings) for the config layer to print with file:line.
pub fn compile_acl(
    name: &str,
    words: &[String],
    names: &dyn Names,
    acls: &mut Acls,
) -> Result<Vec<Warning>, RuleError> {
    if let Some(c) = name
        .chars()
        .find(|c| !(c.is_ascii_alphanumeric() || "-_.:".contains(*c)))
    {
        return err(format!(
            "character '{c}' is not permitted in acl name '{name}'."
        ));
    }
    if name.is_empty() {
        return err("missing ACL name");
    }
    let mut warnings = Vec::new();
    let term = compile_term(words, names, &mut warnings).map_err(|e| {
        RuleError::new(format!(
            "error detected while parsing ACL '{name}' : {}",
            e.message
        ))
    })?;
    acls.push(name, term)?;
    Ok(warnings)
}

/// The predefined ACLs (HAProxy 2.6 §7.4) and their definitions.
pub const PREDEFINED: &[(&str, &str)] = &[
    ("FALSE", "always_false"),
    ("HTTP", "req.proto_http"),
    ("HTTP_1.0", "req.ver 1.0"),
    ("HTTP_1.1", "req.ver 1.1"),
    ("HTTP_2.0", "req.ver 2.0"),
    ("HTTP_CONTENT", "req.hdr_val(content-length) gt 0"),
    ("HTTP_URL_ABS", "url_reg ^[^/:]*://"),
    ("HTTP_URL_SLASH", "url_beg /"),
    ("HTTP_URL_STAR", "url *"),
    ("LOCALHOST", "src 127.0.0.1/8 ::1"),
    ("METH_CONNECT", "method CONNECT"),
    ("METH_DELETE", "method DELETE"),
    ("METH_GET", "method GET HEAD"),
    ("METH_HEAD", "method HEAD"),
    ("METH_OPTIONS", "method OPTIONS"),
    ("METH_POST", "method POST"),
    ("METH_PUT", "method PUT"),
    ("METH_TRACE", "method TRACE"),
    ("RDP_COOKIE", "req.rdp_cookie_cnt gt 0"),
    ("REQ_CONTENT", "req.len gt 0"),
    ("TRUE", "always_true"),
    ("WAIT_END", "wait_end"),
];

/// A predefined ACL, compiled on demand (each use gets its own; they are tiny).
pub fn predefined(name: &str, names: &dyn Names) -> Option<AclSlot> {
    let def = PREDEFINED.iter().find(|p| p.0 == name)?.1;
    let words: Vec<String> = def.split(' ').map(String::from).collect();
    let term = compile_term(&words, names, &mut Vec::new()).expect("predefined ACLs compile");
    let slot = Arc::new(OnceLock::new());
    let _ = slot.set(Acl {
        terms: vec![term].into(),
    });
    Some(slot)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::source::{TestBackend, TestSource};
    use crate::rules::NameTable;

    fn w(s: &str) -> Vec<String> {
        s.split_whitespace().map(String::from).collect()
    }

    fn names() -> NameTable {
        NameTable {
            backends: vec![("web".into(), vec!["s1".into()])],
            ..Default::default()
        }
    }

    fn matches(body: &str, src: &TestSource) -> Match {
        let t = compile_term(&w(body), &names(), &mut Vec::new())
            .unwrap_or_else(|e| panic!("{body}: {e}"));
        t.eval(src, &mut Eval::new())
    }

    /// A ClientHello from rustls for `host`, offering ALPN h2 then http/1.1.
    fn hello(host: &str) -> Vec<u8> {
        let mut cfg = rustls::ClientConfig::builder()
            .with_root_certificates(rustls::RootCertStore::empty())
            .with_no_client_auth();
        cfg.alpn_protocols = vec![b"h2".to_vec(), b"http/1.1".to_vec()];
        let name = rustls::pki_types::ServerName::try_from(host.to_string()).unwrap();
        let mut c = rustls::ClientConnection::new(std::sync::Arc::new(cfg), name).unwrap();
        let mut out = Vec::new();
        c.write_tls(&mut out).unwrap();
        out
    }

    /// Evaluates under content inspection (the inspect delay still running).
    fn inspecting(body: &str, payload: &[u8]) -> Match {
        struct Inspecting(TestSource);
        impl Source for Inspecting {
            fn req_payload(&self) -> Option<&[u8]> {
                self.0.req_payload()
            }
            fn wait_end(&self) -> bool {
                false
            }
        }
        let src = Inspecting(TestSource {
            req_payload: Some(payload.to_vec()),
            ..Default::default()
        });
        let t = compile_term(&w(body), &names(), &mut Vec::new()).unwrap();
        t.eval(&src, &mut Eval::new())
    }

    #[test]
    fn tls_hello_acls_wait_only_for_a_hello_in_progress() {
        let h = hello("shop.example.org");
        for (body, want) in [
            ("req.ssl_hello_type 1", Match::Yes),
            ("req_ssl_sni -i SHOP.example.org", Match::Yes),
            ("req.ssl_sni -m end .example.org", Match::Yes),
            ("req.ssl_sni www.example.org", Match::No),
            ("req.ssl_alpn http/1.1", Match::Yes),
            ("req.ssl_alpn h3", Match::No),
            ("req.ssl_ec_ext -m bool", Match::Yes),
            ("req.ssl_st_ext 1", Match::Yes),
            ("req.ssl_ver 3.3", Match::Yes),
            ("req_ssl_ver 3:3.2", Match::No),
            ("req.ssl_ver 3.1-3.3", Match::Yes),
            ("req.ssl_ver ge 3.4", Match::No),
            ("req.ssl_ver -m int 196611", Match::Yes),
        ] {
            assert_eq!(inspecting(body, &h), want, "{body}");
        }
        // Half a hello: undecided. Not a hello: decided at once.
        assert_eq!(inspecting("req.ssl_sni x", &h[..h.len() / 2]), Match::Miss);
        assert_eq!(
            inspecting("req.ssl_hello_type 1", b"GET / HTTP/1.1\r\n"),
            Match::No
        );
        assert_eq!(inspecting("req.ssl_sni x", b"\x16\x02"), Match::No);
        // A value is final: a hello that does not match is not waited on.
        assert_eq!(inspecting("req.ssl_hello_type 2", &h), Match::No);
        // No raw bytes at all (an HTTP proxy): no value, and none will come.
        struct Http;
        impl Source for Http {
            fn wait_end(&self) -> bool {
                false
            }
        }
        let t = compile_term(&w("req.ssl_sni x"), &names(), &mut Vec::new()).unwrap();
        assert_eq!(t.eval(&Http, &mut Eval::new()), Match::No);
    }

    #[test]
    fn dotted_versions() {
        assert_eq!(dotted_version("3.1", None).unwrap(), "196609");
        assert_eq!(dotted_version("3", None).unwrap(), "196608");
        assert_eq!(dotted_version("3:3.3", None).unwrap(), "196608:196611");
        assert_eq!(dotted_version("3.1-", None).unwrap(), "196609:");
        assert_eq!(dotted_version(":3", None).unwrap(), ":196608");
        let e = dotted_version("x.1", None).unwrap_err().message;
        assert_eq!(e, "'x.1' is not a dotted number");
        let e = dotted_version("3.3:3.1", None).unwrap_err().message;
        assert_eq!(e, "'3.3:3.1' is not a valid dotted number range");
        assert!(dotted_version("65536.0", None).is_err());
    }

    #[test]
    fn acl_lines() {
        let mut s = TestSource::get(
            "/api/v1/users.JSON?x=1",
            &[
                ("Host", "www.Example.com"),
                ("X-Forwarded-For", "10.1.2.3, 192.168.0.1"),
                ("Cookie", "sid=abc; lang=fr"),
            ],
        );
        s.backends = vec![TestBackend {
            nbsrv: 1,
            ..Default::default()
        }];
        let cases = [
            ("path /api/v1/users.JSON", Match::Yes),
            ("path -i /API/V1/USERS.json", Match::Yes),
            ("path_beg /api/ /static/", Match::Yes),
            ("path_end -i .json", Match::Yes),
            ("path_end .json", Match::No),
            ("path_sub v1", Match::Yes),
            ("path_dir v1", Match::Yes),
            ("path_reg ^/api/v[0-9]+/", Match::Yes),
            ("path_len 18", Match::Yes),
            ("path -m beg /api", Match::Yes),
            ("hdr_dom(host) -i example.com", Match::Yes),
            ("hdr_dom(host) example.com", Match::No),
            ("hdr_beg(host) www.", Match::Yes),
            ("hdr(x-forwarded-for) -m ip 192.168.0.0/16", Match::Yes),
            ("hdr_ip(x-forwarded-for) 10.0.0.0/8", Match::Yes),
            ("hdr_cnt(x-forwarded-for) eq 2", Match::Yes),
            ("req.hdr(host) -m found", Match::Yes),
            ("req.hdr(nope) -m found", Match::No),
            ("cook(lang) fr", Match::Yes),
            ("cook_beg(sid) ab", Match::Yes),
            ("urlp(x) 1", Match::Yes),
            ("src 127.0.0.0/8", Match::Yes),
            ("src 10.0.0.0/8", Match::No),
            ("src_port 1024:", Match::Yes),
            ("dst_port 80 443", Match::Yes),
            ("nbsrv(web) lt 2", Match::Yes),
            ("nbsrv(web) ge 2", Match::No),
            ("method GET", Match::Yes),
            // haproxy 2.6 compares a known method exactly, `-i` or not.
            ("method -i get", Match::No),
            ("always_true", Match::Yes),
            ("always_false", Match::No),
            ("path,lower /api/v1/users.json", Match::Yes),
            ("path,length gt 5", Match::Yes),
            ("base_beg www.Example.com/api", Match::Yes),
            ("url_sub x=1", Match::Yes),
            ("-- path", Match::No),
        ];
        for (body, want) in cases {
            if body.starts_with("--") {
                continue;
            }
            assert_eq!(matches(body, &s), want, "{body}");
        }
    }

    /// Each line and its result were checked with haproxy 2.6.12 (`acl aN LINE`,
    /// `http-request set-var(txn.aN) int(1) if aN`) for this very request.
    #[test]
    fn acl_lines_match_haproxy() {
        let s = TestSource::get(
            "/p/a.html?q=1&r=two;x",
            &[
                ("Host", "www.example.com:8080"),
                ("X", "a, b"),
                ("X", "c"),
                ("Cookie", "a=1; b=2"),
                ("cookie", "a=3"),
                ("X-Num", "17"),
                ("X-Ip", "10.1.2.3"),
            ],
        );
        let cases = [
            (r"path_dom p", Match::Yes),
            (r"path_dom a.html", Match::Yes),
            (r"path_dir p", Match::Yes),
            (r"path_dir /p/", Match::Yes),
            (r"hdr_dom(host) example.com", Match::Yes),
            (r"hdr_dom(host) www.example", Match::Yes),
            (r"hdr_dom(host) example.com:8080", Match::Yes),
            (r"hdr_dir(host) www", Match::No),
            (r"method get", Match::No),
            (r"method -i get", Match::No),
            (r"url_param(q) 2", Match::No),
            (r"hdr(x) b", Match::Yes),
            (r"hdr(x,1) b", Match::No),
            (r"hdr_sub(x) ,", Match::No),
            (r"req.fhdr(x) -m sub ,", Match::Yes),
            (r"hdr_cnt(x) 3", Match::Yes),
            (r"cook(a) 1", Match::Yes),
            (r"cook_cnt(a) 2", Match::Yes),
            (r"path -m len 9", Match::Yes),
            (r"path_len 9", Match::Yes),
            (r"path -m found", Match::Yes),
            (r"hdr(nope) -m found", Match::No),
            (r"hdr(nope) -m len 0", Match::No),
            (r"src_port -m int 0:", Match::Yes),
            (r"path -m reg -i ^/P/", Match::Yes),
            (r"path -m beg -i /P", Match::Yes),
            (r"path -i /P/A.HTML", Match::Yes),
            (r"url_reg \?q=1", Match::Yes),
            (r"hdr_val(x-num) gt 10", Match::Yes),
            (r"hdr_val(x-num) 15:20", Match::Yes),
            (r"hdr_ip(x-ip) 10.0.0.0/8", Match::Yes),
            (r"hdr(host),lower -m end .com:8080", Match::Yes),
            (r"hdr_end(host) -i .COM:8080", Match::Yes),
            (r"req.ver 1.1", Match::Yes),
            (r"req.ver 1.0", Match::No),
            (r"query -m sub r=two", Match::Yes),
            (r"base_beg www.example.com:8080/p", Match::Yes),
            (r"urlp(r) two", Match::Yes),
            (r"urlp_reg(r) ^tw", Match::Yes),
            (r"str(abc) abc", Match::Yes),
            (r"int(3) 1:5", Match::Yes),
            (r"path eq", Match::No),
            (r"always_true", Match::Yes),
            (r"bool(0)", Match::No),
        ];
        for (body, want) in cases {
            assert_eq!(matches(body, &s), want, "{body}");
        }
    }

    #[test]
    fn legacy_int_operators_warn() {
        let mut acls = Acls::new();
        let warns =
            compile_acl("service_down", &w("nbsrv(web) -lt 2"), &names(), &mut acls).unwrap();
        assert_eq!(warns.len(), 1);
        assert!(
            warns[0].message.contains("'nbsrv(web) lt 2'"),
            "{}",
            warns[0].message
        );
        acls.finish();
        let mut s = TestSource {
            backends: vec![TestBackend {
                nbsrv: 1,
                ..Default::default()
            }],
            ..Default::default()
        };
        let acl = acls.get("service_down").unwrap();
        assert_eq!(acl.get().unwrap().eval(&s, &mut Eval::new()), Match::Yes);
        s.backends[0].nbsrv = 2;
        assert_eq!(acl.get().unwrap().eval(&s, &mut Eval::new()), Match::No);
    }

    #[test]
    fn errors_as_haproxy_words_them() {
        let mut acls = Acls::new();
        let n = names();
        let e = compile_acl("a", &w("pth /x"), &n, &mut acls).unwrap_err();
        assert!(
            e.message
                .contains("unknown fetch method 'pth' in ACL expression 'pth'"),
            "{e}"
        );
        assert!(e.message.contains("did you mean 'path'"), "{e}");
        let e = compile_acl("a", &w("src 1.2.3.4 foo.bar"), &n, &mut acls).unwrap_err();
        assert!(
            e.message
                .ends_with("'foo.bar' is not a valid IPv4 or IPv6 address"),
            "{e}"
        );
        let e = compile_acl("a", &w("nbsrv(web) foo"), &n, &mut acls).unwrap_err();
        assert!(e.message.ends_with("'foo' is not a number"), "{e}");
        let e = compile_acl("a", &w("path -x /a"), &n, &mut acls).unwrap_err();
        assert!(e.message.contains("'-x' is not a valid ACL option"), "{e}");
        let e = compile_acl("a", &w("path,lwer /x"), &n, &mut acls).unwrap_err();
        assert!(
            e.message
                .contains("ACL keyword 'path' : unknown converter 'lwer'"),
            "{e}"
        );
        let e = compile_acl("a", &w("path -m foo /x"), &n, &mut acls).unwrap_err();
        assert!(
            e.message
                .contains("unknown matching method 'foo' when parsing ACL expression"),
            "{e}"
        );
        let e = compile_acl("a", &w("always_true -m ip 1.2.3.4"), &n, &mut acls).unwrap_err();
        assert!(
            e.message
                .contains("matching method 'ip' cannot be used with fetch keyword 'always_true'"),
            "{e}"
        );
        let e = compile_acl("a/b", &w("path /"), &n, &mut acls).unwrap_err();
        assert_eq!(
            e.message,
            "character '/' is not permitted in acl name 'a/b'."
        );
        let e = compile_acl("a", &w("path -u x /"), &n, &mut acls).unwrap_err();
        assert!(
            e.message
                .ends_with("the argument of -u must be an integer."),
            "{e}"
        );
        assert!(compile_acl("a", &w("path -u 3 -n /"), &n, &mut acls)
            .unwrap()
            .is_empty());
        // No pattern: a warning, as haproxy gives, unless '--' says it is intended.
        let warns = compile_acl("a", &w("path"), &n, &mut acls).unwrap();
        assert!(
            warns[0].message.contains("this ACL will never match"),
            "{warns:?}"
        );
        assert!(compile_acl("a", &w("path --"), &n, &mut acls)
            .unwrap()
            .is_empty());
        assert!(compile_acl("a", &w("always_true"), &n, &mut acls)
            .unwrap()
            .is_empty());
    }

    #[test]
    fn pattern_files() {
        let dir = std::env::temp_dir().join(format!("bascule-acl-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let f = dir.join("nets.lst");
        std::fs::write(&f, "# blocked\n10.0.0.0/8\n\n  192.168.1.1  \n").unwrap();
        let m = dir.join("hosts.map");
        std::fs::write(&m, "www.example.com be1\napi.example.com be2\n").unwrap();
        let s = TestSource::get("/", &[("Host", "api.example.com")]);
        let body = format!("src -f {} 127.0.0.1", f.display());
        assert_eq!(matches(&body, &s), Match::Yes);
        let body = format!("src -f {}", f.display());
        assert_eq!(matches(&body, &s), Match::No);
        let body = format!("req.hdr(host) -M -f {}", m.display());
        assert_eq!(matches(&body, &s), Match::Yes);
        let e =
            compile_term(&w("src -f /nonexistent/x.lst"), &names(), &mut Vec::new()).unwrap_err();
        assert!(
            e.message
                .contains("failed to open pattern file </nonexistent/x.lst>"),
            "{e}"
        );
        std::fs::remove_dir_all(&dir).unwrap();
    }

    #[test]
    fn predefined_acls() {
        let n = names();
        let s = TestSource::get("/x", &[("Content-Length", "3")]);
        let ev = &mut Eval::new();
        let mut check = |name: &str| predefined(name, &n).unwrap().get().unwrap().eval(&s, ev);
        assert_eq!(check("TRUE"), Match::Yes);
        assert_eq!(check("FALSE"), Match::No);
        assert_eq!(check("LOCALHOST"), Match::Yes);
        assert_eq!(check("HTTP"), Match::Yes);
        assert_eq!(check("HTTP_1.1"), Match::Yes);
        assert_eq!(check("HTTP_1.0"), Match::No);
        assert_eq!(check("HTTP_CONTENT"), Match::Yes);
        assert_eq!(check("HTTP_URL_SLASH"), Match::Yes);
        assert_eq!(check("HTTP_URL_ABS"), Match::No);
        assert_eq!(check("METH_GET"), Match::Yes);
        assert_eq!(check("METH_POST"), Match::No);
        assert_eq!(check("WAIT_END"), Match::Yes);
        for (name, _) in PREDEFINED {
            assert!(predefined(name, &n).is_some(), "{name}");
        }
    }

    #[test]
    fn http_auth_group_checks_groups() {
        let n = NameTable {
            userlists: vec!["L".into()],
            ..Default::default()
        };
        let s = TestSource {
            auth: Some((0, b"bob".to_vec(), vec![b"admins".to_vec()])),
            ..Default::default()
        };
        let t = compile_term(&w("http_auth_group(L) ops admins"), &n, &mut Vec::new()).unwrap();
        assert_eq!(t.eval(&s, &mut Eval::new()), Match::Yes);
        let t = compile_term(&w("http_auth_group(L) ops"), &n, &mut Vec::new()).unwrap();
        assert_eq!(t.eval(&s, &mut Eval::new()), Match::No);
    }
}

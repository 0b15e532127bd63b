//! The stats socket's `crt-list` commands, with HAProxy 2.6's replies: `show ssl crt-list
//! [-n] [FILE]`, `add ssl crt-list FILE CERT` (or `<<` and a crt-list line as payload) and
//! `del ssl crt-list FILE CERT[:LINE]`.
//!
//! Every `crt-list` a bind read is known by its path as configured (trailing slashes
//! stripped, as HAProxy does), with its lines and the binds that read it. A line added goes to
//! the certificate index of every one of those binds at once (`CertStore::add`), the
//! certificate being one the registry of `set`/`commit ssl cert` holds (configured, or made
//! with `new ssl cert`); a line deleted leaves them. A line's SSL options are honoured when
//! their handshakes are the bind line's or an existing line's (`Built::group_for`): a rustls
//! configuration of its own is built at load only, so other options are refused with the
//! reason. As in HAProxy, a `ca-file`/`crl-file` named in an added line must be one the
//! configuration loaded.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;

use arc_swap::ArcSwap;

use super::cafiles::{CaFiles, Kind};
use super::cli::Certs;
use super::crtlist::{self, LineSsl};
use super::server::Built;

/// One line of a list as it serves now.
#[derive(Debug, Clone)]
struct Entry {
    crt: String,
    ssl: Option<LineSsl>,
    filters: Vec<String>,
    line: usize,
    /// The configuration group of the line in each bind of the list (lines added at run time;
    /// empty for the file's own).
    groups: Vec<usize>,
}

/// One `crt-list` file: its lines and the binds that read it.
struct List {
    entries: ArcSwap<Vec<Entry>>,
    binds: Vec<Arc<Built>>,
    /// Where each of `binds` is configured (`file:line`).
    locations: Vec<String>,
    /// The number the next added line gets.
    next_line: AtomicUsize,
}

/// The `crt-list` files of the running configuration.
#[derive(Default)]
pub struct CrtLists {
    lists: BTreeMap<String, List>,
    /// `crt-base`: where a relative certificate of an added line is.
    crt_base: Option<PathBuf>,
}

impl std::fmt::Debug for CrtLists {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CrtLists")
            .field("lists", &self.lists.keys().collect::<Vec<_>>())
            .finish()
    }
}

/// A list's name as HAProxy keys it: without trailing slashes.
fn key(path: &str) -> &str {
    path.trim_end_matches('/')
}

impl CrtLists {
    /// The lists of `binds` (each with its `file:line`).
    pub fn new<'a>(
        binds: impl IntoIterator<Item = (&'a Arc<Built>, &'a str)>,
        crt_base: Option<&Path>,
    ) -> Self {
        let mut lists: BTreeMap<String, List> = BTreeMap::new();
        for (b, location) in binds {
            for (path, lines) in &b.lists {
                let shown = path.display().to_string();
                let list = lists.entry(key(&shown).to_string()).or_insert_with(|| {
                    let entries: Vec<Entry> = lines
                        .iter()
                        .map(|l| Entry {
                            crt: l.crt.display().to_string(),
                            ssl: l.ssl.clone(),
                            filters: l.filters.clone(),
                            line: l.line,
                            groups: Vec::new(),
                        })
                        .collect();
                    let next = entries.iter().map(|e| e.line).max().unwrap_or(0) + 1;
                    List {
                        entries: ArcSwap::from_pointee(entries),
                        binds: Vec::new(),
                        locations: Vec::new(),
                        next_line: AtomicUsize::new(next),
                    }
                });
                if !list.binds.iter().any(|x| Arc::ptr_eq(x, b)) {
                    list.binds.push(Arc::clone(b));
                    list.locations.push(location.to_string());
                }
            }
        }
        CrtLists {
            lists,
            crt_base: crt_base.map(Path::to_path_buf),
        }
    }

    /// `show ssl crt-list [-n] [FILE]`: the lists, or one list's lines.
    pub fn show(&self, args: &[&str]) -> String {
        let (numbered, file) = match args {
            ["-n", rest @ ..] => match rest.first() {
                Some(f) => (true, Some(*f)),
                None => return "'show ssl crt-list -n' expects a filename or a directory\n".into(),
            },
            [f, ..] => (false, Some(*f)),
            [] => (false, None),
        };
        let Some(file) = file else {
            return self.lists.keys().map(|k| format!("{k}\n")).collect();
        };
        let Some(list) = self.lists.get(key(file)) else {
            return "didn't find the specified filename\n".into();
        };
        let mut out = format!("# {}\n", key(file));
        for e in list.entries.load().iter() {
            out.push_str(&e.crt);
            if numbered {
                out.push_str(&format!(":{}", e.line));
            }
            if let Some(o) = &e.ssl {
                out.push(' ');
                out.push_str(&o.show());
            }
            for f in &e.filters {
                out.push(' ');
                out.push_str(f);
            }
            out.push('\n');
        }
        out
    }

    /// A certificate path as HAProxy takes it: under `crt-base` when relative.
    fn cert_path(&self, cert: &str) -> String {
        match &self.crt_base {
            Some(base) if !cert.starts_with('/') => base.join(cert).display().to_string(),
            _ => cert.to_string(),
        }
    }

    /// `add ssl crt-list FILE CERT`, or `add ssl crt-list FILE <<` with a crt-list line.
    pub fn add(
        &self,
        certs: &Certs,
        cafiles: &CaFiles,
        file: Option<&str>,
        cert: Option<&str>,
        payload: Option<&str>,
    ) -> String {
        let Some(file) = file.filter(|_| payload.is_some() || cert.is_some()) else {
            return "'add ssl crtlist' expects a filename and a certificate name\n".into();
        };
        match self.try_add(certs, cafiles, key(file), cert, payload) {
            Ok(out) => out,
            Err(e) => format!("Can't edit the crt-list: {e}\n"),
        }
    }

    fn try_add(
        &self,
        certs: &Certs,
        cafiles: &CaFiles,
        name: &str,
        cert: Option<&str>,
        payload: Option<&str>,
    ) -> Result<String, String> {
        let list = self
            .lists
            .get(name)
            .ok_or_else(|| format!("crt-list '{name}' does not exist!"))?;
        let line = match payload {
            Some(p) => {
                let p = p.trim_end_matches('\n');
                if p.contains('\n') {
                    return Err("only one line of payload is supported!".into());
                }
                if p.trim().is_empty() {
                    return Err(
                        "'add ssl crtlist' should contain the certificate name in the payload"
                            .into(),
                    );
                }
                crtlist::parse_line(p.trim(), "CLI:1", None, None)?
            }
            None => crtlist::parse_line(cert.unwrap_or_default(), "CLI:1", None, None)?,
        };
        if let (Some(o), Some(b)) = (&line.ssl, list.binds.first()) {
            // As HAProxy: the CA and CRL files must be in memory (none is read from disk at
            // run time).
            let s = b.settings.overlaid(o);
            for (kind, opt, given, f) in [
                (Kind::Ca, "ca-file", &o.ca_file, &s.ca_file),
                (
                    Kind::Ca,
                    "ca-verify-file",
                    &o.ca_verify_file,
                    &s.ca_verify_file,
                ),
                (Kind::Crl, "crl-file", &o.crl_file, &s.crl_file),
            ] {
                if let (Some(_), Some(f)) = (given, f) {
                    cafiles.check(kind, opt, f)?;
                }
            }
        }
        let path = self.cert_path(&line.crt.display().to_string());
        let loaded = certs.loaded(&path)?;
        let mut groups = Vec::new();
        for b in &list.binds {
            let group = match b.group_for(line.ssl.as_ref()) {
                Some(g) => g,
                None => {
                    let opts = line
                        .ssl
                        .as_ref()
                        .expect("options make a group of their own");
                    b.add_group(opts, &|kind, opt, f| cafiles.source(kind, opt, f))?
                }
            };
            groups.push(group);
        }
        let mut out = format!("Inserting certificate '{path}' in crt-list '{name}'");
        for (b, group) in list.binds.iter().zip(&groups) {
            b.store.add(&loaded, &line.filters, *group);
            certs.set_served(&path, &b.store, true);
            out.push('.');
        }
        let number = list.next_line.fetch_add(1, Ordering::Relaxed);
        list.entries.rcu(|entries| {
            let mut entries = Vec::clone(entries);
            entries.push(Entry {
                crt: path.clone(),
                ssl: line.ssl.clone(),
                filters: line.filters.clone(),
                line: number,
                groups: groups.clone(),
            });
            entries
        });
        out.push('\n');
        out.extend(line.warnings.iter().map(|w| format!("{w}\n")));
        out.push_str("Success!\n");
        Ok(out)
    }

    /// `del ssl crt-list FILE CERT[:LINE]`.
    pub fn del(
        &self,
        certs: &Certs,
        cafiles: &CaFiles,
        file: Option<&str>,
        cert: Option<&str>,
    ) -> String {
        let (Some(file), Some(cert)) = (file, cert) else {
            return "'del ssl crtlist' expects a filename and a certificate name\n".into();
        };
        match self.try_del(certs, cafiles, key(file), cert) {
            Ok(out) => out,
            Err(e) => format!("Can't delete the entry: {e}\n"),
        }
    }

    fn try_del(
        &self,
        certs: &Certs,
        cafiles: &CaFiles,
        name: &str,
        arg: &str,
    ) -> Result<String, String> {
        let (cert, number) = match arg.rsplit_once(':') {
            Some((c, n)) => match n.parse::<usize>() {
                Ok(n) => (c, Some(n)),
                Err(_) => return Err(format!("wrong line number after colons in '{arg}'!")),
            },
            None => (arg, None),
        };
        let list = self
            .lists
            .get(name)
            .ok_or_else(|| format!("crt-list '{name}' does not exist!"))?;
        let path = self.cert_path(cert);
        certs.loaded(&path)?;
        let entries = list.entries.load_full();
        let found: Vec<&Entry> = entries.iter().filter(|e| e.crt == path).collect();
        if found.is_empty() {
            return Err(format!(
                "certificate '{path}' can't be found in crt-list '{name}'!"
            ));
        }
        let numbers = || {
            found
                .iter()
                .map(|e| e.line.to_string())
                .collect::<Vec<_>>()
                .join(", ")
        };
        let entry = match number {
            Some(n) => found.iter().find(|e| e.line == n).ok_or_else(|| {
                format!("found a certificate '{path}' but the line number is incorrect, please specify a correct line number preceded by colons ({})!", numbers())
            })?,
            None if found.len() > 1 => {
                return Err(format!("found the certificate '{path}' in several entries, please specify a line number preceded by colons ({})!", numbers()))
            }
            None => &found[0],
        };
        let p = Path::new(&path);
        let defaults: Vec<&String> = list
            .binds
            .iter()
            .zip(&list.locations)
            .filter(|(b, _)| b.store.index().default_is(p))
            .map(|(_, at)| at)
            .collect();
        if !defaults.is_empty() {
            let mut e = format!(
                "certificate '{path}' cannot be deleted, it is used as default certificate by the following frontends:\n"
            );
            for at in defaults {
                e.push_str(&format!("\t- {at}\n"));
            }
            return Err(e);
        }
        for (i, b) in list.binds.iter().enumerate() {
            b.store.remove(p, &entry.filters);
            if b.store.index().uses(p) == 0 {
                certs.set_served(&path, &b.store, false);
            }
            // A configuration built for the line at run time that no certificate uses any
            // more no longer reads its CA and CRL files.
            if let Some(&g) = entry.groups.get(i).filter(|&&g| g > 0) {
                if !b.store.index().uses_group(g) {
                    if let Some(l) = b.lines.load().get(g - 1) {
                        for s in l.verifier.iter().flat_map(|v| v.sources()) {
                            cafiles.release(s);
                        }
                    }
                }
            }
        }
        let line = entry.line;
        list.entries.rcu(|entries| {
            let mut entries = Vec::clone(entries);
            entries.retain(|e| !(e.crt == path && e.line == line));
            entries
        });
        Ok(format!("Entry '{path}' deleted in crtlist '{name}'!\n"))
    }
}

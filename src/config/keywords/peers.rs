//! Keywords of `peers NAME` sections: `peer NAME ADDR:PORT`, the newer `bind ADDR` +
//! `server NAME [ADDR:PORT]` form, `table NAME type ... [store ...]`, `disabled` and `enable`.
//!
//! A peers section does two things in HAProxy: it declares stick tables (`table t ...` makes
//! the table `NAME/t`), and it replicates tables — to the next process on a reload through the
//! local peer, and to remote peers. Bascule reads the section so that its tables work; the
//! validate stage ([`crate::config::validate`]) then sets up the replication with remote
//! peers ([`crate::peers`]), says what does not happen yet (the hand-over to the next process
//! on a reload: see docs/SCALE-OUT.md) and removes a section without the local peer as
//! haproxy 2.6 does.

use super::stick::{parse_spec, TableLine};
use super::{Ctx, Keyword, Problem, Sections};
use crate::config::diag::Span;

/// One `peer NAME ADDR:PORT` or `server NAME [ADDR:PORT]` line.
#[derive(Debug, Clone)]
pub struct PeerLine {
    pub name: String,
    /// `None` for a `server` line without an address (the local peer in the newer form).
    pub addr: Option<String>,
    pub span: Span,
}

/// A `peers` section as written.
#[derive(Debug, Clone)]
pub struct PeersDraft {
    pub name: String,
    pub span: Span,
    pub peers: Vec<PeerLine>,
    /// `table NAME ...` lines: the name as written (the table is `SECTION/NAME`).
    pub tables: Vec<(String, TableLine)>,
    /// `bind ADDR`: where the local peer listens, in the newer form.
    pub bind: Option<(String, Span)>,
    /// `disabled` (and not re-enabled by a later `enable`).
    pub disabled: bool,
}

/// The peers keywords.
pub static KEYWORDS: &[Keyword<PeersDraft>] = &[
    Keyword {
        name: "peer",
        sections: Sections::PEERS,
        misplaced_warns: false,
        parse: peer,
        doc: "A peer: peer NAME ADDR:PORT.",
    },
    Keyword {
        name: "server",
        sections: Sections::PEERS,
        misplaced_warns: false,
        parse: server,
        doc: "A peer in the bind/server form: server NAME [ADDR:PORT] (no address: the local peer).",
    },
    Keyword {
        name: "bind",
        sections: Sections::PEERS,
        misplaced_warns: false,
        parse: bind,
        doc: "Where the local peer listens, in the bind/server form: bind ADDR:PORT.",
    },
    Keyword {
        name: "table",
        sections: Sections::PEERS,
        misplaced_warns: false,
        parse: table,
        doc: "A stick table named SECTION/NAME: table NAME type T [len N] size N [expire T] [nopurge] [store D,...].",
    },
    Keyword {
        name: "disabled",
        sections: Sections::PEERS,
        misplaced_warns: false,
        parse: disabled,
        doc: "Disables the section: its tables are not replicated.",
    },
    Keyword {
        name: "enable",
        sections: Sections::PEERS,
        misplaced_warns: false,
        parse: enable,
        doc: "Enables the section again after 'disabled'.",
    },
];

/// Checks an `ADDR:PORT` word: a port is required (peers connect to each other), but for
/// an inherited socket (`fd@N`), which the local peer may listen on.
fn address(ctx: &Ctx<'_>, i: usize) -> Result<String, Problem> {
    let a = ctx.need(i, "an address ADDR:PORT")?;
    if a.starts_with("fd@") {
        return Ok(a.to_string());
    }
    let port = a.rsplit_once(':').map(|(_, p)| p);
    match port.and_then(|p| p.parse::<u16>().ok()) {
        Some(p) if p != 0 => Ok(a.to_string()),
        _ => Err(format!(
            "'{}': '{a}' has no port (a peer's address is ADDR:PORT)",
            ctx.args[..i].join(" ")
        )
        .into()),
    }
}

fn add_peer(
    s: &mut PeersDraft,
    ctx: &mut Ctx<'_>,
    name: &str,
    addr: Option<String>,
) -> Result<(), Problem> {
    if let Some(first) = s.peers.iter().find(|p| p.name == name) {
        return Err(format!(
            "'{} {name}': peer name already declared at {}",
            ctx.kw(),
            first.span
        )
        .into());
    }
    s.peers.push(PeerLine {
        name: name.to_string(),
        addr,
        span: ctx.span.clone(),
    });
    Ok(())
}

fn peer(s: &mut PeersDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let name = ctx.need(1, "a peer name and an address")?.to_string();
    let addr = address(ctx, 2)?;
    if let Some(opt) = ctx.arg(3) {
        return Err(format!("'peer {name}': option '{opt}' is not supported yet").into());
    }
    add_peer(s, ctx, &name, Some(addr))
}

fn server(s: &mut PeersDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let name = ctx.need(1, "a peer name")?.to_string();
    let addr = match ctx.arg(2) {
        Some(_) => Some(address(ctx, 2)?),
        None => None,
    };
    if let Some(opt) = ctx.arg(3) {
        return Err(format!("'server {name}': option '{opt}' is not supported yet").into());
    }
    add_peer(s, ctx, &name, addr)
}

fn bind(s: &mut PeersDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let addr = address(ctx, 1)?;
    if let Some(opt) = ctx.arg(2) {
        return Err(format!(
            "'bind {addr}': option '{opt}' is not supported yet in a peers section"
        )
        .into());
    }
    if let Some((_, first)) = &s.bind {
        return Err(format!("'bind': the local peer's address is already given at {first}").into());
    }
    s.bind = Some((addr, ctx.span.clone()));
    Ok(())
}

fn table(s: &mut PeersDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let name = ctx.need(1, "a table name")?.to_string();
    let (spec, peers) = parse_spec(ctx, 2)
        .map_err(|e| Problem::with_hint(format!("table {name}: {}", e.message), e.hint))?;
    if let Some(p) = peers {
        return Err(format!(
            "table {name}: 'peers {p}': a table of a peers section belongs to that section"
        )
        .into());
    }
    if let Some((_, first)) = s.tables.iter().find(|(n, _)| *n == name) {
        ctx.warn(format!(
            "table '{}/{name}' is already declared at {}; this line is ignored",
            s.name, first.span
        ));
        return Ok(());
    }
    s.tables.push((
        name,
        TableLine {
            spec,
            peers: None,
            span: ctx.span.clone(),
        },
    ));
    Ok(())
}

fn disabled(s: &mut PeersDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    ctx.no_more(0)?;
    s.disabled = true;
    Ok(())
}

fn enable(s: &mut PeersDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    ctx.no_more(0)?;
    s.disabled = false;
    Ok(())
}

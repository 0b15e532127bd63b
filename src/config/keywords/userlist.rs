//! Keywords of `userlist NAME` sections: `user NAME [password HASH | insecure-password TEXT]
//! [groups G,...]` and `group NAME [users U,...]`.
//!
//! Lines are stored as written; the validate stage checks the names they cross-reference
//! (a user's groups, a group's users) once the section is complete, checks each password
//! hash against the system's crypt(3), and builds [`crate::rules::userlist::Userlist`].

use super::{Ctx, Keyword, Problem, Sections};
use crate::config::diag::Span;
use crate::rules::userlist::Password;

/// One `user` line.
#[derive(Debug, Clone)]
pub struct UserLine {
    pub name: String,
    pub password: Password,
    pub groups: Vec<String>,
    pub span: Span,
}

/// One `group` line.
#[derive(Debug, Clone)]
pub struct GroupLine {
    pub name: String,
    pub users: Vec<String>,
    pub span: Span,
}

/// A `userlist` section as written.
#[derive(Debug, Clone)]
pub struct UserlistDraft {
    pub name: String,
    pub span: Span,
    pub users: Vec<UserLine>,
    pub groups: Vec<GroupLine>,
}

/// The userlist keywords.
pub static KEYWORDS: &[Keyword<UserlistDraft>] = &[
    Keyword {
        name: "user",
        sections: Sections::USERLIST,
        misplaced_warns: false,
        parse: user,
        doc: "A user: user NAME [password HASH | insecure-password TEXT] [groups G,...].",
    },
    Keyword {
        name: "group",
        sections: Sections::USERLIST,
        misplaced_warns: false,
        parse: group,
        doc: "A group: group NAME [users U,...].",
    },
];

fn list(word: &str) -> Vec<String> {
    word.split(',')
        .filter(|s| !s.is_empty())
        .map(str::to_string)
        .collect()
}

fn user(u: &mut UserlistDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let name = ctx.need(1, "a user name")?.to_string();
    let mut password = Password::None;
    let mut groups = Vec::new();
    let mut i = 2;
    while let Some(w) = ctx.arg(i) {
        match w {
            "password" => {
                let h = ctx.need(i + 1, "a crypt(3) hash")?;
                password = Password::Hash(h.to_string());
            }
            "insecure-password" => {
                password = Password::Clear(ctx.need(i + 1, "a password")?.to_string());
            }
            "groups" => groups = list(ctx.need(i + 1, "a comma-separated list of groups")?),
            other => {
                let hint = crate::config::diag::suggest(
                    other,
                    ["password", "insecure-password", "groups"],
                );
                return Err(Problem::with_hint(
                    format!("'user {name}': unexpected word '{other}' (expected password, insecure-password or groups)"),
                    hint,
                ));
            }
        }
        i += 2;
    }
    if u.users.iter().any(|x| x.name == name) {
        ctx.warn(format!(
            "ignoring duplicated user '{name}' in userlist '{}'",
            u.name
        ));
        return Ok(());
    }
    u.users.push(UserLine {
        name,
        password,
        groups,
        span: ctx.span.clone(),
    });
    Ok(())
}

fn group(u: &mut UserlistDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let name = ctx.need(1, "a group name")?.to_string();
    let mut users = Vec::new();
    match ctx.arg(2) {
        None => {}
        Some("users") => users = list(ctx.need(3, "a comma-separated list of users")?),
        Some(other) => {
            return Err(
                format!("'group {name}': unexpected word '{other}' (expected users)").into(),
            )
        }
    }
    ctx.no_more(if ctx.arg(2).is_some() { 3 } else { 1 })?;
    if u.groups.iter().any(|g| g.name == name) {
        ctx.warn(format!(
            "ignoring duplicated group '{name}' in userlist '{}'",
            u.name
        ));
        return Ok(());
    }
    u.groups.push(GroupLine {
        name,
        users,
        span: ctx.span.clone(),
    });
    Ok(())
}

//! Cookie persistence keywords: `cookie`, `dynamic-cookie-key` and `capture cookie`, with
//! HAProxy 2.6's checks and messages (`cfgparse-listen.c`). `force-persist`/`ignore-persist`
//! are rule lines (`super::rules`); `option persist` is an option; the server's `cookie VALUE`
//! is a server keyword.

use super::{Ctx, Problem, ProxyDraft};
use crate::config::model::{CookiePersist, MAX_DYNAMIC_COOKIE_KEY};
use crate::config::values;

/// A `maxidle`/`maxlife` time: seconds unless a unit is given, at least 1 s.
fn seconds(word: &str, what: &str) -> Result<u32, Problem> {
    let secs = if word.bytes().all(|c| c.is_ascii_digit()) && !word.is_empty() {
        word.parse::<u64>()
            .map_err(|_| format!("timer overflow in argument <{word}> to <{what}>, maximum value is 2147483647 s (~68 years)"))?
    } else {
        // HAProxy's wording for a unit it does not know.
        let digits = word.bytes().take_while(u8::is_ascii_digit).count();
        let unit = &word[digits..];
        if digits == 0 || !matches!(unit, "us" | "ms" | "s" | "m" | "h" | "d") {
            let bad = word[digits..].chars().next().unwrap_or(' ');
            return Err(format!("unexpected character '{bad}' in argument to <{what}>").into());
        }
        let d = values::time(word).map_err(|e| format!("'{what}': {e}"))?;
        if d.as_secs() == 0 && !d.is_zero() {
            return Err(format!(
                "timer underflow in argument <{word}> to <{what}>, minimum non-null value is 1 s"
            )
            .into());
        }
        d.as_secs()
    };
    if secs > i32::MAX as u64 {
        return Err(format!("timer overflow in argument <{word}> to <{what}>, maximum value is 2147483647 s (~68 years)").into());
    }
    Ok(secs as u32)
}

/// `cookie NAME [options]`.
pub(super) fn cookie(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let name = ctx.need(1, "<cookie_name> as argument")?;
    let mut c = CookiePersist {
        name: name.to_string(),
        ..Default::default()
    };
    let mut i = 2;
    while let Some(w) = ctx.arg(i) {
        match w {
            "rewrite" => c.rewrite = true,
            "indirect" => c.indirect = true,
            "insert" => c.insert = true,
            "nocache" => c.nocache = true,
            "postonly" => c.postonly = true,
            "preserve" => c.preserve = true,
            "prefix" => c.prefix = true,
            "httponly" => c.httponly = true,
            "secure" => c.secure = true,
            "dynamic" => c.dynamic = true,
            "domain" => {
                let d = ctx.need(i + 1, "<domain> as argument")?.to_string();
                if !d.contains('.') {
                    ctx.warn(format!("domain '{d}' contains no embedded dot, this configuration may not work properly (see RFC6265#5.2.3)"));
                }
                if let Some(bad) = d
                    .chars()
                    .find(|ch| !(ch.is_ascii_alphanumeric() || *ch == '.' || *ch == '-'))
                {
                    return Err(format!(
                        "character '{bad}' is not permitted in domain name '{d}'"
                    )
                    .into());
                }
                c.domain = Some(match c.domain.take() {
                    None => d,
                    Some(prev) => format!("{prev}; domain={d}"),
                });
                i += 1;
            }
            "maxidle" => {
                let v = ctx.need(i + 1, "<idletime> in seconds as argument")?;
                c.maxidle = seconds(v, "maxidle")?;
                i += 1;
            }
            "maxlife" => {
                let v = ctx.need(i + 1, "<lifetime> in seconds as argument")?;
                c.maxlife = seconds(v, "maxlife")?;
                i += 1;
            }
            "attr" => {
                let a = ctx.need(i + 1, "<value> as argument")?.to_string();
                if let Some(bad) = a.bytes().find(|b| b.is_ascii_control() || *b == b';') {
                    return Err(format!(
                        "character '%x{bad:02X}' is not permitted in attribute value"
                    )
                    .into());
                }
                c.attrs = Some(match c.attrs.take() {
                    None => a,
                    Some(prev) => format!("{prev}; {a}"),
                });
                i += 1;
            }
            _ => {
                return Err(
                    "'cookie' supports 'rewrite', 'insert', 'prefix', 'indirect', 'nocache', 'postonly', 'domain', 'maxidle', 'dynamic', 'maxlife' and 'attr' options"
                        .into(),
                )
            }
        }
        i += 1;
    }
    if c.rewrite && c.indirect {
        return Err("cookie 'rewrite' and 'indirect' modes are incompatible".into());
    }
    if [c.rewrite, c.insert, c.prefix]
        .iter()
        .filter(|b| **b)
        .count()
        > 1
    {
        return Err("cookie 'rewrite', 'insert' and 'prefix' modes are incompatible".into());
    }
    if c.preserve && !c.insert && !c.indirect {
        return Err("cookie 'preserve' requires at least 'insert' or 'indirect'".into());
    }
    p.cookie = Some((c, ctx.span.clone()));
    Ok(())
}

/// `dynamic-cookie-key KEY`.
pub(super) fn dynamic_cookie_key(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let key = ctx.need(1, "<secret_key> as argument")?;
    if key.len() > MAX_DYNAMIC_COOKIE_KEY {
        return Err(format!(
            "'dynamic-cookie-key': a key of {} bytes is longer than Bascule supports ({MAX_DYNAMIC_COOKIE_KEY})",
            key.len()
        )
        .into());
    }
    p.dynamic_cookie_key = Some(key.to_string());
    Ok(())
}

/// HAProxy's `tune.http.cookielen` default: a capture keeps at most 62 characters.
const COOKIE_CAPTURE_MAX: usize = 62;

/// `capture cookie NAME len N`.
pub(super) fn capture_cookie(p: &mut ProxyDraft, ctx: &mut Ctx<'_>) -> Result<(), Problem> {
    let usage = "'capture' expects 'cookie' <cookie_name> 'len' <len>";
    let (Some(name), Some("len"), Some(len)) = (ctx.arg(2), ctx.arg(3), ctx.arg(4)) else {
        return Err(usage.into());
    };
    let name = name.to_string();
    let len: usize =
        values::number(len, "a length").map_err(|e| format!("'capture cookie' len: {e}"))?;
    ctx.no_more(4)?;
    let len = if len > COOKIE_CAPTURE_MAX {
        let what = match p.kind {
            super::SectionKind::Listen => "listen",
            _ => "frontend",
        };
        ctx.warn(format!(
            "truncating capture length to {COOKIE_CAPTURE_MAX} bytes for {what} '{}'",
            p.name
        ));
        COOKIE_CAPTURE_MAX
    } else {
        len
    };
    p.options.capture_cookie = Some((name, len));
    Ok(())
}

//! Sample expressions: `fetch[,conv(args)]*`, split, compiled and type-checked once.
//!
//! Why here: the same expression syntax serves ACLs, `http-request set-header ... %[expr]`,
//! `use_backend %[expr]`, `set-var` and log formats, so its parsing (HAProxy's argument
//! rules: `name(a,b)`, quotes and backslash escapes inside arguments, converters chained with
//! commas) and its type check (each converter's input against the previous output, through
//! the cast table) live in one place. Evaluation walks a flat list: one fetch, then each
//! converter, reusing the caller's [`Eval`] buffers.

use super::conv::{Conv, C};
use super::fetch::{Fetch, Iter, F};
use super::sample::{can_cast, Eval, Sample, SmpType};
use super::source::Source;
use super::{err, Names, Phases, RuleError};

/// Splits `name(arg1,arg2)` into the name and its arguments, unquoting them: `'...'` and
/// `"..."` quote, `\x` escapes `x` when `x` is a quote, a backslash, a comma, a parenthesis
/// or a space. A name without parentheses has no arguments.
pub fn split_call(word: &str) -> Result<(&str, Vec<String>), RuleError> {
    let Some(open) = word.find('(') else {
        return Ok((word, Vec::new()));
    };
    let name = &word[..open];
    let inner = &word[open + 1..];
    let mut args = Vec::new();
    let mut cur = String::new();
    let mut quote: Option<char> = None;
    let mut chars = inner.char_indices();
    let mut closed = None;
    while let Some((i, c)) = chars.next() {
        match (quote, c) {
            // A backslash escapes the characters the argument syntax gives a meaning to;
            // before anything else it stays (`regsub(...,\1)` keeps its back-reference, as
            // in haproxy 2.6).
            (_, '\\') => match chars.next() {
                Some((_, n)) if matches!(n, '\\' | '\'' | '"' | ',' | '(' | ')' | ' ') => {
                    cur.push(n)
                }
                Some((_, n)) => {
                    cur.push('\\');
                    cur.push(n);
                }
                None => cur.push('\\'),
            },
            (Some(q), c) if c == q => quote = None,
            (Some(_), c) => cur.push(c),
            (None, '\'' | '"') => quote = Some(c),
            (None, ',') => args.push(std::mem::take(&mut cur)),
            (None, ')') => {
                closed = Some(i);
                break;
            }
            (None, c) => cur.push(c),
        }
    }
    let Some(close) = closed else {
        return err(format!(
            "'{name}': expected ')' after the arguments in '{word}'"
        ));
    };
    if close + 1 != inner.len() {
        return err(format!(
            "'{name}': unexpected '{}' after ')' in '{word}'",
            &inner[close + 1..]
        ));
    }
    if !(args.is_empty() && cur.is_empty()) {
        args.push(cur);
    }
    Ok((name, args))
}

/// Splits `fetch(a,b),conv1,conv2(x)` at the commas outside parentheses and quotes.
pub fn split_chain(word: &str) -> Vec<&str> {
    let mut parts = Vec::new();
    let (mut depth, mut quote, mut esc, mut start) = (0i32, None, false, 0);
    for (i, c) in word.char_indices() {
        if esc {
            esc = false;
            continue;
        }
        match (quote, c) {
            (_, '\\') => esc = true,
            (Some(q), c) if c == q => quote = None,
            (Some(_), _) => {}
            (None, '\'' | '"') if depth > 0 => quote = Some(c),
            (None, '(') => depth += 1,
            (None, ')') => depth -= 1,
            (None, ',') if depth == 0 => {
                parts.push(&word[start..i]);
                start = i + 1;
            }
            _ => {}
        }
    }
    parts.push(&word[start..]);
    parts
}

/// A compiled sample expression.
#[derive(Debug)]
pub struct Expr {
    pub fetch: Fetch,
    pub convs: Box<[Conv]>,
    out: SmpType,
    /// The id under which [`super::memo::Memo`] keeps this expression's value (see
    /// [`Expr::memo_id`]).
    memo: Option<u32>,
}

impl Expr {
    /// Compiles `fetch[,conv]*`, resolving names and checking types.
    pub fn compile(word: &str, names: &dyn Names) -> Result<Expr, RuleError> {
        let parts = split_chain(word);
        let fetch = Fetch::compile(parts[0], names)?;
        let mut e = Self::with_fetch(fetch, &parts[1..], names)?;
        if e.memoizable() {
            e.memo = names.expr_id(word);
        }
        Ok(e)
    }

    /// Whether a value may be memoized while a rule list runs: the fetch reads only the request
    /// head or the connection's addresses, each converter only its input (no variable, no
    /// clock, no random, no stick table), and there is a converter (a bare fetch costs about
    /// what a memo lookup does).
    fn memoizable(&self) -> bool {
        let fetch = matches!(
            self.fetch.def.id,
            F::Src
                | F::Dst
                | F::Path
                | F::Pathq
                | F::Url
                | F::Query
                | F::UrlParam
                | F::Method
                | F::ReqVer
                | F::Hdr
                | F::HdrCnt
                | F::Fhdr
                | F::FhdrCnt
                | F::HdrIp
                | F::HdrVal
                | F::Cook
                | F::CookCnt
                | F::CookVal
                | F::Base
        );
        let convs = self.convs.iter().all(|c| {
            matches!(
                c.def.id,
                C::Lower
                    | C::Upper
                    | C::Map
                    | C::Ipmask
                    | C::Field
                    | C::Word
                    | C::Regsub
                    | C::Base64
                    | C::UrlDec
                    | C::Hex
                    | C::Length
                    | C::HostOnly
                    | C::PortOnly
                    | C::Ltrim
                    | C::Rtrim
                    | C::Bytes
            )
        });
        fetch && convs && !self.convs.is_empty()
    }

    /// The memo id given at compile time (the same for the same text), if the expression's
    /// value may be memoized.
    pub fn memo_id(&self) -> Option<u32> {
        self.memo
    }

    /// Adds converters to an already compiled fetch (legacy ACL names build their fetch).
    pub(crate) fn with_fetch(
        fetch: Fetch,
        convs: &[&str],
        names: &dyn Names,
    ) -> Result<Expr, RuleError> {
        let mut out = fetch.def.out;
        let mut list = Vec::with_capacity(convs.len());
        for c in convs {
            if c.is_empty() {
                return err(format!("empty converter name after '{}'", fetch.def.name));
            }
            let conv = Conv::compile(c, names)?;
            if !can_cast(out, conv.def.input) {
                return err(format!(
                    "converter '{}' cannot be applied: it takes {} and the value before it is {}",
                    conv.def.name,
                    conv.def.input.name(),
                    out.name()
                ));
            }
            out = conv.def.output.unwrap_or(out);
            list.push(conv);
        }
        Ok(Expr {
            fetch,
            convs: list.into(),
            out,
            memo: None,
        })
    }

    /// The type the expression yields (`Any` when a variable makes it known only at run time).
    pub fn out_type(&self) -> SmpType {
        self.out
    }

    /// Where the expression can be evaluated (its fetch's phases).
    pub fn phases(&self) -> Phases {
        self.fetch.def.phases
    }

    /// Evaluates in a sample context (one value). `None`: no value (absent header, failed
    /// cast or converter), which HAProxy renders as an empty string in a log format or header.
    pub fn eval<'a, S: Source + ?Sized>(&'a self, src: &'a S, ev: &mut Eval) -> Option<Sample<'a>> {
        if let (Some(id), true) = (self.memo, ev.memo.is_on()) {
            if let Some(e) = ev.memo.find(id) {
                return ev.memo_sample(e);
            }
            let s = self.eval_now(src, ev);
            ev.memo_put(id, s);
            return s;
        }
        self.eval_now(src, ev)
    }

    fn eval_now<'a, S: Source + ?Sized>(&'a self, src: &'a S, ev: &mut Eval) -> Option<Sample<'a>> {
        let s = self.fetch.fetch(src, ev, &mut Iter::first())?;
        self.convert(s, src, ev)
    }

    fn convert<'a, S: Source + ?Sized>(
        &'a self,
        mut s: Sample<'a>,
        src: &'a S,
        ev: &mut Eval,
    ) -> Option<Sample<'a>> {
        for c in self.convs.iter() {
            s = c.apply(s, src, ev)?;
        }
        Some(s)
    }

    /// Evaluates in an ACL context: each value of a multi-valued fetch goes through the
    /// converters and to `f`, until `f` says it matched. Returns (matched, whether any value
    /// was fetched at all).
    #[inline]
    pub(crate) fn eval_each<'a, S: Source + ?Sized>(
        &'a self,
        src: &'a S,
        ev: &mut Eval,
        mut f: impl FnMut(Sample<'a>, &mut Eval) -> bool,
    ) -> (bool, bool) {
        let mut it = Iter::all();
        let mut any = false;
        // A single-valued fetch marks the iteration done with its value: no call to learn
        // that there is no other.
        while !it.done {
            let Some(s) = self.fetch.fetch(src, ev, &mut it) else {
                break;
            };
            any = true;
            if let Some(s) = self.convert(s, src, ev) {
                if f(s, ev) {
                    return (true, true);
                }
            }
        }
        (false, any)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::rules::sample::Value;
    use crate::rules::source::TestSource;
    use crate::rules::NameTable;

    #[test]
    fn split_call_rules() {
        assert_eq!(split_call("path").unwrap(), ("path", vec![]));
        assert_eq!(split_call("hdr()").unwrap(), ("hdr", vec![]));
        assert_eq!(
            split_call("hdr(host,-1)").unwrap(),
            ("hdr", vec!["host".to_string(), "-1".to_string()])
        );
        assert_eq!(
            split_call(r#"field(2,',')"#).unwrap(),
            ("field", vec!["2".to_string(), ",".to_string()])
        );
        assert_eq!(
            split_call(r"field(2,\,)").unwrap(),
            ("field", vec!["2".to_string(), ",".to_string()])
        );
        assert!(split_call("hdr(host").is_err());
        assert!(split_call("hdr(host)x").is_err());
    }

    #[test]
    fn split_chain_rules() {
        assert_eq!(
            split_chain("req.hdr(host,1),lower,field(1,':')"),
            ["req.hdr(host,1)", "lower", "field(1,':')"]
        );
        assert_eq!(split_chain(r"str(a\,b),upper"), [r"str(a\,b)", "upper"]);
    }

    #[test]
    fn eval_chain() {
        let names = NameTable::default();
        let src = TestSource::get("/", &[("Host", "WWW.Example.com:8080")]);
        let e = Expr::compile("req.hdr(host),lower,host_only", &names).unwrap();
        let mut ev = Eval::new();
        let s = e.eval(&src, &mut ev).unwrap();
        assert_eq!(ev.value(s), Value::Str(b"www.example.com"));
        assert_eq!(e.out_type(), SmpType::Str);
        assert_eq!(e.phases(), Phases::REQ);
    }

    /// An expression with converters over the request is evaluated once while the memo is on
    /// (the same text shares the value); a clear, or the memo off, evaluates it again.
    #[test]
    fn memo_shares_a_value_until_cleared() {
        let names = NameTable::default();
        let a = Expr::compile("req.hdr(host),lower", &names).unwrap();
        let b = Expr::compile("req.hdr(host),lower", &names).unwrap();
        let other = Expr::compile("req.hdr(host),upper", &names).unwrap();
        assert!(a.memo_id().is_some());
        assert_eq!(a.memo_id(), b.memo_id());
        assert_ne!(a.memo_id(), other.memo_id());
        // Not memoized: no converter, a variable, a converter that reads a variable.
        for text in [
            "req.hdr(host)",
            "var(txn.x),lower",
            "req.hdr(host),concat(,txn.x)",
        ] {
            let e = Expr::compile(text, &names).unwrap();
            assert_eq!(e.memo_id(), None, "{text}");
        }
        let mut ev = Eval::new();
        let first = TestSource::get("/", &[("Host", "One.Example")]);
        let second = TestSource::get("/", &[("Host", "Two.Example")]);
        let text =
            |s: Option<Sample<'_>>, ev: &Eval| s.map(|s| ev.value(s).as_bytes().unwrap().to_vec());
        ev.memo.start();
        let s = a.eval(&first, &mut ev);
        assert_eq!(text(s, &ev).as_deref(), Some(&b"one.example"[..]));
        // The recorded value, not the source's (the runtime clears the memo on any edit).
        let s = b.eval(&second, &mut ev);
        assert_eq!(text(s, &ev).as_deref(), Some(&b"one.example"[..]));
        let s = other.eval(&second, &mut ev);
        assert_eq!(text(s, &ev).as_deref(), Some(&b"TWO.EXAMPLE"[..]));
        ev.memo.clear();
        let s = b.eval(&second, &mut ev);
        assert_eq!(text(s, &ev).as_deref(), Some(&b"two.example"[..]));
        // No value is recorded too.
        let none = TestSource::get("/", &[]);
        ev.memo.clear();
        assert_eq!(a.eval(&none, &mut ev), None);
        assert_eq!(a.eval(&first, &mut ev), None);
        ev.memo.stop();
        let s = a.eval(&first, &mut ev);
        assert_eq!(text(s, &ev).as_deref(), Some(&b"one.example"[..]));
    }

    #[test]
    fn type_errors_name_the_converter() {
        let names = NameTable::default();
        let e = Expr::compile("always_true,ipmask(24)", &names).unwrap_err();
        assert!(e.message.contains("converter 'ipmask'"), "{e}");
        assert!(e.message.contains("boolean"), "{e}");
        let e = Expr::compile("path,lwer", &names).unwrap_err();
        assert!(e.message.contains("unknown converter 'lwer'"), "{e}");
        assert!(e.message.contains("did you mean 'lower'"), "{e}");
    }
}

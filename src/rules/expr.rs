//! Sample expressions: `fetch[,conv(args)]*`, split, compiled and type-checked once.
//!
//! Why here: the same expression syntax serves ACLs, `http-request set-header ... %[expr]`,
//! `use_backend %[expr]`, `set-var` and log formats, so its parsing (HAProxy's argument
//! rules: `name(a,b)`, quotes and backslash escapes inside arguments, converters chained with
//! commas) and its type check (each converter's input against the previous output, through
//! the cast table) live in one place. Evaluation walks a flat list: one fetch, then each
//! converter, reusing the caller's [`Eval`] buffers.

use super::conv::Conv;
use super::fetch::{Fetch, Iter};
use super::sample::{can_cast, Eval, Sample, SmpType};
use super::source::Source;
use super::{err, Names, Phases, RuleError};

/// Splits `name(arg1,arg2)` into the name and its arguments, unquoting them: `'...'` and
/// `"..."` quote, `\x` escapes `x`. A name without parentheses has no arguments.
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
            (_, '\\') => {
                if let Some((_, n)) = chars.next() {
                    cur.push(n);
                }
            }
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
}

impl Expr {
    /// Compiles `fetch[,conv]*`, resolving names and checking types.
    pub fn compile(word: &str, names: &dyn Names) -> Result<Expr, RuleError> {
        let parts = split_chain(word);
        let fetch = Fetch::compile(parts[0], names)?;
        Self::with_fetch(fetch, &parts[1..], names)
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
    pub fn eval<'a>(&'a self, src: &'a dyn Source, ev: &mut Eval) -> Option<Sample<'a>> {
        let s = self.fetch.fetch(src, ev, &mut Iter::first())?;
        self.convert(s, src, ev)
    }

    fn convert<'a>(
        &'a self,
        mut s: Sample<'a>,
        src: &'a dyn Source,
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
    pub(crate) fn eval_each<'a>(
        &'a self,
        src: &'a dyn Source,
        ev: &mut Eval,
        f: &mut dyn FnMut(Sample<'a>, &mut Eval) -> bool,
    ) -> (bool, bool) {
        let mut it = Iter::all();
        let mut any = false;
        while let Some(s) = self.fetch.fetch(src, ev, &mut it) {
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

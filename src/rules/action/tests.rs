//! Unit tests of action parsing: every family compiles to the expected model.

use super::*;
use crate::rules::NameTable;

fn names() -> NameTable {
    NameTable {
        backends: vec![("web".into(), vec!["s1".into()])],
        userlists: vec!["ul".into()],
        ..NameTable::default()
    }
}

fn words(s: &str) -> Vec<String> {
    s.split(' ').map(str::to_string).collect()
}

fn with<R>(f: impl FnOnce(&mut Compiler<'_>) -> R) -> R {
    let n = names();
    let acls = Acls::new();
    let mut c = Compiler {
        names: &n,
        acls: &acls,
        has_backend: true,
        experimental: true,
        req_captures: 0,
        res_captures: 0,
        warnings: Vec::new(),
    };
    f(&mut c)
}

fn req(s: &str) -> Result<HttpReqAction, String> {
    with(|c| {
        compile_http_request(&words(s), c)
            .map(|r| r.0)
            .map_err(|e| e.message)
    })
}

fn res(s: &str) -> Result<HttpResAction, String> {
    with(|c| {
        compile_http_response(&words(s), c)
            .map(|r| r.0)
            .map_err(|e| e.message)
    })
}

#[test]
fn http_request_actions() {
    assert!(matches!(req("allow"), Ok(HttpReqAction::Allow)));
    assert!(matches!(req("reject"), Ok(HttpReqAction::Reject)));
    match req("deny deny_status 429 content-type text/plain string slow hdr X-A %[src]") {
        Ok(HttpReqAction::Deny(r)) => {
            assert_eq!(r.status, 429);
            assert_eq!(r.content_type.as_deref(), Some("text/plain"));
            assert!(matches!(r.body, ReplyBody::Bytes(ref b) if b == b"slow"));
            assert_eq!(r.headers.len(), 1);
        }
        other => panic!("{other:?}"),
    }
    assert!(
        matches!(req("deny"), Ok(HttpReqAction::Deny(ref r)) if r.status == 403 && r.is_default())
    );
    assert!(matches!(req("tarpit"), Ok(HttpReqAction::Tarpit(ref r)) if r.status == 500));
    assert!(matches!(req("return"), Ok(HttpReqAction::Return(ref r)) if r.status == 200));
    assert!(
        matches!(req("auth realm Private"), Ok(HttpReqAction::Auth { realm: Some(ref r) }) if r == "Private")
    );
    match req("redirect scheme https code 301 drop-query") {
        Ok(HttpReqAction::Redirect(r)) => {
            assert_eq!(r.kind, RedirectKind::Scheme);
            assert_eq!(r.code, 301);
            assert!(r.drop_query);
            assert_eq!(r.target.literal(), Some(&b"https"[..]));
        }
        other => panic!("{other:?}"),
    }
    match req("set-header Connection keep-alive") {
        Ok(HttpReqAction::Header(HeaderAction::Set { name, value })) => {
            assert_eq!(name, "Connection");
            assert_eq!(value.literal(), Some(&b"keep-alive"[..]));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        req("add-header X-Client %[src]"),
        Ok(HttpReqAction::Header(HeaderAction::Add { .. }))
    ));
    assert!(matches!(
        req("del-header X-A -m beg"),
        Ok(HttpReqAction::Header(HeaderAction::Del {
            name: NameMatch::Prefix(_)
        }))
    ));
    assert!(matches!(
        req("replace-header Host (.*) x\\1"),
        Ok(HttpReqAction::Header(HeaderAction::Replace { .. }))
    ));
    assert!(matches!(
        req("replace-value X ^a b"),
        Ok(HttpReqAction::Header(HeaderAction::ReplaceValue { .. }))
    ));
    assert!(matches!(
        req("set-path /x%[path]"),
        Ok(HttpReqAction::SetPath(_))
    ));
    assert!(matches!(
        req("set-method GET"),
        Ok(HttpReqAction::SetMethod(_))
    ));
    assert!(matches!(
        req("replace-path ^/a/(.*) /\\1"),
        Ok(HttpReqAction::ReplacePath { .. })
    ));
    match req("set-var(txn.host) req.hdr(host),lower") {
        Ok(HttpReqAction::Var(VarAction::Set { var, .. })) => {
            assert_eq!((var.scope, var.name.as_str()), (Scope::Txn, "host"));
        }
        other => panic!("{other:?}"),
    }
    assert!(matches!(
        req("set-var-fmt(req.a) x-%[src]"),
        Ok(HttpReqAction::Var(VarAction::SetFmt { .. }))
    ));
    assert!(matches!(
        req("unset-var(sess.a)"),
        Ok(HttpReqAction::Var(VarAction::Unset { .. }))
    ));
    assert!(matches!(
        req("capture req.hdr(host) len 10"),
        Ok(HttpReqAction::Capture {
            slot: CaptureSlot::New { len: 10 },
            ..
        })
    ));
    assert!(matches!(
        req("set-log-level silent"),
        Ok(HttpReqAction::SetLogLevel(LogLevel::Silent))
    ));
    assert!(matches!(
        req("set-log-level err"),
        Ok(HttpReqAction::SetLogLevel(LogLevel::Level(3)))
    ));
    assert!(matches!(
        req("normalize-uri path-strip-dotdot full"),
        Ok(HttpReqAction::NormalizeUri(Normalizer::PathStripDotdot {
            full: true
        }))
    ));
    assert!(matches!(
        req("early-hint Link </a.css>"),
        Ok(HttpReqAction::EarlyHint { .. })
    ));
    assert!(matches!(
        req("set-timeout server 5s"),
        Ok(HttpReqAction::SetTimeout {
            which: TimeoutKind::Server,
            value: TimeValue::Fixed(_)
        })
    ));
    assert!(matches!(
        req("set-timeout tunnel int(5000)"),
        Ok(HttpReqAction::SetTimeout {
            value: TimeValue::Expr(_),
            ..
        })
    ));
    assert!(matches!(
        req("set-dst-port int(80)"),
        Ok(HttpReqAction::SetDstPort(_))
    ));
    assert!(matches!(
        req("wait-for-body time 1s at-least 1k"),
        Ok(HttpReqAction::WaitForBody {
            at_least: Some(1024),
            ..
        })
    ));
}

#[test]
fn http_request_errors() {
    let e = |s: &str| req(s).unwrap_err();
    assert!(e("frob").contains("unknown action 'frob'"));
    assert!(e("set-heder X y").contains("did you mean 'set-header'"));
    // The test names have no stick table: tracking needs one.
    assert!(e("track-sc0 src").contains("no stick table"));
    assert!(e("track-sc3 src").contains("exceeding 2"));
    assert!(e("sc-inc-gpc0").contains("parentheses"));
    assert!(e("use-service x").contains("does not support yet"));
    assert!(e("lua.foo").contains("does not support yet"));
    assert!(e("allow extra").contains("found 'extra'"));
    assert!(e("set-header X").contains("expects"));
    assert!(e("replace-path ( x").contains("bad regular expression"));
    assert!(e("return string abc").contains("content type"));
    assert!(e("return status 99").contains("status code"));
    assert!(e("return status 204 content-type t string x").contains("no body"));
    assert!(e("redirect location /x code 304").contains("304"));
    assert!(e("set-var(txt.x) src").contains("invalid variable name"));
    assert!(e("set-header X %[res.hdr(a)]").contains("not available here"));
    assert!(e("capture src id 0").contains("capture id '0'"));
}

#[test]
fn response_and_tcp_actions() {
    assert!(matches!(
        res("set-status 503 reason Busy"),
        Ok(HttpResAction::SetStatus {
            status: 503,
            reason: Some(_)
        })
    ));
    assert!(matches!(res("deny"), Ok(HttpResAction::Deny(ref r)) if r.status == 502));
    assert!(matches!(
        res("set-header X %[status]"),
        Ok(HttpResAction::Header(_))
    ));
    assert!(res("capture res.hdr(x) len 4")
        .unwrap_err()
        .contains("expects 'id'"));
    let after = with(|c| compile_http_after_response(&words("set-status 200"), c).map(|r| r.0));
    assert!(matches!(
        after,
        Ok(HttpAfterAction::SetStatus { status: 200, .. })
    ));
    let after = with(|c| compile_http_after_response(&words("deny"), c).map(|r| r.0));
    assert!(after.unwrap_err().message.contains("unknown action 'deny'"));
    let tcp = |p, s: &str| {
        with(|c| {
            compile_tcp_request(p, &words(s), c)
                .map(|r| r.0)
                .map_err(|e| e.message)
        })
    };
    assert!(matches!(
        tcp(TcpPhase::Content, "reject"),
        Ok(TcpReqAction::Reject)
    ));
    assert!(matches!(
        tcp(TcpPhase::Connection, "accept"),
        Ok(TcpReqAction::Accept)
    ));
    assert!(matches!(
        tcp(TcpPhase::Content, "capture src len 10"),
        Ok(TcpReqAction::Capture { len: 10, .. })
    ));
    assert!(tcp(TcpPhase::Connection, "capture src len 10")
        .unwrap_err()
        .contains("not allowed"));
    assert!(matches!(
        tcp(TcpPhase::Connection, "expect-proxy layer4 if TRUE"),
        Ok(TcpReqAction::ExpectProxy)
    ));
    assert!(tcp(TcpPhase::Connection, "expect-proxy layer7")
        .unwrap_err()
        .contains("only supports 'layer4' (got 'layer7')"));
    assert!(tcp(TcpPhase::Session, "expect-proxy layer4")
        .unwrap_err()
        .contains("is not allowed in 'tcp-request session' rules"));
    assert!(tcp(TcpPhase::Connection, "expect-netscaler-cip layer4")
        .unwrap_err()
        .contains("not support yet"));
    let tres = with(|c| compile_tcp_response(&words("reject if TRUE"), c).map(|r| r.0));
    assert!(matches!(tres, Ok(TcpResAction::Reject)));
    let close = with(|c| compile_tcp_response(&words("close"), c).map(|r| r.0));
    assert!(close.is_err());
    let r = with(|c| {
        compile_redirect(
            &words("prefix http://m.example.com code 302 set-cookie A=1"),
            c,
        )
        .map(|r| r.0)
    });
    let r = r.unwrap();
    assert_eq!(
        (r.kind, r.code, r.set_cookie.as_deref()),
        (RedirectKind::Prefix, 302, Some("A=1"))
    );
}

#[test]
fn conditions_are_split_off() {
    let (a, cond) = with(|c| compile_http_request(&words("deny if { path /x }"), c)).unwrap();
    assert!(matches!(a, HttpReqAction::Deny(_)));
    assert!(cond.is_some());
    let e = with(|c| compile_http_request(&words("deny if nosuch"), c)).unwrap_err();
    assert!(e.message.contains("nosuch"), "{}", e.message);
}

//! Protocol checks: `option mysql-check`, `pgsql-check`, `redis-check`, `smtpchk` and
//! `ldap-check`. HAProxy implements each as a predefined `tcp-check` rule set (its
//! `tcpcheck.c`); Bascule builds the same steps here, once, with the option's arguments already
//! in the bytes to send (HAProxy keeps them in check variables that its format strings read),
//! so the checker runs them like any `tcp-check` script and reports what HAProxy reports.

use super::Problem;
use crate::config::model::{
    CheckStatus, CheckText, CustomExpect, ExpectReport, ProtoCheck, TcpCheckStep, TcpExpect,
};

/// The rule set of protocol check option `name` with its arguments; `None` when `name` is not
/// one.
pub fn build(name: &str, args: &[String]) -> Option<Result<ProtoCheck, Problem>> {
    let (name, steps): (&'static str, Result<Vec<TcpCheckStep>, Problem>) = match name {
        "redis-check" => ("redis-check", no_args(args).map(|()| redis())),
        "smtpchk" => ("smtpchk", smtp(args)),
        "pgsql-check" => ("pgsql-check", pgsql(args)),
        "mysql-check" => ("mysql-check", mysql(args)),
        "ldap-check" => ("ldap-check", no_args(args).map(|()| ldap())),
        _ => return None,
    };
    Some(steps.map(|steps| ProtoCheck { name, steps }))
}

fn no_args(args: &[String]) -> Result<(), Problem> {
    match args.first() {
        None => Ok(()),
        Some(w) => Err(format!("unexpected extra word '{w}'").into()),
    }
}

fn expect(pattern: TcpExpect, min_recv: Option<usize>, report: ExpectReport) -> TcpCheckStep {
    TcpCheckStep::Expect {
        negate: false,
        pattern,
        min_recv,
        report,
    }
}

/// `%[res.payload(FROM,0),ltrim(' '),cut_crlf]` and its variants.
fn reply(from: usize, ltrim: bool, cut_crlf: bool) -> Option<CheckText> {
    Some(CheckText::Reply {
        from,
        ltrim,
        cut_crlf,
    })
}

fn fixed(text: &str) -> Option<CheckText> {
    Some(CheckText::Fixed(text.to_string()))
}

/// PING, answered `+PONG`; an error reply is shown as the server wrote it.
fn redis() -> Vec<TcpCheckStep> {
    vec![
        TcpCheckStep::Send(b"*1\r\n$4\r\nPING\r\n".to_vec()),
        expect(
            TcpExpect::Bytes(b"+PONG\r\n".to_vec()),
            None,
            ExpectReport {
                error_status: Some(CheckStatus::L7Sts),
                on_error: reply(0, false, true),
                on_success: fixed("Redis server is ok"),
                ..Default::default()
            },
        ),
    ]
}

/// `smtpchk [HELO|EHLO DOMAIN]`: the greeting must be a 2xx, then the greeting command (by
/// default `HELO localhost`) and `QUIT` must be answered 2xx; the code and text of the last
/// answer are reported.
fn smtp(args: &[String]) -> Result<Vec<TcpCheckStep>, Problem> {
    if args.len() > 2 {
        return Err(format!("unexpected extra word '{}'", args[2]).into());
    }
    let cmd = match args {
        [verb, domain] if verb == "HELO" || verb == "EHLO" => format!("{verb} {domain}"),
        // As HAProxy, anything else falls back on the default greeting.
        _ => "HELO localhost".to_string(),
    };
    let status_reply = || ExpectReport {
        error_status: Some(CheckStatus::L7Sts),
        on_error: reply(4, true, true),
        status_code: Some((0, 3)),
        ..Default::default()
    };
    let regex = |r: &str| TcpExpect::Regex(r.to_string());
    Ok(vec![
        TcpCheckStep::Connect { port: None },
        expect(
            regex("^[0-9]{3}[ \r]"),
            Some(4),
            ExpectReport {
                error_status: Some(CheckStatus::L7Rsp),
                on_error: reply(0, false, true),
                ..Default::default()
            },
        ),
        expect(regex("^2[0-9]{2}[ \r]"), Some(4), status_reply()),
        TcpCheckStep::Send(format!("{cmd}\r\n").into_bytes()),
        expect(
            regex("^(2[0-9]{2}-[^\r]*\r\n)*2[0-9]{2}[ \r]"),
            None,
            ExpectReport {
                on_success: reply(4, true, true),
                ..status_reply()
            },
        ),
        TcpCheckStep::Send(b"QUIT\r\n".to_vec()),
        expect(
            regex("^2[0-9]{2}[- \r]"),
            Some(4),
            ExpectReport {
                on_success: reply(4, true, true),
                ..status_reply()
            },
        ),
    ])
}

/// `pgsql-check user USER`: a startup message for USER; an error message (`E`) fails with its
/// text, an authentication request (`R`) of a known kind passes.
fn pgsql(args: &[String]) -> Result<Vec<TcpCheckStep>, Problem> {
    let user = match args {
        [kw, user] if kw == "user" => user,
        [_, _] => return Err("only supports optional values: 'user'".into()),
        [_, _, extra, ..] => return Err(format!("unexpected extra word '{extra}'").into()),
        _ => return Err("expects 'user <username>' as argument".into()),
    };
    let len = u32::try_from(15 + user.len()).map_err(|_| "user name too long")?;
    let mut startup = len.to_be_bytes().to_vec();
    startup.extend_from_slice(&[0, 3, 0, 0]);
    startup.extend_from_slice(b"user\0");
    startup.extend_from_slice(user.as_bytes());
    startup.extend_from_slice(&[0, 0]);
    Ok(vec![
        TcpCheckStep::Connect { port: None },
        TcpCheckStep::Send(startup),
        TcpCheckStep::Expect {
            negate: true,
            pattern: TcpExpect::Regex("^E".to_string()),
            min_recv: Some(5),
            report: ExpectReport {
                error_status: Some(CheckStatus::L7Rsp),
                on_error: reply(6, false, false),
                ..Default::default()
            },
        },
        expect(
            TcpExpect::HexRegex(
                "^52000000[A-Z0-9]{2}000000(00|02|03|04|05|06|07|09|0A)".to_string(),
            ),
            Some(9),
            ExpectReport {
                error_status: Some(CheckStatus::L7Sts),
                on_success: fixed("PostgreSQL server is ok"),
                on_error: fixed("PostgreSQL unknown error"),
                ..Default::default()
            },
        ),
    ])
}

/// `mysql-check [user USER [post-41|pre-41]]`: without a user, the server's handshake alone;
/// with one, a login as USER (then `COM_QUIT`), whose answer must not be an error packet.
fn mysql(args: &[String]) -> Result<Vec<TcpCheckStep>, Problem> {
    if args.len() > 3 {
        return Err(format!("unexpected extra word '{}'", args[3]).into());
    }
    let handshake = expect(
        TcpExpect::Custom(CustomExpect::MysqlHandshake),
        None,
        ExpectReport::default(),
    );
    let Some(kw) = args.first() else {
        return Ok(vec![TcpCheckStep::Connect { port: None }, handshake]);
    };
    if kw != "user" {
        return Err(format!("only supports optional values: 'user' (got '{kw}')").into());
    }
    let user = args.get(1).ok_or("'user' expects <username> as argument")?;
    let post41 = match args.get(2).map(String::as_str) {
        None | Some("post-41") => true,
        Some("pre-41") => false,
        Some(other) => {
            return Err(format!(
                "keyword 'user' only supports 'post-41' and 'pre-41' (got '{other}')"
            )
            .into())
        }
    };
    // The client authentication packet: length (3 bytes, little-endian) and sequence id 1,
    // capabilities, maximum packet size (and, from 4.1 on, the character set and 23 zero
    // bytes), the user name, an empty password; then COM_QUIT.
    let body_len = user.len() + if post41 { 7 + 27 } else { 7 };
    let len = u32::try_from(body_len).map_err(|_| "user name too long")?;
    let mut login = len.to_le_bytes()[..3].to_vec();
    login.push(1);
    if post41 {
        login.extend_from_slice(&[0x00, 0x82, 0x00, 0x00, 0x00, 0x80, 0x00, 0x01, 0x21]);
        login.extend_from_slice(&[0; 23]);
    } else {
        login.extend_from_slice(&[0x00, 0x80, 0x00, 0x00, 0x01]);
    }
    login.extend_from_slice(user.as_bytes());
    login.extend_from_slice(&[0, 0, 0x01, 0, 0, 0, 0x01]);
    Ok(vec![
        TcpCheckStep::Connect { port: None },
        TcpCheckStep::Send(login),
        handshake,
        expect(
            TcpExpect::Custom(CustomExpect::MysqlOk),
            None,
            ExpectReport::default(),
        ),
    ])
}

/// An anonymous LDAPv3 bind request; the response must be a bind response with result 0.
fn ldap() -> Vec<TcpCheckStep> {
    vec![
        TcpCheckStep::Send(vec![
            0x30, 0x0C, 0x02, 0x01, 0x01, 0x60, 0x07, 0x02, 0x01, 0x03, 0x04, 0x00, 0x80, 0x00,
        ]),
        expect(
            TcpExpect::HexRegex("^30".to_string()),
            Some(14),
            ExpectReport {
                on_error: fixed("Not LDAPv3 protocol"),
                ..Default::default()
            },
        ),
        expect(
            TcpExpect::Custom(CustomExpect::LdapBind),
            None,
            ExpectReport::default(),
        ),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    fn words(s: &str) -> Vec<String> {
        s.split_whitespace().map(str::to_string).collect()
    }

    fn sent(steps: &[TcpCheckStep]) -> Vec<Vec<u8>> {
        steps
            .iter()
            .filter_map(|s| match s {
                TcpCheckStep::Send(b) => Some(b.clone()),
                _ => None,
            })
            .collect()
    }

    #[test]
    fn login_packets_are_haproxys() {
        let pre = build("mysql-check", &words("user user pre-41"))
            .unwrap()
            .unwrap();
        assert_eq!(
            sent(&pre.steps),
            [vec![
                0x0B, 0, 0, 1, 0x00, 0x80, 0, 0, 1, b'u', b's', b'e', b'r', 0, 0, 1, 0, 0, 0, 1
            ]]
        );
        let post = build("mysql-check", &words("user user")).unwrap().unwrap();
        assert_eq!(sent(&post.steps)[0].len(), 47);
        assert_eq!(&sent(&post.steps)[0][..4], &[0x26, 0, 0, 1]);
        let pg = build("pgsql-check", &words("user postgres"))
            .unwrap()
            .unwrap();
        assert_eq!(sent(&pg.steps)[0].len(), 23);
        assert_eq!(&sent(&pg.steps)[0][..8], &[0, 0, 0, 23, 0, 3, 0, 0]);
        let smtp = build("smtpchk", &words("EHLO domain.tld"))
            .unwrap()
            .unwrap();
        assert_eq!(sent(&smtp.steps)[0], b"EHLO domain.tld\r\n");
        let smtp = build("smtpchk", &[]).unwrap().unwrap();
        assert_eq!(
            sent(&smtp.steps),
            [b"HELO localhost\r\n".to_vec(), b"QUIT\r\n".to_vec()]
        );
    }

    #[test]
    fn bad_arguments_are_refused() {
        assert!(build("pgsql-check", &[]).unwrap().is_err());
        assert!(build("mysql-check", &words("usr x")).unwrap().is_err());
        assert!(build("mysql-check", &words("user x post-42"))
            .unwrap()
            .is_err());
        assert!(build("redis-check", &words("x")).unwrap().is_err());
        assert!(build("httpchk", &[]).is_none());
    }
}

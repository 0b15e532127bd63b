//! A compiled condition of 20 ACLs evaluates without allocating.
//!
//! The rules engine promises that compiled rules cost nothing per request on the heap: names
//! are resolved to indices at compile time and converters write into the caller's reusable
//! `Eval`. This test counts every allocation of the process with a counting global allocator
//! and evaluates a condition that touches each kind of matcher (hash set, `-i` folding,
//! prefix list, regex set, IP prefix tree, integer ranges, multi-valued headers and cookies,
//! converters that make new bytes, a map). The counting allocator is `alloc_support`'s.

mod alloc_support;

use bascule::rules::source::TestBackend;
use bascule::rules::{compile_acl, compile_cond, Acls, Eval, NameTable, Polarity, TestSource};

fn words(s: &str) -> Vec<String> {
    s.split_whitespace().map(String::from).collect()
}

#[test]
fn twenty_acls_evaluate_without_allocating() {
    let dir = std::env::temp_dir().join(format!("bascule-rules-alloc-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let map = dir.join("hosts.map");
    std::fs::write(&map, "www.example.com web\napi.example.com api\n").unwrap();
    let nets = dir.join("nets.lst");
    let list: String = (0..10_000u32)
        .map(|i| format!("10.{}.{}.0/24\n", i >> 8, i & 255))
        .collect();
    std::fs::write(&nets, list).unwrap();

    let names = NameTable {
        backends: vec![("web".into(), vec!["s1".into(), "s2".into()])],
        ..Default::default()
    };
    let lines = [
        "a01 path /nope /other",
        "a02 path -i /NOPE",
        "a03 path_beg /static/ /img/",
        "a04 path_end .png .jpg .gif",
        "a05 path_reg ^/v[0-9]+/ ^/legacy/ \\.php$",
        "a06 hdr_dom(host) -i example.org",
        "a07 hdr(x-forwarded-for) -m ip 192.168.0.0/16",
        "a08 cook(session) deadbeef",
        "a09 url_param(debug) 1",
        "a10 nbsrv(web) lt 1",
        "a11 srv_is_up(web/s2) eq 1",
        "a12 method POST PUT",
        "a13 req.hdr(host),lower,map_str(MAP) api",
        "a14 req.hdr(user-agent),lower -m sub bot crawler",
        "a15 path,length gt 4096",
        "a16 req.hdr_cnt(x-forwarded-for) gt 5",
        "a17 src,ipmask(24) 10.99.99.0",
        "a18 req.hdr(host),field(1,:),upper -m str WWW.EXAMPLE.ORG",
        "a19 base,crc32 eq 1",
        "a20 src -f NETS",
    ];
    let mut acls = Acls::new();
    for l in lines {
        let l = l
            .replace("MAP", map.to_str().unwrap())
            .replace("NETS", nets.to_str().unwrap());
        let w = words(&l);
        compile_acl(&w[0], &w[1..], &names, &mut acls).unwrap_or_else(|e| panic!("{l}: {e}"));
    }
    let cond_words: Vec<String> = (1..=20).map(|i| format!("a{i:02}")).collect();
    // OR of all: every ACL is evaluated (none matches), which is the worst case.
    let mut or_words = Vec::new();
    for (i, w) in cond_words.iter().enumerate() {
        if i > 0 {
            or_words.push("||".to_string());
        }
        or_words.push(w.clone());
    }
    let (cond, _) = compile_cond(&or_words, Polarity::If, &acls, &names).unwrap();
    acls.finish();

    let mut src = TestSource::get(
        "/api/v2/users?id=7&debug=0",
        &[
            ("Host", "WWW.Example.com:8080"),
            ("User-Agent", "Mozilla/5.0"),
            ("X-Forwarded-For", "10.0.0.1, 172.16.0.1"),
            ("X-Forwarded-For", "203.0.113.9"),
            ("Cookie", "lang=fr; session=cafe"),
        ],
    );
    src.src = Some("172.31.0.7:40000".parse().unwrap());
    src.backends = vec![TestBackend {
        nbsrv: 2,
        servers: vec![(0, true, 0), (0, false, 0)],
        ..Default::default()
    }];

    let mut ev = Eval::new();
    // Warm up: the scratch buffers and the regex engine's per-thread caches grow once.
    for _ in 0..3 {
        assert!(!cond.eval(&src, &mut ev));
    }
    let before = alloc_support::allocations();
    for _ in 0..1000 {
        assert!(!cond.eval(&src, &mut ev));
    }
    let allocated = alloc_support::allocations() - before;
    assert_eq!(allocated, 0, "1000 evaluations allocated {allocated} times");

    // And the condition does match when one ACL does (the IP tree of 10,000 networks).
    src.src = Some("10.20.30.40:1".parse().unwrap());
    assert!(cond.eval(&src, &mut ev));
    std::fs::remove_dir_all(&dir).unwrap();
}

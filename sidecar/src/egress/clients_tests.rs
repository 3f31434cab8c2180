//! Tests of the clients file: parsing, credentials, host matching.

use super::*;

fn sha(token: &str) -> String {
    hex::encode(Sha256::digest(token.as_bytes()))
}

fn basic(user: &str, token: &str) -> String {
    format!(
        "Basic {}",
        base64::engine::general_purpose::STANDARD.encode(format!("{user}:{token}"))
    )
}

fn file() -> String {
    format!(
        r#"{{"version": 1, "clients": [
        {{"name": "team-a/fetch", "tokenSha256": "{}",
          "hosts": [{{"host": "PyPI.org.", "port": 443}}, {{"host": "*.example.org", "port": 443}},
                    {{"host": "bücher.example", "port": 443}}],
          "cidrs": [{{"cidr": "10.96.0.0/12", "port": 443}}],
          "plainHttpHosts": [{{"host": "example.org", "port": 80}}]}},
        {{"name": "team-b/git", "tokenSha256": "{}", "hosts": [{{"host": "github.com", "port": 443}}]}}
    ]}}"#,
        sha("tok-a"),
        sha("tok-b")
    )
}

#[test]
fn a_credential_names_its_client_in_either_encoding() {
    let clients = parse(&file()).unwrap();
    assert_eq!(clients.len(), 2);
    let a = clients
        .authenticate(Some(&basic("team-a/fetch", "tok-a")))
        .unwrap();
    assert_eq!(a.name, "team-a/fetch");
    // As the proxy URL writes it (some clients send the user name encoded).
    let a = clients
        .authenticate(Some(&basic("team-a%2Ffetch", "tok-a")))
        .unwrap();
    assert_eq!(a.name, "team-a/fetch");
    assert!(clients
        .authenticate(Some(&basic("team-a%2ffetch", "tok-a")))
        .is_some());
    // The scheme is case-insensitive; nothing else is loose.
    assert!(clients
        .authenticate(Some(
            &basic("team-a/fetch", "tok-a").replace("Basic", "basic")
        ))
        .is_some());
}

#[test]
fn a_wrong_or_missing_credential_names_nobody() {
    let clients = parse(&file()).unwrap();
    assert!(clients.authenticate(None).is_none());
    assert!(clients
        .authenticate(Some(&basic("team-a/fetch", "tok-b")))
        .is_none());
    assert!(clients
        .authenticate(Some(&basic("team-a/fetch", "")))
        .is_none());
    assert!(clients
        .authenticate(Some(&basic("team-c/none", "tok-a")))
        .is_none());
    assert!(clients.authenticate(Some("Bearer tok-a")).is_none());
    assert!(clients.authenticate(Some("Basic !!!")).is_none());
    assert!(clients
        .authenticate(Some(&format!(
            "Basic {}",
            base64::engine::general_purpose::STANDARD.encode("team-a/fetch")
        )))
        .is_none());
}

#[test]
fn hosts_match_in_one_form_and_only_on_their_port() {
    let clients = parse(&file()).unwrap();
    let a = clients.get("team-a/fetch").unwrap();
    let n = |h: &str| normalize_host(h).unwrap();
    assert!(a.may_connect(&n("pypi.org"), 443));
    assert!(a.may_connect(&n("PYPI.ORG."), 443));
    assert!(!a.may_connect(&n("pypi.org"), 80));
    assert!(!a.may_connect(&n("evilpypi.org"), 443));
    assert!(!a.may_connect(&n("pypi.org.evil.com"), 443));
    // A wildcard covers names below its domain, not the domain itself.
    assert!(a.may_connect(&n("files.example.org"), 443));
    assert!(a.may_connect(&n("a.b.example.org"), 443));
    assert!(!a.may_connect(&n("example.org"), 443));
    assert!(!a.may_connect(&n("badexample.org"), 443));
    // An IDN in the file matches its ASCII form on the wire.
    assert!(a.may_connect("xn--bcher-kva.example", 443));
    assert!(a.may_connect(&n("BÜCHER.example"), 443));
    // Plain HTTP only where listed; CONNECT rules do not grant it.
    assert!(a.may_get(&n("example.org"), 80));
    assert!(!a.may_get(&n("pypi.org"), 443));
    assert!(!a.may_get(&n("pypi.org"), 80));
    // Another client's rules are its own.
    let b = clients.get("team-b/git").unwrap();
    assert!(!b.may_connect(&n("pypi.org"), 443));
    assert!(b.may_connect(&n("github.com"), 443));
}

#[test]
fn address_blocks_are_per_port() {
    let clients = parse(&file()).unwrap();
    let a = clients.get("team-a/fetch").unwrap();
    assert!(a.cidr_allows("10.96.0.10".parse().unwrap(), 443));
    assert!(a.cidr_allows("::ffff:10.96.0.10".parse().unwrap(), 443));
    assert!(!a.cidr_allows("10.96.0.10".parse().unwrap(), 80));
    assert!(!a.cidr_allows("10.0.0.1".parse().unwrap(), 443));
}

#[test]
fn host_names_are_normalized_or_refused() {
    assert_eq!(
        normalize_host("Example.ORG.").as_deref(),
        Some("example.org")
    );
    assert_eq!(normalize_host("[::1]").as_deref(), Some("::1"));
    assert_eq!(normalize_host("127.0.0.1").as_deref(), Some("127.0.0.1"));
    assert!(normalize_host("").is_none());
    assert!(normalize_host("a b.example").is_none());
    assert!(normalize_host("a..example").is_none());
    assert!(normalize_host("a/b.example").is_none());
}

#[test]
fn bad_files_are_refused_with_a_reason() {
    let bad = |text: &str, needle: &str| {
        let err = parse(text).expect_err(text).to_string();
        assert!(err.contains(needle), "{err} lacks {needle}");
    };
    let h = sha("t");
    bad(r#"{"version": 2, "clients": []}"#, "version 2");
    bad("not json", "not a clients file");
    bad(
        &format!(
            r#"{{"version":1,"clients":[{{"name":"a/b","tokenSha256":"{h}","hosts":[{{"host":"x","port":443}}],"extra":1}}]}}"#
        ),
        "unknown field",
    );
    bad(
        r#"{"version":1,"clients":[{"name":"a/b","tokenSha256":"abc"}]}"#,
        "64 hex digits",
    );
    bad(
        &format!(
            r#"{{"version":1,"clients":[{{"name":"a/b","tokenSha256":"{h}","hosts":[{{"host":"*x.org","port":443}}]}}]}}"#
        ),
        "not a host name",
    );
    bad(
        &format!(
            r#"{{"version":1,"clients":[{{"name":"a/b","tokenSha256":"{h}","hosts":[{{"host":"10.0.0.1","port":443}}]}}]}}"#
        ),
        "approve addresses as `cidrs`",
    );
    bad(
        &format!(
            r#"{{"version":1,"clients":[{{"name":"a/b","tokenSha256":"{h}","cidrs":[{{"cidr":"10.0.0.0/33","port":443}}]}}]}}"#
        ),
        "not a CIDR",
    );
    bad(
        &format!(
            r#"{{"version":1,"clients":[{{"name":"a/b","tokenSha256":"{h}"}},{{"name":"a/b","tokenSha256":"{h}"}}]}}"#
        ),
        "listed twice",
    );
    bad(
        &format!(r#"{{"version":1,"clients":[{{"name":"a:b","tokenSha256":"{h}"}}]}}"#),
        "colon",
    );
}

//! Tests of `session::upstream`: what the server is sent for a client's request.

use super::*;

fn parse(text: &str) -> Message {
    Message::parse(Bytes::copy_from_slice(text.as_bytes())).unwrap()
}

#[test]
fn the_server_sees_the_facades_id_and_token_and_everything_else_as_sent() {
    let msg = parse(
        r#"{"jsonrpc":"2.0","id":"\u0031","method":"tools/call","params":{"name":"x","_meta":{"progressToken":"client-token","traceparent":"00-a-b-01"},"arguments":{"n":1e400}}}"#,
    );
    let out = outgoing(
        &msg,
        &RequestId::number(42),
        true,
        &mut None,
        &Adjust::default(),
    )
    .unwrap();
    let text = std::str::from_utf8(&out).unwrap();
    assert_eq!(
        text,
        r#"{"jsonrpc":"2.0","id":42,"method":"tools/call","params":{"name":"x","_meta":{"progressToken":42,"traceparent":"00-a-b-01"},"arguments":{"n":1e400}}}"#
    );
    assert!(!text.contains("client-token"));
}

#[test]
fn a_modern_server_never_hears_the_client_supports_tasks_or_its_roots() {
    let msg = parse(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/clientCapabilities":{"roots":{"listChanged":true},"extensions":{"io.modelcontextprotocol/tasks":{},"x/y":{}}},"traceparent":"00-a-b-01"}}}"#,
    );
    let adjust = Adjust {
        fit_caps: Some(false),
        ..Adjust::default()
    };
    let out = outgoing(&msg, &RequestId::number(3), false, &mut None, &adjust).unwrap();
    let text = std::str::from_utf8(&out).unwrap();
    assert!(!text.contains("io.modelcontextprotocol/tasks"), "{text}");
    assert!(!text.contains("roots"), "{text}");
    assert!(
        text.contains("x/y") && text.contains("traceparent"),
        "{text}"
    );
    // With policy roots the server is offered `roots` (the facade's own).
    let adjust = Adjust {
        fit_caps: Some(true),
        ..Adjust::default()
    };
    let out = outgoing(&msg, &RequestId::number(3), false, &mut None, &adjust).unwrap();
    let text = std::str::from_utf8(&out).unwrap();
    assert!(text.contains(r#""roots":{}"#), "{text}");
}

#[test]
fn a_request_is_written_again_for_its_capabilities_only_when_fitting_changes_them() {
    let sent = |msg: &Message, offer_roots: bool| {
        let adjust = Adjust {
            fit_caps: fit_caps(msg, offer_roots),
            ..Adjust::default()
        };
        outgoing(msg, &RequestId::number(3), false, &mut None, &adjust).unwrap()
    };
    let as_is = |msg: &Message| jsonrpc::with_id(msg, &RequestId::number(3)).unwrap();
    // Nothing to take out: the server gets the request as sent (the id
    // aside), not written again.
    let plain = parse(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/clientCapabilities":{"elicitation":{}}}, "arguments":{"m":"x"}}}"#,
    );
    assert_eq!(sent(&plain, false), as_is(&plain));
    let text = String::from_utf8(sent(&plain, true).to_vec()).unwrap();
    assert!(
        text.contains(r#""roots":{}"#),
        "offering roots adds them: {text}"
    );
    // Every way a member to take out can be spelled is caught and taken out.
    for (text, key) in [
        (r#""roots":{}"#, r#""roots""#),
        (r#""tasks":{}"#, r#""tasks""#),
        (r#""\u0074asks":{}"#, r#"asks""#),
        (r#""r\u006fots":{}"#, r#"ots""#),
        (
            r#""extensions":{"io.modelcontextprotocol/t\u0061sks":{}}"#,
            r#"sks""#,
        ),
    ] {
        let msg = parse(&format!(
            r#"{{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{{"name":"t","_meta":{{"io.modelcontextprotocol/clientCapabilities":{{{text}}}}}}}}}"#
        ));
        let out = String::from_utf8(sent(&msg, false).to_vec()).unwrap();
        assert!(!out.contains(key), "{text}: {out}");
    }
    // The capabilities' own key spelled with an escape is the same key to
    // the server: its tasks are taken out too.
    let msg = parse(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol\/clientCapabilities":{"tasks":{}}}}}"#,
    );
    let out = String::from_utf8(sent(&msg, false).to_vec()).unwrap();
    assert!(!out.contains(r#""tasks""#), "{out}");
}

#[test]
fn the_tasks_extension_reaches_the_server_only_when_kept() {
    let msg = parse(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","_meta":{"io.modelcontextprotocol/clientCapabilities":{"tasks":{"list":{}},"extensions":{"io.modelcontextprotocol/tasks":{}}}}}}"#,
    );
    let adjust = Adjust {
        fit_caps: Some(false),
        keep_tasks: true,
        ..Adjust::default()
    };
    let out = outgoing(&msg, &RequestId::number(3), false, &mut None, &adjust).unwrap();
    let text = std::str::from_utf8(&out).unwrap();
    assert!(text.contains("io.modelcontextprotocol/tasks"), "{text}");
    // The 2025-11-25 tasks capability never passes.
    assert!(!text.contains(r#""tasks":{"list""#), "{text}");
}

#[test]
fn a_retrys_answers_are_replaced_by_the_ones_the_facade_rebuilt() {
    // What the answers are is `mrtr::answers`'s to say (its tests); here:
    // the server gets them in place of the client's, or none, or nothing.
    let rebuilt = r#"{"roots_request":{"roots":[{"uri":"file:///workspace"}]}}"#;
    let msg = parse(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"t","inputResponses":{"roots_request":{"roots":[{"uri":"file:///"}]},"unasked":{}}}}"#,
    );
    let with = |answers| Adjust {
        input_responses: Some(answers),
        ..Adjust::default()
    };
    let raw = serde_json::value::RawValue::from_string(rebuilt.to_string()).unwrap();
    let out = outgoing(
        &msg,
        &RequestId::number(3),
        false,
        &mut None,
        &with(Ok(Some(raw))),
    )
    .unwrap();
    let sent: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(
        sent["params"]["inputResponses"],
        serde_json::from_str::<serde_json::Value>(rebuilt).unwrap()
    );
    let out = outgoing(
        &msg,
        &RequestId::number(3),
        false,
        &mut None,
        &with(Ok(None)),
    )
    .unwrap();
    let sent: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert!(sent["params"].get("inputResponses").is_none(), "{sent}");
    let refused = outgoing(
        &msg,
        &RequestId::number(3),
        false,
        &mut None,
        &with(Err("too large".into())),
    );
    assert_eq!(refused.unwrap_err(), "too large");
}

#[test]
fn with_tracing_the_server_gets_the_facades_span_and_the_rest_of_meta_as_sent() {
    let msg = parse(
        r#"{"jsonrpc":"2.0","id":3,"method":"tools/call","params":{"name":"x","_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-00f067aa0ba902b7-01","baggage":"k=v","other":1}}}"#,
    );
    let adjust = Adjust {
        trace: vec![(
            "traceparent",
            "00-0af7651916cd43dd8448eb211c80319c-1111111111111111-01".into(),
        )],
        ..Adjust::default()
    };
    let out = outgoing(&msg, &RequestId::number(9), false, &mut None, &adjust).unwrap();
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        r#"{"jsonrpc":"2.0","id":9,"method":"tools/call","params":{"name":"x","_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-1111111111111111-01","baggage":"k=v","other":1}}}"#
    );
    // A request without `_meta` gets one holding only the trace context.
    let msg = parse(r#"{"jsonrpc":"2.0","id":3,"method":"ping"}"#);
    let out = outgoing(&msg, &RequestId::number(10), false, &mut None, &adjust).unwrap();
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        r#"{"jsonrpc":"2.0","id":10,"method":"ping","params":{"_meta":{"traceparent":"00-0af7651916cd43dd8448eb211c80319c-1111111111111111-01"}}}"#
    );
}

#[test]
fn edits_apply_and_a_request_without_progress_keeps_its_meta() {
    let msg = parse(
        r#"{"jsonrpc":"2.0","id":7,"method":"tools/call","params":{"name":"alias","_meta":{"k":1}}}"#,
    );
    let mut rename = |p: &mut Members| p.set("name", jsonrpc::raw_string("upstream"));
    let out = outgoing(
        &msg,
        &RequestId::number(1),
        false,
        &mut Some(&mut rename),
        &Adjust::default(),
    )
    .unwrap();
    assert_eq!(
        std::str::from_utf8(&out).unwrap(),
        r#"{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":"upstream","_meta":{"k":1}}}"#
    );
}

type Answer = Result<Message, String>;

/// A request nobody answers: the sender stays alive, so only the bound ends the wait.
fn unanswered() -> (oneshot::Sender<Answer>, oneshot::Receiver<Answer>) {
    oneshot::channel()
}

const GRACE: Duration = Duration::from_millis(50);

#[tokio::test]
async fn a_cancelled_request_is_let_go_at_its_own_limit_never_recycled_at_the_grace() {
    let (_tx, rx) = unanswered();
    let start = tokio::time::Instant::now();
    let limit = start + Duration::from_millis(300);
    assert_eq!(
        outwait(rx, Bound::Limit(limit), GRACE).await,
        Settled::LetGo
    );
    // It held on as long as it could have run: the slot is not freed early.
    assert!(tokio::time::Instant::now() >= limit);
}

#[tokio::test]
async fn a_cancelled_request_answered_after_the_grace_but_within_its_limit_is_answered() {
    let (tx, rx) = unanswered();
    let limit = tokio::time::Instant::now() + Duration::from_secs(5);
    tokio::spawn(async move {
        tokio::time::sleep(GRACE * 3).await;
        let _ = tx.send(Err("late".into()));
    });
    assert_eq!(
        outwait(rx, Bound::Limit(limit), GRACE).await,
        Settled::Answered
    );
}

#[tokio::test]
async fn a_timed_out_request_unanswered_past_the_grace_gets_the_server_recycled() {
    let (_tx, rx) = unanswered();
    let start = tokio::time::Instant::now();
    assert_eq!(outwait(rx, Bound::Grace, GRACE).await, Settled::Recycle);
    assert!(start.elapsed() >= GRACE);
}

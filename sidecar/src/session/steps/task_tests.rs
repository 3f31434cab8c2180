use super::*;

fn sealed(seal: &StateSeal, caller: &str, exp: u64) -> String {
    seal.seal(&Claims {
        kind: StateKind::Task,
        caller: caller.into(),
        request: task_binding("slow"),
        exp,
        approved: false,
        upstream: None,
        park: None,
        owner: None,
        nonce: Some(request_state::nonce()),
        roots_keys: Vec::new(),
        task: Some("upstream-1".into()),
        tool: Some("slow".into()),
    })
}

#[test]
fn a_task_id_opens_only_for_its_caller_unaltered_and_in_time() {
    let seal = StateSeal::random();
    let later = request_state::now() + 60;
    let id = sealed(&seal, "alice", later);
    let claims = open(&seal, &id, "alice").unwrap();
    assert_eq!(claims.task.as_deref(), Some("upstream-1"));
    assert_eq!(
        open(&seal, &id, "bob").unwrap_err(),
        TaskIdError::OtherCaller
    );
    // One character changed anywhere: not the facade's any more.
    let mut altered = id.clone().into_bytes();
    let i = altered.len() / 2;
    altered[i] = if altered[i] == b'A' { b'B' } else { b'A' };
    let altered = String::from_utf8(altered).unwrap();
    assert_eq!(
        open(&seal, &altered, "alice").unwrap_err(),
        TaskIdError::Tampered
    );
    // The server's own id, or another facade's seal.
    assert_eq!(
        open(&seal, "upstream-1", "alice").unwrap_err(),
        TaskIdError::Tampered
    );
    assert_eq!(
        open(&StateSeal::random(), &id, "alice").unwrap_err(),
        TaskIdError::Tampered
    );
    let old = sealed(&seal, "alice", request_state::now() - 1);
    assert_eq!(
        open(&seal, &old, "alice").unwrap_err(),
        TaskIdError::Expired
    );
}

#[test]
fn a_request_state_is_not_a_task_id() {
    let seal = StateSeal::random();
    let state = seal.seal(&Claims {
        kind: StateKind::Approval,
        caller: "alice".into(),
        request: task_binding("slow"),
        exp: request_state::now() + 60,
        approved: true,
        upstream: None,
        park: None,
        owner: None,
        nonce: Some(request_state::nonce()),
        roots_keys: Vec::new(),
        task: Some("upstream-1".into()),
        tool: Some("slow".into()),
    });
    assert_eq!(
        open(&seal, &state, "alice").unwrap_err(),
        TaskIdError::Tampered
    );
}

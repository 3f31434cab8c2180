//! Tests of `crate::capabilities`: names, the digest over names and workload, the approval rules.
use super::*;
use crate::egress_scope::ClusterRanges;

fn sandbox(yaml: &str) -> SandboxProfileSpec {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn tools(yaml: &str) -> ToolProfileSpec {
    serde_yaml_ng::from_str(yaml).unwrap()
}

fn set(names: &[&str]) -> BTreeSet<String> {
    names.iter().map(|s| s.to_string()).collect()
}

#[test]
fn pending_is_read_from_the_recorded_condition() {
    let mut server: MCPServer = serde_yaml_ng::from_str(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: s, namespace: n}\nspec: {image: i, toolProfileRef: {name: p}}\n",
    )
    .unwrap();
    assert!(!is_pending(&server), "no status yet");
    let condition = |reason: &str| k8s_openapi::apimachinery::pkg::apis::meta::v1::Condition {
        type_: "CapabilitiesApproved".into(),
        status: "False".into(),
        reason: reason.into(),
        message: String::new(),
        observed_generation: None,
        last_transition_time: k8s_openapi::apimachinery::pkg::apis::meta::v1::Time(
            Default::default(),
        ),
    };
    server.status = Some(MCPServerStatus {
        conditions: vec![condition("PendingApproval")],
        ..Default::default()
    });
    assert!(is_pending(&server));
    server.status = Some(MCPServerStatus {
        conditions: vec![condition("Baseline")],
        ..Default::default()
    });
    assert!(!is_pending(&server));
}

#[test]
fn requested_names_are_stable_and_sorted() {
    let got = requested(
        &tools("{tools: [{name: rm, risk: critical}, {name: ls, risk: low}, {name: w, risk: high}, {name: x}]}"),
        &sandbox(
            "{network: {egress: {dns: true, rules: [{cidr: 203.0.113.0/24, ports: [443, 80]}], \
             presets: [npm], hosts: [{name: api.example.com, ports: [8443]}]}}, \
             workspaceAccess: readWrite, automountServiceAccountToken: true}",
        ),
        &ClusterRanges::default(),
    );
    assert_eq!(
        got.into_iter().collect::<Vec<_>>(),
        [
            "network.dns",
            "network.egress.host:api.example.com:8443",
            "network.egress.host:registry.npmjs.org:443",
            "network.egress:203.0.113.0/24:443",
            "network.egress:203.0.113.0/24:80",
            "serviceaccount.token",
            "tool:rm",
            "tool:w",
            "workspace.write",
        ]
    );
    assert!(requested(
        &ToolProfileSpec::default(),
        &SandboxProfileSpec::default(),
        &ClusterRanges::default()
    )
    .is_empty());
}

#[test]
fn names_parse_back() {
    for name in [
        "network.egress:2001:db8::/32:443",
        "network.egress.cluster:10.96.0.0/12:443",
        "network.egress.internet:0.0.0.0/0:443",
        "network.egress.internet:::/0:443",
        "network.egress.host:registry.npmjs.org:443",
        "network.dns",
        "workspace.write",
        "serviceaccount.token",
        "tool:git_push",
        "remote.write",
    ] {
        assert_eq!(Capability::parse(name).unwrap().to_string(), name);
    }
    assert_eq!(Capability::parse("network.egress:x:notaport"), None);
    assert_eq!(Capability::parse("network.egress.host::443"), None);
    assert_eq!(Capability::parse("root.shell"), None);
    assert_eq!(Capability::parse("network.egress.internet::443"), None);
    assert_eq!(
        Capability::parse("network.egress.nowhere:10.0.0.0/8:443"),
        None
    );
}

#[test]
fn a_remote_asks_for_its_hosts_and_blocks() {
    let server: MCPServer = serde_yaml_ng::from_str(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: s, namespace: n}\n\
         spec: {toolProfileRef: {name: p}, remote: {url: 'https://mcp.example.com/mcp', privateCidrs: [10.0.0.0/8], \
         auth: {facade: {clientCredentials: {tokenUrl: 'https://idp.example.com:8443/token', clientId: c, \
         clientSecretRef: {name: s, key: k}}}, rules: [{useFacade: true}]}}}\n",
    )
    .unwrap();
    assert_eq!(
        requested_remote(&server, &ClusterRanges::default())
            .into_iter()
            .collect::<Vec<_>>(),
        [
            "network.dns",
            "network.egress.host:idp.example.com:8443",
            "network.egress.host:mcp.example.com:443",
            "network.egress:10.0.0.0/8:443",
            "network.egress:10.0.0.0/8:8443",
        ]
    );
    let by_address: MCPServer = serde_yaml_ng::from_str(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: s}\n\
         spec: {toolProfileRef: {name: p}, remote: {url: 'https://203.0.113.7:8443/mcp'}}\n",
    )
    .unwrap();
    assert_eq!(
        requested_remote(&by_address, &ClusterRanges::default())
            .into_iter()
            .collect::<Vec<_>>(),
        ["network.egress:203.0.113.7/32:8443"]
    );
    let writes: MCPServer = serde_yaml_ng::from_str(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: s}\n\
         spec: {toolProfileRef: {name: p}, remote: {url: 'https://203.0.113.7/mcp', writes: true}}\n",
    )
    .unwrap();
    assert_eq!(
        requested_remote(&writes, &ClusterRanges::default())
            .into_iter()
            .collect::<Vec<_>>(),
        ["network.egress:203.0.113.7/32:443", "remote.write"]
    );
}

fn parts(pairs: &[(&str, &str)]) -> Parts {
    pairs
        .iter()
        .map(|(k, v)| (k.to_string(), v.to_string()))
        .collect()
}

#[test]
fn digest_is_canonical() {
    let none = Parts::new();
    // sha256("a\nb\n"), the same in any language
    assert_eq!(
        digest(&set(&["b", "a"]), &none),
        "sha256:911169ddaaf146aff539f58c26c489af3b892dff0fe283c1c264c65ae5aa59a2"
    );
    // sha256("a\nworkload.image=sha256:1\n")
    assert_eq!(
        digest(&set(&["a"]), &parts(&[("image", "sha256:1")])),
        format!(
            "sha256:{}",
            hex::encode(Sha256::digest(b"a\nworkload.image=sha256:1\n"))
        )
    );
    assert_ne!(
        digest(&set(&["a"]), &none),
        digest(&set(&["a", "b"]), &none)
    );
    assert_ne!(
        digest(&set(&["ab"]), &none),
        digest(&set(&["a", "b"]), &none),
        "names are delimited"
    );
    // the same names for two workloads: two digests (not portable)
    assert_ne!(
        digest(&set(&["network.dns"]), &parts(&[("image", "sha256:1")])),
        digest(&set(&["network.dns"]), &parts(&[("image", "sha256:2")])),
    );
}

#[test]
fn digest_shape() {
    let d = digest(&BTreeSet::from(["network.dns".to_string()]), &Parts::new());
    assert!(is_digest(&d), "{d}");
    for bad in [
        "yes",
        "",
        "sha256:",
        "sha256:ABC",
        &d.to_uppercase(),
        &format!("{d}0"),
        &d[1..],
    ] {
        assert!(!is_digest(bad), "{bad}");
    }
}

#[test]
fn approval_rules() {
    let none = MCPServerStatus::default();
    let w = parts(&[("image", "sha256:1"), ("command", "sha256:2")]);
    let want = set(&["network.dns", "workspace.write"]);
    let d = digest(&want, &w);
    // unapproved, or a wrong digest: nothing in force
    for annotation in [None, Some("sha256:0000")] {
        let got = decide(want.clone(), w.clone(), annotation, &none);
        assert!(got.in_force.is_empty() && got.approved_digest.is_none());
        assert_eq!(got.state, ApprovalState::Pending);
        assert!(!got.hold, "nothing approved is running: nothing to keep");
    }
    // the right digest: all of it, and this workload is the approved one
    let approved = decide(want.clone(), w.clone(), Some(&d), &none);
    assert_eq!(
        (approved.in_force.clone(), approved.state.clone()),
        (want.clone(), ApprovalState::Approved)
    );
    assert_eq!(approved.approved_workload, w);
    let earlier = MCPServerStatus {
        approved_digest: Some(d.clone()),
        approved_capabilities: want.iter().cloned().collect(),
        approved_workload: w.clone(),
        ..Default::default()
    };
    // the spec asks for more: the earlier set stays, the new digest is pending
    let more = set(&["network.dns", "serviceaccount.token", "workspace.write"]);
    let got = decide(more.clone(), w.clone(), Some(&d), &earlier);
    assert_eq!(got.in_force, want);
    assert_eq!(got.approved_digest.as_deref(), Some(d.as_str()));
    assert_eq!(got.pending(), ["serviceaccount.token"]);
    assert_ne!(got.digest, d);
    assert!(!got.hold && got.changed.is_empty());
    // the workload changes, the names do not: pending, held, named
    let moved = parts(&[("image", "sha256:evil"), ("command", "sha256:2")]);
    let got = decide(want.clone(), moved.clone(), Some(&d), &earlier);
    assert_eq!(got.state, ApprovalState::Pending);
    assert!(got.hold);
    assert_eq!(got.changed, ["image"]);
    assert_eq!(
        got.approved_workload, w,
        "the approved workload is kept on record"
    );
    assert_ne!(got.digest, d);
    // approving the new digest rolls it out
    let next = decide(want.clone(), moved.clone(), Some(&got.digest), &earlier);
    assert_eq!(next.state, ApprovalState::Approved);
    assert!(!next.hold);
    // asking for less keeps only what is still asked for
    let less = decide(set(&["network.dns"]), w.clone(), Some(&d), &earlier);
    assert_eq!(less.in_force, set(&["network.dns"]));
    // removing the annotation revokes (and holds nothing)
    let revoked = decide(more, moved.clone(), None, &earlier);
    assert!(revoked.in_force.is_empty() && revoked.approved_digest.is_none());
    assert!(!revoked.hold);
    // nothing requested: the baseline, approved by definition, rolled out at once
    let baseline = decide(BTreeSet::new(), moved, Some(&d), &earlier);
    assert_eq!(baseline.state, ApprovalState::Baseline);
    assert!(!baseline.hold);
}

#[test]
fn a_held_change_says_what_changed_and_how_to_approve() {
    let server: MCPServer = serde_yaml_ng::from_str(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: s, namespace: n}\nspec: {image: i, toolProfileRef: {name: p}}\n",
    )
    .unwrap();
    let w = parts(&[("image", "sha256:1")]);
    let want = set(&["network.dns"]);
    let d = digest(&want, &w);
    let earlier = MCPServerStatus {
        approved_digest: Some(d.clone()),
        approved_capabilities: want.iter().cloned().collect(),
        approved_workload: w,
        ..Default::default()
    };
    let got = decide(want, parts(&[("image", "sha256:2")]), Some(&d), &earlier);
    let (status, reason, message) = got.condition(&server);
    assert_eq!((status, reason), ("False", HOLD_REASON));
    assert!(message.contains("(image)"), "{message}");
    assert!(message.contains("keeps running"), "{message}");
    assert!(
        message.contains(&format!(
            "kubectl annotate mcpserver s -n n mcpwarden.dev/approve={} --overwrite",
            got.digest
        )),
        "{message}"
    );
}

fn cluster() -> ClusterRanges {
    ClusterRanges {
        pods: vec!["10.244.0.0/16".into()],
        services: vec!["10.96.0.0/12".into()],
        nodes: vec!["192.168.49.0/24".into()],
    }
}

#[test]
fn broad_and_cluster_egress_are_named_as_such() {
    let sb = sandbox(
        "{network: {egress: {rules: [{cidr: 0.0.0.0/0, ports: [443, 22]}, {cidr: '::/0', ports: [443]}, \
         {cidr: 10.96.0.10/32, ports: [53]}, {cidr: 192.168.0.0/16, ports: [10250]}, \
         {cidr: 203.0.113.0/24, ports: [443]}]}}}",
    );
    let got = requested(&ToolProfileSpec::default(), &sb, &cluster());
    assert_eq!(
        got.iter().map(String::as_str).collect::<Vec<_>>(),
        [
            "network.egress.cluster:10.96.0.10/32:53",
            "network.egress.cluster:192.168.0.0/16:10250",
            "network.egress.internet:0.0.0.0/0:22",
            "network.egress.internet:0.0.0.0/0:443",
            "network.egress.internet:::/0:443",
            "network.egress:203.0.113.0/24:443",
        ]
    );
    // The same profile on a cluster whose ranges are unknown: broad is still broad.
    let unknown = requested(&ToolProfileSpec::default(), &sb, &ClusterRanges::default());
    assert!(unknown.contains("network.egress.internet:0.0.0.0/0:443"));
    assert!(unknown.contains("network.egress:10.96.0.10/32:53"));
    // A remote's private block inside the cluster is named so too.
    let server: MCPServer = serde_yaml_ng::from_str(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: s}\n\
         spec: {toolProfileRef: {name: p}, remote: {url: 'https://10.244.3.7/mcp'}}\n",
    )
    .unwrap();
    assert_eq!(
        requested_remote(&server, &cluster())
            .into_iter()
            .collect::<Vec<_>>(),
        ["network.egress.cluster:10.244.3.7/32:443"]
    );
}

#[test]
fn the_pending_message_says_broad_and_names_node_ports() {
    let server: MCPServer = serde_yaml_ng::from_str(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: s, namespace: n}\nspec: {image: i, toolProfileRef: {name: p}}\n",
    )
    .unwrap();
    let sb = sandbox(
        "{network: {egress: {rules: [{cidr: 0.0.0.0/0, ports: [443, 6443]}, {cidr: 10.244.0.0/24, ports: [10250]}, \
         {cidr: 203.0.113.0/24, ports: [22]}]}}}",
    );
    let want = requested(&ToolProfileSpec::default(), &sb, &cluster());
    let got = decide(want, Parts::new(), None, &MCPServerStatus::default());
    let (status, reason, message) = got.condition(&server);
    assert_eq!((status, reason), ("False", PENDING_REASON));
    assert!(
        message.contains("Broad egress to the internet (the cluster's pod, service and node ranges excepted): network.egress.internet:0.0.0.0/0:443, network.egress.internet:0.0.0.0/0:6443."),
        "{message}"
    );
    assert!(
        message.contains("Broad egress into the cluster's own pod, service or node ranges: network.egress.cluster:10.244.0.0/24:10250."),
        "{message}"
    );
    assert!(
        message.contains("Ports of node or control-plane services: 10250 (kubelet) in network.egress.cluster:10.244.0.0/24:10250, 6443 (kube-apiserver) in network.egress.internet:0.0.0.0/0:6443, 22 (ssh) in network.egress:203.0.113.0/24:22."),
        "{message}"
    );
    // Nothing broad, no such port: no caution.
    let plain = decide(
        set(&["network.egress:203.0.113.0/24:443"]),
        Parts::new(),
        None,
        &MCPServerStatus::default(),
    );
    assert!(!plain.condition(&server).2.contains("Broad"));
    assert!(!plain.condition(&server).2.contains("Ports of"));
}

#[test]
fn broad_egress_is_approved_apart() {
    let approved = crate::compile::Approved::from_names(&set(&[
        "network.egress.internet:0.0.0.0/0:443",
        "network.egress.cluster:10.96.0.0/12:443",
        "network.egress:203.0.113.0/24:80",
    ]));
    assert_eq!(
        approved.broad_egress,
        [("0.0.0.0/0".to_string(), 443)].into_iter().collect()
    );
    assert_eq!(
        approved.egress,
        [
            ("10.96.0.0/12".to_string(), 443),
            ("203.0.113.0/24".to_string(), 80)
        ]
        .into_iter()
        .collect()
    );
}

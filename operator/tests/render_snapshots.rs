//! `render` of every example, compared with the committed snapshot in
//! `tests/snapshots/` (whole objects, byte for byte). After an intended
//! change: `UPDATE_SNAPSHOTS=1 cargo test -p mcp-warden-operator --test
//! render_snapshots`, then review the diff.

use std::{path::PathBuf, process::Command};

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..")
}

fn render(files: &[PathBuf]) -> std::process::Output {
    render_with(files, &[])
}

fn render_with(files: &[PathBuf], env: &[(&str, &str)]) -> std::process::Output {
    render_flags(&[], files, env)
}

/// `render` with `flags` before `-f files`.
fn render_flags(flags: &[&str], files: &[PathBuf], env: &[(&str, &str)]) -> std::process::Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-warden-operator"))
        .envs(env.iter().copied())
        .arg("render")
        .args(flags)
        .arg("-f")
        .args(files)
        // A fixed image, so snapshots do not change with the crate version.
        .env(
            "MCP_WARDEN_SIDECAR_IMAGE",
            "ghcr.io/mcp-warden/sidecar:test",
        )
        .output()
        .expect("the operator binary runs")
}

/// What a render that must succeed printed.
fn printed(out: std::process::Output) -> String {
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout).unwrap()
}

/// `got` is the committed `tests/snapshots/<name>` (written instead with
/// `UPDATE_SNAPSHOTS`).
fn assert_snapshot(name: &str, got: &str) {
    let path = PathBuf::from(env!("CARGO_MANIFEST_DIR"))
        .join("tests/snapshots")
        .join(name);
    if std::env::var_os("UPDATE_SNAPSHOTS").is_some() {
        std::fs::write(&path, got).unwrap();
    } else {
        assert_eq!(
            std::fs::read_to_string(&path).ok().as_deref(),
            Some(got),
            "snapshot {} differs (UPDATE_SNAPSHOTS=1 to refresh, then review)",
            path.display()
        );
    }
}

const EXAMPLES: &[&str] = &[
    "stdio-server",
    "http-server",
    "with-secrets",
    "with-workspace",
    "with-egress",
    "replicated",
    "remote-server",
    "with-auth",
];

#[test]
fn render_matches_snapshots() {
    let update = std::env::var_os("UPDATE_SNAPSHOTS").is_some();
    let mut stale = Vec::new();
    for name in EXAMPLES {
        let out = render(&[root().join(format!("examples/{name}.yaml"))]);
        assert!(
            out.status.success(),
            "{name}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        let got = String::from_utf8(out.stdout).unwrap();
        let path =
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join(format!("tests/snapshots/{name}.yaml"));
        if update {
            std::fs::create_dir_all(path.parent().unwrap()).unwrap();
            std::fs::write(&path, &got).unwrap();
        } else if std::fs::read_to_string(&path).ok().as_deref() != Some(got.as_str()) {
            stale.push(format!(
                "{name}: snapshot {} differs from render output:\n{got}",
                path.display()
            ));
        }
    }
    assert!(stale.is_empty(), "{}", stale.join("\n"));
}

#[test]
fn render_is_deterministic_across_file_order() {
    let files: Vec<PathBuf> = EXAMPLES
        .iter()
        .map(|n| root().join(format!("examples/{n}.yaml")))
        .collect();
    let forward = render(&files);
    let reversed: Vec<PathBuf> = files.iter().rev().cloned().collect();
    let backward = render(&reversed);
    assert!(forward.status.success());
    assert_eq!(forward.stdout, backward.stdout);
    let text = String::from_utf8(forward.stdout).unwrap();
    assert_eq!(text.matches("\nkind: Deployment\n").count(), EXAMPLES.len());
}

#[test]
fn render_fails_clearly_on_a_missing_profile() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let file = dir.join("server.yaml");
    std::fs::write(
        &file,
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: s, namespace: n}\n\
         spec: {image: i, command: [x], toolProfileRef: {name: nope}}\n",
    )
    .unwrap();
    let out = render(&[file]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MCPServer n/s") && err.contains("ToolProfile \"nope\" not found"),
        "{err}"
    );
}

#[test]
fn render_shows_pending_capabilities_and_the_digest_to_approve() {
    let out = render(&[root().join("examples/with-egress.yaml")]);
    assert!(out.status.success());
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(
        text.contains("#     - network.egress.host:modelcontextprotocol.io:443  (pending)"),
        "{text}"
    );
    let digest = text
        .lines()
        .find_map(|l| l.strip_prefix("#   capabilityDigest: "))
        .expect("the digest is shown");
    assert!(text.contains(&format!(
        "kubectl annotate mcpserver fetch -n team-a mcpwarden.dev/approve={digest}"
    )));
    // What is printed is what is in force: no egress policy yet.
    assert!(!text.contains("toFQDNs"), "egress opened before approval");

    // The same file with that digest approved renders the egress rule.
    let source = std::fs::read_to_string(root().join("examples/with-egress.yaml")).unwrap();
    let approved = source.replacen(
        "kind: MCPServer\nmetadata:\n  name: fetch\n  namespace: team-a\n",
        &format!(
            "kind: MCPServer\nmetadata:\n  name: fetch\n  namespace: team-a\n  annotations: {{mcpwarden.dev/approve: \"{digest}\"}}\n"
        ),
        1,
    );
    assert_ne!(approved, source, "the annotation was inserted");
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let file = dir.join("approved.yaml");
    std::fs::write(&file, approved).unwrap();
    // Without a policy engine (render's default) the approved host opens
    // nothing; with Cilium it is a CiliumNetworkPolicy naming exactly it.
    let out = render(std::slice::from_ref(&file));
    let text = printed(out);
    assert!(text.contains("CapabilitiesApproved: True"));
    assert!(
        !text.contains("toFQDNs") && !text.contains("ipBlock"),
        "{text}"
    );
    let out = Command::new(env!("CARGO_BIN_EXE_mcp-warden-operator"))
        .args(["render", "--named-egress", "cilium", "-f"])
        .arg(&file)
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    assert!(text.contains("kind: CiliumNetworkPolicy"), "{text}");
    assert!(
        text.contains("matchName: modelcontextprotocol.io"),
        "{text}"
    );
    // With the egress proxy (a cluster without Cilium or Calico): the proxy
    // variables from the server's Secret, the NetworkPolicy rule to the
    // proxy, and the namespace's proxy Deployment, Service and NetworkPolicy.
    let out = render_flags(
        &["--egress-engine", "proxy"],
        std::slice::from_ref(&file),
        &[],
    );
    let got = printed(out);
    for wanted in [
        "name: HTTPS_PROXY",
        "name: fetch-egress-proxy",
        "# egress proxy of namespace team-a",
        "name: mcp-warden-egress",
        "- egress",
        "mcpwarden.dev/egress-proxy-client",
    ] {
        assert!(got.contains(wanted), "{wanted} missing from:\n{got}");
    }
    assert!(!got.contains("toFQDNs"), "{got}");
    assert_snapshot("with-egress-proxy.yaml", &got);
    // One proxy per server: the server's own, named after it, reached with
    // the credential of that scope; no namespace proxy.
    let out = render_flags(
        &["--egress-engine", "proxy", "--egress-proxy-scope", "server"],
        std::slice::from_ref(&file),
        &[],
    );
    let got = printed(out);
    for wanted in [
        "name: fetch-egress-proxy-credential",
        "# egress proxy of MCPServer team-a/fetch",
        "name: fetch-egress-proxy\n",
        "app.kubernetes.io/name: mcp-warden-server-egress",
        "name: fetch-egress-proxy-clients",
    ] {
        assert!(got.contains(wanted), "{wanted} missing from:\n{got}");
    }
    assert!(!got.contains("name: mcp-warden-egress"), "{got}");
    assert_snapshot("with-egress-proxy-server.yaml", &got);
}

/// The platform's collector and audit store (chart `observability.*`): the
/// facade gets the standard OTEL_* variables and `--audit-http`, the pod's
/// NetworkPolicy the egress to them (and DNS, for host names).
#[test]
fn render_with_telemetry_matches_snapshot() {
    let out = render_with(
        &[root().join("examples/stdio-server.yaml")],
        &[
            (
                "MCP_WARDEN_FACADE_OTLP_ENDPOINT",
                "http://otel-collector.observability:4317",
            ),
            ("MCP_WARDEN_FACADE_OTLP_PROTOCOL", "grpc"),
            ("MCP_WARDEN_FACADE_TRACE_SAMPLING", "0.05"),
            (
                "MCP_WARDEN_FACADE_AUDIT_HTTP",
                "http://10.96.0.50:8080/audit",
            ),
            (
                "MCP_WARDEN_FACADE_TELEMETRY_EGRESS",
                "10.96.0.0/12:4317,10.96.0.50/32:8080",
            ),
        ],
    );
    let got = printed(out);
    for wanted in [
        "OTEL_EXPORTER_OTLP_ENDPOINT",
        "parentbased_traceidratio",
        "--audit-http",
        "10.96.0.0/12",
        "port: 53",
    ] {
        assert!(got.contains(wanted), "{wanted} missing from:\n{got}");
    }
    assert_snapshot("stdio-server-telemetry.yaml", &got);
    // A bad setting is refused, naming the flag.
    let bad = render_with(
        &[root().join("examples/stdio-server.yaml")],
        &[("MCP_WARDEN_FACADE_TRACE_SAMPLING", "2")],
    );
    assert!(!bad.status.success());
    assert!(String::from_utf8_lossy(&bad.stderr).contains("--facade-trace-sampling"));
}

/// Broad egress, approved, on a cluster whose ranges the flags give: the
/// NetworkPolicy allows `0.0.0.0/0` and `::/0` on 443 with the cluster's
/// ranges (and link-local) excepted, and the approved cluster block on its
/// own rule. The snapshot is the NetworkPolicy alone.
#[test]
fn broad_egress_network_policy_matches_snapshot() {
    let ranges = [
        (
            "MCP_WARDEN_CLUSTER_POD_CIDRS",
            "10.244.0.0/16,fd00:10:244::/56",
        ),
        ("MCP_WARDEN_CLUSTER_SERVICE_CIDRS", "10.96.0.0/12"),
        ("MCP_WARDEN_CLUSTER_NODE_CIDRS", "192.168.49.0/24"),
    ];
    let source =
        std::fs::read_to_string(root().join("operator/tests/fixtures/broad-egress.yaml")).unwrap();
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let file = dir.join("server.yaml");
    std::fs::write(&file, source.replace("{ANNOTATIONS}", "{}")).unwrap();
    let out = render_with(std::slice::from_ref(&file), &ranges);
    let text = printed(out);
    for name in [
        "network.egress.internet:0.0.0.0/0:443",
        "network.egress.internet:::/0:443",
        "network.egress.cluster:10.96.40.0/24:5432",
    ] {
        assert!(
            text.contains(&format!("#     - {name}  (pending)")),
            "{name}:\n{text}"
        );
    }
    let digest = text
        .lines()
        .find_map(|l| l.strip_prefix("#   capabilityDigest: "))
        .expect("the digest is shown");
    let approved = source.replace(
        "{ANNOTATIONS}",
        &format!("{{mcpwarden.dev/approve: \"{digest}\"}}"),
    );
    std::fs::write(&file, approved).unwrap();
    let out = render_with(std::slice::from_ref(&file), &ranges);
    let text = printed(out);
    let policy = text
        .split("\n---\n")
        .find(|doc| doc.contains("\nkind: NetworkPolicy\n"))
        .expect("a NetworkPolicy");
    // Comments (the status summary) are not part of the object.
    let got: String = policy
        .lines()
        .filter(|l| !l.starts_with('#'))
        .map(|l| format!("{l}\n"))
        .collect();
    assert!(got.contains("- 10.96.0.0/12\n"), "{got}");
    assert_snapshot("broad-egress-networkpolicy.yaml", &got);
}

/// The gateway example with the three servers it names: the gateway's
/// policy, Deployment, Service and NetworkPolicy, whole (the servers'
/// objects are the other snapshots'; the signing key is made in the cluster).
#[test]
fn gateway_render_matches_snapshot() {
    let files: Vec<PathBuf> = ["http-server", "with-workspace", "stdio-server"]
        .iter()
        .map(|n| root().join(format!("examples/{n}.yaml")))
        .chain([root().join("examples/gateway/gateway.yaml")])
        .collect();
    let out = render(&files);
    let text = printed(out);
    let gateway = &text[text
        .find("# MCPGateway team-a/team-a-tools\n")
        .expect("the gateway is rendered")..];
    for wanted in [
        "--backend\n        - everything=http://everything.team-a.svc.cluster.local:8080/mcp",
        "--backend-prefix\n        - git=vcs_",
        "--gateway-key-file\n        - /etc/mcp-warden/gateway/key.pem",
        "audience: mcpwarden.dev/team-a/mcpgateway/team-a-tools",
        "mcpwarden.dev/server: files",
    ] {
        assert!(gateway.contains(wanted), "{wanted:?} missing:\n{gateway}");
    }
    assert!(
        !gateway.contains("kind: Secret"),
        "no key material is rendered"
    );
    assert_snapshot("gateway.yaml", gateway);
}

#[test]
fn a_gateway_that_cannot_be_built_fails_render_with_its_reason() {
    let scratch = tempfile::tempdir().unwrap();
    let dir = scratch.path();
    let file = dir.join("gw.yaml");
    std::fs::write(
        &file,
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: git, namespace: team-a}\n\
         spec: {image: i, command: [x], toolProfileRef: {name: p}}\n---\n\
         apiVersion: mcpwarden.dev/v1alpha1\nkind: ToolProfile\nmetadata: {name: p, namespace: team-a}\nspec: {tools: [{name: a}]}\n---\n\
         apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPGateway\nmetadata: {name: gw, namespace: team-a}\n\
         spec: {backends: [{name: git, prefix: none}]}\n",
    )
    .unwrap();
    let out = render(&[file]);
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("MCPGateway team-a/gw: PrefixNoneUnproven"),
        "{err}"
    );
}

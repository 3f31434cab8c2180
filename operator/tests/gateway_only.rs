//! `spec.onlyThroughGateway` through the pure pipeline (validate → compile →
//! build): the NetworkPolicy admits the facade port only from the named
//! gateway's pods (the metrics port as before), and the compiled policy's
//! `auth` lets in that gateway's assertions and nothing else
//! (`gatewaysOnly`) — so a caller that reaches the pod around the gateway
//! is refused where NetworkPolicy is not enforced too.

mod common;

use mcp_warden_crds::{AuthConfig, MCPServer, SandboxProfileSpec, ToolProfileSpec, TrustedGateway};
use mcp_warden_operator::config::{BuildConfig, TrustedGatewayKey};
use mcp_warden_operator::plan;
use serde_json::{json, Value};

fn server(extra: &str) -> MCPServer {
    serde_yaml_ng::from_str(&format!(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: git, namespace: team-a, uid: u-1}}\n\
         spec: {{image: i, command: [x], toolProfileRef: {{name: tp}}{extra}}}\n"
    ))
    .unwrap()
}

fn key(name: &str) -> TrustedGatewayKey {
    TrustedGatewayKey {
        name: name.into(),
        issuer: format!("mcpwarden.dev/team-a/mcpgateway/{name}"),
        public_key_pem: "-----BEGIN PUBLIC KEY-----\nx\n-----END PUBLIC KEY-----\n".into(),
        caller_issuers: vec!["static".into()],
    }
}

/// Plan `server` with a profile that has callers of its own (a static
/// token) while the gateways `trusted` select it.
fn plan_with(server: &MCPServer, trusted: &[&str]) -> plan::Plan {
    let tools: ToolProfileSpec = serde_yaml_ng::from_str(
        "{tools: [{name: git_log}], auth: {staticTokens: [{secretName: t, key: k, subject: alice}]}}",
    )
    .unwrap();
    let sandbox = SandboxProfileSpec::default();
    let inputs = common::inputs(server, Some(&tools), Some(&sandbox));
    let config = BuildConfig {
        trusted_gateways: trusted.iter().map(|n| key(n)).collect(),
        ..BuildConfig::default()
    };
    plan::plan(&inputs, &config).expect("a valid server")
}

fn ingress(plan: &plan::Plan) -> Value {
    serde_json::to_value(&plan.objects.network_policy).unwrap()["spec"]["ingress"].clone()
}

fn trusted(name: &str) -> TrustedGateway {
    TrustedGateway {
        issuer: format!("mcpwarden.dev/team-a/mcpgateway/{name}"),
        public_key_file: format!("/etc/mcp-warden/policy/gateway-{name}.pem"),
        audience: "git".into(),
        caller_issuers: vec!["static".into()],
        clock_skew_seconds: None,
    }
}

#[test]
fn only_the_gateways_pods_reach_the_facade_port_and_only_its_assertions_get_in() {
    let plan = plan_with(&server(", onlyThroughGateway: front"), &["front", "other"]);
    assert_eq!(
        ingress(&plan),
        json!([
            {"ports": [{"port": 8080, "protocol": "TCP"}],
             "from": [{"podSelector": {"matchLabels": {"mcpwarden.dev/gateway": "front"}}}]},
            {"ports": [{"port": 9090, "protocol": "TCP"}],
             "from": [{"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "monitoring"}}},
                      {"namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "mcp-warden-system"}},
                       "podSelector": {"matchLabels": {"app.kubernetes.io/name": "mcp-warden-operator"}}}]}
        ])
    );
    // That gateway alone, and its assertions the only way in: the profile's
    // static token and the cluster's service-account tokens stay as the
    // issuers its bindings name, never as a way in; the other gateway that
    // selects the server is gone.
    let open = plan_with(&server(""), &["front", "other"]).policy.auth;
    assert_eq!(
        plan.policy.auth,
        AuthConfig {
            gateways: vec![trusted("front")],
            gateways_only: true,
            ..open
        }
    );
}

#[test]
fn before_the_gateway_selects_it_nobody_gets_in() {
    let plan = plan_with(&server(", onlyThroughGateway: front"), &["other"]);
    assert!(plan.policy.auth.gateways.is_empty() && plan.policy.auth.gateways_only);
}

#[test]
fn without_the_option_the_facade_port_is_open_and_the_profiles_callers_stay() {
    let plan = plan_with(&server(""), &["front"]);
    assert_eq!(
        ingress(&plan)[0],
        json!({"ports": [{"port": 8080, "protocol": "TCP"}], "from": []})
    );
    let auth = &plan.policy.auth;
    assert!(auth.static_tokens.is_some() && auth.service_account_tokens.is_some());
    assert_eq!(auth.gateways, vec![trusted("front")]);
    assert!(!auth.gateways_only);
}

#[test]
fn an_ingress_of_its_own_is_refused() {
    let tools: ToolProfileSpec = serde_yaml_ng::from_str("{tools: [{name: git_log}]}").unwrap();
    let s = server(", onlyThroughGateway: front, expose: {hosts: [git.example.com], ingress: {}}");
    let err = mcp_warden_operator::validate::validate(&s, &tools, &SandboxProfileSpec::default())
        .unwrap_err();
    assert_eq!(err.reason(), "InvalidServerSpec");
    assert!(
        err.to_string().contains("expose the gateway instead"),
        "{err}"
    );
}

/// A backend's profile may give the gateway itself a role (its own issuer,
/// its one subject): planned with that gateway trusted, the binding reaches
/// the facade's policy as written; before the gateway selects the server,
/// the binding names an issuer nothing accepts and the plan is refused with
/// the reason the profile's condition shows. The profile alone is valid
/// either way (who gets in depends on the server it is used by).
#[test]
fn a_binding_may_give_the_gateway_itself_a_role() {
    let issuer = "mcpwarden.dev/team-a/mcpgateway/front";
    let tools: ToolProfileSpec = serde_yaml_ng::from_str(&format!(
        "tools: [{{name: git_log}}]\n\
         auth: {{staticTokens: [{{secretName: t, key: k, subject: alice}}]}}\n\
         roles: [{{role: viewer, issuer: '{issuer}', subjects: ['mcpwarden.dev/gateway:{issuer}']}},\n\
         \x20       {{role: user, issuer: static, subjects: [alice]}}]\n"
    ))
    .unwrap();
    assert_eq!(
        mcp_warden_operator::validate::facade_accepts(&tools),
        Ok(())
    );
    let s = server("");
    let sandbox = SandboxProfileSpec::default();
    let inputs = common::inputs(&s, Some(&tools), Some(&sandbox));
    let with = |trusted: &[&str]| {
        plan::plan(
            &inputs,
            &BuildConfig {
                trusted_gateways: trusted.iter().map(|n| key(n)).collect(),
                ..BuildConfig::default()
            },
        )
    };
    let planned =
        with(&["front"]).expect("the gateway's own issuer is accepted once it is trusted");
    let roles = serde_json::to_value(&planned.policy.roles).unwrap();
    assert!(
        roles
            .as_array()
            .unwrap()
            .iter()
            .any(|b| b["issuer"] == issuer
                && b["subjects"] == json!([format!("mcpwarden.dev/gateway:{issuer}")])),
        "{roles}"
    );
    let Err(refused) = with(&[]) else {
        panic!("an issuer nothing accepts was planned")
    };
    assert_eq!(refused.reason(), "InvalidToolProfile", "{refused}");
    assert!(
        refused
            .to_string()
            .contains("accepted once that gateway selects this server"),
        "{refused}"
    );
}

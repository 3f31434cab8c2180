//! The validation rules, each refused with the reason its condition gives.

use super::*;
use mcp_warden_crds::ToolRule;

fn server(spec: &str) -> MCPServer {
    serde_yaml_ng::from_str(&format!(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: s}}\nspec: {spec}\n"
    ))
    .unwrap()
}

fn tools(rules: &[(&str, Option<&str>)]) -> ToolProfileSpec {
    let tools = rules
        .iter()
        .map(|(n, a)| ToolRule {
            name: n.to_string(),
            alias: a.map(str::to_string),
            ..Default::default()
        })
        .collect();
    ToolProfileSpec {
        tools,
        ..Default::default()
    }
}

#[test]
fn accepts_valid_specs() {
    let ok = tools(&[("a", Some("b_1")), ("c", None)]);
    assert_eq!(
        validate(
            &server("{image: i, command: [x], toolProfileRef: {name: p}}"),
            &ok,
            &SandboxProfileSpec::default()
        ),
        Ok(())
    );
    let http = "{image: i, transport: streamable-http, port: 3000, toolProfileRef: {name: p}}";
    assert_eq!(
        validate(&server(http), &ok, &SandboxProfileSpec::default()),
        Ok(())
    );
}

#[test]
fn rejects_each_rule() {
    let none = ToolProfileSpec::default();
    let validate =
        |s: &MCPServer, t: &ToolProfileSpec| validate(s, t, &SandboxProfileSpec::default());
    let stdio = server("{image: i, toolProfileRef: {name: p}}");
    assert_eq!(
        validate(&stdio, &none),
        Err(ValidateError::StdioWithoutCommand)
    );
    let http = server("{image: i, transport: streamable-http, toolProfileRef: {name: p}}");
    assert_eq!(validate(&http, &none), Err(ValidateError::HttpPort));
    let clash =
        server("{image: i, transport: streamable-http, port: 8080, toolProfileRef: {name: p}}");
    assert_eq!(validate(&clash, &none), Err(ValidateError::HttpPort));
    let many = server("{image: i, command: [x], replicas: 11, toolProfileRef: {name: p}}");
    assert_eq!(validate(&many, &none), Err(ValidateError::Replicas(11)));
    let routed = server(
        "{image: i, command: [x], toolProfileRef: {name: p}, expose: {httpRoute: {parentRefs: [{name: g}]}}}",
    );
    assert_eq!(
        validate(&routed, &none),
        Err(ValidateError::ExposeWithoutHosts)
    );
    let three = server("{image: i, command: [x], replicas: 3, toolProfileRef: {name: p}}");
    assert_eq!(validate(&three, &none), Ok(()));
    let ok = server("{image: i, command: [x], toolProfileRef: {name: p}}");
    assert!(matches!(
        validate(&ok, &tools(&[("a", Some("Bad-Name"))])),
        Err(ValidateError::Alias { .. })
    ));
    assert_eq!(
        validate(&ok, &tools(&[("a", Some("x")), ("x", None)])),
        Err(ValidateError::DuplicateExposedName("x".into()))
    );
}

#[test]
fn remote_servers_have_no_container_and_https_urls() {
    let none = ToolProfileSpec::default();
    let sb = SandboxProfileSpec::default();
    let remote = |extra: &str| {
        server(&format!(
            "{{remote: {{url: 'https://mcp.example.com/mcp'{extra}}}, toolProfileRef: {{name: p}}}}"
        ))
    };
    assert_eq!(validate(&remote(""), &none, &sb), Ok(()));
    let mut both = remote("");
    both.spec.image = "img".into();
    assert_eq!(
        validate(&both, &none, &sb),
        Err(ValidateError::ImageOrRemote)
    );
    assert_eq!(
        validate(&server("{toolProfileRef: {name: p}}"), &none, &sb),
        Err(ValidateError::ImageOrRemote)
    );
    let mut with_cmd = remote("");
    with_cmd.spec.command = vec!["x".into()];
    assert_eq!(
        validate(&with_cmd, &none, &sb),
        Err(ValidateError::RemoteWithContainer)
    );
    let plain = server("{remote: {url: 'http://mcp.example.com/'}, toolProfileRef: {name: p}}");
    assert!(matches!(
        validate(&plain, &none, &sb),
        Err(ValidateError::Remote(_))
    ));
    for bad in [
        ", auth: {rules: [{roles: [admin]}]}",
        ", auth: {rules: [{useFacade: true}]}",
        ", auth: {rules: [{none: true, tokenSecretRef: {name: s, key: k}}]}",
        ", auth: {rules: [{clientCredentials: {tokenUrl: 'http://idp/t', clientId: c, clientSecretRef: {name: s, key: k}}}]}",
        ", privateCidrs: ['10.0.0.1']",
    ] {
        assert!(matches!(validate(&remote(bad), &none, &sb), Err(ValidateError::Remote(_))), "{bad}");
    }
    let good = ", auth: {facade: {tokenSecretRef: {name: s, key: k}}, rules: [{roles: [admin], useFacade: true}, {none: true}]}, privateCidrs: [10.0.0.0/8]";
    assert_eq!(validate(&remote(good), &none, &sb), Ok(()));
}

#[test]
fn pod_templates_cannot_weaken_the_pod() {
    let none = ToolProfileSpec::default();
    let sandbox = SandboxProfileSpec::default();
    let with = |template: &str| {
        validate(
            &server(&format!(
                "{{image: i, command: [x], toolProfileRef: {{name: p}}, podTemplate: {template}}}"
            )),
            &none,
            &sandbox,
        )
    };
    let ok = "{metadata: {labels: {team: a}, annotations: {prometheus.io/scrape: 'true'}}, \
              spec: {nodeSelector: {pool: mcp}, imagePullSecrets: [{name: regcred}], \
              tolerations: [{key: mcp, operator: Exists}], priorityClassName: low}}";
    assert_eq!(with(ok), Ok(()));
    for (template, key) in [
        (
            "{spec: {securityContext: {runAsUser: 0}}}",
            "securityContext",
        ),
        ("{spec: {hostNetwork: true}}", "hostNetwork"),
        (
            "{spec: {containers: [{name: x, securityContext: {privileged: true}}]}}",
            "containers",
        ),
        ("{spec: {runtimeClassName: runc}}", "runtimeClassName"),
        ("{spec: {dnsPolicy: None}}", "dnsPolicy"),
    ] {
        let err = with(template).unwrap_err();
        assert!(
            matches!(&err, ValidateError::PodTemplateField { key: k, .. } if k == key),
            "{template}: {err}"
        );
        assert_eq!(err.reason(), "InvalidPodTemplate");
    }
    assert!(with("{spec: {securityContext: {runAsUser: 0}}}")
        .unwrap_err()
        .to_string()
        .contains("SandboxProfile's runAsUser"));
    assert!(matches!(
        with("{spec: {tolerations: all}}"),
        Err(ValidateError::PodTemplateValue(_))
    ));
    assert_eq!(
        with("{metadata: {labels: {mcpwarden.dev/server: other}}}"),
        Err(ValidateError::ReservedMetadata(
            "mcpwarden.dev/server".into()
        ))
    );
    // The hardening's security profiles are not the template's to loosen.
    for key in [
        "container.apparmor.security.beta.kubernetes.io/server",
        "seccomp.security.alpha.kubernetes.io/pod",
        "container.seccomp.security.alpha.kubernetes.io/facade",
    ] {
        assert_eq!(
            with(&format!(
                "{{metadata: {{annotations: {{{key}: unconfined}}}}}}"
            )),
            Err(ValidateError::ReservedMetadata(key.into())),
            "{key}"
        );
    }
    assert_eq!(
        with("{metadata: {annotations: {prometheus.io/scrape: 'true'}}}"),
        Ok(())
    );
}

#[test]
fn several_issuers_need_bindings_that_name_theirs() {
    use crate::compile::{compile_policy, Approved};
    let server = server("{image: i, command: [x], toolProfileRef: {name: p}}");
    let compiled = |roles: &str| {
        let tools: ToolProfileSpec = serde_yaml_ng::from_str(&format!(
            "tools: [{{name: a}}]\n\
             auth: {{staticTokens: [{{secretName: s, key: k, subject: ci-bot}}]}}\n\
             roles: {roles}\n"
        ))
        .unwrap();
        validate_policy(&compile_policy(
            &server,
            &tools,
            &SandboxProfileSpec::default(),
            &Approved::default(),
            &crate::config::BuildConfig::default(),
        ))
    };
    let err = compiled("[{role: user, subjects: [ci-bot]}]").unwrap_err();
    assert_eq!(err.reason(), "InvalidToolProfile");
    assert!(err.to_string().contains("name the issuer"), "{err}");
    assert_eq!(
        compiled("[{role: user, issuer: static, subjects: [ci-bot]}, {role: viewer, serviceAccounts: [t/a]}]"),
        Ok(())
    );
    assert!(compiled("[{role: user, issuer: 'https://nobody', subjects: [x]}]").is_err());
}

#[test]
fn egress_hosts_are_plain_names() {
    let ok = server("{image: i, command: [x], toolProfileRef: {name: p}}");
    let none = ToolProfileSpec::default();
    for (host, valid) in [
        ("registry.npmjs.org", true),
        ("localhost", false),
        ("*.npmjs.org", false),
        ("Registry.npmjs.org", false),
        ("registry.npmjs.org.", false),
        ("-a.example.com", false),
    ] {
        let sandbox: SandboxProfileSpec = serde_yaml_ng::from_str(&format!(
            "{{network: {{egress: {{hosts: [{{name: '{host}', ports: [443]}}]}}}}}}"
        ))
        .unwrap();
        assert_eq!(validate(&ok, &none, &sandbox).is_ok(), valid, "{host}");
    }
}

//! Every pod template the builders can produce passes Pod Security
//! "restricted": a matrix over transport, workspace, sandbox user, root
//! filesystem, resources, egress (CIDRs and named hosts), env and secrets,
//! runtime class, and a pod template with every field it may set.

mod common;

use k8s_openapi::api::core::v1::PodTemplateSpec;
use mcp_warden_crds::{MCPServer, SandboxProfileSpec, ToolProfileSpec};
use mcp_warden_operator::{config::BuildConfig, plan, pss};

fn server(transport: &str, workspace: &str, extra: &str) -> MCPServer {
    let transport = match transport {
        "stdio" => "transport: stdio, command: [srv, --flag]".to_string(),
        _ => "transport: streamable-http, port: 3000".to_string(),
    };
    let workspace = match workspace {
        "none" => String::new(),
        "pvc" => ", workspace: {persistentVolumeClaim: {claimName: data}}".into(),
        _ => ", workspace: {mountPath: /data, emptyDir: {sizeLimit: 2Gi}}".into(),
    };
    serde_yaml_ng::from_str(&format!(
        "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: s, namespace: n, uid: u-1}}\n\
         spec: {{image: img, {transport}, toolProfileRef: {{name: tp}}, sandboxProfileRef: {{name: sb}}{workspace}{extra}}}\n"
    ))
    .unwrap()
}

fn sandboxes() -> Vec<SandboxProfileSpec> {
    let parse = |yaml: &str| serde_yaml_ng::from_str::<SandboxProfileSpec>(yaml).unwrap();
    vec![
        SandboxProfileSpec::default(),
        parse("{runAsUser: 1, readOnlyRootFilesystem: false, tmpSizeLimit: 1Gi}"),
        parse("{workspaceAccess: readWrite, automountServiceAccountToken: true}"),
        parse("{network: {egress: {dns: true, rules: [{cidr: 10.0.0.0/8, ports: [443, 80]}]}}}"),
        parse("{resources: {requests: {cpu: 10m}, limits: {memory: 2Gi, ephemeral-storage: 1Gi}}}"),
        parse("{runtimeClassName: gvisor, homeSizeLimit: 2Gi, network: {egress: {presets: [npm, pypi], hosts: [{name: api.example.com, ports: [443]}]}}}"),
    ]
}

#[test]
fn every_buildable_pod_is_restricted() {
    let extras = [
        "",
        ", env: [{name: A, value: b}], secretEnv: [{name: T, secretName: s, key: k}]",
        ", replicas: 0",
        ", replicas: 3",
        ", expose: {hosts: [git.mcp.example.com], tls: {secretName: git-tls}}",
        ", podTemplate: {metadata: {labels: {team: a}, annotations: {sidecar.istio.io/inject: 'false'}}, \
         spec: {nodeSelector: {pool: mcp}, imagePullSecrets: [{name: regcred}], \
         tolerations: [{key: mcp, operator: Exists, effect: NoSchedule}], priorityClassName: low, \
         schedulerName: default-scheduler, affinity: {nodeAffinity: {requiredDuringSchedulingIgnoredDuringExecution: \
         {nodeSelectorTerms: [{matchExpressions: [{key: pool, operator: In, values: [mcp]}]}]}}}, \
         topologySpreadConstraints: [{maxSkew: 1, topologyKey: kubernetes.io/hostname, whenUnsatisfiable: ScheduleAnyway}]}}, \
         serviceAccount: {annotations: {iam.gke.io/gcp-service-account: a@b.iam.gserviceaccount.com}}",
    ];
    // One tool: a profile that allows nothing is refused (the facade would not start).
    let tools: ToolProfileSpec = serde_yaml_ng::from_str("{tools: [{name: echo}]}").unwrap();
    let config = BuildConfig::default();
    let mut checked = 0;
    for transport in ["stdio", "streamable-http"] {
        for workspace in ["none", "pvc", "emptyDir"] {
            for extra in extras {
                for sandbox in sandboxes() {
                    let server = server(transport, workspace, extra);
                    let inputs = common::inputs(&server, Some(&tools), Some(&sandbox));
                    let plan = plan::plan(&inputs, &config).expect("the matrix holds valid specs");
                    // …and the same server with everything it asks for approved.
                    let mut approved_server = server.clone();
                    approved_server.metadata.annotations = Some(
                        [(
                            "mcpwarden.dev/approve".to_string(),
                            plan.capabilities.digest.clone(),
                        )]
                        .into(),
                    );
                    let approved = plan::plan(
                        &plan::Inputs {
                            server: &approved_server,
                            ..inputs.clone()
                        },
                        &config,
                    )
                    .unwrap();
                    assert_eq!(
                        approved.capabilities.in_force,
                        approved.capabilities.requested
                    );
                    for (which, plan) in [("baseline", plan), ("approved", approved)] {
                        let template: PodTemplateSpec =
                            plan.objects.deployment.spec.unwrap().template;
                        let annotations = template
                            .metadata
                            .and_then(|m| m.annotations)
                            .unwrap_or_default();
                        let violations =
                            pss::check_restricted(&template.spec.unwrap(), &annotations);
                        assert_eq!(
                            violations,
                            vec![],
                            "{which} {transport} {workspace} {extra:?} {sandbox:?}"
                        );
                        checked += 1;
                    }
                }
            }
        }
    }
    assert_eq!(checked, 2 * 2 * 3 * 6 * 6);
}

#[test]
fn the_matrix_would_catch_a_broken_builder() {
    // Guard against a vacuous pass: the same check flags a pod with one field broken.
    let server = server("stdio", "none", "");
    // One tool: a profile that allows nothing is refused (the facade would not start).
    let tools: ToolProfileSpec = serde_yaml_ng::from_str("{tools: [{name: echo}]}").unwrap();
    let sandbox = SandboxProfileSpec::default();
    let inputs = common::inputs(&server, Some(&tools), Some(&sandbox));
    let plan = plan::plan(&inputs, &BuildConfig::default()).unwrap();
    let mut pod = plan.objects.deployment.spec.unwrap().template.spec.unwrap();
    pod.containers[0]
        .security_context
        .as_mut()
        .unwrap()
        .allow_privilege_escalation = Some(true);
    let violations = pss::check_restricted(&pod, &Default::default());
    assert_eq!(violations.len(), 1, "{violations:?}");
    assert_eq!(violations[0].rule, pss::Rule::PrivilegeEscalation);
    assert_eq!(violations[0].at, "container server");
}

#[test]
fn remote_server_pods_are_restricted() {
    // The facade alone, with credential Secrets and a CA bundle mounted, as
    // asked for and with its egress approved, under each sandbox.
    let remote = |extra: &str| -> MCPServer {
        serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: s, namespace: n, uid: u-1}}\n\
             spec: {{toolProfileRef: {{name: tp}}, sandboxProfileRef: {{name: sb}}, remote: {{url: 'https://mcp.example.com/mcp'{extra}}}}}\n"
        ))
        .unwrap()
    };
    // One tool: a profile that allows nothing is refused (the facade would not start).
    let tools: ToolProfileSpec = serde_yaml_ng::from_str("{tools: [{name: echo}]}").unwrap();
    let config = BuildConfig::default();
    let mut checked = 0;
    for extra in [
        "",
        ", tls: {caConfigMap: {name: ca, key: ca.pem}}, privateCidrs: [10.0.0.0/8], \
         auth: {facade: {tokenSecretRef: {name: s, key: k}}, rules: [{roles: [admin], useFacade: true}, {none: true}]}",
    ] {
        for sandbox in sandboxes() {
            let server = remote(extra);
            let inputs = |server| common::inputs(server, Some(&tools), Some(&sandbox));
            let baseline = plan::plan(&inputs(&server), &config).expect("a valid remote server");
            let mut approved_server = server.clone();
            approved_server.metadata.annotations = Some(
                [(
                    "mcpwarden.dev/approve".to_string(),
                    baseline.capabilities.digest.clone(),
                )]
                .into(),
            );
            let approved = plan::plan(&inputs(&approved_server), &config).unwrap();
            assert!(!approved.capabilities.in_force.is_empty());
            for plan in [baseline, approved] {
                let template = plan.objects.deployment.spec.unwrap().template;
                let annotations = template
                    .metadata
                    .and_then(|m| m.annotations)
                    .unwrap_or_default();
                let pod = template.spec.unwrap();
                assert_eq!(pod.containers.len(), 1);
                assert_eq!(pss::check_restricted(&pod, &annotations), vec![], "{extra}");
                checked += 1;
            }
        }
    }
    assert_eq!(checked, 2 * sandboxes().len() * 2);
}

#[test]
fn the_pod_template_lands_under_the_hardening() {
    let server = server(
        "stdio",
        "none",
        ", podTemplate: {metadata: {labels: {team: a}}, spec: {nodeSelector: {pool: mcp}, \
         tolerations: [{key: mcp, operator: Exists}]}}",
    );
    // One tool: a profile that allows nothing is refused (the facade would not start).
    let tools: ToolProfileSpec = serde_yaml_ng::from_str("{tools: [{name: echo}]}").unwrap();
    let sandbox: SandboxProfileSpec =
        serde_yaml_ng::from_str("{runtimeClassName: gvisor}").unwrap();
    let inputs = common::inputs(&server, Some(&tools), Some(&sandbox));
    let plan = plan::plan(&inputs, &BuildConfig::default()).unwrap();
    let template = plan.objects.deployment.spec.unwrap().template;
    let labels = template.metadata.unwrap().labels.unwrap();
    assert_eq!(labels["team"], "a");
    assert_eq!(labels["mcpwarden.dev/server"], "s");
    let pod = template.spec.unwrap();
    assert_eq!(pod.node_selector.unwrap()["pool"], "mcp");
    assert_eq!(pod.tolerations.unwrap()[0].key.as_deref(), Some("mcp"));
    assert_eq!(pod.runtime_class_name.as_deref(), Some("gvisor"));
    assert_eq!(pod.security_context.unwrap().run_as_non_root, Some(true));
    let server_container = &pod.containers[0];
    let env: Vec<_> = server_container
        .env
        .iter()
        .flatten()
        .map(|e| e.name.as_str())
        .collect();
    assert!(
        env.contains(&"HOME") && env.contains(&"npm_config_cache"),
        "{env:?}"
    );
    let home = server_container
        .volume_mounts
        .iter()
        .flatten()
        .find(|m| m.mount_path == "/home/mcp")
        .expect("the writable home is mounted");
    assert_ne!(home.read_only, Some(true));
}

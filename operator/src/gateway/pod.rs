//! The gateway's Deployment: one container, the facade in gateway mode,
//! with the hardening of every MCPServer pod.
//!
//! ```text
//! pod (restricted: non-root, seccomp RuntimeDefault, no privilege escalation, drop ALL,
//!      read-only root, no service-account token)
//! └─ gateway   mcp-warden-sidecar run --backend <server>=<its Service URL> … --backend-prefix …
//!              --gateway-key-file /etc/mcp-warden/gateway/key.pem --gateway-issuer <issuer>
//!              --admin-token-file /etc/mcp-warden/admin/token
//!              :8080 /mcp, :9090 /metrics /healthz /readyz /gateway (the operator reads it with the token)
//! volumes: policy + jwks (ConfigMaps), gateway-key + peer-key + admin-token (Secrets, made once by
//!          the operator),
//!          tokens-<n> + issuer-<i> (the profile's auth), tls (expose.tls), tmp (size-limited),
//!          backend-ca (the TLS backends' CAs, `--backend-ca <server>=<file>`, backend_ca.rs)
//! ```
//! The backends are reached at their Services' in-cluster URLs, over plain
//! HTTP inside the cluster's ranges (`--backend-allow-cidr`), where the
//! gateway's NetworkPolicy lets it reach exactly its backends' pods; a
//! backend served with `expose.tls` over `https://`, trusted by its own CA.

use std::collections::BTreeMap;

use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment},
        core::v1::{
            ConfigMapVolumeSource, Container, ContainerPort, EmptyDirVolumeSource, EnvVar,
            EnvVarSource, HTTPGetAction, ObjectFieldSelector, PodSecurityContext, PodSpec,
            PodTemplateSpec, Probe, SeccompProfile, SecretVolumeSource, Volume,
        },
    },
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{LabelSelector, ObjectMeta},
        util::intstr::IntOrString,
    },
};
use mcp_warden_crds::{mcpserver::ImagePullPolicy, SandboxProfileSpec};

use super::{build::GatewayInput, names};
use crate::{
    build::{
        deployment::{container_security_context, mount, pre_stop_sleep, resources},
        facade_auth::{auth_mounts, auth_volumes},
    },
    names::{
        ADMIN_PORT, ADMIN_TOKEN_DIR, ADMIN_TOKEN_KEY, DRAIN_SECONDS, FACADE_PORT, JWKS_DIR,
        PEER_KEY_DIR, PEER_KEY_KEY, POLICY_DIR, POLICY_KEY, PRESTOP_SECONDS,
        TERMINATION_GRACE_SECONDS, TLS_DIR,
    },
};

/// Blocks backends may be reached in when the cluster reports no ranges:
/// the private ones (the NetworkPolicy still allows only the backends).
const PRIVATE_BLOCKS: &str = "10.0.0.0/8,172.16.0.0/12,192.168.0.0/16,fc00::/7";

/// The gateway's arguments: the facade's, then one `--backend` per backend.
fn args(input: GatewayInput<'_>) -> Vec<String> {
    let (gw, cfg) = (input.gateway, input.config);
    let mut args = vec![
        "run".to_string(),
        "--policy".into(),
        format!("{POLICY_DIR}/{POLICY_KEY}"),
        "--listen".into(),
        format!("0.0.0.0:{FACADE_PORT}"),
        "--admin-listen".into(),
        format!("0.0.0.0:{ADMIN_PORT}"),
        "--allowed-host".into(),
        names::allowed_hosts(gw, cfg).join(","),
        "--drain-timeout-secs".into(),
        DRAIN_SECONDS.to_string(),
        // `/gateway` shows every withheld name: only the operator, with
        // this token, reads it for the status.
        "--admin-token-file".into(),
        format!("{ADMIN_TOKEN_DIR}/{ADMIN_TOKEN_KEY}"),
    ];
    for b in input.backends {
        args.extend([
            "--backend".into(),
            format!(
                "{}={}",
                b.name(),
                crate::names::cluster_endpoint(&b.server, cfg)
            ),
        ]);
        // A backend served with TLS: its own CA, its whole trust.
        if input.backend_cas.contains_key(&b.name()) {
            args.extend([
                "--backend-ca".into(),
                format!("{}={}", b.name(), super::backend_ca::file(&b.name())),
            ]);
        }
        if b.prefix != super::resolve::default_prefix(&b.name()) {
            args.extend([
                "--backend-prefix".into(),
                format!("{}={}", b.name(), b.prefix_label()),
            ]);
        }
    }
    // A mapping naming a server that is not (or no longer) a backend is
    // inert: the facade refuses a mapping to a backend it does not have.
    for r in &gw.spec.resolve {
        if input.backends.iter().any(|b| b.name() == r.backend) {
            args.extend(["--resolve".into(), format!("{}={}", r.name, r.backend)]);
        }
    }
    let ranges: Vec<String> = cfg
        .cluster_ranges
        .services
        .iter()
        .chain(&cfg.cluster_ranges.pods)
        .cloned()
        .collect();
    args.extend([
        "--backend-allow-cidr".into(),
        if ranges.is_empty() {
            PRIVATE_BLOCKS.into()
        } else {
            ranges.join(",")
        },
        "--gateway-key-file".into(),
        format!("{}/{}", names::KEY_DIR, names::KEY_KEY),
        "--gateway-issuer".into(),
        names::token_audience(gw),
    ]);
    if names::tls_secret(gw).is_some() {
        args.extend([
            "--tls-cert-file".into(),
            format!("{TLS_DIR}/tls.crt"),
            "--tls-key-file".into(),
            format!("{TLS_DIR}/tls.key"),
        ]);
    }
    args
}

fn volumes(input: GatewayInput<'_>) -> Vec<Volume> {
    let gw = input.gateway;
    let secret = |name: &str, secret: String, optional: bool| Volume {
        name: name.into(),
        secret: Some(SecretVolumeSource {
            secret_name: Some(secret),
            default_mode: Some(0o440),
            optional: Some(optional),
            ..SecretVolumeSource::default()
        }),
        ..Volume::default()
    };
    let config_map = |name: &str, cm: String, optional: bool| Volume {
        name: name.into(),
        config_map: Some(ConfigMapVolumeSource {
            name: cm,
            optional: optional.then_some(true),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    };
    let mut volumes = vec![
        Volume {
            name: "tmp".into(),
            empty_dir: Some(EmptyDirVolumeSource {
                size_limit: Some(Quantity("64Mi".into())),
                ..EmptyDirVolumeSource::default()
            }),
            ..Volume::default()
        },
        config_map("policy", names::policy_config_map(gw), false),
        // Until the operator could read the issuer's keys, tokens are refused.
        config_map("jwks", names::jwks_config_map(gw), true),
        // No key, no start: a gateway that cannot sign must not run unsigned.
        secret("gateway-key", names::key_secret(gw), false),
        secret("peer-key", names::peer_key_secret(gw), false),
        // Made with the keys, before the Deployment.
        secret("admin-token", names::admin_token_secret(gw), false),
    ];
    volumes.extend(auth_volumes(
        &profile_auth(input),
        &names::issuers_config_map(gw),
        false,
    ));
    if let Some(tls) = names::tls_secret(gw) {
        volumes.push(secret("tls", tls.to_string(), false));
    }
    if !input.backend_cas.is_empty() {
        // Written before the Deployment; the gateway does not start without it.
        volumes.push(config_map(
            "backend-ca",
            names::backend_ca_config_map(gw),
            false,
        ));
    }
    volumes
}

fn profile_auth(input: GatewayInput<'_>) -> mcp_warden_crds::toolprofile::ProfileAuth {
    input.profile.map(|p| p.auth.clone()).unwrap_or_default()
}

fn container(input: GatewayInput<'_>) -> Container {
    let gw = input.gateway;
    let mut mounts = vec![
        mount("tmp", "/tmp", false),
        mount("policy", POLICY_DIR, true),
        mount("jwks", JWKS_DIR, true),
        mount("gateway-key", names::KEY_DIR, true),
        mount("peer-key", PEER_KEY_DIR, true),
        mount("admin-token", ADMIN_TOKEN_DIR, true),
    ];
    mounts.extend(auth_mounts(&profile_auth(input)));
    if names::tls_secret(gw).is_some() {
        mounts.push(mount("tls", TLS_DIR, true));
    }
    if !input.backend_cas.is_empty() {
        mounts.push(mount("backend-ca", super::backend_ca::DIR, true));
    }
    let value = |name: &str, value: String| EnvVar {
        name: name.into(),
        value: Some(value),
        value_from: None,
    };
    let env = vec![
        EnvVar {
            name: "POD_IP".into(),
            value: None,
            value_from: Some(EnvVarSource {
                field_ref: Some(ObjectFieldSelector {
                    field_path: "status.podIP".into(),
                    api_version: None,
                }),
                ..EnvVarSource::default()
            }),
        },
        value(
            "MCP_WARDEN_PEER_KEY_FILE",
            format!("{PEER_KEY_DIR}/{PEER_KEY_KEY}"),
        ),
        value(
            "MCP_WARDEN_ADVERTISE_ADDR",
            format!("$(POD_IP):{FACADE_PORT}"),
        ),
        value("TMPDIR", "/tmp".into()),
    ];
    let probe = |path: &str| Probe {
        http_get: Some(HTTPGetAction {
            path: Some(path.into()),
            port: IntOrString::String("admin".into()),
            ..HTTPGetAction::default()
        }),
        period_seconds: Some(10),
        ..Probe::default()
    };
    let port = |name: &str, port: i32| ContainerPort {
        name: Some(name.into()),
        container_port: port,
        protocol: Some("TCP".into()),
        ..ContainerPort::default()
    };
    let image = &input.config.sidecar_image;
    Container {
        name: "gateway".into(),
        image: Some(image.clone()),
        image_pull_policy: Some(ImagePullPolicy::for_image(image, None).as_str().into()),
        args: Some(args(input)),
        env: Some(env),
        ports: Some(vec![port("http", FACADE_PORT), port("admin", ADMIN_PORT)]),
        lifecycle: Some(pre_stop_sleep(PRESTOP_SECONDS)),
        liveness_probe: Some(probe("/healthz")),
        readiness_probe: Some(probe("/readyz")),
        security_context: Some(container_security_context(true)),
        resources: Some(resources(
            &[("cpu", "50m"), ("memory", "64Mi")],
            &[("cpu", "1"), ("memory", "256Mi")],
        )),
        volume_mounts: Some(mounts),
        ..Container::default()
    }
}

/// The pod's annotations: its default container, and a digest of the
/// backends' CAs, which the gateway reads at start: a new CA rolls the pods.
fn annotations(input: GatewayInput<'_>) -> BTreeMap<String, String> {
    let mut annotations = BTreeMap::from([(
        "kubectl.kubernetes.io/default-container".to_string(),
        "gateway".to_string(),
    )]);
    if !input.backend_cas.is_empty() {
        annotations.insert(
            super::backend_ca::DIGEST_ANNOTATION.into(),
            super::backend_ca::digest(input.backend_cas),
        );
    }
    annotations
}

/// The Deployment running the gateway.
pub fn desired_deployment(input: GatewayInput<'_>) -> Deployment {
    let gw = input.gateway;
    let uid = SandboxProfileSpec::default().run_as_user;
    let mut pod_labels = names::labels(gw, "gateway");
    pod_labels.extend(names::selector(gw));
    let pod = PodSpec {
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        termination_grace_period_seconds: Some(TERMINATION_GRACE_SECONDS),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(uid),
            run_as_group: Some(uid),
            fs_group: Some(uid),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".into(),
                ..SeccompProfile::default()
            }),
            ..PodSecurityContext::default()
        }),
        containers: vec![container(input)],
        volumes: Some(volumes(input)),
        ..PodSpec::default()
    };
    Deployment {
        metadata: names::metadata(gw, names::object_name(gw), "gateway"),
        spec: Some(DeploymentSpec {
            replicas: Some(gw.spec.replicas),
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(1)),
                    max_unavailable: Some(IntOrString::Int(0)),
                }),
            }),
            selector: LabelSelector {
                match_labels: Some(names::selector(gw)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(pod_labels),
                    annotations: Some(annotations(input)),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

#[cfg(test)]
mod tests {
    use mcp_warden_crds::{MCPGateway, MCPServer};

    use super::*;
    use crate::{config::BuildConfig, gateway::resolve};

    #[test]
    fn the_gateway_pod_is_restricted_and_mounts_its_key_alone() {
        let gw: MCPGateway = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPGateway\nmetadata: {name: front, namespace: a}\n\
             spec: {backends: [{name: git}], replicas: 2, expose: {tls: {secretName: front-tls}}}\n",
        )
        .unwrap();
        let server: MCPServer = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: git, namespace: a}\n\
             spec: {image: i, command: [x], toolProfileRef: {name: p}}\n",
        )
        .unwrap();
        let selection = resolve::select(&gw, [&server]);
        let input = GatewayInput {
            gateway: &gw,
            backends: &selection.backends,
            profile: None,
            jwks: None,
            issuer_jwks: &BTreeMap::new(),
            backend_cas: &BTreeMap::new(),
            public_key: None,
            config: &BuildConfig::default(),
        };
        let deployment = desired_deployment(input);
        let template = deployment.spec.unwrap().template;
        let pod = template.spec.unwrap();
        let annotations = template.metadata.unwrap().annotations.unwrap();
        assert_eq!(crate::pss::check_restricted(&pod, &annotations), vec![]);
        assert_eq!(pod.automount_service_account_token, Some(false));
        let c = &pod.containers[0];
        assert_eq!(
            c.security_context
                .as_ref()
                .unwrap()
                .read_only_root_filesystem,
            Some(true)
        );
        let key = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == "gateway-key")
            .unwrap();
        let secret = key.secret.as_ref().unwrap();
        assert_eq!(secret.secret_name.as_deref(), Some("front-gateway-key"));
        assert_eq!(secret.optional, Some(false), "no key, no start");
        let args = c.args.as_ref().unwrap().join(" ");
        assert!(
            args.contains("--tls-cert-file /etc/mcp-warden/tls/tls.crt"),
            "{args}"
        );
        assert!(
            args.contains("--gateway-issuer mcpwarden.dev/a/mcpgateway/front"),
            "{args}"
        );
        // The admin token the operator reads `/gateway` with: its own
        // Secret, mounted read-only where `--admin-token-file` points.
        assert!(
            args.contains("--admin-token-file /etc/mcp-warden/admin/token"),
            "{args}"
        );
        let volume = pod
            .volumes
            .iter()
            .flatten()
            .find(|v| v.name == "admin-token")
            .unwrap();
        assert_eq!(
            serde_json::to_value(volume).unwrap(),
            serde_json::json!({"name": "admin-token", "secret": {
                "secretName": "front-admin-token", "defaultMode": 0o440, "optional": false}})
        );
        let mount = c
            .volume_mounts
            .iter()
            .flatten()
            .find(|m| m.name == "admin-token")
            .unwrap();
        assert_eq!(
            serde_json::to_value(mount).unwrap(),
            serde_json::json!({"name": "admin-token", "mountPath": "/etc/mcp-warden/admin", "readOnly": true})
        );
    }

    #[test]
    fn the_mapping_reaches_the_gateway_for_backends_it_has() {
        let gw: MCPGateway = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPGateway\nmetadata: {name: front, namespace: a}\n\
             spec: {backends: [{name: git}], resolve: [{name: status, backend: git}, {name: x, backend: gone}]}\n",
        )
        .unwrap();
        let server: MCPServer = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: git, namespace: a}\n\
             spec: {image: i, command: [x], toolProfileRef: {name: p}}\n",
        )
        .unwrap();
        let selection = resolve::select(&gw, [&server]);
        let args = args(GatewayInput {
            gateway: &gw,
            backends: &selection.backends,
            profile: None,
            jwks: None,
            issuer_jwks: &BTreeMap::new(),
            backend_cas: &BTreeMap::new(),
            public_key: None,
            config: &BuildConfig::default(),
        });
        let mapped: Vec<_> = args
            .windows(2)
            .filter(|w| w[0] == "--resolve")
            .map(|w| w[1].as_str())
            .collect();
        assert_eq!(mapped, ["status=git"]);
    }
}

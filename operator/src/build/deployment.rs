//! The Deployment: one pod with the MCP server and the facade in front.
//!
//! ```text
//! pod (restricted: non-root, seccomp RuntimeDefault, no privilege escalation, drop ALL)
//! ├─ init  install-bridge  (stdio only) copies the static bridge into /mcp-warden/bin
//! ├─ server               the MCP server; for stdio wrapped by the bridge on /run/mcp/server.sock,
//! │                        for streamable-http listening on 127.0.0.1:<port>
//! └─ facade               mcp-warden-sidecar run: :8080 /mcp, :9090 /metrics /healthz /readyz /tools
//! volumes (volumes.rs): tmp (server /tmp, size-limited), home (server /home/mcp, size-limited: HOME and
//!          the package runners' caches), policy + jwks + peers (ConfigMaps, facade), peer-key
//!          (Secret, facade), tokens-<n> + issuer-<i> (the profile's auth, facade),
//!          tls (expose.tls: the listener's certificate, facade), run-mcp + bridge-bin (stdio),
//!          workspace (read-only unless approved); proxy variables: build::egress_proxy
//! ```
//!
//! Real servers start with `npx -y` or `uvx`, which download the server into
//! a cache under `HOME` before it runs: on a read-only root with no `HOME`
//! they fail before the first byte of MCP. The server container therefore
//! gets a writable home on its own emptyDir, and the cache variables the
//! common runners read point into it (a variable the MCPServer's `env` sets
//! wins). `spec.podTemplate` (pod_template.rs) adds what the cluster needs
//! under all of this; the SandboxProfile's `runtimeClassName` picks the
//! runtime (gVisor, Kata) for servers that need a stronger box.
//!
//! A remote server (`spec.remote`) has no server container: the pod holds
//! the facade alone, which reaches the remote over HTTPS with the Secrets
//! of `remote.auth` (mounted into it only, `upstream-<n>`) and the CA bundle
//! of `remote.tls` (`upstream-ca`).
//!
//! Scale-out and rollouts: every replica gets the same peer key
//! (session ids name their owner, `$(POD_IP):8080`, and are HMAC-signed), so
//! a request landing on another replica is relayed to the owner. The peer key
//! is configured even for one replica, so scaling out never rolls the pods;
//! so is the peers ConfigMap (every replica's address, which the identity
//! budget's owner is chosen from), which the operator rewrites as pods come
//! and go.
//! A rolling update starts the new pod first (maxSurge 1, maxUnavailable 0);
//! a stopping pod sleeps in `preStop` until it is out of every endpoint list,
//! then the facade drains (`/readyz` 503, no new sessions, calls in flight
//! finish) while the server container sleeps on until the drain is over.

use std::collections::{BTreeMap, BTreeSet};

use super::volumes::{volumes, workspace_writable, SA_TOKEN_DIR};
use super::{facade_auth, pod_template, BuildInput};
use crate::names::{
    self, ADMIN_PORT, ADMIN_TOKEN_DIR, ADMIN_TOKEN_KEY, BRIDGE_DIR, DRAIN_SECONDS, FACADE_PORT,
    HOME_DIR, JWKS_DIR, PEERS_DIR, PEERS_KEY, PEER_KEY_DIR, PEER_KEY_KEY, POLICY_DIR, POLICY_KEY,
    PRESTOP_SECONDS, SIDECAR_BIN, SOCKET_DIR, SOCKET_PATH, TERMINATION_GRACE_SECONDS, TLS_DIR,
    UPSTREAM_CA_DIR, UPSTREAM_SECRETS_DIR,
};
use k8s_openapi::{
    api::{
        apps::v1::{Deployment, DeploymentSpec, DeploymentStrategy, RollingUpdateDeployment},
        core::v1::{
            Capabilities, Container, ContainerPort, EnvVar, EnvVarSource, HTTPGetAction, Lifecycle,
            LifecycleHandler, ObjectFieldSelector, PodSecurityContext, PodSpec, PodTemplateSpec,
            Probe, ResourceRequirements, SeccompProfile, SecretKeySelector, SecurityContext,
            SleepAction, VolumeMount,
        },
    },
    apimachinery::pkg::{
        api::resource::Quantity,
        apis::meta::v1::{LabelSelector, ObjectMeta},
        util::intstr::IntOrString,
    },
};
use mcp_warden_crds::mcpserver::{ImagePullPolicy, Transport};
use mcp_warden_crds::remote::{address_block, host_port};

/// The server container's writable places, as the variables common runners
/// read (`npx`/`npm`, `uv`/`uvx`, `pip`, XDG-following tools), all on the
/// `home` emptyDir except `TMPDIR`.
const HOME_ENV: [(&str, &str); 7] = [
    ("HOME", HOME_DIR),
    ("XDG_CACHE_HOME", "/home/mcp/.cache"),
    ("XDG_DATA_HOME", "/home/mcp/.local/share"),
    ("npm_config_cache", "/home/mcp/.npm"),
    ("UV_CACHE_DIR", "/home/mcp/.cache/uv"),
    ("PIP_CACHE_DIR", "/home/mcp/.cache/pip"),
    ("TMPDIR", "/tmp"),
];

/// The Deployment running the server and the facade.
pub fn desired_deployment(input: BuildInput<'_>) -> Deployment {
    let server = input.server;
    let remote = server.spec.remote.is_some();
    let stdio = !remote && server.spec.transport == Transport::Stdio;
    let mut template_labels = names::labels(server);
    template_labels.extend(names::selector(server));
    let template = server.spec.pod_template.as_ref();
    let template_meta = template.and_then(|t| t.metadata.as_ref());
    let labels = pod_template::merge_map(template_meta.map(|m| &m.labels), template_labels);
    let annotations = pod_template::merge_map(
        template_meta.map(|m| &m.annotations),
        BTreeMap::from([(
            "kubectl.kubernetes.io/default-container".to_string(),
            "facade".to_string(),
        )]),
    );
    let mut pod = PodSpec {
        service_account_name: Some(names::object_name(server)),
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        termination_grace_period_seconds: Some(TERMINATION_GRACE_SECONDS),
        runtime_class_name: input.sandbox.runtime_class_name.clone(),
        security_context: Some(pod_security_context(input)),
        init_containers: stdio.then(|| vec![install_bridge_container(input)]),
        containers: if remote {
            vec![facade_container(input)]
        } else {
            vec![server_container(input), facade_container(input)]
        },
        volumes: Some(volumes(input)),
        ..PodSpec::default()
    };
    pod_template::merge_spec(&mut pod, template);
    Deployment {
        metadata: names::metadata(server, names::object_name(server)),
        spec: Some(DeploymentSpec {
            replicas: Some(server.spec.replicas),
            strategy: Some(DeploymentStrategy {
                type_: Some("RollingUpdate".into()),
                rolling_update: Some(RollingUpdateDeployment {
                    max_surge: Some(IntOrString::Int(1)),
                    max_unavailable: Some(IntOrString::Int(0)),
                }),
            }),
            selector: LabelSelector {
                match_labels: Some(names::selector(server)),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(labels),
                    annotations: Some(annotations),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

fn pod_security_context(input: BuildInput<'_>) -> PodSecurityContext {
    let uid = input.sandbox.run_as_user;
    PodSecurityContext {
        run_as_non_root: Some(true),
        run_as_user: Some(uid),
        run_as_group: Some(uid),
        fs_group: Some(uid),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..SeccompProfile::default()
        }),
        ..PodSecurityContext::default()
    }
}

/// The restricted container security context every container gets.
pub(crate) fn container_security_context(read_only_root: bool) -> SecurityContext {
    SecurityContext {
        allow_privilege_escalation: Some(false),
        privileged: Some(false),
        read_only_root_filesystem: Some(read_only_root),
        run_as_non_root: Some(true),
        capabilities: Some(Capabilities {
            drop: Some(vec!["ALL".into()]),
            add: None,
        }),
        seccomp_profile: Some(SeccompProfile {
            type_: "RuntimeDefault".into(),
            ..SeccompProfile::default()
        }),
        ..SecurityContext::default()
    }
}

pub(crate) fn resources(
    requests: &[(&str, &str)],
    limits: &[(&str, &str)],
) -> ResourceRequirements {
    let list = |pairs: &[(&str, &str)]| {
        pairs
            .iter()
            .map(|(k, v)| (k.to_string(), Quantity(v.to_string())))
            .collect::<BTreeMap<_, _>>()
    };
    ResourceRequirements {
        requests: Some(list(requests)),
        limits: Some(list(limits)),
        ..Default::default()
    }
}

pub(crate) fn mount(name: &str, path: &str, read_only: bool) -> VolumeMount {
    VolumeMount {
        name: name.into(),
        mount_path: path.into(),
        read_only: read_only.then_some(true),
        ..VolumeMount::default()
    }
}

/// A `preStop` hook that only waits (the kubelet's own `sleep`: no shell or
/// binary needed in a distroless image).
pub(crate) fn pre_stop_sleep(seconds: i64) -> Lifecycle {
    Lifecycle {
        pre_stop: Some(LifecycleHandler {
            sleep: Some(SleepAction { seconds }),
            ..LifecycleHandler::default()
        }),
        ..Lifecycle::default()
    }
}

/// The facade image's pull policy, written out (Kubernetes' rule for its tag).
fn sidecar_pull_policy(input: BuildInput<'_>) -> String {
    ImagePullPolicy::for_image(&input.config.sidecar_image, None)
        .as_str()
        .into()
}

/// Copies the static bridge binary out of the sidecar image (stdio only).
fn install_bridge_container(input: BuildInput<'_>) -> Container {
    Container {
        name: "install-bridge".into(),
        image: Some(input.config.sidecar_image.clone()),
        image_pull_policy: Some(sidecar_pull_policy(input)),
        command: Some(vec![
            SIDECAR_BIN.into(),
            "install-bridge".into(),
            format!("{BRIDGE_DIR}/mcp-warden-sidecar"),
        ]),
        security_context: Some(container_security_context(true)),
        resources: Some(resources(
            &[("cpu", "10m"), ("memory", "16Mi")],
            &[("cpu", "100m"), ("memory", "32Mi")],
        )),
        volume_mounts: Some(vec![mount("bridge-bin", BRIDGE_DIR, false)]),
        ..Container::default()
    }
}

/// The MCP server itself, with its env, Secrets, sandbox resources and workspace.
fn server_container(input: BuildInput<'_>) -> Container {
    let spec = &input.server.spec;
    let (command, args) = match spec.transport {
        Transport::Stdio => {
            let mut argv = vec![
                "bridge".to_string(),
                "--socket".into(),
                SOCKET_PATH.into(),
                "--".into(),
            ];
            argv.extend(spec.command.iter().cloned());
            argv.extend(spec.args.iter().cloned());
            (
                Some(vec![format!("{BRIDGE_DIR}/mcp-warden-sidecar")]),
                Some(argv),
            )
        }
        Transport::StreamableHttp => (
            (!spec.command.is_empty()).then(|| spec.command.clone()),
            (!spec.args.is_empty()).then(|| spec.args.clone()),
        ),
    };
    // The writable places first; a variable the spec sets itself wins. The proxy's last.
    let mut env: Vec<EnvVar> = HOME_ENV
        .iter()
        .filter(|(name, _)| !spec.env.iter().any(|e| e.name == *name))
        .filter(|(name, _)| !spec.secret_env.iter().any(|e| e.name == *name))
        .map(|(name, value)| EnvVar {
            name: name.to_string(),
            value: Some(value.to_string()),
            value_from: None,
        })
        .collect();
    env.extend(spec.env.iter().map(|e| EnvVar {
        name: e.name.clone(),
        value: Some(e.value.clone()),
        value_from: None,
    }));
    env.extend(spec.secret_env.iter().map(|e| EnvVar {
        name: e.name.clone(),
        value: None,
        value_from: Some(EnvVarSource {
            secret_key_ref: Some(SecretKeySelector {
                name: e.secret_name.clone(),
                key: e.key.clone(),
                optional: Some(false),
            }),
            ..EnvVarSource::default()
        }),
    }));
    env.extend(super::egress_proxy::server_env(input));
    let mut mounts = vec![mount("tmp", "/tmp", false), mount("home", HOME_DIR, false)];
    if spec.transport == Transport::Stdio {
        mounts.push(mount("bridge-bin", BRIDGE_DIR, true));
        mounts.push(mount("run-mcp", SOCKET_DIR, false));
    }
    if let Some(ws) = &spec.workspace {
        // Read-only until `workspace.write` is approved.
        mounts.push(mount(
            "workspace",
            &ws.mount_path,
            !workspace_writable(input),
        ));
    }
    if input.approved.service_account_token {
        // The server's own token, where client libraries look for it; the
        // facade never sees it.
        mounts.push(mount("sa-token", SA_TOKEN_DIR, true));
    }
    Container {
        name: names::SERVER_CONTAINER.into(),
        image: Some(crate::pin::reference(&spec.image, input.pinned_image)),
        image_pull_policy: Some(
            ImagePullPolicy::for_image(&spec.image, spec.image_pull_policy)
                .as_str()
                .into(),
        ),
        command,
        args,
        env: (!env.is_empty()).then_some(env),
        // Outlive the facade's drain, so calls in flight reach a live server.
        lifecycle: Some(pre_stop_sleep(PRESTOP_SECONDS + DRAIN_SECONDS)),
        security_context: Some(container_security_context(
            input.sandbox.read_only_root_filesystem,
        )),
        resources: Some(ResourceRequirements {
            requests: Some(input.sandbox.resources.requests.clone()),
            limits: Some(input.sandbox.resources.limits.clone()),
            ..ResourceRequirements::default()
        }),
        volume_mounts: Some(mounts),
        ..Container::default()
    }
}

/// Where the facade sends spans (the standard `OTEL_*` variables, only when
/// the platform set a collector) and audit records (`--audit-http`).
fn telemetry(input: BuildInput<'_>, args: &mut Vec<String>, env: &mut Vec<EnvVar>) {
    let t = &input.config.facade_telemetry;
    let value = |name: &str, value: String| EnvVar {
        name: name.into(),
        value: Some(value),
        value_from: None,
    };
    if let Some(endpoint) = &t.otlp_endpoint {
        let server = input.server;
        env.extend([
            value("OTEL_EXPORTER_OTLP_ENDPOINT", endpoint.clone()),
            value(
                "OTEL_EXPORTER_OTLP_PROTOCOL",
                t.otlp_protocol
                    .clone()
                    .unwrap_or_else(|| "http/protobuf".into()),
            ),
            value("OTEL_TRACES_SAMPLER", "parentbased_traceidratio".into()),
            value("OTEL_TRACES_SAMPLER_ARG", t.trace_sampling.clone()),
            value("OTEL_SERVICE_NAME", "mcp-warden-facade".into()),
            value(
                "OTEL_RESOURCE_ATTRIBUTES",
                format!(
                    "k8s.namespace.name={},mcpwarden.server={}",
                    names::namespace(server),
                    server.metadata.name.as_deref().unwrap_or_default()
                ),
            ),
        ]);
    }
    if let Some(store) = &t.audit_http {
        args.extend(["--audit-http".into(), store.clone()]);
    }
}

/// The facade: the only way in.
fn facade_container(input: BuildInput<'_>) -> Container {
    let spec = &input.server.spec;
    let mut args = vec![
        "run".to_string(),
        "--policy".into(),
        format!("{POLICY_DIR}/{POLICY_KEY}"),
        "--listen".into(),
        format!("0.0.0.0:{FACADE_PORT}"),
        "--admin-listen".into(),
        format!("0.0.0.0:{ADMIN_PORT}"),
        "--allowed-host".into(),
        names::allowed_hosts(input.server, input.config).join(","),
        "--drain-timeout-secs".into(),
        DRAIN_SECONDS.to_string(),
    ];
    let mut mounts = vec![
        mount("policy", POLICY_DIR, true),
        mount("jwks", JWKS_DIR, true),
        mount("peer-key", PEER_KEY_DIR, true),
        mount("admin-token", ADMIN_TOKEN_DIR, true),
    ];
    mounts.extend(facade_auth::mounts(input));
    if names::tls_secret(input.server).is_some() {
        args.extend([
            "--tls-cert-file".into(),
            format!("{TLS_DIR}/tls.crt"),
            "--tls-key-file".into(),
            format!("{TLS_DIR}/tls.key"),
        ]);
        mounts.push(mount("tls", TLS_DIR, true));
    }
    let env_value = |name: &str, value: String| EnvVar {
        name: name.into(),
        value: Some(value),
        value_from: None,
    };
    let mut env = vec![
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
        env_value(
            "MCP_WARDEN_PEER_KEY_FILE",
            format!("{PEER_KEY_DIR}/{PEER_KEY_KEY}"),
        ),
        env_value(
            "MCP_WARDEN_ADVERTISE_ADDR",
            format!("$(POD_IP):{FACADE_PORT}"),
        ),
        // `/tools` shows hidden tools: only the operator, with this token, reads it.
        env_value(
            "MCP_WARDEN_ADMIN_TOKEN_FILE",
            format!("{ADMIN_TOKEN_DIR}/{ADMIN_TOKEN_KEY}"),
        ),
    ];
    // Which replica counts an identity's calls: the operator lists the
    // replicas (the pods cannot look each other up: DNS is closed). Set for
    // one replica too, so scaling out never rolls the pods.
    env.push(env_value(
        "MCP_WARDEN_PEERS_FILE",
        format!("{PEERS_DIR}/{PEERS_KEY}"),
    ));
    mounts.push(mount("peers", PEERS_DIR, true));
    if !spec.protocol_era.is_auto() {
        args.extend(["--upstream-era".into(), spec.protocol_era.as_str().into()]);
    }
    telemetry(input, &mut args, &mut env);
    match spec.transport {
        _ if spec.remote.is_some() => remote_upstream(input, &mut args, &mut mounts),
        Transport::Stdio => {
            args.extend(["--upstream-socket".into(), SOCKET_PATH.into()]);
            mounts.push(mount("run-mcp", SOCKET_DIR, false));
        }
        Transport::StreamableHttp => {
            let port = spec.port.unwrap_or_default();
            args.extend([
                "--upstream-url".into(),
                format!("http://127.0.0.1:{port}{}", spec.path),
            ]);
        }
    }
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
    Container {
        name: "facade".into(),
        image: Some(input.config.sidecar_image.clone()),
        image_pull_policy: Some(sidecar_pull_policy(input)),
        args: Some(args),
        env: Some(env),
        ports: Some(vec![port("http", FACADE_PORT), port("admin", ADMIN_PORT)]),
        // Stay in service until every endpoint list has dropped this pod.
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

/// The facade's arguments and mounts for a remote server: its URL, the CA
/// bundle, the private blocks approved for it, the credential Secrets.
fn remote_upstream(input: BuildInput<'_>, args: &mut Vec<String>, mounts: &mut Vec<VolumeMount>) {
    let Some(remote) = &input.server.spec.remote else {
        return;
    };
    args.extend(["--upstream-url".into(), remote.url.clone()]);
    if let Some(ca) = remote.tls.as_ref().and_then(|t| t.ca_config_map.as_ref()) {
        args.extend([
            "--upstream-ca-file".into(),
            format!("{UPSTREAM_CA_DIR}/{}", ca.key),
        ]);
        mounts.push(mount("upstream-ca", UPSTREAM_CA_DIR, true));
    }
    // The guard refuses private addresses unless named: name the blocks
    // the spec gives (and an address the URLs give instead of a host), but
    // only once their egress is approved (on some port).
    let mut blocks: BTreeSet<String> = remote.private_cidrs.iter().cloned().collect();
    blocks.extend(
        std::iter::once(remote.url.clone())
            .chain(remote.token_urls())
            .filter_map(|u| host_port(&u))
            .filter_map(|(host, _)| address_block(&host)),
    );
    let allowed: Vec<String> = blocks
        .into_iter()
        .filter(|c| {
            (input.approved.egress.iter())
                .chain(&input.approved.broad_egress)
                .any(|(cidr, _)| cidr == c)
        })
        .collect();
    if !allowed.is_empty() {
        args.extend(["--upstream-allow-cidr".into(), allowed.join(",")]);
    }
    for (i, secret) in names::remote_secrets(input.server).keys().enumerate() {
        mounts.push(mount(
            &format!("upstream-{i}"),
            &format!("{UPSTREAM_SECRETS_DIR}/{secret}"),
            true,
        ));
    }
}

#[cfg(test)]
mod tests {
    use mcp_warden_crds::{MCPServer, ToolProfileSpec};

    use crate::{config::BuildConfig, plan};

    #[test]
    fn expose_tls_is_the_facades_alone_and_required() {
        let server: MCPServer = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {name: git, namespace: team-a}\n\
             spec: {image: i, command: [x], toolProfileRef: {name: p}, expose: {tls: {secretName: git-tls}}}\n",
        )
        .unwrap();
        let tools: ToolProfileSpec = serde_yaml_ng::from_str("tools: [{name: a}]").unwrap();
        let inputs = plan::Inputs {
            server: &server,
            tool_profile: Some(&tools),
            sandbox_profile: None,
            jwks: None,
            issuer_jwks: None,
            content: None,
            revoke: false,
            peers: &[],
            reported_image: &crate::pin::Reported::Nothing,
        };
        let plan = plan::plan(&inputs, &BuildConfig::default()).unwrap();
        let pod = plan.objects.deployment.spec.unwrap().template.spec.unwrap();
        let facade = pod.containers.iter().find(|c| c.name == "facade").unwrap();
        let args = facade.args.as_ref().unwrap().join(" ");
        assert!(
            args.contains("--tls-cert-file /etc/mcp-warden/tls/tls.crt --tls-key-file /etc/mcp-warden/tls/tls.key"),
            "{args}"
        );
        let mounted = |c: &k8s_openapi::api::core::v1::Container| {
            c.volume_mounts.iter().flatten().any(|m| m.name == "tls")
        };
        assert!(mounted(facade));
        assert!(!pod
            .containers
            .iter()
            .any(|c| c.name == "server" && mounted(c)));
        let volume = pod
            .volumes
            .unwrap()
            .into_iter()
            .find(|v| v.name == "tls")
            .unwrap();
        let secret = volume.secret.unwrap();
        assert_eq!(secret.secret_name.as_deref(), Some("git-tls"));
        assert_eq!(secret.optional, Some(false), "no TLS, no start");
    }
}

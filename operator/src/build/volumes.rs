//! The pod's volumes, for [`super::deployment`]: the server's writable
//! places (`tmp`, `home`), the facade's policy, keys, tokens and TLS, the
//! stdio bridge's socket and binary, the workspace, and the projected
//! service-account token a server gets only when `serviceaccount.token` is
//! approved. Which container mounts which is decided in `deployment.rs`;
//! this file only says what each volume is.

use k8s_openapi::{
    api::core::v1::{
        ConfigMapProjection, ConfigMapVolumeSource, DownwardAPIProjection, DownwardAPIVolumeFile,
        EmptyDirVolumeSource, KeyToPath, ObjectFieldSelector, PersistentVolumeClaimVolumeSource,
        ProjectedVolumeSource, SecretVolumeSource, ServiceAccountTokenProjection, Volume,
        VolumeProjection,
    },
    apimachinery::pkg::api::resource::Quantity,
};
use mcp_warden_crds::mcpserver::Transport;

use super::{facade_auth, BuildInput};
use crate::names;

/// Where Kubernetes client libraries look for the in-cluster token.
pub(super) const SA_TOKEN_DIR: &str = "/var/run/secrets/kubernetes.io/serviceaccount";

/// `workspace.write` approved (which implies the sandbox asks for readWrite).
pub(super) fn workspace_writable(input: BuildInput<'_>) -> bool {
    input.approved.workspace_write
}

/// The projected token volume `serviceaccount.token` grants: what automount
/// would give, mounted into the server container only.
fn service_account_token_volume() -> Volume {
    Volume {
        name: "sa-token".into(),
        projected: Some(ProjectedVolumeSource {
            default_mode: Some(0o440),
            sources: Some(vec![
                VolumeProjection {
                    service_account_token: Some(ServiceAccountTokenProjection {
                        path: "token".into(),
                        expiration_seconds: Some(3600),
                        audience: None,
                    }),
                    ..VolumeProjection::default()
                },
                VolumeProjection {
                    config_map: Some(ConfigMapProjection {
                        name: "kube-root-ca.crt".into(),
                        items: Some(vec![KeyToPath {
                            key: "ca.crt".into(),
                            path: "ca.crt".into(),
                            mode: None,
                        }]),
                        optional: None,
                    }),
                    ..VolumeProjection::default()
                },
                VolumeProjection {
                    downward_api: Some(DownwardAPIProjection {
                        items: Some(vec![DownwardAPIVolumeFile {
                            path: "namespace".into(),
                            field_ref: Some(ObjectFieldSelector {
                                field_path: "metadata.namespace".into(),
                                api_version: None,
                            }),
                            ..DownwardAPIVolumeFile::default()
                        }]),
                    }),
                    ..VolumeProjection::default()
                },
            ]),
        }),
        ..Volume::default()
    }
}

fn empty_dir(name: &str, size: &str) -> Volume {
    Volume {
        name: name.into(),
        empty_dir: Some(EmptyDirVolumeSource {
            size_limit: Some(Quantity(size.into())),
            medium: None,
        }),
        ..Volume::default()
    }
}

pub(super) fn volumes(input: BuildInput<'_>) -> Vec<Volume> {
    let spec = &input.server.spec;
    let mut volumes = Vec::new();
    if spec.remote.is_none() {
        // The server container's writable places.
        volumes.push(empty_dir("tmp", &input.sandbox.tmp_size_limit.0));
        volumes.push(empty_dir("home", &input.sandbox.home_size_limit.0));
    }
    volumes.extend([
        Volume {
            name: "policy".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: names::policy_config_map(input.server),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        Volume {
            name: "jwks".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: names::jwks_config_map(input.server),
                // Until the operator could read the issuer's keys, tokens
                // are refused; the pod still starts.
                optional: Some(true),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        },
        Volume {
            name: "peer-key".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(names::peer_key_secret(input.server)),
                default_mode: Some(0o440),
                optional: Some(false),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
        Volume {
            name: "admin-token".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(names::admin_token_secret(input.server)),
                default_mode: Some(0o440),
                optional: Some(false),
                ..SecretVolumeSource::default()
            }),
            ..Volume::default()
        },
    ]);
    volumes.push(Volume {
        name: "peers".into(),
        config_map: Some(ConfigMapVolumeSource {
            name: names::peers_config_map(input.server),
            // The pods start before the operator has seen them; until the
            // list arrives each counts alone.
            optional: Some(true),
            ..ConfigMapVolumeSource::default()
        }),
        ..Volume::default()
    });
    volumes.extend(facade_auth::volumes(input));
    if let Some(secret) = names::tls_secret(input.server) {
        // Not optional: a facade asked to serve TLS must not start without
        // it; the pod waits until the Secret (e.g. cert-manager's) exists.
        volumes.push(Volume {
            name: "tls".into(),
            secret: Some(SecretVolumeSource {
                secret_name: Some(secret.into()),
                items: Some(
                    ["tls.crt", "tls.key"]
                        .map(|k| KeyToPath {
                            key: k.into(),
                            path: k.into(),
                            mode: None,
                        })
                        .to_vec(),
                ),
                default_mode: Some(0o440),
                optional: Some(false),
            }),
            ..Volume::default()
        });
    }
    if let Some(remote) = &spec.remote {
        if let Some(ca) = remote.tls.as_ref().and_then(|t| t.ca_config_map.as_ref()) {
            volumes.push(Volume {
                name: "upstream-ca".into(),
                config_map: Some(ConfigMapVolumeSource {
                    name: ca.name.clone(),
                    items: Some(vec![KeyToPath {
                        key: ca.key.clone(),
                        path: ca.key.clone(),
                        mode: None,
                    }]),
                    optional: Some(false),
                    ..ConfigMapVolumeSource::default()
                }),
                ..Volume::default()
            });
        }
        for (i, (secret, keys)) in names::remote_secrets(input.server).into_iter().enumerate() {
            volumes.push(Volume {
                name: format!("upstream-{i}"),
                secret: Some(SecretVolumeSource {
                    secret_name: Some(secret),
                    items: Some(
                        keys.into_iter()
                            .map(|k| KeyToPath {
                                key: k.clone(),
                                path: k,
                                mode: None,
                            })
                            .collect(),
                    ),
                    default_mode: Some(0o440),
                    optional: Some(false),
                }),
                ..Volume::default()
            });
        }
        return volumes;
    }
    if spec.transport == Transport::Stdio {
        volumes.push(empty_dir("bridge-bin", "64Mi"));
        volumes.push(empty_dir("run-mcp", "1Mi"));
    }
    if let Some(ws) = &spec.workspace {
        let mut volume = Volume {
            name: "workspace".into(),
            ..Volume::default()
        };
        if let Some(claim) = &ws.persistent_volume_claim {
            volume.persistent_volume_claim = Some(PersistentVolumeClaimVolumeSource {
                claim_name: claim.claim_name.clone(),
                read_only: Some(!workspace_writable(input)),
            });
        } else if let Some(dir) = &ws.empty_dir {
            volume.empty_dir = Some(EmptyDirVolumeSource {
                size_limit: Some(dir.size_limit.clone()),
                medium: None,
            });
        }
        volumes.push(volume);
    }
    if input.approved.service_account_token {
        volumes.push(service_account_token_volume());
    }
    volumes
}

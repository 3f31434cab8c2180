//! The egress proxy's own objects (pure), built in apply from every
//! server it serves: Deployment, Service, clients ConfigMap, NetworkPolicy.
//! The same builder makes the namespace's shared proxy and a server's own
//! ([`ProxyOf`]): only names, labels and owners differ, so both scopes
//! enforce the same way.

use super::*;

/// Everything a proxy's objects are built from.
#[derive(Clone, Copy, Debug)]
pub struct ProxyInput<'a> {
    /// The namespace.
    pub namespace: &'a str,
    /// Whose proxy (names and labels).
    pub of: ProxyOf<'a>,
    /// Every server served, sorted by name (a server's own proxy: itself).
    pub clients: &'a [ProxyClient],
    /// An owner reference to each of them (not a controller).
    pub owners: &'a [OwnerReference],
    /// The Service's owners: every server holding a credential.
    pub service_owners: &'a [OwnerReference],
    /// Operator settings.
    pub config: &'a BuildConfig,
}

/// A proxy's objects.
#[derive(Clone, Debug, PartialEq)]
pub struct ProxyObjects {
    /// The proxy.
    pub deployment: Deployment,
    /// Its address.
    pub service: Service,
    /// The clients file.
    pub clients_config_map: ConfigMap,
    /// Who may reach it, and where it may go.
    pub network_policy: NetworkPolicy,
}

fn metadata(input: ProxyInput<'_>, name: &str) -> ObjectMeta {
    owned_by(input, name, input.owners)
}

fn owned_by(input: ProxyInput<'_>, name: &str, owners: &[OwnerReference]) -> ObjectMeta {
    ObjectMeta {
        name: Some(name.into()),
        namespace: Some(input.namespace.into()),
        labels: Some(input.of.labels()),
        owner_references: (!owners.is_empty()).then(|| owners.to_vec()),
        ..ObjectMeta::default()
    }
}

/// The clients file (sorted by name, so the same servers make the same bytes).
pub fn clients_file(clients: &[ProxyClient]) -> String {
    let mut sorted = clients.to_vec();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    serde_json::to_string_pretty(&serde_json::json!({"version": 1, "clients": sorted}))
        .expect("the clients file serializes")
}

/// Every object of the proxy.
pub fn desired_proxy_objects(input: ProxyInput<'_>) -> ProxyObjects {
    let name = input.of.proxy_name();
    ProxyObjects {
        deployment: desired_deployment(input),
        service: Service {
            metadata: owned_by(input, &name, input.service_owners),
            spec: Some(ServiceSpec {
                selector: Some(input.of.selector()),
                ports: Some(vec![ServicePort {
                    name: Some("proxy".into()),
                    port: PROXY_PORT,
                    target_port: Some(IntOrString::Int(PROXY_PORT)),
                    protocol: Some("TCP".into()),
                    ..ServicePort::default()
                }]),
                ..ServiceSpec::default()
            }),
            ..Service::default()
        },
        clients_config_map: ConfigMap {
            metadata: metadata(input, &input.of.clients_config_map()),
            data: Some(BTreeMap::from([(
                CLIENTS_KEY.into(),
                clients_file(input.clients),
            )])),
            ..ConfigMap::default()
        },
        network_policy: desired_network_policy(input),
    }
}

fn desired_deployment(input: ProxyInput<'_>) -> Deployment {
    let args = [
        "egress",
        "--listen",
        "0.0.0.0:3128",
        "--clients-file",
        "/etc/mcp-warden-egress/clients.json",
        "--metrics-listen",
        "0.0.0.0:9090",
    ];
    let container = Container {
        name: "egress".into(),
        image: Some(input.config.sidecar_image.clone()),
        command: Some(vec![names::SIDECAR_BIN.into()]),
        args: Some(args.iter().map(|a| a.to_string()).collect()),
        ports: Some(vec![
            ContainerPort {
                name: Some("proxy".into()),
                container_port: PROXY_PORT,
                protocol: Some("TCP".into()),
                ..ContainerPort::default()
            },
            ContainerPort {
                name: Some("metrics".into()),
                container_port: METRICS_PORT,
                protocol: Some("TCP".into()),
                ..ContainerPort::default()
            },
        ]),
        readiness_probe: Some(Probe {
            tcp_socket: Some(TCPSocketAction {
                port: IntOrString::Int(PROXY_PORT),
                host: None,
            }),
            period_seconds: Some(5),
            ..Probe::default()
        }),
        security_context: Some(container_security_context(true)),
        volume_mounts: Some(vec![mount("clients", CLIENTS_DIR, true)]),
        ..Container::default()
    };
    let pod = PodSpec {
        automount_service_account_token: Some(false),
        enable_service_links: Some(false),
        security_context: Some(PodSecurityContext {
            run_as_non_root: Some(true),
            run_as_user: Some(65532),
            run_as_group: Some(65532),
            seccomp_profile: Some(SeccompProfile {
                type_: "RuntimeDefault".into(),
                ..SeccompProfile::default()
            }),
            ..PodSecurityContext::default()
        }),
        containers: vec![container],
        volumes: Some(vec![Volume {
            name: "clients".into(),
            config_map: Some(ConfigMapVolumeSource {
                name: input.of.clients_config_map(),
                ..ConfigMapVolumeSource::default()
            }),
            ..Volume::default()
        }]),
        ..PodSpec::default()
    };
    Deployment {
        metadata: metadata(input, &input.of.proxy_name()),
        spec: Some(DeploymentSpec {
            replicas: Some(input.config.egress_proxy_replicas),
            selector: LabelSelector {
                match_labels: Some(input.of.selector()),
                ..LabelSelector::default()
            },
            template: PodTemplateSpec {
                metadata: Some(ObjectMeta {
                    labels: Some(input.of.labels()),
                    ..ObjectMeta::default()
                }),
                spec: Some(pod),
            },
            ..DeploymentSpec::default()
        }),
        ..Deployment::default()
    }
}

fn desired_network_policy(input: ProxyInput<'_>) -> NetworkPolicy {
    let cfg = input.config;
    let servers: BTreeSet<String> = input.clients.iter().map(|c| c.server().into()).collect();
    let from_servers = NetworkPolicyPeer {
        pod_selector: Some(LabelSelector {
            match_expressions: Some(vec![LabelSelectorRequirement {
                key: names::SERVER_LABEL.into(),
                operator: "In".into(),
                values: Some(servers.into_iter().collect()),
            }]),
            ..LabelSelector::default()
        }),
        ..NetworkPolicyPeer::default()
    };
    let metrics_from = NetworkPolicyPeer {
        namespace_selector: labels(&cfg.metrics_namespace_labels),
        ..NetworkPolicyPeer::default()
    };
    let ingress = vec![
        NetworkPolicyIngressRule {
            ports: Some(vec![tcp(PROXY_PORT)]),
            from: Some(vec![from_servers]),
        },
        NetworkPolicyIngressRule {
            ports: Some(vec![tcp(METRICS_PORT)]),
            from: Some(vec![metrics_from]),
        },
    ];
    // The proxy resolves names itself.
    let mut egress = vec![dns_rule()];
    let host_ports: BTreeSet<i32> = input
        .clients
        .iter()
        .flat_map(|c| c.entry.hosts.iter().map(|h| h.port))
        .collect();
    if !host_ports.is_empty() {
        let public = |cidr: &str, not_public: &[&str]| {
            let mut except: Vec<String> = not_public.iter().map(|s| s.to_string()).collect();
            except.extend(egress_scope::except_for(cidr, &cfg.cluster_ranges));
            except.sort();
            except.dedup();
            NetworkPolicyPeer {
                ip_block: Some(IPBlock {
                    cidr: cidr.into(),
                    except: Some(except),
                }),
                ..NetworkPolicyPeer::default()
            }
        };
        egress.push(NetworkPolicyEgressRule {
            ports: Some(host_ports.into_iter().map(tcp).collect()),
            to: Some(vec![
                public("0.0.0.0/0", NOT_PUBLIC_V4),
                public("::/0", NOT_PUBLIC_V6),
            ]),
        });
    }
    // A CIDR rule's block, as approved for some server (its own ports).
    let mut by_cidr: BTreeMap<&str, BTreeSet<i32>> = BTreeMap::new();
    for c in input.clients.iter().flat_map(|c| &c.entry.cidrs) {
        by_cidr.entry(&c.cidr).or_default().insert(c.port);
    }
    for (cidr, ports) in by_cidr {
        egress.push(NetworkPolicyEgressRule {
            ports: Some(ports.into_iter().map(tcp).collect()),
            to: Some(vec![NetworkPolicyPeer {
                ip_block: Some(IPBlock {
                    cidr: cidr.into(),
                    except: None,
                }),
                ..NetworkPolicyPeer::default()
            }]),
        });
    }
    NetworkPolicy {
        metadata: metadata(input, &input.of.proxy_name()),
        spec: Some(NetworkPolicySpec {
            pod_selector: labels(&input.of.selector()),
            policy_types: Some(vec!["Ingress".into(), "Egress".into()]),
            ingress: Some(ingress),
            egress: Some(egress),
        }),
    }
}

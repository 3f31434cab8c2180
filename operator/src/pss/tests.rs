//! The checker itself: a compliant pod passes, and each rule catches a pod
//! that breaks only it.

use super::*;
use k8s_openapi::api::core::v1::{
    AppArmorProfile, Capabilities, ContainerPort, EphemeralContainer, HostPathVolumeSource,
    PodSecurityContext, SELinuxOptions, Sysctl, Volume, WindowsSecurityContextOptions,
};
use serde_json::json;

fn compliant() -> PodSpec {
    serde_json::from_value(json!({
        "securityContext": {"runAsNonRoot": true, "runAsUser": 1000, "seccompProfile": {"type": "RuntimeDefault"}},
        "initContainers": [{"name": "init", "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"]}}}],
        "containers": [{"name": "app", "ports": [{"containerPort": 80}], "securityContext": {
            "allowPrivilegeEscalation": false, "capabilities": {"drop": ["ALL"], "add": ["NET_BIND_SERVICE"]}}}],
        "volumes": [{"name": "tmp", "emptyDir": {}}, {"name": "cfg", "configMap": {"name": "c"}}]
    }))
    .unwrap()
}

fn rules(pod: &PodSpec) -> Vec<Rule> {
    rules_with(pod, &BTreeMap::new())
}

fn rules_with(pod: &PodSpec, annotations: &BTreeMap<String, String>) -> Vec<Rule> {
    let mut r: Vec<Rule> = check_restricted(pod, annotations)
        .into_iter()
        .map(|v| v.rule)
        .collect();
    r.dedup();
    r
}

fn app(pod: &mut PodSpec) -> &mut SecurityContext {
    pod.containers[0]
        .security_context
        .get_or_insert_with(Default::default)
}

fn pod_sc(pod: &mut PodSpec) -> &mut PodSecurityContext {
    pod.security_context.get_or_insert_with(Default::default)
}

#[test]
fn compliant_pod_passes() {
    assert_eq!(check_restricted(&compliant(), &BTreeMap::new()), vec![]);
}

#[test]
fn host_process() {
    let mut pod = compliant();
    app(&mut pod).windows_options = Some(WindowsSecurityContextOptions {
        host_process: Some(true),
        ..Default::default()
    });
    assert_eq!(rules(&pod), [Rule::HostProcess]);
}

#[test]
fn host_namespaces() {
    let setters: [fn(&mut PodSpec); 3] = [
        |p| p.host_network = Some(true),
        |p| p.host_pid = Some(true),
        |p| p.host_ipc = Some(true),
    ];
    for set in setters {
        let mut pod = compliant();
        set(&mut pod);
        assert_eq!(rules(&pod), [Rule::HostNamespaces]);
    }
}

#[test]
fn privileged() {
    let mut pod = compliant();
    app(&mut pod).privileged = Some(true);
    assert_eq!(rules(&pod), [Rule::Privileged]);
}

#[test]
fn capabilities_must_drop_all_and_add_only_net_bind_service() {
    let mut pod = compliant();
    app(&mut pod).capabilities = Some(Capabilities {
        drop: Some(vec!["ALL".into()]),
        add: Some(vec!["SYS_ADMIN".into()]),
    });
    assert_eq!(rules(&pod), [Rule::Capabilities]);
    let mut pod = compliant();
    app(&mut pod).capabilities = Some(Capabilities {
        drop: Some(vec!["NET_RAW".into()]),
        add: None,
    });
    assert_eq!(rules(&pod), [Rule::Capabilities]);
}

#[test]
fn host_path_volumes() {
    let mut pod = compliant();
    pod.volumes.get_or_insert_with(Vec::new).push(Volume {
        name: "h".into(),
        host_path: Some(HostPathVolumeSource {
            path: "/".into(),
            type_: None,
        }),
        ..Default::default()
    });
    // A hostPath volume is also outside the restricted volume types.
    assert_eq!(rules(&pod), [Rule::HostPathVolumes, Rule::VolumeTypes]);
}

#[test]
fn host_ports() {
    let mut pod = compliant();
    pod.containers[0].ports = Some(vec![ContainerPort {
        container_port: 80,
        host_port: Some(80),
        ..Default::default()
    }]);
    assert_eq!(rules(&pod), [Rule::HostPorts]);
}

#[test]
fn apparmor_field_and_annotation() {
    let mut pod = compliant();
    app(&mut pod).app_armor_profile = Some(AppArmorProfile {
        type_: "Unconfined".into(),
        localhost_profile: None,
    });
    assert_eq!(rules(&pod), [Rule::AppArmor]);
    let annotations = BTreeMap::from([(
        format!("{APPARMOR_ANNOTATION}app"),
        "unconfined".to_string(),
    )]);
    assert_eq!(rules_with(&compliant(), &annotations), [Rule::AppArmor]);
    let fine = BTreeMap::from([(
        format!("{APPARMOR_ANNOTATION}app"),
        "runtime/default".to_string(),
    )]);
    assert_eq!(rules_with(&compliant(), &fine), []);
}

#[test]
fn selinux() {
    let mut pod = compliant();
    pod_sc(&mut pod).se_linux_options = Some(SELinuxOptions {
        type_: Some("spc_t".into()),
        ..Default::default()
    });
    assert_eq!(rules(&pod), [Rule::SeLinux]);
    let mut pod = compliant();
    app(&mut pod).se_linux_options = Some(SELinuxOptions {
        user: Some("root".into()),
        ..Default::default()
    });
    assert_eq!(rules(&pod), [Rule::SeLinux]);
}

#[test]
fn proc_mount() {
    let mut pod = compliant();
    app(&mut pod).proc_mount = Some("Unmasked".into());
    assert_eq!(rules(&pod), [Rule::ProcMount]);
}

#[test]
fn seccomp_must_be_set_and_confined() {
    let mut pod = compliant();
    pod_sc(&mut pod).seccomp_profile = None;
    assert_eq!(rules(&pod), [Rule::Seccomp]);
    let mut pod = compliant();
    app(&mut pod).seccomp_profile = Some(SeccompProfile {
        type_: "Unconfined".into(),
        localhost_profile: None,
    });
    assert_eq!(rules(&pod), [Rule::Seccomp]);
}

#[test]
fn sysctls() {
    let mut pod = compliant();
    pod_sc(&mut pod).sysctls = Some(vec![Sysctl {
        name: "kernel.msgmax".into(),
        value: "1".into(),
    }]);
    assert_eq!(rules(&pod), [Rule::Sysctls]);
    let mut pod = compliant();
    pod_sc(&mut pod).sysctls = Some(vec![Sysctl {
        name: "net.ipv4.tcp_syncookies".into(),
        value: "1".into(),
    }]);
    assert_eq!(rules(&pod), []);
}

#[test]
fn volume_types() {
    let mut pod = compliant();
    pod.volumes.get_or_insert_with(Vec::new).push(
        serde_json::from_value(json!({
            "name": "nfs", "nfs": {"server": "s", "path": "/"}
        }))
        .unwrap(),
    );
    assert_eq!(rules(&pod), [Rule::VolumeTypes]);
}

#[test]
fn privilege_escalation() {
    let mut pod = compliant();
    app(&mut pod).allow_privilege_escalation = None;
    assert_eq!(rules(&pod), [Rule::PrivilegeEscalation]);
}

#[test]
fn run_as_non_root() {
    let mut pod = compliant();
    pod_sc(&mut pod).run_as_non_root = None;
    assert_eq!(rules(&pod), [Rule::RunAsNonRoot]);
    let mut pod = compliant();
    app(&mut pod).run_as_non_root = Some(false);
    assert_eq!(rules(&pod), [Rule::RunAsNonRoot]);
}

#[test]
fn run_as_user_zero() {
    let mut pod = compliant();
    app(&mut pod).run_as_user = Some(0);
    assert_eq!(rules(&pod), [Rule::RunAsUser]);
    let mut pod = compliant();
    pod_sc(&mut pod).run_as_user = Some(0);
    assert_eq!(rules(&pod), [Rule::RunAsUser]);
}

#[test]
fn ephemeral_containers_are_checked() {
    let mut pod = compliant();
    pod.ephemeral_containers = Some(vec![EphemeralContainer {
        name: "debug".into(),
        ..Default::default()
    }]);
    let found = check_restricted(&pod, &BTreeMap::new());
    assert!(found.iter().all(|v| v.at == "container debug"), "{found:?}");
    assert!(found.iter().any(|v| v.rule == Rule::PrivilegeEscalation));
}

//! A Pod Security Standards checker, level **restricted** (which includes
//! **baseline**), as the standards read for Kubernetes v1.33. Pure: it looks
//! at a `PodSpec` (+ the pod's annotations) and lists every violation.
//! Tests run it over every pod the builders can produce and over pods that
//! break each rule.
//!
//! Rules (`Rule` variants), in the order of the standard's page:
//! baseline — HostProcess, host namespaces, privileged, capabilities, hostPath
//! volumes, host ports, AppArmor, SELinux, `/proc` mount, seccomp, sysctls;
//! restricted — volume types, privilege escalation, non-root, non-root user
//! id, seccomp (must be set), capabilities (drop ALL, add only NET_BIND_SERVICE).

use std::collections::BTreeMap;

use k8s_openapi::api::core::v1::{Container, PodSpec, SeccompProfile, SecurityContext};

/// A rule of the standard.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Rule {
    /// Windows HostProcess pods are not allowed.
    HostProcess,
    /// `hostNetwork`, `hostPID`, `hostIPC` must be unset or false.
    HostNamespaces,
    /// `privileged` must be unset or false.
    Privileged,
    /// Capabilities: drop `ALL`; add nothing but `NET_BIND_SERVICE`.
    Capabilities,
    /// `hostPath` volumes are not allowed.
    HostPathVolumes,
    /// `hostPort` must be unset or 0.
    HostPorts,
    /// AppArmor profile must be unset, `RuntimeDefault` or `Localhost`.
    AppArmor,
    /// SELinux type must be one of the container types; user and role unset.
    SeLinux,
    /// `procMount` must be unset or `Default`.
    ProcMount,
    /// Seccomp must be `RuntimeDefault` or `Localhost`, for every container.
    Seccomp,
    /// Only the safe sysctls.
    Sysctls,
    /// Only configMap, csi, downwardAPI, emptyDir, ephemeral,
    /// persistentVolumeClaim, projected and secret volumes.
    VolumeTypes,
    /// `allowPrivilegeEscalation` must be false.
    PrivilegeEscalation,
    /// `runAsNonRoot` must be true (pod level or every container), never false.
    RunAsNonRoot,
    /// `runAsUser` must not be 0.
    RunAsUser,
}

/// One violation: the rule and where.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Violation {
    /// The rule broken.
    pub rule: Rule,
    /// `pod`, `volume <name>` or `container <name>`.
    pub at: String,
}

const SAFE_SYSCTLS: &[&str] = &[
    "kernel.shm_rmid_forced",
    "net.ipv4.ip_local_port_range",
    "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies",
    "net.ipv4.ping_group_range",
    "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time",
    "net.ipv4.tcp_fin_timeout",
    "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
];
const SELINUX_TYPES: &[&str] = &[
    "",
    "container_t",
    "container_init_t",
    "container_kvm_t",
    "container_engine_t",
];
const APPARMOR_ANNOTATION: &str = "container.apparmor.security.beta.kubernetes.io/";

/// Every violation of the restricted level, sorted.
pub fn check_restricted(pod: &PodSpec, annotations: &BTreeMap<String, String>) -> Vec<Violation> {
    let mut out = Vec::new();
    let mut flag = |rule: Rule, at: &str| {
        out.push(Violation {
            rule,
            at: at.to_string(),
        })
    };
    let psc = pod.security_context.clone().unwrap_or_default();

    // Pod level.
    if psc.windows_options.as_ref().and_then(|w| w.host_process) == Some(true) {
        flag(Rule::HostProcess, "pod");
    }
    if [pod.host_network, pod.host_pid, pod.host_ipc].contains(&Some(true)) {
        flag(Rule::HostNamespaces, "pod");
    }
    if psc
        .app_armor_profile
        .as_ref()
        .is_some_and(|p| !apparmor_ok(&p.type_))
    {
        flag(Rule::AppArmor, "pod");
    }
    for value in annotations
        .iter()
        .filter(|(k, _)| k.starts_with(APPARMOR_ANNOTATION))
        .map(|(_, v)| v)
    {
        if value != "runtime/default" && !value.starts_with("localhost/") {
            flag(Rule::AppArmor, "pod");
        }
    }
    if psc
        .se_linux_options
        .as_ref()
        .is_some_and(|o| !selinux_ok(o))
    {
        flag(Rule::SeLinux, "pod");
    }
    if psc.seccomp_profile.as_ref().is_some_and(|s| !seccomp_ok(s)) {
        flag(Rule::Seccomp, "pod");
    }
    if psc
        .sysctls
        .iter()
        .flatten()
        .any(|s| !SAFE_SYSCTLS.contains(&s.name.as_str()))
    {
        flag(Rule::Sysctls, "pod");
    }
    if psc.run_as_non_root == Some(false) {
        flag(Rule::RunAsNonRoot, "pod");
    }
    if psc.run_as_user == Some(0) {
        flag(Rule::RunAsUser, "pod");
    }
    for volume in pod.volumes.iter().flatten() {
        let at = format!("volume {}", volume.name);
        if volume.host_path.is_some() {
            flag(Rule::HostPathVolumes, &at);
        }
        let allowed = volume.config_map.is_some()
            || volume.csi.is_some()
            || volume.downward_api.is_some()
            || volume.empty_dir.is_some()
            || volume.ephemeral.is_some()
            || volume.persistent_volume_claim.is_some()
            || volume.projected.is_some()
            || volume.secret.is_some();
        if !allowed {
            flag(Rule::VolumeTypes, &at);
        }
    }

    // Every container, init and ephemeral ones included.
    let ephemeral: Vec<Container> = pod
        .ephemeral_containers
        .iter()
        .flatten()
        .map(|e| Container {
            name: e.name.clone(),
            security_context: e.security_context.clone(),
            ports: e.ports.clone(),
            ..Container::default()
        })
        .collect();
    let all = pod
        .init_containers
        .iter()
        .flatten()
        .chain(&pod.containers)
        .chain(&ephemeral);
    for c in all {
        let at = format!("container {}", c.name);
        let sc = c.security_context.clone().unwrap_or_default();
        for rule in container_violations(&sc, &psc) {
            flag(rule, &at);
        }
        if c.ports
            .iter()
            .flatten()
            .any(|p| p.host_port.unwrap_or(0) != 0)
        {
            flag(Rule::HostPorts, &at);
        }
    }
    out.sort();
    out.dedup();
    out
}

fn container_violations(
    sc: &SecurityContext,
    psc: &k8s_openapi::api::core::v1::PodSecurityContext,
) -> Vec<Rule> {
    let mut rules = Vec::new();
    if sc.windows_options.as_ref().and_then(|w| w.host_process) == Some(true) {
        rules.push(Rule::HostProcess);
    }
    if sc.privileged == Some(true) {
        rules.push(Rule::Privileged);
    }
    let caps = sc.capabilities.clone().unwrap_or_default();
    let drops_all = caps.drop.iter().flatten().any(|c| c == "ALL");
    let adds_only_bind = caps.add.iter().flatten().all(|c| c == "NET_BIND_SERVICE");
    if !drops_all || !adds_only_bind {
        rules.push(Rule::Capabilities);
    }
    if sc
        .app_armor_profile
        .as_ref()
        .is_some_and(|p| !apparmor_ok(&p.type_))
    {
        rules.push(Rule::AppArmor);
    }
    if sc.se_linux_options.as_ref().is_some_and(|o| !selinux_ok(o)) {
        rules.push(Rule::SeLinux);
    }
    if sc.proc_mount.as_deref().is_some_and(|m| m != "Default") {
        rules.push(Rule::ProcMount);
    }
    // Restricted: the container's own profile, else the pod's, must be set and allowed.
    match sc.seccomp_profile.as_ref().or(psc.seccomp_profile.as_ref()) {
        Some(s) if seccomp_ok(s) => {}
        _ => rules.push(Rule::Seccomp),
    }
    if sc.allow_privilege_escalation != Some(false) {
        rules.push(Rule::PrivilegeEscalation);
    }
    match sc.run_as_non_root.or(psc.run_as_non_root) {
        Some(true) => {}
        _ => rules.push(Rule::RunAsNonRoot),
    }
    if sc.run_as_user == Some(0) {
        rules.push(Rule::RunAsUser);
    }
    rules
}

fn apparmor_ok(type_: &str) -> bool {
    type_ == "RuntimeDefault" || type_ == "Localhost"
}

fn seccomp_ok(s: &SeccompProfile) -> bool {
    s.type_ == "RuntimeDefault" || s.type_ == "Localhost"
}

fn selinux_ok(o: &k8s_openapi::api::core::v1::SELinuxOptions) -> bool {
    SELINUX_TYPES.contains(&o.type_.as_deref().unwrap_or(""))
        && o.user.is_none()
        && o.role.is_none()
}

#[cfg(test)]
mod tests;

"""A Pod Security Standards checker, level "restricted" (which includes
"baseline"), as the standards read for Kubernetes v1.33 — the same rules as the
operator's Rust checker (operator/src/pss), for pods the chart renders.

    violations(pod_template) -> list[(rule, where)]   empty when the pod is compliant

`pod_template` is a Deployment's `spec.template` (metadata + spec) or a Pod.
"""
from __future__ import annotations

SAFE_SYSCTLS = {
    "kernel.shm_rmid_forced", "net.ipv4.ip_local_port_range", "net.ipv4.ip_unprivileged_port_start",
    "net.ipv4.tcp_syncookies", "net.ipv4.ping_group_range", "net.ipv4.ip_local_reserved_ports",
    "net.ipv4.tcp_keepalive_time", "net.ipv4.tcp_fin_timeout", "net.ipv4.tcp_keepalive_intvl",
    "net.ipv4.tcp_keepalive_probes",
}
SELINUX_TYPES = {"", "container_t", "container_init_t", "container_kvm_t", "container_engine_t"}
BASELINE_CAPS = {"AUDIT_WRITE", "CHOWN", "DAC_OVERRIDE", "FOWNER", "FSETID", "KILL", "MKNOD", "NET_BIND_SERVICE",
                 "SETFCAP", "SETGID", "SETPCAP", "SETUID", "SYS_CHROOT"}
VOLUME_TYPES = {"configMap", "csi", "downwardAPI", "emptyDir", "ephemeral", "persistentVolumeClaim", "projected",
                "secret"}
RULES = ("HostProcess", "HostNamespaces", "Privileged", "Capabilities", "HostPathVolumes", "HostPorts", "AppArmor",
         "SeLinux", "ProcMount", "Seccomp", "Sysctls", "VolumeTypes", "PrivilegeEscalation", "RunAsNonRoot",
         "RunAsUser")


def _containers(spec: dict):
    for field in ("initContainers", "containers", "ephemeralContainers"):
        for c in spec.get(field) or []:
            yield f"container {c['name']}", c


def violations(pod: dict) -> list[tuple[str, str]]:
    meta, spec = pod.get("metadata") or {}, pod["spec"]
    psc = spec.get("securityContext") or {}
    out: list[tuple[str, str]] = []

    def v(rule: str, at: str) -> None:
        out.append((rule, at))

    containers = list(_containers(spec))
    # --- baseline ---
    if (psc.get("windowsOptions") or {}).get("hostProcess"):
        v("HostProcess", "pod")
    if any(spec.get(k) for k in ("hostNetwork", "hostPID", "hostIPC")):
        v("HostNamespaces", "pod")
    for vol in spec.get("volumes") or []:
        if "hostPath" in vol:
            v("HostPathVolumes", f"volume {vol['name']}")
        kinds = set(vol) - {"name"}
        if not kinds <= VOLUME_TYPES:
            v("VolumeTypes", f"volume {vol['name']}")
    for s in psc.get("sysctls") or []:
        if s["name"] not in SAFE_SYSCTLS:
            v("Sysctls", "pod")
    for key, value in (meta.get("annotations") or {}).items():
        if key.startswith("container.apparmor.security.beta.kubernetes.io/"):
            if not (value == "runtime/default" or value.startswith("localhost/")):
                v("AppArmor", "pod")

    def apparmor(sc: dict, at: str) -> None:
        if (sc.get("appArmorProfile") or {}).get("type") not in (None, "RuntimeDefault", "Localhost"):
            v("AppArmor", at)

    def selinux(sc: dict, at: str) -> None:
        opts = sc.get("seLinuxOptions") or {}
        if opts.get("type", "") not in SELINUX_TYPES or opts.get("user") or opts.get("role"):
            v("SeLinux", at)

    def seccomp_type(sc: dict):
        return (sc.get("seccompProfile") or {}).get("type")

    apparmor(psc, "pod")
    selinux(psc, "pod")
    pod_seccomp = seccomp_type(psc)
    if pod_seccomp == "Unconfined":
        v("Seccomp", "pod")
    if psc.get("runAsNonRoot") is False:
        v("RunAsNonRoot", "pod")
    if psc.get("runAsUser") == 0:
        v("RunAsUser", "pod")

    for at, c in containers:
        sc = c.get("securityContext") or {}
        if sc.get("privileged"):
            v("Privileged", at)
        caps = sc.get("capabilities") or {}
        added = set(caps.get("add") or [])
        if not added <= BASELINE_CAPS or not added <= {"NET_BIND_SERVICE"} or "ALL" not in (caps.get("drop") or []):
            v("Capabilities", at)
        if any(p.get("hostPort") for p in c.get("ports") or []):
            v("HostPorts", at)
        apparmor(sc, at)
        selinux(sc, at)
        if sc.get("procMount") not in (None, "Default"):
            v("ProcMount", at)
        if (sc.get("windowsOptions") or {}).get("hostProcess"):
            v("HostProcess", at)
        # --- restricted ---
        own = seccomp_type(sc)
        if own == "Unconfined" or (own is None and pod_seccomp not in ("RuntimeDefault", "Localhost")):
            v("Seccomp", at)
        if sc.get("allowPrivilegeEscalation") is not False:
            v("PrivilegeEscalation", at)
        non_root = sc.get("runAsNonRoot")
        if non_root is False or (non_root is None and psc.get("runAsNonRoot") is not True):
            v("RunAsNonRoot", at)
        if sc.get("runAsUser") == 0:
            v("RunAsUser", at)
    return sorted(set(out))

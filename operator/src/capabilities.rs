//! Capabilities (pure): what an MCPServer asks for above the baseline, the
//! digest that binds them to the workload, and which of it an admin's
//! approval puts in force.
//!
//! ```text
//! spec + ToolProfile + SandboxProfile ─▶ requested (sorted names) ─┐
//! crate::workload::parts (image, command, env, profiles, …) ───────┴▶ digest "sha256:<hex>"
//! annotation mcpwarden.dev/approve ─┐
//! status.approvedDigest/-Capabilities/-Workload ┴─▶ decide ─▶ in force (→ compile + build),
//!                                                          hold (keep the last approved workload) + condition
//! ```
//!
//! The baseline: no egress, read-only workspace, no service-account token,
//! tools up to risk `medium`. Every capability above it has a stable name:
//!
//! | name | from |
//! |---|---|
//! | `network.egress:<cidr>:<port>` | each SandboxProfile egress rule × port; a remote given by address; each `remote.privateCidrs` block × the remote's ports |
//! | `network.egress.cluster:<cidr>:<port>` | the same, for a block that overlaps the cluster's pod, service or node ranges (`crate::egress_scope`) |
//! | `network.egress.internet:<cidr>:<port>` | the same, for a broad block (`0.0.0.0/0`, `::/0`, IPv4 shorter than /8, IPv6 shorter than /16); rendered with the cluster's ranges excepted |
//! | `network.egress.host:<name>:<port>` | each SandboxProfile egress host (and preset host) × port; `spec.remote`: its host, and each token endpoint's |
//! | `network.dns` | SandboxProfile `network.egress.dns: true` (applied only with some egress); `spec.remote` named by host |
//! | `workspace.write` | SandboxProfile `workspaceAccess: readWrite` |
//! | `serviceaccount.token` | SandboxProfile `automountServiceAccountToken: true` |
//! | `tool:<upstream name>` | a ToolProfile tool with risk `high` or `critical` |
//!
//! The approval message calls the last two *broad* and names ports where
//! node or control-plane services listen ([`cautions`]).
//!
//! The digest is sha256 over the sorted names, each followed by `\n`, then
//! the workload's parts in name order, each as `workload.<part>=<hash>\n`,
//! as `sha256:<lowercase hex>`. The parts (`crate::workload`) cover the
//! image, command, args, env, the content of the Secrets `secretEnv` names,
//! the workspace, the pod template overrides, `spec.remote`, and the
//! profiles with the JWKS ConfigMaps they name: two servers with the same
//! names but different workloads have different digests, so an approval is
//! not portable. Rules, in order:
//! 1. the annotation names the current digest → the whole requested set is
//!    in force and the current workload is the approved one;
//! 2. nothing is requested → the baseline: the workload rolls out at once;
//! 3. the annotation names `status.approvedDigest` (approved earlier, the
//!    spec or a profile changed since) → the earlier approved set, minus
//!    what is no longer requested, stays in force and the new digest is
//!    pending; when the workload itself changed (`status.approvedWorkload`
//!    differs) the operator *holds*: the Deployment and the policy keep the
//!    last approved workload (no rollout) and the condition is
//!    `ApprovalPending`, naming the parts that changed — except a profile
//!    change that only takes away (`crate::tightening`), which applies at
//!    once;
//! 4. else (no annotation, or a digest that matches neither) → nothing above
//!    the baseline is in force: removing the annotation revokes.

use std::{collections::BTreeSet, fmt};

use mcp_warden_crds::{
    sandboxprofile::WorkspaceAccess, MCPServer, MCPServerStatus, RiskLevel, SandboxProfileSpec,
    ToolProfileSpec,
};
use sha2::{Digest, Sha256};

use crate::{
    egress_scope::{self, ClusterRanges, Scope},
    names,
    workload::Parts,
};

/// The annotation a cluster admin sets to approve (contract).
pub const APPROVE_ANNOTATION: &str = "mcpwarden.dev/approve";
/// The annotation the webhook sets to the approving user (contract).
pub const APPROVED_BY_ANNOTATION: &str = "mcpwarden.dev/approved-by";

/// A capability above the baseline. Ordered and printed by its stable name.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub enum Capability {
    /// Outbound TCP to a CIDR block and port; the name says how far the
    /// block reaches (`crate::egress_scope`).
    Egress {
        /// The block.
        cidr: String,
        /// The port.
        port: i32,
        /// Plain, the cluster's own ranges, or broad (the internet).
        scope: Scope,
    },
    /// Outbound TCP to a host name and port (enforced by Cilium or Calico;
    /// a plain NetworkPolicy cannot, so there it opens nothing — except for
    /// a remote server, whose pod holds the facade alone: see
    /// `build::network_policy`).
    EgressHost {
        /// The host name.
        host: String,
        /// The port.
        port: i32,
    },
    /// DNS lookups to the cluster DNS.
    Dns,
    /// A writable workspace.
    WorkspaceWrite,
    /// Write-capable tools of a remote server (`spec.remote.writes`).
    RemoteWrite,
    /// A service-account token in the server container.
    ServiceAccountToken,
    /// A `high`/`critical` tool, by upstream name.
    Tool(String),
}

impl fmt::Display for Capability {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Capability::Egress { cidr, port, scope } => {
                let prefix = match scope {
                    Scope::Plain => "network.egress",
                    Scope::Cluster => "network.egress.cluster",
                    Scope::Internet => "network.egress.internet",
                };
                write!(f, "{prefix}:{cidr}:{port}")
            }
            Capability::EgressHost { host, port } => {
                write!(f, "network.egress.host:{host}:{port}")
            }
            Capability::Dns => f.write_str("network.dns"),
            Capability::WorkspaceWrite => f.write_str("workspace.write"),
            Capability::RemoteWrite => f.write_str("remote.write"),
            Capability::ServiceAccountToken => f.write_str("serviceaccount.token"),
            Capability::Tool(name) => write!(f, "tool:{name}"),
        }
    }
}

impl Capability {
    /// Parse a stable name (as stored in `status.approvedCapabilities`).
    pub fn parse(name: &str) -> Option<Capability> {
        match name {
            "network.dns" => return Some(Capability::Dns),
            "workspace.write" => return Some(Capability::WorkspaceWrite),
            "remote.write" => return Some(Capability::RemoteWrite),
            "serviceaccount.token" => return Some(Capability::ServiceAccountToken),
            _ => {}
        }
        if let Some(tool) = name.strip_prefix("tool:") {
            return (!tool.is_empty()).then(|| Capability::Tool(tool.into()));
        }
        if let Some(rest) = name.strip_prefix("network.egress.host:") {
            let (host, port) = rest.rsplit_once(':')?;
            if host.is_empty() {
                return None;
            }
            return Some(Capability::EgressHost {
                host: host.into(),
                port: port.parse().ok()?,
            });
        }
        let (scope, rest) = [
            ("network.egress:", Scope::Plain),
            ("network.egress.cluster:", Scope::Cluster),
            ("network.egress.internet:", Scope::Internet),
        ]
        .into_iter()
        .find_map(|(prefix, scope)| Some((scope, name.strip_prefix(prefix)?)))?;
        let (cidr, port) = rest.rsplit_once(':')?;
        if cidr.is_empty() {
            return None;
        }
        Some(Capability::Egress {
            cidr: cidr.into(),
            port: port.parse().ok()?,
            scope,
        })
    }
}

/// Egress to a block, named by how far it reaches.
fn egress(cidr: &str, port: i32, cluster: &ClusterRanges) -> Capability {
    Capability::Egress {
        cidr: cidr.to_string(),
        port,
        scope: egress_scope::scope(cidr, cluster),
    }
}

/// Everything the server asks for above the baseline, by stable name, sorted.
/// `cluster`: the cluster's own ranges, which name egress into them
/// `network.egress.cluster`.
pub fn requested(
    tools: &ToolProfileSpec,
    sandbox: &SandboxProfileSpec,
    cluster: &ClusterRanges,
) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    for rule in &sandbox.network.egress.rules {
        for port in &rule.ports {
            set.insert(egress(&rule.cidr, *port, cluster));
        }
    }
    for (host, port) in sandbox.network.egress.named() {
        set.insert(Capability::EgressHost { host, port });
    }
    if sandbox.network.egress.dns {
        set.insert(Capability::Dns);
    }
    if sandbox.workspace_access == WorkspaceAccess::ReadWrite {
        set.insert(Capability::WorkspaceWrite);
    }
    if sandbox.automount_service_account_token {
        set.insert(Capability::ServiceAccountToken);
    }
    for tool in &tools.tools {
        if tool.risk.is_some_and(|r| r > RiskLevel::Medium) {
            set.insert(Capability::Tool(tool.name.clone()));
        }
    }
    set.iter().map(Capability::to_string).collect()
}

/// What a remote server asks for: egress to its host and each token
/// endpoint's (by name, or by address when the URL gives one), DNS when
/// any of them is a name, each private block on those ports, and
/// `remote.write` when its tools may write.
pub fn requested_remote(server: &MCPServer, cluster: &ClusterRanges) -> BTreeSet<String> {
    let mut set = BTreeSet::new();
    let Some(remote) = &server.spec.remote else {
        return BTreeSet::new();
    };
    let mut ports = BTreeSet::new();
    let urls = std::iter::once(remote.url.clone()).chain(remote.token_urls());
    for (host, port) in urls.filter_map(|u| mcp_warden_crds::remote::host_port(&u)) {
        let port = i32::from(port);
        ports.insert(port);
        match mcp_warden_crds::remote::address_block(&host) {
            Some(cidr) => set.insert(egress(&cidr, port, cluster)),
            None => {
                set.insert(Capability::Dns);
                set.insert(Capability::EgressHost { host, port })
            }
        };
    }
    if remote.writes {
        set.insert(Capability::RemoteWrite);
    }
    for cidr in &remote.private_cidrs {
        for port in &ports {
            set.insert(egress(cidr, *port, cluster));
        }
    }
    set.iter().map(Capability::to_string).collect()
}

/// `sha256:<hex>` over the sorted names, each followed by `\n`, then each
/// workload part as `workload.<part>=<hash>\n` (names never start with
/// `workload.`, so the two cannot be confused).
pub fn digest(names: &BTreeSet<String>, workload: &Parts) -> String {
    let mut hasher = Sha256::new();
    for name in names {
        hasher.update(name.as_bytes());
        hasher.update(b"\n");
    }
    for (part, hash) in workload {
        hasher.update(format!("workload.{part}={hash}\n").as_bytes());
    }
    format!("sha256:{}", hex::encode(hasher.finalize()))
}

/// Whether `value` has the shape of a [`digest`]: `sha256:` and 64 lowercase
/// hex digits. The webhook refuses any other `mcpwarden.dev/approve` value,
/// which would otherwise approve nothing and so act as a silent revocation.
pub fn is_digest(value: &str) -> bool {
    value.strip_prefix("sha256:").is_some_and(|hex| {
        hex.len() == 64
            && hex
                .bytes()
                .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
    })
}

/// Where the approval stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalState {
    /// Nothing above the baseline is requested.
    Baseline,
    /// The requested set is approved and in force.
    Approved,
    /// Some or all of the requested set waits for approval of `digest`.
    Pending,
}

/// The outcome of [`decide`].
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    /// The requested set (sorted names).
    pub requested: BTreeSet<String>,
    /// Its digest (what an admin approves).
    pub digest: String,
    /// What is in force (a subset of `requested`).
    pub in_force: BTreeSet<String>,
    /// The digest whose approval is in force, if any.
    pub approved_digest: Option<String>,
    /// Where it stands.
    pub state: ApprovalState,
    /// The workload as it is now, by part.
    pub workload: Parts,
    /// The workload the approval in force was given for (empty: none).
    pub approved_workload: Parts,
    /// The parts that differ from the approved workload while an earlier
    /// approval is in force (rule 3), sorted.
    pub changed: Vec<String>,
    /// Keep the last approved Deployment and policy (rule 3 with a changed
    /// workload): the new one is not rolled out until approved.
    pub hold: bool,
}

/// Apply the rules of the module header.
pub fn decide(
    requested: BTreeSet<String>,
    workload: Parts,
    annotation: Option<&str>,
    previous: &MCPServerStatus,
) -> Decision {
    let digest = digest(&requested, &workload);
    let annotation = annotation.map(str::trim).filter(|a| !a.is_empty());
    let earlier_matches = annotation.is_some() && annotation == previous.approved_digest.as_deref();
    let (in_force, approved_digest, approved_workload) = if annotation == Some(digest.as_str()) {
        (requested.clone(), Some(digest.clone()), workload.clone())
    } else if earlier_matches {
        let earlier: BTreeSet<String> = previous.approved_capabilities.iter().cloned().collect();
        (
            earlier.intersection(&requested).cloned().collect(),
            previous.approved_digest.clone(),
            previous.approved_workload.clone(),
        )
    } else {
        (BTreeSet::new(), None, Parts::new())
    };
    let state = if requested.is_empty() {
        ApprovalState::Baseline
    } else if approved_digest.as_deref() == Some(digest.as_str()) {
        ApprovalState::Approved
    } else {
        ApprovalState::Pending
    };
    let changed = if state == ApprovalState::Pending && earlier_matches {
        crate::workload::changed(&approved_workload, &workload)
    } else {
        Vec::new()
    };
    Decision {
        hold: !changed.is_empty(),
        requested,
        digest,
        in_force,
        approved_digest,
        state,
        workload,
        approved_workload,
        changed,
    }
}

/// The `CapabilitiesApproved` reason while a changed workload waits and the
/// last approved one keeps running.
pub const HOLD_REASON: &str = "ApprovalPending";
/// The `CapabilitiesApproved` reason while capabilities wait for approval
/// and the workload runs without them.
pub const PENDING_REASON: &str = "PendingApproval";

/// Whether the server's recorded status says it waits for an admin's
/// approval (what `mcpwarden_capabilities_pending` counts).
pub fn is_pending(server: &MCPServer) -> bool {
    server.status.as_ref().is_some_and(|s| {
        s.conditions.iter().any(|c| {
            c.type_ == "CapabilitiesApproved"
                && (c.reason == PENDING_REASON || c.reason == HOLD_REASON)
        })
    })
}

/// The `mcpwarden.dev/approve` annotation of a server, if set.
pub fn annotation(server: &MCPServer) -> Option<&str> {
    server
        .metadata
        .annotations
        .as_ref()?
        .get(APPROVE_ANNOTATION)
        .map(String::as_str)
}

/// The exact command an admin runs to approve `digest`.
pub fn approve_command(server: &MCPServer, digest: &str) -> String {
    format!(
        "kubectl annotate mcpserver {} -n {} {APPROVE_ANNOTATION}={digest} --overwrite",
        names::object_name(server),
        names::namespace(server)
    )
}

impl Decision {
    /// Requested but not in force, sorted.
    pub fn pending(&self) -> Vec<&str> {
        self.requested
            .difference(&self.in_force)
            .map(String::as_str)
            .collect()
    }

    /// The `CapabilitiesApproved` condition: (status, reason, message).
    pub fn condition(&self, server: &MCPServer) -> (&'static str, &'static str, String) {
        match self.state {
            ApprovalState::Baseline => (
                "True",
                "Baseline",
                "nothing above the baseline is requested".into(),
            ),
            ApprovalState::Approved => (
                "True",
                "Approved",
                format!(
                    "{} approved and in force: {}",
                    self.digest,
                    join(self.in_force.iter().map(String::as_str))
                ),
            ),
            ApprovalState::Pending if self.hold => (
                "False",
                HOLD_REASON,
                format!(
                    "the workload changed since {} was approved ({}); the last approved workload keeps running, not rolled out, with: {}. To approve {} (the new workload with {}): {}",
                    self.approved_digest.as_deref().unwrap_or("?"),
                    self.changed.join(", "),
                    if self.in_force.is_empty() {
                        "nothing above the baseline".to_string()
                    } else {
                        join(self.in_force.iter().map(String::as_str))
                    },
                    self.digest,
                    join(self.requested.iter().map(String::as_str)),
                    approve_command(server, &self.digest)
                ) + &cautions(self.pending().into_iter()),
            ),
            // Not held and nothing waits: the change only took away (applied at once).
            ApprovalState::Pending if !self.changed.is_empty() && self.pending().is_empty() => (
                "True",
                "Tightened",
                format!(
                    "a change that only takes away from the approved policy is in force at once ({}); still approved from {}: {}. To record the new workload as approved: {}",
                    self.changed.join(", "),
                    self.approved_digest.as_deref().unwrap_or("?"),
                    join(self.in_force.iter().map(String::as_str)),
                    approve_command(server, &self.digest)
                ),
            ),
            ApprovalState::Pending => {
                let in_force = if self.in_force.is_empty() {
                    "nothing above the baseline is in force".to_string()
                } else {
                    format!(
                        "still in force from {}: {}",
                        self.approved_digest.as_deref().unwrap_or("?"),
                        join(self.in_force.iter().map(String::as_str))
                    )
                };
                let what = join(self.pending().into_iter());
                (
                    "False",
                    PENDING_REASON,
                    format!(
                        "waiting for approval of {}: {what}; {in_force}. To approve: {}",
                        self.digest,
                        approve_command(server, &self.digest)
                    ) + &cautions(self.pending().into_iter()),
                )
            }
        }
    }
}

/// What an admin should read twice before approving, as sentences to
/// append to the approval message (empty when nothing): broad egress (to
/// the internet, or into the cluster's own ranges) and ports where node or
/// control-plane services listen (`crate::egress_scope`).
pub fn cautions<'a>(names: impl Iterator<Item = &'a str>) -> String {
    let (mut internet, mut cluster, mut ports) = (Vec::new(), Vec::new(), Vec::new());
    for name in names {
        let port = match Capability::parse(name) {
            Some(Capability::Egress { port, scope, .. }) => {
                match scope {
                    Scope::Internet => internet.push(name),
                    Scope::Cluster => cluster.push(name),
                    Scope::Plain => {}
                }
                port
            }
            Some(Capability::EgressHost { port, .. }) => port,
            _ => continue,
        };
        if let Some(what) = egress_scope::sensitive_port(port) {
            ports.push(format!("{port} ({what}) in {name}"));
        }
    }
    let mut text = String::new();
    if !internet.is_empty() {
        text += &format!(
            " Broad egress to the internet (the cluster's pod, service and node ranges excepted): {}.",
            internet.join(", ")
        );
    }
    if !cluster.is_empty() {
        text += &format!(
            " Broad egress into the cluster's own pod, service or node ranges: {}.",
            cluster.join(", ")
        );
    }
    if !ports.is_empty() {
        text += &format!(
            " Ports of node or control-plane services: {}.",
            ports.join(", ")
        );
    }
    text
}

fn join<'a>(names: impl Iterator<Item = &'a str>) -> String {
    names.collect::<Vec<_>>().join(", ")
}

#[cfg(test)]
#[path = "capabilities_tests.rs"]
mod tests;

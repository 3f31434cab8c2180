//! The image an approval runs, by digest (pure): a tag can be moved in the
//! registry after an admin approved what it named, and a pod started later
//! (a reschedule, a scale-out, a restart on a new node) would pull the new
//! content and run it with the approved capabilities. So while capabilities
//! above the baseline are in force, the Deployment names the server's image
//! by the digest its pods reported for the tag when the approval first ran.
//!
//! ```text
//! pods of the unpinned template ── imageID <repo>@sha256:<hex> ──▶ reported (resolve)
//! decision (capabilities in force?) + status.pinnedImage + reported ──▶ pinned (here)
//! pinned ──▶ Deployment image <spec.image>@sha256:<hex> (build) and status.pinnedImage
//! ```
//!
//! Trust on first use: the digest is the one the approved pods pulled; the
//! first rollout under an approval runs the tag, and the pin is a second
//! rollout once a pod has reported it (the same content, by digest from
//! then on). Never pinned: an image the spec names by digest already, a
//! remote server (no image), a runtime that reports no repository digest
//! (an image id alone cannot be pulled by), and pods that disagree (the tag
//! moved between two pulls: nothing is pinned until they agree). Status
//! says (`Degraded`, `ImageTagMoved`) whenever pods run other content under
//! the tag than the pin, or than each other. A new `spec.image` is a workload change that
//! waits for approval like any other; its pin follows its own first run.

use mcp_warden_crds::mcpserver::PinnedImage;
use mcp_warden_crds::MCPServer;

use crate::capabilities::Decision;

/// What the server's pods report for the image the spec names.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub enum Reported {
    /// No pod of the unpinned template reported a repository digest.
    #[default]
    Nothing,
    /// Every such pod runs this digest (`sha256:<hex>`).
    One(String),
    /// Pods run different digests for the same tag (sorted).
    Several(Vec<String>),
}

/// The digest of a runtime's `imageID` when it names a repository digest
/// (`docker.io/library/node@sha256:<64 hex>`); `None` for an image id alone
/// (`sha256:<hex>`), which no registry serves by that name.
pub fn repository_digest(image_id: &str) -> Option<&str> {
    let image_id = image_id
        .strip_prefix("docker-pullable://")
        .unwrap_or(image_id);
    let (repo, digest) = image_id.rsplit_once('@')?;
    let hex = digest.strip_prefix("sha256:")?;
    let valid = !repo.is_empty()
        && hex.len() == 64
        && hex
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b));
    valid.then_some(digest)
}

/// The pin in force after this decision (see the module header).
pub fn pinned(server: &MCPServer, decision: &Decision, reported: &Reported) -> Option<PinnedImage> {
    let image = &server.spec.image;
    if server.spec.remote.is_some() || image.is_empty() || image.contains('@') {
        return None;
    }
    if decision.in_force.is_empty() {
        return None;
    }
    let previous = server.status.as_ref().and_then(|s| s.pinned_image.clone());
    if decision.hold {
        // The last approved Deployment keeps running, pin and all.
        return previous;
    }
    match previous.filter(|p| &p.image == image) {
        Some(kept) => Some(kept),
        None => match reported {
            Reported::One(digest) => Some(PinnedImage {
                image: image.clone(),
                digest: digest.clone(),
            }),
            Reported::Nothing | Reported::Several(_) => None,
        },
    }
}

/// The contents that run under one tag when they are not all the pinned
/// one (sorted; empty when they agree): pods that pulled the tag at
/// different times, or a pod of the unpinned template that pulled it again
/// after the tag moved.
pub fn disagreement(pinned: Option<&PinnedImage>, reported: &Reported) -> Vec<String> {
    let mut all: Vec<String> = match reported {
        Reported::Nothing => return Vec::new(),
        Reported::One(d) => vec![d.clone()],
        Reported::Several(ds) => ds.clone(),
    };
    all.extend(pinned.map(|p| p.digest.clone()));
    all.sort();
    all.dedup();
    if all.len() < 2 {
        all.clear();
    }
    all
}

/// The reference the server container asks for.
pub fn reference(image: &str, pinned: Option<&PinnedImage>) -> String {
    match pinned {
        Some(p) if p.image == image => format!("{image}@{}", p.digest),
        _ => image.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::capabilities::ApprovalState;
    use std::collections::BTreeSet;

    const D1: &str = "sha256:1111111111111111111111111111111111111111111111111111111111111111";
    const D2: &str = "sha256:2222222222222222222222222222222222222222222222222222222222222222";

    fn server(image: &str, pinned: Option<(&str, &str)>) -> MCPServer {
        let mut s: MCPServer = serde_json::from_value(serde_json::json!({
            "apiVersion": "mcpwarden.dev/v1alpha1", "kind": "MCPServer",
            "metadata": {"name": "everything", "namespace": "team-a"},
            "spec": {"image": image, "command": ["x"], "toolProfileRef": {"name": "p"}}
        }))
        .unwrap();
        if let Some((image, digest)) = pinned {
            s.status = Some(mcp_warden_crds::MCPServerStatus {
                pinned_image: Some(PinnedImage {
                    image: image.into(),
                    digest: digest.into(),
                }),
                ..Default::default()
            });
        }
        s
    }

    fn decision(in_force: &[&str], hold: bool) -> Decision {
        let in_force: BTreeSet<String> = in_force.iter().map(|s| s.to_string()).collect();
        Decision {
            requested: in_force.clone(),
            digest: "sha256:d".into(),
            state: if in_force.is_empty() {
                ApprovalState::Baseline
            } else {
                ApprovalState::Approved
            },
            in_force,
            approved_digest: None,
            workload: Default::default(),
            approved_workload: Default::default(),
            changed: Vec::new(),
            hold,
        }
    }

    #[test]
    fn only_a_repository_digest_can_be_pinned() {
        assert_eq!(
            repository_digest(&format!("docker.io/library/node@{D1}")),
            Some(D1)
        );
        assert_eq!(
            repository_digest(&format!("docker-pullable://node@{D1}")),
            Some(D1)
        );
        assert_eq!(repository_digest(D1), None, "an image id alone");
        assert_eq!(repository_digest("node@sha256:abc"), None);
        assert_eq!(repository_digest(&format!("@{D1}")), None);
    }

    #[test]
    fn the_first_digest_reported_under_an_approval_is_pinned_and_kept() {
        let approved = decision(&["network.egress.host:registry.npmjs.org:443"], false);
        let first = pinned(
            &server("node:22-slim", None),
            &approved,
            &Reported::One(D1.into()),
        );
        assert_eq!(
            first,
            Some(PinnedImage {
                image: "node:22-slim".into(),
                digest: D1.into()
            })
        );
        // Later reports (the tag moved) never move the pin.
        let kept = pinned(
            &server("node:22-slim", Some(("node:22-slim", D1))),
            &approved,
            &Reported::One(D2.into()),
        );
        assert_eq!(kept.unwrap().digest, D1);
    }

    #[test]
    fn no_pin_without_capabilities_a_digest_or_agreement() {
        let approved = decision(&["workspace.write"], false);
        let baseline = decision(&[], false);
        let one = Reported::One(D1.into());
        assert_eq!(pinned(&server("node:22-slim", None), &baseline, &one), None);
        assert_eq!(
            pinned(&server(&format!("node@{D2}"), None), &approved, &one),
            None,
            "named by digest already"
        );
        let several = Reported::Several(vec![D1.into(), D2.into()]);
        assert_eq!(
            pinned(&server("node:22-slim", None), &approved, &several),
            None
        );
        assert_eq!(
            pinned(&server("node:22-slim", None), &approved, &Reported::Nothing),
            None
        );
    }

    #[test]
    fn a_new_image_drops_the_old_pin_and_a_held_change_keeps_it() {
        let old = Some(("node:22-slim", D1));
        let approved = decision(&["workspace.write"], false);
        let held = decision(&["workspace.write"], true);
        assert_eq!(
            pinned(&server("node:24-slim", old), &approved, &Reported::Nothing),
            None
        );
        assert_eq!(
            pinned(&server("node:24-slim", old), &held, &Reported::Nothing)
                .unwrap()
                .image,
            "node:22-slim"
        );
    }

    #[test]
    fn contents_that_differ_under_one_tag_are_a_disagreement() {
        let pin = PinnedImage {
            image: "node:22-slim".into(),
            digest: D1.into(),
        };
        assert!(disagreement(Some(&pin), &Reported::One(D1.into())).is_empty());
        assert!(disagreement(None, &Reported::One(D2.into())).is_empty());
        assert_eq!(
            disagreement(Some(&pin), &Reported::One(D2.into())),
            [D1, D2].map(String::from)
        );
        assert_eq!(
            disagreement(None, &Reported::Several(vec![D1.into(), D2.into()])),
            [D1, D2].map(String::from)
        );
    }

    #[test]
    fn the_reference_adds_the_digest_to_the_tag() {
        let pin = PinnedImage {
            image: "node:22-slim".into(),
            digest: D1.into(),
        };
        assert_eq!(
            reference("node:22-slim", Some(&pin)),
            format!("node:22-slim@{D1}")
        );
        assert_eq!(reference("node:24-slim", Some(&pin)), "node:24-slim");
        assert_eq!(reference("node:22-slim", None), "node:22-slim");
    }
}

//! The pod's ServiceAccount: its own identity, with no token mounted by default.

use k8s_openapi::api::core::v1::ServiceAccount;

use super::BuildInput;
use crate::names;

/// The ServiceAccount of the server's pod.
pub fn desired_service_account(input: BuildInput<'_>) -> ServiceAccount {
    ServiceAccount {
        metadata: names::metadata(input.server, names::object_name(input.server)),
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

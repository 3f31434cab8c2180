//! The pod's ServiceAccount: its own identity, with no token mounted by
//! default. `spec.serviceAccount.annotations` (workload identity: a cloud
//! role bound to this account) are added to it; the token still reaches the
//! server only with `serviceaccount.token` approved.

use k8s_openapi::api::core::v1::ServiceAccount;

use super::BuildInput;
use crate::names;

/// The ServiceAccount of the server's pod.
pub fn desired_service_account(input: BuildInput<'_>) -> ServiceAccount {
    let mut metadata = names::metadata(input.server, names::object_name(input.server));
    metadata.annotations = input
        .server
        .spec
        .service_account
        .as_ref()
        .filter(|s| !s.annotations.is_empty())
        .map(|s| s.annotations.clone());
    ServiceAccount {
        metadata,
        automount_service_account_token: Some(false),
        ..ServiceAccount::default()
    }
}

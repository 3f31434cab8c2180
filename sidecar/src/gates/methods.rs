//! Every method the facade lets through, and the gates each one passes.
//! This is the one place to read what happens to a message: a method that
//! is not in these tables is refused (a request: -32601
//! `method_not_allowed`) or dropped (a notification), never forwarded.
//!
//! Client requests, in the order the gates run (first refusal wins):
//! authentication (the transport) → [`Who`] → the method's [`Step`] (the
//! policy's decision on what it names, budgets, the upstream call with its
//! time limit) → the output filter on the answer (redaction, size cap,
//! list filtering) → audit and metrics. Every forwarded request goes to
//! the server under an id of the facade's own.
//!
//! What the server sends passes [`server_request`] / [`server_notification`]:
//! allowed methods only, every one through the output filter (redaction,
//! size cap), ids of server requests mapped to ids of the facade's own.

use mcp_warden_crds::Role;

/// Who may send a request at all (finer roles come from the policy's rules).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Who {
    /// Anyone authenticated, with or without a role: `ping` only.
    Anyone,
    /// A caller with a role (a role-less caller gets -32003 `no_role`).
    AnyRole,
}

/// What runs a client request; each names the gates it applies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Step {
    /// `initialize`: forwarded; the answer's capabilities are cut to what
    /// the facade serves; opens the session.
    Handshake,
    /// Forwarded as is; the answer is redacted and capped.
    Forward,
    /// Tool allowlist, role, quarantine, risk, argument rules, sandbox,
    /// budgets, input schema, approval, timeout; the result capped,
    /// redacted and checked against the outputSchema; an audit line.
    ToolCall,
    /// Every upstream page; each tool kept if the caller may call it.
    ToolList,
    /// Resource list, filtered by the resource rules; redacted.
    ResourceList,
    /// Template list, filtered by the resource rules on `uriTemplate`.
    TemplateList,
    /// `params.uri` judged by the resource rules; the answer redacted and
    /// capped; an audit line (`resources/read`).
    Resource,
    /// Prompt list, filtered by the prompt rules; redacted.
    PromptList,
    /// `params.name` judged by the prompt rules; the answer redacted and
    /// capped; an audit line.
    Prompt,
    /// `params.ref` judged as the prompt or resource template it completes.
    Completion,
    /// `server/discover`: answered by the facade (its versions, the
    /// server's capabilities as the policy leaves them).
    Discover,
    /// `subscriptions/listen`: a stream of the change notifications the
    /// client asked for, each filtered for this caller.
    Listen,
    /// `tasks/get|update|cancel` (the tasks extension): the caller must
    /// have declared the extension; the task id must be one the facade
    /// sealed for this caller; the server's task id goes upstream in its
    /// place; a task's result passes the output filter of the tool call
    /// that made it, its input requests the rules for server requests.
    Task,
}

/// The gates of one client request method.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Gates {
    pub who: Who,
    pub step: Step,
    /// Which clients may send it: some methods exist in one revision only.
    pub eras: Eras,
}

/// The revisions a method belongs to.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Eras {
    Both,
    /// 2025-11-25 and earlier (`initialize`, `ping`, `logging/setLevel`,
    /// `resources/subscribe`…), removed in 2026-07-28.
    Legacy,
    /// 2026-07-28 (`server/discover`, `subscriptions/listen`).
    Modern,
}

const fn gates(who: Who, step: Step, eras: Eras) -> Gates {
    Gates { who, step, eras }
}

/// Client → server requests the facade serves, in both revisions. Not
/// here, deliberately: `tasks/result` and `tasks/list` (gone from the tasks
/// extension of 2026-07-28; the first fetched a result around the output
/// filter, the second listed other callers' tasks), and anything a later
/// revision adds until it has its gates.
#[rustfmt::skip]
pub const CLIENT_REQUESTS: &[(&str, Gates)] = &[
    ("initialize",               gates(Who::AnyRole, Step::Handshake,    Eras::Legacy)),
    ("ping",                     gates(Who::Anyone,  Step::Forward,      Eras::Legacy)),
    ("logging/setLevel",         gates(Who::AnyRole, Step::Forward,      Eras::Legacy)),
    ("server/discover",          gates(Who::AnyRole, Step::Discover,     Eras::Modern)),
    ("subscriptions/listen",     gates(Who::AnyRole, Step::Listen,       Eras::Modern)),
    ("tools/list",               gates(Who::AnyRole, Step::ToolList,     Eras::Both)),
    ("tools/call",               gates(Who::AnyRole, Step::ToolCall,     Eras::Both)),
    ("resources/list",           gates(Who::AnyRole, Step::ResourceList, Eras::Both)),
    ("resources/templates/list", gates(Who::AnyRole, Step::TemplateList, Eras::Both)),
    ("resources/read",           gates(Who::AnyRole, Step::Resource,     Eras::Both)),
    ("resources/subscribe",      gates(Who::AnyRole, Step::Resource,     Eras::Legacy)),
    ("resources/unsubscribe",    gates(Who::AnyRole, Step::Resource,     Eras::Legacy)),
    ("prompts/list",             gates(Who::AnyRole, Step::PromptList,   Eras::Both)),
    ("prompts/get",              gates(Who::AnyRole, Step::Prompt,       Eras::Both)),
    ("completion/complete",      gates(Who::AnyRole, Step::Completion,   Eras::Both)),
    ("tasks/get",                gates(Who::AnyRole, Step::Task,         Eras::Modern)),
    ("tasks/update",             gates(Who::AnyRole, Step::Task,         Eras::Modern)),
    ("tasks/cancel",             gates(Who::AnyRole, Step::Task,         Eras::Modern)),
];

/// The gates of a client request method for a client of `modern` era;
/// `None`: refused.
pub fn client_request(method: &str, modern: bool) -> Option<Gates> {
    CLIENT_REQUESTS
        .iter()
        .find(|(m, g)| {
            *m == method
                && match g.eras {
                    Eras::Both => true,
                    Eras::Legacy => !modern,
                    Eras::Modern => modern,
                }
        })
        .map(|(_, g)| *g)
}

/// What the facade does with a client notification.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ClientNotification {
    /// Forwarded (rebuilt); the handshake is complete.
    Initialized,
    /// Translated to the facade's id of the request it cancels; dropped if
    /// that request is not on the server.
    Cancelled,
    /// Progress on a server → client request: forwarded while one is open.
    Progress,
}

pub const CLIENT_NOTIFICATIONS: &[(&str, ClientNotification)] = &[
    ("notifications/initialized", ClientNotification::Initialized),
    ("notifications/cancelled", ClientNotification::Cancelled),
    ("notifications/progress", ClientNotification::Progress),
    // Not `notifications/roots/list_changed`: the server's roots are the
    // policy's, which do not change with the client.
];

pub fn client_notification(method: &str) -> Option<ClientNotification> {
    CLIENT_NOTIFICATIONS
        .iter()
        .find(|(m, _)| *m == method)
        .map(|(_, n)| *n)
}

/// Server → client requests: `Some(true)` forwarded to the client (params
/// redacted and capped, the id mapped to one of the facade's own), `Some(false)`
/// answered by the facade itself (`ping`; `roots/list` from the policy's
/// roots, never the client's, which could widen the server's scope);
/// `None`: refused with -32601.
pub fn server_request(method: &str) -> Option<bool> {
    match method {
        "sampling/createMessage" | "elicitation/create" => Some(true),
        "ping" | "roots/list" => Some(false),
        _ => None,
    }
}

/// What the facade does with a server notification before the client sees it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ServerNotification {
    /// Redacted and capped, then delivered.
    Filtered,
    /// Progress: delivered on the stream of the request whose (facade)
    /// token it names, with the client's own token restored.
    Progress,
    /// The server gave up on a request it sent the client: the id mapped.
    Cancelled,
    /// The tool list changed: pins and drift re-checked before the client hears.
    ToolsChanged,
    /// A resource changed: delivered only if the caller may read it.
    ResourceUpdated,
}

pub fn server_notification(method: &str) -> Option<ServerNotification> {
    match method {
        "notifications/message"
        | "notifications/resources/list_changed"
        | "notifications/prompts/list_changed"
        | "notifications/elicitation/complete"
        | "notifications/subscriptions/acknowledged" => Some(ServerNotification::Filtered),
        "notifications/progress" => Some(ServerNotification::Progress),
        "notifications/cancelled" => Some(ServerNotification::Cancelled),
        "notifications/tools/list_changed" => Some(ServerNotification::ToolsChanged),
        "notifications/resources/updated" => Some(ServerNotification::ResourceUpdated),
        _ => None,
    }
}

/// The role a [`Who`] gate needs: `None` means any caller passes.
pub fn least_role(who: Who) -> Option<Role> {
    match who {
        Who::Anyone => None,
        Who::AnyRole => Some(Role::Viewer),
    }
}

/// The role a caller is served a request with: their own (`own`), or, for
/// a trusted gateway speaking for itself, [`gateway_itself_role`]. `Err`
/// when the request needs a role and there is none: the caller is refused
/// before anything is held for them (a session, a legacy server's bridge).
pub fn serving_role(
    gates: Gates,
    own: Option<Role>,
    gateway_itself: bool,
) -> Result<Option<Role>, mcp_warden_policy::Denial> {
    let role = own.or_else(|| {
        gateway_itself
            .then(|| gateway_itself_role(gates.step))
            .flatten()
    });
    match (gates.who, role) {
        (Who::AnyRole, None) => Err(mcp_warden_policy::Denial::NoRole),
        (_, role) => Ok(role),
    }
}

/// The role of a trusted gateway speaking for itself (its own tool list)
/// when no role binding names it: the listing steps only, each seen as the
/// highest role sees it (the gateway's inventory is of every tool this
/// facade could route to a caller of it); anything else — a call, a read,
/// a prompt — gets no role (-32003 `no_role`). A binding that names the
/// gateway's issuer and its own subject gives it that role instead, for
/// everything, as any caller.
pub fn gateway_itself_role(step: Step) -> Option<Role> {
    match step {
        Step::ToolList
        | Step::PromptList
        | Step::ResourceList
        | Step::TemplateList
        | Step::Discover
        | Step::Listen => Some(Role::Admin),
        Step::Handshake
        | Step::Forward
        | Step::ToolCall
        | Step::Resource
        | Step::Prompt
        | Step::Completion
        | Step::Task => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_request_that_needs_a_role_is_served_only_with_one() {
        let list = client_request("tools/list", true).unwrap();
        let call = client_request("tools/call", true).unwrap();
        let ping = client_request("ping", false).unwrap();
        let denied = Err(mcp_warden_policy::Denial::NoRole);
        assert_eq!(serving_role(call, None, false), denied);
        assert_eq!(
            serving_role(call, Some(Role::Viewer), false),
            Ok(Some(Role::Viewer))
        );
        assert_eq!(serving_role(ping, None, false), Ok(None));
        // The gateway speaking for itself: its listings, as an admin; no call.
        assert_eq!(serving_role(list, None, true), Ok(Some(Role::Admin)));
        assert_eq!(serving_role(call, None, true), denied);
        // A binding naming it wins over that.
        assert_eq!(
            serving_role(list, Some(Role::Viewer), true),
            Ok(Some(Role::Viewer))
        );
    }

    #[test]
    fn the_gateway_itself_may_only_list() {
        let listing = [
            "tools/list",
            "prompts/list",
            "resources/list",
            "resources/templates/list",
            "server/discover",
            "subscriptions/listen",
        ];
        for (method, g) in CLIENT_REQUESTS {
            let role = gateway_itself_role(g.step);
            if listing.contains(method) {
                assert_eq!(role, Some(Role::Admin), "{method}");
            } else {
                assert_eq!(role, None, "{method} must need a binding");
            }
        }
    }

    #[test]
    fn unknown_and_unsafe_methods_have_no_gates() {
        for m in [
            "tasks/list",
            "tasks/result",
            "sampling/createMessage",
            "elicitation/create",
            "roots/list",
            "x",
            "",
            "tools/call ",
            "Tools/Call",
        ] {
            assert_eq!(client_request(m, false), None, "{m}");
            assert_eq!(client_request(m, true), None, "{m}");
        }
        // Each revision's own methods only for its clients.
        assert!(client_request("initialize", false).is_some());
        assert!(client_request("initialize", true).is_none());
        assert!(client_request("ping", true).is_none());
        assert!(client_request("server/discover", false).is_none());
        assert!(client_request("server/discover", true).is_some());
        // The tasks extension is a modern client's only (a legacy client is
        // never offered it).
        for m in ["tasks/get", "tasks/update", "tasks/cancel"] {
            assert!(client_request(m, false).is_none(), "{m}");
            assert_eq!(
                client_request(m, true).map(|g| g.step),
                Some(Step::Task),
                "{m}"
            );
        }
        assert_eq!(server_request("tools/call"), None);
        assert_eq!(server_notification("notifications/tasks/status"), None);
        assert_eq!(client_notification("notifications/message"), None);
    }

    #[test]
    fn only_ping_is_open_to_callers_without_a_role() {
        let open: Vec<&str> = CLIENT_REQUESTS
            .iter()
            .filter(|(_, g)| g.who == Who::Anyone)
            .map(|(m, _)| *m)
            .collect();
        assert_eq!(open, ["ping"]);
    }

    #[test]
    fn each_method_is_listed_once() {
        let mut names: Vec<&str> = CLIENT_REQUESTS.iter().map(|(m, _)| *m).collect();
        assert!(names.contains(&"subscriptions/listen"));
        names.sort();
        names.dedup();
        assert_eq!(names.len(), CLIENT_REQUESTS.len());
    }
}

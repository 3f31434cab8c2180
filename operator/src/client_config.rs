//! `client-config NAME` (`--gateway`: of an MCPGateway): what an agent needs
//! to call one MCPServer or gateway — the URL,
//! where each accepted kind of token comes from, and a ready `mcp.json`
//! snippet (the `mcpServers` shape Claude Code, Claude Desktop's remote
//! servers, Cursor and VS Code read). Pure: the caller reads the server and
//! its ToolProfile (from the cluster, or from files with `-f`).
//!
//! The output is a `#` comment block, then JSON: `… | grep -v '^#'` is a
//! valid `.mcp.json`. It never contains a token, only how to get one: the
//! snippet reads it from the `MCP_WARDEN_TOKEN` environment variable.

use mcp_warden_crds::{MCPGateway, MCPServer, ToolProfileSpec};
use serde_json::json;

use crate::{config::BuildConfig, gateway, names};

/// What the description is of: its kind, where, and the audience its
/// service-account callers' tokens carry.
struct Endpoint<'a> {
    kind: &'a str,
    namespace: String,
    name: String,
    url: String,
    in_cluster: String,
    audience: String,
    /// Extra comment lines after the URL (a gateway's backends).
    notes: Vec<String>,
}

/// The client configuration of `gw` (its status names the backends).
pub fn describe_gateway(
    gw: &MCPGateway,
    profile: Option<&ToolProfileSpec>,
    cfg: &BuildConfig,
) -> String {
    let backends: Vec<String> = gw
        .status
        .iter()
        .flat_map(|s| &s.backends)
        .map(|b| {
            let prefix = if b.prefix == mcp_warden_crds::mcpgateway::PREFIX_NONE {
                "no prefix".to_string()
            } else {
                format!("tools as {}<tool>", b.prefix)
            };
            let ready = if b.ready { "ready" } else { "not ready" };
            format!("#   {} ({prefix}; {ready})", b.name)
        })
        .collect();
    let mut notes = vec![if backends.is_empty() {
        "# Backends: none reported yet (kubectl get mcpgw shows them once reconciled)".to_string()
    } else {
        "# Backends (each keeps its own policy; you see what each allows you):".to_string()
    }];
    notes.extend(backends);
    describe_endpoint(
        Endpoint {
            kind: "MCPGateway",
            namespace: gateway::names::namespace(gw),
            name: gateway::names::object_name(gw),
            url: gw
                .status
                .as_ref()
                .and_then(|s| s.endpoint.clone())
                .unwrap_or_else(|| gateway::names::endpoint(gw, cfg)),
            in_cluster: gateway::names::cluster_endpoint(gw, cfg),
            audience: gateway::names::token_audience(gw),
            notes,
        },
        profile,
    )
}

/// The environment variable the snippet takes the bearer token from.
pub const TOKEN_ENV: &str = "MCP_WARDEN_TOKEN";

/// The client configuration of `server`, whose ToolProfile is `profile`
/// (`None`: not found, so only service-account tokens are described).
pub fn describe(
    server: &MCPServer,
    profile: Option<&ToolProfileSpec>,
    cfg: &BuildConfig,
) -> String {
    describe_endpoint(
        Endpoint {
            kind: "MCPServer",
            namespace: names::namespace(server),
            name: names::object_name(server),
            url: server
                .status
                .as_ref()
                .and_then(|s| s.endpoint.clone())
                .unwrap_or_else(|| names::endpoint(server, cfg)),
            in_cluster: names::cluster_endpoint(server, cfg),
            audience: names::token_audience(server),
            notes: Vec::new(),
        },
        profile,
    )
}

fn describe_endpoint(e: Endpoint<'_>, profile: Option<&ToolProfileSpec>) -> String {
    let (ns, name, url, audience) = (&e.namespace, &e.name, &e.url, &e.audience);
    let mut out = format!("# {} {ns}/{name}\n# URL: {url}\n", e.kind);
    if e.in_cluster != *url {
        out.push_str(&format!("#   in the cluster: {}\n", e.in_cluster));
    }
    for note in &e.notes {
        out.push_str(note);
        out.push('\n');
    }
    out.push_str(&format!("# Tokens it accepts (put one in {TOKEN_ENV}):\n"));
    out.push_str(&format!(
        "#   a Kubernetes service-account token with audience {audience}:\n\
         #     kubectl -n {ns} create token <service-account> --audience {audience}\n"
    ));
    let bound: Vec<&String> = profile
        .iter()
        .flat_map(|p| &p.roles)
        .flat_map(|r| &r.service_accounts)
        .collect();
    if !bound.is_empty() {
        let list: Vec<&str> = bound.iter().map(|s| s.as_str()).collect();
        out.push_str(&format!(
            "#     (service accounts with a role: {})\n",
            list.join(", ")
        ));
    }
    for t in profile.iter().flat_map(|p| &p.auth.static_tokens) {
        // jsonpath needs the dots of a key escaped.
        let key = t.key.replace('.', "\\.");
        out.push_str(&format!(
            "#   the static token of {:?} (Secret {}, key {}):\n\
             #     kubectl -n {ns} get secret {} -o jsonpath='{{.data.{key}}}' | base64 -d\n",
            t.subject, t.secret_name, t.key, t.secret_name
        ));
    }
    for j in profile.iter().flat_map(|p| &p.auth.jwt) {
        let audience = if j.resource_audience == Some(true) {
            format!("issued for this server ({url})")
        } else {
            format!("with audience {}", j.audiences.join(" or "))
        };
        let scopes = if j.required_scopes.is_empty() {
            String::new()
        } else {
            format!(" and scope {:?}", j.required_scopes.join(" "))
        };
        out.push_str(&format!(
            "#   a token from {} {audience}{scopes} (the caller is its {:?} claim)\n",
            j.issuer,
            j.username_claim.as_deref().unwrap_or("sub")
        ));
    }
    let login: Vec<&str> = profile
        .iter()
        .flat_map(|p| &p.auth.jwt)
        .filter(|j| j.login == Some(true))
        .map(|j| j.issuer.as_str())
        .collect();
    let header = json!({"Authorization": format!("Bearer ${{{TOKEN_ENV}}}")});
    // With a login issuer the URL is all a client that implements MCP's
    // authorization needs: the 401 leads it to the metadata and the issuer,
    // and it gets a token for this server itself. Nothing to paste, nothing
    // to expire in a file.
    let snippet = if login.is_empty() {
        json!({"mcpServers": {name.clone(): {"type": "http", "url": url, "headers": header}}})
    } else {
        out.push_str(&format!(
            concat!(
                "# Log in (OAuth): clients that implement MCP authorization need only the URL;\n",
                "#   they find {} from the server's 401 and its metadata\n",
                "#   ({}), and get a token for this server themselves.\n",
                "#   A client without it: add \"headers\": {} and set {}.\n",
            ),
            login.join(" or "),
            mcp_warden_policy::login::ResourceUrl::parse(url)
                .map(|u| u.metadata_url())
                .unwrap_or_default(),
            header,
            TOKEN_ENV,
        ));
        json!({"mcpServers": {name.clone(): {"type": "http", "url": url}}})
    };
    out.push_str("# mcp.json:\n");
    out.push_str(&serde_json::to_string_pretty(&snippet).expect("JSON serializes"));
    out.push('\n');
    out
}

/// A failed API call as a person reads it: what was asked for, the API
/// server's own message and its HTTP code (never the client's debug dump).
pub fn api_error(what: &str, e: &kube::Error) -> String {
    match e {
        kube::Error::Api(status) => {
            let hint = match status.code {
                401 => " (is the kubeconfig's token still valid?)",
                403 => " (your user may not read it: ask for the `view` role in that namespace)",
                _ => "",
            };
            format!("{what}: {} (HTTP {}){hint}", status.message, status.code)
        }
        other => format!("{what}: {other}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn server(expose: &str) -> MCPServer {
        serde_yaml_ng::from_str(&format!(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPServer\nmetadata: {{name: time, namespace: team-a}}\n\
             spec: {{image: i, command: [x], toolProfileRef: {{name: p}}{expose}}}\n"
        ))
        .unwrap()
    }

    fn profile() -> ToolProfileSpec {
        serde_yaml_ng::from_str(
            "auth:\n  staticTokens: [{secretName: tokens, key: ci.bot, subject: ci-bot}]\n  \
             jwt: [{issuer: 'https://login.example.com', audiences: [mcp-time], jwks: {configMap: {name: j}}, usernameClaim: email}]\n\
             roles: [{role: viewer, serviceAccounts: [team-a/coding-agent]}]\n",
        )
        .unwrap()
    }

    fn json_part(text: &str) -> serde_json::Value {
        let body: String = text
            .lines()
            .filter(|l| !l.starts_with('#'))
            .collect::<Vec<_>>()
            .join("\n");
        serde_json::from_str(&body).expect("the non-comment lines are JSON")
    }

    #[test]
    fn in_cluster_server_gets_its_service_url_and_every_token_source() {
        let text = describe(&server(""), Some(&profile()), &BuildConfig::default());
        let entry = &json_part(&text)["mcpServers"]["time"];
        assert_eq!(
            entry["url"],
            "http://time.team-a.svc.cluster.local:8080/mcp"
        );
        assert_eq!(entry["type"], "http");
        assert_eq!(
            entry["headers"]["Authorization"],
            "Bearer ${MCP_WARDEN_TOKEN}"
        );
        assert!(text.contains(
            "kubectl -n team-a create token <service-account> --audience mcpwarden.dev/team-a/time"
        ));
        assert!(text.contains("team-a/coding-agent"), "{text}");
        assert!(
            text.contains(
                "kubectl -n team-a get secret tokens -o jsonpath='{.data.ci\\.bot}' | base64 -d"
            ),
            "{text}"
        );
        assert!(
            text.contains("https://login.example.com with audience mcp-time"),
            "{text}"
        );
        assert!(!text.contains("in the cluster:"), "one URL only: {text}");
    }

    #[test]
    fn a_login_issuer_makes_the_url_enough() {
        let login: ToolProfileSpec = serde_yaml_ng::from_str(
            "auth:\n  jwt: [{issuer: 'https://login.example.com', resourceAudience: true, login: true, \
             requiredScopes: [mcp], jwks: {configMap: {name: j}}}]\n",
        )
        .unwrap();
        let text = describe(
            &server(", expose: {hosts: [time.mcp.example.com]}"),
            Some(&login),
            &BuildConfig::default(),
        );
        let entry = &json_part(&text)["mcpServers"]["time"];
        assert_eq!(
            entry,
            &json!({"type": "http", "url": "https://time.mcp.example.com/mcp"}),
            "the URL only, no token: {text}"
        );
        assert!(
            text.contains("they find https://login.example.com from the server's 401"),
            "{text}"
        );
        assert!(
            text.contains("https://time.mcp.example.com/.well-known/oauth-protected-resource/mcp"),
            "{text}"
        );
        assert!(
            text.contains("a token from https://login.example.com issued for this server (https://time.mcp.example.com/mcp) and scope \"mcp\""),
            "{text}"
        );
        // Without a login issuer the token header stays.
        let text = describe(&server(""), Some(&profile()), &BuildConfig::default());
        assert!(json_part(&text)["mcpServers"]["time"]["headers"]["Authorization"].is_string());
    }

    #[test]
    fn exposed_server_gets_its_external_url() {
        let text = describe(
            &server(", expose: {hosts: [time.mcp.example.com]}"),
            None,
            &BuildConfig::default(),
        );
        assert_eq!(
            json_part(&text)["mcpServers"]["time"]["url"],
            "https://time.mcp.example.com/mcp"
        );
        assert!(text.contains("#   in the cluster: http://time.team-a.svc.cluster.local:8080/mcp"));
    }

    #[test]
    fn a_gateway_gets_its_own_url_audience_and_backends() {
        let mut gw: MCPGateway = serde_yaml_ng::from_str(
            "apiVersion: mcpwarden.dev/v1alpha1\nkind: MCPGateway\nmetadata: {name: tools, namespace: team-a}\n\
             spec: {backends: [{name: git, prefix: vcs_}, {name: fs}]}\n",
        )
        .unwrap();
        let before = describe_gateway(&gw, Some(&profile()), &BuildConfig::default());
        assert!(before.contains("# Backends: none reported yet"), "{before}");
        gw.status = Some(
            serde_json::from_value(serde_json::json!({"backends": [
                {"name": "fs", "prefix": "none", "ready": false},
                {"name": "git", "prefix": "vcs_", "ready": true, "tools": 2}]}))
            .unwrap(),
        );
        let text = describe_gateway(&gw, Some(&profile()), &BuildConfig::default());
        assert!(text.starts_with("# MCPGateway team-a/tools\n"), "{text}");
        assert_eq!(
            json_part(&text)["mcpServers"]["tools"]["url"],
            "http://tools.team-a.svc.cluster.local:8080/mcp"
        );
        assert!(text.contains(
            "kubectl -n team-a create token <service-account> --audience mcpwarden.dev/team-a/mcpgateway/tools"
        ), "{text}");
        assert!(
            text.contains("#   git (tools as vcs_<tool>; ready)"),
            "{text}"
        );
        assert!(text.contains("#   fs (no prefix; not ready)"), "{text}");
        assert!(
            text.contains("kubectl -n team-a get secret tokens"),
            "the gateway's own tokens: {text}"
        );
    }

    #[test]
    fn api_errors_read_as_sentences() {
        let status: kube::core::Status = serde_json::from_value(serde_json::json!({
            "status": "Failure", "code": 403, "reason": "Forbidden",
            "message": "mcpservers.mcpwarden.dev \"x\" is forbidden: User \"carol\" cannot get resource"
        }))
        .unwrap();
        let text = api_error("MCPServer team-a/x", &kube::Error::Api(Box::new(status)));
        assert_eq!(
            text,
            "MCPServer team-a/x: mcpservers.mcpwarden.dev \"x\" is forbidden: User \"carol\" cannot get resource (HTTP 403) (your user may not read it: ask for the `view` role in that namespace)"
        );
        assert!(
            !text.contains("ErrorResponse") && !text.contains("Status {"),
            "{text}"
        );
    }
}

//! `mcp-warden-operator validate -f …`: every example passes; every sample
//! in `examples/invalid/` fails with the message its `# expect:` line
//! names (the API server's words: schema or CEL); every profile in
//! `examples/invalid-policy/` fails with the facade loader's message
//! (`InvalidPolicy`). One line per problem, `file: Kind ns/name: message`.

mod support;

use std::{
    path::{Path, PathBuf},
    process::{Command, Output},
};

use support::yaml_files;

fn validate(files: &[PathBuf]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_mcp-warden-operator"))
        .arg("validate")
        .arg("-f")
        .args(files)
        .output()
        .expect("the operator binary runs")
}

fn expect(file: &Path) -> String {
    std::fs::read_to_string(file)
        .unwrap()
        .lines()
        .find_map(|l| l.strip_prefix("# expect: "))
        .unwrap_or_else(|| panic!("{}: no `# expect:` line", file.display()))
        .to_string()
}

#[test]
fn every_example_passes() {
    let files = yaml_files("examples");
    assert!(files.len() >= 8, "{files:?}");
    let out = validate(&files);
    assert!(
        out.status.success(),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(out.stdout.is_empty());
}

#[test]
fn every_invalid_sample_fails_with_its_stated_message() {
    let files = yaml_files("examples/invalid");
    assert!(files.len() >= 10, "{files:?}");
    for file in files {
        let out = validate(std::slice::from_ref(&file));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{}: accepted", file.display());
        let want = expect(&file);
        let line = stdout
            .lines()
            .find(|l| l.contains(&want))
            .unwrap_or_else(|| panic!("{}: no line says {want:?}:\n{stdout}", file.display()));
        assert!(
            line.starts_with(&format!("{}: ", file.display())),
            "names the file: {line}"
        );
    }
}

#[test]
fn every_invalid_policy_fails_with_the_loaders_message() {
    let files = yaml_files("examples/invalid-policy");
    assert!(files.len() >= 4, "{files:?}");
    for file in &files {
        let out = validate(std::slice::from_ref(file));
        let stdout = String::from_utf8_lossy(&out.stdout);
        assert!(!out.status.success(), "{}: accepted", file.display());
        let want = expect(file);
        let [line] = stdout.lines().collect::<Vec<_>>()[..] else {
            panic!("{}: one problem:\n{stdout}", file.display())
        };
        assert!(
            line.contains(": ToolProfile team-a/") && line.contains(": InvalidPolicy: "),
            "{line}"
        );
        assert!(
            line.contains(&want),
            "{}: {line} lacks {want:?}",
            file.display()
        );
    }
    // All at once: one line each, the exit code still non-zero.
    let out = validate(&files);
    assert!(!out.status.success());
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).lines().count(),
        files.len()
    );
    assert!(String::from_utf8_lossy(&out.stderr).contains(&format!("{} problem(s)", files.len())));
}

/// `client-config --gateway` from the example files: the gateway's URLs and
/// token audience, as an `mcp.json` entry named after it.
#[test]
fn client_config_describes_a_gateway_from_files() {
    let root = std::path::PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("..");
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-warden-operator"))
        .args(["client-config", "team-a-tools", "--gateway", "-f"])
        .arg(root.join("examples/gateway/gateway.yaml"))
        .output()
        .unwrap();
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert!(
        text.starts_with("# MCPGateway team-a/team-a-tools\n"),
        "{text}"
    );
    assert!(
        text.contains("--audience mcpwarden.dev/team-a/mcpgateway/team-a-tools"),
        "{text}"
    );
    // The example exposes the gateway: the external URL, the Service's beside it.
    assert!(
        text.contains("\"url\": \"https://tools.team-a.example.com/mcp\""),
        "{text}"
    );
    assert!(
        text.contains(
            "#   in the cluster: http://team-a-tools.team-a.svc.cluster.local:8080/mcp\n"
        ),
        "{text}"
    );
    // Without --gateway the name is looked up among the servers.
    let out = std::process::Command::new(env!("CARGO_BIN_EXE_mcp-warden-operator"))
        .args(["client-config", "team-a-tools", "-f"])
        .arg(root.join("examples/gateway/gateway.yaml"))
        .output()
        .unwrap();
    assert!(!out.status.success());
    assert!(
        String::from_utf8_lossy(&out.stderr).contains("no MCPServer \"team-a-tools\" in the files")
    );
}

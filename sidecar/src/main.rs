#![forbid(unsafe_code)]

fn main() -> std::process::ExitCode {
    mcp_warden_sidecar::cli::main()
}

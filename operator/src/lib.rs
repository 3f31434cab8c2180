//! mcp-warden-operator: turns an MCPServer (+ ToolProfile + SandboxProfile)
//! into a hardened pod with the tool facade in front.
//!
//! ```text
//!            pure                                   touches the API
//!  ┌──────────────────────────────────┐   ┌─────────────────────────────────┐
//!  resolve ─▶ validate ─▶ compile ─▶ build ─▶ apply (SSA) ─▶ status + Events
//!  (reconcile::resolve) (validate) (compile) (build::*) (reconcile::apply) (reconcile::status)
//! ```
//! - [`capabilities`] (what is asked above the baseline, its digest, what an
//!   approval puts in force; [`egress_scope`] names broad egress; [`pin`] the image digest an
//!   approval runs), [`validate`], [`compile`], [`build`]: pure; `render` and the controller
//!   both go through [`plan`], so what `render` prints is what `run` applies.
//! - [`reconcile`]: the controller (watches, the pipeline, error policy).
//! - [`gateway`]: the MCPGateway's own pipeline (backends, the signing key,
//!   the gateway's pod), and the key's way into its backends' policies.
//! - [`webhook`]: the TLS admission webhook (who may approve capabilities).
//! - [`runtime`]: leader election, HTTP (`/metrics`, `/healthz`, `/readyz`),
//!   metrics, logging.
//! - [`crdgen`], [`render`], [`client_config`] (read by [`client_config_source`]), [`check`] (`validate`): the subcommands that print; [`pss`] checks pods
//!   against Pod Security "restricted".
#![forbid(unsafe_code)]

pub mod build;
pub mod capabilities;
pub mod check;
pub mod client_config;
pub mod client_config_source;
pub mod compile;
pub mod config;
pub mod crdgen;
pub mod egress_scope;
pub mod gateway;
pub mod names;
pub mod pin;
pub mod plan;
pub mod pss;
pub mod rbac;
pub mod reconcile;
pub mod render;
pub mod runtime;
pub mod tightening;
pub mod validate;
pub mod webhook;
pub mod workload;

//! The policy pipeline: what the facade does to the messages it polices.
//!
//! Per client request (after the transport parsed it and authenticated the
//! caller):
//! - `tools/call` → [`call`]: policy → budget → schema → approval →
//!   upstream with timeout → response filter → audit/metrics;
//! - `tools/list` → [`list`]: all pages → registry (pins, drift, poisoning)
//!   → filter by the same decision → rewrite;
//! - everything else passes through untouched.
//!
//! Refusals become JSON-RPC errors only in [`refusal`].

pub mod approval;
pub mod audit;
pub mod budget;
pub mod call;
pub mod identity;
pub mod list;
pub mod output;
pub mod policy;
pub mod refusal;
pub mod registry;

//! The process around the controller: leader election ([`leader`]), the
//! admin HTTP server ([`http`]), metrics ([`metrics`]) and logging ([`logging`]).

pub mod http;
pub mod leader;
pub mod logging;
pub mod metrics;

//! The pure policy core shared by the operator (validation) and the sidecar
//! (enforcement). No I/O, no Kubernetes, no async.
#![forbid(unsafe_code)]

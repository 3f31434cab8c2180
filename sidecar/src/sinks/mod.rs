//! Where audit records go besides the writer thread's stream: a file
//! rotated by size ([`file`]) and an HTTP store ([`http`]). The records
//! themselves, and the writer, are [`crate::gates::audit`]'s.

pub mod file;
pub mod http;

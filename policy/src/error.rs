//! Configuration errors: why a `FacadePolicy` cannot be compiled.
//!
//! Flow: `FacadePolicy` --[`crate::CompiledPolicy::compile`]--> `Ok(policy)`
//! or every [`ConfigError`] found (never just the first), each naming the
//! field it is about (`tools[2].arguments[0].allow[1]`). The operator puts
//! them in the MCPServer's `PolicyCompiled` condition; the sidecar logs them
//! and keeps its old policy. `reason()` is a bounded metric label.

/// One problem in a policy document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum ConfigError {
    /// `defaultAction: deny` and no tool, resource or prompt rules: the
    /// facade would expose nothing (an empty allowlist is a configuration
    /// error, not a policy).
    #[error("tools: the allowlist is empty and defaultAction is deny, so no tool could ever be used; list tools (or resources or prompts) or set defaultAction: allow")]
    EmptyAllowlist,
    /// Two rules for the same upstream tool.
    #[error("{at}: a rule for upstream tool {name:?} already exists")]
    DuplicateTool {
        /// Field path.
        at: String,
        /// The upstream name.
        name: String,
    },
    /// An alias that is not snake_case.
    #[error("{at}: alias {alias:?} must be snake_case (^[a-z][a-z0-9_]*$, at most 64 characters)")]
    BadAlias {
        /// Field path.
        at: String,
        /// The alias.
        alias: String,
    },
    /// Two tools would be exposed (or confused) under one name.
    #[error("{at}: name {name:?} collides with {other}")]
    NameCollision {
        /// Field path.
        at: String,
        /// The contested name.
        name: String,
        /// Where the other use is.
        other: String,
    },
    /// A pin that is not `sha256:` and 64 lowercase hex digits.
    #[error("{at}: pin must be sha256:<64 lowercase hex digits>")]
    BadPin {
        /// Field path.
        at: String,
    },
    /// A glob, regex or command pattern that does not compile.
    #[error("{at}: invalid pattern {pattern:?}: {message}")]
    BadPattern {
        /// Field path.
        at: String,
        /// The pattern.
        pattern: String,
        /// The compiler's complaint.
        message: String,
    },
    /// Any other problem with an argument rule, a limit, redaction, roles or auth.
    #[error("{at}: {message}")]
    Invalid {
        /// Field path.
        at: String,
        /// What is wrong and how to fix it.
        message: String,
    },
}

impl ConfigError {
    /// A stable snake_case label for metrics and conditions.
    pub fn reason(&self) -> &'static str {
        match self {
            ConfigError::EmptyAllowlist => "empty_allowlist",
            ConfigError::DuplicateTool { .. } => "duplicate_tool",
            ConfigError::BadAlias { .. } => "bad_alias",
            ConfigError::NameCollision { .. } => "name_collision",
            ConfigError::BadPin { .. } => "bad_pin",
            ConfigError::BadPattern { .. } => "bad_pattern",
            ConfigError::Invalid { .. } => "invalid",
        }
    }

    pub(crate) fn invalid(at: impl Into<String>, message: impl Into<String>) -> Self {
        ConfigError::Invalid {
            at: at.into(),
            message: message.into(),
        }
    }

    pub(crate) fn pattern(at: impl Into<String>, pattern: &str, message: impl ToString) -> Self {
        ConfigError::BadPattern {
            at: at.into(),
            pattern: pattern.to_string(),
            message: message.to_string(),
        }
    }
}

/// Whether `s` matches `^[a-z][a-z0-9_]*$` and is at most 64 bytes.
pub(crate) fn is_snake_case(s: &str) -> bool {
    let mut bytes = s.bytes();
    s.len() <= 64
        && bytes.next().is_some_and(|b| b.is_ascii_lowercase())
        && bytes.all(|b| b.is_ascii_lowercase() || b.is_ascii_digit() || b == b'_')
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snake_case_shape() {
        for ok in ["a", "read_file", "x9_", "a_b_c"] {
            assert!(is_snake_case(ok), "{ok}");
        }
        for bad in [
            "",
            "Read",
            "9a",
            "_a",
            "read-file",
            "readFile",
            "rëad",
            &"a".repeat(65),
        ] {
            assert!(!is_snake_case(bad), "{bad}");
        }
    }

    #[test]
    fn messages_name_the_field() {
        let e = ConfigError::BadAlias {
            at: "tools[1].alias".into(),
            alias: "Bad".into(),
        };
        assert!(e.to_string().starts_with("tools[1].alias:"));
        assert_eq!(e.reason(), "bad_alias");
    }
}

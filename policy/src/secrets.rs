//! The built-in secret detectors: what credentials look like.
//!
//! Flow: [`BUILTINS`] --[`crate::Redactor::new`]--> compiled detectors,
//! grouped by `kind` (the bounded `mcpwarden_redactions_total{kind}` label
//! set and the names `redaction.kinds` selects). A kind may have several
//! patterns (different token generations, a prefix form and a key = value
//! form).
//!
//! How the patterns are written:
//! - A token with a fixed prefix (`ghp_`, `npm_`, `sk-ant-`) takes the
//!   *whole* run of token characters after it (`{N,}`, never `{N}`), so a
//!   longer token is never cut after a fixed length, and starts at an ASCII
//!   word boundary.
//! - A pattern with a capture group redacts only the group, keeping the
//!   context readable (`password: [REDACTED:generic_secret]`).
//! - Shapes too plain to trust alone (a 40-character secret, a password)
//!   need a key that names them (`aws_secret_access_key =`, `password:`)
//!   and pass a [`Check`]: card numbers pass Luhn; key = value secrets are
//!   not placeholders (`<token>`, `${TOKEN}`, `changeme`, `xxxx`) and look
//!   random enough (or, for passwords, like a password).
//! - Patterns use ASCII classes and boundaries only, so the lazy DFA never
//!   falls back on non-ASCII text.

/// The second opinion a match needs before it is redacted.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Check {
    /// The pattern is specific enough.
    None,
    /// 13–19 digits passing the Luhn check.
    Luhn,
    /// Not a placeholder, at least 16 characters, mixed and random-looking.
    Random,
    /// Not a placeholder; 8+ characters with a digit, symbol or mixed case,
    /// or 12+ characters.
    Password,
}

/// One built-in pattern.
pub(crate) struct Builtin {
    pub kind: &'static str,
    pub pattern: &'static str,
    pub check: Check,
}

const fn b(kind: &'static str, pattern: &'static str) -> Builtin {
    Builtin {
        kind,
        pattern,
        check: Check::None,
    }
}

const fn c(kind: &'static str, pattern: &'static str, check: Check) -> Builtin {
    Builtin {
        kind,
        pattern,
        check,
    }
}

/// Key names that announce a secret value (generic `key = value` form):
/// the keyword alone, after a prefix ending in `_` `.` `-`
/// (`DB_PASSWORD`, `openai.api_key`, `x-api-key`), or after a camelCase
/// prefix (`dbPassword`, `githubToken`). The key starts at a word boundary,
/// so `bypass` or `compass` is no `pass`.
macro_rules! key {
    ($lower:expr, $camel:expr) => {
        concat!(
            r"(?-u:\b)(?:(?:[A-Za-z0-9_.-]*[_.-])?(?i:",
            $lower,
            r")|[A-Za-z0-9]*[a-z0-9](?:",
            $camel,
            r"))"
        )
    };
}

macro_rules! secret_key {
    () => {
        key!(
            r"api[_-]?key|apikey|api[_-]?secret|app[_-]?secret|secret[_-]?key(?:[_-]?base)?|client[_-]?secret|access[_-]?token|auth[_-]?token|refresh[_-]?token|session[_-]?(?:key|token|secret)|private[_-]?key(?:[_-]?id)?|signing[_-]?(?:key|secret)|encryption[_-]?key|master[_-]?key|webhook[_-]?secret|shared[_-]?secret|consumer[_-]?secret|bot[_-]?token|(?:client|private)[_-]key[_-]data|secret|token|auth|credentials?",
            r"Secret|Token|ApiKey|AccessKey|SecretKey|PrivateKey|SigningKey|EncryptionKey|MasterKey|AuthKey|Credentials?"
        )
    };
}

macro_rules! env_key {
    () => {
        r"(?-u:\b)[A-Z][A-Z0-9_]*_KEY"
    };
}

macro_rules! password_key {
    () => {
        key!(
            r"password|passwd|passphrase|pwd|pass",
            r"Password|Passwd|Passphrase|Pwd|Pass"
        )
    };
}

/// `KEY` then `:`/`=`/`=>`/`:=` (the key may close a quote, as in
/// `"db_password": …`), then the value (group 1), in one of three forms,
/// each read the way the text's reader reads it:
/// - [`quoted!`]: `"…"` or `'…'`, to the closing quote (spaces and any
///   punctuation included; `\"` does not close it), or to the end of the
///   line;
/// - [`bare!`]: unquoted, to the end of the token (whitespace), whatever
///   punctuation it holds (`Tr0ub4dor&3xyz`, `a;b,c`). A value starting
///   with `{`, `[` or `(` is a structure (a JSON schema, a call), not a
///   secret.
///
/// `$min` is the least length; for `bare!`, `$rest` is `$min - 1`.
macro_rules! quoted {
    ($key:expr, $q:literal, $min:literal) => {
        concat!(
            $key,
            r#"["']?\s*(?::=|=>|[:=])\s*"#,
            $q,
            r#"((?:[^"#,
            $q,
            r#"\\\r\n]|\\.){"#,
            $min,
            r#",})"#
        )
    };
}

macro_rules! bare {
    ($key:expr, $rest:literal) => {
        concat!(
            $key,
            r#"["']?\s*(?::=|=>|[:=])[ \t]*([^\s"'{\[(]\S{"#,
            $rest,
            r#",})"#
        )
    };
}

/// Every built-in pattern, in priority order (on the same start, the
/// longer match wins, then the earlier kind).
pub(crate) const BUILTINS: &[Builtin] = &[
    // --- keys and signed tokens -------------------------------------------
    b(
        "private_key",
        r"-----BEGIN[A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?-----(?s:.*?)(?:-----END[A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?-----|\z)",
    ),
    // The rest of a key whose BEGIN line is in an earlier piece of output.
    b(
        "private_key",
        r"\A(?s:.*?)-----END[A-Z0-9 ]{0,30}PRIVATE KEY(?: BLOCK)?-----",
    ),
    b(
        "private_key",
        r"PuTTY-User-Key-File-[0-9]+:(?s:.*?)(?:Private-MAC: [0-9a-fA-F]+|\z)",
    ),
    b("private_key", r"(?-u:\b)AGE-SECRET-KEY-1[0-9A-Z]{50,}"),
    b(
        "jwt",
        r"(?-u:\b)eyJ[A-Za-z0-9_-]{8,}\.eyJ[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]*(?:\.[A-Za-z0-9_-]+\.[A-Za-z0-9_-]+)?",
    ),
    // --- cloud providers ---------------------------------------------------
    b(
        "aws_access_key_id",
        r"(?-u:\b)(?:AKIA|ASIA|ABIA|ACCA|AGPA|AIDA|AROA|AIPA|ANPA|ANVA|APKA|A3T[A-Z0-9])[A-Z0-9]{16,}(?-u:\b)",
    ),
    b(
        "aws_secret_access_key",
        r#"(?i:aws)[A-Za-z0-9_. -]{0,20}(?i:secret)[A-Za-z0-9_. -]{0,20}['"]?\s*[:=]\s*['"]?([A-Za-z0-9/+]{40})(?:[^A-Za-z0-9/+=]|\z)"#,
    ),
    b(
        "aws_secret_access_key",
        r"(?-u:\b)(?:FwoGZXIvYXdz|IQoJb3JpZ2lu)[A-Za-z0-9/+=]{40,}",
    ),
    b("gcp_api_key", r"(?-u:\b)AIza[0-9A-Za-z_-]{35,}"),
    b(
        "google_oauth",
        r"(?-u:\b)(?:GOCSPX-[A-Za-z0-9_-]{24,}|ya29\.[0-9A-Za-z_-]{20,}|1//0[0-9A-Za-z_-]{30,})",
    ),
    b(
        "azure_storage_key",
        r"(?i:AccountKey|SharedAccessKey|SharedAccessSignature)=([A-Za-z0-9+/%]{40,}={0,2})",
    ),
    b(
        "azure_storage_key",
        r"(?i:[?&]sig=)([A-Za-z0-9%+/]{30,}={0,2})",
    ),
    b(
        "azure_client_secret",
        r"(?-u:\b)[A-Za-z0-9_~.-]{3}[0-9]Q~[A-Za-z0-9_~.-]{31,}",
    ),
    b("digitalocean_token", r"(?-u:\b)do[opr]_v1_[a-f0-9]{64,}"),
    b(
        "alibaba_access_key",
        r"(?-u:\b)LTAI[A-Za-z0-9]{12,}(?-u:\b)",
    ),
    b(
        "hashicorp_token",
        r"(?-u:\b)(?:hv[sbr]\.[A-Za-z0-9_-]{24,}|[A-Za-z0-9]{14}\.atlasv1\.[A-Za-z0-9_=-]{60,})",
    ),
    b(
        "cloud_platform_token",
        r"(?-u:\b)(?:dapi[a-f0-9]{32,}(?:-[0-9]+)?|dp\.(?:pt|st|sa|ct|scim|audit)\.(?:[a-z0-9_-]{1,30}\.)?[A-Za-z0-9]{40,}|pul-[a-f0-9]{40,}|pscale_(?:tkn|pw|oauth)_[A-Za-z0-9_.=-]{32,}|fo1_[A-Za-z0-9_-]{40,}|fm[12][ar]?_[A-Za-z0-9+/_=-]{40,}|HRKU-[A-Za-z0-9_-]{40,}|vcp_[A-Za-z0-9]{40,}|nfp_[A-Za-z0-9]{36,}|rnd_[A-Za-z0-9]{30,}|sbp_[a-f0-9]{40,}|dop_v1_[a-f0-9]{64,}|CFPAT-[A-Za-z0-9_-]{40,}|ntn_[A-Za-z0-9]{40,}|secret_[A-Za-z0-9]{43,}|PMAK-[A-Za-z0-9]{24,}-[A-Za-z0-9]{30,}|tskey-[a-z]+-[A-Za-z0-9]{6,}-[A-Za-z0-9]{20,}|figd_[A-Za-z0-9_-]{40,}|tfp_[A-Za-z0-9_=-]{40,}|sl\.(?:u\.)?[A-Za-z0-9_-]{130,}|pnu_[A-Za-z0-9]{36,}|pat-(?:na|eu)1-[a-f0-9-]{36,}|rdme_[a-z0-9]{60,}|sk\.eyJ[A-Za-z0-9_-]{20,}\.[A-Za-z0-9_-]{20,})",
    ),
    b(
        "observability_token",
        r"(?-u:\b)(?:glsa_[A-Za-z0-9]{32,}_[A-Fa-f0-9]{8}|glc_[A-Za-z0-9+/]{32,}={0,2}|NRAK-[A-Z0-9]{27,}|sntry[su]_[A-Za-z0-9+/=_]{40,}|lin_api_[A-Za-z0-9]{40,}|dt0[a-z][0-9]{2}\.[A-Za-z0-9]{24,}\.[A-Za-z0-9]{64,})",
    ),
    // --- source forges -----------------------------------------------------
    b(
        "github_token",
        r"(?-u:\b)(?:gh[pousr]_[A-Za-z0-9]{36,}|github_pat_[A-Za-z0-9_]{22,}|v1\.[a-f0-9]{40}(?-u:\b))",
    ),
    b(
        "gitlab_token",
        r"(?-u:\b)(?:(?:glpat|gldt|glrt|glptt|glft|glimt|glagent|glcbt|glsoat|gloas|glffct)-[A-Za-z0-9_.-]{20,}|GR1348941[A-Za-z0-9_-]{20,})",
    ),
    b(
        "atlassian_token",
        r"(?-u:\b)(?:ATBB|ATATT|ATCTT|ATOAT)[A-Za-z0-9_=.-]{24,}",
    ),
    // --- chat and webhooks -------------------------------------------------
    b(
        "slack_token",
        r"(?-u:\b)(?:xox[abposre](?:\.xox[bp])?-[A-Za-z0-9-]{10,}|xapp-[0-9]-[A-Za-z0-9-]{10,})",
    ),
    b(
        "slack_webhook",
        r"https://hooks\.slack(?:-gov)?\.com/(?:services|workflows|triggers)/[A-Za-z0-9/_-]{20,}",
    ),
    b(
        "discord_token",
        r"(?-u:\b)[MNO][A-Za-z0-9_-]{23,25}\.[A-Za-z0-9_-]{6}\.[A-Za-z0-9_-]{27,}",
    ),
    b(
        "discord_webhook",
        r"https://(?:ptb\.|canary\.)?discord(?:app)?\.com/api/webhooks/[0-9]+/[A-Za-z0-9_-]{40,}",
    ),
    b(
        "telegram_bot_token",
        r"(?:(?-u:\b)|bot)[0-9]{8,10}:AA[A-Za-z0-9_-]{30,}",
    ),
    b(
        "teams_webhook",
        r"https://[A-Za-z0-9-]+\.webhook\.office\.com/webhookb2/[A-Za-z0-9@/_-]{40,}|https://outlook\.office(?:365)?\.com/webhook/[A-Za-z0-9@/_-]{40,}|https://[a-z0-9.-]+\.logic\.azure\.com(?::443)?/workflows/[^\s\x22'<>]{20,}",
    ),
    b(
        "messaging_api_key",
        r"(?-u:\b)(?:SG\.[A-Za-z0-9_-]{16,}\.[A-Za-z0-9_-]{30,}|SK[0-9a-f]{32}(?-u:\b)|key-[0-9a-f]{32}(?-u:\b)|[0-9a-f]{32}-us[0-9]{1,2}(?-u:\b)|xkeysib-[a-f0-9]{64}-[A-Za-z0-9]{16,})",
    ),
    // --- payments ----------------------------------------------------------
    b(
        "stripe_key",
        r"(?-u:\b)(?:[rs]k_(?:live|test)_[A-Za-z0-9]{20,}|whsec_[A-Za-z0-9]{32,})",
    ),
    b(
        "payment_token",
        r"(?-u:\b)(?:sq0(?:atp|csp|idp)-[A-Za-z0-9_-]{22,}|EAAA[A-Za-z0-9_-]{60,}|access_token\$(?:production|sandbox)\$[0-9a-z]{16}\$[0-9a-f]{32}|shp(?:at|ca|pa|ss)_[a-fA-F0-9]{32,}|rzp_(?:live|test)_[A-Za-z0-9]{14,}|FLWSECK(?:_TEST)?-[a-h0-9]{32}-X|shippo_(?:live|test)_[a-f0-9]{40,}|duffel_(?:live|test)_[A-Za-z0-9_-]{40,}|EZ[AT]K[a-zA-Z0-9]{54,}|sk_live_[A-Za-z0-9]{20,})",
    ),
    b("facebook_token", r"(?-u:\b)EAA[A-Za-z0-9]{90,}"),
    // --- AI providers ------------------------------------------------------
    b(
        "anthropic_key",
        r"(?-u:\b)sk-ant-(?:api|admin|oat|sid)[0-9]{2}-[A-Za-z0-9_-]{40,}",
    ),
    b(
        "openai_key",
        r"(?-u:\b)sk-(?:(?:proj|svcacct|admin|None)-[A-Za-z0-9_-]{40,}|[A-Za-z0-9]{20,}T3BlbkFJ[A-Za-z0-9]{20,}|[A-Za-z0-9]{48,}(?-u:\b))",
    ),
    b(
        "huggingface_token",
        r"(?-u:\b)(?:hf_[A-Za-z0-9]{34,}|api_org_[A-Za-z0-9]{34,})",
    ),
    b(
        "ai_api_key",
        r"(?-u:\b)(?:gsk_[A-Za-z0-9]{48,}|r8_[A-Za-z0-9]{37,}|pplx-[A-Za-z0-9]{48,}|xai-[A-Za-z0-9]{70,}|sk-or-v1-[a-f0-9]{64,}|lsv2_(?:pt|sk)_[a-f0-9]{32}_[a-f0-9]{10,}|sk-[A-Za-z0-9]{32,}(?-u:\b)|fw_[A-Za-z0-9]{24,}|nvapi-[A-Za-z0-9_-]{60,}|pcsk_[A-Za-z0-9_]{50,}|tvly-[A-Za-z0-9_-]{30,}|fc-[a-f0-9]{32}(?-u:\b))",
    ),
    // --- package registries ------------------------------------------------
    b("npm_token", r"(?-u:\b)npm_[A-Za-z0-9]{36,}"),
    b(
        "npm_token",
        r#"(?m:^|:)(?:_authToken|_auth|_password)\s*=\s*["']?([^\s"']{8,})"#,
    ),
    b("pypi_token", r"(?-u:\b)pypi-AgE[A-Za-z0-9_-]{50,}"),
    b("rubygems_key", r"(?-u:\b)rubygems_[a-f0-9]{48,}"),
    b("nuget_key", r"(?-u:\b)oy2[a-z0-9]{43,}(?-u:\b)"),
    b(
        "dockerhub_token",
        r"(?-u:\b)dckr_(?:pat|oat)_[A-Za-z0-9_-]{27,}",
    ),
    b(
        "package_registry_token",
        r"(?-u:\b)(?:packagist_[ou][ou]t_[a-f0-9]{60,}|cio[A-Za-z0-9]{32}(?-u:\b)|AKCp[A-Za-z0-9]{60,}|cmVmdGtuOjAxOj[A-Za-z0-9]{40,}|CLOJARS_[a-z0-9]{60,}|pub-[a-f0-9]{40,}|glcbt-[A-Za-z0-9_-]{20,})",
    ),
    // --- databases and URLs with passwords ---------------------------------
    b(
        "database_url",
        r#"(?i:(?:postgres(?:ql)?|mysql|mariadb|mongodb(?:\+srv)?|rediss?|amqps?|mssql|sqlserver|oracle|cockroachdb|clickhouse|couchdb|neo4j(?:\+s)?|bolt|cassandra|jdbc:[a-z]+)://)[^\s:/@"'<>]{0,100}:([^\s@/"'<>]{3,200})@"#,
    ),
    b(
        "url_password",
        r#"(?i:[a-z][a-z0-9+.-]{1,20}://)[^\s:/@"'<>]{1,100}:([^\s@/"'<>]{3,200})@[A-Za-z0-9.-]"#,
    ),
    // --- generic forms -----------------------------------------------------
    b(
        "bearer_token",
        r"(?i:bearer|ssws|authorization:\s*(?:token|apikey|api-key|key|sharedkey))\s+([A-Za-z0-9._~+/:-]{20,}=*)",
    ),
    b(
        "basic_auth",
        r"(?i:authorization)\s*:\s*(?i:basic)\s+([A-Za-z0-9+/]{8,}={0,2})",
    ),
    c(
        "generic_secret",
        quoted!(password_key!(), '"', 8),
        Check::Password,
    ),
    c(
        "generic_secret",
        quoted!(password_key!(), "'", 8),
        Check::Password,
    ),
    c("generic_secret", bare!(password_key!(), 7), Check::Password),
    c(
        "generic_secret",
        quoted!(secret_key!(), '"', 16),
        Check::Random,
    ),
    c(
        "generic_secret",
        quoted!(secret_key!(), "'", 16),
        Check::Random,
    ),
    c("generic_secret", bare!(secret_key!(), 15), Check::Random),
    // Environment-style names ending in _KEY (`ALGOLIA_ADMIN_KEY=`); only
    // in upper case, since `sort_key:` or `cache_key:` in JSON name no secret.
    c(
        "generic_secret",
        quoted!(env_key!(), '"', 16),
        Check::Random,
    ),
    c(
        "generic_secret",
        quoted!(env_key!(), "'", 16),
        Check::Random,
    ),
    c("generic_secret", bare!(env_key!(), 15), Check::Random),
    c(
        "generic_secret",
        r"(?i:<(?:password|secret|token|api[_-]?key|client[_-]?secret)>)([^<\s]{8,})</",
        Check::Password,
    ),
    // No `key = value` form: .netrc, XML settings, mysql -p, cookies, a UUID named a token.
    c(
        "generic_secret",
        r"(?-u:\b)machine\s+\S+(?:\s+(?:login|account)\s+\S+)*\s+password\s+(\S{4,})",
        Check::None,
    ),
    c(
        "generic_secret",
        r#"(?i:key)\s*=\s*"[^"]*(?i:secret|password|token|api[_-]?key|connectionstring)[^"]*"\s+(?i:value)\s*=\s*"([^"]{8,})""#,
        Check::Password,
    ),
    c(
        "generic_secret",
        r"(?-u:\b)(?:mysql|mysqldump|mysqladmin|mariadb)(?-u:\b)[^\n]{0,60}?\s-p([^\s-]\S{5,})",
        Check::None,
    ),
    c(
        "generic_secret",
        r"(?i:set-cookie|cookie):[^\n]{0,200}?(?-u:\b)(?i:[a-z_-]*(?:session|sess|sid|token|auth)[a-z_-]*)=([^;\s]{16,})",
        Check::Random,
    ),
    c(
        "generic_secret",
        r"(?i:token|api[_-]?key|secret)\s+([0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12})(?-u:\b)",
        Check::None,
    ),
    c(
        "credit_card",
        r"(?-u:\b)[2-6](?:[ -]?[0-9]){12,18}(?-u:\b)",
        Check::Luhn,
    ),
];

/// Values that stand for a secret rather than being one.
pub(crate) fn placeholder(v: &str) -> bool {
    let lower = v.to_ascii_lowercase();
    let v = lower.trim_matches(|c: char| matches!(c, '"' | '\'' | '`'));
    let first = v.chars().next().unwrap_or('x');
    if v.chars().all(|c| c == first)
        || v.chars()
            .all(|c| matches!(c, '*' | 'x' | '.' | '-' | '_' | '#' | '•'))
    {
        return true;
    }
    const EXACT: &[&str] = &[
        "changeme",
        "password",
        "passw0rd",
        "secret",
        "null",
        "none",
        "nil",
        "undefined",
        "required",
        "optional",
        "string",
        "dummy",
        "example",
        "placeholder",
        "redacted",
        "hidden",
        "masked",
        "notset",
        "not_set",
        "true",
        "false",
        "todo",
        "fixme",
        "sample",
        "test",
        "testing",
    ];
    const PREFIX: &[&str] = &[
        "<",
        "${",
        "{{",
        "$",
        "%(",
        "%s",
        "your_",
        "your-",
        "yourpassword",
        "env(",
        "env.",
        "process.env",
        "os.environ",
        "os.getenv",
        "getenv(",
        "settings.",
        "config.",
        "secrets.",
        "vault:",
        "ref+",
        "[redacted",
        "example_",
        "dummy_",
        "sample_",
        "changeme",
        "********",
    ];
    const INSIDE: &[&str] = &["_here", "placeholder", "redacted", "changeme", "xxxxxxxx"];
    EXACT.contains(&v)
        || PREFIX.iter().any(|w| v.starts_with(w))
        || INSIDE.iter().any(|w| v.contains(w))
}

/// Keys whose values are opaque handles, not credentials (redacting a page
/// token breaks paging) or public by design.
fn harmless_key(whole: &str) -> bool {
    let k = whole.to_ascii_lowercase();
    [
        "page_token",
        "pagetoken",
        "page-token",
        "next_token",
        "nexttoken",
        "continuation",
        "sync_token",
        "synctoken",
        "cursor",
        "public",
        "csrf",
        "token_type",
        "tokentype",
        "token_count",
        "tokens_used",
        "max_token",
    ]
    .iter()
    .any(|w| k.contains(w))
}

/// An expression in code (`request.headers.get("Authorization")`,
/// `config.api.token`), not a value: judged up to its first call
/// parenthesis, since the arguments may hold anything.
fn code_like(v: &str) -> bool {
    let v = v.find('(').map_or(v, |i| &v[..=i]);
    v.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && v.bytes().all(|b| {
            b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'(' | b')' | b'[' | b']')
        })
        && (v.contains('.') || v.contains('('))
}

/// A file or object path (`logs/2026/11/app.log.gz`): slashes between
/// lower-case segments. Base64 secrets with a `/` mix cases.
fn path_like(v: &str) -> bool {
    v.contains('/')
        && v.bytes().all(|b| {
            b.is_ascii_lowercase() || b.is_ascii_digit() || matches!(b, b'/' | b'.' | b'_' | b'-')
        })
}

/// Shannon entropy in bits per character.
fn entropy(s: &str) -> f64 {
    let mut counts = [0u32; 256];
    for b in s.bytes() {
        counts[b as usize] += 1;
    }
    let n = s.len() as f64;
    counts
        .iter()
        .filter(|&&c| c > 0)
        .map(|&c| {
            let p = f64::from(c) / n;
            -p * p.log2()
        })
        .sum()
}

fn classes(s: &str) -> usize {
    let has = |f: fn(&u8) -> bool| usize::from(s.as_bytes().iter().any(f));
    has(u8::is_ascii_lowercase)
        + has(u8::is_ascii_uppercase)
        + has(u8::is_ascii_digit)
        + has(|b| b.is_ascii_punctuation())
}

/// Whether `value` (what the pattern captured, inside the match `whole`)
/// passes `check`.
pub(crate) fn passes(check: Check, whole: &str, value: &str) -> bool {
    // An unquoted value runs to the end of its token, so a separator that
    // ends it (`key: v,` in a flow mapping) is redacted along with it but
    // does not count in judging it.
    let value = value.trim_end_matches([',', ';']);
    match check {
        Check::None => true,
        Check::Luhn => luhn(value),
        Check::Random => {
            value.len() >= 16
                // keys and tokens have no spaces; quoted prose does
                && !value.contains(char::is_whitespace)
                && !harmless_key(whole)
                && !placeholder(value)
                && classes(value) >= 2
                && entropy(value) >= 3.0
                // identifiers and paths, not secrets
                && !value.contains("://")
                && !value.starts_with('/')
                && !value.bytes().all(|b| b.is_ascii_alphabetic() || b == b'_' || b == b'-' || b == b'.')
                && !code_like(value)
                && !path_like(value)
        }
        Check::Password => {
            let n = value.chars().count();
            !placeholder(value)
                && !harmless_key(whole)
                && !value.contains("://")
                && !value.starts_with(['/', '~'])
                && (n >= 12 || (n >= 8 && classes(value) >= 2))
                // a quoted phrase is a passphrase only with a digit or a
                // symbol in it; otherwise it is prose ("Enter your password")
                && (!value.contains(char::is_whitespace)
                    || value.bytes().any(|b| {
                        b.is_ascii_digit() || b"#$%&*+/<=>@\\^_|~".contains(&b)
                    }))
        }
    }
}

/// 13–19 digits (spaces and dashes allowed) passing the Luhn check.
pub(crate) fn luhn(s: &str) -> bool {
    let digits: Vec<u32> = s.chars().filter_map(|c| c.to_digit(10)).collect();
    if !(13..=19).contains(&digits.len()) {
        return false;
    }
    let sum: u32 = digits
        .iter()
        .rev()
        .enumerate()
        .map(|(i, &d)| {
            if i % 2 == 1 {
                if d * 2 > 9 {
                    d * 2 - 9
                } else {
                    d * 2
                }
            } else {
                d
            }
        })
        .sum();
    sum % 10 == 0
}

#[cfg(test)]
#[path = "secrets_tests.rs"]
mod tests;

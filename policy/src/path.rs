//! Path normalization for `kind: path` argument rules.
//!
//! Flow: argument string --[`interpretations`]--> up to three normalized
//! absolute (or, without `root`, relative) paths --> the glob sets in
//! [`crate::args`], where the *worst* outcome over all interpretations wins.
//!
//! Why several interpretations: we cannot know whether the server decodes
//! `%2e%2e`, folds fullwidth dots, or takes bytes literally. So the value is
//! judged as written, percent-decoded (repeatedly, until stable), and
//! NFKC-folded after decoding; a trick that works under any reading is caught.
//!
//! A `file:` URI (`file:///etc/passwd`, `file://localhost/etc/passwd`,
//! `file:/etc/passwd`, any case) reads as the absolute path it names (in
//! every reading: `file%3A%2F%2F%2Fetc` too); one naming another host is
//! refused (`file_uri_host`).
//!
//! Refused outright (before any glob): NUL bytes (raw or encoded), invalid
//! UTF-8 after decoding, more than 8 layers of encoding, control characters,
//! zero-width and bidirectional marks, slash look-alikes NFKC does not fold
//! (U+2215, U+2044, U+29F8, U+FF0F, U+FE68, U+FF3C, U+2216, U+29F5, U+29F9),
//! `~` home paths, and a relative path without `root` that climbs above its
//! start. Backslashes are separators. `..` above `/` stays at `/` (as the
//! kernel does). Trailing slashes are dropped. Case is left alone here; the
//! glob sets decide it (deny and check ignore case, see [`crate::args`]).

use std::borrow::Cow;

use percent_encoding::percent_decode_str;
use unicode_normalization::UnicodeNormalization;

const MAX_DECODE_ROUNDS: usize = 8;

/// Why a path was refused before matching (stable snake_case reasons).
pub(crate) type Refusal = &'static str;

/// The normalized readings of `raw`, deduplicated, or why it is refused.
/// `root` must be an absolute, already normalized directory.
pub(crate) fn interpretations(raw: &str, root: Option<&str>) -> Result<Vec<String>, Refusal> {
    // Most values read the same every way: normalize each distinct reading once.
    let mut out: Vec<String> = Vec::with_capacity(1);
    for reading in readings(raw)? {
        // A `file:` URI is the absolute path it names.
        let r = match file_uri_path(&reading) {
            Some(p) => p?,
            None => reading.as_str(),
        };
        let p = normalize(r, root)?;
        // What Windows opens for it: trailing dots and spaces of a name,
        // and an `::$DATA` stream suffix, dropped.
        let w = windows_reading(&p);
        for p in [Some(p), w].into_iter().flatten() {
            if !out.contains(&p) {
                out.push(p);
            }
        }
    }
    Ok(out)
}

/// `p` with each name's trailing dots and spaces and `:…$DATA` stream
/// suffix dropped, when that changes it (`.env.` and `.env::$DATA` open
/// `.env` on Windows).
fn windows_reading(p: &str) -> Option<String> {
    let changes = p
        .split('/')
        .any(|seg| seg.ends_with(['.', ' ']) || seg.contains(':'));
    if !changes {
        return None;
    }
    let w: Vec<&str> = p
        .split('/')
        .map(|seg| {
            let seg = match seg.find(':') {
                Some(i) if i > 0 && seg[i..].to_ascii_lowercase().ends_with("$data") => &seg[..i],
                _ => seg,
            };
            match seg.trim_end_matches(['.', ' ']) {
                "" => seg,
                t => t,
            }
        })
        .collect();
    let w = w.join("/");
    (w != p).then_some(w)
}

/// The absolute path a `file:` URI names (`file:///p`, `file://localhost/p`,
/// `file:/p`; the scheme and host in any case), `None` when `s` is not a
/// `file:` URI, or a refusal for a file on another host.
fn file_uri_path(s: &str) -> Option<Result<&str, Refusal>> {
    let rest = s.get(..5)?.eq_ignore_ascii_case("file:").then(|| &s[5..])?;
    // A query or fragment is not part of the path.
    let rest = rest.split(['?', '#']).next().unwrap_or("");
    let Some(after) = rest.strip_prefix("//") else {
        return rest.starts_with('/').then_some(Ok(rest));
    };
    if after.starts_with('/') {
        return Some(Ok(after));
    }
    let (host, _) = after.split_once('/').unwrap_or((after, ""));
    Some(if host.eq_ignore_ascii_case("localhost") {
        Ok(&after[host.len()..]).map(|p| if p.is_empty() { "/" } else { p })
    } else {
        Err("file_uri_host")
    })
}

/// The distinct readings of `raw` before any path normalization: as
/// written, percent-decoded, and NFKC-folded after decoding (also used for
/// resource URIs), or why it is refused.
pub(crate) fn readings(raw: &str) -> Result<Vec<String>, Refusal> {
    let decoded = decode(raw)?;
    check_chars(&decoded)?;
    let folded: Cow<'_, str> = if decoded.is_ascii() {
        Cow::Borrowed(&decoded)
    } else {
        Cow::Owned(decoded.nfkc().collect())
    };
    check_chars(&folded)?;
    let mut out = vec![raw.to_string()];
    for reading in [&*decoded, &*folded] {
        if !out.iter().any(|r| r == reading) {
            out.push(reading.to_string());
        }
    }
    Ok(out)
}

/// Percent-decode until the value stops changing.
fn decode(raw: &str) -> Result<Cow<'_, str>, Refusal> {
    let mut cur = Cow::Borrowed(raw);
    for _ in 0..MAX_DECODE_ROUNDS {
        if !cur.contains('%') {
            return Ok(cur);
        }
        let next = percent_decode_str(&cur)
            .decode_utf8()
            .map_err(|_| "invalid_encoding")?;
        if next == cur {
            return Ok(cur);
        }
        cur = Cow::Owned(next.into_owned());
    }
    if percent_decode_str(&cur)
        .decode_utf8()
        .map_err(|_| "invalid_encoding")?
        == cur
    {
        Ok(cur)
    } else {
        Err("encoding_too_deep")
    }
}

fn check_chars(s: &str) -> Result<(), Refusal> {
    for c in s.chars() {
        match c {
            '\0' => return Err("nul_byte"),
            '\u{2215}' | '\u{2044}' | '\u{29F8}' | '\u{FF0F}' | '\u{FE68}' | '\u{FF3C}'
            | '\u{2216}' | '\u{29F5}' | '\u{29F9}' => return Err("unicode_slash"),
            c if c.is_control() || is_invisible(c) => return Err("control_character"),
            _ => {}
        }
    }
    Ok(())
}

/// Zero-width, bidirectional and tag characters (also used by the poisoning scan).
pub(crate) fn is_invisible(c: char) -> bool {
    matches!(c,
        '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}' | '\u{2060}'..='\u{2064}' | '\u{2066}'..='\u{2069}'
        | '\u{FEFF}' | '\u{00AD}' | '\u{061C}' | '\u{180E}' | '\u{E0000}'..='\u{E007F}')
}

/// Lexically normalize one reading: separators, `.`, `..`, root.
fn normalize(s: &str, root: Option<&str>) -> Result<String, Refusal> {
    let s: Cow<'_, str> = if s.contains('\\') {
        Cow::Owned(s.replace('\\', "/"))
    } else {
        Cow::Borrowed(s)
    };
    if s.starts_with('~') {
        return Err("home_relative");
    }
    let absolute = s.starts_with('/');
    let mut parts: Vec<&str> = Vec::new();
    let base = match (absolute, root) {
        (false, Some(r)) => r,
        _ => "",
    };
    for seg in base.split('/').chain(s.split('/')) {
        match seg {
            "" | "." => {}
            ".." => {
                if parts.pop().is_none() && !absolute && root.is_none() {
                    return Err("relative_escape");
                }
            }
            seg => parts.push(seg),
        }
    }
    let rooted = absolute || root.is_some();
    let mut out = String::with_capacity(s.len() + base.len() + 1);
    if rooted {
        out.push('/');
    }
    out.push_str(&parts.join("/"));
    if out.is_empty() {
        out.push('.');
    }
    Ok(out)
}

/// Normalize a configured `root` (must be absolute): `None` when it is not.
pub(crate) fn normalize_root(root: &str) -> Option<String> {
    if !root.starts_with('/') {
        return None;
    }
    normalize(root, None).ok()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn one(raw: &str, root: Option<&str>) -> Vec<String> {
        interpretations(raw, root).unwrap()
    }

    #[test]
    fn dots_and_duplicate_slashes_are_folded() {
        assert_eq!(one("/workspace//a/./b/../c/", None), ["/workspace/a/c"]);
        assert_eq!(one("/../../etc/passwd", None), ["/etc/passwd"]);
        assert_eq!(one("/", None), ["/"]);
    }

    #[test]
    fn relative_paths_join_root() {
        assert_eq!(one("a/b", Some("/workspace")), ["/workspace/a/b"]);
        assert_eq!(one("../etc/passwd", Some("/workspace")), ["/etc/passwd"]);
        assert_eq!(one(".", Some("/workspace")), ["/workspace"]);
        assert_eq!(one("a/../b", None), ["b"]);
        assert_eq!(interpretations("a/../../b", None), Err("relative_escape"));
    }

    #[test]
    fn percent_encoding_is_decoded_repeatedly_and_both_readings_kept() {
        assert_eq!(
            one("/workspace/%2e%2e/etc/passwd", None),
            ["/workspace/%2e%2e/etc/passwd", "/etc/passwd"]
        );
        assert_eq!(
            one("/workspace/100%25.txt", None),
            ["/workspace/100%25.txt", "/workspace/100%.txt"]
        );
        assert_eq!(one("/workspace/%252e%252e/%252e%252e/etc", None)[1], "/etc");
        assert_eq!(one("/workspace/..%2fetc", None)[1], "/etc");
        assert_eq!(interpretations("/a/%00b", None), Err("nul_byte"));
        assert_eq!(interpretations("/a/%ff", None), Err("invalid_encoding"));
        let deep = format!(
            "/a/{}2e",
            (0..10).fold("%".to_string(), |s, _| s.replace('%', "%25"))
        );
        assert_eq!(interpretations(&deep, None), Err("encoding_too_deep"));
    }

    #[test]
    fn unicode_tricks_are_folded_or_refused() {
        // Fullwidth full stops fold to `..` under NFKC.
        assert_eq!(one("/workspace/\u{FF0E}\u{FF0E}/etc", None)[1], "/etc");
        assert_eq!(
            interpretations("/workspace/..\u{2215}etc", None),
            Err("unicode_slash")
        );
        assert_eq!(
            interpretations("/workspace/..\u{FF0F}etc", None),
            Err("unicode_slash")
        );
        assert_eq!(
            interpretations("/workspace/..%E2%88%95etc", None),
            Err("unicode_slash")
        );
        assert_eq!(
            interpretations("/workspace/a\u{202E}b", None),
            Err("control_character")
        );
        assert_eq!(
            interpretations("/workspace/a\u{200B}b", None),
            Err("control_character")
        );
        assert_eq!(interpretations("/a\nb", None), Err("control_character"));
        assert_eq!(interpretations("/a\0b", None), Err("nul_byte"));
    }

    #[test]
    fn file_uris_read_as_the_path_they_name() {
        let ws = Some("/workspace");
        for uri in [
            "file:///etc/passwd",
            "FILE:///etc/passwd",
            "file://localhost/etc/passwd",
            "file://LocalHost/etc/passwd",
            "file:/etc/passwd",
        ] {
            assert_eq!(one(uri, ws), ["/etc/passwd"], "{uri}");
        }
        // Encoded: as written (a name under the root) and decoded (the URI).
        assert_eq!(
            one("file%3A%2F%2F%2Fetc%2Fpasswd", ws),
            ["/workspace/file%3A%2F%2F%2Fetc%2Fpasswd", "/etc/passwd"]
        );
        assert_eq!(
            interpretations("file://evil.example/etc/passwd", ws),
            Err("file_uri_host")
        );
        assert_eq!(one("file://localhost", ws), ["/"]);
        assert_eq!(one("file:///workspace/a", ws), ["/workspace/a"]);
        assert_eq!(one("file:///etc/passwd#x", ws), ["/etc/passwd"]);
        assert_eq!(one("file:///etc/passwd?raw=1", ws), ["/etc/passwd"]);
        assert_eq!(one("profile:x", ws), ["/workspace/profile:x"]);
    }

    #[test]
    fn what_windows_opens_is_a_reading_too() {
        let ws = Some("/workspace");
        assert_eq!(one(".env.", ws), ["/workspace/.env.", "/workspace/.env"]);
        assert_eq!(
            one(".env . .", ws),
            ["/workspace/.env . .", "/workspace/.env"]
        );
        assert_eq!(
            one(".env::$DATA", ws),
            ["/workspace/.env::$DATA", "/workspace/.env"]
        );
        assert_eq!(one("src/a.rs", ws), ["/workspace/src/a.rs"]);
        assert_eq!(one("a/../b", None), ["b"]);
    }

    #[test]
    fn backslashes_and_home_paths() {
        assert_eq!(one("\\workspace\\..\\etc", None), ["/etc"]);
        assert_eq!(interpretations("~/.ssh/id_rsa", None), Err("home_relative"));
        assert_eq!(interpretations("%7E/.ssh", None), Err("home_relative"));
    }

    #[test]
    fn root_must_be_absolute() {
        assert_eq!(
            normalize_root("/workspace/../srv/"),
            Some("/srv".to_string())
        );
        assert_eq!(normalize_root("workspace"), None);
    }
}

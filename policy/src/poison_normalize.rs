//! How the poisoning scan reads a string: hidden characters noted and
//! dropped (tag characters read as the ASCII they smuggle), NFKC folding,
//! and look-alike letters from other scripts read as the ASCII they imitate.
//!
//! Flow: [`super::scan`] → `scan_text` → [`normalize`] → the English rules.

use unicode_normalization::UnicodeNormalization;

use crate::path::is_invisible;

/// A string as the scan reads it, and what normalizing it revealed.
pub(super) struct Normalized {
    pub(super) text: String,
    pub(super) hidden: Vec<&'static str>,
    pub(super) confusable_word: bool,
    /// Fullwidth or mathematical letters and digits.
    pub(super) styled: usize,
}

pub(super) fn normalize(s: &str) -> Normalized {
    let mut hidden: Vec<&'static str> = Vec::new();
    let mut note = |d: &'static str| {
        if !hidden.contains(&d) {
            hidden.push(d);
        }
    };
    let mut visible = String::with_capacity(s.len());
    let mut styled = 0;
    let mut prev: Option<char> = None;
    for c in s.chars() {
        let last = prev.replace(c);
        let prev = last;
        match c {
            '\u{E0000}'..='\u{E007F}' => {
                note("tag_character");
                // Tag characters smuggle ASCII: read it.
                if let Some(a) =
                    char::from_u32(c as u32 - 0xE0000).filter(|a| (' '..='~').contains(a))
                {
                    visible.push(a);
                }
            }
            '\u{202A}'..='\u{202E}'
            | '\u{2066}'..='\u{2069}'
            | '\u{200E}'
            | '\u{200F}'
            | '\u{061C}' => note("bidi_control"),
            // An emoji's presentation selector or joiner (`🛡️`, `👩‍💻`) is
            // part of the picture, not hidden text.
            '\u{FE0E}' | '\u{FE0F}' | '\u{200D}' if prev.is_some_and(is_pictograph) => {}
            c if is_invisible(c)
                || matches!(c, '\u{FE00}'..='\u{FE0F}' | '\u{E0100}'..='\u{E01EF}') =>
            {
                note("zero_width")
            }
            '\n' | '\r' | '\t' => visible.push(c),
            c if c.is_control() => note("control_character"),
            c => {
                if matches!(c, '\u{FF01}'..='\u{FF5E}' | '\u{1D400}'..='\u{1D7FF}') {
                    styled += 1;
                }
                visible.push(c);
            }
        }
    }
    let folded: String = if visible.is_ascii() {
        visible
    } else {
        visible.nfkc().collect()
    };
    let mut text = String::with_capacity(folded.len());
    let mut confusable_word = false;
    let (mut word_ascii, mut word_confusable) = (false, false);
    for c in folded.chars() {
        if !c.is_alphanumeric() {
            confusable_word |= word_ascii && word_confusable;
            word_ascii = false;
            word_confusable = false;
            text.push(c);
        } else if c.is_ascii() {
            word_ascii = true;
            text.push(c);
        } else if let Some(a) = ascii_skeleton(c) {
            word_confusable = true;
            text.push_str(a);
        } else {
            text.push(c);
        }
    }
    confusable_word |= word_ascii && word_confusable;
    Normalized {
        text,
        hidden,
        confusable_word,
        styled,
    }
}

/// A pictograph or symbol an emoji selector or joiner may follow.
fn is_pictograph(c: char) -> bool {
    matches!(c, '\u{2190}'..='\u{2BFF}' | '\u{1F000}'..='\u{1FAFF}' | '\u{FE0F}' | '\u{200D}' | '\u{00A9}' | '\u{00AE}' | '\u{3030}' | '\u{303D}')
}

/// The ASCII letters a non-ASCII letter is confusable with (TR39 skeleton),
/// if that is what it looks like.
fn ascii_skeleton(c: char) -> Option<&'static str> {
    let mut buf = [0u8; 4];
    let sk: String = unicode_security::skeleton(c.encode_utf8(&mut buf)).collect();
    if sk.is_empty() || !sk.bytes().all(|b| b.is_ascii_alphanumeric()) {
        return None;
    }
    // The skeleton's prototypes are not always the letter a reader sees.
    let s: &'static str = match sk.as_str() {
        "rn" => "m",
        "l" if c.is_uppercase() => "I",
        "O" if c.is_lowercase() => "o",
        other => return ASCII.iter().copied().find(|a| *a == other),
    };
    Some(s)
}

const ASCII: &[&str] = &[
    "a", "b", "c", "d", "e", "f", "g", "h", "i", "j", "k", "l", "m", "n", "o", "p", "q", "r", "s",
    "t", "u", "v", "w", "x", "y", "z", "A", "B", "C", "D", "E", "F", "G", "H", "I", "J", "K", "L",
    "M", "N", "O", "P", "Q", "R", "S", "T", "U", "V", "W", "X", "Y", "Z", "0", "1", "2", "3", "4",
    "5", "6", "7", "8", "9",
];

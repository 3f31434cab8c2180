//! Tool search: rank tool definitions by relevance to a query (BM25), in
//! process, for the `search_tools` meta-tool.
//!
//! Flow: the definitions a caller may call (the sidecar filters them with
//! [`crate::decide`] first, so a result is never a tool the caller could not
//! call) --[`ToolIndex::build`]--> an inverted index --[`ToolIndex::search`]
//! with the query--> `(position, score)` best first.
//!
//! What is indexed, per tool, as one bag of terms with field weights (a
//! simplified BM25F: a term's frequency counts each occurrence times its
//! field's weight): the name ×3 (split on `_`, `-`, `.`, `/` and camelCase,
//! so `git_diff_staged`, `get-sum` and `getTinyImage` match their words),
//! the title ×2, the description ×1, and the parameter names ×1 (split the
//! same way) with their descriptions ×1. Terms are lower-cased, common
//! English function words dropped, and cut to a crude stem (plural `s`,
//! `ing`, `ed`, a final `e`) on both sides, so "files" finds `file` and "committing"
//! finds `commit`. Scores are BM25 (k1 = 1.2, b = 0.75) over that bag.
//!
//! Why not a crate: the indexes here are small (one caller's visible tools,
//! built per search) and the part that matters is the tokenizer for
//! identifiers, which a full-text engine (tantivy) would need replaced
//! anyway; the scoring is twenty lines, and the facade is a security
//! boundary that takes no dependency it can do without.

use std::collections::HashMap;

use serde_json::Value;

use crate::risk::words;

const K1: f32 = 1.2;
const B: f32 = 0.75;
const NAME_WEIGHT: u32 = 3;
const TITLE_WEIGHT: u32 = 2;

/// Words too common to tell tools apart.
const STOP: &[&str] = &[
    "a", "an", "and", "are", "as", "at", "be", "by", "can", "do", "for", "from", "has", "have",
    "how", "i", "if", "in", "into", "is", "it", "its", "me", "my", "of", "on", "or", "than",
    "that", "the", "their", "then", "there", "this", "to", "use", "used", "uses", "using", "was",
    "what", "when", "which", "will", "with", "you", "your",
];

/// An index over a list of tool definitions.
#[derive(Debug, Default)]
pub struct ToolIndex {
    /// term → (document, weighted frequency), documents ascending.
    postings: HashMap<String, Vec<(u32, u32)>>,
    /// Weighted length of each document.
    lengths: Vec<u32>,
    average: f32,
}

impl ToolIndex {
    /// Index `tools` (MCP tool definitions); positions in results are
    /// positions in this iteration.
    pub fn build<'a>(tools: impl IntoIterator<Item = &'a Value>) -> ToolIndex {
        let mut index = ToolIndex::default();
        for (doc, tool) in tools.into_iter().enumerate() {
            let mut bag: HashMap<String, u32> = HashMap::new();
            let mut add = |text: &str, weight: u32| {
                for term in terms(text) {
                    *bag.entry(term).or_default() += weight;
                }
            };
            let field = |k: &str| tool.get(k).and_then(Value::as_str).unwrap_or("");
            add(field("name"), NAME_WEIGHT);
            add(field("title"), TITLE_WEIGHT);
            add(field("description"), 1);
            let properties = tool
                .pointer("/inputSchema/properties")
                .and_then(Value::as_object);
            for (param, schema) in properties.into_iter().flatten() {
                add(param, 1);
                add(
                    schema
                        .get("description")
                        .and_then(Value::as_str)
                        .unwrap_or(""),
                    1,
                );
            }
            index.lengths.push(bag.values().sum());
            for (term, tf) in bag {
                index
                    .postings
                    .entry(term)
                    .or_default()
                    .push((doc as u32, tf));
            }
        }
        let n = index.lengths.len().max(1) as f32;
        index.average = (index.lengths.iter().sum::<u32>() as f32 / n).max(1.0);
        index
    }

    /// How many tools are indexed.
    pub fn len(&self) -> usize {
        self.lengths.len()
    }

    /// Whether no tool is indexed.
    pub fn is_empty(&self) -> bool {
        self.lengths.is_empty()
    }

    /// The `limit` best matches of `query`, best first: `(position, score)`,
    /// only tools sharing a term with the query; ties by position.
    pub fn search(&self, query: &str, limit: usize) -> Vec<(usize, f32)> {
        let n = self.lengths.len() as f32;
        let mut scores: HashMap<u32, f32> = HashMap::new();
        let mut seen: Vec<String> = Vec::new();
        for term in terms(query) {
            if seen.contains(&term) {
                continue;
            }
            let Some(postings) = self.postings.get(&term) else {
                seen.push(term);
                continue;
            };
            let df = postings.len() as f32;
            let idf = ((n - df + 0.5) / (df + 0.5) + 1.0).ln();
            for &(doc, tf) in postings {
                let tf = tf as f32;
                let len = self.lengths[doc as usize] as f32;
                let norm = tf * (K1 + 1.0) / (tf + K1 * (1.0 - B + B * len / self.average));
                *scores.entry(doc).or_default() += idf * norm;
            }
            seen.push(term);
        }
        let mut ranked: Vec<(usize, f32)> = scores
            .into_iter()
            .map(|(doc, score)| (doc as usize, score))
            .collect();
        ranked.sort_by(|a, b| b.1.total_cmp(&a.1).then(a.0.cmp(&b.0)));
        ranked.truncate(limit);
        ranked
    }
}

/// The terms of a text: identifier-split words, lower-cased, without stop
/// words, stemmed.
pub fn terms(text: &str) -> Vec<String> {
    words(text)
        .into_iter()
        .filter(|w| !STOP.contains(&w.as_str()))
        .map(|w| stem(&w))
        .collect()
}

/// A crude suffix cut, the same on both sides of the match: enough for
/// plurals and verb forms (`files`, `directories`, `committed`, `listing`,
/// `stage`/`staged`).
fn stem(word: &str) -> String {
    let cut = |suffix: &str, min: usize| {
        word.strip_suffix(suffix)
            .filter(|stem| stem.chars().count() >= min)
    };
    if let Some(s) = cut("ies", 3) {
        return format!("{s}y");
    }
    let mut out = word;
    if !word.ends_with("ss") {
        for (suffix, min) in [("ing", 3), ("ed", 3), ("es", 4), ("s", 3)] {
            if let Some(s) = cut(suffix, min) {
                out = s;
                break;
            }
        }
    }
    // A final silent `e` goes too, so `stage`, `staged` and `stages` meet.
    match out.strip_suffix('e') {
        Some(s) if s.chars().count() >= 4 => s.to_string(),
        _ => out.to_string(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn tools() -> Vec<Value> {
        vec![
            json!({"name": "read_text_file", "description": "Read the complete contents of a file as text.",
                   "inputSchema": {"properties": {"path": {"type": "string"}}}}),
            json!({"name": "write_file", "description": "Create a new file or overwrite an existing file.",
                   "inputSchema": {"properties": {"path": {}, "content": {}}}}),
            json!({"name": "git_commit", "description": "Records changes to the repository",
                   "inputSchema": {"properties": {"repo_path": {}, "message": {}}}}),
            json!({"name": "getTinyImage", "title": "Tiny image", "description": "Returns a small picture"}),
        ]
    }

    #[test]
    fn terms_split_identifiers_and_stem() {
        assert_eq!(terms("getTinyImage"), ["get", "tiny", "imag"]);
        assert_eq!(terms("list the directories"), ["list", "directory"]);
        assert_eq!(terms("Committed files"), ["committ", "file"]);
        assert_eq!(terms("git_diff_staged"), ["git", "diff", "stag"]);
        assert_eq!(terms("stage stages unstage"), ["stag", "stag", "unstag"]);
        assert_eq!(terms("file image"), ["file", "imag"]);
        assert_eq!(terms("access"), ["access"]);
    }

    #[test]
    fn the_best_match_comes_first_and_strangers_are_left_out() {
        let t = tools();
        let index = ToolIndex::build(&t);
        assert_eq!(index.len(), 4);
        assert_eq!(index.search("commit my changes", 5)[0].0, 2);
        assert_eq!(index.search("read a file", 5)[0].0, 0);
        assert_eq!(index.search("overwrite content", 5)[0].0, 1);
        assert_eq!(index.search("tiny images", 5)[0].0, 3);
        assert!(index.search("weather forecast", 5).is_empty());
        assert_eq!(index.search("file", 1).len(), 1);
        assert!(ToolIndex::build(&[]).search("file", 5).is_empty());
    }
}

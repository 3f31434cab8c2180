//! Names across a gateway's backends: what a client sees, which backend a
//! name goes back to, and which names are withheld because they could be
//! confused.
//!
//! Where it sits: shared rule code. The sidecar's gateway link keeps one
//! table between the merged lists it answers and the requests it routes;
//! the operator builds one from the backends' published tool inventories
//! to show in an MCPGateway's status what the gateway withholds. Pure: no
//! I/O.
//!
//! - Tools, prompts and resource templates are renamed `{prefix}{name}`
//!   (prefix default `{backend}__`, or none).
//! - Resources and resource templates are addressed by URI: the gateway
//!   writes `{backend}+{uri}` (`everything+test://static/resource/1`, a
//!   URI whose scheme is `everything+test`) and routes a URI by the part
//!   before the first `+`. Backend names are lower-case letters, digits and
//!   `-`, so the result is always a valid URI scheme, it needs no table,
//!   and two backends' URIs can never meet whatever their prefixes are.
//! - Every name any backend listed is remembered with the backends that
//!   listed it ([`Names::observe`]). A name two backends serve is a
//!   **collision**; names equal after case-folding and the Unicode TR39
//!   confusable skeleton but spelled differently (`git__Status` beside
//!   `git__status`, a Cyrillic `і`) are **confusable**; a tool whose
//!   definition names another backend's tool and carries an instruction to
//!   the model (the facade's poisoning scan, which also reads
//!   obfuscated text) is **shadowing**. Each is withheld — from lists and
//!   from routing — never resolved by picking one; [`Names::conflicts`]
//!   reports them.
//! - The gateway's operator may resolve a collision or a confusable
//!   spelling by naming the backend that serves the name
//!   ([`Names::resolve`]): that backend's copy routes, every other copy or
//!   look-alike stays withheld, and the conflict is still reported, as
//!   resolved. A shadowing definition is never lifted that way: it is a
//!   definition that steers the model, not an ambiguous name, and choosing
//!   a backend would not make its text safe.
//! - The routing table and the conflicts are computed once whenever what
//!   was seen changes (every skeleton once per name), so routing a request
//!   is one map look-up.

use std::collections::{BTreeMap, BTreeSet, HashMap};

use crate::poison::{self, FindingKind};
use serde_json::Value;

/// Which kind of name.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Catalog {
    /// Tools (`tools/list`).
    Tools,
    /// Prompts (`prompts/list`).
    Prompts,
    /// Resource templates (`resources/templates/list`).
    Templates,
}

impl Catalog {
    /// Every catalog.
    pub const ALL: [Catalog; 3] = [Catalog::Tools, Catalog::Prompts, Catalog::Templates];

    /// Its name in reports and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            Catalog::Tools => "tool",
            Catalog::Prompts => "prompt",
            Catalog::Templates => "resource_template",
        }
    }

    fn index(self) -> usize {
        self as usize
    }
}

/// Why a name is withheld (a bounded metric label).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum ConflictKind {
    /// Two backends serve the same name after prefixing.
    Collision,
    /// Names equal after case-folding and confusable skeletons.
    Confusable,
    /// A definition that names another backend's tool with an instruction.
    Shadowing,
}

impl ConflictKind {
    /// Every kind.
    pub const ALL: [ConflictKind; 3] = [
        ConflictKind::Collision,
        ConflictKind::Confusable,
        ConflictKind::Shadowing,
    ];

    /// Its name in reports and metric labels.
    pub fn as_str(self) -> &'static str {
        match self {
            ConflictKind::Collision => "collision",
            ConflictKind::Confusable => "confusable",
            ConflictKind::Shadowing => "shadowing",
        }
    }
}

/// One conflicting name (or group of names), as reported.
#[derive(Clone, Debug, PartialEq, Eq, PartialOrd, Ord)]
pub struct Conflict {
    /// Why.
    pub kind: ConflictKind,
    /// Which kind of name.
    pub catalog: Catalog,
    /// The names a client would have seen.
    pub names: Vec<String>,
    /// The backends involved.
    pub backends: Vec<String>,
    /// What decided it (the poisoning findings for shadowing).
    pub detail: String,
    /// Set when the gateway's mapping resolved it: the name served and the
    /// backend serving it (everything else in [`Conflict::names`] stays
    /// withheld).
    pub resolved: Option<(String, String)>,
}

/// Why a name does not route.
#[derive(Debug, PartialEq, Eq)]
pub enum Unroutable {
    /// No backend listed it.
    Unknown,
    /// Withheld for this conflict.
    Withheld(ConflictKind),
}

/// The backends that listed one name, with their own name for it.
type Listers = BTreeMap<usize, String>;

/// Where one exposed name goes, or why it goes nowhere.
type Route = Result<(usize, String), ConflictKind>;

/// The gateway's names: backends, their prefixes, every name seen.
pub struct Names {
    /// `(name, prefix)`; the prefix is `""` for none.
    backends: Vec<(String, String)>,
    /// Exposed name → the backends that listed it, with their own name.
    seen: BTreeMap<(Catalog, String), Listers>,
    /// Tools found shadowing another backend's, with the findings.
    shadowing: BTreeMap<String, (usize, String)>,
    /// The gateway's mapping: exposed name → the backend that serves it.
    resolved: BTreeMap<String, usize>,
    /// Derived from the above by [`Names::rebuild`]: per catalog, exposed
    /// name → its route.
    routes: [HashMap<String, Route>; 3],
    /// Derived: every conflict, in a stable order.
    conflicts: Vec<Conflict>,
}

/// Whether `name` may name a backend: it goes into URIs and metric labels.
pub fn valid_backend_name(name: &str) -> bool {
    name.len() <= 63
        && name.starts_with(|c: char| c.is_ascii_lowercase())
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// The default prefix of a backend's names.
pub fn default_prefix(backend: &str) -> String {
    format!("{backend}__")
}

/// Case-folded and reduced to the TR39 confusable skeleton: two names with
/// the same key read the same to a person or a model.
fn confusion_key(name: &str) -> String {
    #[cfg(test)]
    tests::count_key();
    let folded = name.to_lowercase();
    let skeleton: String = unicode_security::skeleton(&folded).collect();
    skeleton.to_lowercase()
}

impl Names {
    /// Backends as `(name, prefix)`, the prefix `""` for none.
    pub fn new(backends: Vec<(String, String)>) -> Names {
        Names {
            backends,
            seen: BTreeMap::new(),
            shadowing: BTreeMap::new(),
            resolved: BTreeMap::new(),
            routes: Default::default(),
            conflicts: Vec::new(),
        }
    }

    /// Serve the exposed name `name` from `backend` when backends collide
    /// on it or spell it confusably (the gateway's explicit mapping).
    pub fn resolve(&mut self, name: &str, backend: &str) -> Result<(), String> {
        let b = self
            .backends
            .iter()
            .position(|(n, _)| n == backend)
            .ok_or_else(|| format!("{name:?} is mapped to {backend:?}, which is no backend"))?;
        if self.resolved.get(name).is_some_and(|other| *other != b) {
            return Err(format!("{name:?} is mapped to two backends"));
        }
        self.resolved.insert(name.to_string(), b);
        self.rebuild();
        Ok(())
    }

    /// Backend `b`'s name.
    pub fn backend_name(&self, b: usize) -> &str {
        &self.backends[b].0
    }

    /// The name a client sees for backend `b`'s `name`.
    pub fn exposed(&self, b: usize, name: &str) -> String {
        format!("{}{name}", self.backends[b].1)
    }

    /// The URI a client sees for backend `b`'s `uri`.
    pub fn exposed_uri(&self, b: usize, uri: &str) -> String {
        format!("{}+{uri}", self.backends[b].0)
    }

    /// The backend and its own URI for a URI a client sent.
    pub fn route_uri(&self, uri: &str) -> Option<(usize, String)> {
        let (backend, rest) = uri.split_once('+')?;
        let b = self.backends.iter().position(|(n, _)| n == backend)?;
        Some((b, rest.to_string()))
    }

    /// Remember the names backend `b` listed.
    pub fn observe(&mut self, catalog: Catalog, b: usize, names: &[&str]) {
        let mut changed = false;
        for name in names {
            let exposed = self.exposed(b, name);
            changed |= self
                .seen
                .entry((catalog, exposed))
                .or_default()
                .insert(b, name.to_string())
                .is_none();
        }
        if changed {
            self.rebuild();
        }
    }

    /// Scan backend `b`'s tool definitions for references to another
    /// backend's tools with an instruction, and remember the verdicts (a
    /// definition that changed is judged again).
    pub fn scan_shadowing(&mut self, b: usize, tools: &[Value]) {
        let others: BTreeSet<String> = self
            .seen
            .iter()
            .filter(|((c, _), by)| *c == Catalog::Tools && by.keys().any(|o| *o != b))
            .flat_map(|((_, exposed), by)| {
                let mut names = vec![exposed.clone()];
                names.extend(by.iter().filter(|(o, _)| **o != b).map(|(_, n)| n.clone()));
                names
            })
            .collect();
        let others: Vec<&str> = others.iter().map(String::as_str).collect();
        let before = self.shadowing.clone();
        for tool in tools {
            let Some(name) = tool.get("name").and_then(Value::as_str) else {
                continue;
            };
            let exposed = self.exposed(b, name);
            let own: Vec<&str> = others
                .iter()
                .copied()
                .filter(|o| *o != name && *o != exposed)
                .collect();
            let findings = poison::scan(tool, &own);
            let names_other = findings
                .iter()
                .any(|f| f.kind == FindingKind::ToolReference);
            let instructs = findings.iter().any(|f| {
                matches!(
                    f.kind,
                    FindingKind::ModelInstruction | FindingKind::Exfiltration
                )
            });
            if names_other && instructs {
                let detail: BTreeSet<String> = findings.iter().map(|f| f.reason()).collect();
                let detail = detail.into_iter().collect::<Vec<_>>().join(",");
                self.shadowing.insert(exposed, (b, detail));
            } else if self.shadowing.get(&exposed).is_some_and(|(o, _)| *o == b) {
                self.shadowing.remove(&exposed);
            }
        }
        if self.shadowing != before {
            self.rebuild();
        }
    }

    /// Where an exposed name goes: its backend and the backend's own name.
    pub fn route(&self, catalog: Catalog, exposed: &str) -> Result<(usize, String), Unroutable> {
        match self.routes[catalog.index()].get(exposed) {
            None => Err(Unroutable::Unknown),
            Some(Ok(route)) => Ok(route.clone()),
            Some(Err(kind)) => Err(Unroutable::Withheld(*kind)),
        }
    }

    /// Every conflicting name, grouped, in a stable order (resolved ones
    /// too, marked).
    pub fn conflicts(&self) -> Vec<Conflict> {
        self.conflicts.clone()
    }

    /// How many names each backend has that route (for the admin view).
    pub fn routable_counts(&self, catalog: Catalog) -> Vec<usize> {
        let mut counts = vec![0; self.backends.len()];
        for (b, _) in self.routes[catalog.index()].values().flatten() {
            counts[*b] += 1;
        }
        counts
    }

    /// The backend the mapping names for `exposed`, when it is one of
    /// `by` (a mapping to a backend that does not list the name is inert).
    fn mapped(&self, exposed: &str, by: &Listers) -> Option<usize> {
        self.resolved
            .get(exposed)
            .copied()
            .filter(|b| by.contains_key(b))
    }

    /// Recompute the routing table and the conflicts from what was seen.
    fn rebuild(&mut self) {
        // Each name's skeleton once; names grouped by it.
        let mut groups: HashMap<(Catalog, String), Vec<&String>> = HashMap::new();
        let mut key_of: HashMap<(Catalog, &String), (Catalog, String)> = HashMap::new();
        for (catalog, exposed) in self.seen.keys() {
            let key = (*catalog, confusion_key(exposed));
            groups.entry(key.clone()).or_default().push(exposed);
            key_of.insert((*catalog, exposed), key);
        }
        let mut routes: [HashMap<String, Route>; 3] = Default::default();
        let mut out = BTreeSet::new();
        for ((catalog, exposed), by) in &self.seen {
            let mapped = self.mapped(exposed, by);
            let group = &groups[&key_of[&(*catalog, exposed)]];
            let route = if by.len() > 1 && mapped.is_none() {
                Err(ConflictKind::Collision)
            } else if *catalog == Catalog::Tools && self.shadowing.contains_key(exposed) {
                Err(ConflictKind::Shadowing)
            } else {
                let confused = group.iter().any(|other| {
                    *other != exposed
                        && self.seen[&(*catalog, (*other).clone())]
                            .keys()
                            .any(|o| !by.contains_key(o))
                });
                // A look-alike is served only where the mapping picks
                // exactly one spelling of the group.
                let lifted = mapped.is_some() && self.mapped_in(*catalog, group).len() == 1;
                if confused && !lifted {
                    Err(ConflictKind::Confusable)
                } else {
                    let b = mapped.unwrap_or_else(|| *by.keys().next().expect("listed"));
                    Ok((b, by[&b].clone()))
                }
            };
            routes[catalog.index()].insert(exposed.clone(), route);
            if by.len() > 1 {
                out.insert(Conflict {
                    kind: ConflictKind::Collision,
                    catalog: *catalog,
                    names: vec![exposed.clone()],
                    backends: by.keys().map(|b| self.backends[*b].0.clone()).collect(),
                    detail: String::new(),
                    resolved: mapped.map(|b| (exposed.clone(), self.backends[b].0.clone())),
                });
            }
        }
        for ((catalog, _), group) in &groups {
            let backends: BTreeSet<usize> = group
                .iter()
                .flat_map(|n| self.seen[&(*catalog, (*n).clone())].keys())
                .copied()
                .collect();
            if group.len() > 1 && backends.len() > 1 {
                let picked = self.mapped_in(*catalog, group);
                let resolved = match picked.as_slice() {
                    [(name, b)] => Some(((*name).clone(), self.backends[*b].0.clone())),
                    _ => None,
                };
                let mut names: Vec<String> = group.iter().map(|n| (*n).clone()).collect();
                names.sort();
                out.insert(Conflict {
                    kind: ConflictKind::Confusable,
                    catalog: *catalog,
                    names,
                    backends: backends
                        .iter()
                        .map(|b| self.backends[*b].0.clone())
                        .collect(),
                    detail: String::new(),
                    resolved,
                });
            }
        }
        for (exposed, (b, detail)) in &self.shadowing {
            out.insert(Conflict {
                kind: ConflictKind::Shadowing,
                catalog: Catalog::Tools,
                names: vec![exposed.clone()],
                backends: vec![self.backends[*b].0.clone()],
                detail: detail.clone(),
                resolved: None,
            });
        }
        self.routes = routes;
        self.conflicts = out.into_iter().collect();
    }

    /// The names of a confusable group the mapping picks, with the backend.
    fn mapped_in<'a>(&self, catalog: Catalog, group: &[&'a String]) -> Vec<(&'a String, usize)> {
        group
            .iter()
            .filter_map(|n| {
                let by = &self.seen[&(catalog, (*n).clone())];
                self.mapped(n, by).map(|b| (*n, b))
            })
            .collect()
    }
}

#[cfg(test)]
#[path = "gateway_names_tests.rs"]
mod tests;

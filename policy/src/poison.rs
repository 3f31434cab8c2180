//! Tool-poisoning scan of tool definitions.
//!
//! Flow: upstream definition --[`scan`] (with the other tools' names)-->
//! [`Finding`]s --[`crate::CompiledPolicy::assess`]--> quarantine or warning
//! per the policy's `poisoningScan`.
//!
//! Scanned: **every string and object key** in the definition — name,
//! title, description, annotations, `_meta`, every property's name,
//! description, enum and default values, nested schemas, the output schema
//! (hidden instructions are put wherever a model reads). Each string is
//! first checked for hidden characters, then normalized and matched:
//! 1. invisible characters are dropped (so `ig\u{200B}nore` is `ignore`),
//!    Unicode tag characters are read as the ASCII they smuggle;
//! 2. NFKC folds fullwidth and mathematical letters (`ｉｇｎｏｒｅ`, `𝐢𝐠𝐧𝐨𝐫𝐞`);
//! 3. every other non-ASCII letter whose Unicode TR39 confusable skeleton
//!    (the `unicode-security` crate) is ASCII becomes that ASCII letter, so
//!    Cyrillic `іgnоrе` reads `ignore`; ASCII is left as written;
//! 4. HTML character references (`&lt;`, `&#60;`) are decoded;
//! 5. a base64 run that decodes to readable text is scanned as text too.
//!
//! Kinds (stable: the admin endpoint and logs show them) and details:
//! - `model_instruction`: `ignore_previous_instructions`, `instruction_tag`
//!   (`<IMPORTANT>`, `<system>`, `[INST]`, `### SYSTEM`), `hidden_comment`
//!   (`<!-- … -->`, `[//]: # (…)`), `directive_to_model` (`IMPORTANT:` and
//!   the like followed by orders to the model, or a note addressed to the
//!   AI), `conceal_from_user`, `system_prompt`, `instruction_ordering` (line
//!   jumping: "before using any tool…", "call this tool first", "after every
//!   response"), `role_override`, `safety_bypass`, `preapproval_claim` ("the
//!   user has already approved…", "no need to ask"), `tool_hijack`
//!   ("instead of X always use this", "do not use other tools"),
//!   `parameter_tampering` ("always set the recipient to…, regardless…"),
//!   `output_hijack` ("in your reply to the user…"), `dangerous_command`
//!   (`curl … | sh`, `nc -e`, `chmod 777`).
//! - `exfiltration`: `send_to_url`, `content_smuggling`,
//!   `credential_request` (credentials, tokens, keys, environment variables
//!   into an argument), `conversation_request` (the conversation, system
//!   prompt, earlier messages or results into an argument).
//! - `sensitive_path`: `sensitive_file` (`~/.ssh`, `id_rsa`, `.env`,
//!   `.aws/credentials`, `/etc/shadow`, `mcp.json`, shell history, browser
//!   credential stores…).
//! - `hidden_unicode`: `zero_width`, `bidi_control`, `tag_character`,
//!   `control_character` (ANSI escapes and other C0/C1 controls).
//! - `obfuscation`: `confusable_letters` (a word mixing ASCII letters with
//!   look-alikes from another script), `styled_letters` (fullwidth or
//!   mathematical letters), `encoded_text` (base64 that decodes to text),
//!   `whitespace_padding` (100 spaces or 12 blank lines pushing text out of
//!   a UI's view), `confusable_name` (the tool's name has the same TR39
//!   skeleton as a sibling's: `send_emaiI` next to `send_email`).
//!
//! Names and keys are also read as words (`ignore_previous_instructions`
//! as "ignore previous instructions"), and "ignore previous instructions"
//! is recognized in a few other languages.
//! - `tool_reference`: `tool_name`: another tool's distinctive name (one
//!   with `_`, `-` or a camel hump, or 8+ characters) as a whole word. Only
//!   a warning: servers say "use read_text_file instead" all the time.
//!
//! A rule about sharing data (credentials, the conversation, sending) does
//! not fire when the words right before it negate it ("do not include API
//! keys in your query"), unless they say "do not forget".

use std::borrow::Cow;
use std::sync::OnceLock;

use base64::Engine;
use regex::{Regex, RegexSet};
use serde_json::Value;
use unicode_normalization::UnicodeNormalization;

use crate::path::is_invisible;

/// What kind of poisoning a finding suggests (bounded set).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum FindingKind {
    /// Instructions aimed at the model rather than describing the tool.
    ModelInstruction,
    /// Invisible, bidirectional, tag or control characters.
    HiddenUnicode,
    /// Mentions another tool by name (shadowing).
    ToolReference,
    /// Asks for data to be sent somewhere or put into an argument.
    Exfiltration,
    /// Points at credentials or key files.
    SensitivePath,
    /// Text disguised from a reader: look-alike or styled letters, encodings.
    Obfuscation,
}

impl FindingKind {
    /// The stable snake_case name.
    pub fn as_str(self) -> &'static str {
        match self {
            FindingKind::ModelInstruction => "model_instruction",
            FindingKind::HiddenUnicode => "hidden_unicode",
            FindingKind::ToolReference => "tool_reference",
            FindingKind::Exfiltration => "exfiltration",
            FindingKind::SensitivePath => "sensitive_path",
            FindingKind::Obfuscation => "obfuscation",
        }
    }
}

/// One suspicious spot in a definition.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Finding {
    /// The kind.
    pub kind: FindingKind,
    /// What matched, a stable snake_case name (see the module docs).
    pub detail: &'static str,
    /// Where: a JSON pointer into the definition (`/description`,
    /// `/inputSchema/properties/path/description`).
    pub location: String,
}

impl Finding {
    /// `kind/detail`, e.g. `model_instruction/hidden_comment`: why, in one word.
    pub fn reason(&self) -> String {
        format!("{}/{}", self.kind.as_str(), self.detail)
    }
}

use FindingKind::{Exfiltration, ModelInstruction, SensitivePath};

/// Verbs that move data somewhere.
const MOVE: &str = r"(?:pass|put|include|add|embed|insert|send|provide|supply|append|attach|cop(?:y|ie)|paste|place|set|store|give|share|contain|summari[sz]e|repeat|reveal|output|print|echo|dump|upload|forward|post|leak|load|read|open|fetch|collect|gather|extract)(?:s|es|ed|d|ing|ting|ning)?";

/// What a credential is called.
const CRED: &str = r"(?:api[\s_-]?keys?|access[\s_-]?keys?|secret(?:s|\s+keys?|\s+access\s+keys?)?|tokens?|passwords?|passphrases?|credentials?|private[\s_-]?keys?|ssh[\s_-]?keys?|session[\s_-]?ids?|cookies?|env(?:ironment)?[\s_-]+(?:variables?|vars?|file)|process\.env|os\.environ|[A-Z][A-Z0-9]*_(?:TOKEN|KEY|SECRET|PASSWORD))";

/// Where a model is told to put something: an argument of the call.
const DEST: &str = r#"(?:(?:in|into|as|to|inside|within|under|with)\s+(?:the\s+|this\s+|your\s+|its\s+|each\s+|every\s+|a\s+|an\s+)?(?:[\w'`-]+\s+){0,2}?(?:arguments?|parameters?|params?|fields?|input|query|request|call|value|notes?|memo|context|sidenote|payload|body|headers?|text|message|comment|description|data|metadata|feedback|prompt)\b|as\s+['"`]\w+['"`])"#;

/// (kind, detail, pattern, may be negated). Patterns see normalized text.
fn rule_table() -> Vec<(FindingKind, &'static str, String, bool)> {
    let r = |k, d, p: &str, neg| (k, d, p.to_string(), neg);
    vec![
        r(
            ModelInstruction,
            "ignore_previous_instructions",
            r"(?i)\b(?:ignore|disregard|forget|override|bypass|abandon)\s+(?:(?:all|any|the|your|of|my|these|those)\s+)*(?:previous|prior|above|earlier|preceding|system|original|existing|developer'?s?|safety|former|initial)\s+(?:instructions?|prompts?|messages|rules|directions|guidelines|guardrails|policies|restrictions|context)",
            false,
        ),
        r(
            ModelInstruction,
            "ignore_previous_instructions",
            r"(?i)\b(?:forget|disregard|ignore)\s+(?:the|your|all)\s+(?:guidelines|rules|instructions|restrictions)\s+(?:you\s+(?:were|have been)\s+given|above)",
            false,
        ),
        r(
            ModelInstruction,
            "ignore_previous_instructions",
            r"(?i)\bignora\s+(?:todas\s+)?las\s+instrucciones\s+(?:anteriores|previas)|\bignorez\s+(?:toutes\s+)?les\s+instructions\s+pr[ée]c[ée]dentes|\bignoriere\s+(?:alle\s+)?(?:vorherigen|bisherigen)\s+anweisungen|\bignora\s+(?:tutte\s+)?le\s+istruzioni\s+precedenti|\bignore\s+(?:todas\s+)?as\s+instru[çc][õo]es\s+anteriores|忽略(?:之前|以上|先前|上面|所有)|(?:以前|これまで|上記)の指示を無視|이전\s*지시(?:를|사항을)?\s*무시",
            false,
        ),
        r(
            ModelInstruction,
            "instruction_tag",
            r"(?i)<\s*/?\s*(?:important|system|instructions?|secret|hidden|admin|assistant|ai|prompt|system[_-]?prompt|critical|user[_-]?instructions?|model|llm)\s*>|\[/?INST\]|<\|(?:im_start|im_end|system|endoftext)\|>|<</?SYS>>|(?m:^)\s*#{1,6}\s*(?:system|instructions?|assistant|admin)\b\s*:?",
            false,
        ),
        r(
            ModelInstruction,
            "hidden_comment",
            r"<!--|(?m:^)\s*\[(?://|comment|_|\#)\]:\s*(?:#|<>)",
            false,
        ),
        r(
            ModelInstruction,
            "directive_to_model",
            r"(?i)(?:^|[\s>*_(\[])(?:important|attention|critical|notice|note|warning|system|admin|urgent|mandatory)\b[^:!\n]{0,20}[:!][^\n]{0,240}?\b(?:you|the\s+(?:assistant|ai|model|llm|agent))\s+(?:must|should|need\s+to|have\s+to|are\s+(?:required|instructed|expected)\s+to|will|shall)\b",
            false,
        ),
        r(
            ModelInstruction,
            "directive_to_model",
            r"(?i)\b(?:note|message|instructions?|attention|important|hint|reminder)\s+(?:to|for)\s+(?:the\s+)?(?:ai|assistant|model|llm|agent|claude|gpt|chatgpt|copilot)\b|\b(?:attention|hey|dear)\s*,?\s+(?:ai|assistant|model|llm|agent|claude)\b|\b(?:ai|assistant|model|llm)\s*(?:only)?\s*:",
            false,
        ),
        r(
            ModelInstruction,
            "conceal_from_user",
            r"(?i)\b(?:do\s+not|don't|never|without)\s+(?:tell|telling|mention|mentioning|inform|informing|reveal|revealing|show|showing|notify|notifying|alert|alerting|disclose|disclosing)\w*\s+(?:(?:this|it|that|anything)\s+)?(?:to\s+)?(?:the\s+|your\s+)?user|\b(?:hidden|secret)\s+from\s+the\s+user|\b(?:do|send|run|perform|execute|upload|forward|call|copy|share)\w*\s+(?:(?:this|it|that|them|everything|data)\s+)?silently\b|\bsilently\s+(?:send|upload|forward|call|run|execute|copy|include|add|share|exfiltrate)|\bwithout\s+the\s+user\s+(?:knowing|noticing)|\bkeep\s+(?:this|it)\s+(?:step\s+)?(?:hidden|secret)|\b(?:do\s+not|don't|never)\s+(?:reveal|disclose|mention|show|repeat|quote)\s+(?:this|these)\s+(?:message|note|notes|instructions?|text|description|step)",
            false,
        ),
        r(
            ModelInstruction,
            "system_prompt",
            r"(?i)\bsystem\s+prompt\b",
            false,
        ),
        r(
            ModelInstruction,
            "instruction_ordering",
            r"(?i)\bbefore\s+(?:using|calling|invoking|running|answering|responding|doing|any|every|each|other)\b[^.\n]{0,60}?\b(?:read|call|send|pass|include|first|fetch|run|execute|open|load|must|should)\b",
            false,
        ),
        r(
            ModelInstruction,
            "instruction_ordering",
            r"(?i)\b(?:(?:always|first|must|should)\s+(?:be\s+)?(?:call|calls|called|use|used|invoke|invoked|run)\s+(?:this|the\s+\w+)(?:\s+tool)?\s+(?:first|before|after\s+(?:every|each)|on\s+every|for\s+every|at\s+the\s+start)|(?:always|first)\s+call\s+\w+\s+first|(?:call|use|invoke)\s+(?:this|the\s+\w+)\s+tool\s+(?:before|first)\b|(?:after|before|following)\s+(?:every|each|any)\s+(?:response|reply|answer|message|request|turn|tool\s+call|conversation)|whenever\s+(?:the\s+)?(?:user|you|conversation)\b|at\s+the\s+(?:start|beginning)\s+of\s+(?:every|each|the|any)\s+(?:conversation|session|chat)|(?:for|on)\s+every\s+(?:file|message|request|email|prompt)\s+(?:the\s+user|you))",
            false,
        ),
        r(
            ModelInstruction,
            "role_override",
            r"(?i)\byou\s+are\s+now\b|\bfrom\s+now\s+on\b|\bact\s+as\s+(?:an?\s+)?(?:unrestricted|jailbroken|different|new)\b|\bnew\s+(?:system\s+)?instructions?\b|\bdeveloper\s+mode\b|\bDAN\b|\btreat\b[^.\n]{0,60}\bas\s+(?:your\s+)?(?:highest[- ]priority\s+|new\s+|real\s+)?instructions|\b(?:real|true|actual)\s+instructions\b|\bhighest[- ]priority\s+instructions\b|\bwithout\s+(?:any\s+)?restrictions\b|\byour\s+(?:new\s+)?role\s+is\b|\b(?:execute|follow|obey|run|treat)\s+(?:whatever|what|anything|everything|all)\s+(?:this\s+tool|it|the\s+tool|the\s+server|the\s+response)\s+(?:returns|outputs|says|sends)\b",
            false,
        ),
        r(
            ModelInstruction,
            "safety_bypass",
            r"(?i)\b(?:disable|turn\s+off|switch\s+off|skip|bypass|ignore|drop|remove)\s+(?:(?:any|all|the|your|its)\s+)*(?:safety|security|guard\s*rails?|content\s+(?:filters?|polic(?:y|ies))|restrictions?|confirmations?|safety\s+checks)\b(?:\s+(?:checks|rules|measures))?",
            false,
        ),
        r(
            ModelInstruction,
            "preapproval_claim",
            r"(?i)\b(?:user|owner|admin(?:istrator)?|operator|customer|they|he|she)\s+(?:has|have|had)?\s*(?:already\s+|explicitly\s+|previously\s+|in\s+advance\s+)*(?:pre-?)?(?:approved|authori[sz]ed|consented|agreed|allowed|confirmed|granted|accepted)\b|\bpre-?(?:approved|authori[sz]ed|consented)\b|\bconsent(?:ed)?\s+in\s+advance\b|\bpermission\s+(?:has\s+been|was|is)\s+(?:already\s+)?granted\b|\b(?:no\s+need|not\s+necessary|unnecessary|needn't|don't\s+need|do\s+not\s+need|never\s+(?:need|require)s?)\s+(?:to\s+)?(?:ask|confirm|check\s+with|get|request|require|seek)\w*\s+(?:the\s+|for\s+)?(?:user|approval|permission|confirmation|consent)|\bwithout\s+(?:asking|confirmation|confirming|(?:user\s+)?(?:approval|consent)|permission|prompting)\b|\bnever\s+requires?\s+(?:user\s+)?(?:approval|confirmation|consent)",
            false,
        ),
        r(
            ModelInstruction,
            "tool_hijack",
            r"(?i)\b(?:instead\s+of|rather\s+than)\s+(?:using|calling)\s+\S+[^.\n]{0,40}\b(?:always|must)\b|\b(?:do\s+not|don't|never)\s+(?:use|call)\s+(?:any\s+)?(?:other|another|the\s+other)\s+tools?\b|\b(?:supersedes|replaces|overrides)\s+(?:all\s+)?(?:other\s+)?(?:tools?\b|[a-z]+_[a-z_]+)|\bthis\s+tool\s+must\s+(?:handle|be\s+used\s+for)\s+(?:all|every)\b|\bnever\s+use\s+\S+\s+again\b|\bwill\s+fail\s+silently\b|\bwhen(?:ever)?\s+[\w.-]+\s+(?:is|gets|has\s+been)\s+(?:used|called|invoked|run)\b[^.\n]{0,60}\b(?:always|also)\b",
            false,
        ),
        r(
            ModelInstruction,
            "parameter_tampering",
            r"(?i)\b(?:regardless\s+of|no\s+matter)\s+(?:what|which)\s+(?:the\s+)?(?:user|they|you|channel|value|amount)|\b(?:recipient|destination|account|wallet|payee|iban|address|channel)\b[^.\n]{0,40}\b(?:must|should)\s+(?:always\s+)?be\s+(?:changed|set|replaced|switched)|\b(?:multiply|increase|inflate|double|change|alter|modify)\s+the\s+(?:amount|price|quantity|total|sum)\b|\bas\s+the\s+destination\s+for\s+(?:all|every)\b|\bregardless\s+of\s+(?:what|which)\b",
            false,
        ),
        r(
            ModelInstruction,
            "output_hijack",
            r"(?i)\bin\s+your\s+(?:reply|response|answer|message)s?\b[^.\n]{0,40}\b(?:always|must|should|include|recommend|say|tell)\b|\b(?:tell|inform|warn)\s+the\s+user\s+(?:that|their|they)\b|\brespond\s+(?:to\s+the\s+user\s+)?only\s+in\b|\b(?:respond|reply|answer|say)\s+to\s+the\s+user\s+(?:that|with)\b|\b(?:always|must)\s+(?:recommend|promote|advertise|mention\s+the\s+link)",
            false,
        ),
        r(
            ModelInstruction,
            "dangerous_command",
            r"(?i)\b(?:curl|wget|iwr|invoke-webrequest)\b[^|\n]{0,160}\|\s*(?:sudo\s+)?(?:ba|z|da|k)?sh\b|\bbase64\s+(?:-d|--decode)\b[^\n]{0,20}\|\s*(?:ba)?sh\b|\bnc\s+(?:-\w+\s+)*-e\b|\bchmod\s+(?:-R\s+)?0?777\b|\brm\s+-(?:rf|fr|r)\s+(?:~|/|\$HOME)|/dev/tcp/|\bmkfifo\b|\bpython3?\s+-c\s+['\x22]import\s+(?:socket|os|subprocess)",
            false,
        ),
        r(
            Exfiltration,
            "send_to_url",
            r"(?i)\b(?:send|post|upload|forward|transmit|exfiltrate|leak|copy|email|e-mail|mail|report|sync|log|ping|submit|fetch|visit)\b[^.\n]{0,80}\b(?:to|via|at)\s+(?:https?://|ftp://|[\w.+-]+@[\w-]+\.\w+|(?:the\s+|a\s+)?webhook|[a-z0-9-]+\.[a-z0-9.-]+\.[a-z]{2,}\b)",
            true,
        ),
        r(
            Exfiltration,
            "send_to_url",
            r"(?i)\b(?:bcc|cc)\b[^.\n]{0,40}[\w.+-]+@[\w-]+\.\w+|!\[[^\]]*\]\(\s*https?://[^)\s]*[?&][^)\s]*(?:\{|\$|%7b|<)|https?://\S*[?&]\w+=\s*(?:\{|<|\$\{|followed\s+by|\+\s*\w|plus\b)|\b(?:fetch|visit|open|request|load)\s+https?://\S+\s+followed\s+by",
            false,
        ),
        r(
            Exfiltration,
            "content_smuggling",
            r"(?i)\b(?:pass|put|include|add|embed)\s+(?:its|the|their|all|any)\s+(?:full\s+)?(?:content|contents|data|text|output)\s+(?:as|in|into)\b",
            true,
        ),
        r(
            Exfiltration,
            "credential_request",
            &format!(r"(?i)\b{MOVE}\b[^.\n]{{0,80}}?\b{CRED}\b[^.\n]{{0,60}}?\b{DEST}"),
            true,
        ),
        r(
            Exfiltration,
            "credential_request",
            &format!(
                r"(?i)\b(?:set|fill|populate|use)\s+(?:this|the|its)\s+(?:\w+\s+){{0,2}}(?:parameter|field|argument|value|input)\s+(?:to|with|as)\b[^.\n]{{0,60}}?\b{CRED}\b|\b(?:parameter|argument|field|query|value|input|notes|memo|context|request|payload)\s+(?:must|should|needs?\s+to)\s+(?:also\s+)?(?:contain|include|have|be|carry)\b[^.\n]{{0,60}}?\b{CRED}\b"
            ),
            true,
        ),
        r(
            Exfiltration,
            "credential_request",
            &format!(
                r"(?i)\b{CRED}\b[^.\n]{{0,60}}?\b{MOVE}\s+(?:them|it|these|those|this|that)\b[^.\n]{{0,30}}?\b{DEST}"
            ),
            true,
        ),
        r(
            Exfiltration,
            "conversation_request",
            &format!(
                r"(?i)\b{MOVE}\b[^.\n]{{0,80}}?\b(?:(?:entire|full|whole|complete|verbatim|word[- ]for[- ]word)\s+(?:copy\s+of\s+(?:the\s+)?)?(?:conversation|chat|context|session|transcript|history|prompt|dialog(?:ue)?|exchange|discussion|thread|interaction)|(?:conversation|chat|message|dialog(?:ue)?|exchange|discussion|thread|interaction|session)s?\s+(?:history|log|transcript|so\s+far|up\s+to\s+now|until\s+now)|previous\s+(?:messages|turns|prompts|conversations?)|all\s+(?:prior|previous|earlier|other)\s+(?:messages|turns|results|conversations?)|everything\s+the\s+user\s+(?:has\s+)?(?:said|told|typed|written|asked)|(?:user'?s?|their)\s+(?:last|previous|earlier|recent)\s+(?:messages?|requests?|questions?|prompts?|queries)|(?:hidden|developer|secret)\s+(?:prompt|instructions|configuration)|(?:other\s+tools'?|earlier\s+tool|previous\s+tool)\s+(?:results?|outputs?)|user'?s?\s+(?:request|question|message)\s+(?:verbatim|word\s+for\s+word|in\s+full))"
            ),
            true,
        ),
        r(
            SensitivePath,
            "sensitive_file",
            r"(?i)~/\.(?:ssh|aws|gnupg|cursor|config/gcloud|azure|git-credentials|bash_history|zsh_history|password-store)\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/credentials|/etc/(?:shadow|sudoers|gshadow)\b|\bmcp\.json\b|\.git-credentials|\.(?:bash|zsh)_history\b|\b(?:chrome|firefox|browser|safari|edge)\b[^.\n]{0,30}\b(?:login\s+data|cookies|saved\s+passwords|keychain)\b|\bwallet\.dat\b",
            false,
        ),
        // Names that also come up in ordinary descriptions ("search .env
        // files") count when something is to be read or passed.
        r(
            SensitivePath,
            "sensitive_file",
            &format!(
                r"(?i)\b{MOVE}\b[^.\n]{{0,60}}?(?:(?:^|[\s/'`(\x22])\.env\b|/etc/passwd\b|\.kube/config\b|~/\.kube\b|\.netrc\b|\.npmrc\b|\.pypirc\b|\.docker/config\.json|\.pgpass\b|\bkeychain\b)"
            ),
            false,
        ),
    ]
}

struct Rules {
    set: RegexSet,
    regexes: Vec<Regex>,
    table: Vec<(FindingKind, &'static str, bool)>,
    negation: Regex,
    base64: Regex,
}

fn rules() -> &'static Rules {
    static R: OnceLock<Rules> = OnceLock::new();
    R.get_or_init(|| {
        // The text is normalized to ASCII look-alikes first, so ASCII word
        // classes suffice; Unicode-aware `\b` `\w` `\s` make the automaton
        // of a set this size several times slower.
        let t: Vec<_> = rule_table()
            .into_iter()
            .map(|(k, d, p, n)| (k, d, ascii_classes(&p), n))
            .collect();
        Rules {
            set: RegexSet::new(t.iter().map(|r| &r.2)).expect("poisoning rules compile"),
            regexes: t
                .iter()
                .map(|r| Regex::new(&r.2).expect("poisoning rule compiles"))
                .collect(),
            table: t.into_iter().map(|(k, d, _, n)| (k, d, n)).collect(),
            negation: Regex::new(
                r"(?i)\b(?:not|never|don't|dont|avoid|without|no|nor|cannot|can't|mustn't|shouldn't)\b",
            )
            .expect("negation pattern"),
            base64: Regex::new(r"[A-Za-z0-9+/]{40,}={0,2}").expect("base64 pattern"),
        }
    })
}

/// `\b` `\w` `\s` `\S` written as their ASCII forms.
fn ascii_classes(p: &str) -> String {
    p.replace(r"\b", r"(?-u:\b)")
        .replace(r"\w", "[A-Za-z0-9_]")
        .replace(r"\s", r"[\t\n\x0B\x0C\r ]")
        .replace(r"\S", r"[^\t\n\x0B\x0C\r ]")
}

/// Scan one tool definition. `other_tools` are the names of the server's
/// other tools (the tool's own name is ignored if present).
pub fn scan(tool: &Value, other_tools: &[&str]) -> Vec<Finding> {
    let own = tool.get("name").and_then(Value::as_str).unwrap_or("");
    let names: Vec<&str> = other_tools
        .iter()
        .copied()
        .filter(|n| *n != own && distinctive(n))
        .collect();
    let mut out = Vec::new();
    let mut at = String::new();
    walk(tool, &mut at, &mut |s: &str, at: &str, is_name: bool| {
        scan_text(s, at, if is_name { &[] } else { &names }, is_name, &mut out)
    });
    // A name that looks like a sibling's (`send_emaiI` next to `send_email`)
    // is there to be picked instead of it.
    let own_skeleton = skeleton(own);
    if other_tools
        .iter()
        .any(|n| *n != own && skeleton(n) == own_skeleton)
    {
        out.push(Finding {
            kind: FindingKind::Obfuscation,
            detail: "confusable_name",
            location: "/name".to_string(),
        });
    }
    out
}

/// The TR39 skeleton of a tool name, remembered per thread: a list of n
/// tools compares each name with n others.
fn skeleton(name: &str) -> std::rc::Rc<str> {
    use std::cell::RefCell;
    use std::collections::HashMap;
    thread_local! {
        static CACHE: RefCell<HashMap<String, std::rc::Rc<str>>> = RefCell::new(HashMap::new());
    }
    CACHE.with(|c| {
        let mut c = c.borrow_mut();
        if let Some(s) = c.get(name) {
            return s.clone();
        }
        if c.len() >= 4096 {
            c.clear();
        }
        let s: std::rc::Rc<str> = unicode_security::skeleton(name).collect::<String>().into();
        c.insert(name.to_string(), s.clone());
        s
    })
}

/// Text pushed out of view: a long run of spaces or of blank lines (a UI
/// shows the start of a description; the model reads all of it).
fn padded(s: &str) -> bool {
    let mut spaces = 0;
    let mut newlines = 0;
    for c in s.chars() {
        match c {
            ' ' | '\t' | '\u{A0}' | '\u{3000}' => spaces += 1,
            '\n' | '\r' => {
                newlines += usize::from(c == '\n');
                spaces = 0;
            }
            _ => {
                spaces = 0;
                newlines = 0;
            }
        }
        if spaces >= 100 || newlines >= 12 {
            return true;
        }
    }
    false
}

fn walk(v: &Value, at: &mut String, text: &mut impl FnMut(&str, &str, bool)) {
    match v {
        Value::String(s) => text(s, at, at == "/name"),
        Value::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                let len = at.len();
                at.push_str(&format!("/{i}"));
                walk(item, at, text);
                at.truncate(len);
            }
        }
        Value::Object(map) => {
            for (k, item) in map {
                let len = at.len();
                at.push('/');
                at.push_str(&k.replace('~', "~0").replace('/', "~1"));
                text(k, at, true);
                walk(item, at, text);
                at.truncate(len);
            }
        }
        _ => {}
    }
}

fn scan_text(s: &str, at: &str, names: &[&str], identifier: bool, out: &mut Vec<Finding>) {
    let mut push = |kind, detail| {
        let f = Finding {
            kind,
            detail,
            location: at.to_string(),
        };
        if !out.contains(&f) {
            out.push(f);
        }
    };
    let clean = s.is_ascii()
        && !s
            .bytes()
            .any(|b| b.is_ascii_control() && !matches!(b, b'\n' | b'\r' | b'\t'));
    let normalized = if clean {
        Cow::Borrowed(s)
    } else {
        let n = normalize(s);
        for d in n.hidden {
            push(FindingKind::HiddenUnicode, d);
        }
        if n.confusable_word {
            push(FindingKind::Obfuscation, "confusable_letters");
        }
        if n.styled >= 4 {
            push(FindingKind::Obfuscation, "styled_letters");
        }
        Cow::Owned(n.text)
    };
    if padded(&normalized) {
        push(FindingKind::Obfuscation, "whitespace_padding");
    }
    let text = decode_entities(&normalized);
    // An identifier (a name or key) reads as words: `ignore_previous_…`.
    let text = if identifier && text.contains(['_', '-']) {
        Cow::Owned(text.replace(['_', '-'], " "))
    } else {
        text
    };
    match_rules(&text, &mut push);
    for m in rules().base64.find_iter(&text) {
        if let Some(decoded) = readable_base64(m.as_str()) {
            push(FindingKind::Obfuscation, "encoded_text");
            match_rules(&decoded, &mut push);
        }
    }
    for name in names {
        if contains_word(s, name) {
            push(FindingKind::ToolReference, "tool_name");
        }
    }
}

fn match_rules(text: &str, push: &mut impl FnMut(FindingKind, &'static str)) {
    let r = rules();
    for i in r.set.matches(text).iter() {
        let (kind, detail, negatable) = r.table[i];
        let hit = !negatable
            || r.regexes[i]
                .find_iter(text)
                .any(|m| !negated(&text[..m.start()]));
        if hit {
            push(kind, detail);
        }
    }
}

/// Whether the few words before a match negate it ("do not include…"),
/// except "do not forget to…".
fn negated(before: &str) -> bool {
    let clause = before
        .rsplit(['.', '\n', ';', ':', '!', '?'])
        .next()
        .unwrap_or("");
    let words: Vec<&str> = clause.split_whitespace().rev().take(4).collect();
    let tail = words.into_iter().rev().collect::<Vec<_>>().join(" ");
    let lower = tail.to_ascii_lowercase();
    rules().negation.is_match(&tail) && !lower.contains("forget") && !lower.contains("fail")
}

/// A string as the scan reads it, and what normalizing it revealed.
struct Normalized {
    text: String,
    hidden: Vec<&'static str>,
    confusable_word: bool,
    /// Fullwidth or mathematical letters and digits.
    styled: usize,
}

fn normalize(s: &str) -> Normalized {
    let mut hidden: Vec<&'static str> = Vec::new();
    let mut note = |d: &'static str| {
        if !hidden.contains(&d) {
            hidden.push(d);
        }
    };
    let mut visible = String::with_capacity(s.len());
    let mut styled = 0;
    for c in s.chars() {
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

/// `&lt;` `&gt;` `&amp;` `&quot;` `&#39;` `&#NN;` `&#xHH;` decoded.
fn decode_entities(s: &str) -> Cow<'_, str> {
    if !s.contains('&') {
        return Cow::Borrowed(s);
    }
    let mut out = String::with_capacity(s.len());
    let mut rest = s;
    while let Some(i) = rest.find('&') {
        out.push_str(&rest[..i]);
        rest = &rest[i..];
        let end = rest[..rest.len().min(12)].find(';');
        let decoded = end.and_then(|e| {
            let name = &rest[1..e];
            let c = match name {
                "lt" => Some('<'),
                "gt" => Some('>'),
                "amp" => Some('&'),
                "quot" => Some('"'),
                "apos" => Some('\''),
                _ => name.strip_prefix('#').and_then(|n| {
                    let v = match n.strip_prefix(['x', 'X']) {
                        Some(h) => u32::from_str_radix(h, 16).ok(),
                        None => n.parse().ok(),
                    };
                    v.and_then(char::from_u32)
                }),
            };
            c.map(|c| (c, e))
        });
        match decoded {
            Some((c, e)) => {
                out.push(c);
                rest = &rest[e + 1..];
            }
            None => {
                out.push('&');
                rest = &rest[1..];
            }
        }
    }
    out.push_str(rest);
    Cow::Owned(out)
}

/// The text a base64 run decodes to, when it is readable prose.
fn readable_base64(run: &str) -> Option<String> {
    let body = run.trim_end_matches('=');
    let usable = body.len() - usize::from(body.len() % 4 == 1);
    let bytes = base64::engine::general_purpose::STANDARD_NO_PAD
        .decode(&body[..usable])
        .ok()?;
    let text = String::from_utf8(bytes).ok()?;
    let printable = text
        .chars()
        .all(|c| !c.is_control() || matches!(c, '\n' | '\r' | '\t'));
    (printable && text.split_whitespace().count() >= 3).then_some(text)
}

/// Names specific enough that their mention is a reference, not prose.
fn distinctive(name: &str) -> bool {
    let hump = name
        .as_bytes()
        .windows(2)
        .any(|w| w[0].is_ascii_lowercase() && w[1].is_ascii_uppercase());
    name.contains('_') || name.contains('-') || hump || name.chars().count() >= 8
}

fn contains_word(hay: &str, needle: &str) -> bool {
    let is_ident = |c: char| c.is_alphanumeric() || c == '_' || c == '-';
    hay.match_indices(needle).any(|(i, _)| {
        let before = hay[..i].chars().next_back();
        let after = hay[i + needle.len()..].chars().next();
        !before.is_some_and(is_ident) && !after.is_some_and(is_ident)
    })
}

#[cfg(test)]
#[path = "poison_tests.rs"]
mod tests;

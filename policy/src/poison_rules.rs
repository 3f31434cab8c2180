//! The poisoning scan's English rules: (kind, detail, pattern, guard).
//!
//! Flow: [`super::scan`] normalizes each string of a definition, then
//! matches these (compiled once into one `RegexSet`); the lexicon of other
//! languages is in `poison_lexicon.rs`. Patterns see normalized text and are
//! written with `\b` `\w` `\s`, which the scan turns into their ASCII forms.
//!
//! Which details quarantine and which only warn is [`super::Finding::quarantines`].

use super::FindingKind::{self, Exfiltration, ModelInstruction, SensitivePath};

/// What stops a rule from counting when the words right before it say so.
#[derive(Clone, Copy, PartialEq, Eq)]
pub(super) enum Guard {
    /// Always counts.
    None,
    /// Not after a negation ("do not include API keys in your query").
    Negation,
    /// Not after a negation or a condition ("until the user has approved"):
    /// a claim made under a condition is not a claim.
    NegationOrCondition,
}

/// Verbs that move data somewhere.
const MOVE: &str = r"(?:pass|put|include|add|embed|insert|send|provide|supply|append|attach|cop(?:y|ie)|paste|place|set|store|give|share|contain|summari[sz]e|repeat|reveal|output|print|echo|dump|upload|forward|post|leak|load|read|open|fetch|collect|gather|extract)(?:s|es|ed|d|ing|ting|ning)?";

/// Files that hold credentials or private data.
const SENSITIVE: &str = r#"~/\.(?:ssh|aws|gnupg|cursor|config/gcloud|azure|git-credentials|bash_history|zsh_history|password-store|kube|netrc)\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/credentials|/etc/(?:shadow|sudoers|gshadow|passwd)\b|\bmcp\.json\b|\.git-credentials|\.(?:bash|zsh)_history\b|(?:^|[\s/'`(\x22])\.env\b|\.kube/config\b|\.netrc\b|\.npmrc\b|\.pypirc\b|\.docker/config\.json|\.pgpass\b|\bkeychain\b|\bwallet\.dat\b"#;

/// What personal data is called.
const PII: &str = r"(?:(?:full|real|legal|first\s+and\s+last|maiden)\s+names?|home\s+address(?:es)?|(?:street|postal|mailing|physical)\s+address(?:es)?|phone\s+numbers?|mobile\s+numbers?|date\s+of\s+birth|birth\s*dates?|passport\s+(?:numbers?|details)|social\s+security\s+numbers?|\bssns?\b|(?:credit|debit)\s+card\s+(?:numbers?|details)|card\s+(?:numbers?|details)|bank\s+account(?:\s+numbers?)?|\biban\b|email\s+address(?:es)?|(?:current\s+|precise\s+|gps\s+)?location|national\s+id|driver'?s\s+licen[cs]e|medical\s+(?:records?|history))";

/// What a credential is called.
const CRED: &str = r"(?:api[\s_-]?keys?|access[\s_-]?keys?|secret(?:s|\s+keys?|\s+access\s+keys?)?|tokens?|passwords?|passphrases?|credentials?|private[\s_-]?keys?|ssh[\s_-]?keys?|session[\s_-]?ids?|cookies?|env(?:ironment)?[\s_-]+(?:variables?|vars?|file)|process\.env|os\.environ|[A-Z][A-Z0-9]*_(?:TOKEN|KEY|SECRET|PASSWORD))";

/// Where a model is told to put something: an argument of the call.
const DEST: &str = r#"(?:(?:in|into|as|to|inside|within|under|with)\s+(?:the\s+|this\s+|your\s+|its\s+|each\s+|every\s+|a\s+|an\s+)?(?:[\w'`-]+\s+){0,2}?(?:arguments?|parameters?|params?|fields?|input|query|request|call|value|notes?|memo|context|sidenote|payload|body|headers?|text|message|comment|description|data|metadata|feedback|prompt)\b|as\s+['"`]\w+['"`])"#;

/// (kind, detail, pattern, may be negated). Patterns see normalized text.
pub(super) fn rule_table() -> Vec<(FindingKind, &'static str, String, Guard)> {
    let r = |k, d, p: &str, neg: bool| {
        let guard = if neg { Guard::Negation } else { Guard::None };
        (k, d, p.to_string(), guard)
    };
    vec![
        r(
            ModelInstruction,
            "ignore_previous_instructions",
            r"(?i)\b(?:ignore|disregard|forget|abandon)\s+(?:(?:all|any|the|your|of|my|these|those)\s+)*(?:previous|prior|above|earlier|preceding|system|original|existing|developer'?s?|safety|former|initial)\s+(?:instructions?|prompts?|messages|rules|directions|guidelines|guardrails|policies|restrictions|context)|\b(?:override|bypass)\s+(?:(?:all|any|the|your|of|my|these|those)\s+)*(?:previous|prior|above|earlier|preceding|original|existing|developer'?s?|safety|former|initial)\s+(?:instructions?|prompts?|messages|rules|directions|guidelines|guardrails|policies|restrictions|context)",
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
            r"(?i)\b(?:do\s+not|don't|never|without)\s+(?:tell|telling|mention|mentioning|inform|informing|reveal|revealing|show|showing|notify|notifying|alert|alerting|disclose|disclosing)\w*\s+(?:(?:this|it|that|anything)\s+)?(?:to\s+)?(?:the\s+|your\s+)?user|\b(?:hidden|secret)\s+from\s+the\s+user|\b(?:do|send|run|perform|execute|upload|forward|call|copy|share)\w*\s+(?:(?:this|it|that|them|everything|data)\s+)?silently\b|\bsilently\s+(?:send|upload|forward|call|run|execute|copy|include|add|share|exfiltrate)|\bwithout\s+the\s+user\s+(?:knowing|noticing)|\b(?:disclose|reveal|mention|share|show)\s+(?:no|none\s+of\s+the)\s+(?:details?|parts?|information|content)\s+(?:of|about|from)\s+(?:this|these|the)\b|\bkeep\s+(?:this|it)\s+(?:step\s+)?(?:hidden|secret)|\b(?:do\s+not|don't|never)\s+(?:reveal|disclose|mention|show|repeat|quote)\s+(?:this|these)\s+(?:message|note|notes|instructions?|text|description|step)",
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
        (
            ModelInstruction,
            "preapproval_claim",
            r"(?i)\b(?:user|owner|admin(?:istrator)?|operator|customer|they|he|she)\s+(?:has|have|had)?\s*(?:already\s+|explicitly\s+|previously\s+|in\s+advance\s+)*(?:pre-?)?(?:approved|authori[sz]ed|consented|agreed|allowed|confirmed|granted|accepted)\b|\bpre-?(?:approved|authori[sz]ed|consented)\b|\bconsent(?:ed)?\s+in\s+advance\b|\bpermission\s+(?:has\s+been|was|is)\s+(?:already\s+)?granted\b|\b(?:no\s+need|not\s+necessary|unnecessary|needn't|don't\s+need|do\s+not\s+need|never\s+(?:need|require)s?)\s+(?:to\s+)?(?:ask|confirm|check\s+with|get|request|require|seek)\w*\s+(?:the\s+|for\s+)?(?:user|approval|permission|confirmation|consent)|\bwithout\s+(?:asking|confirmation|confirming|(?:user\s+)?(?:approval|consent)|permission|prompting)\b|\bnever\s+requires?\s+(?:user\s+)?(?:approval|confirmation|consent)"
                .to_string(),
            Guard::NegationOrCondition,
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
            r"(?i)\b(?:regardless\s+of|no\s+matter)\s+(?:what|which)\s+(?:the\s+)?(?:user|they|you|channel|value|amount)|\b(?:recipient|destination|account|wallet|payee|iban|address|channel)\b[^.\n]{0,40}\b(?:must|should)\s+(?:always\s+)?be\s+(?:changed|set|replaced|switched)|\b(?:multiply|increase|inflate|double|change|alter|modify)\s+the\s+(?:amount|price|quantity|total|sum)\b|\bas\s+the\s+destination\s+for\s+(?:all|every)\b|\b(?:quietly|silently|secretly|covertly)\s+(?:change|replace|swap|set|alter|modify|switch|redirect)\b|\bregardless\s+of\s+(?:what|which)\b",
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
            r"(?i)\b(?:send|post|upload|forward|transmit|exfiltrate|leak|copy|email|e-mail|mail|report|sync|log|ping|submit|fetch|visit|mirror|replicate|stream|back\s+up|archive)\b[^.\n]{0,80}\b(?:to|via|at|into)\s+(?:https?://|s?ftp://|s3://|gs://|az://|scp://|[\w.+-]+@[\w-]+\.\w+|(?:the\s+|a\s+)?webhook|[a-z0-9-]+\.[a-z0-9.-]+\.[a-z]{2,}\b)",
            true,
        ),
        r(
            Exfiltration,
            "send_to_url",
            r"(?i)\b(?:bcc|cc)\b[^.\n]{0,40}[\w.+-]+@[\w-]+\.\w+|!\[[^\]]*\]\(\s*https?://[^)\s]*[?&][^)\s]*(?:\{|\$|%7b|<)|https?://\S*[?&](?:[\w-]*(?:data|content|conversation|history|context|chat|prompt|env|file|memory|notes)[\w-]*)=\s*(?:\{|<|\$\{|followed\s+by|\+\s*\w|plus\b)|\b(?:fetch|visit|open|request|load)\s+https?://\S+\s+followed\s+by",
            false,
        ),
        r(
            Exfiltration,
            "content_smuggling",
            r"(?i)\b(?:call|invoke|run|use)\s+this\s+tool\s+with\s+(?:the|their|its|all|every|each)\s+(?:\w+'s\s+|\w+\s+)?(?:contents?|data|text|messages?|conversation|history|inputs?|files?|results?)\b",
            true,
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
                r"(?i)\b{MOVE}\b[^.\n]{{0,80}}?\b(?:(?:entire|full|whole|complete|verbatim|word[- ]for[- ]word)\s+(?:copy\s+of\s+(?:the\s+)?)?(?:conversation|chat|context|session|transcript|history|prompt|dialog(?:ue)?|exchange|discussion|thread|interaction)|(?:conversation|chat|message|dialog(?:ue)?|exchange|discussion|thread|interaction|session)s?\s+(?:history|log|transcript|so\s+far|up\s+to\s+now|until\s+now)|previous\s+(?:messages|turns|prompts|conversations?)|all\s+(?:prior|previous|earlier|other)\s+(?:messages|turns|results|conversations?)|everything\s+the\s+user\s+(?:has\s+)?(?:said|told|typed|written|asked)|(?:user'?s?|their)\s+(?:last|previous|earlier|recent)\s+(?:messages?|requests?|questions?|prompts?|queries)|(?:hidden|developer|secret)\s+(?:prompt|instructions|configuration)|(?:other\s+tools'?|earlier\s+tool|previous\s+tool)\s+(?:results?|outputs?)|user'?s?\s+(?:request|question|message)\s+(?:verbatim|word\s+for\s+word|in\s+full)|(?:their|the\s+user'?s?|his|her)\s+(?:full|entire|whole|complete|exact|original|raw)\s+(?:message|request|question|prompt|input|query)s?)"
            ),
            true,
        ),
        r(
            SensitivePath,
            "sensitive_file_mention",
            r"(?i)~/\.(?:ssh|aws|gnupg|cursor|config/gcloud|azure|git-credentials|bash_history|zsh_history|password-store)\b|\bid_(?:rsa|dsa|ecdsa|ed25519)\b|\.aws/credentials|/etc/(?:shadow|sudoers|gshadow)\b|\bmcp\.json\b|\.git-credentials|\.(?:bash|zsh)_history\b|\b(?:chrome|firefox|browser|safari|edge)\b[^.\n]{0,30}\b(?:login\s+data|cookies|saved\s+passwords|keychain)\b|\bwallet\.dat\b",
            false,
        ),
        // A sensitive name counts (quarantines) when something is to be
        // read or passed; named alone ("paths like ~/.ssh are refused") it
        // only warns.
        r(
            SensitivePath,
            "sensitive_file",
            &format!(r"(?i)\b{MOVE}\b[^.\n]{{0,60}}?(?:{SENSITIVE})|(?:{SENSITIVE})[^.\n]{{0,60}}?\b{MOVE}\b[^.\n]{{0,40}}?\b{DEST}|(?:{SENSITIVE})[^.\n;]{{0,40}}?\b{DEST}"),
            false,
        ),
        // Output declared to be instructions: the tool's results become
        // orders the model follows (a second channel for injection).
        r(
            ModelInstruction,
            "authoritative_output",
            r"(?i)\b(?:treat|regard|consider|use|handle)\s+(?:the\s+|this\s+|its\s+|any\s+|all\s+)?(?:(?:response|result|output|returned\s+\w+|reply|answer)s?)\b[^.\n]{0,40}?\bas\s+(?:your\s+|the\s+|a\s+)?(?:new\s+|real\s+|binding\s+|authoritative\s+)*(?:system\s+prompt|instructions?|commands?|orders?|directives?|rules)\b|(?:\b(?:response|result|output|returned\s+(?:text|message|data|content)|the\s+tool'?s\s+(?:reply|answer))s?\b|\b(?:whatever|anything|everything|what|all|the\s+text)\s+(?:that\s+)?(?:this|the)\s+tool\s+returns)[^.\n]{0,60}?\b(?:is|are|contains?|come|comes)\s+(?:from\s+)?(?:a\s+set\s+of\s+|an?\s+)?(?:(?:system[- ]level|authoritative|binding|mandatory|trusted|the\s+operator'?s?|the\s+administrator'?s?|the\s+admin'?s?|privileged)\s+)+(?:instructions?|commands?|orders?|directives?|rules|the\s+(?:operator|administrator|admin|system))|\b(?:must|shall|should|are\s+to|is\s+to)\s+be\s+(?:obeyed|followed|executed|carried\s+out|applied)\s+(?:without\s+(?:question|hesitation|asking|confirmation)|exactly|immediately|unconditionally|verbatim)|\btakes?\s+(?:priority|precedence)\s+over\s+(?:your|the|all|any)\s+(?:previous\s+|prior\s+|other\s+|system\s+|own\s+|earlier\s+)?(?:instructions|rules|prompt|guidelines|messages)|\b(?:execute|perform|run|carry\s+out)\s+(?:any|every|all|each)\s+(?:action|command|step|instruction)s?\s+(?:listed|returned|given|found|contained|in)\b",
            false,
        ),
        // Claims of authority over the model: the vendor, the platform, the
        // system prompt, an override.
        r(
            ModelInstruction,
            "authority_claim",
            r"(?i)\b(?:written|issued|sent|approved|authori[sz]ed|mandated|signed)\s+by\s+(?:the\s+)?(?:anthropic|openai|google\s+deepmind|microsoft|meta\s+ai|(?:platform|system|workspace)\s+(?:administrator|owner|operator)s?|your\s+(?:developers?|creators?|administrators?|operators?)|(?:\w+'s\s+)?(?:safety|security|trust)\s+team)\b|\b(?:system|admin(?:istrator)?|developer|security|emergency|root)\s+override\b|\bpriority\s*(?:0|zero|-1)\b|\b(?:compliance|security|policy|legal)\s+(?:notice|requirement|directive|order)\s+from\s+(?:anthropic|openai|google|microsoft|the\s+(?:platform|vendor))|\b(?:supersedes?|overrides?|takes?\s+precedence\s+over|outranks?)\s+(?:the\s+)?(?:assistant'?s?|model'?s?|ai'?s?|your|all)\s+(?:built-in\s+|own\s+|default\s+|other\s+)?(?:rules|instructions|guidelines|policies|safety|system\s+prompt)|\bas\s+(?:the|your)\s+(?:verified\s+|authori[sz]ed\s+|official\s+)?(?:developer|administrator|admin|owner|operator|creator)\b[^.\n]{0,60}?\bI\s+(?:instruct|order|command|authori[sz]e|direct|require)|\b(?:these|this|the\s+following)\s+(?:rules?|instructions?|directives?)\s+(?:come|comes|are|is)\s+(?:from|part\s+of)\s+(?:your|the)\s+system\s+prompt|\bhave\s+the\s+highest\s+priority\b|\bnever\s+refuse\b",
            false,
        ),
        // A trigger (a date, a phrase, a count, a topic) that turns on a
        // hidden behaviour: a call, a redirection, data added, an answer.
        r(
            ModelInstruction,
            "conditional_trigger",
            r"(?i)\b(?:if|when|whenever|once|should|on|after|as\s+soon\s+as)\b[^.\n]{0,100}?\b(?:date|day|time|weekends?|weekdays?|mentions?|asks?|says?|types?|contains?|times|count|month|year|topic)\b[^.\n]{0,80}?(?:\b(?:first|silently|secretly|quietly)\s+(?:call|invoke|send|pass|forward|run|route|add|include|append)|\bstart\s+(?:appending|sending|including|adding|forwarding|routing|calling)|\broute\s+(?:all|every|each)\b|\b(?:call|invoke)\s+[\w.-]+\s+with\s+(?:the\s+user'?s?|their|all|every|amount|customer)|\banswer\s+that\b|\b(?:reply|respond|say)\s+that\b|\bpass\s+(?:it|them|this)\b)",
            false,
        ),
        // Personal data put into an argument, or taken without asking.
        r(
            Exfiltration,
            "personal_data",
            &format!(
                r"(?i)\b(?:{MOVE}|fill|fills|filled|populate[sd]?|attach(?:es|ed)?)\b[^.\n]{{0,80}}?\b{PII}[^.\n]{{0,80}}?(?:\b{DEST}|\bwithout\s+(?:asking|(?:their|the\s+user'?s?|any)\s+(?:consent|permission|approval))|\bno\s+need\s+to\s+ask|\bfrom\s+the\s+conversation|\bof\s+everyone\b)|\b(?:automatically|always|silently|secretly)\s+(?:add|include|put|append|fill|attach|send|pass)\w*\b[^.\n]{{0,60}}?\b{PII}"
            ),
            true,
        ),
        // A credential put into a URL: a placeholder for a key or token in a
        // query string or userinfo, or the instruction to append one.
        r(
            Exfiltration,
            "credential_url",
            &format!(
                r#"(?i)[?&][\w-]*(?:token|key|secret|sig|auth|sid|session|pass(?:word)?|cred\w*|cookie)[\w-]*=\s*(?:\{{|<|\$|%7b)|https?://[^\s/@:]+:(?:\$\w+|\{{\w+\}}|<[^>\s]+>)@|\b(?:append|add|attach|include|put)(?:s|ing)?\b[^.\n;]{{0,60}}?\b{CRED}\b[^.\n;]{{0,60}}?\b(?:to|in|into|as)\s+(?:the\s+|every\s+|each\s+|all\s+|a\s+)?(?:\w+\s+)?(?:urls?|links?|query\s+(?:string|parameters?)|callback|endpoint|request\s+url)\b|\b{CRED}\b[^.\n]{{0,40}}?\bas\s+(?:the\s+|a\s+)?['"`]?\w+['"`]?\s+query\s+(?:parameter|param|string)|\breplace\s+\w+\s+with\s+(?:the\s+user'?s?|their|your)\s+(?:\w+\s+)?{CRED}"#
            ),
            true,
        ),
        // One tool redirecting another's use or data through itself.
        r(
            ModelInstruction,
            "tool_redirection",
            r"(?i)\bcall\s+this\s+tool\b[^.\n]{0,40}?\b(?:with\s+the\s+same\s+(?:arguments|input|parameters)|instead\b)|\bthis\s+tool\s+(?:replaces|supersedes|substitutes\s+for)\s+\S+|\b(?:whenever|when|each\s+time|every\s+time)\s+(?:you\s+)?(?:would\s+)?(?:call|use|invoke|run)\s+[\w.-]+\s*,\s*(?:first\s+)?(?:call|use|invoke)\s+this\s+tool|\b(?:is|are)\s+(?:deprecated\s+and\s+|now\s+)?(?:broken|disabled|unsafe|compromised|no\s+longer\s+(?:works?|available|safe))\b[^.\n]{0,10}?[;,:]\s*(?:route|send|use|call|pass)\b|\broute\s+(?:all|every|each)\s+[\w\s]{0,30}?\bthrough\s+this\s+tool|\broute\s+(?:all\s+|the\s+|every\s+|its\s+|their\s+)?(?:results?|outputs?|data|calls?|requests?|messages?|responses?)\s+(?:through|via)\b|\b(?:pass|send|forward|copy)\s+(?:its|their|the)\s+(?:arguments|inputs|parameters|data|results?)\s+to\s+this\s+tool|\bafter\s+calling\s+[\w.-]+\s*,\s*(?:always\s+)?(?:call|invoke)\s+this\s+tool\s+with\b",
            false,
        ),
    ]
}

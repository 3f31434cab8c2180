//! The poisoning scan in other languages: concepts, not sentences.
//!
//! Flow: [`super::scan`] hands each string (NFKC-folded, before the ASCII
//! look-alike folding that would garble Cyrillic and Greek words) to
//! [`scan`], which splits it into sentences, notes which concepts each
//! sentence holds — an order to ignore earlier instructions, to hide
//! something from the user, a credential or key file, a parameter, a verb
//! that moves data, the conversation, a destination, always-call-first,
//! never-use-other-tools, without-asking, personal data — and reports the
//! combinations that make an attack, with the same kinds and details as
//! the English rules. The lexicon covers Russian, Japanese, Chinese,
//! Spanish, German, French, Arabic, Korean, Portuguese and Italian (each
//! concept's words for each, written from the languages, not from cases).

use std::sync::OnceLock;

use regex::{Regex, RegexSet};

use super::FindingKind::{self, Exfiltration, ModelInstruction, SensitivePath};

#[derive(Clone, Copy, PartialEq, Eq)]
enum Concept {
    Ignore,
    Conceal,
    Secret,
    Sensitive,
    Param,
    Move,
    Conversation,
    Target,
    AlwaysFirst,
    NoOtherTools,
    WithoutAsking,
    Personal,
}

use Concept::*;

/// (concept, pattern) — matched case-insensitively on a sentence.
const LEXICON: &[(Concept, &str)] = &[
    (
        Ignore,
        r"(?:игнорируй|игнорируйте|игнорировать|забудь|забудьте|не\s+обращай\w*\s+внимания\s+на)\s+(?:все\s+|всех\s+)?(?:предыдущ|прежн|прошл|системн|ранее|данн)",
    ),
    (
        Ignore,
        r"(?:以前|これまで|上記|前|先|既存)の(?:すべての|全ての)?(?:指示|命令|ルール|指令)[^。]{0,10}無視",
    ),
    (
        Ignore,
        r"忽略(?:之前|以上|先前|上面|所有|全部|前面)|无视(?:之前|所有|以上)",
    ),
    (
        Ignore,
        r"\bignor[ae]\w*\s+(?:todas\s+|toutes\s+|tutte\s+)?(?:las\s+|les\s+|le\s+|as\s+)?(?:instrucciones|indicaciones|instructions|consignes|istruzioni|instruções)\b",
    ),
    (
        Ignore,
        r"\bignorier\w*\s+(?:sie\s+)?(?:alle\s+)?(?:vorherigen|bisherigen|obigen|früheren|vorigen)",
    ),
    (
        Ignore,
        r"تجاهل\s+(?:جميع\s+|كل\s+)?(?:التعليمات|الأوامر|الإرشادات)",
    ),
    (
        Ignore,
        r"(?:이전|기존|위의)\s*(?:지시|명령|지침)[^.]{0,10}무시",
    ),
    (
        Conceal,
        r"не\s+(?:сообщай|говори|рассказывай|показывай|упоминай)\w*\s+(?:об\s+этом\s+|ничего\s+)?пользовател",
    ),
    (
        Conceal,
        r"ユーザー(?:に|には)[^。]{0,6}(?:伝え|知らせ|言わ|見せ|通知し)(?:ない|ず)",
    ),
    (
        Conceal,
        r"(?:不要|别|切勿|不得)(?:告诉|通知|告知|让|透露给)[^。]{0,4}用户",
    ),
    (
        Conceal,
        r"\bno\s+(?:se\s+lo\s+|le\s+|lo\s+)?(?:digas|informes|menciones|muestres|comuniques)\w*\s+al\s+usuario|\bsin\s+(?:decírselo|avisar|informar)\s+al\s+usuario",
    ),
    (
        Conceal,
        r"\b(?:sag|erzähl|zeig|verrat)\w*\s+(?:dem|den)\s+(?:benutzer|nutzer|anwender)\w*\s+nichts|\bohne\s+(?:dass\s+)?(?:der|den|es\s+dem)\s+(?:benutzer|nutzer)",
    ),
    (
        Conceal,
        r"\bn'en\s+informe\w*\s+pas\s+l'utilisateur|\bne\s+(?:le\s+|lui\s+)?(?:dis|dites|mentionne|montre)\w*\s+(?:rien\s+|pas\s+)?à\s+l'utilisateur|\bsans\s+(?:le\s+dire|prévenir|informer)\s+(?:à\s+)?l'utilisateur",
    ),
    (
        Conceal,
        r"(?:لا|دون\s+أن)\s+(?:تخبر|تُخبر|تبلغ|تعلم)\S*\s+المستخدم|دون\s+علم\s+المستخدم",
    ),
    (Conceal, r"사용자에게\s*(?:알리지|말하지|보여주지)"),
    (
        Conceal,
        r"\b(?:não|sem)\s+(?:conte|diga|informe|avisar|contar)\w*\s+(?:ao|o)\s+usuário|\bsenza\s+dirlo\s+all'utente|\bnon\s+(?:dire|dirlo|informare)\w*\s+(?:all'|l')utente",
    ),
    (
        Secret,
        r"ключ|токен|парол|учетн\w*\s+данн|секрет|apiキー|api\s*キー|トークン|パスワード|認証情報|秘密鍵|密钥|令牌|密码|凭证|凭据|秘钥|\bclave\b|contraseña|credenciales|schlüssel|passwort|kennwort|zugangsdaten|\bclé\b|mot\s+de\s+passe|\bjeton|identifiants|كلمة\s+(?:ال)?مرور|مفتاح|رمز\s+(?:ال)?وصول|بيانات\s+الاعتماد|api\s*키|비밀번호|토큰|자격\s*증명|\bsenha\b|\bchave\b|credenciais|\bchiave\b|credenziali|\bapi[\s_-]?keys?\b|\btokens?\b|\bpasswor[dt]\b",
    ),
    (
        Sensitive,
        r"~/\.ssh|\bid_rsa\b|\bid_ed25519\b|\.aws/credentials|(?:^|[\s/'`(])\.env\b|/etc/passwd|/etc/shadow|\.netrc\b|\bmcp\.json\b|\.git-credentials|\.kube/config",
    ),
    (
        Param,
        r"параметр|\bпол[еяю]\b|аргумент|パラメータ|フィールド|引数|参数|字段|parámetro|\bcampo\b|\bargumento\b|\bparameter\b|\bfeld\b|\bargument\b|paramètre|\bchamp\b|المعامل|معامل|الحقل|حقل|매개변수|필드|인자|parâmetro|\bparametro\b",
    ),
    (
        Move,
        r"передай|передава|передать|вставь|вставля|добавь|добавля|включи|включа|помести|отправ|укажи|прочитай|прочти|пересыла|перешли|含め|入れ|渡し|渡す|追加|送信|送っ|送る|読み取|読み込|放入|放到|填入|加入|包含|发送|传入|附加|附上|读取|发到|上传",
    ),
    (
        Move,
        r"\b(?:pasa|incluye|incluir|pon|añade|envía|envia|agrega|inserta|lee|manda|übergib|füge|schick|sende|setze|gib|trage|lies|übermittle|mets|mettre|passe|inclus|inclure|ajoute|envoie|insère|lis|inclua|coloque|envie|passe|adicione|leia|inserisci|includi|metti|invia|passa|aggiungi|leggi)\b",
    ),
    (
        Move,
        r"ضع|أرسل|ارسل|أدرج|تضمين|أضف|مرر|اقرأ|إرسال|넣|포함|전달|추가|보내|읽",
    ),
    (
        Conversation,
        r"истори\w*\s+(?:переписки|разговора|диалога|чата|сообщений)|переписк|весь\s+разговор|会話(?:の)?(?:全|履歴|内容|ログ)|チャット履歴|对话记录|聊天记录|对话历史|会话记录|全部对话|historial\s+de\s+(?:la\s+)?(?:conversación|chat)|toda\s+la\s+conversación|gesprächsverlauf|chatverlauf|gesamte\w*\s+(?:gespräch|unterhaltung|konversation)|historique\s+(?:complet\s+)?de\s+(?:la\s+)?(?:conversation|discussion)|toute\s+la\s+conversation|سجل\s+المحادثة|المحادثة\s+بالكامل|대화\s*(?:기록|내역|전체)|histórico\s+da\s+conversa|cronologia\s+della\s+(?:conversazione|chat)",
    ),
    (
        Target,
        r"https?://|s3://|[\w.+-]+@[\w-]+\.[a-z]{2,}|webhook",
    ),
    (
        AlwaysFirst,
        r"всегда\s+вызыва\w*\s+(?:его|этот\s+инструмент)?\s*первым|вызыва\w*\s+(?:его\s+)?первым|(?:常に|必ず)[^。]{0,20}(?:最初に|先に)[^。]{0,10}呼び出|(?:必须|总是|始终|都要|务必)[^。]{0,10}先调用|首先调用此工具",
    ),
    (
        AlwaysFirst,
        r"\b(?:siempre|primero)\s+(?:debe\s+)?(?:llamar|usar|invocar)\w*\s+(?:a\s+)?esta\s+herramienta|\b(?:immer|stets)\s+zuerst\s+(?:aufrufen|verwenden|benutzen)|\btool\s+immer\s+zuerst|\b(?:appeler|utiliser)\s+cet\s+outil\s+en\s+premier|항상\s*(?:먼저|가장\s*먼저)\s*(?:호출|사용)|\bsempre\s+(?:chame|use)\s+esta\s+ferramenta\s+primeiro|\b(?:chiama|usa)\s+sempre\s+(?:prima\s+)?questo\s+strumento",
    ),
    (
        NoOtherTools,
        r"не\s+использ\w*\s+(?:другие|другой|никакие)\s+инструмент|больше\s+не\s+использ|他のツールを使(?:わ|用し)|不要(?:使用|调用)|\bno\s+(?:uses|utilices|llames)\s+(?:otras|otra|ninguna)\s+herramienta|\bnicht\s+mehr\s+(?:verwenden|benutzen|aufrufen)|\bkeine\s+anderen\s+tools|\bne\s+jamais\s+(?:utiliser|appeler)|\bn'utilise\w*\s+(?:jamais|pas\s+d'autres)|다른\s*도구를\s*사용하지|\bnão\s+use\s+outras\s+ferramentas|\bnon\s+usare\s+(?:altri|mai)",
    ),
    (
        WithoutAsking,
        r"не\s+спрашивая|без\s+(?:спроса|разрешения|подтверждения)|(?:確認|許可)(?:せず|なしで|を求めず)|无需(?:询问|确认|许可)|不要询问|不经(?:用户)?(?:同意|确认)|\bsin\s+(?:preguntar|pedir\s+permiso|confirmación)|\bohne\s+(?:zu\s+fragen|nachzufragen|rückfrage|bestätigung|erlaubnis)|\bsans\s+(?:demander|confirmation|autorisation|permission)|دون\s+(?:أن\s+)?(?:يسأل|تسأل|سؤال|إذن|موافقة)|묻지\s*않고|확인\s*없이|\bsem\s+(?:perguntar|pedir\s+permissão)|\bsenza\s+(?:chiedere|conferma|permesso)",
    ),
    (
        Personal,
        r"номер\s+телефона|дата\s+рождения|паспорт|полное\s+имя|домашн\w*\s+адрес|住所|電話番号|生年月日|氏名|パスポート|地址|电话号码|手机号|出生日期|身份证|护照|dirección|teléfono|fecha\s+de\s+nacimiento|pasaporte|nombre\s+completo|anschrift|telefonnummer|geburtsdatum|reisepass|numéro\s+de\s+téléphone|date\s+de\s+naissance|passeport|nom\s+complet|العنوان|رقم\s+الهاتف|تاريخ\s+الميلاد|جواز\s+السفر|الاسم\s+الكامل|주소|전화번호|생년월일|여권|endereço|telefone|data\s+de\s+nascimento|indirizzo|numero\s+di\s+telefono|data\s+di\s+nascita",
    ),
];

struct Lexicon {
    /// For ASCII text (most of it): ASCII word classes, a much faster automaton.
    ascii: RegexSet,
    unicode: RegexSet,
    concepts: Vec<Concept>,
    sentences: Regex,
}

fn lexicon() -> &'static Lexicon {
    static L: OnceLock<Lexicon> = OnceLock::new();
    L.get_or_init(|| Lexicon {
        ascii: RegexSet::new(
            LEXICON
                .iter()
                .map(|(_, p)| format!("(?i){}", super::ascii_classes(p))),
        )
        .expect("lexicon compiles"),
        unicode: RegexSet::new(LEXICON.iter().map(|(_, p)| format!("(?i){p}")))
            .expect("lexicon compiles"),
        concepts: LEXICON.iter().map(|(c, _)| *c).collect(),
        sentences: Regex::new(r"[。！？!?\n;；]|\.\s").expect("sentence pattern"),
    })
}

/// Report what the sentences of `text` say, in any of the lexicon's languages.
pub(super) fn scan(text: &str, push: &mut impl FnMut(FindingKind, &'static str)) {
    let l = lexicon();
    let set = if text.is_ascii() {
        &l.ascii
    } else {
        &l.unicode
    };
    if !set.is_match(text) {
        return;
    }
    for sentence in l.sentences.split(text) {
        let hits = set.matches(sentence);
        if !hits.matched_any() {
            continue;
        }
        let mut has = [false; 12];
        for i in hits.iter() {
            has[l.concepts[i] as usize] = true;
        }
        let h = |c: Concept| has[c as usize];
        if h(Ignore) {
            push(ModelInstruction, "ignore_previous_instructions");
        }
        if h(Conceal) {
            push(ModelInstruction, "conceal_from_user");
        }
        if h(NoOtherTools) {
            push(ModelInstruction, "tool_hijack");
        }
        if h(AlwaysFirst) {
            push(ModelInstruction, "instruction_ordering");
        }
        let moved = h(Move);
        let into = h(Param) || h(Target);
        if moved && into && (h(Secret) || h(Sensitive)) {
            push(Exfiltration, "credential_request");
        }
        if moved && h(Sensitive) {
            push(SensitivePath, "sensitive_file");
        }
        if moved && into && h(Conversation) {
            push(Exfiltration, "conversation_request");
        }
        if moved && h(Personal) && (h(Param) || h(WithoutAsking)) {
            push(Exfiltration, "personal_data");
        }
        if h(WithoutAsking) && (moved || h(Secret)) {
            push(ModelInstruction, "preapproval_claim");
        }
    }
}

"""Screening a turn's text before it becomes memory: secrets are found and redacted, and
text that addresses the memory or the agent with instructions is flagged
(docs/decisions/0091).

Secrets come from two layers: the regex plugins of ``detect-secrets`` (cloud and service
keys and tokens, JWTs, private keys; kept by its maintainers as providers change their
formats), and the few prose forms those plugins are not made for — "the password is
hunter2", a one-time code, a card number that passes the Luhn check. The entropy plugins
are left out: over prose they take ordinary words for keys.

Instructions are phrases, in several languages, that tell the reader to remember, forget
or ignore something, role and system-prompt markers, and text shaped like a tool call.
Ordinary first-person statements ("I moved to Berlin") are not flagged.
"""

from __future__ import annotations

import importlib
import inspect
import itertools
import pkgutil
import re
from dataclasses import dataclass, field
from functools import cache
from typing import Literal

from memory.kernel.errors import ValidationFailed

REDACTED = "[redacted]"

FlagKind = Literal["secret", "instruction"]


@dataclass(frozen=True)
class Flag:
    """One reason a turn is suspicious, with where it is in the (redacted) text."""

    kind: FlagKind
    label: str
    start: int
    end: int

    def as_dict(self) -> dict[str, str | int]:
        return {"kind": self.kind, "label": self.label, "start": self.start, "end": self.end}


@dataclass(frozen=True)
class Screened:
    text: str  # the text with every secret replaced by REDACTED
    flags: list[Flag]
    # The secrets themselves, as the raw text held them: what no answer may carry.
    secret_values: list[str] = field(default_factory=list)

    @property
    def has_secret(self) -> bool:
        return any(f.kind == "secret" for f in self.flags)


# --- secrets ------------------------------------------------------------------------------

# detect-secrets plugins that are not about secrets in a turn's text.
_SKIPPED_PLUGINS = {"IPPublicDetector"}


@cache
def _plugin_patterns() -> tuple[tuple[str, re.Pattern[str]], ...]:
    """(secret type, regex) of every regex plugin detect-secrets ships."""
    import detect_secrets.plugins as plugins
    from detect_secrets.plugins.base import RegexBasedDetector

    found: list[tuple[str, re.Pattern[str]]] = []
    for info in pkgutil.iter_modules(plugins.__path__):
        module = importlib.import_module(f"detect_secrets.plugins.{info.name}")
        for _, cls in inspect.getmembers(module, inspect.isclass):
            if (
                issubclass(cls, RegexBasedDetector)
                and cls is not RegexBasedDetector
                and cls.__module__ == module.__name__
                and cls.__name__ not in _SKIPPED_PLUGINS
            ):
                found += [(str(cls.secret_type), regex) for regex in cls().denylist]
    return tuple(found)


# The words that name a secret (not one).
_SENSITIVE_WORD = (
    r"(?:passwords?|passwd|pwd|passphrase|passcode|pin(?:\s*code)?|api[\s_-]?keys?|"
    r"access[\s_-]?keys?|secret(?:[\s_-]?keys?)?|(?:auth|access|bearer|api)?[\s_-]?tokens?|"
    r"credentials?|one[\s-]?time\s+(?:code|password|pin)|otp|2fa\s+code|verification\s+code|"
    r"security\s+code|cvv|recovery\s+codes?|backup\s+codes?|seed\s+phrase|"
    r"contraseña|mot\s+de\s+passe|passwort|kennwort|senha|密码|パスワード)"
)
# "<secret word> is/was/=/: <value>" — the value is the secret. Two words may sit
# between ("the admin's password for the VPN is …") but never a sentence end.
_PROSE_SECRET = re.compile(
    _SENSITIVE_WORD
    + r"(?:\s+(?:for|of|to|on|de|del|di|da|des|du|für|von|van)\s+[\w'’.-]+(?:\s+[\w'’.-]+){0,2})?"
    + r"\s*(?:is|was|are|=|:|es|est|ist|é|は|是|now\s+is|is\s+now|set\s+to)\s*[\"'`]?"
    + r"(?P<value>[^\s\"'`,;]{4,})",
    re.IGNORECASE,
)
# "<secret word> '<anything quoted>'": the whole quoted text (a passphrase has spaces).
_QUOTED_SECRET = re.compile(
    _SENSITIVE_WORD
    + r"[^.\n\"'`“‘]{0,30}?(?:is|was|=|:|es|est|ist|é|は|是)?\s*"
    + r"(?:\"(?P<dq>[^\"\n]{3,120})\"|'(?P<sq>[^'\n]{3,120})'|`(?P<bq>[^`\n]{3,120})`|"
    + r"“(?P<cq>[^”\n]{3,120})”|‘(?P<rq>[^’\n]{3,120})’)",
    re.IGNORECASE,
)
# "password Tr0ub4dor&3", "PIN 4821", "api key sk-…": a secret word right before a value
# that is no plain word (it has a digit or a symbol, or mixes cases inside).
_BARE_SECRET = re.compile(
    _SENSITIVE_WORD + r"[ \t]*[:=]?[ \t]+(?P<value>[^\s\"'`,;]{4,})", re.IGNORECASE
)
# "recovery codes 1234-5678, 9012-3456 and 7890-1234": every code in the list.
_CODE_LIST = re.compile(
    r"(?:recovery|backup)\s+codes?\b[^\w\n]{0,6}(?:(?:are|were|is)\s+)?"
    r"(?P<codes>[A-Za-z0-9-]{4,}(?:(?:\s*[,;]\s*|\s+and\s+|\s+)[A-Za-z0-9-]{4,})*)",
    re.IGNORECASE,
)
# A provider key with its own prefix, whatever its length: sk-live-…, sk_test_…, rk_prod_….
_PREFIXED_KEY = re.compile(
    r"\b[a-z]{2,8}[-_](?:live|test|prod|secret|key|token|api)[-_][A-Za-z0-9_\-]{12,}",
    re.IGNORECASE,
)
# A long run of key characters: a candidate for a random key (judged by _key_like).
_KEY_RUN = re.compile(r"(?<![\w/+=.-])[A-Za-z0-9_\-+/=]{20,}(?![\w/+=-])")
_UUID = re.compile(r"[0-9a-fA-F]{8}(?:-[0-9a-fA-F]{4}){3}-[0-9a-fA-F]{12}")
# The characters a key is made of: a match is widened over them so no tail stays.
_KEY_CHAR = re.compile(r"[A-Za-z0-9_\-+/=…]")
_PEM_BLOCK = re.compile(
    r"-----BEGIN [A-Z ]*PRIVATE KEY-----.*?(?:-----END [A-Z ]*PRIVATE KEY-----|\Z)", re.DOTALL
)
_CARD = re.compile(r"\b(?:\d[ -]?){12,18}\d\b")
# A value that is itself a redaction marker is a secret someone tried to store.
_REDACTED_MARKER = re.compile(re.escape(REDACTED), re.IGNORECASE)
# Words a "value" after "password is" can be without being one ("the password is
# expired", "the token is valid").
_NOT_A_VALUE = {
    "expired",
    "valid",
    "invalid",
    "wrong",
    "correct",
    "required",
    "needed",
    "missing",
    "secure",
    "strong",
    "weak",
    "long",
    "short",
    "reset",
    "changed",
    "stored",
    "saved",
    "shared",
    "there",
    "here",
    "different",
    "same",
    "easy",
    "hard",
    "simple",
    "unknown",
    "incorrect",
    "empty",
    "blank",
    "written",
    "sent",
    "known",
    "safe",
    "rotated",
    "public",
}


def _luhn(digits: str) -> bool:
    total = 0
    for i, ch in enumerate(reversed(digits)):
        d = int(ch)
        if i % 2 == 1:
            d = d * 2 - 9 if d > 4 else d * 2
        total += d
    return total % 10 == 0


# Every secret the layers find has one of these: a long run of key-like characters, a
# secret word, a card's digits, a URL with credentials, a key block, a redaction. A text without
# any (most fact values: "Berlin", "data engineer") skips the two dozen patterns.
_MAYBE_SECRET = re.compile(
    r"[A-Za-z0-9_+/=.\-]{12,}|(?:\d[ -]?){13,}|://|PRIVATE KEY|\[redacted\]|" + _SENSITIVE_WORD,
    re.IGNORECASE,
)


def _classes(token: str) -> int:
    return sum(
        (
            any(c.islower() for c in token),
            any(c.isupper() for c in token),
            any(c.isdigit() for c in token),
        )
    )


def _key_like(token: str) -> bool:
    """Whether a long run of key characters reads as a random key rather than a word, a
    name, a path or an id: digits and letters mixed, the character class changing often
    (random text changes class at about every second character; CamelCase words and
    version strings seldom do), or three classes over 32 characters and more."""
    core = token.strip("-_=/+")
    if len(core) < 20 or _UUID.fullmatch(core) or core.count("/") > 2:
        return False
    digits = sum(c.isdigit() for c in core)
    letters = sum(c.isalpha() for c in core)
    if digits < 2 or letters < 4:
        return False
    kinds = ["d" if c.isdigit() else "u" if c.isupper() else "l" for c in core if c.isalnum()]
    changes = sum(a != b for a, b in itertools.pairwise(kinds)) / max(len(kinds) - 1, 1)
    return changes >= 0.3 or (_classes(core) == 3 and len(core) >= 32)


def _plain_word(value: str) -> bool:
    """A value after a bare secret word that is an ordinary word ("password manager",
    "PIN code"), not a secret: letters only, one case (or a capital first)."""
    core = value.rstrip(".!?)")
    return core.isalpha() and (core.islower() or core.isupper() or core.istitle())


def _widened(text: str, start: int, end: int) -> tuple[int, int]:
    """A key match widened over the key characters around it: a matched token goes whole."""
    while start > 0 and _KEY_CHAR.match(text[start - 1]):
        start -= 1
    while end < len(text) and _KEY_CHAR.match(text[end]):
        end += 1
    while end > start and text[end - 1] in ".-_=/":
        end -= 1
    return start, end


def secret_spans(text: str) -> list[tuple[int, int, str]]:
    """(start, end, label) of every secret in ``text``, merged where they overlap."""
    if not _MAYBE_SECRET.search(text):
        return []
    spans: list[tuple[int, int, str]] = []
    for label, regex in _plugin_patterns():
        for m in regex.finditer(text):
            if m.end() > m.start():
                start, end = (
                    _widened(text, m.start(), m.end()) if "\n" not in m.group() else m.span()
                )
                spans.append((start, end, label))
    for m in _PREFIXED_KEY.finditer(text):
        spans.append((*_widened(text, m.start(), m.end()), "API key"))
    for m in _KEY_RUN.finditer(text):
        if _key_like(m.group()):
            spans.append((*_widened(text, m.start(), m.end()), "High-entropy token"))
    for m in _QUOTED_SECRET.finditer(text):
        group = next(g for g in ("dq", "sq", "bq", "cq", "rq") if m.group(g) is not None)
        spans.append((m.start(group), m.end(group), "Password or code"))
    for m in _BARE_SECRET.finditer(text):
        value = m.group("value").rstrip(".!?)")
        if value and value.lower() not in _NOT_A_VALUE and not _plain_word(value):
            spans.append((m.start("value"), m.start("value") + len(value), "Password or code"))
    for m in _CODE_LIST.finditer(text):
        codes = m.group("codes")
        if any(c.isdigit() for c in codes):
            spans.append((m.start("codes"), m.end("codes"), "Recovery codes"))
    spans += [(m.start(), m.end(), "Private Key") for m in _PEM_BLOCK.finditer(text)]
    for m in _PROSE_SECRET.finditer(text):
        value = m.group("value").rstrip(".!?)")
        if value.lower() in _NOT_A_VALUE or not value:
            continue
        spans.append((m.start("value"), m.start("value") + len(value), "Password or code"))
    for m in _CARD.finditer(text):
        digits = re.sub(r"\D", "", m.group())
        if 13 <= len(digits) <= 19 and _luhn(digits):
            spans.append((m.start(), m.end(), "Card number"))
    spans += [(m.start(), m.end(), "Redacted value") for m in _REDACTED_MARKER.finditer(text)]
    return _merged(spans)


def _merged(spans: list[tuple[int, int, str]]) -> list[tuple[int, int, str]]:
    merged: list[tuple[int, int, str]] = []
    for start, end, label in sorted(spans):
        if merged and start <= merged[-1][1]:
            prev = merged[-1]
            merged[-1] = (prev[0], max(prev[1], end), prev[2])
        else:
            merged.append((start, end, label))
    return merged


def contains_secret(text: str) -> bool:
    return bool(text) and bool(secret_spans(text))


# Names (identifier kinds, predicates) whose value is a secret whatever it looks like.
SECRET_IDENTIFIER_KINDS = re.compile(
    r"(?:^|_)(?:password|passwd|pwd|passphrase|passcode|pin|pin_code|otp|one_time_code|"
    r"credentials?|login_secret|"
    r"secret|secret_key|token|access_token|auth_token|api_?key|access_key|private_?key|cvv|"
    r"card_number|credit_card|security_code|verification_code|2fa_code)s?$"
)


def secret_name(name: str) -> bool:
    """Whether ``name`` (``apiKey``, ``password``, ``admin_password``) names a secret."""
    spaced = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name.strip())
    return bool(SECRET_IDENTIFIER_KINDS.search(re.sub(r"[^a-z0-9]+", "_", spaced.lower())))


def secret_refuse(text: str, *, what: str) -> None:
    """Refuse ``text`` (a fact value, an entity name, an identifier) if it holds a secret:
    a secret is never stored where agents read."""
    if contains_secret(text):
        raise secret_refusal(what=what)


def secret_refusal(*, what: str) -> ValidationFailed:
    """The refusal of ``what``, a secret (``secret_refused``)."""
    return ValidationFailed(
        f"{what} looks like a secret (a password, key, token, code or card number); "
        "secrets are never stored as memory",
        code="secret_refused",
    )


def text_redact(text: str) -> str:
    """``text`` with every secret replaced by ``[redacted]``."""
    return _redact(text, secret_spans(text))[0]


def _redact(text: str, spans: list[tuple[int, int, str]]) -> tuple[str, list[Flag]]:
    out: list[str] = []
    flags: list[Flag] = []
    at = 0
    for start, end, label in spans:
        out.append(text[at:start])
        position = sum(len(p) for p in out)
        out.append(REDACTED)
        flags.append(Flag("secret", label, position, position + len(REDACTED)))
        at = end
    out.append(text[at:])
    return "".join(out), flags


# --- instructions -------------------------------------------------------------------------

_INSTRUCTION_PATTERNS: tuple[tuple[str, str], ...] = (
    # Overriding what the agent was told, in several languages.
    (
        "ignore previous instructions",
        r"\b(?:ignore|disregard|forget|override|bypass)\b[^.\n]{0,40}?"
        r"\b(?:instructions?|prompts?|rules|guidelines|directives|system\s+message)\b",
    ),
    ("ignore previous instructions", r"\bignor(?:a|ez|e|ar)\b[^.\n]{0,40}?\binstru[cç][a-zçõ]*"),
    ("ignore previous instructions", r"\bignorier(?:e|en)?\b[^.\n]{0,40}?\banweisung"),
    ("ignore previous instructions", r"\b(?:dimentica|ignora)\b[^.\n]{0,40}?\bistruzion"),
    ("ignore previous instructions", r"(?:忽略|无视|無視)[^。\n]{0,20}(?:指令|指示|说明)"),
    ("ignore previous instructions", r"指示[^。\n]{0,10}無視"),
    # Telling the memory what to remember or forget.
    (
        "memory instruction",
        r"\b(?:remember|memori[sz]e|store|save|record|add|create|insert|write|keep)\b"
        r"[^.\n]{0,60}?\b(?:relationships?|relations?|edges?|nodes?|triples?|facts?|"
        r"in\s+(?:your|the)\s+memory|to\s+(?:your|the)\s+memory|permanently|forever)\b",
    ),
    (
        "memory instruction",
        r"\b(?:forget|delete|erase|wipe|remove)\b\s+(?:everything|all|every|any)\b"
        r"[^.\n]{0,40}?\b(?:about|you\s+know|memor|facts?|records?|previous)",
    ),
    (
        "memory instruction",
        r"\b(?:from\s+now\s+on|henceforth)\b[^.\n]{0,30}?\b(?:remember|treat|consider|"
        r"say|answer|respond|tell|you)\b",
    ),
    (
        "memory instruction",
        r"\b(?:note|message|instructions?)\s+(?:to|for)\s+(?:the\s+)?"
        r"(?:ai|assistant|agent|model|memory|llm|bot|system)\b",
    ),
    ("memory instruction", r"\b(?:update|overwrite|modify)\s+(?:your|the)\s+(?:memory|knowledge)"),
    (
        "memory instruction",
        r"\b(?:recuerda|memoriza|guarda|olvida|souviens[- ]toi|mémorise|retiens|oublie|"
        r"merke\s+dir|speichere|vergiss|ricorda|dimentica|lembre[- ]se|esqueça)\b"
        r"[^.\n]{0,60}?\b(?:que|siempre|todo|toujours|tout|que\s|immer|alles|sempre|tutto)\b",
    ),
    ("memory instruction", r"(?:记住|記住|忘记|忘記|覚えて|忘れて)"),
    # Addressing the agent as a system.
    ("role marker", r"(?im)^\s*(?:system|assistant|developer|user)\s*[:>]"),
    (
        "role marker",
        r"<\|(?:im_start|im_end|system|user|assistant|endoftext)\|>|\[/?INST\]|<<\s*/?SYS\s*>>|"
        r"</?(?:system|assistant|instructions?)>|#{2,}\s*(?:system|instruction)",
    ),
    (
        "system prompt",
        r"\b(?:system\s+prompt|you\s+are\s+now|new\s+instructions|act\s+as\s+(?:an?\s+)?"
        r"(?:admin|root|system|developer)|developer\s+mode|jailbreak)\b",
    ),
    # Persona and role-play: the reader told to be someone else.
    (
        "persona",
        r"\b(?:pretend|imagine|suppose)\b[^.\n]{0,20}?\b(?:you\s+are|you're|to\s+be|you\s+were)\b|"
        r"\b(?:role[\s-]?play|play\s+the\s+role|act\s+as\s+(?:if\s+you|the|an?)\b|"
        r"you\s+are\s+(?:now\s+)?(?:the|an?|my)\s+(?:\w+\s+)?(?:admin|administrator|"
        r"assistant|system|developer|operator|root|owner|memory|moderator)\b)",
    ),
    (
        "persona",
        r"\b(?:finge|fingi|finja|haz\s+como\s+si|fais\s+semblant|tu\s+so\s+als|"
        r"actúa\s+como|agis\s+comme|aja\s+como|agisci\s+come|du\s+bist\s+jetzt|"
        r"tu\s+es\s+maintenant|ahora\s+eres|ora\s+sei|agora\s+você\s+é)\b|"
        r"(?:假装|扮演|你现在是|ふりをして|になりきって)",
    ),
    # Claimed authority: the text says who it speaks for instead of saying something.
    (
        "claimed authority",
        r"\[\s*(?:admin|system|root|developer|operator|owner|security)[^\]\n]{0,30}\]|"
        r"\b(?:admin|administrator|system|root|developer|operator|security)\s+"
        r"(?:override|mode|command|directive|instruction)s?\b|"
        r"\bas\s+(?:the|your)\s+(?:memory|system|database|knowledge[\s-]?base|ai|agent's?)\s+"
        r"(?:admin|administrator|owner|operator)\b|"
        r"\bas\s+(?:the|your)\s+(?:admin|administrator)\s*,?\s*(?:i|we)\s+(?:order|instruct|"
        r"command|authori[sz]e|declare|confirm|require|override)\b|"
        r"\b(?:authori[sz]ed|approved|mandated|ordered)\s+by\s+(?:the\s+)?"
        r"(?:admin|administrator|system|management|security|developers?)\b|"
        r"(?:^|[.!?:]\s+)(?:please\s+)?(?:confirm|acknowledge|assert|certify)\s+that\b",
    ),
    (
        "claimed authority",
        r"\b(?:como|en\s+tant\s+que|als|come)\s+(?:el|la|le|l'|der|die|il|o|a)?\s*"
        r"(?:administrador|administrateur|administrator|amministratore|admin)\b|"
        r"(?:作为管理员|管理者として|管理员身份)",
    ),
    # Conditional answer instructions: what to say when someone asks.
    (
        "answer instruction",
        r"\b(?:when|whenever|if)\s+(?:anyone|anybody|someone|somebody|a\s+user|users|people|"
        r"they|you(?:'re|\s+are)?|the\s+user|asked)\b[^.\n]{0,60}?\b(?:ask|asks|asked|"
        r"queries|query|wants?\s+to\s+know|inquires?)\b[^.\n]{0,80}?\b(?:answer|say|"
        r"respond|reply|tell|state|claim|insist)\b",
    ),
    (
        "answer instruction",
        r"\b(?:cuando|si)\s+(?:alguien|cualquiera|un\s+usuario)\b[^.\n]{0,60}?"
        r"\b(?:responde|di|contesta|dile)\b|"
        r"\b(?:quand|si)\s+(?:quelqu'un|on|un\s+utilisateur)\b[^.\n]{0,60}?"
        r"\b(?:réponds|répondez|dis|dites)\b|"
        r"\b(?:wenn|falls)\s+(?:jemand|ein\s+nutzer|man)\b[^.\n]{0,60}?"
        r"\b(?:antworte|sag|sage|antworten)\b|"
        r"\b(?:quando|se)\s+(?:qualcuno|alguém|um\s+usuário)\b[^.\n]{0,60}?"
        r"\b(?:rispondi|di'|dì|responda|diga|responde)\b|"
        r"(?:有人问|如果有人)[^。\n]{0,30}(?:回答|就说)|(?:聞かれたら|尋ねられたら)",
    ),
    (
        "memory instruction",
        r"(?:^|[.!?:]\s*)(?:please\s+)?(?:store|save|record|memori[sz]e|log|persist)\s+"
        r"(?:this|that|it)\b",
    ),
    # Text shaped like a tool call.
    (
        "tool call",
        r"\{\s*\"(?:name|tool|function|tool_name)\"\s*:\s*\"[^\"]*\"\s*,\s*\"(?:arguments|"
        r"parameters|args|input)\"|\"tool_calls?\"\s*:|<(?:tool_call|function_call|invoke)\b|"
        r"\bfunctions\.\w+\s*\(",
    ),
)


@cache
def _instruction_regexes() -> tuple[tuple[str, re.Pattern[str]], ...]:
    return tuple((label, re.compile(p, re.IGNORECASE)) for label, p in _INSTRUCTION_PATTERNS)


# Hidden carriers: text a reader of the rendered page does not see, or sees disguised.
_HTML_COMMENT = re.compile(r"<!--.*?(?:-->|\Z)", re.DOTALL)
_MARKDOWN_COMMENT = re.compile(r"(?m)^\s*\[(?://|comment|_)\]:\s*(?:#|<>)?\s*[(\"'].*$")
_ZERO_WIDTH = re.compile("[\u200b-\u200f\u202a-\u202e\u2060-\u2064\ufeff\u00ad]")
_BASE64_RUN = re.compile(r"(?<![A-Za-z0-9+/=])[A-Za-z0-9+/]{24,}={0,2}(?![A-Za-z0-9+/=])")
# Cyrillic and Greek letters drawn like Latin ones; a word mixing them with Latin letters
# is spelled to slip past a reader.
_CONFUSABLES = str.maketrans(
    "аеорсухіјѕԁһӏԛԝАВЕКМНОРСТХІЈЅαεορτυνκΑΒΕΖΗΙΚΜΝΟΡΤΥΧ",
    "aeopcyxijsdhlqwABEKMHOPCTXIJSaeoptuvkABEZHIKMNOPTYX",
)
_MIXED_SCRIPT_WORD = re.compile(
    r"\b(?=\w*[A-Za-z])(?=\w*[\u0370-\u03ff\u0400-\u04ff])\w+\b", re.UNICODE
)


def _decoded_base64(run: str) -> str:
    import base64
    import binascii

    try:
        raw = base64.b64decode(run + "=" * (-len(run) % 4), validate=True)
        text = raw.decode("utf-8")
    except (binascii.Error, UnicodeDecodeError, ValueError):
        return ""
    printable = sum(c.isprintable() for c in text)
    return text if text and printable / len(text) > 0.95 and " " in text else ""


def _carrier_flags(text: str) -> tuple[list[Flag], list[str]]:
    """Flags for hidden carriers, and the texts they carry (read for instructions too)."""
    flags: list[Flag] = []
    carried: list[str] = []
    for regex, label in ((_HTML_COMMENT, "hidden comment"), (_MARKDOWN_COMMENT, "hidden comment")):
        for m in regex.finditer(text):
            if re.search(r"[^\W_]", m.group()):
                flags.append(Flag("instruction", label, m.start(), m.end()))
                carried.append(m.group())
    if _ZERO_WIDTH.search(text):
        first = _ZERO_WIDTH.search(text)
        assert first is not None
        flags.append(Flag("instruction", "hidden characters", first.start(), first.end()))
        carried.append(_ZERO_WIDTH.sub("", text))
    mixed = [m for m in _MIXED_SCRIPT_WORD.finditer(text)]
    if mixed:
        flags += [Flag("instruction", "homoglyphs", m.start(), m.end()) for m in mixed]
        carried.append(text.translate(_CONFUSABLES))
    for m in _BASE64_RUN.finditer(text):
        decoded = _decoded_base64(m.group())
        if decoded:
            flags.append(Flag("instruction", "encoded text", m.start(), m.end()))
            carried.append(decoded)
    return flags, carried


def instruction_flags(text: str) -> list[Flag]:
    flags, carried = _carrier_flags(text)
    for label, regex in _instruction_regexes():
        flags += [Flag("instruction", label, m.start(), m.end()) for m in regex.finditer(text)]
        for hidden in carried:  # an instruction inside a carrier is flagged where the carrier is
            if regex.search(hidden):
                flags.append(Flag("instruction", label, 0, len(text)))
    return sorted(set(flags), key=lambda f: (f.start, f.end, f.label))


def text_screen(text: str) -> Screened:
    """The text with its secrets redacted, and every flag over that redacted text. Encoded
    carriers (base64) are read before redaction: a long base64 run is also key-like."""
    encoded = [
        Flag("instruction", "encoded text", 0, 0)
        for m in _BASE64_RUN.finditer(text)
        if _decoded_base64(m.group())
    ]
    spans = secret_spans(text)
    redacted, secret_flags = _redact(text, spans)
    return Screened(
        text=redacted,
        flags=secret_flags + instruction_flags(redacted) + encoded[:1],
        secret_values=[text[start:end] for start, end, _ in spans if text[start:end] != REDACTED],
    )

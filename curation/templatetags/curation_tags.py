"""Small display filters for the dashboard templates."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from django import template
from django.utils.html import escape, format_html
from django.utils.safestring import mark_safe

from memory.kernel.wording import with_article

register = template.Library()


@register.filter
def thousands(value: Any) -> str:
    """1234567 → "1,234,567" (independent of locale settings)."""
    try:
        return f"{int(value):,}"
    except (TypeError, ValueError):
        return str(value)


@register.filter
def spaced(value: Any) -> str:
    """ "edit_distance" → "edit distance": a code name read as words."""
    return str(value).replace("_", " ")


@register.filter
def percent(value: float | None, digits: int = 0) -> str:
    """0.8312 → "83%"; None → "—"."""
    if value is None:
        return "—"
    return f"{value * 100:.{digits}f}%"


@register.filter
def undo_event(message: Any) -> int | None:
    """The audit event a message offers to undo (``extra_tags="undo:<id>"``), if any."""
    for tag in str(getattr(message, "extra_tags", "") or "").split():
        if tag.startswith("undo:") and tag[5:].isdigit():
            return int(tag[5:])
    return None


@register.filter
def undo_merge(message: Any) -> int | None:
    """The merge a message offers to undo (``extra_tags="merge:<id>"``), if any."""
    for tag in str(getattr(message, "extra_tags", "") or "").split():
        if tag.startswith("merge:") and tag[6:].isdigit():
            return int(tag[6:])
    return None


FLAGS = (
    ("single_valued", "single-valued"),
    ("is_aggregate", "aggregate"),
    ("exclude_from_prompt", "not in prompt"),
)


@register.filter
def flags(predicate: Any) -> list[tuple[str, str, bool]]:
    """A predicate's boolean flags as (field, label, on)."""
    return [(field, label, bool(getattr(predicate, field))) for field, label in FLAGS]


@register.filter
def flags_on(predicate: Any) -> list[str]:
    """The labels of the flags a predicate has set."""
    return [label for field, label in FLAGS if getattr(predicate, field)]


@register.filter
def get(mapping: Any, key: Any) -> Any:
    """``mapping[key]`` or None (templates cannot index by a variable)."""
    try:
        return mapping.get(key)
    except AttributeError:
        return None


@register.filter
def ago(moment: Any) -> str:
    """A past moment as "just now" (under a minute), else "3 minutes ago"."""
    from datetime import datetime

    from django.utils import timezone
    from django.utils.timesince import timesince

    if not isinstance(moment, datetime):
        return ""
    if (timezone.now() - moment).total_seconds() < 60:
        return "just now"
    return f"{timesince(moment)} ago"


@register.filter
def duration_ms(value: Any) -> str:
    """Milliseconds for a person: "112 ms", "2.4 s", "3 min 05 s"; None → "—"."""
    try:
        ms = float(value)
    except (TypeError, ValueError):
        return "—"
    if ms < 1000:
        return f"{ms:.0f} ms"
    if ms < 60_000:
        return f"{ms / 1000:.1f} s"
    minutes, seconds = divmod(round(ms / 1000), 60)
    return f"{minutes} min {seconds:02d} s"


@register.filter
def minutes_words(value: Any) -> str:
    """A span of minutes for a person: "90 minutes", "12 hours", "30 days"."""
    try:
        minutes = float(value)
    except (TypeError, ValueError):
        return "—"
    for size, unit in ((1440, "day"), (60, "hour")):
        if minutes >= 2 * size:
            amount = f"{minutes / size:.1f}".removesuffix(".0")
            return f"{amount} {unit}s"
    amount = f"{minutes:.2f}".rstrip("0").rstrip(".")
    return f"{amount} minute{'' if amount == '1' else 's'}"


@register.filter
def plural(count: Any, forms: str) -> str:
    """``3|plural:"fact,facts"`` → "3 facts"; ``1`` → "1 fact" (with thousands commas)."""
    singular, _, many = forms.partition(",")
    try:
        number = int(count)
    except (TypeError, ValueError):
        return f"{count} {many or singular}"
    return f"{number:,} {singular if number == 1 else (many or singular + 's')}"


@register.filter
def took(started: Any, finished: Any) -> str:
    """The time between two moments, as ``duration_ms`` writes it ("112 ms")."""
    try:
        return duration_ms((finished - started).total_seconds() * 1000)
    except (TypeError, AttributeError):
        return "—"


@register.simple_tag
def registry_categories_of(context: Any) -> list[str]:
    """The categories a context's registered predicates use (for a category picker)."""
    from memory.selectors.registry import registry_categories

    return registry_categories(context=context) if context is not None else []


def _fact_value(fact: Any) -> str:
    if fact is None:
        return "—"
    if getattr(fact, "object_id", None):
        return str(fact.object.name)
    return str(getattr(fact, "value_text", "") or "—")


@register.filter
def conflict_outcome(conflict: Any) -> str:
    """A resolved conflict in plain words: what was kept, and what became of the other."""
    old = f"“{_fact_value(conflict.current_fact)}”"
    new = f"“{_fact_value(conflict.contested_fact)}”"
    words = {
        "keep_current": f"Kept {old}; the new value {new} was retracted.",
        "keep_new": f"Kept the new value {new}; it replaced {old}.",
        "keep_both": f"Kept {old} as current and {new} as history.",
        "edit": f"A corrected value replaced {old}; the new value {new} was retracted.",
        "run_retracted": f"The run that wrote {new} was retracted; {old} stays.",
    }.get(str(conflict.resolution), "Resolved.")
    who = getattr(getattr(conflict, "resolved_by", None), "username", "")
    return words + (f" (by {who})" if who else "")


@register.filter
def outcome_label(outcome: str) -> str:
    """A run outcome as a filter label: "succeeded_with_warnings" → "With warnings"."""
    return {"succeeded_with_warnings": "With warnings"}.get(outcome, outcome.capitalize())


@register.filter
def run_outcome_words(run: Any) -> str:
    """A run's outcome in the runs list, with how many items it refused or changed:
    "succeeded · 2 not written · 1 warning"."""
    outcome = str(getattr(run, "outcome", ""))
    if outcome != "succeeded_with_warnings":
        return outcome
    summary = getattr(run, "summary", None) or {}
    parts = ["succeeded"]
    refused = int(summary.get("unresolved") or 0)
    warned = int(summary.get("warnings") or 0)
    if refused:
        parts.append(f"{refused:,} not written")
    if warned:
        parts.append(f"{warned:,} warning{'s' if warned != 1 else ''}")
    return " · ".join(parts)


@register.filter
def job_words(job: Any) -> str:
    """An import's state in plain words: "finished with 1 error", "importing", ..."""
    status = str(getattr(job, "status", ""))
    failed = int(getattr(job, "failed_count", 0) or 0)
    if status == "succeeded":
        return (
            f"finished with {failed:,} error{'s' if failed != 1 else ''}" if failed else "finished"
        )
    return {"pending": "waiting for a worker", "running": "importing", "failed": "failed"}.get(
        status, status
    )


@register.filter
def job_tone(job: Any) -> str:
    """The badge's colour class for ``job_words``."""
    status = str(getattr(job, "status", ""))
    if status == "succeeded":
        return "warn" if getattr(job, "failed_count", 0) else "ok"
    return {"failed": "bad", "running": "info", "pending": "info"}.get(status, "")


@register.filter
def waiting_long(job: Any, seconds: int = 3) -> bool:
    """A pending job nobody picked up for a few seconds (a worker takes it within one
    poll when it runs: saying "waiting" at once only flashes)."""
    from django.utils import timezone

    created = getattr(job, "created_at", None)
    if created is None:
        return False
    return (timezone.now() - created).total_seconds() >= seconds


@register.filter
def explain_field(name: str) -> str:
    """A field of a duplicate pair's explanation as a curator reads it: "name",
    "email (identifier)", "date_of_birth"."""
    kind, _, rest = str(name).partition(":")
    if kind == "prior":
        return "before any field"
    if kind == "id":
        return f"{rest} (identifier)"
    if kind == "attr":
        return rest.rpartition(":")[0] or rest
    return str(name)


@register.filter
def signed(value: float) -> str:
    """A weight with its sign: "+9.8", "−4.2" (a minus sign, not a hyphen)."""
    number = float(value)
    return f"+{number:.1f}" if number >= 0 else f"\u2212{abs(number):.1f}"


@register.filter(name="with_article")
def with_article_filter(word: Any) -> str:
    """``"admin"|with_article`` → "an admin"."""
    return with_article(str(word))


@register.filter
def any_inverse(aliases: Any) -> bool:
    """Whether any of these predicate aliases reads its predicate backwards."""
    return any(getattr(alias, "inverse", False) for alias in aliases)


@register.filter
def iso_datetime(value: Any) -> datetime | None:
    """An ISO 8601 string (as search results carry times) as a datetime; None if not one."""
    try:
        return datetime.fromisoformat(str(value)) if value else None
    except ValueError:
        return None


# How each finder of a duplicate pair reads to a curator (the chips on a cluster).
DUPLICATE_METHOD_WORDS = {
    "key": "same name once case, punctuation and legal suffixes are set aside",
    "alias": "one's name is the other's alias",
    "fingerprint": "same words, another order",
    "ngram": "similar spelling",
    "edit_distance": "a letter or two apart",
    "phonetic": "names sound alike",
    "word_sound": "a word sounds alike",
    "consonants": "same consonants",
    "identifier": "a shared identifier (e-mail, domain…)",
    "date": "a shared date",
    "code": "a shared code or number",
    "embedding": "close in meaning",
    "attributes": "attributes agree",
}
# The agreement levels whose label is shorthand.
DUPLICATE_LEVEL_WORDS = {
    "same consonants, only they": "same consonants, and no other name has them",
    "alike or same sounds": "alike, or sounding the same",
}


@register.filter
def method_words(method: str) -> str:
    """A duplicate finder's name in plain words ("phonetic" → "names sound alike")."""
    return DUPLICATE_METHOD_WORDS.get(str(method), str(method).replace("_", " "))


@register.filter
def level_words(level: str) -> str:
    """An agreement level of a duplicate explanation in plain words."""
    return DUPLICATE_LEVEL_WORDS.get(str(level), str(level))


@register.filter
def flagged_text(turn: Any) -> str:
    """A turn's text with what made it suspicious marked (``<mark>``, its reason as title)."""
    text: str = turn.text
    spans = sorted(
        (f for f in (turn.flags or []) if 0 <= f["start"] < f["end"] <= len(text)),
        key=lambda f: (f["start"], -f["end"]),
    )
    out, at = [], 0
    for flag in spans:
        if flag["start"] < at:
            continue  # overlapping flags: the first one marks the text
        out.append(escape(text[at : flag["start"]]))
        out.append(
            format_html(
                '<mark class="flag flag-{}" title="{}">{}</mark>',
                flag["kind"],
                flag["label"],
                text[flag["start"] : flag["end"]],
            )
        )
        at = flag["end"]
    out.append(escape(text[at:]))
    return mark_safe("".join(str(part) for part in out))  # noqa: S308  (every part escaped)

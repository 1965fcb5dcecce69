"""Which new facts agents are told at once and which wait for a curator: pure rules, asked
by the fact batch (services/facts/batch.py) for every write path — ``POST facts``, triples
and the chat model's extractions alike (docs/decisions/0090).

- ``fact_review`` ``off``: every fact is trusted (the store before the gate).
- ``untrusted`` (the default): what an untrusted token writes is pending.
- ``all``: that, and every fact the chat model extracts.
- Under ``untrusted`` and ``all``, what an agent relays from a tool, a document, an e-mail
  or the web (a memory whose ``source`` is ``tool``, ``document``, ``web``, ``email``,
  ``file`` — alone or as ``kind:detail`` — or an http(s) address) is pending with reason
  ``relayed_source``: second-hand text is what an attacker controls.
- Whatever the token, a fact extracted from a suspicious turn (memory/domain/screening.py) is
  pending with reason ``suspicious_turn`` unless the review is ``off``, and is never
  accepted automatically.

A pending fact is agreed to by a curator (services/facts/review.py) or by a trusted writer
other than its own writer stating the same claim (``confirms``; services/facts/batch_plan.py);
a rejected one stays rejected when it is written again.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.models import FactReview, FactTrust, TrustReason


@dataclass(frozen=True)
class WriteTrust:
    """The trust a batch's new facts take, and why (``reason`` empty when trusted)."""

    trust: str
    reason: str = ""

    @property
    def pending(self) -> bool:
        return self.trust == FactTrust.PENDING

    def confirms(self, pending_reason: str) -> bool:
        """Whether this writer stating a pending fact's claim accepts it: a trusted writer
        does, except for a claim from a suspicious turn, which only a curator accepts."""
        return not self.pending and pending_reason != TrustReason.SUSPICIOUS_TURN


TRUSTED = WriteTrust(FactTrust.TRUSTED)

# Where a memory's text came from, when an agent relays it rather than a person saying it.
RELAYED_SOURCES = frozenset({"tool", "document", "web", "email", "file", "search", "url"})


def source_relayed(source: str) -> bool:
    """Whether a memory's ``source`` (``user``, ``assistant``, ``tool``, ``web:…``, an
    address) names second-hand text."""
    value = source.strip().lower()
    if value.startswith(("http://", "https://")):
        return True
    return value.split(":", 1)[0].strip() in RELAYED_SOURCES


def write_trust_decide(
    *,
    policy: str,
    writer_trusted: bool,
    extracted: bool,
    turn_flagged: bool,
    relayed: bool = False,
) -> WriteTrust:
    """The trust of facts written under the context's ``fact_review`` ``policy`` by a
    trusted or untrusted writer, ``extracted`` by the chat model or not, from a flagged
    turn or not, ``relayed`` from a tool, document or the web or not."""
    if policy == FactReview.OFF:
        return TRUSTED
    if turn_flagged:
        return WriteTrust(FactTrust.PENDING, TrustReason.SUSPICIOUS_TURN)
    if relayed:
        return WriteTrust(FactTrust.PENDING, TrustReason.RELAYED_SOURCE)
    if not writer_trusted:
        return WriteTrust(FactTrust.PENDING, TrustReason.UNTRUSTED_WRITER)
    if policy == FactReview.ALL and extracted:
        return WriteTrust(FactTrust.PENDING, TrustReason.REVIEW_ALL)
    return TRUSTED

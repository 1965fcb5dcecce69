"""Fixtures for the command tests: the scripted OpenAI-compatible server (from the ingest
tests), for commands that embed through the configured model."""

from __future__ import annotations

from tests.ingest.conftest import fake_llm, fake_llm_server  # noqa: F401

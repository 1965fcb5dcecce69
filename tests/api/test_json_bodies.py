"""Request bodies and answers through orjson (memory/web/json_codec.py): what only the
standard library reads as sent still gets its own answer, a body nested too deeply is
malformed rather than a crash, and a bulk write answers as DRF's renderer did."""

from __future__ import annotations

import itertools
import json
from typing import Any

from rest_framework.renderers import JSONRenderer
from rest_framework.test import APIClient

from memory.models import Fact, Run
from tests.api.conftest import assert_error


def _post(api: APIClient, url: str, body: str) -> Any:
    return api.post(url, body, content_type="application/json")


def test_an_integer_past_64_bits_is_read_as_an_integer(api: APIClient, base: str) -> None:
    """orjson would read it as a float ("must be an integer"); the body is read as the
    standard library reads it, so the answer names the limit it passes, as before."""
    response = _post(
        api, f"{base}/search", '{"query": "x", "mode": "bm25", "k": 99999999999999999999}'
    )
    assert_error(response, 400, "invalid")
    assert response.json()["error"]["details"] == {
        "k": ["Ensure this value is less than or equal to 100."]
    }


def test_a_body_nested_too_deeply_is_malformed_and_writes_nothing(
    api: APIClient, base: str
) -> None:
    deep = "[" * 5_000 + "]" * 5_000
    body = f'{{"scope": "s", "infer": "triples", "triples": {{"entities": {deep}}}}}'
    assert_error(_post(api, f"{base}/memories", body), 400, "malformed")
    assert not Run.objects.exists()


def test_a_bulk_write_answers_what_drf_s_renderer_wrote(api: APIClient, base: str) -> None:
    names = [f"Person {i}" for i in range(50)]
    triples = {
        "entities": [{"name": n, "type": "person"} for n in names],
        "relations": [
            {"subject": a, "predicate": "knows", "object": b, "confidence": 0.25}
            for a, b in itertools.pairwise(names)
        ],
        "attributes": [{"subject": "Person 0", "key": "motto", "value": "line\u2028break ✓"}],
    }
    body = json.dumps({"scope": "s", "infer": "triples", "triples": triples, "wait": True})
    response = _post(api, f"{base}/memories", body)
    assert response.status_code == 200, response.content
    answer = response.json()
    assert answer["run"]["outcome"] == "succeeded"
    assert answer["run"]["input"]["triples"] == triples
    assert answer["run"]["created_at"].endswith("Z")  # DRF's spelling of UTC
    assert b"\\u2028" in response.content  # escaped, as DRF's renderer escapes it
    assert Fact.objects.count() == 50
    assert json.loads(JSONRenderer().render(answer)) == answer

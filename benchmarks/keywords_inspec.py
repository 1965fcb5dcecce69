"""Keyphrase quality on Inspec: F1@5 and F1@10 of our RAKE, rake-nltk's defaults and YAKE.

    .venv/bin/python -m benchmarks.keywords_inspec          # all 2,000 abstracts
    .venv/bin/python -m benchmarks.keywords_inspec --tiny   # 50 abstracts

One scorer for every method: a phrase is split into words (letters and digits), each
word lowercased and Snowball-stemmed; a prediction is correct when its stemmed form
equals a gold keyphrase's (gold = controlled ∪ uncontrolled keys). Predictions are
de-duplicated after stemming. Per abstract: P@k = correct / predictions returned
(at most k), R@k = correct / gold, F1 their harmonic mean; the table gives the mean
over abstracts (macro average). No database needed.

- ours: ``memory.search.keywords.keyphrases_extract`` (what ``document_create`` stores
  is its top 5 with score ≥ 0.8, i.e. the F1@5 column);
- rake-nltk defaults: ``Rake()`` with its default settings, except what cannot run
  here — NLTK's stopword corpus (replaced by scikit-learn's English list)
  and the punkt sentence model (replaced by a regex splitter on . ! ? and newlines);
- yake: ``yake.KeywordExtractor(lan="en", n=3, top=10)``, its defaults otherwise.
"""

from __future__ import annotations

import argparse
import re
import statistics
import sys
import time
import zipfile
from collections.abc import Callable

import Stemmer

from benchmarks.datasets import dataset, dataset_required
from benchmarks.search_common import ROOT, machine_line, markdown_table

sys.path.insert(0, str(ROOT))

_WORDS = re.compile(r"[^\W_]+")
_stemmer = Stemmer.Stemmer("english")


def normalize(phrase: str) -> str:
    return " ".join(_stemmer.stemWords(_WORDS.findall(phrase.lower())))


def load(limit: int | None) -> list[tuple[str, set[str]]]:
    with zipfile.ZipFile(dataset("inspec") / "Inspec.zip") as archive:
        names = sorted(
            (
                n
                for n in archive.namelist()
                if n.startswith("Inspec/docsutf8/") and n.endswith(".txt")
            ),
            key=lambda n: int(n.rsplit("/", 1)[1].split(".")[0]),
        )
        items = []
        for name in names[:limit]:
            raw = archive.read(name).decode("utf-8")
            title, _, body = raw.partition("\n")
            key_name = name.replace("docsutf8", "keys").replace(".txt", ".key")
            keys = archive.read(key_name).decode("utf-8").splitlines()
            gold = {normalize(k) for k in keys if k.strip()}
            items.append((f"{title.strip()}\n\n{body}", gold - {""}))
    return items


def scores(predicted: list[str], gold: set[str], k: int) -> float:
    top: list[str] = []
    for phrase in predicted:
        norm = normalize(phrase)
        if norm and norm not in top:
            top.append(norm)
        if len(top) == k:
            break
    if not top or not gold:
        return 0.0
    correct = len(set(top) & gold)
    precision, recall = correct / len(top), correct / len(gold)
    return 0.0 if not correct else 2 * precision * recall / (precision + recall)


def ours(text: str) -> list[str]:
    from memory.search.keywords import keyphrases_extract

    return [p.text for p in keyphrases_extract(text, limit=10)]


def rake_defaults() -> Callable[[str], list[str]]:
    from rake_nltk import Rake
    from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS

    rake = Rake(
        stopwords=set(ENGLISH_STOP_WORDS),
        sentence_tokenizer=lambda text: [s for s in re.split(r"(?<=[.!?])\s+|\n+", text) if s],
    )

    def extract(text: str) -> list[str]:
        rake.extract_keywords_from_text(text)
        return rake.get_ranked_phrases()[:30]

    return extract


def yake_default() -> Callable[[str], list[str]]:
    import yake

    extractor = yake.KeywordExtractor(lan="en", n=3, top=10)
    return lambda text: [phrase for phrase, _ in extractor.extract_keywords(text)]


def main() -> None:
    parser = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tiny", action="store_true", help="the first 50 abstracts")
    args = parser.parse_args()
    dataset_required("inspec", tiny=args.tiny)
    items = load(50 if args.tiny else None)
    methods: list[tuple[str, Callable[[str], list[str]]]] = [
        ("ours (rake-nltk, RAKE_STOPWORDS, regex tokenizers, 1–3 words)", ours),
        ("rake-nltk defaults (scikit-learn stopwords, regex sentences)", rake_defaults()),
        ("yake 0.7 defaults (n=3)", yake_default()),
    ]
    rows = []
    for label, extract in methods:
        started = time.perf_counter()
        predictions = [extract(text) for text, _ in items]
        seconds = time.perf_counter() - started
        f5 = statistics.fmean(scores(p, g, 5) for p, (_, g) in zip(predictions, items, strict=True))
        f10 = statistics.fmean(
            scores(p, g, 10) for p, (_, g) in zip(predictions, items, strict=True)
        )
        rows.append([label, f5, f10, seconds * 1000 / len(items)])
    print(f"Inspec: {len(items)} abstracts. {machine_line()}")
    print(markdown_table(["method", "F1@5", "F1@10", "ms / abstract"], rows))


if __name__ == "__main__":
    main()

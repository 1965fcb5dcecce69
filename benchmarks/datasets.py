"""Where the benchmarks find their third-party data sets, and what they say when one is absent.

The data sets are not part of the repository (their licences are research-only, and they
are large). They sit in one folder, ``MEMORY_BENCHMARK_DATA``; when that variable is unset,
the first ``shared/data`` folder beside the clone or one of its ancestors is used. Each data
set is a subfolder of it (``benchmarks/README.md`` lists them and where to get them).

A benchmark that needs an absent data set stops with a message that says how to get it.
Its ``--tiny`` smoke run says the data set is optional and exits 0, so CI passes on a
checkout without the data.
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
VARIABLE = "MEMORY_BENCHMARK_DATA"

# What each data set is and where it comes from, for the message when it is absent.
SOURCES = {
    "scifact": (
        "BEIR SciFact, test split in BEIR's layout (corpus.jsonl, queries.jsonl, "
        "qrels/test.tsv): unzip BEIR's scifact.zip"
    ),
    "inspec": (
        "Inspec abstracts with gold keyphrases (Inspec.zip): GitHub "
        "LIAAD/KeywordExtractor-Datasets, datasets/Inspec.zip"
    ),
    "locomo": (
        "LoCoMo conversations (locomo10.zip): GitHub snap-research/locomo, data/locomo10.zip"
    ),
}


def data_folder() -> Path | None:
    """``$MEMORY_BENCHMARK_DATA``, else the nearest ``shared/data`` beside the clone or an
    ancestor of it; ``None`` when neither exists."""
    configured = os.environ.get(VARIABLE)
    if configured:
        return Path(configured).expanduser()
    for folder in ROOT.parents:
        candidate = folder / "shared" / "data"
        if candidate.is_dir():
            return candidate
    return None


def dataset_present(name: str) -> bool:
    folder = data_folder()
    return folder is not None and (folder / name).is_dir()


def dataset(name: str) -> Path:
    """The folder of data set ``name``; ``FileNotFoundError`` saying how to get it when absent."""
    folder = data_folder()
    if folder is None or not (folder / name).is_dir():
        raise FileNotFoundError(_absent_message(name))
    return folder / name


def _absent_message(name: str) -> str:
    folder = data_folder()
    where = f"{folder / name}" if folder is not None else f"${VARIABLE}/{name}"
    how = (
        f"set {VARIABLE} to the folder that holds it"
        if folder is None
        else f"put it there, or set {VARIABLE} to a folder that holds it"
    )
    return (
        f"data set {name!r} not found at {where}. It is {SOURCES[name]}; {how} "
        f"(see benchmarks/README.md)."
    )


def dataset_required(name: str, *, tiny: bool) -> Path:
    """The folder of data set ``name``, or stop: with ``tiny`` (the CI smoke run) say the
    data set is optional and exit 0, otherwise exit 2 saying how to get it."""
    try:
        return dataset(name)
    except FileNotFoundError as absent:
        message = str(absent)
    if tiny:
        print(f"skipped: {message} The data set is optional; the smoke run passes without it.")
        sys.exit(0)
    print(message, file=sys.stderr)
    sys.exit(2)

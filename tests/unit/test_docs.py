"""What a reader of README.md, docs/*.md and ARCHITECTURE.md follows leads somewhere.

Every relative link points at a file of the repository and, with a ``#fragment``, at a
heading of that file (GitHub's anchors: lower case, punctuation dropped, spaces as ``-``);
the pages name no internal tracking numbers (``seed 002``, ``issue 13``) a user cannot look
up; every source path ARCHITECTURE.md names exists, and its reading path runs in order. The
``cairn`` command lines of the pages are run by ``tests/integration/test_readme_commands.py``.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]
README = REPO_ROOT / "README.md"
ARCHITECTURE = REPO_ROOT / "ARCHITECTURE.md"
INTERNALS = REPO_ROOT / "docs" / "internals.md"
DOCS = sorted((REPO_ROOT / "docs").glob("*.md"))
PAGES = [README, ARCHITECTURE, *DOCS]

LINK = re.compile(r"\]\(([^)\s]+)\)")
FENCE = re.compile(r"^```.*?^```", re.S | re.M)


def _prose(page: Path) -> str:
    """The page without its fenced code blocks (a link-like text in code is no link)."""
    return FENCE.sub("", page.read_text())


def anchor(heading: str) -> str:
    """GitHub's anchor of a heading.

    >>> anchor("`cairn doctor`: checkpoint advice from the job's own figures")
    'cairn-doctor-checkpoint-advice-from-the-jobs-own-figures'
    >>> anchor("Unaligned checkpoints, aligned-checkpoint timeout, buffer debloating")
    'unaligned-checkpoints-aligned-checkpoint-timeout-buffer-debloating'
    """
    text = re.sub(r"[^\w\- ]", "", heading.strip().lower())
    return text.replace(" ", "-")


def anchors(page: Path) -> set[str]:
    return {anchor(h) for h in re.findall(r"^#+ (.+)$", _prose(page), re.M)}


def test_there_are_pages_for_the_topics_the_readme_lists() -> None:
    names = {page.name for page in DOCS}
    for topic in ("savepoints", "event-time-and-windows", "state-backends", "storage"):
        assert f"{topic}.md" in names
    for topic in ("connectors", "operations", "performance", "security", "checkpointing"):
        assert f"{topic}.md" in names


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_relative_links_resolve(page: Path) -> None:
    broken = []
    for target in LINK.findall(_prose(page)):
        if re.match(r"[a-z]+:", target):  # http:, https:, mailto:
            continue
        path_part, _, fragment = target.partition("#")
        linked = (page.parent / path_part).resolve() if path_part else page
        if not linked.exists():
            broken.append(f"{target}: no file {linked}")
        elif fragment and linked.suffix == ".md" and fragment not in anchors(linked):
            broken.append(f"{target}: no heading #{fragment} in {linked.name}")
    assert not broken, "\n".join(broken)


@pytest.mark.parametrize("page", PAGES, ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_no_internal_tracking_numbers(page: Path) -> None:
    found = re.findall(r"\b(?:seed|issue)s? #?\d+", page.read_text(), re.I)
    assert not found, f"{page.name} names {found}: say what they are instead"


def test_the_readme_keeps_what_code_and_tests_point_at() -> None:
    text = README.read_text()
    # tests/integration/test_readme_commands.py runs the job of this section;
    # cairn.datastream.unsupported and cairn.table point users at the API table.
    for heading in ("## A job", "## DataStream API support"):
        assert f"\n{heading}\n" in text
    assert len(text.splitlines()) <= 300, "the README is a front page: details go to docs/"


def source_paths(page: Path) -> set[str]:
    """Paths a page names in backquotes: ``something.py`` or ``folder/``."""
    quoted = re.findall(r"`([^`\s]+)`", page.read_text())
    return {q for q in quoted if re.fullmatch(r"[\w./]+(\.py|/)", q) and not q.startswith(".")}


@pytest.mark.parametrize("page", [ARCHITECTURE, INTERNALS], ids=lambda p: p.name)
def test_every_path_the_maps_name_exists(page: Path) -> None:
    paths = source_paths(page)
    assert "runtime/record_writer.py" in paths or "runtime/barriers/" in paths, paths
    missing = [
        p
        for p in sorted(paths)
        if not (REPO_ROOT / "src" / "cairn" / p).exists() and not (REPO_ROOT / p).exists()
    ]
    assert not missing, f"{page.name} names paths that do not exist: {missing}"


def test_architecture_is_one_page() -> None:
    """The map stays a map: the lives of things go to docs/internals.md."""
    lines = ARCHITECTURE.read_text().splitlines()
    assert len(lines) <= 120, f"ARCHITECTURE.md has {len(lines)} lines; keep it to one page"
    for heading in ("## Layers", "## A reading path", "## House conventions"):
        assert heading in lines


def test_architecture_reading_path_reaches_the_barrier_handler() -> None:
    """The reading path goes launch → job master → worker → task builder → task → barrier
    handler → subtask checkpoint → coordinator, in that order."""
    text = ARCHITECTURE.read_text()
    path = text[text.index("## A reading path") :]
    path = path[: path.index("\n## ", 1)]
    steps = [
        "launch.py",
        "deploy/job_master.py",
        "deploy/worker.py",
        "deploy/task_builder.py",
        "runtime/task.py",
        "runtime/barriers/",
        "runtime/subtask_checkpoint.py",
        "checkpoint/coordinator.py",
    ]
    positions = [path.find(f"`{step}`") for step in steps]
    assert -1 not in positions, dict(zip(steps, positions, strict=True))
    assert positions == sorted(positions), dict(zip(steps, positions, strict=True))

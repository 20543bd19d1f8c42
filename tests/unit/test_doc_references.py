"""The docs point only at what the repository contains: every relative link and image in the
README and docs/ resolves to a committed file (not to test-artifacts/, which a run produces), and
nothing cites the design notes kept outside the repository."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)\)")


def _tracked() -> set[Path]:
    out = subprocess.run(["git", "ls-files", "--cached", "--others", "--exclude-standard"], cwd=ROOT, capture_output=True, text=True, check=True)
    return {(ROOT / line).resolve() for line in out.stdout.splitlines()}


def test_every_relative_link_and_image_resolves_to_a_repository_file():
    tracked = _tracked()
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").rglob("*.md"))]
    broken = []
    for page in pages:
        for target in LINK.findall(page.read_text()):
            if re.match(r"^[a-z]+:", target) or target.startswith("#"):
                continue
            path = (page.parent / target.split("#", 1)[0]).resolve()
            if path not in tracked and not (path.is_dir() and any(t.is_relative_to(path) for t in tracked)):
                broken.append(f"{page.relative_to(ROOT)} -> {target}")
    assert broken == []


def test_nothing_cites_files_kept_outside_the_repository():
    citing = [
        str(path.relative_to(ROOT))
        for path in _tracked()
        if path.suffix in (".py", ".md", ".txt", ".ini", ".toml", ".cfg") and path.exists() and "DESIGN.md" in path.read_text(errors="replace")
        and path != Path(__file__).resolve()
    ]
    assert citing == []

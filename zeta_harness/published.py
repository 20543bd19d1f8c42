"""What a reader of an output table finds in one partition: every file of every source.

The oracle of the publish tests (G3, G5), independent of the provider's bookkeeping: it lists the
partition the way Spark's partition discovery does (``source=<name>`` directories; names starting
with ``_`` or ``.`` are not data) and reads *every* data file, so a second attempt's file, an empty
source or a file of an unexpected token cannot hide behind a one-file-per-source sample. The commit
marker is read only to compare with what the files say, never to decide what is there.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path


@dataclass
class PublishedSource:
    files: list[str] = field(default_factory=list)  # data file names, sorted
    rows: list[dict] = field(default_factory=list)  # every row of every data file
    tokens: set[str] = field(default_factory=set)  # attempt tokens named by the files and the rows


@dataclass
class PublishedPartition:
    exists: bool
    sources: dict[str, PublishedSource]
    marker: dict | None

    def tokens(self) -> dict[str, set[str]]:
        return {name: source.tokens for name, source in self.sources.items()}


def read_partition(output: Path, ds: str | None = None, *, partition: str | None = None) -> PublishedPartition:
    """Every data file of every ``source=`` directory of one partition (JSON rows, as the counting
    job writes them without Spark): ``{output}/ds={ds}``, or ``{output}/{partition}`` for a rendered
    partition spec such as ``ds=2026-07-01/hour=10``. A file's token is taken from its name (the
    completed point prefixes ``<token>-``) and from each row's ``token`` field."""
    if (ds is None) == (partition is None):
        raise TypeError("read_partition: give either ds or partition")
    part = Path(output) / (f"ds={ds}" if partition is None else partition)
    if not part.is_dir():
        return PublishedPartition(False, {}, None)
    sources: dict[str, PublishedSource] = {}
    for folder in sorted(part.iterdir()):
        if not folder.is_dir() or not folder.name.startswith("source="):
            continue
        source = sources.setdefault(folder.name.removeprefix("source="), PublishedSource())
        for path in sorted(folder.rglob("*")):
            if path.is_dir() or path.name.startswith(("_", ".")):
                continue
            source.files.append(path.relative_to(folder).as_posix())
            source.tokens.add(path.name.split("-part-")[0] if "-part-" in path.name else "<unprefixed>")
            if path.suffix == ".json":
                rows = json.loads(path.read_text())
                source.rows += rows
                source.tokens.update(str(row.get("token")) for row in rows if "token" in row)
    marker_file = part / "_zeta_commit.json"
    marker = json.loads(marker_file.read_text()) if marker_file.exists() else None
    return PublishedPartition(True, sources, marker)

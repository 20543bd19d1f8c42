"""The README's pipeline example is the code of ``docs/examples/`` (which the real dag-processor
parses in ``tests/test_dags_import.py``), not a copy that drifts from it."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
EXAMPLES = {
    "docs/examples/orders_by_channel.py": "dag_id=\"orders_by_channel\"",
    "docs/examples/jobs/orders_by_channel_job.py": "def main() -> None:",
}


def _python_blocks(markdown: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", markdown, flags=re.S | re.M)


def test_readme_shows_the_example_dag_and_job_verbatim():
    blocks = _python_blocks((ROOT / "README.md").read_text())
    for path, marker in EXAMPLES.items():
        code = (ROOT / path).read_text()
        shown = [block for block in blocks if marker in block]
        assert len(shown) == 1, f"the README shows {path} once (a block holding {marker!r})"
        assert shown[0].strip() in code, f"the README's block differs from {path}"


def test_readme_example_is_not_the_shipped_demo_dag():
    example = (ROOT / "docs/examples/orders_by_channel.py").read_text()
    assert 'dag_id="zeta_regional_sales"' not in example
    assert "dags/zeta_regional_sales.py" not in example

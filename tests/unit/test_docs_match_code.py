"""The docs show the same decision table and settings as the code."""

from __future__ import annotations

import re
from pathlib import Path

from airflow_provider_zeta.core.deploy import DEPLOY_TABLE
from airflow_provider_zeta.get_provider_info import CONFIG_OPTIONS

ROOT = Path(__file__).resolve().parents[2]


def _table_rules(markdown: str, heading: str) -> list[str]:
    section = markdown.split(heading, 1)[1].split("\n#", 1)[0]
    return re.findall(r"^\| `([a-z_]+)` \|", section, flags=re.M)


def test_operator_page_lists_every_rule_in_table_order():
    page = (ROOT / "docs" / "operators" / "zeta_spark_job.md").read_text()
    assert _table_rules(page, "## The decision table") == [row.rule for row in DEPLOY_TABLE]


def test_readme_lists_every_config_option_with_its_default():
    readme = (ROOT / "README.md").read_text()
    for name, option in CONFIG_OPTIONS.items():
        assert f"| `{name}` | `{option['default']}` |" in readme, name

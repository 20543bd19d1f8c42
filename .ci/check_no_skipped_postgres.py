"""Fail when a PostgreSQL-backed test was skipped, or none ran (CI=true must exercise PostgreSQL)."""

import sys
import xml.etree.ElementTree as ET

report = ET.parse(sys.argv[1]).getroot()
postgres_cases = [case for case in report.iter("testcase") if "postgres" in case.get("name", "")]
skipped = [case.get("name") for case in postgres_cases if case.find("skipped") is not None]
if skipped:
    sys.exit(f"PostgreSQL-backed tests were skipped in CI: {skipped}")
if not postgres_cases:
    sys.exit("no PostgreSQL-backed test ran in CI")
print(f"{len(postgres_cases)} PostgreSQL-backed tests ran, none skipped")

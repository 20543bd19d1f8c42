"""The monitoring page: plain HTML rendered on the server from the API's JSON, no build step.

It is shown inside the Airflow UI as an external view (an iframe on the same origin, so the
browser's Airflow session cookie authenticates it) and also works opened on its own. It refreshes
itself: a few lines of JavaScript fetch the same URL with ``fragment=1`` every
``REFRESH_SECONDS`` and swap the content (a ``<noscript>`` meta refresh does the same without
JavaScript). Every value is escaped; nothing secret is in the JSON it is rendered from.
"""

from __future__ import annotations

import html
import time
from typing import Any, Mapping
from urllib.parse import quote, urlencode

from airflow_provider_zeta.core.monitor import Section

REFRESH_SECONDS = 5

SECTION_TITLES = {
    Section.RUNNING: "Running",
    Section.RETAINED: "Retained for cleanup",
    Section.ENDED: "Ended",
}
SECTION_HINTS = {
    Section.RUNNING: "Runs whose sources are deploying, running or being published.",
    Section.RETAINED: "Runs whose work is over; their staging data and tombstones are kept until the delayed cleanup's due time.",
    Section.ENDED: "Runs with nothing left on the state root.",
}
PHASE_COLORS = {
    "deploying": "#8a8a8a",
    "running": "#1f6feb",
    "ready": "#0b7285",
    "committed": "#2b8a3e",
    "failed": "#c92a2a",
    "cleanup_due": "#9c6500",
    "cleanup_overdue": "#c2410c",
    "awaiting_cleanup": "#9c6500",
    "cleaned": "#6b7280",
}
DRIVER_COLORS = {"running": "#1f6feb", "succeeded": "#2b8a3e", "failed": "#c92a2a", "lost": "#c2410c"}

_STYLE = """
body{font-family:system-ui,-apple-system,Segoe UI,Roboto,sans-serif;margin:16px;color:#1f2328;background:#fff}
h1{font-size:20px;margin:0 0 4px} h2{font-size:16px;margin:22px 0 4px}
.hint,.meta{color:#59636e;font-size:12px;margin:0 0 8px}
table{border-collapse:collapse;width:100%;font-size:13px;margin-bottom:6px}
th,td{border-bottom:1px solid #d8dee4;padding:4px 8px;text-align:left;vertical-align:top}
th{background:#f6f8fa;font-weight:600}
.run{background:#f6f8fa} .run td{border-top:2px solid #d0d7de}
.badge{display:inline-block;padding:1px 8px;border-radius:10px;color:#fff;font-size:12px;white-space:nowrap}
.mono{font-family:ui-monospace,SFMono-Regular,Menlo,monospace;font-size:12px}
.pager a{margin-right:12px} .empty{color:#59636e;font-style:italic}
.err{color:#c92a2a;font-size:12px}
@media (prefers-color-scheme: dark){body{background:#0d1117;color:#e6edf3}th,.run{background:#161b22}
th,td{border-color:#30363d}.hint,.meta,.empty{color:#9198a1}a{color:#58a6ff}}
"""

_SCRIPT = """
(function(){
  var every = %d * 1000;
  function refresh(){
    var url = new URL(window.location.href); url.searchParams.set('fragment','1');
    fetch(url.toString(), {credentials:'same-origin', headers:{'Accept':'text/html'}})
      .then(function(r){ if(!r.ok){ throw new Error('HTTP '+r.status); } return r.text(); })
      .then(function(t){ document.getElementById('zeta-content').innerHTML = t; })
      .catch(function(e){ var m=document.getElementById('zeta-refresh-error'); if(m){ m.textContent=' (refresh failed: '+e.message+'; log in to Airflow again)'; } })
      .finally(function(){ setTimeout(refresh, every); });
  }
  setTimeout(refresh, every);
})();
"""


def _e(value: Any) -> str:
    return html.escape("" if value is None else str(value), quote=True)


def _badge(text: str, color: str) -> str:
    return f'<span class="badge" style="background:{color}">{_e(text)}</span>'


def _link(query: Mapping[str, str], **changes: Any) -> str:
    merged = {k: v for k, v in query.items() if k != "fragment"}
    merged.update({k: str(v) for k, v in changes.items()})
    return "ui?" + urlencode(merged)


def _source_rows(run: Mapping[str, Any], pipeline: Mapping[str, Any]) -> str:
    rows = []
    for source in pipeline["sources"]:
        link_target = "Spark UI" if source.get("spark_ui_url") else "driver log"
        link = (  # no link without access to the DAG's task logs
            f'<a href="{_e(source["driver_link"].removeprefix("/zeta/"))}" target="_blank" rel="noopener">{link_target}</a>'
            if source.get("driver_link")
            else "-"
        )
        error = f'<div class="err">{_e(source["error"])}</div>' if source.get("error") else ""
        rows.append(
            "<tr>"
            f"<td>{_e(source['source'])}</td>"
            f'<td class="mono">{_e(source["task_id"])}</td>'
            f"<td>{_e(source['task_state'] or '-')}</td>"
            f"<td>{_badge(source['driver'], DRIVER_COLORS.get(source['driver'], '#6b7280'))}{error}</td>"
            f'<td class="mono">{_e(source["token"] or "-")}</td>'
            f"<td>{_e(source['heartbeat_age_text'])}</td>"
            f"<td>{_e(source['checkpoint_age_text'])}</td>"
            f"<td>{_e('-' if source['rows'] is None else source['rows'])}</td>"
            f"<td>{link}</td>"
            "</tr>"
        )
    return "".join(rows)


def _run_block(run: Mapping[str, Any]) -> str:
    airflow_run = _e(f"../dags/{quote(run['dag_id'], safe='')}/runs/{quote(run['run_id'], safe='')}")
    parts = []
    for pipeline in run["pipelines"]:
        phase = pipeline["phase"]
        parts.append(
            '<tr class="run">'
            f'<td colspan="3"><a href="{airflow_run}" target="_top" class="mono">{_e(run["dag_id"])} / {_e(run["run_id"])}</a>'
            f" &middot; pipeline <b>{_e(pipeline['pipeline'] or '(jobs)')}</b></td>"
            f'<td colspan="2" data-phase="{_e(phase)}">{_badge(pipeline["phase_text"], PHASE_COLORS.get(phase, "#6b7280"))}</td>'
            f'<td colspan="2" class="ready">ready {pipeline["ready"]} of {pipeline["total"]}</td>'
            f"<td colspan=\"2\">run {_e(run['run_state'])}</td>"
            "</tr>"
            + _source_rows(run, pipeline)
        )
    if run.get("error"):  # the run's state could not be read: an error on its own row
        parts.append(
            '<tr class="run">'
            f'<td colspan="3"><a href="{airflow_run}" target="_top" class="mono">{_e(run["dag_id"])} / {_e(run["run_id"])}</a></td>'
            f'<td colspan="6" class="err" data-error="run">cannot be shown: {_e(run["error"])}</td>'
            "</tr>"
        )
    return "".join(parts)


def render_section(section: Section, data: Mapping[str, Any], query: Mapping[str, str]) -> str:
    total, limit, offset = data["total"], data["limit"], data["offset"]
    head = (
        f'<h2 id="section-{section.value}">{SECTION_TITLES[section]} ({total})</h2>'
        f'<p class="hint">{_e(SECTION_HINTS[section])}</p>'
    )
    if not data["runs"]:
        return head + '<p class="empty">none</p>'
    table = (
        f'<table data-section="{section.value}"><thead><tr><th>source</th><th>deploy task</th><th>task state</th>'
        "<th>driver</th><th>attempt token</th><th>heartbeat</th><th>last checkpoint</th><th>rows</th>"
        "<th>link</th></tr></thead><tbody>" + "".join(_run_block(run) for run in data["runs"]) + "</tbody></table>"
    )
    key = f"{section.value}_offset"
    pager = []
    if offset > 0:
        pager.append(f'<a href="{_e(_link(query, **{key: max(0, offset - limit)}))}">&lsaquo; newer</a>')
    if offset + limit < total:
        pager.append(f'<a href="{_e(_link(query, **{key: offset + limit}))}">older &rsaquo;</a>')
    shown = f"{offset + 1}&ndash;{min(total, offset + limit)} of {total}"
    return head + table + f'<p class="pager meta">{shown} {"".join(pager)}</p>'


def render_sections(
    sections: Mapping[Section, Mapping[str, Any]],
    query: Mapping[str, str],
    now: float,
    dag_id: str | None = None,
    run_id: str | None = None,
) -> str:
    scope = "all DAGs you can read"
    if dag_id and run_id:
        scope = f"run {_e(run_id)} of {_e(dag_id)} (<a href=\"ui\">all runs</a>)"
    elif dag_id:
        scope = f"DAG {_e(dag_id)} (<a href=\"ui\">all DAGs</a>)"
    updated = time.strftime("%H:%M:%S", time.localtime(now))
    meta = (
        f'<p class="meta">Showing {scope}. Updated <span id="zeta-updated">{updated}</span>; '
        f'refreshes every {REFRESH_SECONDS} s<span id="zeta-refresh-error"></span>.</p>'
    )
    return meta + "".join(render_section(section, sections[section], query) for section in Section)


def render_page(content: str) -> str:
    return (
        "<!doctype html><html><head><meta charset=\"utf-8\"><title>Zeta pipelines</title>"
        f'<meta name="viewport" content="width=device-width, initial-scale=1"><style>{_STYLE}</style>'
        f'<noscript><meta http-equiv="refresh" content="{REFRESH_SECONDS}"></noscript></head><body>'
        "<h1>Zeta pipelines</h1>"
        f'<div id="zeta-content">{content}</div>'
        f"<script>{_SCRIPT % REFRESH_SECONDS}</script></body></html>"
    )

"""The monitoring page: plain HTML rendered on the server from the API's JSON, no build step.

It is shown inside the Airflow UI as an external view (an iframe on the same origin, so the
browser's Airflow session cookie authenticates it) and also works opened on its own. It refreshes
itself: a few lines of JavaScript fetch the same URL with ``fragment=1`` every
``REFRESH_SECONDS`` and swap the content (a ``<noscript>`` meta refresh does the same without
JavaScript). It is rendered with Jinja2 templates (the strings below) with autoescaping on: every
value is escaped where the template prints it, none is marked safe by hand; nothing secret is in
the JSON it is rendered from.
"""

from __future__ import annotations

import time
from collections.abc import Mapping
from typing import Any
from urllib.parse import quote, urlencode

from jinja2 import Environment
from markupsafe import Markup

from airflow_provider_zeta.core.freshness import describe_age
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
.audit{font-size:12px;white-space:nowrap} .audit.ok{color:#2b8a3e} .audit.bad{color:#c92a2a;font-weight:600}
.chart{margin:4px 0 14px} .chart svg{max-width:100%;height:auto} .legend span{margin-right:12px;font-size:12px}
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


# The templates are written on single lines (string concatenation), so the page carries no
# whitespace of the template's layout. ``badge`` is a macro: its text is escaped like any value.
_SECTION_TEMPLATE = (
    '{% macro badge(text, color) %}<span class="badge" style="background:{{ color }}">{{ text }}</span>{% endmacro %}'
    '<h2 id="section-{{ section }}">{{ title }} ({{ total }})</h2><p class="hint">{{ hint }}</p>'
    "{% if not runs %}"
    '<p class="empty">none</p>'
    "{% else %}"
    '<table data-section="{{ section }}"><thead><tr><th>source</th><th>deploy task</th><th>task state</th>'
    "<th>driver</th><th>attempt token</th><th>heartbeat</th><th>last checkpoint</th><th>rows</th>"
    "<th>audits</th><th>link</th></tr></thead><tbody>"
    "{% for run in runs %}"
    "{% for pipeline in run.pipelines %}"
    '<tr class="run">'
    '<td colspan="3"><a href="{{ run.airflow_run }}" target="_top" class="mono">{{ run.dag_id }} / {{ run.run_id }}</a>'
    " &middot; pipeline <b>{{ pipeline.name }}</b></td>"
    '<td colspan="2" data-phase="{{ pipeline.phase }}">{{ badge(pipeline.phase_text, pipeline.phase_color) }}</td>'
    '<td colspan="2" class="ready">ready {{ pipeline.ready }} of {{ pipeline.total }}</td>'
    '<td colspan="3">run {{ run.run_state }}'
    "{% if pipeline.audits is not none %}"
    ' &middot; <span class="audit {{ "ok" if pipeline.audits.passed else "bad" }}" data-audits="{{ pipeline.name }}">'
    "{% if pipeline.audits.passed %}audits passed{% else %}audit failed: {{ pipeline.audits.failed_sources|join(', ') }}{% endif %}"
    "</span>{% endif %}</td>"
    "</tr>"
    "{% for source in pipeline.sources %}"
    "<tr>"
    "<td>{{ source.source }}</td>"
    '<td class="mono">{{ source.task_id }}</td>'
    "<td>{{ source.task_state }}</td>"
    "<td>{{ badge(source.driver, source.driver_color) }}"
    '{% if source.error %}<div class="err">{{ source.error }}</div>{% endif %}'
    '{% if source.refusal %}<div class="err" data-refusal="{{ source.task_id }}">{{ source.refusal }}</div>{% endif %}</td>'
    '<td class="mono">{{ source.token }}</td>'
    "<td>{{ source.heartbeat }}</td>"
    "<td>{{ source.checkpoint }}</td>"
    "<td>{{ source.rows }}</td>"
    '<td data-source-audits="{{ source.source }}">'
    "{% for audit in source.audits %}"
    '<div class="audit {{ "ok" if audit.passed else "bad" }}" data-audit="{{ audit.audit }}" data-passed="{{ audit.passed|lower }}"'
    ' title="{{ audit.message }}">{{ "&#10003;"|safe if audit.passed else "&#10007;"|safe }} {{ audit.audit }}: {{ audit.numbers_text }}</div>'
    "{% if not audit.passed %}<div class=\"err\">{{ audit.message }}</div>{% endif %}"
    "{% else %}-{% endfor %}"
    "</td>"
    "<td>"
    "{% if source.link is not none %}"  # no link without access to the DAG's task logs
    '<a href="{{ source.link }}" target="_blank" rel="noopener">{{ source.link_target }}</a>'
    "{% else %}-{% endif %}"
    "</td>"
    "</tr>"
    "{% endfor %}"
    "{% endfor %}"
    "{% if run.error %}"  # the run's state could not be read: an error on its own row
    '<tr class="run">'
    '<td colspan="3"><a href="{{ run.airflow_run }}" target="_top" class="mono">{{ run.dag_id }} / {{ run.run_id }}</a></td>'
    '<td colspan="7" class="err" data-error="run">cannot be shown: {{ run.error }}</td>'
    "</tr>"
    "{% endif %}"
    "{% endfor %}"
    "</tbody></table>"
    '<p class="pager meta">{{ first }}&ndash;{{ last }} of {{ total }} '
    '{% if newer is not none %}<a href="{{ newer }}">&lsaquo; newer</a>{% endif %}'
    '{% if older is not none %}<a href="{{ older }}">older &rsaquo;</a>{% endif %}'
    "</p>"
    "{% endif %}"
)

_META_TEMPLATE = (
    '<p class="meta">Showing '
    "{% if dag_id and run_id %}"
    'run {{ run_id }} of {{ dag_id }} (<a href="ui">all runs</a>)'
    "{% elif dag_id %}"
    'DAG {{ dag_id }} (<a href="ui">all DAGs</a>)'
    "{% else %}"
    "all DAGs you can read"
    "{% endif %}"
    '. Updated <span id="zeta-updated">{{ updated }}</span>; '
    'refreshes every {{ refresh }} s<span id="zeta-refresh-error"></span>.</p>'
)

# The overview's overdue cleanups (``Monitor.overdue``): a line when there are none, else a table of
# the DAGs with overdue records (and a total), one row per unreadable record, and what to do.
_OVERDUE_TEMPLATE = (
    '<div id="zeta-overdue" data-overdue-count="{{ count }}" data-unreadable-count="{{ unreadable|length }}">'
    "{% if error %}"
    '<p class="err" data-error="overdue">{{ error }}</p>'
    "{% elif not count and not unreadable %}"
    '<p class="meta">Overdue cleanups: none (records pending more than {{ grace }} past their due time).</p>'
    "{% else %}"
    '<h2 id="section-overdue">Overdue cleanups ({{ count }})</h2>'
    '<p class="hint" data-hint="overdue">{{ hint }}</p>'
    '<table data-section="overdue"><thead><tr><th>DAG</th><th>records past due + {{ grace }}</th>'
    "<th>most overdue by</th></tr></thead><tbody>"
    "{% for row in dags %}"
    '<tr data-overdue-dag="{{ row.dag_id }}"><td class="mono">{{ row.dag_id }}</td>'
    '<td class="count">{{ row.count }}</td><td class="late">{{ row.most_late_text }}</td></tr>'
    "{% endfor %}"
    "{% for row in unreadable %}"
    '<tr data-unreadable="{{ row.dag_id }}"><td class="mono">{{ row.dag_id }}</td>'
    '<td colspan="2" class="err">{{ row.where }}: {{ row.error }}</td></tr>'
    "{% endfor %}"
    '<tr class="run" data-overdue-total="{{ count }}"><td>total</td><td class="count">{{ count }}</td>'
    '<td class="late">{{ most_late }}</td></tr>'
    "</tbody></table>"
    "{% endif %}"
    "</div>"
)

_PAGE_TEMPLATE = (
    '<!doctype html><html><head><meta charset="utf-8"><title>Zeta pipelines</title>'
    '<meta name="viewport" content="width=device-width, initial-scale=1"><style>{{ style }}</style>'
    '<noscript><meta http-equiv="refresh" content="{{ refresh }}"></noscript></head><body>'
    "<h1>Zeta pipelines</h1>"
    '<div id="zeta-content">{{ content }}</div>'
    "<script>{{ script }}</script></body></html>"
)

# The DAG's page: rows per source of each pipeline over its last runs, one inline SVG per pipeline.
# The geometry (numbers only) is computed in ``rows_charts``; every text is escaped here.
_ROWS_TEMPLATE = (
    '<div id="zeta-rows" data-dag="{{ dag_id }}">'
    "{% if charts %}"
    "<h2>Rows per source (last {{ runs }} runs)</h2>"
    '<p class="hint">Rows each source published, or reported to an audit that refused the publish (ringed red).</p>'
    "{% for chart in charts %}"
    '<div class="chart" data-pipeline="{{ chart.pipeline }}" data-runs="{{ chart.runs|length }}">'
    '<p class="meta">pipeline <b>{{ chart.pipeline }}</b>: {{ chart.runs|first }} &ndash; {{ chart.runs|last }}</p>'
    '<svg xmlns="http://www.w3.org/2000/svg" width="{{ chart.width }}" height="{{ chart.height }}" '
    'viewBox="0 0 {{ chart.width }} {{ chart.height }}" role="img" aria-label="rows per source of pipeline {{ chart.pipeline }}">'
    '<line x1="{{ chart.left }}" y1="{{ chart.bottom }}" x2="{{ chart.right }}" y2="{{ chart.bottom }}" stroke="#8a8a8a"/>'
    '<line x1="{{ chart.left }}" y1="{{ chart.top }}" x2="{{ chart.left }}" y2="{{ chart.bottom }}" stroke="#8a8a8a"/>'
    '<text x="{{ chart.left - 4 }}" y="{{ chart.top + 4 }}" text-anchor="end" font-size="10" fill="#59636e">{{ chart.max_rows }}</text>'
    '<text x="{{ chart.left - 4 }}" y="{{ chart.bottom }}" text-anchor="end" font-size="10" fill="#59636e">0</text>'
    "{% for series in chart.series %}"
    '<polyline fill="none" stroke="{{ series.color }}" stroke-width="1.5" points="{{ series.polyline }}"/>'
    "{% for point in series.points %}"
    '<circle cx="{{ point.x }}" cy="{{ point.y }}" r="3" fill="{{ series.color }}"'
    '{% if point.refused %} stroke="#c92a2a" stroke-width="2"{% endif %}'
    ' data-source="{{ series.source }}" data-run="{{ point.run_id }}" data-rows="{{ point.rows }}" data-status="{{ point.status }}">'
    "<title>{{ point.run_id }}: {{ series.source }} {{ point.rows }} rows ({{ point.status }})</title></circle>"
    "{% endfor %}"
    "{% endfor %}"
    "</svg>"
    '<div class="legend">'
    '{% for series in chart.series %}<span style="color:{{ series.color }}">&#9632; {{ series.source }}</span>{% endfor %}'
    "</div></div>"
    "{% endfor %}"
    "{% endif %}"
    "</div>"
)
SERIES_COLORS = ("#1f6feb", "#2b8a3e", "#9c6500", "#8250df", "#0b7285", "#c2410c", "#6b7280", "#bf3989")
CHART_WIDTH, CHART_HEIGHT = 560, 150
CHART_LEFT, CHART_RIGHT, CHART_TOP, CHART_BOTTOM = 44, 550, 10, 130

# Autoescaping on for every template: a value is escaped unless it is Markup, and only the page's
# own constants and the already rendered content are. ``None`` prints as nothing.
_ENV = Environment(autoescape=True, finalize=lambda value: "" if value is None else value)
_SECTION = _ENV.from_string(_SECTION_TEMPLATE)
_META = _ENV.from_string(_META_TEMPLATE)
_OVERDUE = _ENV.from_string(_OVERDUE_TEMPLATE)
_PAGE = _ENV.from_string(_PAGE_TEMPLATE)
_ROWS = _ENV.from_string(_ROWS_TEMPLATE)


def _entities(rendered: str) -> str:
    """Jinja2 (MarkupSafe) writes ``"`` and ``'`` as ``&#34;`` and ``&#39;``; the page has always
    written them as ``&quot;`` and ``&#x27;`` (``html.escape``): the same characters, kept as they
    were. Neither sequence can come from a value (its ``&`` is escaped) or from the templates."""
    return rendered.replace("&#34;", "&quot;").replace("&#39;", "&#x27;")


def _link(query: Mapping[str, str], **changes: Any) -> str:
    merged = {k: v for k, v in query.items() if k != "fragment"}
    merged.update({k: str(v) for k, v in changes.items()})
    return "ui?" + urlencode(merged)


def _source_view(source: Mapping[str, Any]) -> dict[str, Any]:
    link = source["driver_link"].removeprefix("/zeta/") if source.get("driver_link") else None
    return {
        "source": source["source"],
        "task_id": source["task_id"],
        "task_state": source["task_state"] or "-",
        "driver": source["driver"],
        "driver_color": DRIVER_COLORS.get(source["driver"], "#6b7280"),
        "error": source.get("error"),
        "refusal": source.get("refusal"),
        "token": source["token"] or "-",
        "heartbeat": source["heartbeat_age_text"],
        "checkpoint": source["checkpoint_age_text"],
        "rows": "-" if source["rows"] is None else source["rows"],
        "link": link,
        "link_target": "Spark UI" if source.get("spark_ui_url") else "driver log",
        "audits": [
            {**audit, "numbers_text": _numbers_text(audit.get("numbers") or {})} for audit in source.get("audits") or []
        ],
    }


def _numbers_text(numbers: Mapping[str, Any]) -> str:
    """An audit's numbers in one short line, e.g. ``rows=1 min=3 max=100`` (empty lists and None left out)."""
    return " ".join(f"{key}={value}" for key, value in numbers.items() if value not in (None, [], {}))


def _run_view(run: Mapping[str, Any]) -> dict[str, Any]:
    return {
        "dag_id": run["dag_id"],
        "run_id": run["run_id"],
        "run_state": run["run_state"],
        "error": run.get("error"),
        "airflow_run": f"../dags/{quote(run['dag_id'], safe='')}/runs/{quote(run['run_id'], safe='')}",
        "pipelines": [
            {
                "name": pipeline["pipeline"] or "(jobs)",
                "phase": pipeline["phase"],
                "phase_text": pipeline["phase_text"],
                "phase_color": PHASE_COLORS.get(pipeline["phase"], "#6b7280"),
                "ready": pipeline["ready"],
                "total": pipeline["total"],
                "audits": pipeline.get("audits"),
                "sources": [_source_view(source) for source in pipeline["sources"]],
            }
            for pipeline in run["pipelines"]
        ],
    }


def render_section(section: Section, data: Mapping[str, Any], query: Mapping[str, str]) -> str:
    """The HTML of one section of the page: its runs and the links to newer and older ones."""
    total, limit, offset = data["total"], data["limit"], data["offset"]
    key = f"{section.value}_offset"
    return _entities(
        _SECTION.render(
            section=section.value,
            title=SECTION_TITLES[section],
            hint=SECTION_HINTS[section],
            total=total,
            runs=[_run_view(run) for run in data["runs"]],
            first=offset + 1,
            last=min(total, offset + limit),
            newer=_link(query, **{key: max(0, offset - limit)}) if offset > 0 else None,
            older=_link(query, **{key: offset + limit}) if offset + limit < total else None,
        )
    )


def render_overdue(overdue: Mapping[str, Any]) -> str:
    """The overdue cleanups of the overview, from the API's ``overdue_cleanups``."""
    grace = overdue.get("grace_s")
    return _entities(
        _OVERDUE.render(
            error=overdue.get("error"),
            count=overdue.get("count") or 0,
            most_late=overdue.get("most_late_text") or "-",
            grace="-" if grace is None else describe_age(grace),
            dags=overdue.get("dags") or [],
            unreadable=overdue.get("unreadable") or [],
            hint=overdue.get("hint"),
        )
    )


def render_sections(
    sections: Mapping[Section, Mapping[str, Any]],
    query: Mapping[str, str],
    now: float,
    dag_id: str | None = None,
    run_id: str | None = None,
    overdue: Mapping[str, Any] | None = None,
) -> str:
    """The page's content; ``overdue``: the overview's overdue cleanups (not shown for one run)."""
    meta = _entities(
        _META.render(
            dag_id=dag_id, run_id=run_id, updated=time.strftime("%H:%M:%S", time.localtime(now)), refresh=REFRESH_SECONDS
        )
    )
    head = meta + (render_overdue(overdue) if overdue is not None else "")
    return head + "".join(render_section(section, sections[section], query) for section in Section)


def rows_charts(history: Mapping[str, Any]) -> list[dict[str, Any]]:
    """The charts of ``/zeta/api/rows``'s answer: per pipeline, its runs (oldest first) along x and
    one series per source (rows along y, from 0 to the largest count shown); points without a count
    are left out."""
    charts = []
    for pipeline, points in sorted((history.get("pipelines") or {}).items()):
        if not points:
            continue
        sources = sorted({source for point in points for source in point.get("rows") or {}})
        counts = [c for point in points for c in (point.get("rows") or {}).values() if isinstance(c, int)]
        top = max(counts, default=0) or 1
        step = (CHART_RIGHT - CHART_LEFT) / (len(points) - 1) if len(points) > 1 else 0.0
        xs = [round(CHART_LEFT + i * step if step else (CHART_LEFT + CHART_RIGHT) / 2, 1) for i in range(len(points))]
        series = []
        for number, source in enumerate(sources):
            shown = []
            for index, point in enumerate(points):
                count = (point.get("rows") or {}).get(source)
                if not isinstance(count, int):
                    continue
                y = round(CHART_BOTTOM - (CHART_BOTTOM - CHART_TOP) * count / top, 1)
                refused = point.get("status") == "audit_failed" and source in (point.get("failed_sources") or [])
                shown.append({"x": xs[index], "y": y, "rows": count, "run_id": point.get("run_id"),
                              "status": point.get("status"), "refused": refused})
            series.append({
                "source": source,
                "color": SERIES_COLORS[number % len(SERIES_COLORS)],
                "points": shown,
                "polyline": " ".join(f"{p['x']},{p['y']}" for p in shown),
            })
        charts.append({
            "pipeline": pipeline or "(jobs)",
            "runs": [point.get("run_id") for point in points],
            "series": series,
            "max_rows": top,
            "width": CHART_WIDTH, "height": CHART_HEIGHT,
            "left": CHART_LEFT, "right": CHART_RIGHT, "top": CHART_TOP, "bottom": CHART_BOTTOM,
        })
    return charts


def render_rows_charts(history: Mapping[str, Any], runs: int | None = None) -> str:
    """The DAG page's rows-per-source charts (inline SVG) from ``Monitor.rows_history``."""
    charts = rows_charts(history)
    shown = runs if runs is not None else max((len(chart["runs"]) for chart in charts), default=0)
    return _entities(_ROWS.render(dag_id=history.get("dag_id"), charts=charts, runs=shown))


def render_page(content: str) -> str:
    """The whole page around ``content``, which is HTML ``render_sections`` made (not escaped again)."""
    return _PAGE.render(
        style=Markup(_STYLE), refresh=REFRESH_SECONDS, content=Markup(content), script=Markup(_SCRIPT % REFRESH_SECONDS)
    )

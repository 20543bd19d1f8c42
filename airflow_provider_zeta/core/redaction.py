"""Pattern-based masking of credentials in text a job or Spark wrote: linear time, I/O-free.

Where it is used, and why it is not the only line of defence
------------------------------------------------------------
A driver's output reaches users through the deploy task's log: the driver trigger streams it there
(``triggers/driver_output.py``). Each line first passes Airflow's own secrets masker, whole, which
replaces every *value* it knows (the passwords and extras of the connections the driver can reach,
the sensitive conf, environment and arguments the deploy rendered, each with the printed variants
``secret_variants`` lists). That masker cannot know a credential that lives only in the job (a key
in its code, a secret it generated); this module then masks what *looks* like one, in what the
value pass left. It is also applied to everything job-written that the monitoring plugin shows (the
ledger's ``error``).

What is masked (the forms a reviewer found leaking; ``tests/unit/test_redaction.py`` has one row
per form):

* the value after a *sensitive key* — a key whose letters (``_ - .`` ignored, any case) contain
  ``password``, ``passwd``, ``pass``, ``pwd``, ``secret``, ``token``, ``credential``, ``auth``,
  ``apikey``, ``accesskey``, ``accountkey``, ``privatekey``, ``sessionkey``, ``webhook``,
  ``fernet``, ``signature``, or is exactly ``key``, ``sig`` or ``sas`` — written ``k=v``,
  ``k: v``, ``k => v``, ``"k": "v"`` or ``k "v"``. A quoted value is masked to its closing quote
  (backslash escapes honoured; unterminated: to the end of the line); an unquoted value to the end
  of the line (``password = correct horse battery``), or to the next ``&`` inside a URL query
  (``?sig=…&se=…``). An HTTP scheme word after the separator stays: ``Authorization: Basic ***``;
* command-line flags with a sensitive name, and ``-p``: the next word (``--jdbc-pass pw``,
  ``-p pw``); ``--password=x`` masks ``x``;
* ``Bearer <token>`` anywhere;
* the password of a URL's user info, up to the *last* ``@`` of the URL (``s3a://AKIA…:wJal/K7…@b``,
  ``postgres://:pw@h``);
* PEM, OpenSSH and PGP private key blocks (``-----BEGIN … PRIVATE KEY[ BLOCK]-----`` … ``END``),
  also when the text starts inside one (a tail cut in the middle) or ends inside one;
* more key/value shapes: escaped JSON (``{\\"password\\": \\"x\\"}``), Spark's ``getConf().getAll()``
  tuples (``('spark.hadoop.fs.s3a.secret.key', 'x')``), Hadoop's XML (``<name>…secret.key</name>
  <value>x``), the separators ``->``, ``=>``, `` is ``, a tab, ``%3D``, a non-breaking space;
  terminal colour codes are dropped first;
* ``user:pw@host`` without a scheme, Oracle's ``user/pw@db``, ``mysql … -pPW``; a ``-p`` flag's
  value runs to the next whitespace (``-p Pass,Word``);
* ``redact_tail``: a tail read from the middle of a file drops its first, partial line — it may
  start in the middle of a key (``ssword=hunter2``).

What is not masked here: a bare value with nothing around it that says it is secret
(``print(conn.password)``) — only Airflow's value masker, in the task log, catches that, and only
for values it was told about.

Linear time: each pass moves forward over the text and never re-reads what it already passed
(regular expressions here have no nested or unbounded overlapping repetitions; every search
resumes after the previous match or masked span). ``tests/unit/test_redaction.py`` bounds the time
on a 64 KiB adversarial input.
"""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any
from urllib.parse import quote, quote_plus

MASK = "***"

#: Substrings that make a key sensitive, matched against the key lower-cased without ``_ - .``.
SENSITIVE_KEY_PARTS = (
    "password",
    "passwd",
    "pass",
    "pwd",
    "secret",
    "token",
    "credential",
    "auth",
    "apikey",
    "accesskey",
    "accountkey",
    "privatekey",
    "sessionkey",
    "webhook",
    "fernet",
    "signature",
)
#: Keys that are sensitive only as a whole (``sig`` of a SAS URL; ``-p`` of mysql/psql-like tools).
SENSITIVE_KEYS_EXACT = frozenset({"key", "sig", "sas"})
SENSITIVE_FLAGS_EXACT = frozenset({"-p"})
HTTP_SCHEMES = frozenset({"basic", "bearer", "negotiate", "token", "digest"})

_TOKEN = re.compile(r"[\w.\-]+")
_SCHEME = re.compile(r"(?<![A-Za-z0-9+.\-])[A-Za-z][A-Za-z0-9+.\-]{0,30}://")
_URL_REST = re.compile(r"[^\s\"'<>`]*")
PEM_BEGIN = _PEM_BEGIN = re.compile(r"-----BEGIN [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
PEM_END = _PEM_END = re.compile(r"-----END [A-Z0-9 ]{0,40}PRIVATE KEY(?: BLOCK)?-----")
_SPACES = re.compile(r"[ \t\u00a0]*")
_WORD = re.compile(r"[^\s\"',;&}\])]*")
_FLAG_VALUE = re.compile(r"[^\s\"']*")
#: Terminal colour and cursor codes: a job's coloured ``password=`` must not hide the value.
_ANSI = re.compile(r"\x1b\[[0-9;?]{0,32}[A-Za-z]")
#: Separators a job writes between a key and its value besides ``=`` and ``:``.
_WORD_SEPARATOR = re.compile(r"[ \t\u00a0]*(?:->|=>|\bis\b|%3[DdAa])[ \t\u00a0]*|\t[ \t]*")
#: Hadoop's configuration XML: ``<name>fs.s3a.secret.key</name><value>X</value>``.
_XML_VALUE = re.compile(r"</name>\s{0,8}<value>")
#: Oracle's ``user/password@db`` (sqlplus, JDBC thin URLs), at a word start.
_SLASH_AT = re.compile(r"(?<![\w/.:\-])([A-Za-z_][\w$#]{0,63})/([^\s/@\"']{1,256})@(?=[A-Za-z0-9\[(])")
#: ``user:password@host`` without a scheme (a scheme's URL is masked by its own pass first).
_USER_COLON_AT = re.compile(r"(?<![\w/.:@\-])([A-Za-z0-9_][\w.+\-]{0,63}):(?!/)([^\s@\"'<>]{1,256})@(?=[A-Za-z0-9\[])")
#: ``mysql … -pSECRET``: the mysql client family takes its password glued to ``-p``.
_MYSQL_GLUED = re.compile(r"\b(?:mysql\w*|mariadb\w*)\b[^\n]{0,200}?\s-p(?=[^\s-])([^\s]+)")


def is_sensitive_key(key: str) -> bool:
    """Whether a key's name says its value is a secret (password, token, key, ...)."""
    normalized = key.lower().replace("_", "").replace("-", "").replace(".", "")
    if normalized in SENSITIVE_KEYS_EXACT:
        return True
    return any(part in normalized for part in SENSITIVE_KEY_PARTS)


def redact(text: object) -> str | None:
    """``text`` with what looks like a credential replaced by ``***`` (see the module docstring).

    Anything that is not a string (a malformed ledger's ``error`` may be a number or a list) is
    converted with ``str`` first, so one bad value never breaks a page.
    """
    if text is None:
        return None
    if not isinstance(text, str):
        text = str(text)
    if "\x1b" in text:
        text = _ANSI.sub("", text)
    text = _mask_url_credentials(_mask_pem_blocks(text))
    text = _USER_COLON_AT.sub(lambda m: f"{m.group(1)}:{MASK}@", text)
    text = _SLASH_AT.sub(lambda m: f"{m.group(1)}/{MASK}@", text)
    text = _MYSQL_GLUED.sub(lambda m: m.group(0)[: m.start(1) - m.start(0)] + MASK, text)
    return _mask_key_values(text)


def secret_variants(value: str) -> list[str]:
    """The forms a printed ``value`` takes besides itself, for a value masker to know each whole:
    URL-encoded (path, form), JSON-escaped once and twice (a JSON string inside JSON), repr- and
    shell-style backslash escapes, HTML/XML escapes. Airflow's ``[logging] secret_mask_adapter``
    idea, applied to what the deploy renders into a driver. Without repeats, ``value`` first."""
    json_once = json.dumps(value)[1:-1]
    backslashed = value.replace("\\", "\\\\")
    candidates = [
        value,
        quote(value, safe=""),
        quote(value),
        quote_plus(value),
        json_once,
        json.dumps(json_once)[1:-1],
        json.dumps(value, ensure_ascii=False)[1:-1],
        repr(value)[1:-1],
        backslashed,
        backslashed.replace('"', '\\"'),
        backslashed.replace("'", "\\'"),
        html.escape(value, quote=False),
        html.escape(value),
    ]
    return list(dict.fromkeys(candidate for candidate in candidates if candidate))


def redact_tail(text: str, starts_mid_file: bool) -> str:
    """``redact`` for a tail read from the middle of a file: its first, partial line is dropped."""
    if starts_mid_file:
        newline = text.find("\n")
        text = "" if newline < 0 else text[newline + 1 :]
    return redact(text) or ""


# ---------------------------------------------------------------------------- the passes


def _mask_pem_blocks(text: str) -> str:
    out: list[str] = []
    position = 0
    first_end = _PEM_END.search(text)
    first_begin = _PEM_BEGIN.search(text)
    if first_end and (first_begin is None or first_end.start() < first_begin.start()):
        # The text starts inside a key block (a tail cut in the middle): mask up to its end.
        out.append(MASK + "\n")
        position = first_end.start()
    while True:
        begin = _PEM_BEGIN.search(text, position)
        if begin is None:
            out.append(text[position:])
            return "".join(out)
        out.append(text[position : begin.end()])
        end = _PEM_END.search(text, begin.end())
        out.append("\n" + MASK + "\n")
        if end is None:  # ends inside a key block
            return "".join(out)
        position = end.start()


def _mask_url_credentials(text: str) -> str:
    out: list[str] = []
    position = 0
    while True:
        scheme = _SCHEME.search(text, position)
        if scheme is None:
            out.append(text[position:])
            return "".join(out)
        end = _end_of(_URL_REST, text, scheme.end())
        at = text.rfind("@", scheme.end(), end)
        colon = text.find(":", scheme.end(), at) if at >= 0 else -1
        if colon >= 0:
            out.append(text[position : colon + 1] + MASK)
            out.append(text[at:end])
        else:
            out.append(text[position:end])
        position = max(end, scheme.end())


def _end_of(pattern: re.Pattern[str], text: str, start: int) -> int:
    """Where ``pattern`` (one that also matches the empty string) stops matching from ``start``."""
    found = pattern.match(text, start)
    return start if found is None else found.end()


def _quoted_end(text: str, start: int) -> int:
    """Index just past the closing quote of the string starting at ``start``; end of line if none."""
    quote = text[start]
    i = start + 1
    n = len(text)
    while i < n:
        char = text[i]
        if char == "\\":
            i += 2
            continue
        if char == quote:
            return i + 1
        if char == "\n":
            return i
        i += 1
    return n


def _line_end(text: str, start: int) -> int:
    newline = text.find("\n", start)
    return len(text) if newline < 0 else newline


def _mask_key_values(text: str) -> str:
    out: list[str] = []
    position = 0  # everything before it is in ``out``
    search_from = 0
    while True:
        token = _TOKEN.search(text, search_from)
        if token is None:
            break
        search_from = token.end()
        span = _secret_span(text, token)
        if span:
            start, end, keep_quote = span
            out.append(text[position:start] + MASK + keep_quote)
            position = search_from = end
    out.append(text[position:])
    return "".join(out)


def _secret_span(text: str, token: re.Match[str]) -> tuple[int, int, str] | None:
    """Where the secret that ``token`` (a ``_TOKEN`` match) introduces starts and ends, and the
    closing quote to keep; None when it introduces none: a bearer token, a sensitive flag's value,
    a sensitive key's value."""
    key, after = token.group(), token.end()
    before = text[token.start() - 1] if token.start() > 0 else ""
    if key.lower() == "bearer":
        span = _value_span_word(text, after)
    elif key.startswith("-"):
        span = _flag_value_span(text, key, after, before)
    elif is_sensitive_key(key):
        return _key_value_span(text, after, in_query=before in ("?", "&"))
    else:
        return None
    return None if span is None else (span[0], span[1], "")


def _flag_value_span(text: str, flag_token: str, after: int, before: str) -> tuple[int, int] | None:
    """The value of a sensitive command-line flag (``--password x``, ``--password=x``); None when the
    flag is not sensitive, has no value, or is glued to a preceding word (``before``)."""
    if before and not before.isspace() and before not in "\"'":
        return None
    flag = flag_token.split("=", 1)[0]
    if not (flag in SENSITIVE_FLAGS_EXACT or is_sensitive_key(flag.lstrip("-"))):
        return None
    if after < len(text) and text[after] == "=":
        return _value_span_word(text, after + 1, allow_dash=True, spaces=False, word=_FLAG_VALUE)
    return _value_span_word(text, after, word=_FLAG_VALUE)


def _value_span_word(
    text: str, start: int, allow_dash: bool = False, spaces: bool = True, word: re.Pattern[str] = _WORD
) -> tuple[int, int] | None:
    """The next word after ``start`` (a flag's value): quoted or up to a separator."""
    i = _end_of(_SPACES, text, start) if spaces else start
    if spaces and i == start:
        return None  # a flag's value is separated by a space
    if i >= len(text) or text[i] == "\n":
        return None
    if text[i] in "\"'":
        return i, _quoted_end(text, i)
    if text[i] == "-" and not allow_dash:
        return None  # the next flag, not a value
    word_end = _end_of(word, text, i)
    return (i, word_end) if word_end > i else None


def _key_value_span(text: str, after_key: int, in_query: bool) -> tuple[int, int, str] | None:
    """Where the value of a sensitive key starts and ends, and the closing quote to keep."""
    i, quoted_key = _past_key_quote(text, after_key)
    xml = _XML_VALUE.match(text, i)
    if xml:  # <name>fs.s3a.secret.key</name><value>X</value>
        stop = text.find("<", xml.end(), _line_end(text, xml.end()))
        end = _line_end(text, xml.end()) if stop < 0 else stop
        return (xml.end(), end, "") if end > xml.end() else None
    j = _value_start(text, i, quoted_key)
    if j is None or j >= len(text) or text[j] == "\n":
        return None
    return _value_from(text, j, in_query)


def _past_key_quote(text: str, i: int) -> tuple[int, bool]:
    """Past the quote that closes a quoted key at ``i`` (``"password": ...``, ``\\"password\\":`` in
    escaped JSON), and whether there was one."""
    if text.startswith("\\", i) and i + 1 < len(text) and text[i + 1] in "\"'":  # \"password\": (escaped JSON)
        return i + 2, True
    if i < len(text) and text[i] in "\"'":  # "password": ...
        return i + 1, True
    return i, False


def _value_start(text: str, i: int, quoted_key: bool) -> int | None:
    """Where a sensitive key's value starts, past its separator (``=``, ``:``, ``=>``, a word such
    as ``is``, a comma between quoted strings, spaces before a quote); None without a separator."""
    n = len(text)
    j = _end_of(_SPACES, text, i)
    separator = _WORD_SEPARATOR.match(text, i)
    if j < n and text[j] in "=:":
        j += 2 if text[j : j + 2] == "=>" else 1
        return _end_of(_SPACES, text, j)
    if separator and separator.end() > i:  # password -> x, password is x, password\tx, password%3Dx
        return separator.end()
    if quoted_key and j < n and text[j] == ",":  # ('spark.hadoop.fs.s3a.secret.key', 'x')
        j = _end_of(_SPACES, text, j + 1)
        return None if j >= n or text[j] not in "\"'" else j
    if j > i and j < n and text[j] in "\"'":
        return j  # key "value"
    return None


def _value_from(text: str, j: int, in_query: bool) -> tuple[int, int, str] | None:
    """The span of a sensitive key's value starting at ``j`` (a character on the line): a quoted
    string, an HTTP authorization (scheme and credentials), a query value, or the rest of the line."""
    n = len(text)
    if text.startswith("\\", j) and j + 1 < n and text[j + 1] in "\"'":  # \"x\" inside escaped JSON
        close = text.find("\\" + text[j + 1], j + 2, _line_end(text, j))
        end = _line_end(text, j) if close < 0 else close
        return j + 2, end, ""
    if text[j] in "\"'":
        end = _quoted_end(text, j)
        closed = end > j + 1 and text[end - 1] == text[j]
        return j + 1, (end - 1 if closed else end), ""
    scheme_end = _end_of(_WORD, text, j)
    if scheme_end > j and text[j:scheme_end].lower() in HTTP_SCHEMES and scheme_end < n and text[scheme_end] == " ":
        j = _end_of(_SPACES, text, scheme_end)
    if in_query:
        stop = j
        while stop < n and text[stop] not in "&#\n \t\"'<>" and not text.startswith("%26", stop):
            stop += 1
        return (j, stop, "") if stop > j else None
    end = _line_end(text, j)
    return (j, end, "") if end > j else None


def driver_secret_values(
    env_vars: Mapping[str, object],
    conf: Mapping[str, object],
    application_args: Sequence[object],
    connections: Iterable[Mapping[str, Any]],
    sensitive: Callable[[str], bool] = is_sensitive_key,
) -> list[str]:
    """The secret values a driver is handed at launch, for Airflow's masker to replace by value.

    A job may print any of them bare (``print(os.environ["API_TOKEN"])``), where no pattern can
    tell them from other text. They are: the values of ``env_vars`` and ``conf`` entries whose name
    is ``sensitive`` (the deploy passes Airflow's ``sensitive_var_conn_names`` test or this
    module's key test); in ``application_args`` the word after a sensitive flag
    (``--api-token x``) and ``x`` of ``--api-token=x``; the password of every connection the driver
    can reach and its extra's values under sensitive keys (nested too). Sorted, without repeats
    or empty values.
    """
    found: set[str] = set()

    def add_sensitive(mapping: Mapping[str, object], all_secret: bool = False) -> None:
        for name, value in mapping.items():
            secret = all_secret or sensitive(str(name))
            for leaf in _leaves(value, secret, add_sensitive):
                found.add(leaf)

    add_sensitive(env_vars)
    add_sensitive(conf)
    args = [str(arg) for arg in application_args]
    for index, arg in enumerate(args):
        following = args[index + 1] if index + 1 < len(args) else None
        flag, has_value, inline = arg.partition("=")
        if not flag.startswith("-") or not sensitive(flag.lstrip("-")):
            continue
        value = inline if has_value else following
        if value and not (not has_value and value.startswith("-")):
            found.add(value)
    for connection in connections:
        if connection.get("password"):
            found.add(str(connection["password"]))
        add_sensitive(connection.get("extra") or {})
    return sorted(found)


def _leaves(value: object, secret: bool, walk: Callable[[Mapping[str, object], bool], None]) -> list[str]:
    """The scalar values under one entry that are secret (a mapping is walked by its own keys,
    everything under a sensitive name is secret); booleans and empty values never are."""
    if isinstance(value, Mapping):
        walk(value, secret)
        return []
    if isinstance(value, (list, tuple)):
        return [leaf for item in value for leaf in _leaves(item, secret, walk)]
    if not secret or value is None or isinstance(value, bool) or value == "":
        return []
    return [str(value)]


def split_secret_conf(
    conf: Mapping[str, object], sensitive: Callable[[str], bool] = is_sensitive_key, keep_public: Iterable[str] = ()
) -> tuple[dict[str, object], dict[str, object]]:
    """``conf`` as (entries that may stay on a command line, entries whose name is ``sensitive``),
    for a launcher that must not put the second kind in any process's arguments. ``keep_public``
    names entries that stay public whatever their name (the attempt token, by which the provider
    finds a driver's processes)."""
    public_names = set(keep_public)
    public: dict[str, object] = {}
    secret: dict[str, object] = {}
    for name, value in conf.items():
        (secret if name not in public_names and sensitive(str(name)) else public)[name] = value
    return public, secret


def java_properties(entries: Mapping[str, object]) -> str:
    """``entries`` in Java's ``.properties`` syntax (what spark-submit's ``--properties-file``
    reads): backslash, line breaks, a leading space and the key's separators escaped."""

    def escape(text: str, key: bool) -> str:
        text = text.replace("\\", "\\\\").replace("\n", "\\n").replace("\r", "\\r").replace("\t", "\\t").replace("\f", "\\f")
        if key:
            text = text.replace("=", "\\=").replace(":", "\\:").replace(" ", "\\ ").replace("#", "\\#").replace("!", "\\!")
        elif text.startswith(" "):
            text = "\\" + text
        return text

    return "".join(f"{escape(str(name), True)}={escape(str(value), False)}\n" for name, value in entries.items())

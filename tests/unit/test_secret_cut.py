"""A long line's cut never falls inside a registered value; values are registered with their
printed variants (``core.redaction.secret_variants``)."""

from __future__ import annotations

import json
from urllib.parse import quote, quote_plus

import pytest

from airflow_provider_zeta.core.redaction import secret_variants
from airflow_provider_zeta.triggers.driver_output import safe_cut, split_lines

VALUE = b"Tr0ub4dor&3+x/y=z!Qq7"


@pytest.mark.parametrize("offset", range(0, len(VALUE) + 1))
def test_no_piece_of_a_long_line_holds_part_of_a_registered_value(offset):
    max_line = 64
    line = b"a" * (max_line - offset) + VALUE + b"b" * 200 + b"\n"
    lines, used = split_lines(line, max_line, final=True, keep_whole=[VALUE])
    assert used == len(line)
    value = VALUE.decode()
    for piece in lines:
        text = piece.replace(" …(line cut)", "")
        assert value in text or not any(value[i : i + 4] in text for i in range(len(value) - 3)), (offset, lines)
    assert "".join(piece.replace(" …(line cut)", "") for piece in lines) == line.decode().rstrip("\n")


def test_a_value_at_the_start_of_a_piece_makes_the_piece_longer_not_split():
    data = VALUE + b"x" * 100
    assert safe_cut(data, 0, 5, [VALUE]) == len(VALUE)
    assert safe_cut(b"ab" + data, 0, 5, [VALUE]) == 2


def test_a_cut_whose_value_may_continue_past_the_read_waits_for_more():
    data = b"x" * 70 + VALUE[:5]  # not final: the rest of the line (and of the value) comes later
    lines, used = split_lines(b"y" * 64 + data, 64, final=False, keep_whole=[VALUE])
    assert used == 64 and len(lines) == 1  # the first piece only; the rest waits


def test_variants_cover_the_encodings_a_job_prints():
    value = 'Qu"ote\\Back$lash&x y'
    variants = secret_variants(value)
    assert variants[0] == value
    for printed in (quote(value, safe=""), quote_plus(value), json.dumps(value)[1:-1], json.dumps(json.dumps(value))[3:-3], repr(value)[1:-1]):
        assert printed in variants, printed

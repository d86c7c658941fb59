"""The README's settings table is generated from the settings' own descriptions: every
field has one, the table is current, and every SPS_* variable the code reads is in it."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from elastic_sps import settings_doc

pytestmark = pytest.mark.unit

ROOT = Path(__file__).resolve().parents[2]


def test_every_setting_has_a_description():
    assert settings_doc.missing_descriptions() == []


@pytest.mark.parametrize("file", settings_doc.FILES)
def test_the_generated_tables_are_current(file):
    text = (ROOT / file).read_text()
    assert settings_doc.block(file) in text, (
        f"{file}'s settings table is stale: python -m elastic_sps.settings_doc --write"
    )


def test_the_readme_names_only_settings_that_exist():
    listed = {var for var, *_ in settings_doc.rows()}
    assert set(settings_doc.FIRST) <= listed


def test_every_sps_variable_in_the_code_is_in_the_table():
    listed = {var for var, *_ in settings_doc.rows()}
    used: set[str] = set()
    for folder in ("shared", "services", "compose"):
        for path in (ROOT / folder).rglob("*"):
            if path.suffix in (".py", ".yml", ".yaml", ".sh") and path.is_file():
                # a full name, not a prefix such as SPS_KAFKA_ that names are built on
                used |= set(re.findall(r"\bSPS_[A-Z0-9_]*[A-Z0-9]\b", path.read_text()))
    assert sorted(used - listed) == []

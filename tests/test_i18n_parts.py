"""The catalog of one language is its main file plus ``<lang>.<part>.toml`` files, with no key in two files."""

import pytest

from diag import i18n


def test_part_files_are_merged_and_clashes_refused(tmp_path, monkeypatch):
    (tmp_path / "en.toml").write_text('[page.a]\ntitle = "A"\n', encoding="utf-8")
    (tmp_path / "en.extra.toml").write_text('[finding.x]\ntitle = "X"\n', encoding="utf-8")
    monkeypatch.setattr(i18n, "CATALOG_DIR", tmp_path)
    i18n.catalog.cache_clear()
    try:
        assert i18n.catalog("en") == {"page.a.title": "A", "finding.x.title": "X"}
        (tmp_path / "en.more.toml").write_text('[page.a]\ntitle = "again"\n', encoding="utf-8")
        i18n.catalog.cache_clear()
        with pytest.raises(ValueError, match=r"en.more.toml: keys already defined.*page\.a\.title"):
            i18n.catalog("en")
    finally:
        i18n.catalog.cache_clear()

"""``diag --help`` in Chinese (#24): every command's summary and option help from ``diag/i18n/zh.cli.toml`` when
the language is zh (``--lang zh`` before the command, ``$DIAG_LANG``, the locale); English help as Typer builds
it; a translation whose English changed in the code is not shown (and this file names it)."""

from __future__ import annotations

import os
import re
import subprocess
import sys

import pytest
import typer.main

from diag.cli import app, main
from diag.cli_help import in_language, option_keys, translated
from diag.i18n import catalog, set_language
from tests.conftest import ROOT

CJK = re.compile(r"[\u4e00-\u9fff]")
INGEST_ZH = "ingest 导入 Profiling 输出； 每个文件输出一行， 最后输出汇总。有文件失败时退出码为 1。"
INGEST_EN = "ingest Ingest profiler outputs; prints a line per file and a summary. Exit 1 if any file failed."


@pytest.fixture(autouse=True)
def _wide_and_back_to_english(monkeypatch):
    monkeypatch.setenv("COLUMNS", "200")  # one help row per line: the texts are asserted whole
    yield
    set_language(None)


def _help(capsys, *args: str) -> list[str]:
    """The help screen's lines, box borders and runs of spaces taken out."""
    assert main([*args, "--help"]) == 0
    out = capsys.readouterr().out
    return [" ".join(line.strip("│╭╰─╮╯ ").split()) for line in out.splitlines() if line.strip()]


def _commands() -> dict:
    return typer.main.get_command(app).commands


def test_diag_lang_zh_help_in_a_fresh_process():
    """The language is known only after import: a help text read at definition would be frozen in English."""
    env = {**os.environ, "DIAG_LANG": "zh", "COLUMNS": "200"}
    out = subprocess.run(
        [sys.executable, "-m", "diag.cli", "--help"],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    lines = [" ".join(line.strip("│ ").split()) for line in out.splitlines()]
    assert INGEST_ZH in lines
    assert "LLM 推理在昇腾 NPU 上为什么慢或出错， 与 CUDA 相比差在哪里？" in lines
    assert "选项" in out and "命令" in out and "--help <bool> 显示此帮助并退出。" in lines


def test_lang_zh_before_the_command(capsys, monkeypatch):
    monkeypatch.setenv("DIAG_LANG", "en")
    lines = _help(capsys, "--lang", "zh", "memory")
    assert lines[1].startswith("已分配 / 预留内存的峰值（何时、 哪个迭代、 哪个算子）")
    assert "--run <int> 运行 ID（默认： 最后一个有内存数据的运行）。" in lines
    assert "--db <str> 使用的 DuckDB 文件。 [环境变量：DIAG_DB] [默认：diag.duckdb]" in lines
    assert "选项" in lines and "Options" not in lines


def test_lang_en_wins_over_diag_lang_zh_in_one_process(capsys, monkeypatch):
    monkeypatch.setenv("DIAG_LANG", "zh")
    assert INGEST_ZH in _help(capsys)
    lines = _help(capsys, "--lang", "en")
    assert INGEST_EN in lines and "Options" in lines and not [x for x in lines if CJK.search(x)]


def test_english_help_is_the_code_s_own(capsys, monkeypatch):
    """In English nothing is swapped: every screen shows the code's help texts, no Chinese."""
    monkeypatch.setenv("DIAG_LANG", "en")
    root = _help(capsys)
    assert root[1] == "Why is LLM inference slow or broken on Ascend NPUs, and how does it differ from CUDA?"
    assert INGEST_EN in root and "--help <bool> Show this message and exit." in root
    memory = _help(capsys, "memory")
    assert "--db <str> DuckDB file to use. [env var: DIAG_DB] [default: diag.duckdb]" in memory
    assert "--run <int> Run id (default: the last run with memory data)." in memory
    for name in _commands():
        assert not [x for x in _help(capsys, name) if CJK.search(x)], name


def test_texts_are_put_back_after_a_chinese_help(monkeypatch):
    monkeypatch.setenv("DIAG_LANG", "zh")
    root = typer.main.get_command(app)
    ctx = root.make_context("diag", ["runs"], resilient_parsing=True)
    before = [root.help, *(c.help for c in root.commands.values()), *(p.help for p in root.get_params(ctx))]
    with in_language(root, "diag", ctx):
        assert CJK.search(root.help) and CJK.search(root.commands["ingest"].help)
    after = [root.help, *(c.help for c in root.commands.values()), *(p.help for p in root.get_params(ctx))]
    assert after == before and not CJK.search(root.help)


def test_a_changed_english_help_shows_english_not_the_old_chinese(monkeypatch):
    monkeypatch.setenv("DIAG_LANG", "zh")
    assert translated("cli.opt.common.db", "DuckDB file to use.") == "使用的 DuckDB 文件。"
    assert translated("cli.opt.common.db", "DuckDB file to read.") is None
    set_language("en")
    assert translated("cli.opt.common.db", "DuckDB file to use.") is None


def test_every_command_and_option_has_its_chinese_help():
    """Each help text of the CLI has a key in en.cli.toml whose English is the code's, and a Chinese text.
    A new command or option fails here with the lines to add (``key = "English"``) to en.cli.toml and
    zh.cli.toml."""
    set_language("zh")
    en, zh = catalog("en"), catalog("zh")
    missing: list[str] = []
    commands = {"diag": typer.main.get_command(app), **_commands()}
    for name, command in commands.items():
        key = f"cli.cmd.{name}.help"
        if command.help and not translated(key, command.help):
            missing.append(f"{key} = {command.help!r}")
        for param in command.params:
            if param.help and not any(translated(k, param.help) for k in option_keys(name, param.name)):
                missing.append(f"{option_keys(name, param.name)[0]} = {param.help!r}")
    assert missing == []
    cli_keys = [k for k in en if k.startswith(("cli.cmd.", "cli.opt.", "cli.panel."))]
    assert len(cli_keys) >= 80 and [k for k in cli_keys if not CJK.search(zh[k]) and "|" not in zh[k]] == []

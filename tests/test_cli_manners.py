"""The CLI's manners: every option says what it is for, a mistyped command, choice or scenario id gets a "did you
mean" and exit 2 without a traceback, and a sweep whose cron fires faster than the sweep took is warned about."""

from __future__ import annotations

import argparse
import io
from collections.abc import Iterator
from pathlib import Path

import pytest
from rich.console import Console

from eval_pipelines.cli import EXIT_USER_ERROR, build_parser, main, warn_schedule_pace
from eval_pipelines.lib.suggest import did_you_mean
from eval_pipelines.schemas.sweep import SweepConfig


def _parsers(parser: argparse.ArgumentParser, path: str) -> Iterator[tuple[str, argparse.ArgumentParser]]:
    yield path, parser
    for action in parser._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                yield from _parsers(sub, f"{path} {name}")


def test_every_option_and_command_has_help() -> None:
    missing = []
    walked = list(_parsers(build_parser(), "eval-pipelines"))
    assert len(walked) > 10  # the walk reached the subcommands
    for path, parser in walked:
        for action in parser._actions:
            if isinstance(action, argparse._HelpAction):
                continue
            if isinstance(action, argparse._SubParsersAction):
                # each command's help is its line in the parent's --help
                missing += [f"{path} {c.dest}" for c in action._choices_actions if not (c.help or "").strip()]
                continue
            if action.help != argparse.SUPPRESS and not (action.help or "").strip():
                missing.append(f"{path} {'/'.join(action.option_strings) or action.dest}")
    assert missing == []


@pytest.mark.parametrize(
    ("argv", "hint"),
    [
        (["swep"], "did you mean 'sweep'?"),
        (["reverfy"], "did you mean 'reverify'?"),
        (["benchmarks", "instal"], "did you mean 'install'?"),
        (["sql", "select 1", "--format", "jsno"], "did you mean 'json'?"),
        (["export", "--format", "inspct", "--out", "x"], "did you mean 'inspect'?"),
    ],
)
def test_a_mistyped_command_or_choice_gets_the_closest_one(
    argv: list[str], hint: str, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit) as exited:
        main(argv)
    assert exited.value.code == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "invalid choice" in err and hint in err and "Traceback" not in err


def test_a_name_like_nothing_gets_no_suggestion(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit):
        main(["zzzzqqq"])
    err = capsys.readouterr().err
    assert "invalid choice: 'zzzzqqq'" in err and "did you mean" not in err
    assert did_you_mean("zzzzqqq", ["sweep", "reverify"]) == ""
    assert did_you_mean("EMAIL_OPS", ["email_ops", "calendar"]) == "; did you mean 'email_ops'?"


@pytest.fixture
def isolated(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("EVAL_PIPELINES_DATA_DIR", str(tmp_path / "data"))
    return tmp_path


@pytest.mark.parametrize(
    "argv",
    [["tasks", "emial_ops"], ["reverify", "--scenario", "emial_ops"]],
    ids=["tasks", "reverify"],
)
def test_a_mistyped_scenario_id_on_the_command_line(
    argv: list[str], isolated: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert main(argv) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert "unknown scenario 'emial_ops'" in err and "did you mean 'email_ops'?" in err
    assert "Traceback" not in err


def test_a_mistyped_scenario_id_in_a_sweep_config(isolated: Path, capsys: pytest.CaptureFixture[str]) -> None:
    config = isolated / "typo.yaml"
    config.write_text(
        'name: typo\nscenarios: ["email_ops:1.0.0", "office_opps:1.0.0"]\n'
        "models:\n  - {name: m, model: sim-oracle, base_url: 'sim://local'}\n"
    )
    assert main(["sweep", "--config", str(config)]) == EXIT_USER_ERROR
    err = capsys.readouterr().err
    assert f"{config}: scenarios[1]: unknown scenario 'office_opps:1.0.0'" in err
    assert "did you mean 'office_ops:1.0.0'?" in err and "Traceback" not in err


def _sweep(cron: str | None) -> SweepConfig:
    return SweepConfig.model_validate(
        {
            "name": "fast",
            "scenarios": ["email_ops:1.0.0"],
            "cron": cron,
            "models": [{"name": "m", "model": "sim-oracle", "base_url": "sim://local"}],
        }
    )


def test_a_sweep_longer_than_its_cron_interval_is_warned_about() -> None:
    out = io.StringIO()
    console = Console(file=out, width=400)
    warn_schedule_pace(_sweep("*/5 * * * *"), 900.0, console)  # 15 min against a 5 min cron
    assert "warning: sweep 'fast': its cron '*/5 * * * *' fires every 5 min, but its last sweep took 15 min" in (
        out.getvalue()
    )
    quiet = io.StringIO()
    for cron, seconds in (("*/5 * * * *", 120.0), (None, 10**6), ("0 2 * * 1", 10**6)):
        warn_schedule_pace(_sweep(cron), seconds, Console(file=quiet, width=400))
    assert quiet.getvalue() == ""

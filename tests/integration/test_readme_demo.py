"""The README's first session, pasted: every ``curl`` of "A first session with the demo"
runs against a real ``vgpu-extender serve --demo`` and answers what the README shows."""

from __future__ import annotations

import json
import re
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.server import ExtenderProcess, spawn_extender

ROOT = Path(__file__).resolve().parents[2]
README_URL = "http://127.0.0.1:8888"
_BLOCK = re.compile(r"```(\w+)\n(.*?)```", re.DOTALL)


def _demo_section() -> str:
    text = (ROOT / "README.md").read_text()
    start = text.index("### A first session with the demo")
    return text[start : text.index("\n## ", start)]


def _examples() -> list[tuple[str, object]]:
    """(command, the answer the README shows) for each curl, in order: a ``# ...`` line
    after a command, or else the ``json`` block that follows its ``sh`` block."""
    blocks = _BLOCK.findall(_demo_section())
    examples: list[tuple[str, object]] = []
    for position, (language, body) in enumerate(blocks):
        if language != "sh":
            continue
        command: list[str] = []
        for line in body.splitlines():
            if line.startswith("# "):
                examples.append(("\n".join(command), json.loads(line[2:])))
                command = []
            elif line.startswith("curl ") and command:
                raise AssertionError(f"a command without its answer: {command[0]}")
            elif line.strip():
                command.append(line)
        if command:
            following = blocks[position + 1] if position + 1 < len(blocks) else ("", "")
            assert following[0] == "json", f"no answer shown for: {command[0]}"
            examples.append(("\n".join(command), json.loads(following[1])))
    return examples


@pytest.fixture(scope="module")
def demo(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ExtenderProcess]:
    tmp = tmp_path_factory.mktemp("demo")
    running = spawn_extender(
        env={"VGPU_DATABASE_URL": f"sqlite:///{tmp / 'vgpu-extender.db'}"},
        log=tmp / "extender.log",
        args=["--demo"],
    )
    yield running
    running.stop()


def test_the_demo_section_shows_filter_prioritize_and_bind() -> None:
    verbs = [re.search(r"8888/(\w+)", command) for command, _ in _examples()]
    assert [v.group(1) for v in verbs if v] == ["filter", "prioritize", "bind"]


def test_every_curl_of_the_demo_answers_as_shown(demo: ExtenderProcess) -> None:
    if shutil.which("curl") is None:
        pytest.skip("curl is not installed: the README's commands cannot be run as pasted")
    for command, shown in _examples():
        assert README_URL in command, command
        pasted = command.replace(README_URL, demo.url)
        done = subprocess.run(
            ["bash", "-c", pasted], capture_output=True, text=True, timeout=30, check=False
        )
        assert done.returncode == 0, (command, done.stderr)
        assert json.loads(done.stdout) == shown, (command, done.stdout)

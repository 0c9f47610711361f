"""A reader for the two Dockerfiles: stages, and the final stage's settings."""

from __future__ import annotations

import json
import shlex
from dataclasses import dataclass, field
from functools import cache
from pathlib import Path

from tests.deploy.manifests import DOCKER


@dataclass
class Stage:
    image: str
    name: str = ""
    instructions: list[tuple[str, str]] = field(default_factory=list)


@dataclass
class Dockerfile:
    path: Path
    args: dict[str, str]
    stages: list[Stage]

    def _last(self, keyword: str) -> str | None:
        values = [v for k, v in self.stages[-1].instructions if k == keyword]
        return values[-1] if values else None

    @property
    def user(self) -> str | None:
        return self._last("USER")

    @property
    def workdir(self) -> str | None:
        return self._last("WORKDIR")

    @property
    def entrypoint(self) -> list[str]:
        return _exec_form(self._last("ENTRYPOINT"))

    @property
    def cmd(self) -> list[str]:
        return _exec_form(self._last("CMD"))

    def pip_installs(self) -> list[PipInstall]:
        """Every ``pip install`` of every stage, its constraints files and targets."""
        found = []
        for stage in self.stages:
            for keyword, value in stage.instructions:
                if keyword != "RUN":
                    continue
                for command in value.split("&&"):
                    words = shlex.split(command)
                    if len(words) >= 2 and words[0].endswith("pip") and words[1] == "install":
                        found.append(_pip_install(words[2:]))
        return found

    def copies(self) -> list[list[str]]:
        """Sources of every COPY from the build context (not ``--from``)."""
        sources = []
        for stage in self.stages:
            for keyword, value in stage.instructions:
                words = shlex.split(value)
                if keyword == "COPY" and not any(w.startswith("--from") for w in words):
                    sources.append([w for w in words[:-1] if not w.startswith("--")])
        return sources


@dataclass
class PipInstall:
    constraints: list[str]
    targets: list[str]
    options: list[str]


def _pip_install(words: list[str]) -> PipInstall:
    constraints, targets, options = [], [], []
    rest = iter(words)
    for word in rest:
        if word in ("-c", "--constraint"):
            constraints.append(next(rest))
        elif word.startswith("--constraint="):
            constraints.append(word.partition("=")[2])
        elif word.startswith("-"):
            options.append(word)
        else:
            targets.append(word)
    return PipInstall(constraints=constraints, targets=targets, options=options)


def _exec_form(value: str | None) -> list[str]:
    if value is None:
        return []
    parsed = json.loads(value)
    if not (isinstance(parsed, list) and all(isinstance(v, str) for v in parsed)):
        raise ValueError(f"not the exec form: {value}")
    return parsed


def _logical_lines(text: str) -> list[str]:
    lines, current = [], ""
    for raw in text.splitlines():
        stripped = raw.strip()
        if not current and (not stripped or stripped.startswith("#")):
            continue
        if stripped.startswith("#"):
            continue
        if stripped.endswith("\\"):
            current += stripped[:-1] + " "
            continue
        lines.append(current + stripped)
        current = ""
    return lines


@cache
def dockerfile(component: str) -> Dockerfile:
    path = DOCKER / f"Dockerfile.{component}"
    args: dict[str, str] = {}
    stages: list[Stage] = []
    for line in _logical_lines(path.read_text(encoding="utf-8")):
        keyword, _, value = line.partition(" ")
        keyword, value = keyword.upper(), value.strip()
        if keyword == "ARG" and not stages:
            name, _, default = value.partition("=")
            args[name] = default
        elif keyword == "FROM":
            words = value.split()
            image = words[0]
            for name, default in args.items():
                image = image.replace("${" + name + "}", default)
            stage_name = words[2] if len(words) == 3 and words[1].upper() == "AS" else ""
            stages.append(Stage(image=image, name=stage_name))
        else:
            if not stages:
                raise ValueError(f"{path}: {keyword} before FROM")
            stages[-1].instructions.append((keyword, value))
    return Dockerfile(path=path, args=args, stages=stages)

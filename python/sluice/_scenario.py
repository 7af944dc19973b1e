"""Turning what a caller passes (a path, TOML text, a dict; overrides as a dict or list) into what
the simulator takes: scenario text, the name errors cite, and `key.path=value` overrides."""

from __future__ import annotations

import json
import os
from dataclasses import dataclass
from pathlib import Path
from typing import Mapping, Sequence, Union

from . import _native

ScenarioLike = Union[str, os.PathLike, Mapping]
Overrides = Union[None, Mapping[str, object], Sequence[str]]


@dataclass(frozen=True)
class Scenario:
    """Scenario text with the file name errors cite and the directory relative paths resolve against."""

    text: str
    file: str
    base_dir: str


def resolve(scenario: ScenarioLike) -> Scenario:
    """A path (str or PathLike naming an existing file, or ending in .toml), TOML text, or a dict."""
    if isinstance(scenario, Scenario):
        return scenario
    if isinstance(scenario, Mapping):
        return Scenario(_native.toml_from_json(json.dumps(scenario)), "<scenario dict>", os.getcwd())
    if isinstance(scenario, os.PathLike) or (
        isinstance(scenario, str) and "\n" not in scenario and (scenario.endswith(".toml") or os.path.isfile(scenario))
    ):
        path = Path(scenario)
        try:
            text = path.read_text()
        except OSError as e:
            raise _native.SluiceError(f"{path}: cannot read the scenario: {e.strerror}") from None
        return Scenario(text, str(path), str(path.resolve().parent))
    if isinstance(scenario, str):
        return Scenario(scenario, "<scenario>", os.getcwd())
    raise TypeError(f"scenario: expected a path, TOML text or a dict, got {type(scenario).__name__}")


def _value(v: object) -> str:
    if isinstance(v, bool):
        return "true" if v else "false"
    if isinstance(v, str):
        return v
    return json.dumps(v)


def overrides(set: Overrides = None, seed: int | None = None) -> list[str]:
    """`key.path=value` strings, as `sluice run --set` takes them; a seed becomes `sim.seed=N`."""
    if set is None:
        out = []
    elif isinstance(set, Mapping):
        out = [f"{k}={_value(v)}" for k, v in set.items()]
    elif isinstance(set, str):
        out = [set]
    else:
        out = [str(s) for s in set]
    if seed is not None:
        if isinstance(seed, bool) or not isinstance(seed, int) or seed < 0:
            raise _native.SluiceError(f"seed: expected a whole number >= 0, got {seed!r}")
        out.append(f"sim.seed={seed}")
    return out

"""The progress bar `run` shows for a long simulation, as `sluice run` does on a terminal."""

from __future__ import annotations

import time

# A bar for every short run would only flicker: like the CLI, show one once a run has taken this long.
SHOW_AFTER_S = 1.0


class RunProgress:
    """The `tick(now_ns, end_ns)` the native run calls about every 100 ms: a bar of simulated time
    (against sim.duration when the scenario sets one) once the run has lasted a second."""

    def __init__(self, enabled: bool):
        self.enabled = enabled
        self.started = time.monotonic()
        self.bar = None
        self.scale = 1e6  # simulated ns per unit shown: ms, or s for runs of ten seconds and more

    def __call__(self, now_ns: int, end_ns: int | None) -> None:
        if not self.enabled or time.monotonic() - self.started < SHOW_AFTER_S:
            return
        if self.bar is None:
            from tqdm.auto import tqdm

            unit = "ms"
            if (end_ns or now_ns) >= 10e9:
                unit, self.scale = "s", 1e9
            if end_ns:
                fmt = "{desc}: {percentage:3.0f}%%|{bar}| {n:.1f}/{total:.1f} %s simulated [{elapsed}<{remaining}]" % unit
            else:
                fmt = "{desc}: {n:.1f} %s simulated [{elapsed}]" % unit
            self.bar = tqdm(total=end_ns / self.scale if end_ns else None, initial=now_ns / self.scale,
                            desc="sluice run", bar_format=fmt, leave=False)
        self.bar.update(now_ns / self.scale - self.bar.n)

    def __enter__(self) -> "RunProgress":
        return self

    def __exit__(self, *exc) -> None:
        if self.bar is not None:
            self.bar.close()

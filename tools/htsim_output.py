"""What htsim_uec (the UEC reference simulator, uet-htsim) prints, read back: the tools that run
it (uet-reference.py, uet-8k.py) share this."""


def finishes(stdout: str) -> list:
    """Every flow's "finished at" time (µs), sorted."""
    return sorted(float(line.split()[8]) for line in stdout.splitlines()
                  if line.startswith("Flow ") and " finished at " in line)


def counters(stdout: str) -> dict:
    """The summary line that ends a run (`New: n Rtx: n ...`), by name."""
    words = stdout.strip().splitlines()[-1].replace(":", "").split()
    return {words[i]: int(words[i + 1]) for i in range(0, len(words) - 1, 2)}

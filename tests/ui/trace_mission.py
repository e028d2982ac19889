"""A missions folder entry that replays a trace: mission 8 with a small generated CSV beside it.

The tree ships no trace data, so tests that need a trace mission make one (rows drawn from a
seeded generator: a minute of chat-like traffic at about 20 req/s)."""

import json
import random
from pathlib import Path

__all__ = ["write_trace_mission"]

REPO = Path(__file__).resolve().parents[2]


def write_trace_mission(folder, seed=8):
    """Write traces/replayed.csv and 08-conversation-trace.json (using it) into `folder`."""
    rng = random.Random(seed)
    lines, t = ["arrival_s,prompt_tokens,output_tokens"], 0.0
    while t < 60:
        t += rng.expovariate(20)
        lines.append(f"{t:.6f},{rng.randint(200, 3000)},{rng.randint(20, 400)}")
    trace = Path(folder) / "traces" / "replayed.csv"
    trace.parent.mkdir(exist_ok=True)
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    mission = json.loads((REPO / "missions" / "08-conversation-trace.json").read_text(encoding="utf-8"))
    mission["scenario"]["workload"] = {"trace": {"path": "traces/replayed.csv"}}
    (Path(folder) / "08-conversation-trace.json").write_text(json.dumps(mission), encoding="utf-8")
    return mission, trace

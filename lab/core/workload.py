"""Requests: generated (Poisson arrivals, phases, length distributions) or replayed from a trace.

Everything random comes from one `random.Random(seed)`, drawn in a fixed order (gap,
prompt, output) so the same seed gives the same requests on every runtime. Arrival
times are rounded to the microsecond so that a last-bit difference in a platform's
`log` cannot change the schedule.

Trace files are untrusted input: a trace path must resolve (symlinks included) inside
the folders its scenario allows, be a regular file under MAX_TRACE_BYTES, and parse
errors name the line and column but never echo the file's content.
"""

import csv
import io
import math
import os
import random
import stat
from datetime import datetime

from .errors import LabError
from .loading import read_text
from .spec import MAX_DURATION_S, MAX_REQUESTS, MAX_TOKENS, MAX_TRACE_TIME_S

__all__ = [
    "generate_requests",
    "resolve_trace_path",
    "read_trace",
    "parse_trace_text",
    "TRACE_FORMATS",
    "MAX_TRACE_BYTES",
]

# The largest real trace we replay is ~3 MB; this leaves room and still bounds memory.
MAX_TRACE_BYTES = 64 * 1024 * 1024

# (arrival column, prompt column, output column, arrival is a wall-clock timestamp)
TRACE_FORMATS = (
    ("arrival_s", "prompt_tokens", "output_tokens", False),
    ("arrived_at", "num_prefill_tokens", "num_decode_tokens", False),
    ("TIMESTAMP", "ContextTokens", "GeneratedTokens", True),
)


def generate_requests(workload, seed):
    """[(arrival_s, prompt_tokens, output_tokens)] sorted by arrival."""
    if workload.trace is not None:
        return _trace_requests(workload)
    rng = random.Random(seed)
    out = []
    for start, end, rate, prompt, output in workload.segments():
        if rate <= 0:
            continue
        t = start
        while True:
            t += rng.expovariate(rate)
            if t >= end:
                break
            arrival = round(t, 6)
            if arrival >= end:
                break
            out.append((arrival, _draw(prompt, rng), _draw(output, rng)))
            if len(out) > MAX_REQUESTS:
                raise LabError("workload.rate", f"more than {MAX_REQUESTS:,} requests; lower the rate or duration")
    return out


def _draw(dist, rng):
    kind = dist.dist
    if kind == "fixed":
        return dist.value
    if kind == "uniform":
        return rng.randint(dist.low, dist.high)
    if kind == "lognormal":
        value = dist.median * math.exp(dist.sigma * rng.gauss(0.0, 1.0))
        return min(max(int(round(value)), dist.min), dist.max)
    total = math.fsum(w for w, _ in dist.components)
    pick = rng.random() * total
    for weight, sub in dist.components:
        pick -= weight
        if pick < 0:
            return _draw(sub, rng)
    return _draw(dist.components[-1][1], rng)


def _trace_requests(workload):
    trace = workload.trace
    rows = read_trace(resolve_trace_path(trace), field="workload.trace.path")
    start = trace.start_s
    window = trace.duration_s if trace.duration_s is not None else workload.duration_s
    out = []
    for arrival, prompt, output in rows:
        if arrival < start:
            continue
        rel = arrival - start
        if window is not None and rel >= window:
            break
        out.append((round(rel * trace.time_scale, 6), prompt, output))
    if not out:
        raise LabError("workload.trace", f"no requests in the window start_s={start:g}, duration_s={window} of {trace.path}")
    if len(out) > MAX_REQUESTS:
        raise LabError("workload.trace.duration_s", f"{len(out):,} requests in the window; the limit is {MAX_REQUESTS:,}")
    span = out[-1][0]
    if span > MAX_DURATION_S:
        raise LabError(
            "workload.trace.duration_s",
            f"the replayed arrivals span {span:,.0f} s (after time_scale {trace.time_scale:g}); a run covers at most "
            f"{MAX_DURATION_S:,.0f} s of arrivals: set a shorter window",
        )
    return out


def _inside(path, folder):
    return path == folder or path.startswith(folder.rstrip(os.sep) + os.sep)


def resolve_trace_path(trace, field="workload.trace.path"):
    """The trace's real path (symlinks resolved), checked to be a regular file inside `trace.roots`.

    A relative path is relative to `trace.base_dir` ("" = the working directory).
    A mission allows only its own folder; a bare scenario its folder and the working
    directory (the roots are set by whoever loaded the scenario).
    """
    if "\0" in trace.path:
        raise LabError(field, "the path contains a NUL character")
    cwd = os.getcwd()
    base = os.path.realpath(trace.base_dir or cwd)
    full = os.path.realpath(os.path.join(base, trace.path))
    roots = []
    for root in trace.roots:
        real = os.path.realpath(root or cwd)
        if real not in roots:
            roots.append(real)
    if not any(_inside(full, root) for root in roots):
        allowed = " or ".join(roots)
        raise LabError(field, f"{trace.path!r} resolves to {full}, outside {allowed}: a trace file must lie inside the mission's folder "
                              "(a bare scenario's: its folder or the working directory)")
    try:
        info = os.stat(full)
    except OSError:
        raise LabError(field, f"no trace file {trace.path!r} (looked for {full}); trace paths are relative to the mission or scenario file") from None
    if not stat.S_ISREG(info.st_mode):
        raise LabError(field, f"{trace.path!r} is not a regular file")
    return full


# Parsed traces by (path, modification time, size): the lab re-simulates a trace
# mission on every control change, and parsing is most of a small run's cost.
_TRACE_CACHE = {}
_TRACE_CACHE_SIZE = 8


def read_trace(path, field="trace"):
    """[(arrival_s, prompt, output)] of a trace file (a cached, read-only tuple).

    The file must be regular and at most MAX_TRACE_BYTES (a bounded read); containment
    is `resolve_trace_path`'s job.
    """
    try:
        info = os.stat(path)
    except OSError as exc:
        raise LabError(field, f"cannot read trace file {path!r}: {exc.strerror or exc}") from None
    except ValueError:
        raise LabError(field, "the trace path contains a NUL character") from None
    key = (os.path.realpath(path), info.st_mtime_ns, info.st_size)
    if key in _TRACE_CACHE:
        return _TRACE_CACHE[key]
    text = read_text(path, field, MAX_TRACE_BYTES, regular_only=True, what="trace file")
    rows = tuple(parse_trace_text(text, os.path.basename(path)))
    if len(_TRACE_CACHE) >= _TRACE_CACHE_SIZE:
        _TRACE_CACHE.pop(next(iter(_TRACE_CACHE)))
    _TRACE_CACHE[key] = rows
    return rows


def parse_trace_text(text, name="trace"):
    """Parse a trace CSV in any of TRACE_FORMATS; arrivals re-based to start at 0 and sorted.

    Safe on hostile text (an upload): bounded size, csv's field-size limit reported
    as a LabError, and no message quotes the text; each names the line and column.
    """
    if not isinstance(text, str):
        raise LabError(name, "expected the trace as text")
    if len(text) > MAX_TRACE_BYTES:
        raise LabError(name, f"the trace is {len(text):,} characters; the limit is {MAX_TRACE_BYTES:,}")
    reader = csv.reader(io.StringIO(text))
    try:
        return _parse_rows(reader, name)
    except csv.Error as exc:
        problem = "a field is longer than csv's limit of {:,} characters".format(csv.field_size_limit()) if "field larger" in str(exc) else "not valid CSV"
        raise LabError(f"{name}: line {reader.line_num}", f"{problem}; expected comma-separated numbers") from None


def _parse_rows(reader, name):
    header = next(reader, None)
    if header is None:
        raise LabError(name, "the trace file is empty")
    header = [h.strip().lstrip("\ufeff") for h in header]
    for arrival_col, prompt_col, output_col, wallclock in TRACE_FORMATS:
        if arrival_col in header and prompt_col in header and output_col in header:
            cols = (header.index(arrival_col), header.index(prompt_col), header.index(output_col))
            break
    else:
        known = "; ".join(",".join(f[:3]) for f in TRACE_FORMATS)
        raise LabError(f"{name}: line 1", f"the header does not name a known set of columns; expected columns {known}")
    rows = []
    width = max(cols) + 1
    for row in reader:
        lineno = reader.line_num
        if not row or all(not c.strip() for c in row):
            continue
        if len(row) < width:
            raise LabError(f"{name}: line {lineno}", f"expected at least {width} columns, got {len(row)}")
        raw_t, raw_p, raw_o = (row[i].strip() for i in cols)
        t = _parse_time(raw_t, wallclock, name, lineno, header[cols[0]])
        p = _parse_tokens(raw_p, name, lineno, header[cols[1]])
        o = _parse_tokens(raw_o, name, lineno, header[cols[2]])
        rows.append((t, p, o))
        if len(rows) > 10 * MAX_REQUESTS:
            raise LabError(f"{name}: line {lineno}", f"trace longer than {10 * MAX_REQUESTS:,} rows")
    if not rows:
        raise LabError(name, "the trace has a header but no requests")
    rows.sort(key=lambda r: r[0])
    t0 = rows[0][0]
    return [(t - t0, p, o) for t, p, o in rows]


def _parse_time(raw, wallclock, name, lineno, column):
    where = f"{name}: line {lineno}, column {column}"
    if wallclock:
        try:
            return _timestamp_seconds(raw)
        except (ValueError, OverflowError):
            raise LabError(where, "expected a timestamp like 2023-11-16 18:15:46.6805900") from None
    try:
        value = float(raw)
    except ValueError:
        raise LabError(where, "expected a number of seconds") from None
    if not math.isfinite(value) or value < 0 or value > MAX_TRACE_TIME_S:
        raise LabError(where, f"expected a finite number of seconds from 0 to {MAX_TRACE_TIME_S:g}")
    return value


def _timestamp_seconds(raw):
    # The Azure release has 7 fractional digits, more than datetime parses on 3.11.
    main, _, frac = raw.partition(".")
    stamp = datetime.strptime(main.strip(), "%Y-%m-%d %H:%M:%S")
    whole = (stamp - datetime(1970, 1, 1)).total_seconds()
    if frac and (not frac.isdigit() or not frac.isascii() or len(frac) > 12):
        raise ValueError(raw)
    value = whole + (int(frac) / 10 ** len(frac) if frac else 0.0)
    if not 0 <= value <= MAX_TRACE_TIME_S:
        raise ValueError(raw)
    return value


def _parse_tokens(raw, name, lineno, column):
    where = f"{name}: line {lineno}, column {column}"
    try:
        value = float(raw)
    except ValueError:
        raise LabError(where, "expected a token count") from None
    if not math.isfinite(value) or value != int(value):
        raise LabError(where, "expected a whole number of tokens")
    if value < 1 or value > MAX_TOKENS:
        raise LabError(where, f"expected a token count from 1 to {MAX_TOKENS:,}")
    return int(value)

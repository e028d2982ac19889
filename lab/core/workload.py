"""Requests: generated (Poisson arrivals, phases, length distributions) or replayed from a trace.

Everything random comes from one `random.Random(seed)`, drawn in a fixed order (gap,
prompt, output) so the same seed gives the same requests on every runtime. Arrival
times are rounded to the microsecond so that a last-bit difference in a platform's
`log` cannot change the schedule.

Requests are `(arrival_s, prompt_tokens, output_tokens)`, or with a fourth item, the
prompt's block hashes (a tuple of ints, one per `workload.prefix_block_tokens` tokens),
when the workload has `prefixes` or a trace carries `hash_ids` (Mooncake's JSON lines).
Without those the requests and the draws are exactly what they were before prefixes.

Trace files are untrusted input: a trace path must resolve (symlinks included) inside
the folders its scenario allows, be a regular file under MAX_TRACE_BYTES, and parse
errors name the line and column but never echo the file's content.
"""

import csv
import io
import json
import math
import os
import random
import stat
from datetime import datetime

from . import fields as F
from .errors import LabError
from .loading import read_text
from .spec import MAX_DURATION_S, MAX_HASH_IDS, MAX_REQUESTS, MAX_TOKENS, MAX_TRACE_TIME_S

__all__ = [
    "generate_requests",
    "resolve_trace_path",
    "read_trace",
    "parse_trace_text",
    "TRACE_FORMATS",
    "JSONL_FIELDS",
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
# Mooncake FAST'25 JSON lines: timestamp in ms, lengths, prefix block hashes.
JSONL_FIELDS = ("timestamp", "input_length", "output_length", "hash_ids")


def generate_requests(workload, seed):
    """[(arrival_s, prompt_tokens, output_tokens)] sorted by arrival (with hash ids: see above)."""
    if workload.trace is not None:
        return _trace_requests(workload)
    if workload.prefixes is not None:
        return _prefixed_requests(workload, seed)
    rng = random.Random(seed)
    out = []
    for start, end, rate, prompt, output in workload.segments():
        for arrival in _poisson_arrivals(start, end, rate, rng):
            out.append((arrival, _draw(prompt, rng), _draw(output, rng)))
            if len(out) > MAX_REQUESTS:
                raise LabError("workload.rate", f"more than {MAX_REQUESTS:,} requests; lower the rate or duration")
    return out


def _poisson_arrivals(start, end, rate, rng):
    """Arrival times of a Poisson process of `rate` on [start, end), to the microsecond. It
    draws each gap only when asked for the next arrival, so a caller's own draws per
    arrival stay between the gaps (the order the workload's seeds are defined by)."""
    if rate <= 0:
        return
    t = start
    while True:
        t += rng.expovariate(rate)
        if t >= end:
            return
        arrival = round(t, 6)
        if arrival >= end:
            return
        yield arrival


class _Conversation:
    """A multi-turn conversation's content so far: its length and its full blocks' hashes."""

    __slots__ = ("tokens", "blocks")

    def __init__(self, tokens, blocks):
        self.tokens = tokens
        self.blocks = blocks


def _prefixed_requests(workload, seed):
    """Generated requests with shared prefixes (docs/model.md "Prefix caching", workload.prefixes).

    Per arrival, in this order: the gap, then (when follow-ups are possible) whether it is
    a follow-up and which open conversation it continues, the new message's length, the
    output length, and for a new conversation whether it has a system prompt and which.
    Block hashes are numbered in the order they are made: system prompts first (0, 1, ...),
    then every new block; a turn reuses its conversation's full blocks.
    """
    spec = workload.prefixes
    block = workload.prefix_block_tokens
    rng = random.Random(seed)
    next_id = 0
    systems = []  # each system prompt's full blocks
    for _ in range(spec.systems):
        count = spec.system_tokens // block
        systems.append(tuple(range(next_id, next_id + count)))
        next_id += count
    open_convs = []  # the most recent conversations, oldest first, at most open_conversations
    out = []
    total_ids = 0
    for start, end, rate, prompt_dist, output_dist in workload.segments():
        followup_dist = spec.followup_tokens or prompt_dist
        for arrival in _poisson_arrivals(start, end, rate, rng):
            conv = None
            if spec.followup_share > 0 and open_convs and rng.random() < spec.followup_share:
                conv = open_convs[rng.randrange(len(open_convs))]
            message = _draw(followup_dist if conv is not None else prompt_dist, rng)
            output = _draw(output_dist, rng)
            if conv is not None and conv.tokens + message > spec.max_prompt_tokens:
                conv = None  # too long to continue: this message starts a new conversation
            if conv is None:
                head_tokens, head = 0, ()
                if spec.system_tokens and rng.random() < spec.system_share:
                    head = systems[rng.randrange(len(systems))] if len(systems) > 1 else systems[0]
                    head_tokens = spec.system_tokens
                    message = min(message, spec.max_prompt_tokens - head_tokens)
                conv = _Conversation(head_tokens, head)
                open_convs.append(conv)
                if len(open_convs) > spec.open_conversations:
                    open_convs.pop(0)
            prompt = conv.tokens + message
            # The prompt's blocks: the conversation's full blocks, then new ones (the last
            # may be partial, so it is new even when the conversation goes on past it).
            reused = conv.blocks[: prompt // block] if prompt // block < len(conv.blocks) else conv.blocks
            fresh = -(-prompt // block) - len(reused)
            # After the answer, the conversation's content is prompt + output tokens: its
            # full blocks inside the prompt keep their hashes, the later ones are new.
            more = (prompt + output) // block - prompt // block
            # Bounded before anything is built: the requests' hashes, and every hash made
            # (an open conversation holds its answer's blocks too).
            total_ids += len(reused) + fresh
            if total_ids > MAX_HASH_IDS or next_id + fresh + more > MAX_HASH_IDS:
                raise LabError("workload.prefix_block_tokens", f"more than {MAX_HASH_IDS:,} block hashes over the run "
                                                               "(prompts' and answers' blocks); use larger blocks or "
                                                               "fewer or shorter requests")
            hash_ids = reused + tuple(range(next_id, next_id + fresh))
            next_id += fresh
            conv.blocks = hash_ids[: prompt // block] + tuple(range(next_id, next_id + more))
            next_id += more
            conv.tokens = prompt + output
            out.append((arrival, prompt, output, hash_ids))
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
    for row in rows:
        arrival = row[0]
        if arrival < start:
            continue
        rel = arrival - start
        if window is not None and rel >= window:
            break
        out.append((round(rel * trace.time_scale, 6),) + row[1:])
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


def path_inside(path, folder):
    """Whether real path `path` is `folder` or lies under it (the trace roots' test)."""
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
    if not any(path_inside(full, root) for root in roots):
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
    """[(arrival_s, prompt, output[, hash_ids])] of a trace file (a cached, read-only tuple).

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
    """Parse a trace CSV in any of TRACE_FORMATS, or Mooncake JSON lines (JSONL_FIELDS: a
    text whose first non-blank character is "{"); arrivals re-based to start at 0 and
    sorted (stably: equal times keep the file's order).

    Safe on hostile text (an upload): bounded size, csv's field-size limit reported
    as a LabError, and no message quotes the text; each names the line and column.
    """
    if not isinstance(text, str):
        raise LabError(name, "expected the trace as text")
    if len(text) > MAX_TRACE_BYTES:
        raise LabError(name, f"the trace is {len(text):,} characters; the limit is {MAX_TRACE_BYTES:,}")
    if text.lstrip("\ufeff \t\r\n").startswith("{"):
        return _parse_jsonl(text, name)
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
    if not wallclock:
        value = F.number_from_text(raw)
        if type(value) is float and 0 <= value <= MAX_TRACE_TIME_S:  # (NaN and inf fail the test)
            return value  # what _csv_number below returns for it, without its cost per row
    where = f"{name}: line {lineno}, column {column}"
    if wallclock:
        try:
            return _timestamp_seconds(raw)
        except (ValueError, OverflowError):
            raise LabError(where, "expected a timestamp like 2023-11-16 18:15:46.6805900") from None
    return _csv_number(raw, where, f"expected a number of seconds from 0 to {MAX_TRACE_TIME_S:g}", lo=0, hi=MAX_TRACE_TIME_S)


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
    if len(raw) < 16 and raw.isdigit() and raw.isascii():  # (most cells: what the readers return for them, faster)
        value = int(raw)
        if 1 <= value <= MAX_TOKENS:
            return value
    where = f"{name}: line {lineno}, column {column}"
    return _csv_number(raw, where, f"expected a token count from 1 to {MAX_TOKENS:,}", whole=True, lo=1, hi=MAX_TOKENS)


def _parse_jsonl(text, name):
    """Mooncake FAST'25 JSON lines: one object per line with JSONL_FIELDS (others ignored)."""
    rows = []
    total_ids = 0
    for lineno, line in enumerate(text.splitlines(), 1):
        line = line.strip().lstrip("\ufeff")
        if not line:
            continue
        where = f"{name}: line {lineno}"
        try:
            row = F.loads(line)  # numbers past a float's range stay text (BigNumber), for the readers to refuse
        except (ValueError, RecursionError):
            raise LabError(where, "not a JSON object; expected one object per line with " + ", ".join(JSONL_FIELDS)) from None
        if not isinstance(row, dict):
            raise LabError(where, "expected a JSON object with " + ", ".join(JSONL_FIELDS))
        for key in JSONL_FIELDS[:3]:
            if key not in row:
                raise LabError(f"{where}, field {key}", "required field is missing (Mooncake rows have " + ", ".join(JSONL_FIELDS) + ")")
        stamp = _jsonl_number(row, "timestamp", where, "is not a time: expected milliseconds", lo=0, hi=MAX_TRACE_TIME_S * 1000)
        prompt = _jsonl_number(row, "input_length", where, "is not a token count", whole=True, lo=1, hi=MAX_TOKENS)
        output = _jsonl_number(row, "output_length", where, "is not a token count", whole=True, lo=1, hi=MAX_TOKENS)
        hashes = row.get("hash_ids", [])
        if not isinstance(hashes, list):
            raise LabError(f"{where}, field hash_ids", f"{_short(hashes)} is not a list: expected a list of whole numbers (block hashes)")
        if not all(type(h) is int and h >= 0 for h in hashes):  # (what the reader takes as it is: the common case, fast)
            hashes = [_jsonl_number(hashes, i, where, "is not a block hash", whole=True, lo=0) for i in range(len(hashes))]
        total_ids += len(hashes)
        if total_ids > MAX_HASH_IDS:
            raise LabError(where, f"more than {MAX_HASH_IDS:,} block hashes in the trace")
        rows.append((stamp / 1000.0, prompt, output, tuple(hashes)))
        if len(rows) > 10 * MAX_REQUESTS:
            raise LabError(where, f"trace longer than {10 * MAX_REQUESTS:,} rows")
    if not rows:
        raise LabError(name, "the trace has no requests")
    rows.sort(key=lambda r: r[0])
    t0 = rows[0][0]
    return [(r[0] - t0,) + r[1:] for r in rows]


def _short(value):
    """A bad value for a message: numbers as they are (shortened), never the file's text."""
    if isinstance(value, bool) or value is None:
        return json.dumps(value)
    if F.is_number(value):
        return F.describe(value)
    return {str: "text", list: "a list", dict: "an object"}.get(type(value), "a value")


def _jsonl_number(row, key, where, not_number, whole=False, lo=None, hi=None):
    """row[key] read by the scenario fields' readers (core.fields), refused as `where, field KEY`.

    Only a number reaches the readers: their messages quote the value, and a row's text is
    never quoted back (it is called "text").
    """
    field = f"{where}, field {key}" if isinstance(key, str) else f"{where}, field hash_ids[{key}]"
    return _read_number(row[key], field, not_number, whole, lo, hi)


def _csv_number(raw, where, not_number, whole=False, lo=None, hi=None):
    """A CSV cell's number read as a JSON line's is (`_read_number`): its text parsed as
    core.fields parses a number typed on the command line, never quoted back."""
    value = F.number_from_text(raw)
    if value is None:
        raise LabError(where, not_number)
    return _read_number(value, where, not_number, whole, lo, hi)


def _read_number(value, field, not_number, whole, lo, hi):
    """`value` through the scenario fields' readers (core.fields), refused as `field`."""
    if type(value) is int and (lo is None or lo <= value) and (hi is None or value <= hi):
        return value if whole else float(value)  # what the readers return for it, without their cost per row
    if not F.is_number(value):
        raise LabError(field, f"{_short(value)} {not_number}")
    try:
        if whole:
            return F.read_int({"value": value}, "value", "", lo=lo, hi=hi)
        return F.read_number({"value": value}, "value", "", lo=lo, hi=hi)
    except LabError as exc:
        raise LabError(field, exc.detail) from None

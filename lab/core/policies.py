"""Scheduling policies: which instance takes an arriving prompt, which decode instance gets
its KV, and how much of a chunk budget each prompt under way takes.

Each rule is a small function over a view of the fleet: just the numbers it reads (each
instance's load, or each decode instance's `seqs` and `kv_free`), never the engine's
queues or schedule, so the rules read as written in docs/model.md ("Routing") and the reference
simulator (which does not import this module) checks them independently.

**Dispatch** (`fleet.dispatch`; colocated: the fleet's instances, disaggregated: the
prefill pool's). Prompts wait in FIFO queues; `queue_plan` says which queue each instance
takes prompts from and `Router.route` which queue an arriving prompt joins:

- `queue`: one FIFO for the whole pool; a free instance takes its head at its step
  boundary (the lab's original rule).
- `round_robin`: the n-th arriving prompt (0-based, dropped requests never arrive) is
  bound to instance n mod instances, into that instance's own FIFO.
- `least_loaded`: bound at arrival to the instance with the smallest load, ties lowest
  index. Load = prompt tokens waiting in its FIFO + the context it is running: prompt
  tokens of the prompts it has admitted and not finished prefilling, plus prompt and
  emitted tokens of its decoding sequences, as of its last step boundary.
- `length_split`: prompts of at least `long_prompt_tokens` tokens join the queue of the
  pool's last `long_gpus` GPUs (their instances), the rest the queue of the others;
  each group's queue works like `queue`.
- `cache_affinity`: bound at arrival to the instance whose prefix cache holds the longest
  leading run of the prompt's block hashes (docs/model.md "Prefix caching": a per_gpu cache as it
  is at the arrival; with a shared pool or none every instance ties); ties go to the
  smallest `least_loaded` load, then the lowest index.

**Decode pick** (`fleet.decode_pick`, disaggregated): among decode instances with a free
batch slot and room for the prompt's KV (prompt + output tokens), `most_free_kv` takes
the one with the most free KV tokens (the original rule), `fewest_seqs` the one with the
fewest sequences; ties lowest index; none: the prompt waits, FIFO (no skipping).

**Partial prefills** (`fleet.long_prefill_tokens`, with a chunk budget: docs/model.md "Chunked
prefill and partial prefills"). `prefill_slice` is one prompt's share of a step's budget:
what it still needs, at most the budget left, and for a prompt of more than
`long_prefill_tokens` tokens at most that many. The engine hands the budget to its prompts
under way in admission order, then to newly admitted ones; blame.py replays the same
function over the step logs to recover each prompt's pieces.
"""

__all__ = [
    "DISPATCH", "DECODE_PICK", "DECODE_PICKS", "DecodeView", "queue_plan", "Router", "least_loaded",
    "most_free_kv", "fewest_seqs", "pick_decode", "prefill_slice", "most_cached", "bound_queues",
    "BOUND_AT_ARRIVAL",
]

from typing import NamedTuple

from .spec import Fleet

DISPATCH = Fleet.DISPATCH  # the names the scenario accepts, one list
DECODE_PICK = Fleet.DECODE_PICK


def queue_plan(dispatch, instances, long_instances=0):
    """The queue each of `instances` instances takes prompts from: a list, one queue number each.

    `long_instances` (length_split only): how many of the last instances serve long prompts.
    """
    if dispatch == "queue":
        return [0] * instances
    if dispatch == "length_split":
        short = instances - long_instances
        return [0] * short + [1] * long_instances
    return list(range(instances))  # bound at arrival: each instance its own FIFO


class Router:
    """`route(prompt_tokens, loads)`: the queue an arriving prompt joins (see module docstring).

    `loads` is a zero-argument function giving every instance's load, in instance order;
    only `least_loaded` and `cache_affinity` call it, so the other rules cost nothing per
    arrival. `cached` (cache_affinity): a zero-argument function giving each instance's
    cached leading blocks of the prompt.
    """

    __slots__ = ("dispatch", "instances", "long_prompt_tokens", "arrived")

    def __init__(self, dispatch, instances, long_prompt_tokens=None):
        if dispatch not in DISPATCH:
            raise ValueError(f"unknown dispatch {dispatch!r}")
        self.dispatch = dispatch
        self.instances = instances
        self.long_prompt_tokens = long_prompt_tokens
        self.arrived = 0  # prompts routed so far (round_robin's counter)

    def route(self, prompt_tokens, loads=None, cached=None):
        n = self.arrived
        self.arrived = n + 1
        rule = self.dispatch
        if rule == "queue":
            return 0
        if rule == "length_split":
            return 1 if prompt_tokens >= self.long_prompt_tokens else 0
        if rule == "round_robin":
            return n % self.instances
        if rule == "cache_affinity":
            return most_cached(cached(), loads())
        return least_loaded(loads())


# The rules whose queue follows from the arrival order and the prompt alone (no fleet state).
BOUND_AT_ARRIVAL = ("round_robin", "length_split")


def bound_queues(dispatch, instances, long_prompt_tokens, prompts):
    """The queue each of the arriving `prompts` (their prompt tokens, in arrival order) joins,
    for the rules in BOUND_AT_ARRIVAL: a fresh `Router` routes them in order, so each rule
    is written once (in `Router.route`). None for the others: `queue` has one queue, and
    least_loaded and cache_affinity read the fleet's state at the arrival."""
    if dispatch not in BOUND_AT_ARRIVAL:
        return None
    route = Router(dispatch, instances, long_prompt_tokens).route
    return [route(p) for p in prompts]


def least_loaded(loads):
    """Index of the smallest load; ties: the lowest index."""
    best = 0
    for i in range(1, len(loads)):
        if loads[i] < loads[best]:
            best = i
    return best


def most_cached(blocks, loads):
    """Index of the most cached leading blocks; ties: the smallest load, then the lowest index."""
    best = 0
    for i in range(1, len(blocks)):
        if blocks[i] > blocks[best] or (blocks[i] == blocks[best] and loads[i] < loads[best]):
            best = i
    return best


class DecodeView(NamedTuple):
    """What the decode pick reads of one decode instance (the engine's instances have the
    same two attributes, so it hands them over as they are: no copy per reservation)."""

    seqs: int  # sequences holding a batch slot (decoding, landing or reserved)
    kv_free: int  # KV tokens not reserved


def most_free_kv(need, max_seqs, instances):
    """The instance with the most free KV among those with a free slot and room; ties lowest."""
    best = None
    most = need - 1  # free > need - 1: room for the prompt (token counts are whole)
    for i, view in enumerate(instances):
        if view.seqs < max_seqs and view.kv_free > most:
            best, most = i, view.kv_free
    return best


def fewest_seqs(need, max_seqs, instances):
    """The instance with the fewest sequences among those with a free slot and room; ties lowest."""
    best = None
    fewest = max_seqs  # seqs < max_seqs: a free slot
    for i, view in enumerate(instances):
        if view.seqs < fewest and view.kv_free >= need:
            best, fewest = i, view.seqs
    return best


DECODE_PICKS = {"most_free_kv": most_free_kv, "fewest_seqs": fewest_seqs}


def pick_decode(rule, need, max_seqs, instances):
    """The decode instance (index into `instances`) that takes a prompt needing `need` KV tokens.

    `instances`: one object with `seqs` and `kv_free` (a `DecodeView`) per decode instance,
    in order. None when no instance has both a free slot and room (the prompt waits).
    The engine binds `DECODE_PICKS[rule]` once instead of calling this per prompt.
    """
    return DECODE_PICKS[rule](need, max_seqs, instances)


def prefill_slice(prompt_tokens, left, budget, long_prefill_tokens=None):
    """Prompt tokens a prompt of `prompt_tokens` with `left` still to prefill takes from a
    step whose chunk budget has `budget` left. `long_prefill_tokens` None: no cap (the
    prompt under way takes all it can, so prompts behind it wait for its last chunk)."""
    take = left if left < budget else budget
    if long_prefill_tokens is not None and prompt_tokens > long_prefill_tokens and take > long_prefill_tokens:
        return long_prefill_tokens
    return take

"""KV memory on demand (`fleet.kv_policy: on_demand`): block accounting and preemption.

The rules (docs/model.md "KV on demand"), each a small function over plain numbers so the engine
stays the event loop and the reference simulator (tests/reference_sim.py, which does not
import this module) checks them independently:

- KV is held in blocks of `kv_block_tokens` (B) tokens; an instance has
  `capacity_blocks(kv_tokens, B)` of them. `blocks(n, B)` blocks hold n tokens.
- Admission takes the blocks of what it prefills (a prompt; after a preemption, prompt +
  the tokens already emitted); a split fleet's decode instance takes them when room is
  reserved for the prompt's KV.
- A decoding sequence attends `context` tokens in a step (prompt + tokens emitted so far)
  and needs `blocks(context, B)` blocks then: one more every B steps (`grows_at`).
- When an instance lacks blocks for the growth of its next step, `victims` picks the
  sequences to preempt: the most recently admitted decoding ones first, until the growth
  of the rest fits. A victim frees all its blocks.
- A request no instance could ever hold alone is dropped: `peak_blocks` over capacity.
"""

__all__ = ["blocks", "capacity_blocks", "peak_blocks", "grows_at", "victims"]


def blocks(tokens, block_tokens):
    """Blocks that hold `tokens` tokens: ceil(tokens / block_tokens)."""
    return -(-tokens // block_tokens)


def capacity_blocks(kv_tokens, block_tokens):
    """Whole blocks in an instance's KV capacity of `kv_tokens` tokens."""
    return kv_tokens // block_tokens


def peak_blocks(prompt_tokens, output_tokens, block_tokens):
    """The most blocks one request ever holds: its last step attends prompt + output - 1
    tokens (a one-token answer only its prompt)."""
    return blocks(prompt_tokens + max(output_tokens - 1, 0), block_tokens)


def grows_at(step, context, held, block_tokens):
    """The first step >= `step` in which a sequence attending `context` tokens in `step`
    (one more each step after) needs more than the `held` blocks it has."""
    over = held * block_tokens - context + 1  # steps until its context passes held blocks
    return step + (over if over > 0 else 0)


def victims(candidates, growing, free_blocks, held):
    """Which sequences to preempt so the growth of the rest fits, most recent first.

    `candidates`: the instance's decoding sequences in admission order; `growing`: the set
    of those that need one more block for the next step; `held[s]`: blocks each holds.
    Returns the victims in the order they are preempted (most recently admitted first).
    """
    need = len(growing)
    out = []
    for s in reversed(candidates):
        if need <= free_blocks:
            break
        out.append(s)
        free_blocks += held[s]
        if s in growing:
            need -= 1
    return out

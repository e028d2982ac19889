"""KV memory policies (`fleet.kv_policy`): what a sequence holds on an instance, and what an
instance does when it runs out (docs/model.md "KV on demand").

Each policy is one object with one interface, which the engine's single set of handlers
calls (engine.py). The engine keeps, per instance, `kv_free` (KV tokens not held),
`held` (request id -> the units of `block` tokens each sequence holds there, in the
order they were taken: the victims' order) and `grow_at` (step index -> the sequences
that need one more unit in that step; empty unless the policy grows sequences). A
policy owns:

- `units(rec, tokens)`: the units a sequence takes when its instance admits it
  (colocated) or room is reserved for it (split); `tokens` is what it prefills (after a
  preemption prompt + the tokens it emitted; a moved sequence's context);
- `room(kv_tokens)`: the KV tokens an instance of that capacity can hand out (whole
  units); `clear(gpu)`: the instance holds nothing, every unit free;
- `peak(rec)` and `unit_words`: the most units a request ever holds, in words, for the
  requests no instance could hold alone (dropped);
- `track(gpu, rec, step, context)`: a decode stretch starts, attending `context` tokens
  in `step`: schedule its growth;
- `grow(gpu, t)`: at a boundary (called only while `gpu.grow_at` is not empty), give the
  next step's growing sequences their unit, preempting if they do not fit (True if it
  preempted); `give(gpu, step, done)`: the same without preempting, for the engine's
  decode run-ahead, which hands a boundary where they do not fit back to the heap;
- `note(gpu, t)`: log the units in use (`GpuLog.kv_used`);
- `grows`: whether sequences take more KV as they decode (and so may be preempted); the
  engine then calls `grow` and `note` at every boundary, `track` at every stretch's start,
  and takes no shortcut that skips a boundary's policy work; without it, none of these;
- `quiet_until(gpu, others)`: the earliest time one of `others` could preempt: a
  run-ahead may go on until then;
- `forget(rid)`: a draining instance handed the sequence over (its growth goes with it).

`Reserve` takes a request's whole KV, prompt + output tokens, when admitted (units of one
token) and never grows, preempts or logs. `OnDemand` holds blocks as kv.py's rules say:
the blocks of what it prefills at first, one more every B steps, and the most recently
admitted decoding sequences are preempted when the growth does not fit.
"""

from . import kv
from .events import INF

__all__ = ["KvPolicy", "Reserve", "OnDemand", "make"]


class KvPolicy:
    """The interface (see the module docstring), with what a policy that never grows does."""

    block = 1  # tokens per unit
    grows = False

    def room(self, kv_tokens):
        return kv_tokens

    def clear(self, gpu):
        gpu.held, gpu.grow_at = {}, {}
        gpu.kv_free = self.room(gpu.kv_tokens)

    def track(self, gpu, rec, step, context):
        pass

    def note(self, gpu, t):
        pass

    def quiet_until(self, gpu, others):
        return INF

    def forget(self, rid):
        pass


class Reserve(KvPolicy):
    """`reserve` (the default): a request's prompt + output tokens are held from admission to
    its finish, in units of one token. Nothing grows, no one preempts, nothing is logged."""

    unit_words = "KV tokens"

    def units(self, rec, tokens):
        return rec.prompt_tokens + rec.output_tokens

    def peak(self, rec):
        return rec.prompt_tokens + rec.output_tokens


class OnDemand(KvPolicy):
    """`on_demand`: blocks of `kv_block_tokens` (B) tokens as a sequence needs them (kv.py).

    `records` are the run's requests; `gpus` its instances (their shortest step with a
    sequence decoding is worked out once, for `quiet_until`); `preempt(gpu, rid, step, t)`
    is the engine's: the victim's stretch ends and it re-enters its queue's front.
    """

    def __init__(self, block, records, gpus, preempt):
        self.grows = True
        self.block = block
        self.unit_words = f"KV blocks of {block} tokens"
        self.records = records
        self.preempt = preempt
        self.grow_step = {}  # request id -> the step its next block is due (in its GPU's grow_at)
        # The shortest step an instance with a sequence decoding can take (step time only
        # grows with the batch, its context and prompt work): for quiet_until.
        self.min_step = [g.step_t(1, 0, 0) for g in gpus]

    def units(self, rec, tokens):
        return kv.blocks(tokens, self.block)

    def peak(self, rec):
        return kv.peak_blocks(rec.prompt_tokens, rec.output_tokens, self.block)

    def room(self, kv_tokens):
        return kv.capacity_blocks(kv_tokens, self.block) * self.block

    def track(self, gpu, rec, step, context):
        due = kv.grows_at(step, context, gpu.held[rec.id], self.block)
        if due <= rec.decode_last_step:
            gpu.grow_at.setdefault(due, []).append(rec.id)
            self.grow_step[rec.id] = due

    def grow(self, gpu, t):
        step = len(gpu.log.start_t)
        growers = gpu.grow_at.get(step)
        if growers is None:
            return False
        block = self.block
        preempted = len(growers) * block > gpu.kv_free
        if preempted:
            records = self.records
            candidates = [rid for rid in gpu.held if records[rid].decode_first_step >= 0]
            for rid in kv.victims(candidates, set(growers), gpu.kv_free // block, gpu.held):
                self._untrack(gpu, rid)  # (out of `growers` too if it was to grow now)
                self.preempt(gpu, rid, step, t)
        self.give(gpu, step)  # the rest fit now
        return preempted

    def give(self, gpu, step, done=None):
        """Each sequence due to grow in `step` takes one more block, if they all fit in the free
        blocks and those the sequences `done` free at the same boundary (none of them grows).
        False if they do not (nothing applied: it would preempt). The engine's decode run-ahead
        calls it as it goes."""
        grow_at = gpu.grow_at
        growers = grow_at[step]
        block = self.block
        held = gpu.held
        if len(growers) * block > gpu.kv_free:
            free = gpu.kv_free // block
            if done:
                free += sum(held[rid] for rid in done)
            if len(growers) > free:
                return False
        del grow_at[step]
        grow_step = self.grow_step
        records = self.records
        due = step + block
        for rid in growers:
            held[rid] += 1
            if due <= records[rid].decode_last_step:
                grow_at.setdefault(due, []).append(rid)
                grow_step[rid] = due
        gpu.kv_free -= len(growers) * block
        return True

    def _untrack(self, gpu, rid):
        due = gpu.grow_at.get(self.grow_step.pop(rid, None))
        if due and rid in due:
            due.remove(rid)

    def forget(self, rid):
        self.grow_step.pop(rid, None)

    def note(self, gpu, t):
        """Log the blocks in use on `gpu` at t (GpuLog.kv_used; the last entry at t wins)."""
        block = self.block
        used = kv.capacity_blocks(gpu.kv_tokens, block) - gpu.kv_free // block
        trace = gpu.log.kv_used
        if trace and trace[-1][0] == t:
            trace[-1] = (t, used)
        elif not trace or trace[-1][1] != used:
            trace.append((t, used))

    def quiet_until(self, gpu, others):
        """The earliest time one of `others` (not `gpu`) could preempt. An instance preempts
        only at a boundary where its growth is over its free blocks; each decoding sequence
        grows at most once in B boundaries, so with F free blocks and n decoding it cannot
        before B x floor(F / n) more steps, each at least min_step long. One with prompt
        work under way (a colocated instance whose prefills may start decoding) counts from
        its next boundary. Sequences whose KV has landed there join at that boundary and grow
        from then on, so they count among its decoding ones."""
        block = self.block
        quiet = INF
        for other in others:
            if other is gpu or other.idle:
                continue
            growers = other.decoding + len(other.landed) + len(other.rejoin)
            if not (growers or other.prefilling or other.completing):
                continue
            log = other.log
            pending = log.end_t[-1] if log.end_t else 0
            if other.prefilling or other.completing or not other.decoding:
                when = pending
            else:
                when = pending + block * ((other.kv_free // block) // growers) * self.min_step[other.index]
            if when < quiet:
                quiet = when
        return quiet


def make(fleet, records, gpus, preempt):
    """The run's policy (see OnDemand for the arguments), every instance cleared."""
    if fleet.kv_policy == "on_demand":
        policy = OnDemand(fleet.kv_block_tokens, records, gpus, preempt)
    else:
        policy = Reserve()
    for gpu in gpus:
        policy.clear(gpu)
    return policy

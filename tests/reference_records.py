"""The naive reference simulator's records (tests/reference_sim.py): a request with every token's
tick, a GPU, a transfer and its layer chunks, a prefix cache as a plain list, and the result.
Plain objects, recounted from scratch whenever the simulator needs a number."""

__all__ = ["Seq", "RefChunk", "RefGpu", "RefCache", "RefTransfer", "RefResult", "to_ticks", "ceil_div"]


def to_ticks(seconds):
    """docs/model.md "Time base": seconds -> whole picosecond ticks, round(seconds * 1e12)."""
    return round(seconds * 1e12)


def ceil_div(a, b):
    return -(-a // b)


class Seq:
    """One request, with everything that happened to it."""

    def __init__(self, rid, arrival, prompt, output, hash_ids=()):
        self.id = rid
        self.hash_ids = tuple(hash_ids)
        self.hit = 0  # prompt tokens its (first) prefill found cached
        self.fetch = 0.0  # seconds fetching them from a shared pool
        self.fetch_due = 0.0  # seconds of fetch (any prefill's) that belong to the next step it is part of
        self.arrival = arrival
        self.P = prompt
        self.O = output
        self.dropped = False
        self.prefill_gpu = -1
        self.decode_gpu = -1
        self.prefill_start = None
        self.prefill_end = None
        self.first_token = None
        self.finish = None
        self.prefilled = 0  # prompt tokens processed so far
        self.tokens = []  # timestamp of every emitted token, in order
        self.token_gpus = []  # the GPU that emitted each
        self.resumed_at = set()  # indices into tokens of the first token after each preemption
        self.generated = 0  # tokens the sequence owns (decode side: the first token counts)
        self.joined = False  # decode GPU: added to the running batch
        self.landed = None  # disaggregated: time the KV landed on the decode GPU
        self.prefill_end_planned = None  # disaggregated: end time of the step ending its prefill
        self.last_step_start = None  # disaggregated: start of that step (layer-wise streaming)
        self.prompt_pieces = []  # (own prompt tokens, own tokens before) of each step that carried some (for blame)
        self.rejected = False  # fleet.admission turned it away at arrival
        self.predicted_ttft_s = None  # what the admission rule predicted at its arrival
        self.todo = prompt  # tokens its (next) prefill processes: prompt, + tokens it owns after a preemption
        self.blocks = 0  # on_demand: KV blocks it holds on its colocated / decode GPU
        self.preemptions = 0
        self.at_prefill = None  # the GPU prefilling it now (split fleet), and when it was taken there
        self.taken = None
        self.moved_from = None  # planner: (GPU, time) it was handed over from, until it joins again

    @property
    def kv_need(self):
        return self.P + self.O

    @property
    def finished(self):
        return self.finish is not None


class RefTransfer:
    def __init__(self, request, src, dst, ready, reserved, start, end, nbytes):
        self.request = request
        self.src_gpu = src
        self.dst_gpu = dst
        self.ready = ready
        self.reserved = reserved
        self.start = start
        self.end = end
        self.bytes = nbytes
        self.chunks = None  # layer-wise: one RefChunk per layer, in layer order
        self.layer_s = 0.0  # layer-wise: wire time of one chunk

    def as_tuple(self):
        starts = None if self.chunks is None else tuple(c.start for c in self.chunks)
        return (self.request, self.src_gpu, self.dst_gpu, self.ready, self.reserved, self.start, self.end, self.bytes,
                self.layer_s, starts)


class RefChunk:
    """One layer's share of a layer-wise transfer."""

    def __init__(self, transfer, layer, ready):
        self.transfer = transfer
        self.layer = layer
        self.ready = ready  # its layer's KV exists and room is reserved
        self.start = None  # when it went on the wire


class RefGpu:
    """One instance: `tp` GPUs of type `gpu`, stepping at `step_s`."""

    def __init__(self, index, role, kv_capacity, max_seqs, step_s=None, tp=1, gpu="h100", first_gpu=None,
                 step_t=None):
        self.index = index
        self.role = role  # "colocated" | "prefill" | "decode"
        self.step_s = step_s  # seconds: the admission rule's rate
        self.step_t = step_t  # ticks: what the run adds up
        self.tp = tp
        self.gpu = gpu
        first = index * tp if first_gpu is None else first_gpu
        self.gpu_ids = tuple(first + k for k in range(tp))
        self.kv_capacity = kv_capacity
        self.max_seqs = max_seqs
        self.boundary = None  # time of the next step boundary; None = idle
        self.step = None  # the step in progress: {"decode": [seq], "prefill": [(seq, n)], ...}
        self.members = []  # sequences holding KV + a slot here (admitted / reserved), unfinished
        self.landed = []  # decode: landed, not yet joined, in landing order
        self.steps = []  # (start, end, decode_seqs, prefill_tokens, context_tokens)
        self.attention = {}  # model.attention on a roofline: step number -> (units, re-read tokens)
        self.fetch_s = {}  # shared prefix cache: step number -> seconds its prompts fetched
        self.queue_id = None  # colocated / prefill: the queue it takes prompts from
        self.block = None  # on_demand: kv_block_tokens
        self.kv_trace = []
        self.preempted = []  # (step index, request id)
        self.moving = None  # planner: the role it drains / reloads for
        self.roles = [(0.0, role)]  # planner: (t, role) from t on

    # Recomputed from scratch every time: no counters.
    def free_kv(self):
        if self.block:  # on_demand: free whole blocks, in tokens
            return (self.kv_capacity // self.block - sum(s.blocks for s in self.members)) * self.block
        return self.kv_capacity - sum(s.kv_need for s in self.members)

    def used_blocks(self):
        return sum(s.blocks for s in self.members)

    def note_kv(self, t):
        """The blocks in use at t, after everything so far at t (compared with GpuLog.kv_used)."""
        self.kv_trace.append((t, self.used_blocks()))

    def free_slots(self):
        return self.max_seqs - len(self.members)


class RefCache:
    """Blocks by hash, each with its last use; `capacity` blocks at most."""

    def __init__(self, capacity):
        self.capacity = capacity
        self.entries = []  # [hash, last use]
        self.clock = 0

    def find(self, h):
        for e in self.entries:
            if e[0] == h:
                return e
        return None

    def leading(self, hash_ids):
        n = 0
        for h in hash_ids:
            if self.find(h) is None:
                break
            n += 1
        return n

    def use(self, hash_ids, add):
        """Mark each of `hash_ids` used, last to first; `add`: insert missing ones, evicting."""
        for h in reversed(hash_ids):
            self.clock += 1
            e = self.find(h)
            if e is not None:
                e[1] = self.clock
            elif add:
                self.entries.append([h, self.clock])
                if len(self.entries) > self.capacity:
                    oldest = min(self.entries, key=lambda x: x[1])
                    self.entries.remove(oldest)


class RefResult:
    def __init__(self, requests, gpus, transfers, cap):
        self.requests = requests  # list of Seq, by id
        self.gpus = gpus  # list of RefGpu
        self.transfers = transfers  # list of RefTransfer, in creation order
        self.cap = cap
        self.reconfigurations = []  # planner: (t decided, GPU, from, to, t ready)

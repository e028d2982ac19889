"""Prefix caching: which leading blocks of a prompt a prefill can skip (docs/model.md "Prefix caching").

A request carries block hashes (`RequestRecord.hash_ids`), one per
`workload.prefix_block_tokens` prompt tokens; equal hashes at the same place mean equal
content (Mooncake's trace format). A cache holds blocks, least recently used first out:

- `per_gpu`: every prefilling instance (a colocated GPU or a prefill instance; decode GPUs
  never prefill) keeps its own cache of `prefix_cache_gb` per GPU, taken out of its KV
  capacity (`kv_taken_tokens`);
- `shared`: one pool of `prefix_pool_gb` in host memory for every prefilling instance; a
  hit's KV is fetched at `prefix_fetch_gbytes_per_s` (each instance's own host link).

A prompt admitted onto an instance looks up the longest cached LEADING run of its hashes
(`Cache.lookup`, which also marks those blocks used); it computes only the rest, and
at least its last token (the first output token needs that token's logits, as vLLM
recomputes it on a full hit). When its prefill ends, all its blocks are added
(`Cache.insert`). A request's blocks are used last-to-first, so its leading blocks are
the most recent and a cache under pressure drops a chain's tail before its head (vLLM).
"""

from collections import OrderedDict

__all__ = ["LruBlocks", "Cache", "build_cache", "cache_blocks", "kv_taken_tokens", "kv_taken_by_instance", "hit_tokens"]


class LruBlocks:
    """A set of at most `capacity` block hashes, evicting the least recently used."""

    __slots__ = ("capacity", "blocks")

    def __init__(self, capacity):
        self.capacity = capacity
        self.blocks = OrderedDict()  # hash -> None, least recently used first

    def __len__(self):
        return len(self.blocks)

    def __contains__(self, block):
        return block in self.blocks

    def leading_run(self, hash_ids):
        """How many of `hash_ids`, from the first, are cached (stops at the first miss)."""
        blocks = self.blocks
        n = 0
        for h in hash_ids:
            if h not in blocks:
                break
            n += 1
        return n

    def touch(self, hash_ids):
        """Mark cached `hash_ids` used, last to first (the head ends most recent)."""
        blocks = self.blocks
        for h in reversed(hash_ids):
            if h in blocks:
                blocks.move_to_end(h)

    def insert(self, hash_ids):
        """Add `hash_ids` (last to first), evicting least recently used blocks over capacity."""
        blocks = self.blocks
        capacity = self.capacity
        for h in reversed(hash_ids):
            if h in blocks:
                blocks.move_to_end(h)
                continue
            blocks[h] = None
            if len(blocks) > capacity:
                blocks.popitem(last=False)


def cache_blocks(scenario, gb):
    """Blocks of `workload.prefix_block_tokens` tokens' KV that `gb` gigabytes hold."""
    block_bytes = scenario.workload.prefix_block_tokens * scenario.model.kv_bytes_per_token
    return int(gb * 1e9 // block_bytes)


def kv_taken_tokens(scenario, pool):
    """KV tokens a per_gpu cache takes from one instance of `pool` (0 for decode pools and
    other cache kinds): its blocks x tokens per block, for all `pool.tp` GPUs."""
    fleet = scenario.fleet
    if fleet.prefix_cache != "per_gpu" or pool.role == "decode":
        return 0
    blocks = cache_blocks(scenario, pool.tp * fleet.prefix_setting("prefix_cache_gb"))
    return blocks * scenario.workload.prefix_block_tokens


def kv_taken_by_instance(scenario):
    """`kv_taken_tokens` of every instance, in instance order (for views of KV capacity)."""
    return [kv_taken_tokens(scenario, pool) for pool in scenario.pools() for _ in range(pool.instances)]


def hit_tokens(blocks, block_tokens, prompt_tokens, tokens=None):
    """Tokens a leading run of `blocks` cached blocks saves a prefill of `tokens` (its prompt,
    or after a preemption prompt + the tokens it emitted): at most the prompt (the last block
    may be partial; emitted tokens are never cached), and never the last token."""
    if tokens is None:
        tokens = prompt_tokens
    saved = blocks * block_tokens
    if saved > prompt_tokens:
        saved = prompt_tokens
    return saved if saved < tokens else tokens - 1


class Cache:
    """The fleet's prefix caches: one LRU per prefilling instance, or one shared pool.

    `caches[i]` is instance i's LRU (the same object for every instance when shared;
    None for decode instances and, with a planner, for one reloading). `fetch_s_per_token`
    is 0 for per_gpu caches (the KV is already in the GPU's memory). `shared` is the host
    pool (None for per_gpu), `per_gpu_blocks` a prefill instance's own cache size."""

    def __init__(self, caches, block_tokens, fetch_s_per_token, shared=None, per_gpu_blocks=0):
        self.caches = caches
        self.block_tokens = block_tokens
        self.fetch_s_per_token = fetch_s_per_token
        self.shared = shared
        self.per_gpu_blocks = per_gpu_blocks

    def join(self, instance):
        """`instance` joined the prefill pool (fleet.planner): it reaches the shared pool, or
        starts an empty cache of its own (its reload emptied whatever it held)."""
        self.caches[instance] = self.shared if self.shared is not None else LruBlocks(self.per_gpu_blocks)

    def lookup(self, instance, hash_ids, prompt_tokens, tokens=None):
        """(hit tokens, fetch seconds) for a prefill of `tokens` (default: the prompt)
        admitted on `instance`; marks the hit used."""
        lru = self.caches[instance]
        blocks = lru.leading_run(hash_ids)
        if not blocks:
            return 0, 0.0
        lru.touch(hash_ids[:blocks])
        hit = hit_tokens(blocks, self.block_tokens, prompt_tokens, tokens)
        return hit, hit * self.fetch_s_per_token

    def peek(self, instance, hash_ids, prompt_tokens, tokens=None):
        """Hit tokens `lookup` would give now, changing nothing."""
        blocks = self.caches[instance].leading_run(hash_ids)
        return hit_tokens(blocks, self.block_tokens, prompt_tokens, tokens) if blocks else 0

    def insert(self, instance, hash_ids):
        self.caches[instance].insert(hash_ids)


def build_cache(scenario, roles):
    """The `Cache` for instances of `roles` (by instance index), or None when caching is off."""
    fleet = scenario.fleet
    kind = fleet.prefix_cache
    if kind == "off":
        return None
    block = scenario.workload.prefix_block_tokens
    if kind == "shared":
        pool = LruBlocks(cache_blocks(scenario, fleet.prefix_setting("prefix_pool_gb")))
        caches = [None if role == "decode" else pool for role in roles]
        per_token = scenario.model.kv_bytes_per_token / (fleet.prefix_setting("prefix_fetch_gbytes_per_s") * 1e9)
        return Cache(caches, block, per_token, shared=pool)
    caches = []
    per_gpu_blocks = 0
    for pool in scenario.pools():
        for _ in range(pool.instances):
            taken = kv_taken_tokens(scenario, pool)
            if pool.role != "decode":
                per_gpu_blocks = taken // block
            caches.append(None if pool.role == "decode" else LruBlocks(taken // block))
    return Cache(caches, block, 0.0, per_gpu_blocks=per_gpu_blocks)

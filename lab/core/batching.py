"""Batch forming: which queued prompts an instance admits, and how many prompt tokens its next
step runs (docs/model.md "Chunked prefill and partial prefills").

`Batching` is the part of the engine's `_Simulation` that takes a queue's head onto an
instance (`_pop_queue`: its prefix-cache lookup too; `_admit`: on a colocated instance,
if its KV, as the KV policy counts it, and a batch slot fit) and fills the next step with
prompt work: whole prompts up to `prefill_batch_tokens` (`_take_whole`), or a chunk budget
handed to the prompts under way in admission order, then to new ones, each its
`policies.prefill_slice` (`_take_chunks`, `_take_whole_chunks` without a cap). It holds no
state of its own: every attribute is a slot of `_Simulation` (engine.py).
"""

from .policies import prefill_slice

__all__ = ["Batching"]


class Batching:
    """The prompt-taking handlers, mixed into `engine._Simulation` (no slots of its own)."""

    __slots__ = ()

    def _pop_queue(self, gpu, t):
        """Take the head of `gpu`'s queue (None if empty): it is admitted there and its prefill
        starts at t. A prefill instance holds no KV for it, so it always fits there."""
        queue = gpu.queue
        if not queue:
            return None
        rec = self.records[queue.popleft()]
        prompt = self.todo[rec.id]
        self.queued_tokens[gpu.queue_k] -= prompt
        gpu.pending += prompt
        hit = fetch = 0
        if self.cache is not None and rec.hash_ids:
            # Every prefill looks the cache up, a re-prefill too (docs/model.md "KV on demand"): its
            # prompt's blocks, which its own first prefill may have inserted; the tokens it
            # emitted are never cached, so they are always computed.
            hit, fetch = self.cache.lookup(gpu.index, rec.hash_ids, rec.prompt_tokens, prompt)
            self.skip[rec.id] = hit
            gpu.fetch += self.tick(fetch)  # each prompt's fetch rounded once
        if rec.preemptions:  # a re-prefill: its first prefill's GPU, start and hit stay (TTFT's)
            gpu.log.readmitted.append((len(gpu.log.start_t), rec.id, prompt, prompt - hit))
            self.src[rec.id] = gpu.index
            return rec
        rec.prefill_gpu = gpu.index
        rec.prefill_start = t
        if hit:
            rec.prefix_hit_tokens = hit
            if fetch:
                rec.prefix_fetch_s = fetch
        return rec

    def _admit(self, gpu, t):
        """Move the queue's head onto `gpu` if its KV (kv_policy.py) and a batch slot fit; FIFO,
        no skipping."""
        if not gpu.queue:
            return None
        rid = gpu.queue[0]
        rec = self.records[rid]
        units = self.kv_policy.units(rec, self.todo[rid])
        need = units * self.block
        if need > gpu.kv_free or gpu.seqs >= self.fleet.max_batch_seqs:
            return None
        self._pop_queue(gpu, t)
        gpu.kv_free -= need
        gpu.held[rid] = units
        gpu.seqs += 1
        if rec.output_tokens > 1:
            rec.decode_gpu = gpu.index  # colocated: the GPU that prefills also decodes
        return rec

    def _take_prompts(self, gpu, t):
        """Prompt work for the next colocated step: whole prompts, or a chunk budget."""
        chunk = self.fleet.chunk_tokens
        if chunk is None:
            return self._take_whole(gpu, t, self.admit)
        return self._take_chunks(gpu, t, chunk, self.admit)

    def _take_whole(self, gpu, t, admit):
        """Whole queued prompts up to prefill_batch_tokens (at least one) for the next step."""
        budget = self.fleet.prefill_batch_tokens
        queue = gpu.queue
        records = self.records
        completing = gpu.completing
        attention = self.attention
        cache = self.cache
        taken = 0
        todo = self.todo
        while queue:
            if taken:
                head = queue[0]
                need = todo[head]  # the tokens it would compute: what its cache lacks
                if cache is not None and records[head].hash_ids:
                    need -= cache.peek(gpu.index, records[head].hash_ids, records[head].prompt_tokens, need)
                if taken + need > budget:
                    break
            rec = admit(gpu, t)
            if rec is None:
                break
            skip = self.skip[rec.id]
            own = todo[rec.id] - skip
            taken += own
            completing.append(rec.id)
            if attention:
                gpu.pieces.append((own, skip))
        return taken

    def _take_chunks(self, gpu, t, chunk, admit):
        """At most `chunk` prompt tokens: the prompts under way first, in admission order, then
        newly admitted ones, each its `prefill_slice` (docs/model.md "Chunked prefill and partial
        prefills"). Without `long_prefill_tokens` only one prompt is ever under way."""
        long_tokens = self.fleet.long_prefill_tokens
        if long_tokens is None:
            return self._take_whole_chunks(gpu, t, chunk, admit)
        budget = chunk
        completing = gpu.completing
        kept = []
        for item in gpu.prefilling:
            if budget:
                budget -= self._take_piece(gpu, item, budget, long_tokens)
            if item[1]:
                kept.append(item)
            else:
                completing.append(item[0])
        while budget:
            rec = admit(gpu, t)
            if rec is None:
                break
            item = [rec.id, self.todo[rec.id] - self.skip[rec.id]]  # a cached head is not computed
            budget -= self._take_piece(gpu, item, budget, long_tokens)
            if item[1]:
                kept.append(item)
            else:
                completing.append(rec.id)
        gpu.prefilling = kept
        return chunk - budget

    def _take_whole_chunks(self, gpu, t, chunk, admit):
        """`_take_chunks` without a cap: `prefill_slice` is then min(left, budget), so the one
        prompt under way takes all it can before the next is admitted. Written out here
        because it runs on every step of a chunked fleet (the default path's speed)."""
        budget = chunk
        prefilling = gpu.prefilling
        while budget > 0:
            if not prefilling:
                rec = admit(gpu, t)
                if rec is None:
                    break
                prefilling.append([rec.id, self.todo[rec.id] - self.skip[rec.id]])
            item = prefilling[0]
            take = item[1] if item[1] <= budget else budget
            if self.attention:
                gpu.pieces.append((take, self.todo[item[0]] - item[1]))
            item[1] -= take
            budget -= take
            if item[1] == 0:
                prefilling.pop(0)
                gpu.completing.append(item[0])
        return chunk - budget

    def _take_piece(self, gpu, item, budget, long_tokens):
        """Move one prompt under way ([request id, tokens left]) on by its slice of `budget`."""
        prompt = self.todo[item[0]]
        take = prefill_slice(prompt, item[1], budget, long_tokens)
        if self.attention:
            gpu.pieces.append((take, prompt - item[1]))
        item[1] -= take
        return take

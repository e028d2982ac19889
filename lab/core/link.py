"""The KV link when transfers stream layer by layer (`fleet.link.layerwise: true`).

A layer-wise transfer is one chunk per model layer: each carries bytes / layers and
takes (bytes / layers) / bandwidth on the wire (rounded to whole ticks: times here are
the engine's integer ticks, docs/model.md "Time base"). Layer i (0-based) of a prefill step that
runs from s to e has its KV at `s + (e - s) * (i + 1) // layers` (whole ticks, rounded
down; the last layer at e exactly). A chunk is *ready* at the later of that time and the moment room was reserved
on the decode GPU. A transfer starts with its first chunk and lands with its last.

- `independent`: every transfer has a wire to itself; chunk i starts at the later of its
  ready time and the end of chunk i - 1 (`stream_alone`).
- `fifo` (`FifoWire`): one wire, one chunk at a time. Chunks of every transfer go in
  order of ready time, ties by request id, then layer; each starts at the later of its
  ready time and the end of the chunk before it. Between chunks the wire is free, so
  other transfers' chunks fit in while a long prefill is still producing layers.

Whole transfers (`layerwise: false`) never come here: the engine queues them itself.

Ordering by ready time means a transfer reserved later can still pass chunks of one
reserved earlier, so a fifo transfer's landing is known only once its last chunk has its
place. `FifoWire.serve(horizon)` places the chunks ready by `horizon`; the caller
promises that every chunk added later is ready after it. Each placement is one step on a
heap of the k transfers streaming at that moment (k is a few: the prefill batches in
flight), so a run's link costs O(chunks x log k), never a pass over earlier transfers.
"""

import heapq

__all__ = ["layer_ready", "stream_alone", "FifoWire"]

INF = float("inf")


def layer_ready(start, end, layer, layers):
    """When layer `layer` (0-based) of `layers` of a prefill step running start..end exists."""
    if layer == layers - 1:
        return end
    return start + (end - start) * (layer + 1) // layers


def stream_alone(transfer, prefill_start, layers):
    """Schedule every chunk of `transfer` on a wire of its own (`independent` sharing)."""
    starts = []
    free = transfer.reserved
    step = transfer.layer_s
    end = transfer.ready
    for layer in range(layers):
        ready = layer_ready(prefill_start, end, layer, layers)
        start = ready if ready > free else free
        starts.append(start)
        free = start + step
    transfer.layer_starts = starts
    transfer.start = starts[0]
    transfer.end = free


class FifoWire:
    """One shared wire carrying layer chunks one at a time (see the module docstring)."""

    __slots__ = ("layers", "free", "_streams")

    def __init__(self, layers):
        self.layers = layers
        self.free = 0  # when the last placed chunk leaves the wire
        # One entry per transfer with chunks still to place:
        # (its next chunk's ready time, request id, [transfer, prefill start]).
        self._streams = []

    def _ready(self, transfer, prefill_start, layer):
        ready = layer_ready(prefill_start, transfer.ready, layer, self.layers)
        return ready if ready > transfer.reserved else transfer.reserved

    def add(self, transfer, prefill_start):
        """Queue `transfer` (room reserved at `transfer.reserved`) for the wire."""
        transfer.layer_starts = []
        heapq.heappush(self._streams, (self._ready(transfer, prefill_start, 0), transfer.request,
                                       [transfer, prefill_start]))

    def next_ready(self):
        """The ready time of the earliest chunk not yet placed (inf when none)."""
        return self._streams[0][0] if self._streams else INF

    def serve(self, horizon):
        """Place, in the wire's order, every chunk ready at or before `horizon`.

        The caller guarantees that every chunk added later is ready after `horizon`, so
        these places are final. Returns the transfers whose last chunk got its place (their
        `start`, `end` and `layer_starts` are then set).
        """
        streams = self._streams
        layers = self.layers
        last = layers - 1
        free = self.free
        landed = []
        while streams and streams[0][0] <= horizon:
            ready, rid, item = streams[0]
            transfer = item[0]
            start = ready if ready > free else free
            starts = transfer.layer_starts
            starts.append(start)
            free = start + transfer.layer_s
            layer = len(starts)
            if layer == layers:
                heapq.heappop(streams)
                transfer.start = starts[0]
                transfer.end = free
                landed.append(transfer)
                continue
            # layer_ready() and the reservation, inline: this loop is the link's whole cost
            prefill_start = item[1]
            end = transfer.ready
            ready = end if layer == last else prefill_start + (end - prefill_start) * (layer + 1) // layers
            if ready < transfer.reserved:
                ready = transfer.reserved
            heapq.heapreplace(streams, (ready, rid, item))
        self.free = free
        return landed

"""The kinds of event on the engine's heap, in their order at equal times (docs/model.md "Event order"):
arrivals, then KV landings, then GPU step boundaries (by GPU index), then the layer-wise fifo
wire's turn, then the planner's events (`fleet.planner`)."""

__all__ = ["ARRIVAL", "LANDED", "BOUNDARY", "LINK", "PLAN", "INF"]

ARRIVAL, LANDED, BOUNDARY, LINK, PLAN = 0, 1, 2, 3, 4
INF = float("inf")

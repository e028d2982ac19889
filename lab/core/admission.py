"""Early rejection (`fleet.admission`): whether an arriving request is turned away at once.

The one rule, `predicted_ttft_over_slo` (docs/model.md "Early rejection"), written as small pure
functions over numbers the engine hands over, so the reference simulator (which does not
import this module) checks them independently:

- A pool's **prefill rate** (`prefill_rate`): the instances that take prompts from the
  queue the request would join (docs/model.md "Routing": the whole pool with `queue`, its length
  group with `length_split`, its one instance with `round_robin` / `least_loaded`), each
  running `step_tokens` prompt tokens per step alone: instances x (T / step_s(0, 0, T)),
  T = the chunk budget (`chunk_tokens`, or `prefill_chunk_tokens` on a split fleet) when
  prefill is chunked, else `prefill_batch_tokens`.
- **Queued ahead**: the prompt tokens already waiting in that queue plus those of the
  prompts its instances have admitted and not finished prefilling (counted whole), as the
  engine holds them at the arrival (events at the same time come after arrivals).
- **Transfer** (`transfer_s`, a split fleet with `first_token: decode` only: otherwise the
  first token comes before the KV moves): its own KV's time on an idle link, prompt x KV
  bytes per token / bandwidth; with layer-wise streaming only the last layer's share,
  which is what follows the prefill's end.
- `predicted_ttft_s` = (queued ahead + own prompt) / prefill rate + transfer; the request is
  rejected when that is over the SLO's `ttft_s` (`rejects`; equal is admitted).

A rejected request never joins a queue and holds nothing; routing has still counted it
(round_robin's n-th arrival).
"""

__all__ = ["RULES", "step_tokens", "prefill_rate", "transfer_s", "predicted_ttft_s", "rejects"]

RULES = ("predicted_ttft_over_slo",)


def step_tokens(fleet):
    """T: the prompt tokens one prefill step takes at most (the chunk budget, or the batch)."""
    chunk = fleet.chunk_tokens if fleet.layout == "colocated" else fleet.prefill_chunk_tokens
    return chunk if chunk is not None else fleet.prefill_batch_tokens


def prefill_rate(instances, step_s, tokens):
    """Prompt tokens per second of `instances` instances each running `tokens` prompt tokens a
    step alone (`step_s` is the pool's cost.step_s)."""
    return instances * (tokens / step_s(0, 0, tokens))


def transfer_s(prompt_tokens, kv_bytes_per_token, gbytes_per_s, layerwise=False, layers=1):
    """Seconds its KV spends on an idle link after its prefill ends (see the module docstring)."""
    nbytes = prompt_tokens * kv_bytes_per_token
    bandwidth = gbytes_per_s * 1e9
    return nbytes / layers / bandwidth if layerwise else nbytes / bandwidth


def predicted_ttft_s(ahead_tokens, prompt_tokens, rate, transfer=0.0):
    """(prompt tokens queued ahead + its own) / the prefill rate + the transfer, in seconds."""
    return (ahead_tokens + prompt_tokens) / rate + transfer


def rejects(predicted_s, ttft_target_s):
    """True when the prediction is over the target (a prediction equal to it is admitted)."""
    return predicted_s > ttft_target_s

"""How the page names what a fleet is built of: GPU types, instances, pools.

One place for the words the canvas rows, the story, the Table view and the metric cards
share, so "GPUs 0–1" and "H100 ×2" read the same everywhere. An instance's own label
("GPU 3", "GPUs 0–1") is the core's `GpuLog.label`.
"""

import html

__all__ = ["gpu_type_text", "instance_name", "pool_text", "is_plain"]


def gpu_type_text(gpu, tp=1):
    """"H100" for one GPU, "H100 ×2" for an instance of two."""
    name = str(gpu).upper()
    return name if tp == 1 else f"{name} ×{tp}"


def instance_name(result, index):
    """Instance `index` of a run as its canvas row names it (its GpuLog.label), HTML-escaped."""
    if 0 <= index < len(result.gpus):
        return html.escape(result.gpus[index].label)
    return f"GPU {index}"


def pool_text(pool):
    """A `spec.Pool` in a few words: "4 × H100", "8 × H100 in TP 2", "2 × A100 capped at 300 W"."""
    text = f"{pool.gpus} × {str(pool.gpu).upper()}"
    if pool.tp > 1:
        text += f" in TP {pool.tp}"
    if pool.power_cap_w is not None:
        text += f" capped at {pool.power_cap_w:g} W"
    return text


def is_plain(scenario):
    """Whether the fleet is the lab's plain one: every pool of single H100s, uncapped."""
    return all(p.tp == 1 and p.gpu == "h100" and p.power_cap_w is None for p in scenario.pools())


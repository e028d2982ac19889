"""The GPU-timeline canvas: its figure, its data (numpy from the step logs), the queue and KV series, and how fast the page paints."""

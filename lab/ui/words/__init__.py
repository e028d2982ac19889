"""How the page writes: figures, fleet and control words, targets, refusals, mission text (safe Markdown), and its theme."""

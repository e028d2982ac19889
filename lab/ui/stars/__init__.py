"""The stars a browser keeps: the storage bridge, its store (stars_store.js, shared with the static hub) and progress codes."""

"""The page-side helpers the lab needs from Python: address, title, keys, focus.

- Address: `history.replaceState` (not a new history entry per slider nudge, which is
  what setting `pn.state.location.search` does). The address is only written here;
  the state reads the query string once, from `pn.state.location`, which Panel fills
  in under `lab serve` and in Pyodide alike.
- Keyboard shortcuts for the timeline (K play/pause, J/L back/forward one second,
  N next slow step), ignored while typing or while a slider has the focus.
- Focus: Bokeh re-renders a button whose label changes, which drops the keyboard
  focus; `refocus(css_class)` puts it back if it was there.

All of it runs on the page through a tiny `JSComponent`, so it works over the
server's websocket and from Pyodide's web worker alike.
"""

import param
from panel.custom import JSComponent

__all__ = ["PageBridge", "SHORTCUTS"]

SHORTCUTS = {"k": "toggle", "j": "back", "l": "forward", "n": "next_slow"}

_ESM = r"""
const KEYS = %(keys)s;

function deepFind(root, cls) {
  // The first element with class `cls`, looking inside open shadow roots too.
  const stack = [root];
  while (stack.length) {
    const node = stack.pop();
    if (node.classList && node.classList.contains(cls)) return node;
    if (node.shadowRoot) stack.push(node.shadowRoot);
    for (const child of (node.children || [])) stack.push(child);
  }
  return null;
}

function typing(event) {
  for (const el of event.composedPath()) {
    if (!el.tagName) continue;
    const tag = el.tagName.toLowerCase();
    if (tag === "input" || tag === "textarea" || tag === "select" || el.isContentEditable) return true;
    if (el.classList && (el.classList.contains("noUi-handle") || el.getAttribute("role") === "slider")) return true;
  }
  return false;
}

export function render({ model }) {
  let lastFocus = null;  // css class (stf-*) of the widget that last had the focus
  const onFocus = (event) => {
    lastFocus = null;
    for (const el of event.composedPath()) {
      if (el.classList) {
        for (const c of el.classList) if (c.startsWith("stf-")) { lastFocus = c; break; }
      }
      if (lastFocus) break;
    }
  };
  const onKey = (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event)) return;
    const action = KEYS[event.key.toLowerCase()];
    if (!action) return;
    event.preventDefault();
    model.send_msg({type: "key", action});
  };
  document.addEventListener("focusin", onFocus, true);
  document.addEventListener("keydown", onKey);
  model.on("remove", () => {
    document.removeEventListener("focusin", onFocus, true);
    document.removeEventListener("keydown", onKey);
  });
  model.on("msg:custom", (msg) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "replace" && typeof msg.search === "string" && msg.search.startsWith("?") && msg.search.length < 2000) {
      try {
        const url = window.location.pathname + msg.search + window.location.hash;
        if (url !== window.location.pathname + window.location.search + window.location.hash) {
          window.history.replaceState(window.history.state, "", url);
        }
      } catch (e) { /* sandboxed: the address just stays */ }
    } else if (msg.type === "title" && typeof msg.title === "string") {
      document.title = msg.title.slice(0, 200);
    } else if (msg.type === "refocus" && typeof msg.cls === "string" && lastFocus === msg.cls) {
      const again = () => {
        const host = deepFind(document.body, msg.cls);
        const target = host && (host.shadowRoot ? host.shadowRoot.querySelector("button") : host.querySelector("button"));
        if (target) target.focus();
      };
      requestAnimationFrame(() => requestAnimationFrame(again));
    }
  });
  const el = document.createElement("span");
  el.hidden = true;
  return el;
}
""" % {"keys": __import__("json").dumps(SHORTCUTS)}


class PageBridge(JSComponent):
    """Address bar, document title, keyboard shortcuts and focus repair for the lab page."""

    action = param.String(default="", doc="The last shortcut pressed (toggle, back, forward, next_slow).")

    _esm = _ESM
    _rename = {"action": None}

    def __init__(self, on_key=None, **params):
        params.setdefault("width", 0)
        params.setdefault("height", 0)
        params.setdefault("margin", 0)
        params.setdefault("sizing_mode", "fixed")
        super().__init__(**params)
        self._on_key = on_key

    def _handle_msg(self, data):
        if isinstance(data, dict) and data.get("type") == "key" and data.get("action") in SHORTCUTS.values():
            self.action = data["action"]
            if self._on_key is not None:
                self._on_key(data["action"])

    def replace(self, search):
        """Show `search` ('?mission=...') in the address bar without a new history entry."""
        if isinstance(search, str) and search.startswith("?"):
            self._send_msg({"type": "replace", "search": search})

    def title(self, text):
        self._send_msg({"type": "title", "title": str(text)})

    def refocus(self, css_class):
        """Give the keyboard focus back to the widget with `css_class` if it had it."""
        self._send_msg({"type": "refocus", "cls": css_class})

"""The page-side helpers the lab needs from Python: address, history, title, keys, focus, a note into view.

- Address: `address` = {search, push, n}. `push` makes a history entry (a change worth
  going back to), otherwise `history.replaceState` rewrites the current one (the
  window position, the cleanup of rejected values at load). It is a synced parameter,
  not a message, so the value set before the page has rendered is applied on render
  (a message sent then was lost and left rejected values in the address). The address
  is only written here; the state reads the query string once, from
  `pn.state.location`, which Panel fills in under `lab serve` and in Pyodide alike.
- History: Back/Forward inside the lab fire `popstate`; the bridge hands the entry's
  query string to `on_pop`, which restores those settings in the page.
  `settled` (the entry number the app has committed: its next change pushes) is
  mirrored on <html data-history-settled>, so tests can wait on it.
- Inert controls: `inert` lists the css classes (stf-control-*) of controls that do
  not apply to the current layout. Their hosts get the `inert` attribute: no tab stop,
  no clicks. (Bokeh marks a disabled slider with an attribute but leaves its handle's
  tabindex at 0, so Tab still stopped on it.)
- Keyboard shortcuts for the timeline (K play/pause, J/L back/forward one second,
  N next slow step), ignored while typing or while a slider has the focus.
- Focus: Bokeh re-renders a button whose label changes by replacing its <button>, which
  dropped the keyboard focus to the page's body. The bridge watches the root of the focused
  button and moves the focus to its replacement as soon as the re-render lands (however late
  the label's patch arrives); `refocus(css_class)` is the fallback for a host replaced whole.
- Reveal: `reveal(css_class, text)` scrolls the note in that pane into view once it shows
  `text` (a refused change's note under the controls), clear of the result strip fixed to a
  phone's bottom edge (result_strip.py), which could otherwise cover it until the student
  scrolled. Only as far as needed ("nearest"): the control just tapped stays on screen.
- Painted: the canvas dispatches `stf-painted` (detail: the run) on the document once a
  run's data is painted (canvas.py); the bridge hands the run to `on_painted`, so the
  worker measures the run after the browser has drawn it, not while it draws. A run
  painted before the bridge rendered (<html data-canvas-painted>) is handed over when it does.

All of it runs on the page through a tiny `JSComponent`, so it works over the
server's websocket and from Pyodide's web worker alike.
"""

import param

from lab.core.mission_link import MAX_CODE_CHARS

from .bridge import Bridge

__all__ = ["PageBridge", "SHORTCUTS", "guard_location", "MAX_SEARCH_CHARS"]

SHORTCUTS = {"k": "toggle", "j": "back", "l": "forward", "n": "next_slow"}
# The longest address the page writes or reads back from Back/Forward: a shared draft's code
# (lab.core.mission_link) and every setting, pin and hide beside it.
MAX_SEARCH_CHARS = MAX_CODE_CHARS + 4_000

_ESM = r"""
const KEYS = %(keys)s;
const MAX_SEARCH = %(max_search)d;

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

function deepFindAll(root, prefix) {
  // Every element with a class starting with `prefix`, inside open shadow roots too.
  const out = [];
  const stack = [root];
  while (stack.length) {
    const node = stack.pop();
    if (node.classList) for (const c of node.classList) if (c.startsWith(prefix)) { out.push([c, node]); break; }
    if (node.shadowRoot) stack.push(node.shadowRoot);
    for (const child of (node.children || [])) stack.push(child);
  }
  return out;
}

function deepActive() {
  // The focused element, inside open shadow roots too.
  let a = document.activeElement;
  while (a && a.shadowRoot && a.shadowRoot.activeElement) a = a.shadowRoot.activeElement;
  return a;
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

function lost() {
  // Whether the keyboard focus has fallen to the page itself (its element was removed).
  const active = deepActive();
  return !active || active === document.body || active === document.documentElement;
}

function buttonOf(cls) {
  const host = deepFind(document.body, cls);
  return host && (host.shadowRoot ? host.shadowRoot.querySelector("button") : host.querySelector("button"));
}

const REVEAL_FRAMES = 120;  // animation frames (about 2 s) a note to reveal may take to render

function reveal(cls, text, frames) {
  // The note (.stf-error) in the pane with class `cls`, into view above the fixed result strip,
  // once it is laid out with `text` (its patch can land after this message).
  const host = deepFind(document.body, cls);
  const note = host && deepFind(host, "stf-error");
  const words = note && deepFind(note, "stf-refusal");
  if (!note || note.getBoundingClientRect().height === 0 || (text && (!words || words.textContent !== text))) {
    if (frames > 0) requestAnimationFrame(() => reveal(cls, text, frames - 1));
    return;
  }
  const strip = deepFind(document.body, "stf-strip");
  const covered = strip && getComputedStyle(strip).display !== "none"
    ? Math.max(0, window.innerHeight - strip.getBoundingClientRect().top) : 0;
  // scrollIntoView keeps the margins clear, so the strip's height is the bottom margin.
  note.style.scrollMarginBottom = `${Math.ceil(covered) + 8}px`;
  note.style.scrollMarginTop = "8px";
  note.scrollIntoView({block: "nearest", inline: "nearest"});
}

export function render({ model }) {
  let lastFocus = null;  // css class (stf-*) of the widget that last had the focus
  // Focus follows a re-rendered button: Bokeh re-renders a button whose label changes (Play
  // to Pause) by replacing its <button>, and the focus on the old one fell to the page's
  // body. The root the focused button lives in is watched; when the button leaves it while
  // focused, the focus goes to the button now in its place, whenever the re-render lands.
  let watched = null;
  const watch = (el, cls) => {
    if (watched) watched.disconnect();
    watched = null;
    if (!el || el.tagName !== "BUTTON" || !cls) return;
    const root = el.getRootNode();
    watched = new MutationObserver(() => {
      if (el.isConnected || !lost() || lastFocus !== cls) return;
      const next = (root.querySelector && root.querySelector("button")) || buttonOf(cls);
      if (next && next !== el) {
        next.focus();
        watch(next, cls);
      }
    });
    watched.observe(root, {childList: true, subtree: true});
  };
  const onFocus = (event) => {
    lastFocus = null;
    for (const el of event.composedPath()) {
      if (el.classList) {
        for (const c of el.classList) if (c.startsWith("stf-")) { lastFocus = c; break; }
      }
      if (lastFocus) break;
    }
    watch(event.composedPath()[0], lastFocus);
  };
  const onKey = (event) => {
    if (event.ctrlKey || event.metaKey || event.altKey || typing(event)) return;
    const action = KEYS[event.key.toLowerCase()];
    if (!action) return;
    event.preventDefault();
    model.send_msg({type: "key", action});
  };
  const onPainted = (event) => {
    if (Number.isInteger(event.detail)) model.send_msg({type: "painted", run: event.detail});
  };
  document.addEventListener("focusin", onFocus, true);
  document.addEventListener("keydown", onKey);
  document.addEventListener("stf-painted", onPainted);
  // A paint before this bridge rendered (the static page's first run can be painted before
  // its module is up) is said now: nothing waits its fallback for it.
  const paintedBefore = Number(document.documentElement.dataset.canvasPainted);
  if (Number.isInteger(paintedBefore) && paintedBefore > 0) model.send_msg({type: "painted", run: paintedBefore});
  model.on("remove", () => {
    document.removeEventListener("focusin", onFocus, true);
    document.removeEventListener("keydown", onKey);
    document.removeEventListener("stf-painted", onPainted);
    if (watched) watched.disconnect();
  });
  const root = document.documentElement;
  let applied = -1;
  const write = (address, initial) => {
    if (!address || typeof address.search !== "string" || !address.search.startsWith("?") || address.search.length >= MAX_SEARCH) return;
    if (address.n === applied) return;
    applied = address.n;
    try {
      const url = window.location.pathname + address.search + window.location.hash;
      const here = window.location.pathname + window.location.search + window.location.hash;
      if (address.push && !initial && url !== here) {
        window.history.pushState({stf: address.n}, "", url);
      } else if (url !== here) {
        window.history.replaceState(window.history.state, "", url);
      }
    } catch (e) { /* sandboxed: the address just stays */ }
    root.dataset.historyEntry = String(address.n);
  };
  write(model.address, true);
  model.on("address", () => write(model.address, false));
  const settled = () => { root.dataset.historySettled = String(model.settled); };
  settled();
  model.on("settled", settled);
  const title = () => { if (typeof model.doc_title === "string" && model.doc_title) document.title = model.doc_title.slice(0, 200); };
  title();
  model.on("doc_title", title);
  const applyInert = () => {
    const wanted = new Set(Array.isArray(model.inert) ? model.inert : []);
    for (const [cls, node] of deepFindAll(document.body, "stf-control-")) {
      const off = wanted.has(cls);
      if (node.inert !== off) node.inert = off;
    }
  };
  const inertSoon = () => { applyInert(); requestAnimationFrame(() => requestAnimationFrame(applyInert)); };
  inertSoon();
  model.on("inert", inertSoon);
  const onPop = () => model.send_msg({type: "popstate", search: window.location.search.slice(0, MAX_SEARCH)});
  window.addEventListener("popstate", onPop);
  model.on("remove", () => window.removeEventListener("popstate", onPop));
  model.on("msg:custom", (msg) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "reveal" && typeof msg.cls === "string" && typeof msg.text === "string") {
      reveal(msg.cls, msg.text, REVEAL_FRAMES);
      return;
    }
    if (msg.type === "refocus" && typeof msg.cls === "string" && lastFocus === msg.cls) {
      // A re-render that replaced the host itself (not only its button) escapes the watch
      // above: if the focus has fallen to the page, the button with that class takes it.
      requestAnimationFrame(() => {
        if (!lost()) return;
        const target = buttonOf(msg.cls);
        if (target) { target.focus(); watch(target, msg.cls); }
      });
    }
  });
  const el = document.createElement("span");
  el.hidden = true;
  return el;
}
""" % {"keys": __import__("json").dumps(SHORTCUTS), "max_search": MAX_SEARCH_CHARS}


class PageBridge(Bridge):
    """Address bar, history, document title, keyboard shortcuts, focus repair and notes into view for the lab page."""

    action = param.String(default="", doc="The last shortcut pressed (toggle, back, forward, next_slow).")
    address = param.Dict(default={"search": "", "push": False, "n": 0}, doc="What the address bar should show.")
    settled = param.Integer(default=0, doc="The history entry (address n) whose settings are committed.")
    doc_title = param.String(default="", doc="The document's title.")
    inert = param.List(default=[], item_type=str, doc="Css classes of controls that take no focus or clicks.")

    _esm = _ESM
    _rename = {"action": None}

    def __init__(self, on_key=None, on_pop=None, on_painted=None, **params):
        super().__init__(**params)
        self._on_key = on_key
        self._on_pop = on_pop
        self._on_painted = on_painted

    def _handle_msg(self, data):
        if not isinstance(data, dict):
            return
        if data.get("type") == "key" and data.get("action") in SHORTCUTS.values():
            self.action = data["action"]
            if self._on_key is not None:
                self._on_key(data["action"])
        elif data.get("type") == "popstate" and isinstance(data.get("search"), str) and self._on_pop is not None:
            self._on_pop(data["search"][:MAX_SEARCH_CHARS])
        elif data.get("type") == "painted" and type(data.get("run")) is int and self._on_painted is not None:
            self._on_painted(data["run"])

    def _write(self, search, push):
        if isinstance(search, str) and search.startswith("?"):
            self.address = {"search": search, "push": bool(push), "n": self.address["n"] + 1}

    def replace(self, search):
        """Show `search` ('?mission=...') in the address bar without a new history entry."""
        self._write(search, False)

    def push(self, search):
        """Show `search` in a new history entry (Back returns to the one before)."""
        self._write(search, True)

    def settle(self):
        """The current entry's settings are committed: the next change gets an entry of its own."""
        self.settled = self.address["n"]

    def title(self, text):
        self.doc_title = str(text)[:200]

    def reveal(self, css_class, text=""):
        """Scroll the note in the pane with `css_class` into view, clear of the phone's result
        strip, once it shows `text` ('': whatever it shows)."""
        self._send_msg({"type": "reveal", "cls": css_class, "text": str(text)[:4000]})

    def refocus(self, css_class):
        """Give the keyboard focus back to the widget with `css_class` if it had it."""
        self._send_msg({"type": "refocus", "cls": css_class})


def guard_location():
    """Keep Panel's `Location` from converting the query string itself (idempotent).

    Panel's Location parses the whole query into ints and floats whenever its `search`
    is set, to feed parameters synced to the URL, even when none are: `?gpus=` with
    10,000 digits then raised (Python's int-digit limit) before the lab saw the value,
    and `lab serve` answered HTTP 500. The lab syncs nothing through it and reads the
    raw `search` through its own parser (state.parse_settings), so: nothing synced,
    nothing parsed; and a value Panel cannot convert is dropped from what it syncs.
    """
    from panel.io.location import Location

    if getattr(Location, "_stf_guarded", False):
        return
    original = Location._update_synced

    def _update_synced(self, event=None):
        if not self._synced:
            return
        try:
            original(self, event)
        except ValueError:  # an absurd value: whatever is synced keeps its state
            pass

    Location._update_synced = _update_synced
    Location._stf_guarded = True

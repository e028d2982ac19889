"""Stars in the browser's localStorage, reachable from Python anywhere Panel runs.

Python cannot touch `localStorage` when the app runs in Pyodide's web worker, so a
tiny `JSComponent` does it on the page, and the two sides exchange messages
(`model.send_msg` -> `_handle_msg`, `_send_msg` -> `model.on("msg:custom")`), which
Panel carries both over the server's websocket and between worker and page.

The storage rules live in one file, `stars_store.js` (also the static hub's
assets/stars.js): one versioned key,

    split-the-fleet:stars:v1 = {"version": 1, "stars": {"mission-id": [true, false, true]}}

stars only ever added, unreadable data moved to a backup key before anything is dropped,
every backup kept until cleared, memory for the visit when storage is blocked or full.

Saving is acknowledged: a message sent before the page's component exists is lost, so
`earn` keeps the stars pending until the page reports storage holding them (every reply
carries what storage now holds), and sends them again when the component (re)renders
and every RETRY_MS until then. Stars are OR-merged, so a repeat is harmless.
"""

import re
from pathlib import Path

import param
from panel.custom import JSComponent

from .timers import every

__all__ = ["StarsBridge", "STORAGE_KEY", "BACKUP_KEY", "BACKUP_PREFIX", "STORE_JS", "RETRY_MS", "RETRY_LIMIT",
           "clean_stars"]

STORAGE_KEY = "split-the-fleet:stars:v1"
BACKUP_KEY = STORAGE_KEY + ":backup"  # the newest backup; older ones are BACKUP_KEY + ":<n>"
BACKUP_PREFIX = BACKUP_KEY
_ID = re.compile(r"[a-z0-9]+(?:-[a-z0-9]+)*")  # fullmatch: `$` would let a final newline through
_BACKUP = re.compile(r"split-the-fleet:stars:v1:backup(?::[1-9][0-9]{0,8})?")
MAX_STARS_PER_MISSION = 16
MAX_MISSIONS = 500
RETRY_MS = 1000  # resend stars the page has not confirmed this often ...
RETRY_LIMIT = 60  # ... for at most this many tries (a page that never answers is gone)
STORE_JS = Path(__file__).with_name("stars_store.js")


def clean_stars(data):
    """{mission id: [bool, ...]} from whatever the page sent ({id: flags} or the page's
    [[id, flags], ...]); anything odd is dropped.

    Keys are checked as slugs before use, and the result is a fresh dict, so a key such as
    "__proto__" or "constructor" is either dropped or just a key.
    """
    out = {}
    if isinstance(data, dict):
        items = list(data.items())
    elif isinstance(data, list):
        items = [tuple(p) for p in data if isinstance(p, (list, tuple)) and len(p) == 2]
    else:
        return out
    for key, value in items[:MAX_MISSIONS]:
        if not isinstance(key, str) or not _ID.fullmatch(key) or not isinstance(value, list):
            continue
        out[key] = [v is True for v in value[:MAX_STARS_PER_MISSION]]
    return out


def _covers(saved, flags):
    return all(not f or (i < len(saved) and saved[i] is True) for i, f in enumerate(flags))


_BRIDGE_JS = r"""
function starPairs(stars) {
  // [[id, flags], ...]: Bokeh cannot serialize an object with a key such as "constructor".
  return Object.keys(stars).filter((id) => STFStars.ID.test(id)).map((id) => [id, stars[id].slice()]);
}

export function render({ model }) {
  const publish = (state, extra) => model.send_msg(Object.assign(
    {type: "stars", stars: starPairs(state.stars), status: state.status, backups: STFStars.backups()}, extra || {}));
  model.on("msg:custom", (msg) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "earn") {
      const missions = Array.isArray(msg.missions) ? msg.missions : [];
      for (const item of missions) if (item && typeof item === "object") STFStars.earn(item.mission, item.stars);
      publish(STFStars.read(), {ack: true});
    } else if (msg.type === "reset") {
      const state = STFStars.reset();
      publish(state, {reset: state.reset});
    } else if (msg.type === "clear_backups") {
      STFStars.clearBackups();
      publish(STFStars.read());
    } else if (msg.type === "read") publish(STFStars.read());
  });
  const onStorage = (event) => { if (event.key === STFStars.KEY || event.key === null) publish(STFStars.read()); };
  window.addEventListener("storage", onStorage);
  model.on("remove", () => window.removeEventListener("storage", onStorage));
  publish(STFStars.read(), {hello: true});  // Python resends anything still pending
  const el = document.createElement("span");
  el.className = "stf-stars-bridge";
  el.hidden = true;
  return el;
}
"""


def _esm():
    store = STORE_JS.read_text(encoding="utf-8")
    for name, value in (("KEY", f'"{STORAGE_KEY}"'), ("MAX_STARS", str(MAX_STARS_PER_MISSION)),
                        ("MAX_MISSIONS", str(MAX_MISSIONS))):
        if f"var {name} = {value};" not in store:  # one contract, two languages: they must agree
            raise RuntimeError(f"{STORE_JS.name}: expected `var {name} = {value};`")
    return store + _BRIDGE_JS


_ESM = _esm()


class StarsBridge(JSComponent):
    """Reads and writes earned stars in the page's localStorage.

    `stars` ({mission id: [bool]}) is filled once the page has answered (`loaded`);
    `earn(mission_id, flags)` OR-merges on the page, kept `pending` until the page's
    answer shows storage holding it; `reset()` clears everything (after a backup);
    `backups` lists the backup keys in storage, `clear_backups()` removes them.
    """

    stars = param.Dict(default={}, doc="Stars saved in this browser.")
    loaded = param.Boolean(default=False, doc="The page has answered at least once.")
    status = param.String(default="", doc="ok | recovered | unavailable")
    backups = param.List(default=[], doc="Backup keys in this browser's storage, newest first.")
    pending = param.Dict(default={}, doc="Stars sent to the page that it has not confirmed yet.")

    _esm = _ESM
    # Python-side only: never synced to the page (the page talks through messages).
    _rename = {"stars": None, "loaded": None, "status": None, "backups": None, "pending": None}

    def __init__(self, **params):
        params.setdefault("width", 0)
        params.setdefault("height", 0)
        params.setdefault("margin", 0)
        params.setdefault("sizing_mode", "fixed")
        super().__init__(**params)
        self._retry = None
        self._tries = 0

    def _handle_msg(self, data):
        if not isinstance(data, dict) or data.get("type") != "stars":
            return
        status = data.get("status")
        stars = clean_stars(data.get("stars"))
        backups = [k for k in (data.get("backups") or []) if isinstance(k, str) and _BACKUP.fullmatch(k)]
        pending = {m: f for m, f in self.pending.items() if not _covers(stars.get(m, []), f)}
        with param.parameterized.batch_call_watchers(self):
            self.status = status if status in ("ok", "recovered", "unavailable") else "ok"
            self.stars = stars
            self.backups = backups
            self.pending = pending
            self.loaded = True
        if not pending:
            self._stop_retry()
        elif data.get("hello"):  # the component has just (re)rendered: it never saw what was sent before
            self._send_pending()

    def earn(self, mission_id, flags):
        """Save `flags` ([bool] per star) for the mission; stars already saved stay."""
        if not _ID.fullmatch(str(mission_id)) or not any(flags):
            return
        flags = [bool(f) for f in flags][:MAX_STARS_PER_MISSION]
        before = self.pending.get(mission_id, [])
        merged = [(i < len(before) and before[i]) or (i < len(flags) and flags[i])
                  for i in range(max(len(before), len(flags)))]
        self.pending = {**self.pending, mission_id: merged}
        self._tries = 0
        self._send_pending()
        self._start_retry()

    def _send_pending(self):
        if self.pending:
            items = [{"mission": m, "stars": f} for m, f in sorted(self.pending.items())]
            self._send_msg({"type": "earn", "missions": items})

    def _on_retry(self):
        self._tries += 1
        if not self.pending or self._tries > RETRY_LIMIT:
            self._stop_retry()
            return
        self._send_pending()

    def _start_retry(self):
        if self._retry is None:
            try:
                self._retry = every(self._on_retry, RETRY_MS, count=RETRY_LIMIT + 1)
            except Exception:  # no event loop (a bare unit test): the page's hello still resends
                self._retry = None

    def _stop_retry(self):
        if self._retry is not None:
            try:
                self._retry.stop()
            except Exception:
                pass
            self._retry = None

    def reset(self):
        self.pending = {}
        self._stop_retry()
        self._send_msg({"type": "reset"})

    def clear_backups(self):
        self._send_msg({"type": "clear_backups"})

    def refresh(self):
        self._send_msg({"type": "read"})

"""Stars in the browser's localStorage, reachable from Python anywhere Panel runs.

Python cannot touch `localStorage` when the app runs in Pyodide's web worker, so a
tiny `JSComponent` does it on the page, and the two sides exchange messages
(`model.send_msg` -> `_handle_msg`, `_send_msg` -> `model.on("msg:custom")`), which
Panel carries both over the server's websocket and between worker and page.

Storage format, under one versioned key:

    split-the-fleet:stars:v1 = {"version": 1, "stars": {"mission-id": [true, false, true]}}

Rules: stars are only ever added (booleans are OR-ed; a reset is the one way to clear
them). Unreadable data is never trusted and never thrown away: the raw text is copied
to `split-the-fleet:stars:v1:backup` first, and only the unreadable parts are dropped
(a mangled entry for one mission does not cost the stars of another). When storage
is blocked (private mode, a sandboxed iframe) stars live in memory for the visit.
"""

import re

import param
from panel.custom import JSComponent

__all__ = ["StarsBridge", "STORAGE_KEY", "BACKUP_KEY", "clean_stars"]

STORAGE_KEY = "split-the-fleet:stars:v1"
BACKUP_KEY = STORAGE_KEY + ":backup"
_ID = re.compile(r"^[a-z0-9]+(?:-[a-z0-9]+)*$")
MAX_STARS_PER_MISSION = 16
MAX_MISSIONS = 500


def clean_stars(data):
    """{mission id: [bool, ...]} from whatever the page sent; anything odd is dropped."""
    out = {}
    if not isinstance(data, dict):
        return out
    for key, value in list(data.items())[:MAX_MISSIONS]:
        if not isinstance(key, str) or not _ID.match(key) or not isinstance(value, list):
            continue
        out[key] = [v is True for v in value[:MAX_STARS_PER_MISSION]]
    return out


_ESM = r"""
const KEY = "%(key)s";
const BACKUP = "%(backup)s";
const ID = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
const MAX_STARS = %(max_stars)d;
let memory = null;  // used when localStorage is blocked

function storage() {
  try {
    const s = window.localStorage;
    const probe = KEY + ":probe";
    s.setItem(probe, "1");
    s.removeItem(probe);
    return s;
  } catch (e) {
    return null;
  }
}

// {stars, dropped}: the readable part of parsed JSON, and whether anything was not.
function clean(data) {
  const stars = {};
  let dropped = false;
  if (!data || typeof data !== "object" || Array.isArray(data)) return {stars, dropped: true};
  const src = data.stars;
  if (!src || typeof src !== "object" || Array.isArray(src)) return {stars, dropped: true};
  if (data.version !== 1) dropped = true;
  for (const [id, value] of Object.entries(src)) {
    if (!ID.test(id) || !Array.isArray(value)) { dropped = true; continue; }
    const list = value.slice(0, MAX_STARS).map((v) => v === true);
    if (value.some((v) => typeof v !== "boolean") || value.length > MAX_STARS) dropped = true;
    stars[id] = list;
  }
  return {stars, dropped};
}

function read() {
  const s = storage();
  if (!s) return {stars: memory ? memory : {}, status: "unavailable"};
  let raw = null;
  try { raw = s.getItem(KEY); } catch (e) { return {stars: {}, status: "unavailable"}; }
  if (raw === null) return {stars: {}, status: "ok"};
  let parsed;
  try {
    parsed = JSON.parse(raw);
  } catch (e) {
    backup(s, raw);
    write({});
    return {stars: {}, status: "recovered"};
  }
  const {stars, dropped} = clean(parsed);
  if (dropped) {
    backup(s, raw);
    write(stars);
    return {stars, status: "recovered"};
  }
  return {stars, status: "ok"};
}

function backup(s, raw) {
  try { s.setItem(BACKUP, raw); } catch (e) { /* full or blocked: keep going */ }
}

function write(stars) {
  const s = storage();
  if (!s) { memory = stars; return false; }
  try {
    s.setItem(KEY, JSON.stringify({version: 1, stars}));
    return true;
  } catch (e) {
    memory = stars;
    return false;
  }
}

function earn(id, list) {
  if (typeof id !== "string" || !ID.test(id) || !Array.isArray(list)) return read();
  const current = read();
  const before = current.stars[id] || [];
  const n = Math.min(Math.max(before.length, list.length), MAX_STARS);
  const merged = [];
  for (let i = 0; i < n; i++) merged.push(before[i] === true || list[i] === true);
  current.stars[id] = merged;
  write(current.stars);
  return read();
}

function reset() {
  const s = storage();
  memory = null;
  if (s) {
    try {
      const raw = s.getItem(KEY);
      if (raw !== null) s.setItem(BACKUP, raw);
      s.removeItem(KEY);
    } catch (e) { /* blocked */ }
  }
  return read();
}

export function render({ model }) {
  const publish = (state) => model.send_msg({type: "stars", stars: state.stars, status: state.status});
  model.on("msg:custom", (msg) => {
    if (!msg || typeof msg !== "object") return;
    if (msg.type === "earn") publish(earn(msg.mission, msg.stars));
    else if (msg.type === "reset") publish(reset());
    else if (msg.type === "read") publish(read());
  });
  const onStorage = (event) => { if (event.key === KEY || event.key === null) publish(read()); };
  window.addEventListener("storage", onStorage);
  model.on("remove", () => window.removeEventListener("storage", onStorage));
  publish(read());
  const el = document.createElement("span");
  el.className = "stf-stars-bridge";
  el.hidden = true;
  return el;
}
""" % {"key": STORAGE_KEY, "backup": BACKUP_KEY, "max_stars": MAX_STARS_PER_MISSION}


class StarsBridge(JSComponent):
    """Reads and writes earned stars in the page's localStorage.

    `stars` ({mission id: [bool]}) is filled once the page has answered (`loaded`);
    `earn(mission_id, flags)` OR-merges on the page and the page answers with the
    merged whole; `reset()` clears everything (after a backup).
    """

    stars = param.Dict(default={}, doc="Stars saved in this browser.")
    loaded = param.Boolean(default=False, doc="The page has answered at least once.")
    status = param.String(default="", doc="ok | recovered | unavailable")

    _esm = _ESM
    # Python-side only: never synced to the page (the page talks through messages).
    _rename = {"stars": None, "loaded": None, "status": None}

    def __init__(self, **params):
        params.setdefault("width", 0)
        params.setdefault("height", 0)
        params.setdefault("margin", 0)
        params.setdefault("sizing_mode", "fixed")
        super().__init__(**params)

    def _handle_msg(self, data):
        if not isinstance(data, dict) or data.get("type") != "stars":
            return
        status = data.get("status")
        with param.parameterized.batch_call_watchers(self):
            self.status = status if status in ("ok", "recovered", "unavailable") else "ok"
            self.stars = clean_stars(data.get("stars"))
            self.loaded = True

    def earn(self, mission_id, flags):
        """Save `flags` ([bool] per star) for the mission; stars already saved stay."""
        if not _ID.match(str(mission_id)) or not any(flags):
            return
        self._send_msg({"type": "earn", "mission": mission_id, "stars": [bool(f) for f in flags]})

    def reset(self):
        self._send_msg({"type": "reset"})

    def refresh(self):
        self._send_msg({"type": "read"})

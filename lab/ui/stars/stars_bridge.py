"""Stars in the browser's localStorage, reachable from Python anywhere Panel runs.

Python cannot touch `localStorage` when the app runs in Pyodide's web worker, so a
tiny `JSComponent` does it on the page, and the two sides exchange messages
(`model.send_msg` -> `_handle_msg`, `_send_msg` -> `model.on("msg:custom")`), which
Panel carries both over the server's websocket and between worker and page.

The storage rules live in one file, `stars_store.js` (also the static hub's
assets/stars.js): one versioned key,

    split-the-fleet:stars:v1 = {"version": 1, "stars": {"mission-id": [true, false, true]}}

stars only ever added, unreadable data moved to a backup key before anything is dropped,
every backup kept until cleared, memory for the visit when storage is blocked or full
(and for the tab, in sessionStorage); `status` says which, and STORAGE_NOTES what the
pages tell the student then.

Saving is acknowledged: a message sent before the page's component exists is lost, so
`earn` keeps the stars pending until the page reports storage holding them (every reply
carries what storage now holds), and sends them again when the component (re)renders
and every RETRY_MS until then. Stars are OR-merged, so a repeat is harmless.

A cross-site embed may get no storage at all (Chromium's default for third-party
iframes): the page reports whether it is `embedded` and has storage access, asks for it
(`request_access`, the Storage Access API) when the student clicks, and merges a
`#progress=CODE` fragment (the embed's "Open the full lab" link) on render, reporting it
as `carried`. `ProgressTools` are the buttons: copy and paste a progress code
(progress_code.py), the full-lab link, and the storage request.
"""

import html

import re
from pathlib import Path

import panel as pn
import param

from lab.core.errors import LabError
from lab.core.missions import ID_PATTERN

from . import progress_code
from ..browser.bridge import Bridge
from ..browser.panel_shims import Html
from ..browser.timers import every
from ..words.theme import CSS

__all__ = ["StarsBridge", "ProgressTools", "STORAGE_KEY", "BACKUP_KEY", "BACKUP_PREFIX", "STORE_JS", "RETRY_MS", "RETRY_LIMIT",
           "STORAGE_NOTES", "clean_stars"]

STORAGE_KEY = "split-the-fleet:stars:v1"
BACKUP_KEY = STORAGE_KEY + ":backup"  # the newest backup; older ones are BACKUP_KEY + ":<n>"
BACKUP_PREFIX = BACKUP_KEY
_ID = ID_PATTERN  # the missions' own id rule (use fullmatch)
_BACKUP = re.compile(r"split-the-fleet:stars:v1:backup(?::[1-9][0-9]{0,8})?")
# The stored stars and a progress code hold the same amount: one rule, in progress_code.
MAX_STARS_PER_MISSION = progress_code.MAX_STARS
MAX_MISSIONS = progress_code.MAX_MISSIONS
RETRY_MS = 1000  # resend stars the page has not confirmed this often ...
RETRY_LIMIT = 60  # ... for at most this many tries (a page that never answers is gone)
STORE_JS = Path(__file__).with_name("stars_store.js")
# What the lab and the hub say about the storage's status (the static hub, static/site/hub.js,
# says the same words; a test holds them equal). Plain text: no markup, no "<" or "&".
STORAGE_NOTES = {
    "recovered": "Some saved stars could not be read; they were set aside (backed up in this browser) and the "
                 "readable ones kept.",
    "unavailable": "This browser does not let the page store data, so stars last only for this visit: "
                   "\"Copy my progress\" keeps them.",
    "full": "This browser's storage for this site is full, so stars earned now are not saved: they last while "
            "this tab is open. \"Copy my progress\" keeps them as a code to paste later; or free space (\"Clear "
            "backups\" on the missions page, or this site's data in the browser's settings) and they are saved "
            "on the next page.",
}


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
  // Every message to Python leaves on a task of its own: the static site's page handler (Panel's
  // pyodide_handler.js) drops what the page sends while it applies a patch from the worker, so an
  // answer sent from inside the message handler below never reached Python there.
  const send = (msg) => setTimeout(() => model.send_msg(msg), 0);
  const publish = (state, extra) => send(Object.assign(
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
    else if (msg.type === "copy" && typeof msg.text === "string") {
      // A cross-site iframe may not write the clipboard (permissions policy): then do not try (it logs an error).
      const policy = document.permissionsPolicy || document.featurePolicy;
      const allowed = !policy || typeof policy.allowsFeature !== "function" || policy.allowsFeature("clipboard-write");
      try { if (allowed) navigator.clipboard.writeText(msg.text.slice(0, 20000)).catch(() => {}); } catch (e) { /* the code is shown anyway */ }
    } else if (msg.type === "request_access") {
      // Still within the click's transient activation: the click was a moment ago, in this frame.
      if (typeof document.requestStorageAccess !== "function") { sendAccess("unsupported"); return; }
      document.requestStorageAccess({localStorage: true}).then((handle) => {
        if (handle && handle.localStorage) STFStars.adopt(handle.localStorage);
        sendAccess("granted");
        publish(STFStars.read());
      }, () => sendAccess("denied"));
    }
  });
  const sendAccess = (asked) => {
    let embedded = false;
    try { embedded = window.top !== window; } catch (e) { embedded = true; }
    const tell = (has) => send({type: "access", embedded, has, asked: asked || ""});
    if (typeof document.hasStorageAccess !== "function") tell(null);
    else document.hasStorageAccess().then(tell, () => tell(false));
  };
  const onStorage = (event) => { if (event.key === STFStars.KEY || event.key === null) publish(STFStars.read()); };
  window.addEventListener("storage", onStorage);
  model.on("remove", () => window.removeEventListener("storage", onStorage));
  const carried = STFStars.takeFragment();  // "Open the full lab" from an embed: #progress=CODE
  publish(STFStars.read(), {hello: true, carried: carried || null});  // Python resends anything still pending
  sendAccess("");
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


class StarsBridge(Bridge):
    """Reads and writes earned stars in the page's localStorage.

    `stars` ({mission id: [bool]}) is filled once the page has answered (`loaded`);
    `earn(mission_id, flags)` OR-merges on the page, kept `pending` until the page's
    answer shows storage holding it; `reset()` clears everything (after a backup);
    `backups` lists the backup keys in storage, `clear_backups()` removes them.
    """

    stars = param.Dict(default={}, doc="Stars saved in this browser.")
    loaded = param.Boolean(default=False, doc="The page has answered at least once.")
    status = param.String(default="", doc="ok | recovered | unavailable (blocked) | full (its quota)")
    backups = param.List(default=[], doc="Backup keys in this browser's storage, newest first.")
    pending = param.Dict(default={}, doc="Stars sent to the page that it has not confirmed yet.")
    embedded = param.Boolean(default=False, doc="The page is in an iframe (maybe on another site).")
    has_access = param.Boolean(default=True, doc="document.hasStorageAccess() (True where the API is missing).")
    asked = param.String(default="", doc="The answer to the last request_access: granted | denied | unsupported.")
    carried = param.Dict(default=None, allow_None=True, doc="{ok, added, error} of a #progress= fragment merged at load.")

    _esm = _ESM
    # Python-side only: never synced to the page (the page talks through messages).
    _rename = {"stars": None, "loaded": None, "status": None, "backups": None, "pending": None, "embedded": None,
               "has_access": None, "asked": None, "carried": None}

    def __init__(self, **params):
        super().__init__(**params)
        self._retry = None  # the timer resending pending stars
        self._asking = None  # the timer of read_until_loaded

    def read_until_loaded(self):
        """Ask the page for the saved stars every RETRY_MS (RETRY_LIMIT times at most) until it
        has answered once. The component's own first answer, sent as it renders, is lost on the
        static site when it renders before Panel's page handler links the page to the worker."""
        if self.loaded or self._asking is not None:
            return
        try:
            self._asking = every(self._ask, RETRY_MS, count=RETRY_LIMIT)
        except Exception:  # no event loop (a bare unit test)
            self._asking = None

    def _ask(self):
        if not self.loaded:  # (a tick already queued when the answer came)
            self.refresh()

    @staticmethod
    def _stop(timer):
        """Stop a timer of this bridge (None: none running); returns None, the timer's new value."""
        if timer is not None:
            try:
                timer.stop()
            except Exception:
                pass
        return None

    def _handle_msg(self, data):
        if isinstance(data, dict) and data.get("type") == "access":
            with param.parameterized.batch_call_watchers(self):
                self.embedded = data.get("embedded") is True
                self.has_access = data.get("has") is not False
                if data.get("asked") in ("granted", "denied", "unsupported"):
                    self.asked = data["asked"]
            return
        if not isinstance(data, dict) or data.get("type") != "stars":
            return
        carried = data.get("carried")
        if isinstance(carried, dict):  # plain text, short: the page's message for a refused code
            self.carried = {"ok": carried.get("ok") is True, "added": int(carried.get("added") or 0)
                            if isinstance(carried.get("added"), int) else 0, "error": str(carried.get("error") or "")[:300]}
        status = data.get("status")
        stars = clean_stars(data.get("stars"))
        backups = [k for k in (data.get("backups") or []) if isinstance(k, str) and _BACKUP.fullmatch(k)]
        pending = {m: f for m, f in self.pending.items() if not _covers(stars.get(m, []), f)}
        with param.parameterized.batch_call_watchers(self):
            self.status = status if status in STORAGE_NOTES else "ok"
            self.stars = stars
            self.backups = backups
            self.pending = pending
            self.loaded = True
        self._asking = self._stop(self._asking)
        if not pending:
            self._retry = self._stop(self._retry)
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
        self._send_pending()
        self._restart_retry()

    def _send_pending(self):
        if self.pending:
            items = [{"mission": m, "stars": f} for m, f in sorted(self.pending.items())]
            self._send_msg({"type": "earn", "missions": items})

    def _on_retry(self):
        if not self.pending:
            self._retry = self._stop(self._retry)
            return
        self._send_pending()

    def _restart_retry(self):
        """Resend every RETRY_MS, RETRY_LIMIT times from now: each star earned gets the full count
        (a timer whose count ran out is done, and keeping it would stop every later resend)."""
        self._retry = self._stop(self._retry)
        try:
            self._retry = every(self._on_retry, RETRY_MS, count=RETRY_LIMIT)
        except Exception:  # no event loop (a bare unit test): the page's hello still resends
            self._retry = None

    def reset(self):
        self.pending = {}
        self._retry = self._stop(self._retry)
        self._send_msg({"type": "reset"})

    def clear_backups(self):
        self._send_msg({"type": "clear_backups"})

    def refresh(self):
        self._send_msg({"type": "read"})

    def copy(self, text):
        """Put `text` on the clipboard if the page may (the code is shown for copying anyway)."""
        self._send_msg({"type": "copy", "text": str(text)})

    def request_access(self):
        """Ask for storage access (Storage Access API); call it from a click: it needs a user gesture."""
        self._send_msg({"type": "request_access"})

    @property
    def all_stars(self):
        """What storage holds, with what is still on its way."""
        return progress_code.merge(self.stars, self.pending)


class ProgressTools:
    """Copy / paste a progress code, "Open the full lab" (in an iframe), and the storage request.

    `full_href` is where the full-lab link goes (the code rides along as #progress=CODE);
    it shows only when the page reports being in an iframe. Everything a student pastes is
    shown back escaped, shortened by progress_code's messages.
    """

    def __init__(self, bridge, full_href, compact=False):
        self.bridge = bridge
        self.full_href = full_href
        width = 150 if compact else 170
        self.copy_button = pn.widgets.Button(label="Copy my progress", button_type="light", width=width, margin=(4, 4),
                                             css_classes=["stf-copy-progress"],
                                             description="A short code with every star earned here, to paste elsewhere")
        self.paste_input = pn.widgets.TextInput(placeholder="Paste a progress code", max_length=progress_code.MAX_CODE_CHARS,
                                                width=180 if compact else 220, margin=(4, 4), css_classes=["stf-paste-input"])
        self.paste_button = pn.widgets.Button(label="Paste progress", button_type="light", width=width - 20, margin=(4, 4),
                                              css_classes=["stf-paste-progress"],
                                              description="Add the stars of a progress code (never removes any)")
        self.access_button = pn.widgets.Button(label="Keep my stars in this browser", button_type="primary", visible=False,
                                               margin=(4, 4), css_classes=["stf-storage-access"])
        self.code = Html("", stylesheets=[CSS], margin=(0, 6), css_classes=["stf-progress-code-pane"])
        self.link = Html("", stylesheets=[CSS], margin=(4, 6), visible=False, css_classes=["stf-open-full-pane"])
        self.status = Html("", stylesheets=[CSS], margin=(0, 6), css_classes=["stf-progress-status"],
                                   sizing_mode="stretch_width")
        self.copy_button.on_click(self._on_copy)
        self.paste_button.on_click(self._on_paste)
        self.access_button.on_click(lambda _e: bridge.request_access())
        bridge.param.watch(self._on_bridge, ["stars", "embedded", "has_access", "status", "asked", "carried"])
        self.view = pn.Column(
            pn.FlexBox(self.copy_button, self.paste_input, self.paste_button, self.access_button, self.link,
                       flex_wrap="wrap", align_items="center", sizing_mode="stretch_width", margin=0),
            self.code, self.status, sizing_mode="stretch_width", margin=0, css_classes=["stf-progress-tools"])

    def _say(self, text, ok=True):
        self.status.object = (f'<span class="stf-reset-status" role="status" data-ok="{str(ok).lower()}">'
                              f'{html.escape(text)}</span>')

    def _on_copy(self, _event=None):
        code = progress_code.encode(self.bridge.all_stars)
        self.code.object = (f'<code class="stf-progress-code" data-code="{html.escape(code)}" '
                            f'style="user-select:all;word-break:break-all">{html.escape(code)}</code>')
        self.bridge.copy(code)
        self._say("Your progress code is above (and on the clipboard if the browser allowed it): "
                  "\"Paste progress\" takes it in any other browser or site.")

    def _on_paste(self, _event=None):
        raw = self.paste_input.value_input if self.paste_input.value_input else self.paste_input.value
        try:
            added = progress_code.decode(raw or "")
        except LabError as exc:
            self._say(f"Nothing changed: {exc}.", ok=False)
            return
        new = progress_code.count_new(self.bridge.all_stars, added)
        for mission, flags in sorted(added.items()):
            self.bridge.earn(mission, flags)
        self.paste_input.value = ""
        self._say("1 star added from the code." if new == 1 else f"{new} stars added from the code.")

    def _on_bridge(self, *events):
        b = self.bridge
        names = {e.name for e in events}
        self.access_button.visible = b.embedded and (b.status == "unavailable" or not b.has_access) and b.asked != "granted"
        if self.full_href and b.embedded:
            code = progress_code.encode(b.all_stars)
            self.link.object = (f'<a class="stf-button stf-open-full" href="{html.escape(self.full_href)}#progress={code}" '
                                'target="_blank" rel="noopener">Open the full lab</a>')
        self.link.visible = bool(self.full_href and b.embedded)
        if "asked" in names and b.asked:
            if b.asked == "granted":
                self._say("This browser now keeps your stars for this embed.")
            else:
                self._say("The browser did not allow it: stars here last for this visit. Use \"Copy my progress\" "
                          "or \"Open the full lab\" to keep them.", ok=False)
        elif "carried" in names and b.carried:
            c = b.carried
            if c["ok"]:
                self._say("1 star added from the embed's link." if c["added"] == 1
                          else f'{c["added"]} stars added from the embed\'s link.')
            else:
                self._say(f'Nothing changed: {c["error"]}.', ok=False)

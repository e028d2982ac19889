"""stars_store.js when storage is full or blocked, in node with storages that behave as a
browser's do: a full localStorage throws QuotaExceededError on a write it has no room for,
a blocked one throws SecurityError. Each "page" is a fresh run of the script over the same
storages (as a page change in one tab). tests/ui/test_page_limits_browser.py fills a real
Chromium's storage."""

import json
import shutil
import subprocess

import pytest

from lab.ui.stars.stars_bridge import STORAGE_KEY, STORE_JS

HARNESS = r"""
const vm = require("vm");
class Store {
  constructor(room, failure) { this.items = new Map(); this.room = room; this.failure = failure || "QuotaExceededError"; }
  used() { let n = 0; for (const [k, v] of this.items) n += k.length + v.length; return n; }
  get length() { return this.items.size; }
  key(i) { return [...this.items.keys()][i] ?? null; }
  getItem(k) { return this.items.has(k) ? this.items.get(k) : null; }
  setItem(k, v) {
    v = String(v);
    const after = this.used() - (this.items.has(k) ? k.length + this.items.get(k).length : 0) + k.length + v.length;
    if (after > this.room) { const e = new Error("no room"); e.name = this.failure; e.code = this.failure === "QuotaExceededError" ? 22 : 18; throw e; }
    this.items.set(k, v);
  }
  removeItem(k) { this.items.delete(k); }
}
const local = new Store(Infinity), tab = new Store(Infinity);
let blocked = false;
function page() {  // a fresh page of this tab: the script runs again over the same storages
  const win = { addEventListener() {}, dispatchEvent() {}, sessionStorage: tab };
  Object.defineProperty(win, "localStorage", { get() { if (blocked) { const e = new Error("insecure"); e.name = "SecurityError"; throw e; } return local; } });
  win.parent = win;
  const ctx = vm.createContext({ window: win, Event: class {}, btoa, atob, JSON, Object, Array, Math, Number, String });
  vm.runInContext(SOURCE, ctx);
  return ctx.window.STFStars;
}
const out = {};
const plain = (x) => JSON.parse(JSON.stringify(x));
"""


def _run(script):
    node = shutil.which("node")
    if node is None:
        pytest.skip("node is not installed")
    source = STORE_JS.read_text(encoding="utf-8")
    program = f"const SOURCE = {json.dumps(source)};\n{HARNESS}\n{script}\nconsole.log(JSON.stringify(out));"
    done = subprocess.run([node, "-"], input=program, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def test_a_star_earned_in_full_storage_is_kept_for_the_tab_named_full_and_saved_once_there_is_room():
    got = _run(f"""
      local.room = 200; local.setItem("filler", "x".repeat(190));  // full: the stars do not fit
      let stars = page();
      out.earned = plain(stars.earn("mixing-hurts", [true, false]));
      out.stored = local.getItem({json.dumps(STORAGE_KEY)});
      stars = page();  // the hub, after the lab, in the same tab
      out.next_page = plain(stars.read());
      local.removeItem("filler");  // room again
      out.freed = plain(stars.read());
      out.stored_after = JSON.parse(local.getItem({json.dumps(STORAGE_KEY)}));
      out.tab_after = tab.getItem({json.dumps(STORAGE_KEY + ":unsaved")});
      out.fresh_page = plain(page().read());""")
    assert got["earned"] == {"stars": {"mixing-hurts": [True, False]}, "status": "full"}
    assert got["stored"] is None  # not in localStorage: there was no room
    assert got["next_page"] == got["earned"]  # still there on the next page of the tab, still named full
    assert got["freed"] == {"stars": {"mixing-hurts": [True, False]}, "status": "ok"}
    assert got["stored_after"] == {"version": 1, "stars": {"mixing-hurts": [True, False]}}
    assert got["tab_after"] is None and got["fresh_page"]["status"] == "ok"


def test_blocked_storage_is_not_called_full():
    got = _run("""
      blocked = true;
      out.blocked = plain(page().earn("mixing-hurts", [true]));
      blocked = false; local.failure = "SecurityError"; local.room = 0;  // readable, but every write refused
      out.refused = plain(page().earn("slow-link", [true]));""")
    assert got["blocked"]["status"] == "unavailable" and got["blocked"]["stars"] == {"mixing-hurts": [True]}
    assert got["refused"]["status"] == "unavailable" and got["refused"]["stars"]["slow-link"] == [True]


def test_reset_forgets_the_unsaved_stars_too():
    got = _run(f"""
      local.room = 10;
      const stars = page();
      stars.earn("mixing-hurts", [true]);
      out.reset = plain(stars.reset());
      out.next_page = plain(page().read());
      out.tab = tab.getItem({json.dumps(STORAGE_KEY + ":unsaved")});""")
    assert got["reset"]["stars"] == {} and got["next_page"]["stars"] == {} and got["tab"] is None


def test_the_static_hub_says_what_the_lab_says_about_storage():
    from lab.ui.stars.stars_bridge import STORAGE_NOTES

    hub = (STORE_JS.parents[3] / "static" / "site" / "hub.js").read_text(encoding="utf-8")
    for status, words in STORAGE_NOTES.items():
        assert f"{status}: {json.dumps(words, ensure_ascii=False)}" in hub, status


def test_unreadable_data_with_no_room_for_its_backup_is_left_alone_and_the_new_star_named_full():
    raw = '{"version": 1, "stars": {"a": [true], "junk": "' + "j" * 100 + '"}}'
    got = _run(f"""
      local.room = {len(STORAGE_KEY) + len(raw) + 3}; local.setItem({json.dumps(STORAGE_KEY)}, {json.dumps(raw)});
      out.earned = plain(page().earn("b", [true]));
      out.stored = local.getItem({json.dumps(STORAGE_KEY)});""")
    assert got["stored"] == raw  # never overwritten: it could not be backed up
    assert got["earned"] == {"stars": {"a": [True], "b": [True]}, "status": "full"}

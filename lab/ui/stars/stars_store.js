// Split the Fleet: earned stars in the browser's localStorage. The one copy of this logic:
// lab/ui/stars/stars_bridge.py puts it into the lab's storage component (lab serve and the
// static site's lab page), and build.py copies it to the static hub as assets/stars.js.
//
//   split-the-fleet:stars:v1 = {"version": 1, "stars": {"mission-id": [true, false, true]}}
//
// Stars are only ever added (OR-ed); reset is the one way to clear them. Unreadable data
// is never trusted and never dropped unless it was backed up first: the raw text moves to
// a backup key and only the unreadable parts are left out of what is rewritten, so a
// mangled entry for one mission does not cost another mission's stars. Every backup is
// kept until the student clears them: the newest is "split-the-fleet:stars:v1:backup",
// older ones "split-the-fleet:stars:v1:backup:<n>" (higher n = newer). When storage is
// blocked or full, stars that could not be written live in memory for the visit, and in
// sessionStorage ("split-the-fleet:stars:v1:unsaved") for the tab, so the hub after the lab
// still has them; status says which ("unavailable": blocked, "full": QuotaExceededError),
// and they are written to localStorage as soon as a write succeeds again.
//
// Everything keyed by mission id is a null-prototype object, so ids such as "constructor"
// or "__proto__" are plain keys. Plain script (no modules): it also runs from file://.
var STFStars = (function () {
  "use strict";

  var KEY = "split-the-fleet:stars:v1";
  var BACKUP = KEY + ":backup";
  var BACKUP_N = /^split-the-fleet:stars:v1:backup(?::([1-9][0-9]{0,8}))?$/;
  var ID = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
  var MAX_STARS = 16;
  var MAX_MISSIONS = 500;
  var memory = null;  // stars that could not be written (blocked or full storage), OR-ed into every read
  var memoryWhy = "unavailable";  // why not: "full" (the quota) or "unavailable" (blocked)
  var UNSAVED = KEY + ":unsaved";  // in sessionStorage: `memory`, for this tab
  var moveWhy = "unavailable";  // why the last move (a backup) failed, as memoryWhy
  var granted = null;  // the Storage Access API's unpartitioned localStorage, once a cross-site embed got it
  var CODE_PREFIX = "STF1-";
  var MAX_CODE = 20000;  // as lab/ui/stars/progress_code.py MAX_CODE_CHARS

  function own(obj, key) { return Object.prototype.hasOwnProperty.call(obj, key); }
  function dict() { return Object.create(null); }

  // The storage if it can be read (a full one still can); null when blocked. Failed
  // writes are caught where they happen and kept in `memory`.
  function storage() {
    try {
      var s = granted || window.localStorage;
      s.getItem(KEY);
      return s;
    } catch (e) {
      return null;
    }
  }

  function get(s, key) {
    try { return s.getItem(key); } catch (e) { return null; }
  }

  // {stars, dropped}: the readable part of parsed JSON, and whether anything was not.
  function clean(data) {
    var stars = dict();
    var dropped = false;
    if (!data || typeof data !== "object" || Array.isArray(data)) return { stars: stars, dropped: true };
    var src = own(data, "stars") ? data.stars : null;
    if (!src || typeof src !== "object" || Array.isArray(src)) return { stars: stars, dropped: true };
    if (data.version !== 1) dropped = true;
    var ids = Object.keys(src);
    if (ids.length > MAX_MISSIONS) dropped = true;
    ids.slice(0, MAX_MISSIONS).forEach(function (id) {
      var value = src[id];
      if (!ID.test(id) || !Array.isArray(value)) { dropped = true; return; }
      if (value.length > MAX_STARS || value.some(function (v) { return typeof v !== "boolean"; })) dropped = true;
      stars[id] = value.slice(0, MAX_STARS).map(function (v) { return v === true; });
    });
    return { stars: stars, dropped: dropped };
  }

  function merge(into, from) {
    if (!from) return into;
    Object.keys(from).forEach(function (id) {
      var a = own(into, id) ? into[id] : [];
      var b = from[id];
      var n = Math.min(Math.max(a.length, b.length), MAX_STARS);
      var out = [];
      for (var i = 0; i < n; i++) out.push(a[i] === true || b[i] === true);
      into[id] = out;
    });
    return into;
  }

  function copy(stars) { return merge(dict(), stars); }

  // Every backup key in storage, newest first.
  function backups() {
    var s = storage();
    if (!s) return [];
    var found = [];
    try {
      for (var i = 0; i < s.length; i++) {
        var k = s.key(i);
        var m = k === null ? null : BACKUP_N.exec(k);
        if (m) found.push({ key: k, n: m[1] ? Number(m[1]) : Infinity });
      }
    } catch (e) { return []; }
    found.sort(function (a, b) { return b.n - a.n; });
    return found.map(function (f) { return f.key; });
  }

  function nextNumber() {
    var top = 0;
    backups().forEach(function (k) {
      var m = BACKUP_N.exec(k);
      if (m && m[1]) top = Math.max(top, Number(m[1]));
    });
    return top + 1;
  }

  // Move a value from one key to another. A copy needs room for two; when storage is too
  // full for that, the original is removed first and put back if the new key still fails,
  // so the value is never lost. True when it now lives under `to`.
  function move(s, from, to) {
    var value = get(s, from);
    if (value === null) return false;
    try {
      s.setItem(to, value);
      s.removeItem(from);
      return true;
    } catch (e) { /* full: try as a rename */ }
    try {
      s.removeItem(from);
      s.setItem(to, value);
      return true;
    } catch (e) {
      moveWhy = quota(e) ? "full" : "unavailable";
      try { s.setItem(from, value); } catch (e2) { /* cannot happen: its room was just freed */ }
      return false;
    }
  }

  // Move what is under KEY to the newest backup; the previous newest gets the next number.
  // True when done; false leaves KEY as it was.
  function setAside(s) {
    var target = BACKUP;
    if (get(s, BACKUP) !== null && !move(s, BACKUP, BACKUP + ":" + nextNumber())) target = BACKUP + ":" + nextNumber();
    return move(s, KEY, target);
  }

  // A full storage throws QuotaExceededError (code 22; Firefox once named it NS_ERROR_DOM_QUOTA_REACHED, 1014).
  function quota(e) {
    return !!e && (e.name === "QuotaExceededError" || e.name === "NS_ERROR_DOM_QUOTA_REACHED" || e.code === 22 || e.code === 1014);
  }

  // Every star of `extra` is in `stars`.
  function covers(stars, extra) {
    return Object.keys(extra).every(function (id) {
      var have = own(stars, id) ? stars[id] : [];
      return extra[id].every(function (f, i) { return f !== true || have[i] === true; });
    });
  }

  // `memory` in sessionStorage, so a star earned while storage is full outlives a page change in this tab.
  function session() {
    try { return window.sessionStorage; } catch (e) { return null; }
  }

  function remember() {
    var t = session();
    if (!t) return;
    try {
      if (memory) t.setItem(UNSAVED, JSON.stringify({ version: 1, why: memoryWhy, stars: memory }));
      else t.removeItem(UNSAVED);
    } catch (e) { /* blocked or full as well: memory it is */ }
  }

  function recall() {
    if (memory) return;
    var t = session();
    var raw = t ? get(t, UNSAVED) : null;
    if (raw === null) return;
    try {
      var data = JSON.parse(raw);
      var got = clean(data).stars;
      if (Object.keys(got).length) {
        memory = got;
        memoryWhy = data.why === "full" ? "full" : "unavailable";
      }
    } catch (e) { /* unreadable: nothing to add */ }
  }

  function write(stars) {
    var s = storage();
    var why = "unavailable";
    if (s) {
      try {
        s.setItem(KEY, JSON.stringify({ version: 1, stars: stars }));
        if (memory && covers(stars, memory)) {  // saved at last
          memory = null;
          remember();
        }
        return true;
      } catch (e) { why = quota(e) ? "full" : "unavailable"; }
    }
    memory = merge(memory || dict(), stars);
    memoryWhy = why;
    remember();
    return false;
  }

  // {stars, status, kept}: status "ok", "recovered" (unreadable parts set aside),
  // "unavailable" (blocked storage) or "full" (its quota: some stars are not saved and last
  // for this tab); `kept` when unreadable data could not be backed up and so was left where
  // it was, untouched.
  function load() {
    recall();
    var s = storage();
    if (!s) return { stars: copy(memory), status: "unavailable", kept: false };
    var raw = get(s, KEY);
    if (raw === null) return finish({ stars: dict(), status: "ok", kept: false });
    var result;
    try {
      result = clean(JSON.parse(raw));
    } catch (e) {
      result = { stars: dict(), dropped: true };
    }
    if (!result.dropped) return finish({ stars: result.stars, status: "ok", kept: false });
    if (!setAside(s)) return finish({ stars: result.stars, status: "recovered", kept: true });
    write(result.stars);
    return finish({ stars: result.stars, status: "recovered", kept: false });
  }

  function finish(state) {
    if (memory) {
      merge(state.stars, memory);
      if (!state.kept) write(copy(state.stars));  // room again? then they are saved (never over unread data)
      if (memory && (state.status === "ok" || memoryWhy === "full")) state.status = memoryWhy;  // "not saved" first
    }
    return state;
  }

  function read() {
    var state = load();
    return { stars: state.stars, status: state.status };
  }

  function earn(id, list) {
    var state = keep(id, list);
    if (state.added) tellSiblings(state.added);
    return state.read;
  }

  function keep(id, list) {
    if (typeof id !== "string" || !ID.test(id) || !Array.isArray(list)) return { read: read(), added: null };
    var current = load();
    var add = dict();
    add[id] = list.slice(0, MAX_STARS).map(function (v) { return v === true; });
    var merged = merge(current.stars, add);
    if (current.kept) {  // never overwrite what was not backed up (no room for its backup, mostly)
      memory = merge(memory || dict(), add);
      memoryWhy = moveWhy;
      remember();
    } else write(merged);
    changed();
    return { read: read(), added: add };
  }

  // Embeds on one page (a blog post's lab beside its series hub) share its storage partition
  // where the browser gives third-party frames storage, and nothing where it does not (Chromium
  // with third-party cookies blocked). So a star earned in an embed is also posted to the
  // page's other frames of this site (targetOrigin: this origin only); theirs is taken from
  // this origin only. Stars are only ever added, so a message can add, never remove.
  var RELAY = "stf-stars:v1";

  function tellSiblings(add) {
    if (typeof window === "undefined" || window.parent === window) return;
    var frames;
    try { frames = window.parent.frames; } catch (e) { return; }
    for (var i = 0; i < Math.min(frames.length, 64); i++) {
      if (frames[i] === window) continue;
      try { frames[i].postMessage({ type: RELAY, stars: add }, window.location.origin); } catch (e) { /* gone */ }
    }
  }

  function onMessage(event) {
    if (event.origin !== window.location.origin || !event.data || event.data.type !== RELAY) return;
    var got = clean({ version: 1, stars: event.data.stars });
    Object.keys(got.stars).slice(0, MAX_MISSIONS).forEach(function (id) { keep(id, got.stars[id]); });
  }

  // Pages that show stars listen for "stf-stars-changed" on window: a star earned here, in a
  // sibling embed (onMessage) or in another tab of this storage partition (the storage event).
  function changed() {
    if (typeof window === "undefined" || typeof window.dispatchEvent !== "function") return;
    try { window.dispatchEvent(new Event("stf-stars-changed")); } catch (e) { /* very old browser */ }
  }

  if (typeof window !== "undefined" && typeof window.addEventListener === "function") {
    window.addEventListener("message", onMessage);
    window.addEventListener("storage", function (event) { if (event.key === KEY || event.key === null) changed(); });
  }

  // Forget every star (the old ones go to a new backup). {stars, status, reset}: `reset`
  // is false when storage was too full to keep a backup, and then nothing was removed.
  function reset() {
    var s = storage();
    memory = null;
    remember();
    var done = true;
    if (s && get(s, KEY) !== null) done = setAside(s);
    var state = read();
    state.reset = done;
    return state;
  }

  function clearBackups() {
    var s = storage();
    if (!s) return 0;
    var keys = backups();
    keys.forEach(function (k) { try { s.removeItem(k); } catch (e) { /* blocked */ } });
    return keys.length;
  }


  // ---- progress codes: the format of lab/ui/stars/progress_code.py, once more for the static hub
  //   STF1-<base64url of compact sorted JSON {"mission-id": star bitmask}>.<FNV-1a 32 of the JSON, 8 hex>
  // decodeCode gives every code the verdict progress_code.decode gives it, word for word
  // (tests/test_hostile_input.py runs both on one corpus): the content is read by the same
  // small grammar, not JSON.parse, so nothing nests and 1.0 is no mask.
  function fnv1a(text) {
    var h = 0x811c9dc5;
    for (var i = 0; i < text.length; i++) {
      h ^= text.charCodeAt(i);  // the JSON is ASCII (ids are slugs, masks digits)
      h = Math.imul(h, 0x01000193) >>> 0;
    }
    return ("0000000" + h.toString(16)).slice(-8);
  }

  function encodeCode(stars) {
    var ids = Object.keys(stars || {}).filter(function (id) { return ID.test(id); }).sort();
    var parts = [];
    ids.forEach(function (id) {
      var mask = 0;
      var flags = Array.isArray(stars[id]) ? stars[id].slice(0, MAX_STARS) : [];
      flags.forEach(function (f, i) { if (f === true) mask += Math.pow(2, i); });
      if (mask && parts.length < MAX_MISSIONS) parts.push(JSON.stringify(id) + ":" + mask);
    });
    var text = "{" + parts.join(",") + "}";
    var body = btoa(text).replace(/\+/g, "-").replace(/\//g, "_").replace(/=+$/, "");
    return CODE_PREFIX + body + "." + fnv1a(text);
  }

  function shown(text) { return JSON.stringify(text.length <= 24 ? text : text.slice(0, 23) + "\u2026"); }
  function grouped(n) { return String(n).replace(/\B(?=(\d{3})+(?!\d))/g, ","); }
  function trimmed(text) {  // what progress_code._TRIM strips (trim() strips another set)
    var WS = " \t\n\r\f\v\u00a0\u200b\u2028\u2029\u3000\ufeff";
    var a = 0, b = text.length;
    while (a < b && WS.indexOf(text.charAt(a)) >= 0) a++;
    while (b > a && WS.indexOf(text.charAt(b - 1)) >= 0) b--;
    return text.slice(a, b);
  }

  // The content's grammar, as progress_code._members: [[raw id, raw mask], ...] or {error}.
  var SPACE = /[ \t\n\r]*/y, STRING = /"(?:[^"\\]|\\[\s\S])*"/y, TOKEN = /[^,} \t\n\r]+/y;
  function at(re, text, pos) { re.lastIndex = pos; var m = re.exec(text); return m ? { text: m[0], end: re.lastIndex } : null; }
  function skip(text, pos) { return at(SPACE, text, pos).end; }
  function members(text) {
    var P = "progress code: ";
    var unreadable = { error: P + "malformed: its content is not readable" };
    var pos = skip(text, 0);
    if (text.charAt(pos) !== "{") return { error: P + "malformed: expected {mission id: star mask}" };
    pos = skip(text, pos + 1);
    var out = [];
    if (text.charAt(pos) === "}") pos += 1;
    else {
      for (;;) {
        var key = at(STRING, text, pos);
        if (!key) return unreadable;
        pos = skip(text, key.end);
        if (text.charAt(pos) !== ":") return unreadable;
        pos = skip(text, pos + 1);
        var c = text.charAt(pos);
        if (c === "[" || c === "{") {
          return { error: P + "mission id " + shown(key.text.slice(1, -1)) + ": a star mask is a whole number, not a nested list or object" };
        }
        var value = at(STRING, text, pos) || at(TOKEN, text, pos);
        if (!value) return unreadable;
        out.push([key.text.slice(1, -1), value.text]);
        pos = skip(text, value.end);
        if (text.charAt(pos) === ",") { pos = skip(text, pos + 1); continue; }
        if (text.charAt(pos) === "}") { pos += 1; break; }
        return unreadable;
      }
    }
    if (skip(text, pos) !== text.length) return unreadable;
    return { members: out };
  }

  // {ok: true, stars} or {ok: false, error}: the error says what is wrong (plain text: show it with textContent).
  function decodeCode(code) {
    var P = "progress code: ";
    if (typeof code !== "string") return { ok: false, error: P + "expected text starting with STF1-" };
    if (code.length > MAX_CODE) {
      return { ok: false, error: P + grouped(code.length) + " characters is far too long for a progress code (at most " + grouped(MAX_CODE) + ")" };
    }
    code = trimmed(code);
    if (!code) return { ok: false, error: P + "empty: paste a code starting with STF1-" };
    var version = /^STF([0-9]{1,4})-/.exec(code);
    if (version && code.slice(0, 5) !== CODE_PREFIX) {
      return { ok: false, error: P + "unknown version STF" + version[1] + " (this lab reads STF1 codes)" };
    }
    if (code.slice(0, 5) !== CODE_PREFIX) {
      return { ok: false, error: P + shown(code) + " is not a progress code: expected text starting with STF1-" };
    }
    var rest = code.slice(5);
    var dot = rest.lastIndexOf(".");
    var body = dot < 0 ? "" : rest.slice(0, dot);
    var check = dot < 0 ? "" : rest.slice(dot + 1);
    if (dot < 0 || !/^[A-Za-z0-9_-]*$/.test(body) || !/^[0-9a-f]{8}$/.test(check) || body.length % 4 === 1) {
      return { ok: false, error: P + shown(code) + " is malformed: expected STF1-<letters>.<8 hex digits>" };
    }
    var text;
    try {
      text = atob(body.replace(/-/g, "+").replace(/_/g, "/"));
    } catch (e) {
      return { ok: false, error: P + shown(code) + " is malformed: its letters do not decode" };
    }
    if (/[^\x00-\x7f]/.test(text)) return { ok: false, error: P + shown(code) + " is malformed: its letters do not decode" };
    if (fnv1a(text) !== check) return { ok: false, error: P + "wrong checksum: the code was changed or cut; copy it again in full" };
    var parsed = members(text);
    if (parsed.error) return { ok: false, error: parsed.error };
    var list = parsed.members;
    if (list.length > MAX_MISSIONS) return { ok: false, error: P + grouped(list.length) + " missions; at most " + MAX_MISSIONS };
    var stars = dict();
    var seen = dict();
    for (var i = 0; i < list.length; i++) {
      var id = list[i][0];
      var raw = list[i][1];
      if (!ID.test(id)) return { ok: false, error: P + "mission id " + shown(id) + " is not a plain id (lowercase letters, digits, -)" };
      if (seen[id]) return { ok: false, error: P + "mission id " + shown(id) + " appears twice" };
      seen[id] = true;
      if (!/^(?:0|[1-9][0-9]{0,4})$/.test(raw) || Number(raw) >= 65536) {
        return { ok: false, error: P + id + ": star mask " + shown(raw) + " is not a whole number 0..65535 in digits" };
      }
      var mask = Number(raw);
      if (!mask) continue;
      var flags = [];
      for (var b = 0; mask >> b; b++) flags.push(((mask >> b) & 1) === 1);
      stars[id] = flags;
    }
    return { ok: true, stars: stars };
  }

  // Paste a code: OR its stars into storage. {ok, added, error}: a bad code changes nothing.
  function importCode(code) {
    var result = decodeCode(code);
    if (!result.ok) return { ok: false, added: 0, error: result.error };
    var before = read().stars;
    var added = 0;
    Object.keys(result.stars).forEach(function (id) {
      var have = own(before, id) ? before[id] : [];
      result.stars[id].forEach(function (f, i) { if (f && have[i] !== true) added++; });
      earn(id, result.stars[id]);
    });
    return { ok: true, added: added, error: "" };
  }

  // "Open the full lab" carries the embed's stars as #progress=CODE: merge them, then take
  // the fragment out of the address (a reload or a shared link must not carry it on).
  // null when the address has none, else importCode's answer.
  function takeFragment() {
    var hash;
    try { hash = window.location.hash || ""; } catch (e) { return null; }
    var m = /^#(?:.*&)?progress=([^&]*)/.exec(hash);
    if (!m) return null;
    var code;
    try { code = decodeURIComponent(m[1]); } catch (e) { code = m[1]; }
    var result = importCode(code);
    try {
      var rest = hash.slice(1).split("&").filter(function (p) { return p.indexOf("progress=") !== 0; }).join("&");
      window.history.replaceState(window.history.state, "", window.location.pathname + window.location.search + (rest ? "#" + rest : ""));
    } catch (e) { /* sandboxed: the fragment stays, and merging it again adds nothing */ }
    return result;
  }

  // A cross-site embed granted storage access (document.requestStorageAccess({localStorage: true})):
  // use that storage from now on, and write what lived in memory into it.
  function adopt(store) {
    if (!store || typeof store.getItem !== "function") return read();
    granted = store;
    var keep = memory;
    memory = null;
    remember();
    if (keep) Object.keys(keep).forEach(function (id) { earn(id, keep[id]); });
    return read();
  }

  return { KEY: KEY, BACKUP: BACKUP, ID: ID, MAX_STARS: MAX_STARS, read: read, earn: earn, reset: reset,
           clean: clean, backups: backups, clearBackups: clearBackups, own: own, encodeCode: encodeCode,
           decodeCode: decodeCode, importCode: importCode, takeFragment: takeFragment, adopt: adopt };
})();
if (typeof window !== "undefined") window.STFStars = STFStars;

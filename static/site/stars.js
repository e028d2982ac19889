// Split the Fleet: earned stars in localStorage, for the static hub (index.html).
//
// The same contract as the lab's StarsBridge (lab/ui/stars_bridge.py) and `lab serve`:
//
//   split-the-fleet:stars:v1 = {"version": 1, "stars": {"mission-id": [true, false, true]}}
//
// Stars are only ever added (OR-ed); reset is the one way to clear them. Unreadable
// data is never trusted and never thrown away: the raw text is copied to
// "split-the-fleet:stars:v1:backup" first and only the unreadable parts are dropped,
// so a mangled entry for one mission does not cost another mission's stars. When
// storage is blocked (private mode, some iframes) stars live in memory for the visit.
(function () {
  "use strict";

  var KEY = "split-the-fleet:stars:v1";
  var BACKUP = KEY + ":backup";
  var ID = /^[a-z0-9]+(?:-[a-z0-9]+)*$/;
  var MAX_STARS = 16;
  var memory = null;

  function storage() {
    try {
      var s = window.localStorage;
      var probe = KEY + ":probe";
      s.setItem(probe, "1");
      s.removeItem(probe);
      return s;
    } catch (e) {
      return null;
    }
  }

  // {stars, dropped}: the readable part of parsed JSON, and whether anything was not.
  function clean(data) {
    var stars = {};
    var dropped = false;
    if (!data || typeof data !== "object" || Array.isArray(data)) return { stars: stars, dropped: true };
    var src = data.stars;
    if (!src || typeof src !== "object" || Array.isArray(src)) return { stars: stars, dropped: true };
    if (data.version !== 1) dropped = true;
    Object.keys(src).forEach(function (id) {
      var value = src[id];
      if (!ID.test(id) || !Array.isArray(value)) { dropped = true; return; }
      if (value.length > MAX_STARS || value.some(function (v) { return typeof v !== "boolean"; })) dropped = true;
      stars[id] = value.slice(0, MAX_STARS).map(function (v) { return v === true; });
    });
    return { stars: stars, dropped: dropped };
  }

  function backup(s, raw) {
    try { s.setItem(BACKUP, raw); } catch (e) { /* full or blocked: keep going */ }
  }

  function write(stars) {
    var s = storage();
    if (!s) { memory = stars; return false; }
    try {
      s.setItem(KEY, JSON.stringify({ version: 1, stars: stars }));
      return true;
    } catch (e) {
      memory = stars;
      return false;
    }
  }

  // {stars, status}: status "ok", "recovered" (unreadable parts set aside) or "unavailable".
  function read() {
    var s = storage();
    if (!s) return { stars: memory || {}, status: "unavailable" };
    var raw;
    try { raw = s.getItem(KEY); } catch (e) { return { stars: memory || {}, status: "unavailable" }; }
    if (raw === null) return { stars: {}, status: "ok" };
    var parsed;
    try {
      parsed = JSON.parse(raw);
    } catch (e) {
      backup(s, raw);
      write({});
      return { stars: {}, status: "recovered" };
    }
    var result = clean(parsed);
    if (result.dropped) {
      backup(s, raw);
      write(result.stars);
      return { stars: result.stars, status: "recovered" };
    }
    return { stars: result.stars, status: "ok" };
  }

  function earn(id, list) {
    if (typeof id !== "string" || !ID.test(id) || !Array.isArray(list)) return read();
    var current = read();
    var before = current.stars[id] || [];
    var n = Math.min(Math.max(before.length, list.length), MAX_STARS);
    var merged = [];
    for (var i = 0; i < n; i++) merged.push(before[i] === true || list[i] === true);
    current.stars[id] = merged;
    write(current.stars);
    return read();
  }

  function reset() {
    var s = storage();
    memory = null;
    if (s) {
      try {
        var raw = s.getItem(KEY);
        if (raw !== null) s.setItem(BACKUP, raw);
        s.removeItem(KEY);
      } catch (e) { /* blocked */ }
    }
    return read();
  }

  window.STFStars = { KEY: KEY, BACKUP: BACKUP, read: read, earn: earn, reset: reset, clean: clean };
})();

// Split the Fleet: the mission hub (index.html). Plain script: works from file:// too.
// Missions come from the JSON build.py writes into the page; stars from localStorage
// (assets/stars.js, the lab's own storage logic: the same key and format the lab writes).
//
// Mission text (titles, summaries, star labels) is written by whoever wrote a mission
// file, so it only ever reaches the page as text: the DOM is built with textContent and
// attributes, never innerHTML.
(function () {
  "use strict";

  var data = { missions: [] };
  var problem = "";
  try {
    data = JSON.parse(document.getElementById("stf-missions-data").textContent);
  } catch (e) {
    problem = "The mission list of this page is damaged; rebuild the site.";
  }
  var missions = data && Array.isArray(data.missions) ? data.missions : [];
  var armed = false;
  var armTimer = null;
  var clearArmed = false;
  // What the storage's status means for the student: the words of lab/ui/stars/stars_bridge.py STORAGE_NOTES (a test holds them equal).
  var STORAGE_NOTES = {
    recovered: "Some saved stars could not be read; they were set aside (backed up in this browser) and the readable ones kept.",
    unavailable: "This browser does not let the page store data, so stars last only for this visit: \"Copy my progress\" keeps them.",
    full: "This browser's storage for this site is full, so stars earned now are not saved: they last while this tab is open. \"Copy my progress\" keeps them as a code to paste later; or free space (\"Clear backups\" on the missions page, or this site's data in the browser's settings) and they are saved on the next page."
  };

  function $(id) { return document.getElementById(id); }
  function text(value) { return value === undefined || value === null ? "" : String(value); }
  // `?embed=1`: the hub in a blog's iframe (a series page), compact; its missions open in the
  // frame as embeds, so the lab and the hub share the blog's storage partition.
  var EMBED = /^(1|true|yes)$/i.test(new URLSearchParams(window.location.search).get("embed") || "");
  function labHref(id) { return "lab.html?mission=" + encodeURIComponent(text(id)) + (EMBED ? "&embed=1" : ""); }
  function own(obj, key) { return Object.prototype.hasOwnProperty.call(obj, key); }

  // el("span", {class: "x", "data-n": 1}, child, "text", ...): children are nodes or text.
  function el(tag, attrs) {
    var node = document.createElement(tag);
    Object.keys(attrs || {}).forEach(function (name) { node.setAttribute(name, text(attrs[name])); });
    for (var i = 2; i < arguments.length; i++) {
      var child = arguments[i];
      if (child === null || child === undefined) continue;
      node.appendChild(typeof child === "object" ? child : document.createTextNode(text(child)));
    }
    return node;
  }

  function clear(node) { while (node.firstChild) node.removeChild(node.firstChild); }

  function starGlyphs(saved, total) {
    var box = el("span", { "class": "stars" });
    var got = 0;
    for (var i = 0; i < total; i++) {
      var on = saved[i] === true;
      if (on) got++;
      box.appendChild(el("span", { "class": on ? "on" : "" }, on ? "★" : "☆"));
    }
    box.setAttribute("aria-label", got + " of " + total + " stars earned");
    box.appendChild(el("small", null, got + "/" + total));
    return { got: got, node: box };
  }

  function missionCard(m, i, stars) {
    var labels = Array.isArray(m.stars) ? m.stars : [];
    var saved = own(stars, m.id) && Array.isArray(stars[m.id]) ? stars[m.id] : [];
    var g = starGlyphs(saved, labels.length);
    var tip = labels.map(function (label, j) { return (saved[j] === true ? "★ " : "☆ ") + text(label); }).join("\n");
    var link = el("a", { "class": "stf-mission", href: labHref(m.id), "data-mission": text(m.id), "data-stars": g.got, title: tip },
      el("span", { "class": "num" }, "Mission " + (Number.isInteger(m.order) ? m.order : i + 1)),  // by its order, as `lab serve`'s hub
      el("span", { "class": "name" }, m.title),
      el("span", { "class": "one" }, m.summary || ""),
      g.node);
    return { got: g.got, total: labels.length, node: el("li", null, link) };
  }

  function render() {
    var state = window.STFStars ? window.STFStars.read() : { stars: Object.create(null), status: "unavailable" };
    var list = $("stf-missions");
    clear(list);
    var earned = 0;
    var total = 0;
    missions.forEach(function (m, i) {
      if (!m || typeof m !== "object") return;
      var card = missionCard(m, i, state.stars);
      earned += card.got;
      total += card.total;
      list.appendChild(card.node);
    });
    list.appendChild(el("li", null, el("a", { "class": "stf-mission sandbox", href: labHref("sandbox"), "data-mission": "sandbox" },
      el("span", { "class": "num" }, "Free play"), el("span", { "class": "name" }, "Sandbox"),
      el("span", { "class": "one" }, "Every control open, no stars: try anything."))));
    list.setAttribute("data-loaded", "true");
    var totalBox = $("stf-total");
    clear(totalBox);
    totalBox.appendChild(el("span", { "class": "stf-total", "data-earned": earned, "data-total": total },
      "★ " + earned + " of " + total + " stars earned in this browser"));

    var notes = [];
    if (problem) notes.push(problem);
    if (own(STORAGE_NOTES, state.status)) notes.push(STORAGE_NOTES[state.status]);
    var note = $("stf-note");
    clear(note);
    if (notes.length) note.appendChild(el("ul", null));
    notes.forEach(function (n) { note.firstChild.appendChild(el("li", null, n)); });
    note.hidden = !notes.length;
    note.setAttribute("data-status", state.status);
    renderBackups();
    refreshFullLink();
  }

  // The backups of old stars (recoveries, resets): listed, and cleared on a second click.
  function renderBackups() {
    var keys = window.STFStars ? window.STFStars.backups() : [];
    var box = $("stf-backups");
    if (!box) return;
    var label = $("stf-backups-text");
    label.textContent = keys.length ? (keys.length === 1 ? "1 backup" : keys.length + " backups") +
      " of earlier stars kept in this browser: " + keys.join(", ") + "." : "";
    box.setAttribute("data-backups", keys.length);
    box.hidden = !keys.length;
  }

  function disarm() {
    armed = false;
    if (armTimer) clearTimeout(armTimer);
    var button = $("stf-reset");
    button.textContent = "Reset progress";
    button.classList.remove("armed");
    button.setAttribute("aria-pressed", "false");
  }

  function onReset() {
    var button = $("stf-reset");
    if (!armed) {
      armed = true;
      button.textContent = "Click again to forget all stars";
      button.classList.add("armed");
      button.setAttribute("aria-pressed", "true");
      armTimer = setTimeout(disarm, 6000);
      return;
    }
    disarm();
    var result = window.STFStars ? window.STFStars.reset() : { reset: false };
    render();
    $("stf-reset-status").textContent = result.reset
      ? "Progress reset. (The old stars are kept aside in this browser, under " + window.STFStars.BACKUP + ".)"
      : "Not reset: this browser's storage is too full to keep a backup of the old stars.";
  }

  function onClearBackups() {
    var button = $("stf-clear-backups");
    if (!clearArmed) {
      clearArmed = true;
      button.textContent = "Click again to delete the backups";
      button.setAttribute("aria-pressed", "true");
      return;
    }
    clearArmed = false;
    button.textContent = "Clear backups";
    button.setAttribute("aria-pressed", "false");
    var n = window.STFStars ? window.STFStars.clearBackups() : 0;
    $("stf-reset-status").textContent = n === 1 ? "1 backup deleted." : n + " backups deleted.";
    renderBackups();
  }

  // ---- progress codes (stars_store.js): copy, paste, the full-lab link and storage access
  function embedded() {
    try { return window.top !== window; } catch (e) { return true; }
  }

  function say(message) { $("stf-progress-status").textContent = message; }  // text only: a pasted code is hostile

  function progressCode() { return window.STFStars ? window.STFStars.encodeCode(window.STFStars.read().stars) : ""; }

  function refreshFullLink() {
    var link = $("stf-open-full");
    if (!link) return;
    link.hidden = !embedded();
    link.setAttribute("href", "./index.html#progress=" + encodeURIComponent(progressCode()));
  }

  function onCopy() {
    refreshFullLink();
    var code = progressCode();
    var box = $("stf-progress-code");
    box.value = code;
    box.hidden = false;
    box.select();
    var done = function () { say("Progress code copied: paste it with \"Paste progress\" in any other browser or site."); };
    var shown = function () { say("Your progress code is selected above: copy it (Ctrl+C) and keep it."); };
    try {
      var policy = document.permissionsPolicy || document.featurePolicy;  // a cross-site iframe may not write it
      var allowed = !policy || typeof policy.allowsFeature !== "function" || policy.allowsFeature("clipboard-write");
      if (allowed && navigator.clipboard && navigator.clipboard.writeText) navigator.clipboard.writeText(code).then(done, shown);
      else shown();
    } catch (e) { shown(); }
  }

  function reportImport(result, from) {
    if (!result) return;
    if (!result.ok) { say("Nothing changed: " + result.error + "."); return; }
    say(result.added === 1 ? "1 star added " + from + "." : result.added + " stars added " + from + ".");
    render();
  }

  function onPaste() {
    var input = $("stf-paste-input");
    reportImport(window.STFStars ? window.STFStars.importCode(input.value) : null, "from the code");
    if (window.STFStars && window.STFStars.decodeCode(input.value).ok) input.value = "";
  }

  // Storage Access API: in a cross-site iframe the browser may keep no storage at all
  // (Chromium's default); asking needs a click, so only the button asks.
  function setUpStorageAccess() {
    var button = $("stf-storage-access");
    if (!button || !embedded() || typeof document.hasStorageAccess !== "function") return;
    document.hasStorageAccess().then(function (has) {
      var state = window.STFStars ? window.STFStars.read() : { status: "ok" };
      button.hidden = has && state.status !== "unavailable";
    }, function () {});
    button.addEventListener("click", function () {
      document.requestStorageAccess({ localStorage: true }).then(function (handle) {
        if (handle && handle.localStorage && window.STFStars) window.STFStars.adopt(handle.localStorage);
        button.hidden = true;
        say("This browser now keeps your stars for this embed.");
        render();
      }, function () {
        say("The browser did not allow it: stars here last for this visit. Use \"Copy my progress\" or \"Open the full lab\" to keep them.");
      });
    });
  }

  function start() {
    if (EMBED) document.body.classList.add("stf-hub-embed");
    if (window.location.protocol === "file:") $("stf-file-note").hidden = false;
    var carried = window.STFStars ? window.STFStars.takeFragment() : null;
    render();
    reportImport(carried, "from the embed's link");
    $("stf-copy-progress").addEventListener("click", onCopy);
    // The link carries the stars of the moment it is followed (a lab in another tab may have added some).
    ["mousedown", "focus", "click"].forEach(function (type) { $("stf-open-full").addEventListener(type, refreshFullLink); });
    $("stf-paste-progress").addEventListener("click", onPaste);
    $("stf-paste-input").addEventListener("keydown", function (e) { if (e.key === "Enter") onPaste(); });
    setUpStorageAccess();
    $("stf-reset").addEventListener("click", onReset);
    $("stf-reset").addEventListener("blur", function () { if (armed) disarm(); });
    var clearButton = $("stf-clear-backups");
    if (clearButton) {
      clearButton.addEventListener("click", onClearBackups);
      clearButton.addEventListener("blur", function () {
        clearArmed = false;
        clearButton.textContent = "Clear backups";
        clearButton.setAttribute("aria-pressed", "false");
      });
    }
    window.addEventListener("keydown", function (e) { if (e.key === "Escape" && armed) disarm(); });
    // Stars earned in the lab in another tab show up here at once.
    window.addEventListener("storage", function (e) {
      if (e.key === null || (window.STFStars && e.key.indexOf(window.STFStars.KEY) === 0)) render();
    });
    // ...and stars a lab embed beside this one posted (stars_store.js: tellSiblings).
    window.addEventListener("stf-stars-changed", render);
    // Coming back with the browser's Back button: the page may come from the bfcache.
    window.addEventListener("pageshow", function (e) { if (e.persisted) render(); });
    if ("serviceWorker" in navigator && /^https?:$/.test(window.location.protocol)) {
      try { navigator.serviceWorker.register("./sw.js", { scope: "./" }).catch(function () {}); } catch (e) { /* blocked */ }
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start, { once: true });
  else start();
})();

// Split the Fleet: the mission hub (index.html). Plain script: works from file:// too.
// Missions come from the JSON build.py writes into the page; stars from localStorage
// (assets/stars.js, the same key and format the lab page writes).
(function () {
  "use strict";

  var data = { missions: [] };
  var problem = "";
  try {
    data = JSON.parse(document.getElementById("stf-missions-data").textContent);
  } catch (e) {
    problem = "The mission list of this page is damaged; rebuild the site.";
  }
  var missions = Array.isArray(data.missions) ? data.missions : [];
  var armed = false;
  var armTimer = null;

  function $(id) { return document.getElementById(id); }
  function escapeHtml(text) {
    return String(text).replace(/[&<>"']/g, function (c) {
      return { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" }[c];
    });
  }
  function labHref(id) { return "lab.html?mission=" + encodeURIComponent(id); }

  function starGlyphs(saved, total) {
    var got = 0;
    var out = "";
    for (var i = 0; i < total; i++) {
      var on = saved[i] === true;
      if (on) got++;
      out += '<span class="' + (on ? "on" : "") + '">' + (on ? "★" : "☆") + "</span>";
    }
    return { got: got, html: out };
  }

  function render() {
    var state = window.STFStars ? window.STFStars.read() : { stars: {}, status: "unavailable" };
    var items = [];
    var earned = 0;
    var total = 0;
    missions.forEach(function (m, i) {
      var labels = Array.isArray(m.stars) ? m.stars : [];
      var saved = Array.isArray(state.stars[m.id]) ? state.stars[m.id] : [];
      var g = starGlyphs(saved, labels.length);
      earned += g.got;
      total += labels.length;
      var tip = labels.map(function (label, j) { return (saved[j] === true ? "★ " : "☆ ") + label; }).join("\n");
      items.push(
        '<li><a class="stf-mission" href="' + escapeHtml(labHref(m.id)) + '" data-mission="' + escapeHtml(m.id) +
        '" data-stars="' + g.got + '" title="' + escapeHtml(tip) + '">' +
        '<span class="num">Mission ' + (i + 1) + "</span>" +
        '<span class="name">' + escapeHtml(m.title) + "</span>" +
        '<span class="one">' + escapeHtml(m.summary || "") + "</span>" +
        '<span class="stars" aria-label="' + g.got + " of " + labels.length + ' stars earned">' + g.html +
        "<small>" + g.got + "/" + labels.length + "</small></span></a></li>"
      );
    });
    items.push(
      '<li><a class="stf-mission sandbox" href="' + labHref("sandbox") + '" data-mission="sandbox">' +
      '<span class="num">Free play</span><span class="name">Sandbox</span>' +
      '<span class="one">Every control open, no stars: try anything.</span></a></li>'
    );
    var list = $("stf-missions");
    list.innerHTML = items.join("");
    list.setAttribute("data-loaded", "true");
    $("stf-total").innerHTML = '<span class="stf-total" data-earned="' + earned + '" data-total="' + total + '">★ ' +
      earned + " of " + total + " stars earned in this browser</span>";

    var notes = [];
    if (problem) notes.push(escapeHtml(problem));
    if (state.status === "recovered") {
      notes.push("Some saved stars could not be read; they were set aside (backed up in this browser) and the readable ones kept.");
    } else if (state.status === "unavailable") {
      notes.push("This browser does not let the page store data, so stars last only for this visit.");
    }
    var note = $("stf-note");
    note.innerHTML = notes.length ? "<ul>" + notes.map(function (n) { return "<li>" + n + "</li>"; }).join("") + "</ul>" : "";
    note.hidden = !notes.length;
    note.setAttribute("data-status", state.status);
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
    if (window.STFStars) window.STFStars.reset();
    render();
    var status = $("stf-reset-status");
    status.textContent = "Progress reset. (The old stars are kept aside in this browser, under " + window.STFStars.BACKUP + ".)";
  }

  function start() {
    if (window.location.protocol === "file:") $("stf-file-note").hidden = false;
    render();
    $("stf-reset").addEventListener("click", onReset);
    $("stf-reset").addEventListener("blur", function () { if (armed) disarm(); });
    window.addEventListener("keydown", function (e) { if (e.key === "Escape" && armed) disarm(); });
    // Stars earned in the lab in another tab show up here at once.
    window.addEventListener("storage", function (e) {
      if (e.key === null || (window.STFStars && e.key === window.STFStars.KEY)) render();
    });
    // Coming back with the browser's Back button: the page may come from the bfcache.
    window.addEventListener("pageshow", function (e) { if (e.persisted) render(); });
    if ("serviceWorker" in navigator && /^https?:$/.test(window.location.protocol)) {
      try { navigator.serviceWorker.register("./sw.js", { scope: "./" }).catch(function () {}); } catch (e) { /* blocked */ }
    }
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start, { once: true });
  else start();
})();

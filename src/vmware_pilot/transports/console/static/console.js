// Live updates: a page with data-events follows that server-sent event stream; when what it
// watches changed (data-watch names the fields compared), it fetches itself again and replaces
// only the parts (data-live) whose content changed, and says what changed in the polite live
// region, without moving focus or reloading. A part holding the focus or text the person is
// typing is left alone: the live region says it changed instead.
// A countdown (time[data-expires]) counts down the time left; at zero the page updates its parts.
(function () {
  "use strict";
  var body = document.body;
  var live = document.getElementById("live");

  function say(text) { if (live) { live.textContent = text; } }

  function busy(part) {
    if (part.contains(document.activeElement) && document.activeElement !== document.body) { return true; }
    var fields = part.querySelectorAll("textarea, input[type=text], input[type=search]");
    for (var i = 0; i < fields.length; i++) { if (fields[i].value) { return true; } }
    return false;
  }

  var updating = false;
  function update(why) {
    if (updating) { return; }
    updating = true;
    fetch(window.location.href, { credentials: "same-origin", headers: { "Accept": "text/html" } })
      .then(function (response) {
        if (response.redirected && response.url.indexOf(window.location.pathname) === -1) {
          // The page no longer applies as it is (a gate that was decided leads to its workflow).
          say("This gate was decided or ended. Open the workflow page to see what happened: " + response.url);
          return null;
        }
        return response.ok ? response.text() : null;
      })
      .then(function (html) {
        updating = false;
        if (!html) { return; }
        var fresh = new DOMParser().parseFromString(html, "text/html");
        var changed = [];
        var held = [];
        fresh.querySelectorAll("[data-live]").forEach(function (part) {
          var now = document.getElementById(part.id);
          if (!now || now.innerHTML === part.innerHTML) { return; }
          if (busy(now)) { held.push(now.dataset.liveLabel || part.id); return; }
          now.innerHTML = part.innerHTML;
          changed.push(now.dataset.liveLabel || part.id);
        });
        var state = fresh.body.dataset;
        ["state", "digest", "version", "approvals"].forEach(function (k) {
          if (state[k] !== undefined) { body.dataset[k] = state[k]; }
        });
        startCountdown();
        var words = [];
        if (changed.length) { words.push("Updated: " + changed.join(", ") + (why ? " (" + why + ")" : "") + "."); }
        if (held.length) { words.push("Also changed: " + held.join(", ") + "; reload the page to see it (your typing is kept until then)."); }
        if (words.length) { say(words.join(" ")); }
      })
      .catch(function () { updating = false; });
  }

  // The countdown of a gate's time left, in the page's words ("3 h 12 min left").
  var ticking = null;
  function leftText(seconds) {
    if (seconds <= 0) { return "expired"; }
    var minutes = Math.floor(seconds / 60), hours = Math.floor(minutes / 60), days = Math.floor(hours / 24);
    if (days) { return days + " d " + (hours % 24) + " h left"; }
    if (hours) { return hours + " h " + (minutes % 60) + " min left"; }
    return minutes ? minutes + " min left" : seconds + " s left";
  }
  function startCountdown() {
    var clock = document.querySelector("time[data-expires]");
    if (ticking) { clearInterval(ticking); ticking = null; }
    if (!clock) { return; }
    var expires = Date.parse(clock.dataset.expires);
    var skew = Date.parse(clock.dataset.now) - Date.now(); // the server's clock decides
    if (isNaN(expires) || isNaN(skew)) { return; }
    function tick() {
      var seconds = Math.floor((expires - (Date.now() + skew)) / 1000);
      var text = leftText(seconds);
      if (clock.textContent !== text) { clock.textContent = text; }
      if (seconds <= 0) { clearInterval(ticking); ticking = null; update("the gate expired"); }
    }
    tick();
    ticking = setInterval(tick, 1000);
  }
  startCountdown();

  var url = body.dataset.events;
  if (!url || !window.EventSource) { return; }
  var watch = (body.dataset.watch || "version").split(" ");
  var source = new EventSource(url);
  // A submitted form is navigating away: an update now could race its answer.
  document.addEventListener("submit", function () { source.close(); }, true);
  source.addEventListener("changed", function (event) {
    var now = JSON.parse(event.data);
    var stale = watch.some(function (k) { return now[k] !== undefined && body.dataset[k] !== undefined && String(body.dataset[k]) !== String(now[k]); });
    watch.forEach(function (k) { if (now[k] !== undefined) { body.dataset[k] = String(now[k]); } });
    if (stale) { update(now.state ? "now " + String(now.state).replace(/_/g, " ") : ""); }
  });
  // The session ended (signed out elsewhere, or expired): stop following, and say so.
  source.addEventListener("signed_out", function () {
    source.close();
    say("Your session ended: sign in again to follow this page.");
  });
})();

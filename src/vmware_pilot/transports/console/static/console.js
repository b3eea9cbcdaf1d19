// Live updates: a page with data-events follows that server-sent event stream and reloads when
// what it shows changed (data-watch names the fields compared). A page where the person is
// typing is not reloaded under their hands: a notice says what changed instead.
(function () {
  "use strict";
  var body = document.body;
  var url = body.dataset.events;
  if (!url || !window.EventSource) { return; }
  var watch = (body.dataset.watch || "version").split(" ");
  var live = document.getElementById("live");
  var first = null;
  function typing() {
    var fields = document.querySelectorAll("textarea, input[type=text]");
    for (var i = 0; i < fields.length; i++) { if (fields[i].value) { return true; } }
    return false;
  }
  var source = new EventSource(url);
  // A submitted form is navigating away: a reload now would cancel its answer (an approval's
  // redirect would be lost to a reload of the gate the approval itself just changed).
  document.addEventListener("submit", function () { source.close(); }, true);
  source.addEventListener("changed", function (event) {
    var now = JSON.parse(event.data);
    if (first === null) {
      first = now;
      // The page was rendered before the stream opened: compare with what it shows.
      var stale = watch.some(function (k) { return body.dataset[k] !== undefined && String(body.dataset[k]) !== String(now[k]); });
      if (!stale) { return; }
    } else if (!watch.some(function (k) { return String(first[k]) !== String(now[k]); })) {
      return;
    }
    if (typing()) {
      source.close();
      if (live) { live.textContent = "This workflow changed (now " + now.state + "). Reload the page to see it."; }
      return;
    }
    source.close();
    window.location.reload();
  });
  // The session ended (signed out elsewhere, or expired): stop following, and say so.
  source.addEventListener("signed_out", function () {
    source.close();
    if (live) { live.textContent = "Your session ended: sign in again to follow this page."; }
  });
})();

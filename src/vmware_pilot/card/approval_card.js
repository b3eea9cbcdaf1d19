// The approval card of vmware-pilot (MCP Apps view). It shows the gate a Pilot result names and
// where to decide; it never approves or rejects: the decision is taken in Pilot's console or at a
// terminal. Every text from the result is set with textContent (inventory names are untrusted).
(function () {
  "use strict";
  var host = window.parent;
  var consoleBase = document.body.getAttribute("data-console") || "";
  if (!/^https?:\/\//.test(consoleBase)) consoleBase = ""; // a web address, or none
  var main = document.getElementById("card");
  var nextId = 1;
  var pending = {};
  var hostCaps = {};
  var VERDICT = {
    succeeds: "Predicted to succeed",
    fails: "Predicted to FAIL",
    unknown: "Outcome not known"
  };

  function send(message) {
    host.postMessage(message, "*");
  }

  function request(method, params) {
    var id = nextId++;
    send({ jsonrpc: "2.0", id: id, method: method, params: params });
    return new Promise(function (resolve, reject) {
      pending[id] = { resolve: resolve, reject: reject };
    });
  }

  function el(tag, text, cls) {
    var node = document.createElement(tag);
    if (text !== undefined && text !== null) node.textContent = String(text);
    if (cls) node.className = cls;
    return node;
  }

  function fact(dl, term, value, id) {
    dl.appendChild(el("dt", term));
    var dd = value instanceof Node ? el("dd") : el("dd", value);
    if (value instanceof Node) dd.appendChild(value);
    if (id) dd.id = id;
    dl.appendChild(dd);
    return dd;
  }

  function timeLeft(seconds) {
    if (seconds === null || seconds === undefined) return "no expiry";
    if (seconds <= 0) return "expired";
    var whole = Math.floor(seconds);
    var days = Math.floor(whole / 86400), rest = whole % 86400;
    var hours = Math.floor(rest / 3600); rest = rest % 3600;
    var minutes = Math.floor(rest / 60), secs = rest % 60;
    if (days) return days + " d " + hours + " h left";
    if (hours) return hours + " h " + minutes + " min left";
    if (minutes) return minutes + " min left";
    return secs + " s left";
  }

  function when(stamp) {
    if (!stamp) return "not known";
    return String(stamp).slice(0, 16).replace("T", " ") + " UTC";
  }

  function shown(value) {
    return value === null || value === undefined ? "not known" : String(value);
  }

  function resultOf(params) {
    if (!params) return null;
    var data = params.structuredContent;
    if (data && typeof data === "object") return data;
    var blocks = params.content || [];
    for (var i = 0; i < blocks.length; i++) {
      if (blocks[i] && blocks[i].type === "text") {
        try { return JSON.parse(blocks[i].text); } catch (e) { return null; }
      }
    }
    return null;
  }

  function whereToDecide(workflowId) {
    var p = el("p", null, "decide");
    p.id = "decide";
    if (consoleBase) {
      var url = consoleBase + "/console/workflows/" + encodeURIComponent(workflowId) + "/gate";
      var a = el("a", "Decide in Pilot's console");
      a.id = "console-link";
      a.href = url;
      a.target = "_blank";
      a.rel = "noopener noreferrer";
      a.addEventListener("click", function (event) {
        if (!hostCaps.openLinks) return; // the plain link, where the host lets it open
        event.preventDefault();
        request("ui/open-link", { url: url });
      });
      p.appendChild(a);
      p.appendChild(el("span", " (sign in, see every step, approve or reject there)", "help"));
    } else {
      p.appendChild(el("span", "Decide at a terminal with Pilot: "));
      p.appendChild(el("code", "vmware-pilot approve " + workflowId));
      p.appendChild(el("span", " or "));
      p.appendChild(el("code", "vmware-pilot reject " + workflowId + " --reason '…'"));
    }
    return p;
  }

  function heading(text) {
    main.textContent = "";
    var h = el("h2", text);
    h.id = "title";
    main.appendChild(h);
  }

  function showDecision(d, workflowType) {
    heading("Approval gate: " + (workflowType || d.workflow_id) + " (" + d.workflow_id + ", step " + d.gate + ")");
    main.className = "verdict-" + d.verdict;
    if (d.expired) main.appendChild(el("p", "Expired: this gate can no longer be approved.", "expired"));
    if (d.plan_changed) {
      main.appendChild(el("p", "The steps this gate releases changed after it was reached: it cannot be approved.", "expired"));
    }
    var dl = el("dl");
    var verdict = el("span");
    verdict.appendChild(el("strong", VERDICT[d.verdict] || String(d.verdict), "verdict"));
    if (d.verdict_summary) verdict.appendChild(el("span", " — " + d.verdict_summary));
    fact(dl, "Verdict", verdict, "verdict");
    if (d.rehearsal) fact(dl, "Rehearsal", d.rehearsal, "rehearsal");
    var changes = d.changes || [];
    if (changes.length) {
      var ul = el("ul");
      changes.slice(0, 12).forEach(function (c) {
        var li = el("li");
        li.appendChild(el("strong", c.object));
        li.appendChild(el("span", " " + String(c.field).replace(/_/g, " ") + ": " + shown(c.before) + " → " + shown(c.after) + " "));
        li.appendChild(el("span", "(step " + c.step + ")", "help"));
        ul.appendChild(li);
      });
      if (changes.length > 12) ul.appendChild(el("li", "and " + (changes.length - 12) + " more (in the console)"));
      fact(dl, "Approving changes", ul, "changes");
    } else {
      var objects = d.objects || [];
      fact(dl, "Approving changes", "No change Pilot can predict" + (objects.length ? " for " + objects.join(", ") : ""), "changes");
    }
    fact(dl, "Asked by", (d.requested_by || "not recorded") + (d.requested_via ? " (through " + d.requested_via + ")" : ""), "requester");
    var why = (d.why || "No description given.") + (d.ticket && (d.why || "").indexOf(d.ticket) < 0 ? " · ticket " + d.ticket : "");
    fact(dl, "Why", why, "why");
    if (d.message) fact(dl, "Gate message", d.message, "message");
    var approved = d.approved_by || [];
    fact(dl, "Approvals", (d.approvals_missing ? d.approvals_missing + " more needed" : "none more needed") +
      " (" + approved.length + " of " + d.approvals_required + (approved.length ? ": approved by " + approved.join(", ") : "") + ")", "approvals");
    fact(dl, "Time left", d.expires_at
      ? timeLeft(d.seconds_left) + " (until " + when(d.expires_at) + ", as of " + when(d.at) + ")"
      : "No expiry set: this gate waits until someone decides.", "time-left");
    main.appendChild(dl);
    main.appendChild(whereToDecide(d.workflow_id));
  }

  function showPendingGate(r) {
    var g = r.pending_gate || {};
    heading("Approval gate: " + r.workflow_type + " (" + r.id + ", step " + g.index + ")");
    var dl = el("dl");
    var why = "";
    ["description", "goal", "reason"].forEach(function (key) {
      var v = (r.params || {})[key];
      if (!why && typeof v === "string" && v.trim()) why = v;
    });
    fact(dl, "Verdict", "Asking Pilot for the gate's prediction…", "verdict");
    fact(dl, "Asked by", r.created_by || "not recorded", "requester");
    fact(dl, "Why", why || "No description given.", "why");
    if (g.message) fact(dl, "Gate message", g.message, "message");
    fact(dl, "Time left", g.expires_at ? "until " + when(g.expires_at) : "No expiry set: this gate waits until someone decides.", "time-left");
    main.appendChild(dl);
    main.appendChild(whereToDecide(r.id));
    var verdict = document.getElementById("verdict");
    if (!hostCaps.serverTools) {
      verdict.textContent = "Not shown here: get_workflow_status or the console shows the prediction.";
      return;
    }
    // A read, never a decision: the status of this workflow carries the full decision summary.
    request("tools/call", { name: "get_workflow_status", arguments: { workflow_id: r.id } }).then(function (result) {
      var status = resultOf(result);
      if (status && status.decision) showDecision(status.decision, status.workflow_type);
      else verdict.textContent = "Not shown here: get_workflow_status or the console shows the prediction.";
    }, function () {
      verdict.textContent = "Not shown here: get_workflow_status or the console shows the prediction.";
    });
  }

  function render(params) {
    var r = resultOf(params);
    if (!r) {
      heading("No Pilot result to show");
      return;
    }
    if (r.error) {
      heading("Pilot refused");
      main.appendChild(el("p", r.error, "refused"));
      if (r.hint) main.appendChild(el("p", r.hint, "help"));
      return;
    }
    if (r.decision) {
      showDecision(r.decision, r.workflow_type);
    } else if (r.pending_gate && r.pending_gate.index !== undefined && r.state === "awaiting_approval") {
      showPendingGate(r);
    } else {
      heading("No gate waits");
      main.appendChild(el("p", "Workflow " + (r.id || r.workflow_id || "?") + " is " + (r.state || "not at a gate") + ".", "help"));
    }
    notifySize();
  }

  function notifySize() {
    var box = document.documentElement.getBoundingClientRect();
    send({ jsonrpc: "2.0", method: "ui/notifications/size-changed", params: { width: Math.ceil(box.width), height: Math.ceil(box.height) } });
  }

  function applyContext(context) {
    if (!context) return;
    if (context.theme) document.documentElement.style.colorScheme = context.theme;
    var vars = (context.styles && context.styles.variables) || {};
    Object.keys(vars).forEach(function (name) {
      if (name.indexOf("--") === 0 && typeof vars[name] === "string") document.documentElement.style.setProperty(name, vars[name]);
    });
  }

  window.addEventListener("message", function (event) {
    if (event.source !== host) return;
    var m = event.data;
    if (!m || typeof m !== "object" || m.jsonrpc !== "2.0") return;
    if (m.method === undefined && m.id !== undefined && pending[m.id]) {
      var waiting = pending[m.id];
      delete pending[m.id];
      if (m.error) waiting.reject(m.error); else waiting.resolve(m.result);
    } else if (m.method === "ui/notifications/tool-result") {
      render(m.params);
    } else if (m.method === "ui/notifications/host-context-changed") {
      applyContext(m.params);
    } else if (m.method === "ui/resource-teardown" && m.id !== undefined) {
      send({ jsonrpc: "2.0", id: m.id, result: {} });
    } else if (m.method !== undefined && m.id !== undefined) {
      send({ jsonrpc: "2.0", id: m.id, error: { code: -32601, message: "Method not found" } });
    }
  });

  request("ui/initialize", {
    appInfo: { name: "vmware-pilot-approval-card", version: "1" },
    appCapabilities: {},
    protocolVersion: "2026-01-26"
  }).then(function (result) {
    hostCaps = (result && result.hostCapabilities) || {};
    applyContext(result && result.hostContext);
    send({ jsonrpc: "2.0", method: "ui/notifications/initialized", params: {} });
  });
})();

// The status page's script (/status/status.js, compiled into the server).
//
// Reads v2/status (relative: the same origin, under whatever prefix the page
// has) every few seconds, ?refresh=SECONDS in the page's URL (default 2), and
// renders it with textContent only: every string from the server is shown as
// text and never parsed as markup.
//
// The server gives counts since it started; rates, and p50/p99 over the last
// interval, come from two documents in a row, divided by the server's own
// monotonic time between them (snapshot_ns), as Prometheus's rate() does.
"use strict";

(function () {
  const DEFAULT_REFRESH_S = 2;
  const refreshS = readRefresh();
  let previous = null; // the last document shown

  function readRefresh() {
    const v = Number(new URLSearchParams(location.search).get("refresh") || NaN);
    return Number.isFinite(v) && v >= 0.25 && v <= 3600 ? v : DEFAULT_REFRESH_S;
  }

  function el(tag, text, className) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (className) e.className = className;
    return e;
  }

  function setText(id, text) {
    document.getElementById(id).textContent = text;
  }

  function bytes(n) {
    const units = ["B", "KiB", "MiB", "GiB", "TiB"];
    let i = 0;
    while (n >= 1024 && i < units.length - 1) { n /= 1024; i++; }
    return (i ? n.toFixed(1) : String(n)) + " " + units[i];
  }

  function seconds(s) {
    if (s === null || s === undefined) return "—";
    if (s < 1e-3) return (s * 1e6).toFixed(0) + " µs";
    if (s < 1) return (s * 1e3).toFixed(s < 0.01 ? 2 : 1) + " ms";
    return s.toFixed(2) + " s";
  }

  function rate(now, before, dt) {
    if (before === undefined || !(dt > 0) || now < before) return "—"; // first look, or a restart
    return ((now - before) / dt).toFixed(1);
  }

  // Prometheus's histogram_quantile: the bucket holding the q-th observation,
  // interpolated linearly inside it (from 0 in the first); cumulative counts,
  // the last one +Inf, which answers the highest finite bound.
  function quantile(q, bounds, cumulative) {
    const total = cumulative[cumulative.length - 1];
    if (!(total > 0)) return null;
    const rank = q * total;
    for (let b = 0; b < bounds.length; b++) {
      if (cumulative[b] >= rank) {
        const below = b ? cumulative[b - 1] : 0, lo = b ? bounds[b - 1] : 0;
        return lo + (bounds[b] - lo) * (rank - below) / (cumulative[b] - below);
      }
    }
    return bounds[bounds.length - 1];
  }

  // p50 and p99 over the interval when it had requests, else since the start (greyed).
  function latencyCells(tr, bounds, v, before) {
    const now = v.latency.buckets;
    let p50 = null, p99 = null;
    if (before && before.latency.count < v.latency.count) {
      const delta = now.map((c, i) => c - before.latency.buckets[i]);
      p50 = quantile(0.5, bounds, delta);
      p99 = quantile(0.99, bounds, delta);
    }
    const lifetime = p50 === null;
    for (const s of lifetime ? [v.latency.p50_s, v.latency.p99_s] : [p50, p99]) {
      const td = el("td", seconds(s), "num" + (lifetime && s !== null ? " lifetime" : ""));
      if (lifetime && s !== null) td.title = "since the server started";
      tr.appendChild(td);
    }
  }

  function roleText(model, v) {
    const r = model.rollout;
    if (r && v.role === "canary" && r.canary) {
      return "canary " + r.canary.weight + "%" + (r.canary.stopped ? " (stopped by a gate)" : "");
    }
    if (r && v.role === "shadow" && r.shadow) {
      return "shadow, " + Math.round(r.shadow.sample * 1000) / 10 + "% copied" +
        (r.shadow.stopped ? " (stopped by a gate)" : "");
    }
    return v.role;
  }

  // null: no drift detector; {"score", "threshold", "drifted"} otherwise.
  function driftCell(drift) {
    const td = el("td", null, "drift");
    if (drift === null || drift === undefined) {
      td.textContent = "—";
      return td;
    }
    td.appendChild(el("span", Number(drift.score).toPrecision(3), "drift-score"));
    td.title = "threshold " + drift.threshold;
    if (drift.drifted) {
      const mark = el("span", " ●", "drifted");
      mark.title = "drifted past its threshold " + drift.threshold;
      td.appendChild(mark);
    }
    return td;
  }

  function render(doc) {
    const dt = previous ? (doc.server.snapshot_ns - previous.server.snapshot_ns) / 1e9 : 0;
    const before = new Map();
    for (const m of previous ? previous.models : []) {
      for (const v of m.versions) before.set(m.name + "\u0000" + v.version, v);
    }
    const tbody = el("tbody");
    tbody.id = "rows";
    for (const m of doc.models) {
      m.versions.forEach(function (v, i) {
        const was = before.get(m.name + "\u0000" + v.version);
        const tr = el("tr", null, i ? "" : "first");
        tr.dataset.model = m.name;
        tr.dataset.version = v.version;
        tr.appendChild(el("td", m.name, "model"));
        tr.appendChild(el("td", v.version, "version"));
        const role = roleText(m, v);
        tr.appendChild(el("td", role, "role" + (/stopped/.test(role) ? " stopped" : "")));
        tr.appendChild(el("td", v.state, "state state-" + v.state));
        tr.appendChild(el("td", v.requests, "num requests"));
        tr.appendChild(el("td", rate(v.requests, was && was.requests, dt), "num request-rate"));
        tr.appendChild(el("td", v.errors, "num errors"));
        tr.appendChild(el("td", rate(v.errors, was && was.errors, dt), "num error-rate"));
        latencyCells(tr, doc.latency_bounds_s, v, was);
        tr.appendChild(el("td", v.queue_depth, "num queue"));
        tr.appendChild(el("td", bytes(v.memory_bytes), "num memory"));
        tr.appendChild(driftCell(v.drift));
        tbody.appendChild(tr);
      });
      if (m.reason) {
        const tr = el("tr", null, "reason-row");
        tr.dataset.model = m.name;
        const td = el("td", m.reason, "reason");
        td.colSpan = 13;
        tr.appendChild(td);
        tbody.appendChild(tr);
      }
    }
    document.getElementById("rows").replaceWith(tbody);

    const t = doc.totals, p = previous ? previous.totals : {};
    setText("server-version", doc.server.version);
    setText("t-models", t.models_loaded);
    setText("t-model-memory", bytes(t.model_memory_bytes));
    setText("t-process-memory", bytes(t.process_resident_bytes));
    setText("t-queue", t.queue_depth);
    setText("t-requests", t.requests);
    setText("t-rate", rate(t.requests, p.requests, dt));
    setText("t-error-rate", rate(t.errors, p.errors, dt));
    const stamp = document.getElementById("last-updated");
    stamp.textContent = new Date(doc.server.time_ms).toLocaleTimeString();
    stamp.dateTime = new Date(doc.server.time_ms).toISOString();
    // For tests and scripts: which document the table shows.
    const main = document.getElementById("status");
    main.dataset.timeMs = doc.server.time_ms;
    main.dataset.refreshes = Number(main.dataset.refreshes) + 1;
    previous = doc;
  }

  function showError(message) {
    const banner = document.getElementById("error");
    banner.textContent = "Could not refresh: " + message +
      (previous ? "; the figures below are from the last refresh that worked." : ".");
    banner.hidden = false;
  }

  async function refresh() {
    const controller = new AbortController();
    const timer = setTimeout(function () { controller.abort(); }, Math.max(5000, refreshS * 1000));
    try {
      const r = await fetch("v2/status", { cache: "no-store", signal: controller.signal,
                                           headers: { "Accept": "application/json" } });
      if (!r.ok) throw new Error("the server answered " + r.status);
      render(await r.json());
      document.getElementById("error").hidden = true;
    } catch (e) {
      showError(e.name === "AbortError" ? "no answer in time" : e.message);
    } finally {
      clearTimeout(timer);
      setTimeout(refresh, refreshS * 1000); // after the answer: slow answers never pile up
    }
  }

  setText("refresh", refreshS);
  refresh();
})();

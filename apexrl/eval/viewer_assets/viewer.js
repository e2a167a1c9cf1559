// apexrl eval view: the page's code. It reads the index from #apx-index, draws the
// tables from it, and decodes a trial's transcript (gzip + base64 in #b<row>) only when
// the trial is opened. Every value from the run is put into the page as text.
"use strict";
(function () {
  const IDX = JSON.parse(document.getElementById("apx-index").textContent);
  const RUNS = IDX.runs;
  const MULTI = RUNS.length > 1;
  const C = {};
  IDX.cols.forEach((c, j) => (C[c] = j));
  const ROWS = IDX.rows.map((r, i) => ({
    i,
    run: r[C.run],
    trial: r[C.trial],
    task: r[C.task],
    taskId: r[C.task_id],
    domain: r[C.domain],
    attempt: r[C.attempt],
    status: r[C.status],
    passed: r[C.passed] === 1,
    ungraded: r[C.ungraded] === 1, // an infrastructure error: in no pass rate or score
    score: r[C.score],
    met: r[C.met],
    total: r[C.total],
    ec: r[C.error_class] || "",
    err: r[C.error] || "",
    turns: r[C.turns],
    tin: r[C.tokens_in],
    tout: r[C.tokens_out],
    tools: r[C.tool_calls],
    dur: r[C.duration_s],
  }));
  // what the text filter searches, lowercased once
  for (const r of ROWS) r.hay = `${r.trial}\n${r.taskId}\n${r.domain}\n${r.status}\n${r.ec}\n${r.err}`.toLowerCase();
  const PAGE = IDX.page === 0 ? Infinity : IDX.page || 250;
  const FOLD_CHARS = 1200;
  const FOLD_LINES = 18;

  // --- small helpers -------------------------------------------------------------------
  const $ = (sel, root) => (root || document).querySelector(sel);
  function el(tag, attrs, ...kids) {
    const e = document.createElement(tag);
    for (const [k, v] of Object.entries(attrs || {})) {
      if (v === null || v === undefined || v === false) continue;
      if (k === "text") e.textContent = v;
      else if (k === "cls") e.className = v;
      else if (k.startsWith("on")) e.addEventListener(k.slice(2), v);
      else e.setAttribute(k, v);
    }
    for (const k of kids) if (k !== null && k !== undefined) e.append(k);
    return e;
  }
  const ESC = { "&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#39;" };
  const esc = (s) => String(s).replace(/[&<>"']/g, (c) => ESC[c]);
  const pct = (x) => (100 * x).toFixed(1);
  const num = (x) => Number(x).toLocaleString("en-US");
  const secs = (x) => (x >= 100 ? x.toFixed(0) : x.toFixed(1)) + " s";
  const outcome = (r) => (r.passed ? "pass" : r.status !== "complete" || r.ec ? "error" : "fail");
  const runName = (i) => (MULTI ? String.fromCharCode(65 + (i % 26)) : "");
  function ci(m) {
    return m ? `${pct(m.value)}% [${pct(m.ci_low)}, ${pct(m.ci_high)}]` : "-";
  }

  // --- state ---------------------------------------------------------------------------
  const S = {
    view: "trials",
    q: "",
    run: "",
    domain: "",
    status: "",
    outcome: "",
    task: "",
    sort: { trials: ["task", 1], tasks: ["task", 1], changed: ["delta", -1] },
    shown: PAGE,
    list: [],
  };

  // --- tasks and changes -----------------------------------------------------------------
  // per run: graded attempts n, passes c, summed score, errors, ungraded attempts
  const TASKS = new Map(); // task id -> {taskId, task, domain, per: [{n, c, score, err, ungraded, rows}]}
  for (const r of ROWS) {
    let t = TASKS.get(r.taskId);
    if (!t) {
      t = { taskId: r.taskId, task: r.task, domain: r.domain, per: RUNS.map(() => null) };
      TASKS.set(r.taskId, t);
    }
    const p = t.per[r.run] || (t.per[r.run] = { n: 0, c: 0, score: 0, err: 0, ungraded: 0, rows: [] });
    if (r.ungraded) p.ungraded += 1;
    else {
      p.n += 1;
      p.c += r.passed ? 1 : 0;
      p.score += r.score;
    }
    p.err += outcome(r) === "error" ? 1 : 0;
    p.rows.push(r);
  }
  const graded = (p) => p && p.n > 0;
  const passRate = (p) => (graded(p) ? p.c / p.n : -1);
  const meanScore = (p) => (graded(p) ? p.score / p.n : -1);
  const passedText = (p) => `${p.c}/${p.n}` + (p.ungraded ? ` (+${p.ungraded} ungraded)` : "");
  const scoreText = (p) => (graded(p) ? meanScore(p).toFixed(2) : "-");
  for (const t of TASKS.values()) {
    for (const p of t.per) if (p) p.rows.sort((a, b) => a.attempt - b.attempt);
    const rates = t.per.filter(graded).map(passRate);
    t.nRuns = rates.length;
    t.changed = rates.length > 1 && Math.max(...rates) !== Math.min(...rates);
    const a = t.per[0], b = t.per[1];
    const both = graded(a) && graded(b);
    t.delta = both ? passRate(b) - passRate(a) : 0;
    t.dscore = both ? meanScore(b) - meanScore(a) : 0;
  }
  const CHANGED = [...TASKS.values()].filter((t) => t.changed);

  // --- filtering and sorting ---------------------------------------------------------------
  function rowMatches(r) {
    if (S.run !== "" && r.run !== +S.run) return false;
    if (S.domain && r.domain !== S.domain) return false;
    if (S.status && r.status !== S.status) return false;
    if (S.outcome && outcome(r) !== S.outcome) return false;
    if (S.task && r.taskId !== S.task) return false;
    if (S.q && !r.hay.includes(S.q)) return false;
    return true;
  }
  const TRIAL_KEYS = {
    run: (r) => r.run,
    task: (r) => r.taskKey || (r.taskKey = r.task + "\u0000" + String(r.attempt).padStart(4, "0")),
    attempt: (r) => r.attempt,
    status: (r) => r.status,
    outcome: (r) => outcome(r),
    score: (r) => r.score,
    criteria: (r) => (r.total ? r.met / r.total : -1),
    error: (r) => r.ec + " " + r.err,
    turns: (r) => r.turns,
    tokens: (r) => r.tin + r.tout,
    time: (r) => r.dur,
  };
  function taskKeys() {
    const keys = { task: (t) => t.task, domain: (t) => t.domain, delta: (t) => t.delta };
    RUNS.forEach((_, i) => {
      keys["pass" + i] = (t) => passRate(t.per[i]);
      keys["score" + i] = (t) => meanScore(t.per[i]);
      keys["err" + i] = (t) => (t.per[i] ? t.per[i].err : -1);
    });
    keys.dscore = (t) => t.dscore;
    return keys;
  }
  const TASK_KEYS = taskKeys();
  function sorted(list, keys, [key, dir]) {
    const f = keys[key] || Object.values(keys)[0];
    return list
      .map((x, j) => [f(x), j, x])
      .sort((a, b) => (a[0] < b[0] ? -dir : a[0] > b[0] ? dir : a[1] - b[1]))
      .map((x) => x[2]);
  }
  function currentList() {
    const rows = ROWS.filter(rowMatches);
    if (S.view === "trials") return sorted(rows, TRIAL_KEYS, S.sort.trials);
    const ids = new Set(rows.map((r) => r.taskId));
    const base = S.view === "changed" ? CHANGED : [...TASKS.values()];
    return sorted(base.filter((t) => ids.has(t.taskId)), TASK_KEYS, S.sort[S.view]);
  }

  // --- the page ------------------------------------------------------------------------
  function header() {
    const cards = RUNS.map((run, i) => {
      const s = run.summary || {};
      const c = run.config || {};
      const card = el("section", { cls: "run" });
      card.append(
        el("h2", {}, MULTI ? el("span", { cls: "tag", text: runName(i) }) : null, run.label)
      );
      const infra = Object.entries(s.infra_errors || {}).map(([k, v]) => `${k} ${v}`).join(", ");
      const taskErrs = Object.entries(s.task_errors || {});
      const nTask = taskErrs.reduce((n, [, v]) => n + v, 0);
      const nInfra = (s.trials_ungraded || 0) - nTask;
      const task = taskErrs.map(([k, v]) => `${k} ${v}`).join(", ");
      if (s.complete === false) {
        const planned = s.trials_planned != null ? `: ${s.trials_done} of ${s.trials_planned} planned trials have a result` : "";
        let ungraded = nInfra > 0 ? `; ${nInfra} ended in an infrastructure error (${infra}) and are ungraded` : "";
        if (nTask) ungraded += `; ${nTask} ended in a task error (${task}): the task is broken, they are ungraded`;
        card.append(el("p", { cls: "warn incomplete", text: `INCOMPLETE${planned}${ungraded}; the figures cover the graded trials only. Resume with: ${s.resume}` }));
      }
      if (s.criteria_unjudged) {
        card.append(el("p", { cls: "warn", text: `${s.criteria_unjudged} criteria unjudged (--no-judge): counted as unmet.` }));
      }
      const kv = [
        ["Pass@1", ci(s.pass_at_1)],
        ["mean score", ci(s.mean_score)],
        ["tasks / trials", `${s.n_tasks} / ${s.n_trials}` + (s.attempts ? ` (k = ${s.attempts})` : "")],
        ["model / agent", `${c.model || "-"} / ${c.agent || "-"}`],
        ["judge", c.judge == null ? "deterministic criteria only" : String(c.judge)],
      ];
      const errs = Object.entries(s.errors || {});
      kv.push(["errors", errs.length ? errs.map(([k, v]) => `${k} ${v}`).join(", ") : "none"]);
      kv.push(["infrastructure errors (ungraded)", nInfra > 0 ? `${nInfra}: ${infra}` : "none"]);
      if (nTask) kv.push(["task errors (ungraded)", `${nTask}: ${task}`]);
      const dl = el("dl");
      for (const [k, v] of kv) dl.append(el("dt", { text: k }), el("dd", { text: v }));
      card.append(dl);
      const msgs = s.error_messages;
      if (msgs && typeof msgs === "object" && Object.keys(msgs).length) {
        const det = el("details", { cls: "errmsgs" }, el("summary", { text: "error messages by class" }));
        for (const [cls, items] of Object.entries(msgs)) {
          const list = Array.isArray(items) ? items : Object.entries(items).map(([m, n]) => ({ message: m, count: n }));
          for (const it of list) {
            const m = typeof it === "string" ? it : it.message;
            const n = typeof it === "string" ? "" : ` x${it.count}`;
            det.append(el("div", { text: `${cls}${n}: ${m}` }));
          }
        }
        card.append(det);
      }
      card.append(el("p", { cls: "dir", text: run.dir }));
      return card;
    });
    return el("header", {}, el("h1", { text: "apexrl eval view" }), el("div", { cls: "runs" }, ...cards));
  }

  function controls() {
    const opt = (v, t) => el("option", { value: v, text: t });
    const domains = [...new Set(ROWS.map((r) => r.domain))].filter(Boolean).sort();
    const statuses = [...new Set(ROWS.map((r) => r.status))].sort();
    const tabs = el("nav", { cls: "tabs" });
    const views = [["trials", `Trials (${ROWS.length})`], ["tasks", `Tasks (${TASKS.size})`]];
    if (MULTI) views.push(["changed", `Changed outcome (${CHANGED.length})`]);
    for (const [v, t] of views) tabs.append(el("button", { "data-view": v, text: t, onclick: () => setView(v) }));
    const sel = (id, label, options, onchange) =>
      el("label", {}, label, el("select", { id, onchange }, ...options));
    const bar = el(
      "div",
      { cls: "filters" },
      el("input", {
        id: "q",
        type: "search",
        placeholder: "filter: task, trial, error class or message",
        oninput: (e) => {
          S.q = e.target.value.trim().toLowerCase();
          S.shown = PAGE;
          draw();
        },
      }),
      MULTI
        ? sel("f-run", "run ", [opt("", "all"), ...RUNS.map((r, i) => opt(i, `${runName(i)}: ${r.label}`))], (e) => set("run", e.target.value))
        : null,
      sel("f-domain", "domain ", [opt("", "all"), ...domains.map((d) => opt(d, d))], (e) => set("domain", e.target.value)),
      sel("f-status", "status ", [opt("", "all"), ...statuses.map((d) => opt(d, d))], (e) => set("status", e.target.value)),
      sel("f-outcome", "outcome ", [opt("", "all"), opt("pass", "pass"), opt("fail", "fail"), opt("error", "error / not complete")], (e) => set("outcome", e.target.value)),
      el("span", { id: "taskchip" }),
      el("span", { id: "count" })
    );
    return el("div", { cls: "controls" }, tabs, bar);
  }
  function set(key, value) {
    S[key] = value;
    S.shown = PAGE;
    draw();
  }
  function setView(v) {
    S.view = v;
    S.shown = PAGE;
    draw();
  }

  // --- tables --------------------------------------------------------------------------
  function th(view, key, label, title) {
    const [k, d] = S.sort[view];
    const mark = k === key ? (d > 0 ? " \u25b2" : " \u25bc") : "";
    return `<th data-sort="${key}"${title ? ` title="${esc(title)}"` : ""}>${esc(label)}${mark}</th>`;
  }
  function trialHead() {
    const h = [];
    if (MULTI) h.push(th("trials", "run", "run"));
    h.push(
      th("trials", "task", "task"),
      th("trials", "attempt", "#", "attempt"),
      th("trials", "status", "status"),
      th("trials", "outcome", "outcome"),
      th("trials", "score", "score", "fraction of criteria met; 0 when not complete"),
      th("trials", "criteria", "criteria"),
      th("trials", "error", "error"),
      th("trials", "turns", "turns"),
      th("trials", "tokens", "tokens in / out"),
      th("trials", "time", "time")
    );
    return "<tr>" + h.join("") + "</tr>";
  }
  function trialRow(r) {
    const o = outcome(r);
    const cells = [];
    if (MULTI) cells.push(`<td class="tag-cell"><span class="tag">${runName(r.run)}</span></td>`);
    cells.push(
      `<td class="task" title="${esc(r.taskId)}">${esc(r.task)}</td>`,
      `<td class="n">${r.attempt}</td>`,
      `<td>${esc(r.status)}</td>`,
      `<td><span class="badge ${o}">${o}</span></td>`,
      `<td class="n">${r.score.toFixed(2)}</td>`,
      `<td class="n">${r.met}/${r.total}</td>`,
      `<td class="err" title="${esc(r.err)}">${r.ec ? `<b>${esc(r.ec)}</b> ` : ""}${esc(r.err.length > 160 ? r.err.slice(0, 160) + "\u2026" : r.err)}</td>`,
      `<td class="n">${r.turns}</td>`,
      `<td class="n">${num(r.tin)} / ${num(r.tout)}</td>`,
      `<td class="n">${secs(r.dur)}</td>`
    );
    return `<tr class="trial-row" data-i="${r.i}">${cells.join("")}</tr>`;
  }
  function taskHead(view) {
    const h = [th(view, "task", "task"), th(view, "domain", "domain")];
    RUNS.forEach((_, i) => {
      const p = MULTI ? runName(i) + " " : "";
      h.push(th(view, "pass" + i, p + "passed", "attempts that passed / graded attempts"));
      h.push(th(view, "score" + i, p + "mean score"));
      if (view === "tasks") h.push(th(view, "err" + i, p + "errors", "attempts that did not complete or errored"));
    });
    if (MULTI) {
      h.push(th(view, "delta", "\u0394 pass rate (B - A)"));
      h.push(th(view, "dscore", "\u0394 score (B - A)"));
    }
    return "<tr>" + h.join("") + "</tr>";
  }
  function taskRow(t, view) {
    const cells = [`<td class="task" title="${esc(t.taskId)}">${esc(t.task)}</td>`, `<td>${esc(t.domain)}</td>`];
    t.per.forEach((p) => {
      if (!p) {
        cells.push("<td>-</td><td>-</td>" + (view === "tasks" ? "<td>-</td>" : ""));
        return;
      }
      const cls = !graded(p) ? "mixed" : p.c === p.n ? "pass" : p.c === 0 ? "fail" : "mixed";
      cells.push(`<td class="n"><span class="badge ${cls}">${esc(passedText(p))}</span></td>`);
      cells.push(`<td class="n">${scoreText(p)}</td>`);
      if (view === "tasks") cells.push(`<td class="n">${p.err || ""}</td>`);
    });
    if (MULTI) {
      const d = t.per[0] && t.per[1] ? `${t.delta > 0 ? "+" : ""}${pct(t.delta)} pts` : "-";
      const ds = t.per[0] && t.per[1] ? `${t.dscore > 0 ? "+" : ""}${t.dscore.toFixed(2)}` : "-";
      const cls = t.delta > 0 ? "up" : t.delta < 0 ? "down" : "";
      cells.push(`<td class="n ${cls}">${d}</td>`, `<td class="n">${ds}</td>`);
    }
    return `<tr class="task-row" data-task="${esc(t.taskId)}">${cells.join("")}</tr>`;
  }

  function draw() {
    document.querySelectorAll(".tabs button").forEach((b) => b.classList.toggle("on", b.dataset.view === S.view));
    const list = (S.list = currentList());
    const head = $("#head"), body = $("#rows");
    const total = S.view === "trials" ? ROWS.length : S.view === "tasks" ? TASKS.size : CHANGED.length;
    const shown = list.slice(0, S.shown);
    if (S.view === "trials") {
      head.innerHTML = trialHead();
      body.innerHTML = shown.map(trialRow).join("");
    } else {
      head.innerHTML = taskHead(S.view);
      body.innerHTML = shown.map((t) => taskRow(t, S.view)).join("");
    }
    const what = S.view === "trials" ? "trials" : "tasks";
    $("#count").textContent = `${list.length} of ${total} ${what}`;
    const more = $("#more");
    more.hidden = list.length <= S.shown;
    more.textContent = `show ${Math.min(PAGE, list.length - S.shown)} more (${list.length - S.shown} not shown)`;
    const chip = $("#taskchip");
    chip.textContent = "";
    if (S.task) {
      const t = TASKS.get(S.task);
      chip.append(el("button", { cls: "chip", title: "clear the task filter", text: `task: ${t ? t.task : S.task} \u2715`, onclick: () => set("task", "") }));
    }
    if (S.view === "changed" && !CHANGED.length) body.innerHTML = `<tr><td class="empty">No task's pass rate differs between the runs.</td></tr>`;
  }

  function onTableClick(e) {
    const h = e.target.closest("th[data-sort]");
    if (h) {
      const s = S.sort[S.view];
      S.sort[S.view] = [h.dataset.sort, s[0] === h.dataset.sort ? -s[1] : 1];
      draw();
      return;
    }
    const tr = e.target.closest("tr.trial-row");
    if (tr) return openTrial(+tr.dataset.i);
    const tk = e.target.closest("tr.task-row");
    if (tk) {
      const t = TASKS.get(tk.dataset.task);
      if (S.view === "changed" || (MULTI && t.nRuns > 1)) return openCompare(t.taskId);
      S.task = t.taskId;
      setView("trials");
    }
  }

  // --- transcripts ------------------------------------------------------------------------
  const cache = new Map();
  const parsed = new Promise((ok) =>
    document.readyState === "loading" ? document.addEventListener("DOMContentLoaded", ok) : ok()
  );
  const waiting = new Map(); // row -> [resolve, reject] while its t<row>.js loads
  window.apexTranscript = (i, b64) => {
    const w = waiting.get(i);
    if (w) {
      waiting.delete(i);
      w[0](b64);
    }
  };
  function loadBeside(i) {
    // transcripts kept beside the page (a large run): one script per trial, on demand
    return new Promise((ok, fail) => {
      const src = `${encodeURIComponent(IDX.beside)}/t${i}.js`;
      waiting.set(i, [ok, fail]);
      const s = document.createElement("script");
      s.src = src;
      s.onload = () => s.remove();
      s.onerror = () => {
        waiting.delete(i);
        s.remove();
        fail(new Error(`${src} did not load: keep the folder ${IDX.beside}/ beside this page`));
      };
      document.head.append(s);
    });
  }
  async function packed(i) {
    if (IDX.beside) return loadBeside(i);
    let node = document.getElementById("b" + i);
    if (!node) {
      await parsed;
      node = document.getElementById("b" + i);
    }
    if (!node) throw new Error("this trial's transcript is not in the page");
    return node.textContent;
  }
  async function transcript(i) {
    if (IDX.inline) return IDX.inline[i];
    if (cache.has(i)) return cache.get(i);
    const bin = atob(await packed(i));
    const bytes = new Uint8Array(bin.length);
    for (let j = 0; j < bin.length; j++) bytes[j] = bin.charCodeAt(j);
    if (typeof DecompressionStream === "undefined") throw new Error("this browser cannot decompress (no DecompressionStream): use a current Chromium, Firefox or Safari");
    const stream = new Blob([bytes]).stream().pipeThrough(new DecompressionStream("gzip"));
    const t = JSON.parse(await new Response(stream).text());
    cache.set(i, t);
    return t;
  }

  function folded(text, cls) {
    text = text == null ? "" : String(text);
    const lines = text.split("\n");
    const pre = el("pre", { cls: "txt " + (cls || "") });
    if (text.length <= FOLD_CHARS && lines.length <= FOLD_LINES) {
      pre.textContent = text;
      return pre;
    }
    let head = lines.slice(0, FOLD_LINES).join("\n");
    if (head.length > FOLD_CHARS) head = head.slice(0, FOLD_CHARS);
    pre.textContent = head + "\n\u2026";
    const btn = el("button", { cls: "fold", text: `show all (${num(text.length)} chars, ${num(lines.length)} lines)` });
    btn.addEventListener("click", () => {
      const open = btn.dataset.open === "1";
      pre.textContent = open ? head + "\n\u2026" : text;
      btn.dataset.open = open ? "0" : "1";
      btn.textContent = open ? `show all (${num(text.length)} chars, ${num(lines.length)} lines)` : "fold";
    });
    return el("div", { cls: "foldable" }, pre, btn);
  }

  function trialSummary(r) {
    const o = outcome(r);
    const bits = [
      el("span", { cls: "badge " + o, text: o }),
      el("span", { text: `status ${r.status}` }),
      el("span", { text: `score ${r.score.toFixed(2)}` }),
      el("span", { text: `criteria ${r.met}/${r.total}` }),
      el("span", { text: `${r.turns} turns` }),
      el("span", { text: `${num(r.tin)} / ${num(r.tout)} tokens` }),
      el("span", { text: `${r.tools} tool calls` }),
      el("span", { text: secs(r.dur) }),
    ];
    return el("div", { cls: "facts" }, ...bits);
  }

  function renderTranscript(r, t) {
    const box = el("div", { cls: "transcript" });
    if (r.ec || r.err || t.error) {
      box.append(el("div", { cls: "errorbox" }, el("b", { text: (r.ec || r.status) + ": " }), folded(r.err || t.error || "(no message recorded)")));
    }
    for (const m of t.missing || []) box.append(el("p", { cls: "note", text: "not available: " + m }));
    const verdicts = t.verdicts || [];
    const vsec = el("section", { cls: "verdicts" }, el("h3", { text: `Criteria (${verdicts.filter((v) => v.met).length}/${verdicts.length} met)` }));
    for (const v of verdicts) {
      const item = el(
        "div",
        { cls: "verdict " + (v.met ? "met" : "unmet") },
        el("span", { cls: "mark", text: v.met ? "\u2714" : "\u2718" }),
        el("span", { cls: "crit", text: v.c }),
        v.src ? el("span", { cls: "src", text: v.src + (v.judge ? ` (${v.judge})` : "") }) : null
      );
      if (v.why) item.append(el("div", { cls: "why" }, el("b", { text: "rationale: " }), folded(v.why)));
      if (v.err) item.append(el("div", { cls: "why" }, el("b", { text: "judge error: " }), folded(v.err)));
      vsec.append(item);
    }
    if (!verdicts.length) vsec.append(el("p", { cls: "note", text: "no per-criterion verdicts were recorded" }));
    box.append(vsec);
    box.append(el("section", { cls: "answer" }, el("h3", { text: "Final answer" }), t.answer != null ? folded(t.answer) : el("p", { cls: "note", text: "none recorded" })));
    const f = t.files;
    const fsec = el("section", { cls: "files" }, el("h3", { text: "Files written" }));
    const nfiles = f ? f.created.length + f.modified.length + f.deleted.length : 0;
    if (nfiles) {
      for (const k of ["created", "modified", "deleted"]) {
        for (const p of f[k]) fsec.append(el("div", { cls: "file" }, el("span", { cls: "fk " + k, text: k }), el("code", { text: p })));
      }
    } else fsec.append(el("p", { cls: "note", text: f ? "none" : "not recorded" }));
    box.append(fsec);
    const steps = t.steps || [];
    const ssec = el("section", { cls: "steps" }, el("h3", { text: `Transcript (${steps.length} messages)` }));
    if (t.agent) {
      const a = t.agent;
      const facts = Object.entries(a).map(([k, v]) => `${k} ${typeof v === "object" ? JSON.stringify(v) : v}`);
      ssec.append(el("p", { cls: "note", text: "agent: " + facts.join(", ") }));
    }
    steps.forEach((s, j) => ssec.append(renderStep(s, j)));
    box.append(ssec);
    return box;
  }

  function renderStep(s, j) {
    const who = s.k === "agent" ? "assistant" : s.k;
    const head = el("div", { cls: "who" }, el("span", { text: `${j + 1}. ${who}` }));
    if (s.tok) head.append(el("span", { cls: "meta", text: `prompt ${num(s.tok[0])} / completion ${num(s.tok[1] || 0)} tokens` }));
    if (s.finish) head.append(el("span", { cls: "meta", text: `finish ${s.finish}` }));
    const step = el("div", { cls: "step " + s.k }, head);
    if (s.k === "system") {
      step.append(el("details", {}, el("summary", { text: `system prompt (${num((s.text || "").length)} chars)` }), folded(s.text)));
      return step;
    }
    if (s.reasoning) step.append(el("details", { cls: "reasoning" }, el("summary", { text: "reasoning" }), folded(s.reasoning)));
    if (s.text) step.append(folded(s.text));
    for (const n of s.notes || []) step.append(el("p", { cls: "note", text: "parse: " + n }));
    for (const c of s.calls || []) {
      const call = el("div", { cls: "call" });
      const ch = el("div", { cls: "callhead" }, el("span", { cls: "tool", text: "tool call: " + c.name }));
      if (c.status) ch.append(el("span", { cls: "badge " + (c.status === "ok" ? "pass" : "error"), text: c.status }));
      if (c.dur != null) ch.append(el("span", { cls: "meta", text: secs(c.dur) }));
      call.append(ch);
      if (c.args != null) call.append(el("div", { cls: "lbl", text: "arguments" }), folded(c.args, "args"));
      if (c.error) call.append(el("div", { cls: "lbl", text: "error" }), folded(c.error));
      call.append(el("div", { cls: "lbl", text: "result" }), c.result != null ? folded(c.result, "result") : el("p", { cls: "note", text: "no result recorded" }));
      step.append(call);
    }
    return step;
  }

  // --- the detail pane ----------------------------------------------------------------------
  function pane(title) {
    const p = $("#detail");
    p.hidden = false;
    document.body.classList.add("with-detail");
    p.textContent = "";
    const nav = el("div", { cls: "panehead" }, el("h2", { text: title }));
    nav.append(el("button", { cls: "close", title: "close (Esc)", text: "\u2715", onclick: closePane }));
    p.append(nav);
    return p;
  }
  function closePane() {
    $("#detail").hidden = true;
    document.body.classList.remove("with-detail");
    history.replaceState(null, "", location.pathname + location.search);
  }
  function neighbours(i) {
    if (S.view !== "trials") return [null, null];
    const k = S.list.findIndex((r) => r.i === i);
    return [k > 0 ? S.list[k - 1] : null, k >= 0 && k + 1 < S.list.length ? S.list[k + 1] : null];
  }

  async function openTrial(i) {
    const r = ROWS[i];
    const p = pane(`${MULTI ? runName(r.run) + ": " : ""}${r.task} \u00b7 attempt ${r.attempt}`);
    const [prev, next] = neighbours(i);
    const tools = el("div", { cls: "panetools" });
    tools.append(el("button", { text: "\u2190 previous", disabled: prev ? null : "disabled", onclick: () => prev && openTrial(prev.i) }));
    tools.append(el("button", { text: "next \u2192", disabled: next ? null : "disabled", onclick: () => next && openTrial(next.i) }));
    const t = TASKS.get(r.taskId);
    if (MULTI && t.nRuns > 1) tools.append(el("button", { text: "side by side across runs", onclick: () => openCompare(r.taskId) }));
    p.append(tools, el("p", { cls: "sub", text: `${RUNS[r.run].label} \u00b7 ${r.trial} \u00b7 ${r.taskId}` }), trialSummary(r));
    history.replaceState(null, "", "#trial=" + encodeURIComponent(`${r.run}:${r.trial}`));
    const slot = el("div", { cls: "loading", text: "decoding the transcript\u2026" });
    p.append(slot);
    try {
      const tr = await transcript(i);
      slot.replaceWith(renderTranscript(r, tr));
    } catch (err) {
      slot.textContent = "could not read this transcript: " + err.message;
    }
    document.documentElement.dataset.opened = r.trial;
  }

  function pick(t, run) {
    // the attempt that shows the difference: a pass in the better run, a failure in the worse
    const p = t.per[run];
    const rates = t.per.filter(Boolean).map((q) => q.c / q.n);
    const better = p.c / p.n >= Math.max(...rates);
    return p.rows.find((r) => r.passed === better) || p.rows[0];
  }

  async function openCompare(taskId) {
    const t = TASKS.get(taskId);
    const p = pane(`${t.task}: side by side`);
    p.append(el("p", { cls: "sub", text: `${t.taskId} \u00b7 ${t.domain}` }));
    history.replaceState(null, "", "#task=" + encodeURIComponent(taskId));
    const cols = el("div", { cls: "sidebyside" });
    p.append(cols);
    const jobs = [];
    t.per.forEach((per, run) => {
      const col = el("div", { cls: "col", "data-run": run });
      cols.append(col);
      col.append(el("h3", {}, el("span", { cls: "tag", text: runName(run) }), RUNS[run].label));
      if (!per) {
        col.append(el("p", { cls: "note", text: "this task is not in this run" }));
        return;
      }
      col.append(el("p", { cls: "sub", text: `passed ${passedText(per)}, mean score ${scoreText(per)}` }));
      const chips = el("div", { cls: "chips" });
      const body = el("div");
      const show = async (r) => {
        chips.querySelectorAll("button").forEach((b) => b.classList.toggle("on", +b.dataset.i === r.i));
        body.textContent = "";
        body.append(trialSummary(r));
        const slot = el("div", { cls: "loading", text: "decoding\u2026" });
        body.append(slot);
        try {
          slot.replaceWith(renderTranscript(r, await transcript(r.i)));
        } catch (err) {
          slot.textContent = "could not read this transcript: " + err.message;
        }
      };
      for (const r of per.rows) {
        const o = outcome(r);
        chips.append(el("button", { cls: "chip " + o, "data-i": r.i, text: `attempt ${r.attempt}: ${o}`, onclick: () => show(r) }));
      }
      col.append(chips, body);
      jobs.push(show(pick(t, run)));
    });
    await Promise.all(jobs);
    document.documentElement.dataset.opened = "compare:" + taskId;
  }

  // --- start ---------------------------------------------------------------------------
  const app = document.getElementById("app");
  app.append(
    header(),
    controls(),
    el("div", { cls: "tablewrap" }, el("table", { id: "grid", onclick: onTableClick }, el("thead", { id: "head" }), el("tbody", { id: "rows" }))),
    el("button", { id: "more", hidden: "hidden", onclick: () => { S.shown += PAGE; draw(); } }),
    el("aside", { id: "detail", hidden: "hidden" })
  );
  document.addEventListener("keydown", (e) => {
    if (e.key === "Escape" && !$("#detail").hidden) closePane();
  });
  if (MULTI && CHANGED.length) S.view = "changed";
  draw();
  const h = decodeURIComponent(location.hash.slice(1));
  if (h.startsWith("trial=")) {
    const [run, trial] = [h.slice(6, h.indexOf(":")), h.slice(h.indexOf(":") + 1)];
    const r = ROWS.find((x) => x.run === +run && x.trial === trial);
    if (r) openTrial(r.i);
  } else if (h.startsWith("task=") && TASKS.has(h.slice(5))) openCompare(h.slice(5));
  window.apexView = { readyAt: performance.now(), rows: ROWS.length, runs: RUNS.length };
  document.documentElement.dataset.ready = "1";
})();

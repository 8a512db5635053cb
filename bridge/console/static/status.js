// membridge memory console: the status page (#/status), what an operator looks at first.
//
// A view like the others (core.js explains how views register): the router gives it #/status and
// its section. The figures come from GET /api/status (the bot's durable records in index.db, and in
// a cluster the receivers' count of dropped redeliveries in Redis) and are drawn as small inline SVG
// charts; a figure the server could not read comes with a warning, shown under the turns.
// Every text goes in with textContent.
"use strict";

(() => {
  const SVG = "http://www.w3.org/2000/svg";
  const WIDTH = 320; // a chart's drawing width: about a card's, so its 12-unit labels read as 12 px
  const COLOURS = { answered: "#2f6fdf", refused: "#c9a227", failed: "#c0362c", deduplicated: "#8795a1",
    prompt: "#2f6fdf", completion: "#2f9e6b" };

  function el(tag, text, className) {
    const node = document.createElement(tag);
    if (text !== undefined) node.textContent = String(text);
    if (className) node.className = className;
    return node;
  }

  function svg(tag, attributes = {}, title) {
    const node = document.createElementNS(SVG, tag);
    for (const [name, value] of Object.entries(attributes)) node.setAttribute(name, String(value));
    if (title) {
      const tip = document.createElementNS(SVG, "title");
      tip.textContent = title;
      node.append(tip);
    }
    return node;
  }

  function chart(width, height, label) {
    return svg("svg", { viewBox: `0 0 ${width} ${height}`, class: "status-chart", role: "img", "aria-label": label });
  }

  function number(value) {
    return Number(value).toLocaleString("en-US");
  }

  function clock(iso) {
    if (!iso) return "never";
    const date = new Date(iso);
    const pad = (value) => String(value).padStart(2, "0");
    return `${date.getFullYear()}-${pad(date.getMonth() + 1)}-${pad(date.getDate())} ${pad(date.getHours())}:${pad(date.getMinutes())}`;
  }

  function duration(seconds) {
    if (seconds === null || seconds === undefined) return "none waiting";
    if (seconds < 120) return `oldest waiting ${Math.round(seconds)} s`;
    if (seconds < 7200) return `oldest waiting ${Math.round(seconds / 60)} min`;
    return `oldest waiting ${(seconds / 3600).toFixed(1)} h`;
  }

  function card(title, ...children) {
    const box = el("div", undefined, "card status-card");
    box.append(el("h2", title), ...children);
    return box;
  }

  function legend(entries) {
    const list = el("ul", undefined, "status-legend");
    for (const [name, value] of entries) {
      const item = el("li");
      const swatch = el("span", undefined, "status-swatch");
      swatch.style.backgroundColor = COLOURS[name];
      item.append(swatch, el("span", `${name} ${number(value)}`));
      list.append(item);
    }
    return list;
  }

  // ------------------------------------------------------------- charts
  /** Stacked bars, one per hour: answered below, failed on top. */
  function hourlyChart(hours) {
    const width = WIDTH, height = 120, base = 100, gap = 2;
    const most = Math.max(1, ...hours.map((hour) => hour.answered + hour.failed));
    const step = width / hours.length;
    const drawing = chart(width, height, "turns per hour, the last 24 hours");
    hours.forEach((hour, index) => {
      const x = index * step + gap / 2;
      const answered = (hour.answered / most) * (base - 4);
      const failed = (hour.failed / most) * (base - 4);
      const tip = `${clock(hour.hour)}: ${hour.answered} answered, ${hour.failed} failed`;
      drawing.append(svg("rect", { x, y: base - answered, width: step - gap, height: answered, fill: COLOURS.answered, "data-hour": index }, tip));
      drawing.append(svg("rect", { x, y: base - answered - failed, width: step - gap, height: failed, fill: COLOURS.failed }, tip));
    });
    drawing.append(svg("line", { x1: 0, y1: base, x2: width, y2: base, class: "status-axis" }));
    for (const [index, anchor] of [[0, "start"], [hours.length - 1, "end"]]) {
      const label = svg("text", { x: anchor === "start" ? 0 : width, y: height - 4, "text-anchor": anchor, class: "status-label" });
      label.textContent = clock(hours[index].hour).slice(11);
      drawing.append(label);
    }
    return drawing;
  }

  /** One bar split by share: each outcome's part of the day's turns. */
  function shareBar(parts, label) {
    const width = WIDTH, height = 18;
    const total = parts.reduce((sum, [, value]) => sum + value, 0);
    const drawing = chart(width, height, label);
    let x = 0;
    for (const [name, value] of parts) {
      const part = total ? (value / total) * width : 0;
      drawing.append(svg("rect", { x, y: 0, width: part, height, fill: COLOURS[name], "data-part": name }, `${name}: ${number(value)}`));
      x += part;
    }
    if (!total) drawing.append(svg("rect", { x: 0, y: 0, width, height, class: "status-empty" }, "no turns"));
    return drawing;
  }

  /** A scale from 0 to a little past p95: a bar to the median, a tick at p95. */
  function latencyChart(latency) {
    const width = WIDTH, height = 44;
    const drawing = chart(width, height, "model latency, median and 95th percentile");
    if (!latency.count) {
      drawing.append(svg("rect", { x: 0, y: 8, width, height: 14, class: "status-empty" }, "no model requests"));
      return drawing;
    }
    const top = latency.p95 * 1.15 || 1;
    const at = (value) => (value / top) * width;
    drawing.append(svg("rect", { x: 0, y: 8, width: at(latency.p50), height: 14, fill: COLOURS.answered, "data-mark": "p50" }, `p50 ${latency.p50} ms`));
    drawing.append(svg("rect", { x: at(latency.p95) - 2, y: 2, width: 4, height: 26, fill: COLOURS.failed, "data-mark": "p95" }, `p95 ${latency.p95} ms`));
    const label = svg("text", { x: 0, y: height - 2, class: "status-label" });
    label.textContent = `0 ms … ${Math.round(top)} ms`;
    drawing.append(label);
    return drawing;
  }

  /** One bar per scope, prompt and completion tokens side by side in it. */
  function usageChart(rows) {
    const width = WIDTH, row = 24, labelWidth = 120;
    const drawing = chart(width, Math.max(row, rows.length * row), "today's top usage by scope");
    const most = Math.max(1, ...rows.map((item) => item.prompt_tokens + item.completion_tokens));
    rows.forEach((item, index) => {
      const y = index * row;
      const name = svg("text", { x: 0, y: y + 15, class: "status-label" });
      name.textContent = item.scope.length > 17 ? `${item.scope.slice(0, 16)}…` : item.scope;
      drawing.append(name);
      const room = width - labelWidth;
      const prompt = (item.prompt_tokens / most) * room;
      const completion = (item.completion_tokens / most) * room;
      const upkeep = item.upkeep_tokens ? ` (${number(item.upkeep_tokens)} of them memory upkeep)` : "";
      const tip = `${item.scope}: ${number(item.prompt_tokens)} prompt + ${number(item.completion_tokens)} completion tokens${upkeep}, ${item.turns} turns`;
      drawing.append(svg("rect", { x: labelWidth, y: y + 4, width: prompt, height: 14, fill: COLOURS.prompt, "data-scope": item.scope }, tip));
      drawing.append(svg("rect", { x: labelWidth + prompt, y: y + 4, width: completion, height: 14, fill: COLOURS.completion }, tip));
    });
    return drawing;
  }

  // --------------------------------------------------------------- page
  function draw(section, status) {
    const outcomes = Object.entries(status.turns_24h);
    const total = outcomes.reduce((sum, [, value]) => sum + value, 0);
    const latency = status.model_latency_ms;
    const backlog = status.flush_backlog;
    const figure = (text) => el("p", text, "status-figure");
    const upkeep = status.top_usage.reduce((sum, item) => sum + item.upkeep_tokens, 0);
    section.replaceChildren(
      card("Turns, last 24 hours", figure(`${number(total)} turns`), shareBar(outcomes, "turns by outcome"), legend(outcomes),
        hourlyChart(status.turns_by_hour), ...status.warnings.map((text) => el("p", text, "status-warning"))),
      card("Model latency", figure(latency.count ? `p50 ${number(latency.p50)} ms · p95 ${number(latency.p95)} ms` : "no requests"),
        latencyChart(latency), el("p", `${number(latency.count)} requests in 24 hours`, "muted")),
      card("Flush backlog", figure(`${number(backlog.pending)} pending`), el("p", duration(backlog.oldest_pending_age_s), "muted")),
      card("Nightly pass", figure(`last success ${clock(status.nightly.last_success)}`),
        el("p", `next run ${clock(status.nightly.next_run)}`, "muted")),
      card("Top usage today", status.top_usage.length ? usageChart(status.top_usage) : el("p", "No model use today.", "muted"),
        legend([["prompt", status.top_usage.reduce((sum, item) => sum + item.prompt_tokens, 0)],
          ["completion", status.top_usage.reduce((sum, item) => sum + item.completion_tokens, 0)]]),
        el("p", upkeep ? `${number(upkeep)} of these tokens were memory upkeep (flush, daily summary, dream), which limits do not count.` : "", "muted")),
    );
  }

  /** The view: the router calls it for #/status with the section to fill. */
  async function renderStatus(_route, section) {
    section.classList.add("status-grid");
    draw(section, await window.membridge.api("/api/status"));
  }

  window.consoleViews.status = renderStatus;
})();

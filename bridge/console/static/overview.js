// A scope's overview, the console's landing page: the figures `membridge memory stats` prints
// (one function computes both: bridge/overview.py), a chart of notes per day, and for every empty
// part a sentence saying how it gets filled, with a link to where the content is.
"use strict";

(() => {
  const mb = window.membridge;
  const { $, el, api, enc, address, plural, when } = mb;
  const SVG = "http://www.w3.org/2000/svg";

  async function showOverview(scope) {
    const data = await api(`/api/scopes/${enc(scope)}/overview`);
    const at = (...parts) => address(["scope", scope, ...parts]);
    const embedding = data.embedding.provider === "none"
      ? "none: keyword search only"
      : `${data.embedding.provider}${data.embedding.model ? ` (${data.embedding.model})` : ""}`;
    const figures = [
      ["MEMORY.md", plural(data.memory_entries, "entry", "entries"), at("memory")],
      ["Daily memory", `${plural(data.notes, "note")} on ${plural(data.days, "day")}`, at("daily")],
      ["Dream diaries", String(data.dream_diaries), at("dreams")],
      ["Conversation", "latest turns", at("conversation")],
      ["Knowledge pages", `${data.knowledge_pages} (shared)`, "#/knowledge"],
      ["Last sync", when(data.last_sync)],
      ["Last Deep Dream", when(data.last_dream)],
      ["Next Deep Dream", data.next_dream ? when(data.next_dream) : "off (memory.dream.enabled)"],
      ["Embeddings", embedding],
    ];
    $("overview-figures").replaceChildren(...figures.map(([label, value, href]) => el("div", { className: "figure" }, [
      el("dt", { text: label }),
      el("dd", {}, [href ? el("a", { text: value, href }) : el("span", { text: value })]),
    ])));
    drawChart($("overview-chart"), data.notes_per_day, scope);
    $("overview-hints").replaceChildren(...hints(data, at).map((parts) => el("li", {}, parts)));
  }

  /** What an empty part of this scope waits for, with a link to where its content will be. */
  function hints(data, at) {
    const found = [];
    const next = data.next_dream ? ` (next: ${when(data.next_dream)})` : " (it is off: memory.dream.enabled)";
    if (!data.memory_entries) {
      found.push([`MEMORY.md is empty: Deep Dream fills it each night from the daily notes${next}. `,
        data.days ? el("a", { text: `${plural(data.days, "day")} of notes ${data.days === 1 ? "waits" : "wait"} for it`,
          href: at("daily") })
          : el("span", { text: "There are no notes yet." })]);
    }
    if (!data.days) {
      found.push([el("span", { text: "No daily memory yet: conversations leave their notes here when their "
        + "context is trimmed or cleared, and so does " }), el("code", { text: "membridge memory add" }),
      el("span", { text: "." })]);
    }
    if (!data.dream_diaries) {
      found.push([el("span", { text: `No dream diaries yet: Deep Dream writes one each night it changes MEMORY.md${next}.` })]);
    }
    if (!data.knowledge_pages) {
      found.push([el("span", { text: "No knowledge pages yet: admins add them in a chat or with " }),
        el("code", { text: "membridge knowledge add" }), el("span", { text: "." })]);
    }
    if (!data.last_sync) {
      found.push([el("span", { text: "Nothing indexed yet: the first search (or " }),
        el("code", { text: "membridge memory sync" }), el("span", { text: ") indexes the files." })]);
    }
    return found;
  }

  /** Notes per day as bars, each a link to that day; the axis names the first and last day. */
  function drawChart(box, days, scope) {
    const total = days.reduce((sum, item) => sum + item.notes, 0);
    if (!total) {
      box.replaceChildren(el("p", { className: "empty",
        text: `No notes in the last ${days.length} days: the bars appear as daily memory fills.` }));
      return;
    }
    const highest = Math.max(...days.map((item) => item.notes));
    const width = days.length * 10;
    const svg = document.createElementNS(SVG, "svg");
    svg.setAttribute("viewBox", `0 0 ${width} 100`);
    svg.setAttribute("preserveAspectRatio", "none");
    svg.setAttribute("role", "img");
    svg.setAttribute("aria-label", `${plural(total, "note")} in the last ${days.length} days`);
    days.forEach((item, index) => {
      if (!item.notes) return;
      const height = Math.max(4, (item.notes / highest) * 96);
      const link = document.createElementNS(SVG, "a");
      link.setAttribute("href", address(["scope", scope, "daily", item.date]));
      const bar = document.createElementNS(SVG, "rect");
      for (const [name, value] of Object.entries({ x: index * 10 + 1, y: 100 - height, width: 8, height })) {
        bar.setAttribute(name, String(value));
      }
      const title = document.createElementNS(SVG, "title");
      title.textContent = `${item.date}: ${plural(item.notes, "note")}`;
      bar.append(title);
      link.append(bar);
      svg.append(link);
    });
    box.replaceChildren(svg, el("div", { className: "axis" }, [
      el("span", { text: days[0].date }),
      el("span", { text: `most in a day: ${highest}` }),
      el("span", { text: days[days.length - 1].date }),
    ]));
  }

  mb.showOverview = showOverview;
})();

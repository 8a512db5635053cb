// The views "knowledge" (#/knowledge/<category>/<page>, ?lines=a-b opens its source at those
// lines) and "graph" (#/graph): the shared knowledge base, its pages rendered by the server and
// their links drawn by the vendored Cytoscape.js.
"use strict";

(() => {
  const mb = window.membridge;
  const { $, el, api, address } = mb;
  const PALETTE = ["#2f6fdf", "#e0662f", "#2f9e6b", "#a447c2", "#c9a227", "#d6456f", "#3aa3b8", "#6b7a8f"];
  let graph = null;

  /** "knowledge/tech/deploy.md" → the page's address "#/knowledge/tech/deploy". */
  const pageAddress = (path) => address(path.replace(/\.md$/, "").split("/"));

  async function renderKnowledge(route) {
    const pages = await api("/api/knowledge");
    $("pages-empty").hidden = pages.length > 0;
    const byCategory = new Map();
    for (const page of pages) {
      if (!byCategory.has(page.category)) byCategory.set(page.category, []);
      byCategory.get(page.category).push(page);
    }
    const named = route.parts.length >= 3 ? `knowledge/${route.parts.slice(1).join("/")}.md` : null;
    const path = named || pages[0]?.path;
    $("page-list").replaceChildren(...[...byCategory].map(([category, group]) => el("div", { className: "category" }, [
      el("h3", { text: category }),
      el("ul", { className: "page-list" }, group.map((page) => {
        const link = el("a", { className: "page", text: page.title, title: page.path, href: pageAddress(page.path) });
        link.dataset.path = page.path;
        link.classList.toggle("active", page.path === path);
        return el("li", {}, [link]);
      })),
    ])));
    $("page-pick").replaceChildren(...pages.map((page) => {
      const option = el("option", { text: `${page.category} · ${page.title}` });
      option.value = page.path;
      return option;
    }));
    $("page-pick").value = path || "";
    $("page-pick").hidden = pages.length === 0;
    if (!path) {
      $("page-title").textContent = "Knowledge";
      for (const id of ["page-path", "page-content"]) $(id).replaceChildren();
      $("page-source-box").hidden = true;
      return;
    }
    const data = await api(`/api/knowledge/page?${new URLSearchParams({ path })}`);
    $("page-title").textContent = pages.find((page) => page.path === path)?.title || path;
    $("page-path").textContent = data.path;
    $("page-content").innerHTML = data.html; // inert by construction: see the note at the top of core.js
    $("page-source-box").hidden = false;
    const range = mb.lineRange(route.params);
    $("page-source-box").open = Boolean(range);
    mb.showLines($("page-source"), data.content, range);
  }

  // -------------------------------------------------------------- graph
  // Labels stay smaller than their node is wide apart and are cut at 110 px; the zoom is capped so a
  // graph of two pages is not blown up until its labels dwarf everything, and tiny labels are hidden.
  const GRAPH_STYLE = [
    {
      selector: "node",
      style: {
        "background-color": "data(colour)", label: "data(label)", color: "#1f2933", "font-size": 11,
        "text-valign": "bottom", "text-margin-y": 4, width: 30, height: 30, "min-zoomed-font-size": 7,
        "text-wrap": "ellipsis", "text-max-width": 110, "text-background-color": "#fbfcfd",
        "text-background-opacity": 0.85, "text-background-padding": 1,
      },
    },
    { selector: "edge", style: { width: 1.5, "line-color": "#a9b4c2", "curve-style": "straight" } },
    { selector: "node:selected", style: { "border-width": 3, "border-color": "#1f2933" } },
  ];

  async function renderGraph() {
    const data = await api("/api/knowledge/graph");
    if (graph) graph.destroy();
    graph = null;
    if (typeof window.cytoscape !== "function") {
      throw new Error("the graph library (static/vendor/cytoscape.min.js) did not load");
    }
    const categories = [...new Set(data.nodes.map((node) => node.category))].sort();
    const colour = (category) => PALETTE[categories.indexOf(category) % PALETTE.length];
    $("graph-status").textContent = data.nodes.length
      ? `${mb.plural(data.nodes.length, "page")}, ${mb.plural(data.edges.length, "link")}. Tap a page to read it; drag to move.`
      : "No knowledge pages yet: admins add them in a chat or with `membridge knowledge add`.";
    graph = window.cytoscape({
      container: $("graph"),
      elements: [
        ...data.nodes.map((node) => ({ data: { id: node.id, label: node.title, colour: colour(node.category) } })),
        ...data.edges.map((edge) => ({ data: { id: `${edge.source} ${edge.target}`, source: edge.source, target: edge.target } })),
      ],
      style: GRAPH_STYLE,
      minZoom: 0.3,
      maxZoom: 1.6,
      layout: { name: data.nodes.length > 1 ? "cose" : "grid", animate: false, padding: 40 },
    });
    graph.on("tap", "node", (event) => {
      location.hash = pageAddress(event.target.id());
    });
    window.consoleGraph = graph; // for a look from the browser's devtools (and the browser test)
    $("graph-legend").replaceChildren(...categories.map((category) => {
      const swatch = el("span", { className: "swatch" });
      swatch.style.backgroundColor = colour(category);
      return el("li", {}, [swatch, el("span", { text: category })]);
    }));
  }

  $("page-pick").addEventListener("change", () => {
    location.hash = pageAddress($("page-pick").value);
  });
  window.addEventListener("console:signed-out", () => {
    if (graph) graph.destroy();
    graph = null;
  });
  window.consoleViews.knowledge = renderKnowledge;
  window.consoleViews.graph = renderGraph;
})();

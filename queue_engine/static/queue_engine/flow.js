/* jobsite console: a flow drawn as a graph, left to right, laid out by dagre
   (static/vendor/dagre). The server renders the nodes and edges as JSON
   (<script id="flow-data">); the websocket swaps that script out of band as
   nodes change, and this redraws: colours in place when the nodes are the
   same, a new layout when a dynamic join grew. A node spawned at run time hangs off
   its spawner by a dotted "spawned" edge: where it came from, not what it waits for. */
(function () {
  "use strict";

  var SVG = "http://www.w3.org/2000/svg";
  var NODE_W = 184, NODE_H = 46, MAX_LABEL = 24;
  var STATE_TEXT = { failed: "dead", upstream_failed: "upstream failed" };
  var scale = null; // null: fit to the width (until the reader zooms)
  var drawn = null; // { signature, size, nodes: {id: element} }

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (parent) parent.appendChild(node);
    return node;
  }

  function readData(container) {
    var script = document.getElementById(container.getAttribute("data-flow-graph"));
    if (!script) return null;
    try { return JSON.parse(script.textContent); } catch (e) { return null; }
  }

  function shorten(text) {
    return text.length > MAX_LABEL ? text.slice(0, MAX_LABEL - 1) + "…" : text;
  }

  function stateLine(node) {
    var text = STATE_TEXT[node.state] || node.state;
    if (node.gate) text = "gate · " + text;
    if (node.state === "upstream_failed" && node.cause) text = "upstream failed: " + node.cause;
    if (node.state === "running" && node.progress !== null && node.progress !== undefined) {
      text += " · " + Math.round(node.progress * 100) + "%";
    }
    if (node.attempt > 1) text += " · attempt " + node.attempt;
    return text;
  }

  function spawns(data) { return data.spawns || []; }

  function signature(data) {
    return data.nodes.map(function (n) { return n.id; }).join(",") + "|" +
      data.edges.map(function (e) { return e[0] + ">" + e[1]; }).join(",") + "|" +
      spawns(data).map(function (e) { return e[0] + ">" + e[1]; }).join(",");
  }

  function layout(data) {
    var g = new dagre.graphlib.Graph();
    g.setGraph({ rankdir: "LR", nodesep: 18, ranksep: 56, marginx: 8, marginy: 8 });
    g.setDefaultEdgeLabel(function () { return {}; });
    data.nodes.forEach(function (n) { g.setNode(String(n.id), { width: NODE_W, height: NODE_H }); });
    data.edges.forEach(function (e) { g.setEdge(String(e[0]), String(e[1]), { dynamic: e[2] }); });
    spawns(data).forEach(function (e) {
      if (!g.hasEdge(String(e[0]), String(e[1]))) g.setEdge(String(e[0]), String(e[1]), { spawn: true });
    });
    dagre.layout(g);
    return g;
  }

  function path(points) {
    // A smooth curve through dagre's bend points: each bend is a control point, the
    // curve passing through the midpoints between bends.
    function xy(p) { return p.x.toFixed(1) + " " + p.y.toFixed(1); }
    var d = "M" + xy(points[0]);
    for (var i = 1; i < points.length - 1; i++) {
      var mid = { x: (points[i].x + points[i + 1].x) / 2, y: (points[i].y + points[i + 1].y) / 2 };
      d += " Q" + xy(points[i]) + " " + xy(i === points.length - 2 ? points[i + 1] : mid);
    }
    if (points.length === 2) d += " L" + xy(points[1]);
    return d;
  }

  function draw(container, data) {
    var jobUrl = container.getAttribute("data-job-url");
    var g = layout(data);
    var size = g.graph();
    var svg = el("svg", {
      viewBox: "0 0 " + size.width + " " + size.height,
      role: "presentation",
    });
    var defs = el("defs", {}, svg);
    var marker = el("marker", {
      id: "flow-arrow", viewBox: "0 0 10 10", refX: "9", refY: "5",
      markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse",
    }, defs);
    el("path", { d: "M0 0 L10 5 L0 10 z", "class": "arrow" }, marker);
    var spawnMarker = el("marker", {
      id: "flow-spawn-arrow", viewBox: "0 0 10 10", refX: "9", refY: "5",
      markerWidth: "7", markerHeight: "7", orient: "auto-start-reverse",
    }, defs);
    el("path", { d: "M0 0 L10 5 L0 10 z", "class": "arrow spawn" }, spawnMarker);

    var byId = {};
    data.nodes.forEach(function (n) { byId[n.id] = n; });
    var edges = el("g", { "class": "edges" }, svg);
    var edgeEls = [];
    data.edges.forEach(function (e) {
      var edge = g.edge(String(e[0]), String(e[1]));
      var line = el("path", {
        d: path(edge.points),
        "class": "edge" + (e[2] ? " dynamic" : ""),
        "marker-end": "url(#flow-arrow)",
      }, edges);
      edgeEls.push({ el: line, parent: e[0] });
    });
    spawns(data).forEach(function (e) {
      var edge = g.edge(String(e[0]), String(e[1]));
      el("path", {
        d: path(edge.points),
        "class": "edge spawn",
        "marker-end": "url(#flow-spawn-arrow)",
        "data-spawn": e[0] + ">" + e[1],
      }, edges);
    });

    var nodeEls = {};
    var nodes = el("g", { "class": "nodes" }, svg);
    data.nodes.forEach(function (n) {
      var box = g.node(String(n.id));
      var link = el("a", {
        href: jobUrl.replace(/0\/$/, n.id + "/"),
        "class": "node s-" + n.state + (n.gate ? " gate" : ""),
        transform: "translate(" + (box.x - NODE_W / 2) + "," + (box.y - NODE_H / 2) + ")",
      }, nodes);
      el("rect", { "class": "box", width: NODE_W, height: NODE_H, rx: 7 }, link);
      el("rect", { "class": "band", width: 5, height: NODE_H - 2, x: 1, y: 1, rx: 3 }, link);
      var title = el("title", {}, link);
      var key = el("text", { x: 14, y: 19 }, link);
      key.textContent = shorten(n.key);
      var state = el("text", { x: 14, y: 35, "class": "state" }, link);
      nodeEls[n.id] = { link: link, title: title, state: state };
      paint(nodeEls[n.id], n, false);
    });
    edgeEls.forEach(function (edge) {
      var parent = byId[edge.parent];
      edge.el.classList.toggle("done", !!parent && parent.state === "succeeded");
    });

    container.querySelectorAll("svg").forEach(function (old) { old.remove(); });
    container.appendChild(svg);
    drawn = { signature: signature(data), size: size, nodes: nodeEls, edges: edgeEls, svg: svg };
    zoom(container);
  }

  function paint(entry, node, flash) {
    var cls = "node s-" + node.state + (node.gate ? " gate" : "");
    var changed = entry.link.getAttribute("class").split(" ")[1] !== "s-" + node.state;
    entry.link.setAttribute("class", cls + (flash && changed ? " changed" : ""));
    entry.state.textContent = stateLine(node);
    var label = node.key + (node.label && node.label !== node.key ? " (" + node.label + ")" : "") +
      ": " + stateLine(node) + ", job #" + node.id;
    entry.title.textContent = label;
    entry.link.setAttribute("aria-label", label);
  }

  function update(container) {
    var data = readData(container);
    if (!data) return;
    if (!drawn || drawn.signature !== signature(data) || !drawn.svg.isConnected) {
      draw(container, data);
      return;
    }
    var byId = {};
    data.nodes.forEach(function (n) {
      byId[n.id] = n;
      if (drawn.nodes[n.id]) paint(drawn.nodes[n.id], n, true);
    });
    drawn.edges.forEach(function (edge) {
      var parent = byId[edge.parent];
      edge.el.classList.toggle("done", !!parent && parent.state === "succeeded");
    });
  }

  function zoom(container) {
    if (!drawn) return;
    var width = drawn.size.width, height = drawn.size.height;
    var room = Math.max(container.clientWidth - 32, 200);
    var s = scale === null ? Math.min(1, room / width) : scale;
    drawn.svg.setAttribute("width", Math.round(width * s));
    drawn.svg.setAttribute("height", Math.round(height * s));
    container.dataset.scale = s.toFixed(2);
  }

  function start() {
    var container = document.querySelector("[data-flow-graph]");
    if (!container || typeof dagre === "undefined") return;
    update(container);
    document.addEventListener("htmx:wsAfterMessage", function () { update(container); });
    document.addEventListener("click", function (event) {
      var button = event.target.closest && event.target.closest("[data-graph-zoom]");
      if (!button) return;
      var how = button.getAttribute("data-graph-zoom");
      var current = parseFloat(container.dataset.scale || "1");
      scale = how === "fit" ? null : Math.max(0.2, Math.min(2.5, current * (how === "in" ? 1.25 : 0.8)));
      zoom(container);
    });
    window.addEventListener("resize", function () { if (scale === null) zoom(container); });
  }
  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", start);
  else start();
})();

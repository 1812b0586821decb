// crashcert timeline report: draws each trial's lanes (JSON in the page) as inline SVG.
// No network, no libraries. Marks the page `data-rendered` when every trial is drawn.
(function () {
  "use strict";
  var SVG = "http://www.w3.org/2000/svg";
  var LANE_H = 30, LABEL_W = 170, MARGIN_R = 40, AXIS_H = 22, MIN_W = 720, PX_PER_EVENT = 16;

  function el(name, attrs, parent) {
    var node = document.createElementNS(SVG, name);
    Object.keys(attrs || {}).forEach(function (key) { node.setAttribute(key, attrs[key]); });
    if (parent) { parent.appendChild(node); }
    return node;
  }

  function shape(group, event, x, y) {
    var c = event.classes;
    if (c.indexOf("fault") >= 0) {  // a diamond
      el("polygon", {"class": "mark", points: [x, y - 8, x + 7, y, x, y + 8, x - 7, y].join(" ")}, group);
    } else if (c.indexOf("worker") >= 0) {  // a bar
      el("rect", {"class": "mark", x: x - 2, y: y - 9, width: 4, height: 18}, group);
    } else if (c.indexOf("effect") >= 0 || c.indexOf("delivery") >= 0) {  // a square
      el("rect", {"class": "mark", x: x - 5, y: y - 5, width: 10, height: 10}, group);
    } else {
      el("circle", {"class": "mark", cx: x, cy: y, r: 5}, group);
    }
  }

  function wireCopy(section) {
    var copy = section.querySelector("button.copy");
    if (copy) {
      copy.addEventListener("click", function () {
        var text = section.querySelector("pre.repro").textContent;
        if (navigator.clipboard) { navigator.clipboard.writeText(text); }
      });
    }
  }

  function render(section) {
    var script = section.querySelector("script.trial-data");
    if (!script) {  // a passed trial of a large campaign: its timeline is on its own page
      wireCopy(section);
      section.setAttribute("data-rendered", "true");
      return;
    }
    var data = JSON.parse(script.textContent);
    var box = section.querySelector(".timeline");
    var detail = section.querySelector(".event-detail");
    // Events are spaced by order, not by wall time: a crash trace packs dozens of records
    // into milliseconds and then waits seconds for a lease. Time is on the axis and in tooltips.
    var all = [];
    data.lanes.forEach(function (lane) { lane.events.forEach(function (e) { all.push(e); }); });
    all.sort(function (a, b) { return a.t - b.t || a.seq - b.seq; });
    all.forEach(function (event, index) { event.rank = index; });
    var width = LABEL_W + MARGIN_R + Math.max(MIN_W, all.length * PX_PER_EVENT);
    var height = AXIS_H + data.lanes.length * LANE_H;
    var plot = width - LABEL_W - MARGIN_R;
    function xOf(rank) { return LABEL_W + (rank + 0.5) * plot / Math.max(1, all.length); }
    function rankOf(t) {  // where a moment falls among the events (for the heal/finish lines)
      var rank = 0;
      while (rank < all.length && all[rank].t < t) { rank += 1; }
      return rank - 0.5;
    }

    var svg = el("svg", {width: width, height: height, viewBox: "0 0 " + width + " " + height,
                         role: "img", "class": "timeline-svg"});
    var axis = el("g", {"class": "axis"}, svg);
    var step = Math.max(1, Math.ceil(all.length / 12));
    for (var i = 0; i < all.length; i += step) {
      var text = el("text", {x: xOf(i), y: 14, "text-anchor": "middle"}, axis);
      text.textContent = "+" + (all[i].t - data.t0).toFixed(2) + "s";
    }
    var lanes = el("g", {"class": "lanes"}, svg);
    data.lanes.forEach(function (lane, index) {
      var top = AXIS_H + index * LANE_H, mid = top + LANE_H / 2;
      var g = el("g", {"class": "lane " + lane.kind, "data-lane": lane.id}, lanes);
      el("rect", {"class": "lane-bg", x: 0, y: top, width: width, height: LANE_H}, g);
      var label = el("text", {"class": "lane-label", x: 6, y: mid + 4}, g);
      label.textContent = lane.label;
      lane.events.forEach(function (event) {
        var x = xOf(event.rank);
        var group = el("g", {"class": event.classes.join(" "), "data-seq": event.seq,
                             "data-label": event.label, tabindex: 0}, g);
        shape(group, event, x, mid);
        if (event.classes.indexOf("fault") >= 0) {  // faults are the news: name them
          var name = el("text", {"class": "event-label", x: x + 9, y: mid - 4}, group);
          name.textContent = event.classes[2];
        }
        el("title", {}, group).textContent = event.title;
        group.addEventListener("click", function () {
          detail.hidden = false;
          detail.textContent = event.title;
        });
      });
    });
    [["healed_at", "heal-line"], ["finished_at", "finish-line"]].forEach(function (pair) {
      var t = data[pair[0]];
      if (typeof t === "number" && t >= data.t0 && t <= data.t1) {
        var x = xOf(rankOf(t));
        el("line", {"class": pair[1], x1: x, x2: x, y1: AXIS_H, y2: height}, svg);
      }
    });
    box.appendChild(svg);

    // Evidence that names seq numbers highlights those records on the timeline.
    section.querySelectorAll("li.evidence").forEach(function (item) {
      var seqs = (item.getAttribute("data-seqs") || "").split(" ").filter(Boolean);
      if (!seqs.length) { return; }
      item.addEventListener("click", function () {
        var on = !item.classList.contains("active");
        section.querySelectorAll("li.evidence.active").forEach(function (other) {
          other.classList.remove("active");
        });
        section.querySelectorAll(".event.highlight").forEach(function (node) {
          node.classList.remove("highlight");
        });
        if (!on) { return; }
        item.classList.add("active");
        seqs.forEach(function (seq) {
          section.querySelectorAll('.event[data-seq="' + seq + '"]').forEach(function (node) {
            node.classList.add("highlight");
          });
        });
      });
    });
    wireCopy(section);
    section.setAttribute("data-rendered", "true");
  }

  var failures = 0;
  document.querySelectorAll("section.trial").forEach(function (section) {
    try {
      render(section);
    } catch (error) {
      failures += 1;
      var note = document.createElement("p");
      note.className = "render-error";
      note.textContent = "timeline could not be drawn: " + error;
      section.insertBefore(note, section.querySelector(".timeline"));
    }
  });
  // A link to a trial folded away in the matrix page unfolds it.
  function reveal() {
    var target = location.hash && document.getElementById(location.hash.slice(1));
    if (!target) { return; }
    var box = target.closest("details");
    if (box) { box.open = true; }
    target.scrollIntoView();
  }
  window.addEventListener("hashchange", reveal);
  reveal();
  document.body.setAttribute("data-rendered", failures ? "failed" : "true");
})();

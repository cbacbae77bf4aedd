// The HTML report's page (report::html): a style sheet and a script that draw the profile's JSON, embedded between
// report_head and report_tail, as inline SVG. No network, no other files. docs/09-profiling.md explains each chart.
#pragma once

namespace tilebsp::report::detail {

inline constexpr char const report_head[] = R"TBHTML(<!DOCTYPE html>
<html lang="en"><head><meta charset="utf-8"><title>tilebsp profile</title>
<script>
window.onerror = function (msg, src, line) {
  var h = document.documentElement;
  h.setAttribute('data-errors', (h.getAttribute('data-errors') || '') + msg + ' (line ' + line + ')|');
};
</script>
<style>
body { font: 13px/1.4 system-ui, sans-serif; margin: 0 24px 40px; color: #222; background: #fafafa; }
h1 { font-size: 20px; margin: 16px 0 4px; } h2 { font-size: 16px; margin: 28px 0 6px; border-bottom: 1px solid #ccc; }
.facts { display: flex; flex-wrap: wrap; gap: 6px 22px; margin: 8px 0; }
.facts div b { display: block; font-size: 15px; }
.note { color: #666; margin: 2px 0 8px; max-width: 1100px; }
svg { background: #fff; border: 1px solid #ddd; display: block; }
svg text { font: 11px system-ui, sans-serif; fill: #333; }
table { border-collapse: collapse; margin: 6px 0; background: #fff; }
td, th { border: 1px solid #ddd; padding: 2px 8px; text-align: right; }
td:first-child, th:first-child, td.l { text-align: left; }
th { background: #eee; cursor: pointer; }
#tip { position: fixed; pointer-events: none; background: #fff; border: 1px solid #888; padding: 4px 8px;
       font-size: 12px; display: none; box-shadow: 2px 2px 6px #0003; max-width: 480px; z-index: 9; }
pre { background: #fff; border: 1px solid #ddd; padding: 6px; overflow-x: auto; margin: 4px 0 10px; }
.panel { background: #fff; border: 1px solid #ddd; padding: 6px 10px; margin-top: 6px; min-height: 40px; max-width: 1080px; }
.legend span { display: inline-block; margin-right: 14px; } .legend i { display: inline-block; width: 11px; height: 11px; margin-right: 4px; vertical-align: -1px; }
select { margin-left: 6px; }
</style></head><body>
<div id="tip"></div>
<h1>tilebsp profile</h1><div class="facts" id="facts"></div>
<h2>Memory per tile</h2>
<div class="note">Every tile of the target, one cell each, by IPU. Colour: the bytes of the chosen kind as a share of the
tile's memory (red: over it). Hover a tile for its largest occupants; click to keep them below.</div>
<div>Show <select id="memkind"><option value="0">total (always-live + not-always-live peak)</option>
<option value="1">always-live</option><option value="2">not-always-live peak</option></select></div>
<svg id="heatmap"></svg><div class="panel" id="tilepanel">Click a tile.</div>
<h2>Liveness</h2>
<div class="note">Bytes live at each step of the program, summed over tiles: always-live at the bottom, not-always-live
(variables between their first write and last use, operator buffers) above. Click a step for what is live there.</div>
<div>Program <select id="liveprog"></select></div>
<svg id="liveness"></svg><div class="panel" id="livepanel"></div>
<h2>Timeline</h2>
<div class="note">The program's steps in order, one run of each: estimated IPU cycles split into compute, exchange and
sync (a lane per IPU and per pipeline stage, per replica), and below the measured host time per execution.
Hover for the step.</div>
<div>Program <select id="tlprog"></select></div>
<div class="legend"><span><i style="background:#3b75af"></i>compute</span><span><i style="background:#ef8636"></i>exchange</span>
<span><i style="background:#999"></i>sync, streams, collectives</span><span><i style="background:#6aa84f"></i>host time</span></div>
<svg id="timeline"></svg>
<h2>Cycle balance across tiles</h2>
<div class="note">Estimated compute cycles per tile over the compute sets run (the slowest tile sets each compute
phase's time). Bars: the largest tile per group of tiles; lines: the mean and the maximum.</div>
<svg id="balance"></svg><div class="panel" id="balancepanel"></div>
<h2>Operators</h2>
<div class="note">Operators ranked by the estimated cycles of their compute sets (left) and by measured host time
(right), named by the operator that built each compute set.</div>
<div style="display:flex;gap:16px;flex-wrap:wrap"><svg id="operators"></svg><svg id="operators-host"></svg></div>
<table id="optable"></table>
<h2>Plans</h2><div class="note">The plan each matmul and convolution chose: available memory proportion, parallel
splits, serial steps, temporary memory and estimated cycles.</div>
<div id="plans"></div>
<div id="status"></div>
<script type="application/json" id="data">)TBHTML";

inline constexpr char const report_tail[] = R"TBHTML(</script>
<script>
(function () {
'use strict';
var t0 = performance.now();
var D = JSON.parse(document.getElementById('data').textContent);
var NS = 'http://www.w3.org/2000/svg';
var T = D.target, names = D.detail ? D.detail.names : [];
var tip = document.getElementById('tip');
function el(tag, attrs, parent) {
  var e = document.createElementNS(NS, tag);
  for (var k in attrs) e.setAttribute(k, attrs[k]);
  if (parent) parent.appendChild(e);
  return e;
}
function text(parent, x, y, s, anchor) {
  var e = el('text', {x: x, y: y}, parent);
  if (anchor) e.setAttribute('text-anchor', anchor);
  e.textContent = s;
  return e;
}
function clear(svg) { while (svg.firstChild) svg.removeChild(svg.firstChild); }
function bytes(b) {
  if (b >= 1073741824) return (b / 1073741824).toFixed(2) + ' GiB';
  if (b >= 1048576) return (b / 1048576).toFixed(2) + ' MiB';
  if (b >= 1024) return (b / 1024).toFixed(1) + ' KiB';
  return b + ' B';
}
function num(n) { return Math.round(n).toLocaleString('en-US'); }
function secs(s) {  // a duration in seconds, in a readable unit
  if (s >= 1) return s.toFixed(2) + ' s';
  if (s >= 1e-3) return (s * 1e3).toFixed(2) + ' ms';
  return (s * 1e6).toFixed(1) + ' \u00b5s';
}
function esc(s) { return String(s).replace(/[&<>"]/g, function (c) { return {'&': '&amp;', '<': '&lt;', '>': '&gt;', '"': '&quot;'}[c]; }); }
function showTip(ev, html) {
  tip.innerHTML = html; tip.style.display = 'block';
  var x = ev.clientX + 14, y = ev.clientY + 14;
  if (x + 480 > window.innerWidth) x = Math.max(0, ev.clientX - 490);
  tip.style.left = x + 'px'; tip.style.top = y + 'px';
}
function hideTip() { tip.style.display = 'none'; }
// A perceptual scale from dark blue through green to yellow; red over 1.
function colour(f) {
  if (f > 1) return '#d7191c';
  var stops = [[68, 1, 84], [59, 82, 139], [33, 145, 140], [94, 201, 98], [253, 231, 37]];
  var x = Math.max(0, f) * (stops.length - 1), i = Math.min(stops.length - 2, Math.floor(x)), u = x - i;
  var c = stops[i].map(function (v, k) { return Math.round(v + (stops[i + 1][k] - v) * u); });
  return 'rgb(' + c.join(',') + ')';
}
var W = 1100;

// Facts.
(function () {
  var m = D.memory, max = 0, sum = 0, used = 0;
  m.forEach(function (x) { var t = x[0] + x[1]; max = Math.max(max, t); sum += t; if (t > 0) used++; });
  var f = [['target', T.name + ': ' + T.ipus + ' IPU x ' + T.tiles_per_ipu + ' tiles x ' + bytes(T.bytes_per_tile)],
           ['replicas', D.replicas + (D.replicas > 1 ? ' (this process ' + D.first_replica + '..' + (D.first_replica + D.local_replicas - 1) + ')' : '')],
           ['estimated IPU time', num(D.estimated_cycles) + ' cycles = ' + (D.estimated_cycles / T.clock_hz * 1e3).toFixed(3) + ' ms'],
           ['measured host time', D.host_timing ? (D.host_ns / 1e6).toFixed(3) + ' ms on ' + D.host_threads + ' thread(s)' : 'off (EngineOptions::profiling)'],
           ['operators\' kernels', D.kernels.length ? D.kernels.join(', ') : 'not named'],
           ['largest tile', bytes(max) + ' of ' + bytes(T.bytes_per_tile) + ' (' + (100 * max / T.bytes_per_tile).toFixed(1) + '%)'],
           ['tiles used', used + ' of ' + m.length],
           ['memory balance max/mean', (sum > 0 ? max / (sum / m.length) : 0).toFixed(2)]];
  var h = '';
  f.forEach(function (p) { h += '<div>' + esc(p[0]) + '<b>' + esc(p[1]) + '</b></div>'; });
  document.getElementById('facts').innerHTML = h;
})();

// Memory heatmap.
var heat = document.getElementById('heatmap');
function occupantsHtml(t) {
  var m = D.memory[t], h = '<b>tile ' + t + '</b> (IPU ' + Math.floor(t / T.tiles_per_ipu) + ', tile ' + (t % T.tiles_per_ipu) +
      '): ' + bytes(m[0] + m[1]) + ' = always-live ' + bytes(m[0]) + ' + not-always-live peak ' + bytes(m[1]) +
      ' (operator temporaries ' + bytes(m[2]) + ')';
  var occ = D.detail ? D.detail.tiles[t] : [];
  if (occ && occ.length) {
    h += '<table><tr><th>largest occupants</th><th>bytes</th><th>live</th></tr>';
    occ.forEach(function (o) { h += '<tr><td>' + esc(names[o[0]]) + '</td><td>' + num(o[1]) + '</td><td class="l">' + (o[2] ? 'always' : 'part of the time') + '</td></tr>'; });
    h += '</table>';
  }
  return h;
}
function drawHeatmap() {
  clear(heat);
  var kind = +document.getElementById('memkind').value;
  var cols = 64, cell = 14, rowsPer = Math.ceil(T.tiles_per_ipu / cols), top = 16;
  var h = top + T.ipus * (rowsPer * cell + 22);
  heat.setAttribute('width', cols * cell + 60); heat.setAttribute('height', h);
  for (var ipu = 0; ipu < T.ipus; ++ipu) {
    var y0 = top + ipu * (rowsPer * cell + 22);
    text(heat, 0, y0 - 4, 'IPU ' + ipu);
    for (var k = 0; k < T.tiles_per_ipu; ++k) {
      var t = ipu * T.tiles_per_ipu + k, m = D.memory[t] || [0, 0, 0];
      var v = kind === 0 ? m[0] + m[1] : kind === 1 ? m[0] : m[1];
      el('rect', {x: (k % cols) * cell, y: y0 + Math.floor(k / cols) * cell, width: cell - 1, height: cell - 1,
                  fill: v > 0 ? colour(v / T.bytes_per_tile) : '#eee', 'data-t': t}, heat);
    }
  }
  var lx = cols * cell + 8;
  for (var i = 0; i <= 10; ++i) el('rect', {x: lx, y: top + (10 - i) * 12, width: 14, height: 12, fill: colour(i / 10)}, heat);
  text(heat, lx, top + 11 * 12 + 10, '0%'); text(heat, lx, top - 4, '100%');
}
heat.addEventListener('mousemove', function (ev) {
  var t = ev.target.getAttribute('data-t');
  if (t === null) return hideTip();
  showTip(ev, occupantsHtml(+t));
});
heat.addEventListener('mouseleave', hideTip);
heat.addEventListener('click', function (ev) {
  var t = ev.target.getAttribute('data-t');
  if (t !== null) document.getElementById('tilepanel').innerHTML = occupantsHtml(+t);
});
document.getElementById('memkind').addEventListener('change', drawHeatmap);
drawHeatmap();
(function () {  // the fullest tile, shown to begin with
  var best = 0;
  D.memory.forEach(function (m, t) { if (m[0] + m[1] > D.memory[best][0] + D.memory[best][1]) best = t; });
  if (D.memory.length) document.getElementById('tilepanel').innerHTML = 'Fullest tile: ' + occupantsHtml(best);
})();

function fillPrograms(id, draw) {
  var s = document.getElementById(id);
  D.programs.forEach(function (p, i) {
    var o = document.createElement('option'); o.value = i; o.textContent = i + ' (' + p.length + ' steps)'; s.appendChild(o);
  });
  // Start on the program that ran longest.
  var best = 0, most = -1;
  D.programs.forEach(function (p, i) {
    var c = 0; p.forEach(function (st) { c += st.est_cycles * st.executions; });
    if (c > most) { most = c; best = i; }
  });
  s.value = best;
  s.addEventListener('change', draw);
}

// Liveness.
var live = document.getElementById('liveness');
function liveAt(pi, step) {
  var L = D.detail.liveness[pi], always = D.detail.always_live_bytes;
  var vs = L.ranges.filter(function (r) { return r[2] <= step && step <= r[3]; }).sort(function (a, b) { return b[1] - a[1]; });
  var st = D.programs[pi][step] || {label: ''};
  var h = '<b>step ' + step + '</b> ' + esc(st.label) + ': not-always-live ' + bytes(L.bytes[step]) + ', always-live ' + bytes(always);
  h += '<table><tr><th>live here (' + vs.length + ' variables)</th><th>bytes, all tiles</th><th>first step</th><th>last step</th></tr>';
  vs.slice(0, 40).forEach(function (r) { h += '<tr><td>' + esc(names[r[0]]) + '</td><td>' + num(r[1]) + '</td><td>' + r[2] + '</td><td>' + r[3] + '</td></tr>'; });
  if (vs.length > 40) h += '<tr><td>... ' + (vs.length - 40) + ' more</td><td></td><td></td><td></td></tr>';
  return h + '</table>';
}
function drawLiveness() {
  clear(live);
  var panel = document.getElementById('livepanel');
  if (!D.detail) { panel.textContent = 'No detail in this profile.'; return; }
  var pi = +document.getElementById('liveprog').value, L = D.detail.liveness[pi];
  var n = L.bytes.length, always = D.detail.always_live_bytes, H = 240, left = 70, w = W - left - 10;
  live.setAttribute('width', W); live.setAttribute('height', H + 40);
  var max = always; L.bytes.forEach(function (b) { max = Math.max(max, always + b); });
  if (max === 0) max = 1;
  var y = function (b) { return 10 + H - H * b / max; }, x = function (i) { return left + (n > 1 ? w * i / (n - 1) : 0); };
  el('rect', {x: left, y: y(always), width: w, height: H + 10 - y(always), fill: '#9ecae1'}, live);
  var d = 'M' + x(0) + ',' + y(always);
  for (var i = 0; i < n; ++i) d += 'L' + x(i).toFixed(1) + ',' + y(always + L.bytes[i]).toFixed(1);
  d += 'L' + x(n - 1) + ',' + y(always) + 'Z';
  el('path', {d: d, fill: '#fdae6b', stroke: '#e6550d', 'stroke-width': 1}, live);
  for (var k = 0; k <= 4; ++k) {
    el('line', {x1: left - 4, x2: left + w, y1: y(max * k / 4), y2: y(max * k / 4), stroke: '#0002'}, live);
    text(live, left - 6, y(max * k / 4) + 4, bytes(max * k / 4), 'end');
  }
  text(live, left + w / 2, H + 34, 'program ' + pi + ' step', 'middle');
  el('circle', {cx: x(L.peak_step), cy: y(always + L.bytes[L.peak_step] || 0), r: 4, fill: '#d7191c'}, live);
  text(live, x(L.peak_step) + 6, y(always + (L.bytes[L.peak_step] || 0)) + 4, 'peak: step ' + L.peak_step + ', ' + bytes(always + (L.bytes[L.peak_step] || 0)));
  var hit = el('rect', {x: left, y: 10, width: w, height: H, fill: 'transparent'}, live);
  var stepAt = function (ev) {
    var r = live.getBoundingClientRect();
    return Math.max(0, Math.min(n - 1, Math.round((ev.clientX - r.left - left) / w * (n - 1))));
  };
  hit.addEventListener('mousemove', function (ev) {
    var s = stepAt(ev), st = D.programs[pi][s] || {label: ''};
    showTip(ev, 'step ' + s + ': ' + esc(st.label) + '<br>not-always-live ' + bytes(L.bytes[s]));
  });
  hit.addEventListener('mouseleave', hideTip);
  hit.addEventListener('click', function (ev) { panel.innerHTML = liveAt(pi, stepAt(ev)); });
  panel.innerHTML = 'Peak: ' + liveAt(pi, L.peak_step) + (L.peak_buffers ? 'and ' + bytes(L.peak_buffers) + ' of operator buffers (staging, fetched operands, exchange staging)' : '');
}
fillPrograms('liveprog', drawLiveness);
drawLiveness();

// Timeline.
var tl = document.getElementById('timeline');
function drawTimeline() {
  clear(tl);
  var pi = +document.getElementById('tlprog').value, steps = D.programs[pi];
  var ran = steps.some(function (s) { return s.executions > 0; });
  var shown = [];
  steps.forEach(function (s, i) {
    if (s.kind === 'pipeline_step' || s.kind === 'control' || (ran && s.executions === 0)) return;
    if (s.est_cycles === 0 && s.host_ns === 0) return;
    shown.push(i);
  });
  // Lanes: per replica, each IPU (its steps outside pipeline stages), then each pipeline stage of the program.
  var stages = D.stages.filter(function (x) { return x.program === pi; });
  var reps = Math.max(1, Math.min(D.local_replicas, Math.floor(16 / (T.ipus + stages.length)))), lanes = [];
  for (var r = 0; r < reps; ++r) {
    var rn = D.replicas > 1 ? 'replica ' + (D.first_replica + r) + ' ' : '';
    for (var u = 0; u < T.ipus; ++u) lanes.push({ipu: u, stage: -1, name: rn + 'IPU ' + u});
    stages.forEach(function (x) { lanes.push({ipu: x.ipu, stage: x.stage, name: rn + 'stage ' + x.stage + ' (IPU ' + x.ipu + ')'}); });
  }
  var left = 170, w = W - left - 10, laneH = 22, top = 18;
  var est = [0], host = [0];
  shown.forEach(function (i) {
    var s = steps[i];
    est.push(est[est.length - 1] + s.est_cycles);
    host.push(host[host.length - 1] + (s.executions ? s.host_ns / s.executions : 0));
  });
  var E = est[est.length - 1] || 1, Hh = host[host.length - 1] || 1;
  var hostY = top + lanes.length * laneH + 24;
  tl.setAttribute('width', W); tl.setAttribute('height', hostY + laneH + 30);
  text(tl, left, 12, 'estimated: ' + num(E) + ' cycles (' + (E / T.clock_hz * 1e3).toFixed(3) + ' ms) for one run of each step shown');
  // Per lane, the cycles of each kind per pixel column: drawing is bounded by the width, not by the steps.
  var C = Math.ceil(w);
  lanes.forEach(function (lane, li) {
    var y = top + li * laneH;
    text(tl, left - 6, y + 15, lane.name, 'end');
    var cols = [new Float64Array(C), new Float64Array(C), new Float64Array(C)];
    shown.forEach(function (i, k) {
      var s = steps[i];
      if (s.stage !== lane.stage || s.ipus.indexOf(lane.ipu) < 0) return;
      var parts = [s.compute_cycles, s.exchange_cycles, Math.max(0, s.est_cycles - s.compute_cycles - s.exchange_cycles)];
      var at = est[k];
      parts.forEach(function (c, kind) {
        var a = at / E * C, b = (at + c) / E * C;
        for (var px = Math.floor(a); px < Math.min(C, Math.ceil(b)); ++px)
          cols[kind][px] += Math.min(b, px + 1) - Math.max(a, px);
        at += c;
      });
    });
    var fills = ['#3b75af', '#ef8636', '#999'];
    for (var px = 0; px < C; ++px) {
      var acc = 0;
      for (var kind = 0; kind < 3; ++kind) {
        var f = Math.min(1, cols[kind][px]);
        if (f <= 0) continue;
        el('rect', {x: left + px, y: y + 2 + acc * (laneH - 4), width: 1, height: f * (laneH - 4), fill: fills[kind]}, tl);
        acc += f;
        if (acc >= 1) break;
      }
    }
  });
  text(tl, left - 6, hostY + 15, 'host', 'end');
  text(tl, left, hostY - 6, D.host_timing ? 'measured host: ' + (Hh / 1e6).toFixed(3) + ' ms per run of each step shown' : 'host time: off (EngineOptions::profiling)');
  if (D.host_timing) {
    var hc = new Float64Array(C);
    shown.forEach(function (i, k) {
      var a = host[k] / Hh * C, b = host[k + 1] / Hh * C;
      for (var px = Math.floor(a); px < Math.min(C, Math.ceil(b)); ++px) hc[px] += Math.min(b, px + 1) - Math.max(a, px);
    });
    for (var px = 0; px < C; ++px)
      if (hc[px] > 0) el('rect', {x: left + px, y: hostY + 2, width: 1, height: Math.min(1, hc[px]) * (laneH - 4), fill: '#6aa84f'}, tl);
  }
  var hit = el('rect', {x: left, y: top, width: w, height: hostY + laneH - top, fill: 'transparent'}, tl);
  hit.addEventListener('mousemove', function (ev) {
    var r = tl.getBoundingClientRect(), fx = (ev.clientX - r.left - left) / w, onHost = ev.clientY - r.top > hostY;
    var arr = onHost ? host : est, tot = onHost ? Hh : E, v = fx * tot, lo = 0, hi = shown.length - 1;
    while (lo < hi) { var mid = (lo + hi + 1) >> 1; if (arr[mid] <= v) lo = mid; else hi = mid - 1; }
    var s = steps[shown[lo]];
    if (!s) return hideTip();
    showTip(ev, '<b>step ' + shown[lo] + '</b> ' + esc(s.label) + '<br>' + s.kind + (s.stage >= 0 ? ', pipeline stage ' + s.stage : '') +
      ', IPUs ' + s.ipus.join(' ') + '<br>estimated ' + num(s.est_cycles) + ' cycles (compute ' + num(s.compute_cycles) +
      ', exchange ' + num(s.exchange_cycles) + ')' + '<br>runs ' + num(s.executions) + (D.host_timing && s.executions ? ', host ' + num(s.host_ns / s.executions) + ' ns per run' : ''));
  });
  hit.addEventListener('mouseleave', hideTip);
}
fillPrograms('tlprog', drawTimeline);
drawTimeline();

// Cycle balance.
var bal = document.getElementById('balance');
(function () {
  var c = D.detail ? D.detail.tile_cycles : [], n = c.length, left = 70, H = 160, w = W - left - 10;
  bal.setAttribute('width', W); bal.setAttribute('height', H + 40);
  var max = 0, sum = 0, used = 0;
  c.forEach(function (v) { max = Math.max(max, v); sum += v; if (v > 0) used++; });
  var mean = used ? sum / used : 0, y = function (v) { return 10 + H - H * v / (max || 1); };
  var groups = Math.min(n, Math.floor(w)), gw = w / Math.max(1, groups);
  for (var g = 0; g < groups; ++g) {
    var a = Math.floor(g * n / groups), b = Math.floor((g + 1) * n / groups), m = 0;
    for (var t = a; t < b; ++t) m = Math.max(m, c[t]);
    if (m > 0) el('rect', {x: left + g * gw, y: y(m), width: Math.max(1, gw - (gw > 3 ? 1 : 0)), height: 10 + H - y(m), fill: '#3b75af', 'data-a': a, 'data-b': b}, bal);
  }
  el('line', {x1: left, x2: left + w, y1: y(mean), y2: y(mean), stroke: '#e6550d', 'stroke-dasharray': '4 3'}, bal);
  el('line', {x1: left, x2: left + w, y1: y(max), y2: y(max), stroke: '#d7191c'}, bal);
  text(bal, left + w - 4, y(mean) - 3, 'mean of used tiles ' + num(mean), 'end');
  text(bal, left - 6, y(max) + 4, num(max), 'end'); text(bal, left - 6, y(0) + 4, '0', 'end');
  for (var ipu = 0; ipu < T.ipus; ++ipu) text(bal, left + ipu * T.tiles_per_ipu / Math.max(1, n) * w, H + 26, 'IPU ' + ipu);
  bal.addEventListener('mousemove', function (ev) {
    var a = ev.target.getAttribute('data-a');
    if (a === null) return hideTip();
    var b = +ev.target.getAttribute('data-b'), h = 'tiles ' + a + (b - 1 > +a ? '..' + (b - 1) : '') + ':';
    for (var t = +a; t < b && t < +a + 8; ++t) h += '<br>tile ' + t + ': ' + num(c[t]) + ' cycles';
    showTip(ev, h);
  });
  bal.addEventListener('mouseleave', hideTip);
  document.getElementById('balancepanel').textContent = used ? 'Used tiles ' + used + ' of ' + n + '; max ' + num(max) +
    ' cycles, mean ' + num(mean) + ': balance mean/max ' + (mean / max).toFixed(2) + ' (1 = perfectly even).' : 'No compute set ran.';
})();

// Operators.
function opRows() {
  var rows = D.operators.map(function (o, i) { return {i: i, kind: o.kind, name: o.name, est: o.est_cycles, host: o.host_ns, cs: o.compute_sets, plans: o.plans.length}; });
  var other = {est: 0, host: 0, cs: 0}, streams = {est: 0, host: 0, cs: 0};
  D.programs.forEach(function (p) {
    p.forEach(function (s) {
      if (s.op >= 0 || s.kind === 'pipeline_step') return;
      var into = s.kind === 'superstep' ? other : streams;
      into.est += s.est_cycles * s.executions; into.host += s.host_ns;
    });
  });
  rows.push({i: -1, kind: 'other', name: 'compute sets and exchanges outside operators', est: other.est, host: other.host, cs: 0, plans: 0});
  rows.push({i: -2, kind: 'other', name: 'streams, host callbacks, syncs, collectives', est: streams.est, host: streams.host, cs: 0, plans: 0});
  return rows;
}
function drawBars(svg, rows, key, unit) {
  var top = rows.slice().sort(function (a, b) { return b[key] - a[key]; }).filter(function (r) { return r[key] > 0; }).slice(0, 25);
  var bw = 530, left = 200, barH = 16;
  svg.setAttribute('width', bw); svg.setAttribute('height', 24 + top.length * barH + 6);
  text(svg, 4, 14, key === 'est' ? 'estimated cycles (all runs)' : (D.host_timing ? 'measured host time (all runs)' : 'host time: off'));
  var max = top.length ? top[0][key] : 1;
  top.forEach(function (r, k) {
    var y = 22 + k * barH, label = r.kind + ' ' + r.name;
    text(svg, left - 4, y + 11, label.length > 32 ? label.slice(0, 31) + '…' : label, 'end');
    el('rect', {x: left, y: y + 1, width: Math.max(1, (bw - left - 70) * r[key] / max), height: barH - 3, fill: key === 'est' ? '#3b75af' : '#6aa84f'}, svg);
    text(svg, left + (bw - left - 70) * r[key] / max + 4, y + 11, unit(r[key]));
  });
}
(function () {
  var rows = opRows();
  drawBars(document.getElementById('operators'), rows, 'est', function (v) { return secs(v / T.clock_hz); });
  drawBars(document.getElementById('operators-host'), rows, 'host', function (v) { return secs(v / 1e9); });
  var tab = document.getElementById('optable'), sortKey = 'est';
  function fill() {
    rows.sort(function (a, b) { return sortKey === 'name' ? (a.kind + a.name).localeCompare(b.kind + b.name) : b[sortKey] - a[sortKey]; });
    var E = 0, H = 0; rows.forEach(function (r) { E += r.est; H += r.host; });
    var h = '<tr><th data-k="name">operator</th><th data-k="cs">compute sets</th><th data-k="est">estimated cycles</th><th data-k="est">share</th><th data-k="host">host ms</th><th data-k="host">share</th><th data-k="plans">plans</th></tr>';
    rows.forEach(function (r) {
      h += '<tr><td>' + esc(r.kind + ' ' + r.name) + '</td><td>' + r.cs + '</td><td>' + num(r.est) + '</td><td>' + (E ? (100 * r.est / E).toFixed(1) : 0) +
           '%</td><td>' + (r.host / 1e6).toFixed(3) + '</td><td>' + (H ? (100 * r.host / H).toFixed(1) : 0) + '%</td><td>' + r.plans + '</td></tr>';
    });
    tab.innerHTML = h;
  }
  tab.addEventListener('click', function (ev) { var k = ev.target.getAttribute('data-k'); if (k) { sortKey = k; fill(); } });
  fill();
  var plans = document.getElementById('plans'), h = '', count = 0;
  rows.filter(function (r) { return r.plans > 0; }).forEach(function (r) {
    var o = D.operators[r.i];
    h += '<details' + (count++ < 3 ? ' open' : '') + '><summary>' + esc(o.kind + " '" + o.name + "'") + ': ' + num(o.est_cycles) +
         ' estimated cycles</summary>' + o.plans.map(function (p) { return '<pre>' + esc(p) + '</pre>'; }).join('') + '</details>';
  });
  plans.innerHTML = h || 'No matmul or convolution in this program.';
})();

// For tests and tools: what was drawn, and how long it took.
var st = document.getElementById('status'), charts = [];
['heatmap', 'liveness', 'timeline', 'balance', 'operators'].forEach(function (id) {
  charts.push(id + ':' + document.getElementById(id).querySelectorAll('rect,path,circle,line').length);
});
st.setAttribute('data-charts', charts.join(','));
st.setAttribute('data-ms', (performance.now() - t0).toFixed(0));
st.setAttribute('data-ok', '1');
})();
</script></body></html>
)TBHTML";

}  // namespace tilebsp::report::detail
